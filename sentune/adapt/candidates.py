"""What `sentune adapt` tries, in order: the model as it is (always), its other untuned poolings, whitening and the flow
fitted on the corpus, the label-free training methods (raced against each other, sentune.adapt.race), SED over seeds of
the best trained one, the best tuned one's weights interpolated with the unchanged model's (WiSE-FT, sentune.adapt.wise),
and, only when asked (--reference), sentence-transformers' own SimCSE recipe, reported beside them and never chosen.

Each kind is a class: `describe` (the line printed when it starts), `run` (its dev and test cosines and what the record
keeps), `model` (the model it stands for, to save when it is chosen). Running them is sentune.adapt.run's job."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adapt.names import BM25, GENQ, METHODS, POSTPROCESSED, REFERENCE, SED, TRAINED, UNCHANGED, UNTUNED_POOLINGS, WISE
from sentune.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from sentune.adapt.context import Context


@dataclass
class Candidate:
    name: str  # its folder under OUT/candidates and its row in the results
    kind: ClassVar[str] = ""
    eligible: ClassVar[bool] = True  # the reference is reported, never chosen

    def folder(self, ctx: Context) -> Path:
        return ctx.out / "candidates" / self.name

    def describe(self, ctx: Context) -> str:
        raise NotImplementedError

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        """Its cosines of the dev (and test) pairs, and what its record keeps beyond them ({} scores: skipped)."""
        raise NotImplementedError

    def model(self, ctx: Context):
        """The model it stands for (its saved folder, or built from the base model)."""
        from sentune.core.models import load_model

        return load_model(str(self.folder(ctx) / "model"), device=ctx.device)


@dataclass
class Pooling(Candidate):
    pooling: str = ""
    kind: ClassVar[str] = "pooling"

    def describe(self, ctx: Context) -> str:
        return f"scoring the untuned model with {self.pooling} pooling"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        return ctx.untuned(self.pooling), {"setting": self.pooling}

    def model(self, ctx: Context):
        from sentune.modules.build import with_pooling

        return with_pooling(ctx.base, self.pooling)  # 'model' is the base model itself


@dataclass
class Unchanged(Pooling):
    """The model as it is: its own pipeline, untuned."""

    pooling: str = "model"
    kind: ClassVar[str] = "unchanged"

    def describe(self, ctx: Context) -> str:
        return "scoring the untuned model"


@dataclass
class PostProcessed(Candidate):
    """Fitted on the corpus's embeddings (the model's own pipeline); saved with the post-processor as its last modules."""

    postprocessor: str = ""
    kind: ClassVar[str] = "postprocess"

    def describe(self, ctx: Context) -> str:
        return f"fitting {self.postprocessor} on the corpus"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        from sentence_transformers import SentenceTransformer

        from sentune.modules.build import save_atomic
        from sentune.postprocess import get_postprocessor

        settings = {"show_progress": ctx.config.show_progress} if self.postprocessor == "flow" else {}
        fitted = get_postprocessor(self.postprocessor)(**settings).fit(ctx.corpus_vectors())
        save_atomic(SentenceTransformer(modules=list(ctx.base) + fitted.to_modules(), device=ctx.device), self.folder(ctx) / "model")
        return ctx.scorer.of_vectors(fitted.transform(ctx.untuned_vectors())), {"setting": self.postprocessor}


@dataclass
class WithRun(Candidate):
    """A candidate that is a training run (OUT/candidates/NAME/run, sentune.train.runs); trained by sentune.adapt.run."""

    def run_folder(self, ctx: Context) -> Path:
        return self.folder(ctx) / "run"

    def model(self, ctx: Context):
        from sentune.core.models import load_model

        return load_model(str(self.run_folder(ctx) / "model"), device=ctx.device)


def tuned_model_path(record: dict, ctx: Context) -> Path | None:
    """The weights a trained record stands for: a finished run's model, or a raced-out run's best checkpoint so far
    (the race chose against it as the answer, yet as SED's seed 1 or wise's tuned end it may still help). None when
    they are gone (--prune, or a checkpoint the trainer rotated away)."""
    run = ctx.out / record["run"]
    if "stopped" not in record:
        path = run / "model"
    else:
        step = (record.get("best_checkpoint") or {}).get("step")
        path = run / "checkpoints" / f"checkpoint-{step}"
        if step is None or not (path / "modules.json").is_file():
            return None
    return path if path.is_dir() else None


def tuned_sources(ctx: Context, kinds: tuple[str, ...]) -> list[dict]:
    """Records of `kinds` with a selection score and weights to build on, finished or raced out."""
    return [r for r in ctx.records.values() if r["kind"] in kinds and "dev_score" in r and r.get("run") and tuned_model_path(r, ctx)]


@dataclass
class Trained(WithRun):
    """A bundled recipe trained on the corpus (sentune/recipes/adapt/NAME.yaml), raced against the others."""

    recipe_name: str = ""
    kind: ClassVar[str] = "trained"

    def describe(self, ctx: Context) -> str:
        return f"training ({ctx.budget_text()}; early stop on the selection pairs)"


@dataclass
class Ensemble(WithRun):
    """SED: seeds 2..N of the best trained candidate (seed 1 is its own run) distilled into one learner."""

    kind: ClassVar[str] = "sed"

    def describe(self, ctx: Context) -> str:
        return f"distilling {ctx.config.sed_members} seeds of the best trained candidate ({ctx.budget_text()})"


@dataclass
class Wise(Candidate):
    kind: ClassVar[str] = "wise"

    def describe(self, ctx: Context) -> str:
        return "interpolating the best tuned candidate's weights (finished or raced out) with the unchanged model's (WiSE-FT), α chosen on the selection pairs"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        import copy

        from sentune.adapt.wise import ALPHAS, NotInterpolable, best_alpha, interpolate
        from sentune.core.memory import release_freed_memory, release_unreferenced
        from sentune.modules.build import save_atomic

        tuned = tuned_sources(ctx, (Trained.kind, Ensemble.kind))
        if not tuned:
            return {}, {"skipped": "no tuned candidate with weights left to interpolate with (--prune removes them)"}
        source = max(tuned, key=lambda r: r["dev_score"])  # the selection score: finished or raced out
        from sentune.core.models import load_model

        model = load_model(str(tuned_model_path(source, ctx)), device=ctx.device)
        selection = ctx.selection_scorer()  # α is chosen on the selection pairs: only those are encoded for the search
        curve: dict[float, float] = {}
        mixed = copy.deepcopy(model)  # every α is written into this one copy (sentune.adapt.wise.interpolate)
        try:
            for alpha in ALPHAS:
                cosines = selection.of_model(interpolate(ctx.base, model, alpha, into=mixed), f"{WISE}: α = {alpha}")["select"]
                curve[alpha] = ctx.selection_score_of(cosines)
                release_freed_memory()  # the encoder's batches of this α
        except NotInterpolable as error:
            return {}, {"skipped": f"cannot interpolate with {source['name']}: {error}"}
        alpha = best_alpha(curve)
        print(f"    {WISE}: {source['name']} (selection {source['dev_score']:.2f}) × α = {alpha} (selection {curve[alpha]:.2f})", flush=True)
        chosen = interpolate(ctx.base, model, alpha, into=mixed)
        del model  # the tuned end: only the mixed copy is scored and saved from here
        release_unreferenced()
        save_atomic(chosen, self.folder(ctx) / "model")
        detail = {"source": source["name"], "alpha": alpha, "curve": [[a, s] for a, s in curve.items()] + [[1.0, source["dev_score"]]]}
        return ctx.scorer.of_model(chosen, f"{WISE}: scoring the pairs"), detail


@dataclass
class Reference(WithRun):
    """sentence-transformers' own SimCSE recipe with its own defaults (one epoch, the last checkpoint): the user's usual
    alternative, reported beside the candidates and never chosen."""

    recipe_name: str = f"adapt/{REFERENCE}"
    kind: ClassVar[str] = "baseline"
    eligible: ClassVar[bool] = False

    def describe(self, ctx: Context) -> str:
        return "training sentence-transformers' SimCSE recipe (reported, never chosen)"


@dataclass
class Lexical(Candidate):
    """BM25 on the documents (retrieval with --reference): the lexical baseline search is measured against, reported
    beside the candidates and never chosen (it is not an encoder)."""

    kind: ClassVar[str] = "baseline"
    eligible: ClassVar[bool] = False

    def describe(self, ctx: Context) -> str:
        return "ranking the documents by BM25 (reported, never chosen)"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        from sentune.tasks.bm25 import bm25_rank
        from sentune.tasks.user_queries import QueryScorer

        assert isinstance(ctx.scorer, QueryScorer)  # planned for retrieval runs only
        return ctx.scorer.of_ranker(bm25_rank), {"setting": "BM25 (bm25s, k1 = 1.5, b = 0.75)"}


@dataclass
class Plan:
    """The candidates of one run, in the order they run: the cheap ones, the race, then those built on its winners."""

    before_race: list[Candidate] = field(default_factory=list)
    raced: list[Trained] = field(default_factory=list)
    after_race: list[Candidate] = field(default_factory=list)

    @property
    def all(self) -> list[Candidate]:
        return [*self.before_race, *self.raced, *self.after_race]


def parse_methods(text: str | None) -> tuple[str, ...]:
    """`--methods simcse,ct,whitening` (default: every method), checked before any work."""
    if not text:
        return METHODS
    chosen = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise UserError(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}")
    if not any(m in TRAINED for m in chosen):  # both are built from a trained candidate: without one they could only be skipped
        for needs in (m for m in (SED, WISE) if m in chosen):
            raise UserError(f"--methods: {needs} is built from a trained candidate; add one of {', '.join(TRAINED)}")
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


def plan(methods: tuple[str, ...], own: str | None, reference: bool, generated_queries: bool = False, retrieval: bool = False) -> Plan:
    found = Plan(before_race=[Unchanged(UNCHANGED)])
    if "poolings" in methods:
        found.before_race += [Pooling(f"pooling-{p}", p) for p in UNTUNED_POOLINGS if p != own]
    found.before_race += [PostProcessed(p, p) for p in POSTPROCESSED if p in methods]
    found.raced = [Trained(m, f"adapt/{m}") for m in TRAINED if m in methods]
    if generated_queries:
        found.raced.append(Trained(GENQ, f"adapt/{GENQ}"))
    if SED in methods:
        found.after_race.append(Ensemble(SED))
    if WISE in methods:
        found.after_race.append(Wise(WISE))
    if reference:
        found.after_race.append(Reference(REFERENCE))
        if retrieval:
            found.after_race.append(Lexical(BM25))
    return found


def read_record(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None
