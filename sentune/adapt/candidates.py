"""What `sentune adapt` tries, in order: the model as it is (always), its other untuned poolings, whitening and the flow
fitted on the corpus, the label-free training methods, SED over seeds of the best trained one, the best tuned one's
weights interpolated with the unchanged model's (WiSE-FT, sentune.adapt.wise), and, reported beside them but never
chosen, sentence-transformers' own SimCSE recipe (the user's usual alternative)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentune.errors import UserError

UNCHANGED = "unchanged"
UNTUNED_POOLINGS = ("cls", "mean", "max", "first-last", "last2")
POSTPROCESSED = ("whitening", "flow")
TRAINED = ("simcse", "mirror", "ct", "sg-opt", "tsdae")  # each a bundled recipe sentune/recipes/adapt/NAME.yaml
SED = "sed"
WISE = "wise"
BASELINE = "st-simcse"
METHODS = ("poolings", *POSTPROCESSED, *TRAINED, SED, WISE)  # what --methods picks from

Kind = Literal["unchanged", "pooling", "postprocess", "trained", "sed", "wise", "baseline"]


@dataclass(frozen=True)
class Candidate:
    name: str  # its folder under OUT/candidates and its row in the results
    kind: Kind
    setting: str  # the pooling, the post-processor or the recipe

    @property
    def eligible(self) -> bool:
        """The baseline is reported, never chosen."""
        return self.kind != "baseline"


def parse_methods(text: str | None) -> tuple[str, ...]:
    """`--methods simcse,ct,whitening` (default: every method), checked before any work."""
    if not text:
        return METHODS
    chosen = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise UserError(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}")
    return chosen


def own_pooling(model) -> str | None:
    """The untuned pooling the model's own pipeline already computes (e.g. 'mean' for all-MiniLM-L6-v2: Transformer,
    mean Pooling, Normalize, and normalising changes no cosine), so it is not tried twice; None when it is another."""
    modules = list(model)[1:]
    names = [type(m).__name__ for m in modules]
    if not names or names[0] != "Pooling" or any(n != "Normalize" for n in names[1:]):
        return None
    mode = modules[0].pooling_mode
    return mode if mode in UNTUNED_POOLINGS else None


def plan(methods: tuple[str, ...], own: str | None, baseline: bool) -> list[Candidate]:
    candidates = [Candidate(UNCHANGED, "unchanged", "model")]
    if "poolings" in methods:
        candidates += [Candidate(f"pooling-{p}", "pooling", p) for p in UNTUNED_POOLINGS if p != own]
    candidates += [Candidate(p, "postprocess", p) for p in POSTPROCESSED if p in methods]
    candidates += [Candidate(m, "trained", f"adapt/{m}") for m in TRAINED if m in methods]
    if SED in methods:
        candidates.append(Candidate(SED, "sed", "adapt/sed"))
    if WISE in methods:
        candidates.append(Candidate(WISE, "wise", "interpolation"))
    if baseline:
        candidates.append(Candidate(BASELINE, "baseline", f"adapt/{BASELINE}"))
    return candidates
