"""Which candidates a run has, in the order they run: the registry of kinds (KINDS), `--methods`, and the plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from sentune.adaptation.candidates.base import Candidate, PlanSetup
from sentune.adaptation.candidates.multi_dense import MultiDense
from sentune.adaptation.candidates.postprocessed import PostProcessed
from sentune.adaptation.candidates.prf import Prf
from sentune.adaptation.candidates.query_side import QuerySide
from sentune.adaptation.candidates.query_side_hybrid import HybridQuerySide
from sentune.adaptation.candidates.retrieval_native import HybridDistill, PseudoQueryTrained
from sentune.adaptation.candidates.search import Hybrid, HybridSupervised, Lexical, Rrf, UnchangedMaxp
from sentune.adaptation.candidates.supervised import Supervised, SupervisedSearch
from sentune.adaptation.candidates.trained import Ensemble, Reference, Trained, Wise
from sentune.adaptation.candidates.untuned import Pooling, Unchanged
from sentune.adaptation.names import METHODS, RETRIEVAL_NATIVE, SED, SUPERVISED_STACKED, TRAINED, UNTUNED_POOLINGS, WISE, default_methods
from sentune.errors import UserError

# The registry: every kind a run may have, in run order within its phase. A new kind is a class and a line here.
# Search: the query side and its fusion before the two-sided fine-tune, which re-encodes the corpus for every fold: they
# need nothing of it and cost minutes, and where the plan expects the fine-tune short of what it takes, it would
# otherwise spend their time.
KINDS: tuple[type[Candidate], ...] = (
    Unchanged,
    Pooling,
    PostProcessed,
    Trained,
    Ensemble,
    QuerySide,
    HybridQuerySide,
    Supervised,
    SupervisedSearch,
    PseudoQueryTrained,
    HybridDistill,
    Wise,
    Hybrid,
    HybridSupervised,
    Prf,
    MultiDense,
    Reference,
    Lexical,
    Rrf,
    UnchangedMaxp,
)


@dataclass
class Plan:
    """The candidates of one run, in the order they run: the cheap ones, the race, then those built on its winners."""

    before_race: list[Candidate] = field(default_factory=list)
    raced: list[Trained] = field(default_factory=list)
    after_race: list[Candidate] = field(default_factory=list)
    left_out: list[Candidate] = field(default_factory=list)  # taken out for want of time: the time left may bring them back

    @property
    def all(self) -> list[Candidate]:
        return [*self.before_race, *self.raced, *self.after_race]

    def leave_out(self, candidate: Candidate) -> None:
        getattr(self, candidate.phase).remove(candidate)
        self.left_out.append(candidate)

    def bring_back(self, candidate: Candidate) -> None:
        self.left_out.remove(candidate)
        getattr(self, candidate.phase).append(candidate)


def parse_methods(text: str | None) -> tuple[str, ...] | None:
    """`--methods simcse,ct,whitening`, checked before any work; None when not given (the plan then takes the task's
    defaults: sentune.adaptation.names.default_methods)."""
    if not text:
        return None
    chosen = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise UserError(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}")
    if not any(m in TRAINED for m in chosen):  # each is built from a trained candidate: without one it could only be skipped
        for needs in (m for m in (SED, SUPERVISED_STACKED) if m in chosen):
            raise UserError(f"--methods: {needs} is built from a trained candidate; add one of {', '.join(TRAINED)}")
    if WISE in chosen and not any(m in (*TRAINED, *RETRIEVAL_NATIVE) for m in chosen):  # a search run's retrieval-native ones are tuned too
        raise UserError(f"--methods: {WISE} is built from a trained candidate; add one of {', '.join((*TRAINED, *RETRIEVAL_NATIVE))}")
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


def plan(methods: tuple[str, ...] | None, own: str | None, reference: bool, generated_queries: bool = False, search: bool = False, labels: bool = True) -> Plan:
    """The run's candidates; `methods` None: the task's defaults (a search run leaves out the sentence-pair trainings)."""
    setup = PlanSetup(default_methods(search) if methods is None else methods, own, reference, generated_queries, search, labels)
    found = Plan()
    for kind in KINDS:
        for candidate in kind.planned(setup):
            getattr(found, candidate.phase).append(candidate)
    return found
