"""What `sentune adapt` tries, in order: the model as it is (always), its other untuned poolings, whitening and the flow
fitted on the corpus, the label-free training methods (raced against each other, sentune.adapt.race), SED over seeds of
the best trained one, the best tuned one's weights interpolated with the unchanged model's (WiSE-FT, sentune.adapt.wise),
for search the hybrid of BM25 and a dense candidate (sentune.search.fusion), and the baselines reported beside them and
never chosen: BM25 and reciprocal rank fusion for search, and, only when asked (--reference), sentence-transformers'
own SimCSE recipe.

Each kind is one class in KINDS (the registry: its order is the run order within a phase): `planned` (which of it a
run has), `describe` (the line printed when it starts), `run` (its dev and test scores and what its record keeps) or,
for kinds that train, `produce` (the whole record), and `model` (the model it stands for, to save when chosen).
`record` is the one entry point: it reads a finished candidate back (a resumed run) or produces it."""

from __future__ import annotations

import inspect
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adapt.names import (
    BM25,
    BM25_UNSTEMMED,
    GENQ,
    HYBRID,
    METHODS,
    POSTPROCESSED,
    REFERENCE,
    RRF,
    SED,
    SUPERVISED,
    SUPERVISED_RECIPES,
    SUPERVISED_STACKED,
    TRAINED,
    UNCHANGED,
    UNTUNED_POOLINGS,
    WISE,
)
from sentune.adapt.records import finish_trained, load_record, read_back, trained_record, write_record
from sentune.errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from sentune.adapt.context import Context

PHASES = ("before_race", "raced", "after_race")


@dataclass(frozen=True)
class PlanSetup:
    """What decides which candidates a run has."""

    methods: tuple[str, ...]
    own: str | None  # the untuned pooling the model's own pipeline computes (not tried twice)
    reference: bool = False
    generated_queries: bool = False
    retrieval: bool = False
    labels: bool = True  # --no-labels: the label-free candidates only


@dataclass
class Candidate:
    name: str  # its folder under OUT/candidates and its row in the results
    kind: ClassVar[str] = ""
    phase: ClassVar[str] = "before_race"
    eligible: ClassVar[bool] = True  # baselines are reported, never chosen

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        raise NotImplementedError

    def folder(self, ctx: Context) -> Path:
        return ctx.out / "candidates" / self.name

    def describe(self, ctx: Context) -> str:
        raise NotImplementedError

    def depends_on(self, ctx: Context) -> dict:
        """What its record depends on beyond the run's claimed settings (sentune.adapt.inputs._claim), kept in the
        record: one read back with other values is produced again."""
        return {}

    def record(self, label: str, ctx: Context) -> dict:
        """Its record: read back when it finished before on the same inputs, else produced now."""
        found = read_back(self, label, ctx)
        wanted = self.depends_on(ctx)
        if found is not None and all(found.get(key) == value for key, value in wanted.items()):
            return found
        if found is not None:
            print(f"{label} {self.name}: its inputs changed ({', '.join(wanted)}): produced again", flush=True)
            shutil.rmtree(self.folder(ctx))
        self.folder(ctx).mkdir(parents=True, exist_ok=True)
        return self.produce(label, ctx)

    def produce(self, label: str, ctx: Context) -> dict:
        print(f"{label} {self.name}: {self.describe(ctx)}", flush=True)
        started = time.perf_counter()
        scores, detail = self.run(ctx)
        return write_record(self, scores, detail, time.perf_counter() - started, label, ctx)

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        """Its scores of the dev (and test) units, and what its record keeps beyond them ({} scores: skipped)."""
        raise NotImplementedError

    def model(self, ctx: Context):
        """The model it stands for (its saved folder, or built from the base model)."""
        from sentune.core.models import load_model

        return load_model(str(self.folder(ctx) / "model"), device=ctx.device)

    def system(self, ctx: Context) -> dict | None:
        """Search: how its ranking is made beyond the model's cosine (sentune.search.index's settings); None: dense."""
        return None


@dataclass
class Unchanged(Candidate):
    """The model as it is: its own pipeline, untuned."""

    pooling: str = "model"
    kind: ClassVar[str] = "unchanged"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(UNCHANGED)]

    def describe(self, ctx: Context) -> str:
        return "scoring the untuned model"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        return ctx.untuned(self.pooling), {"setting": self.pooling}

    def model(self, ctx: Context):
        from sentune.modules.build import with_pooling

        return with_pooling(ctx.base, self.pooling)  # 'model' is the base model itself


@dataclass
class Pooling(Unchanged):
    """Another untuned pooling of the model's layers."""

    kind: ClassVar[str] = "pooling"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(f"pooling-{p}", p) for p in UNTUNED_POOLINGS if p != setup.own] if "poolings" in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return f"scoring the untuned model with {self.pooling} pooling"


@dataclass
class PostProcessed(Candidate):
    """Fitted on the corpus's embeddings (the model's own pipeline); saved with the post-processor as its last modules."""

    postprocessor: str = ""
    kind: ClassVar[str] = "postprocess"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(p, p) for p in POSTPROCESSED if p in setup.methods]

    def describe(self, ctx: Context) -> str:
        return f"fitting {self.postprocessor} on the corpus"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        from sentence_transformers import SentenceTransformer

        from sentune.modules.build import save_atomic
        from sentune.postprocess import get_postprocessor

        kind = get_postprocessor(self.postprocessor)
        offered = {"show_progress": ctx.config.show_progress, "device": ctx.device}  # each takes those its __init__ names
        settings = {k: v for k, v in offered.items() if k in inspect.signature(kind).parameters}
        fitted = kind(**settings).fit(ctx.corpus_vectors())
        save_atomic(SentenceTransformer(modules=list(ctx.base) + fitted.to_modules(), device=ctx.device), self.folder(ctx) / "model")
        return ctx.scorer.of_vectors(fitted.transform(ctx.untuned_vectors())), {"setting": self.postprocessor}


@dataclass
class WithRun(Candidate):
    """A candidate that is a training run (OUT/candidates/NAME/run, sentune.train.runs)."""

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
    """A bundled recipe trained on the corpus (sentune/recipes/adapt/NAME.yaml), raced against the others
    (sentune.adapt.run trains the raced ones together; their records are written by the race)."""

    recipe_name: str = ""
    kind: ClassVar[str] = "trained"
    phase: ClassVar[str] = "raced"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        found: list[Candidate] = [cls(m, f"adapt/{m}") for m in TRAINED if m in setup.methods]
        if setup.generated_queries:  # GenQ trains on the user's generated queries (--queries-from)
            found.append(cls(GENQ, f"adapt/{GENQ}"))
        return found

    def describe(self, ctx: Context) -> str:
        return f"training ({ctx.budget_text()}; early stop on the selection pairs)"

    def finish(self, label: str, ctx: Context) -> dict[str, np.ndarray]:
        return finish_trained(self, label, ctx)


@dataclass
class Ensemble(WithRun):
    """SED: seeds 2..N of the best trained candidate (seed 1 is its own run) distilled into one learner."""

    kind: ClassVar[str] = "sed"
    phase: ClassVar[str] = "after_race"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(SED)] if SED in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return f"distilling {ctx.config.sed_members} seeds of the best trained candidate ({ctx.budget_text()})"

    def produce(self, label: str, ctx: Context) -> dict:
        """Seeds 2..N of the best trained candidate on the selection pairs (finished, or raced out: its best checkpoint
        is seed 1), each trained for as many steps as that candidate needed to reach its best checkpoint; then the
        learner, raced alone against the unchanged model and that candidate."""
        import numpy as np

        from sentune.adapt.race import Entry, race
        from sentune.train.runs import train_each

        trained = tuned_sources(ctx, (Trained.kind,))
        if not trained:
            return write_record(
                self, {}, {"skipped": "no trained candidate with weights left to take an ensemble from (--prune removes them)"}, 0.0, label, ctx
            )
        source = max(trained, key=lambda r: r["dev_score"])  # finished or raced out: its best checkpoint is seed 1
        steps = max(source["best_checkpoint"]["step"] or 1, source["recipe"]["training"]["eval_steps"])
        print(f"{label} {self.name}: {self.describe(ctx)}: seeds 1..{ctx.config.sed_members} of {source['name']} ({steps} steps each)", flush=True)
        started = time.perf_counter()
        jobs = [
            (ctx.recipe(f"adapt/{source['name']}", steps=steps, seed=seed), self.folder(ctx) / f"member-{seed}")
            for seed in range(2, ctx.config.sed_members + 1)
        ]
        train_each(jobs, data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress)
        members = [str(tuned_model_path(source, ctx)), *(str(folder / "model") for _, folder in jobs)]
        member_seconds = time.perf_counter() - started
        recipe = ctx.recipe("adapt/sed", members=members)
        scores = np.load(ctx.out / "candidates" / source["name"] / "scores.npz")
        rivals = {source["name"]: scores["select"] if "select" in scores else ctx.selection_cosines(scores["dev"])}
        entry = Entry(self.name, self.kind, recipe, self.run_folder(ctx), self.folder(ctx))
        extra = {"source": source["name"], "member_seconds": member_seconds}
        race([entry], ctx, lambda e: finish_trained(self, label, ctx, extra), rivals=rivals)
        return load_record(self.folder(ctx))


@dataclass
class Supervised(WithRun):
    """Fine-tuned on the user's labels: --train's when given (never read to select or confirm), else the selection part
    of the dev set, its selection score then out of fold (sentune.adapt.crossfit: K models each trained without one fold
    score it, then the model is refit on the whole selection part for confirmation and test). CoSENT on graded pairs,
    OnlineContrastiveLoss on 0/1 pairs (sentune.methods.labelled), MultipleNegativesRankingLoss with two mined hard
    negatives on search data (SupervisedSearch), each a recipe fixed in advance. `start`: the unchanged model, or
    ('best') the best label-free trained candidate (domain adaptation, then labels: the order sentence-transformers
    recommends); that one is skipped when none trained."""

    start: str = UNCHANGED
    kind: ClassVar[str] = "supervised"
    phase: ClassVar[str] = "after_race"
    search: ClassVar[bool] = False  # which data it plans for: pairs, or (SupervisedSearch) queries

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        if not setup.labels or setup.retrieval != cls.search:
            return []
        stacked = SUPERVISED_STACKED in setup.methods and any(m in TRAINED for m in setup.methods)
        return [*([cls(SUPERVISED)] if SUPERVISED in setup.methods else []), *([cls(SUPERVISED_STACKED, "best")] if stacked else [])]

    def depends_on(self, ctx: Context) -> dict:
        return {"train_sha256": ctx.train_sha256}  # what it trains on: --train's data, or (None) the selection part

    def describe(self, ctx: Context) -> str:
        where = "the unchanged model" if self.start == UNCHANGED else "the best label-free trained candidate"
        return f"fine-tuning {where} on the labels ({self.recipe_name(ctx)})"

    def recipe_name(self, ctx: Context) -> str:
        return f"adapt/{SUPERVISED_RECIPES['graded' if ctx.metric == 'spearman' else 'binary']}"

    # -- what differs between pairs and queries --
    def selection_units(self, ctx: Context) -> list:
        """The selection part's units (pairs), in split.select's order."""
        from sentune.data.user_data import read_scored_pairs

        return read_scored_pairs(ctx.out / "data" / "dev-select.tsv").pairs

    def given_units(self, ctx: Context) -> list | None:
        from sentune.data.user_data import read_scored_pairs

        given = ctx.out / "data" / "train.tsv"
        return read_scored_pairs(given).pairs if given.is_file() else None

    def training_rows(self, units: list, ctx: Context) -> list[list[tuple]]:
        """Each unit's training rows (a pair: itself with its label), built once for every training of the run."""
        return [[(p.a, p.b, p.score)] for p in units]

    def write_training(self, rows: list[tuple], path: Path) -> None:
        from sentune.data.user_data import write_scored_pairs

        write_scored_pairs(path, rows)

    def score_held(self, model, units: list, ctx: Context, folder: Path):
        """The held-out fold's scores by the model trained without it (`folder`: that fold's)."""
        from sentune.data.user_data import ScoredPairs
        from sentune.tasks.user_pairs import PairScorer

        return PairScorer({"held": ScoredPairs(units, "scores" if ctx.metric == "spearman" else "binary", "held-out fold")}).of_model(model)["held"]

    def produce(self, label: str, ctx: Context) -> dict:
        """Every training is one run of the trainer without checkpoints (sentune.train.trainer.train_in_memory): a
        fold's model is kept in memory only while it scores its held-out fold, and the refit, which the run ships or
        builds on (hybrids, wise, the index), is saved as OUT/candidates/NAME/run. A run killed before the record is
        written trains the candidate again whole."""
        from sentune.adapt.crossfit import FOLDS, out_of_fold
        from sentune.core.memory import release_unreferenced
        from sentune.train.trainer import train_in_memory

        print(f"{label} {self.name}: {self.describe(ctx)}", flush=True)
        started = time.perf_counter()
        folder = self.folder(ctx)
        for left in list(folder.iterdir()):  # what a killed attempt left (its refit's run, its vectors, maybe of other training data)
            shutil.rmtree(left) if left.is_dir() else left.unlink()
        start_model = ctx.config.model
        if self.start != UNCHANGED:
            sources = tuned_sources(ctx, (Trained.kind, Ensemble.kind))
            if not sources:
                return write_record(self, {}, {"skipped": "no label-free trained candidate with weights to start from"}, 0.0, label, ctx)
            start_model = str(tuned_model_path(max(sources, key=lambda r: r["dev_score"]), ctx))
        name, data_dir, progress = self.recipe_name(ctx), ctx.data_dir or Path("."), ctx.config.show_progress
        recipes: dict[Path, dict] = {}

        def train(rows: list[tuple], where: Path, run: Path | None):
            """A model trained on `rows` (written to where/train.tsv, which its recipe names); `run`: saved there."""
            where.mkdir(parents=True, exist_ok=True)
            self.write_training(rows, where / "train.tsv")
            recipe = ctx.labelled_recipe(name, where / "train.tsv", len(rows), start_model)
            recipes[where] = recipe.to_dict()
            return train_in_memory(recipe, run, data_dir=data_dir, show_progress=progress).model

        detail: dict = {"setting": name, "start": start_model if self.start != UNCHANGED else UNCHANGED, "run": str(self.run_folder(ctx).relative_to(ctx.out))}
        given = self.given_units(ctx)
        if given is not None:
            model = train([row for rows in self.training_rows(given, ctx) for row in rows], folder, self.run_folder(ctx))
            scores = ctx.scorer.of_vectors(ctx.vectors_of(model, self.name))  # kept: a hybrid of this model reads them
            detail |= {"trained_on": "--train", "train_units": len(given), "dev_indices_trained_on": []}
        else:
            select, units = ctx.inputs.split.select, self.selection_units(ctx)
            by_unit = self.training_rows(units, ctx)
            folds: list[list[int]] = []

            def fit(fold: int, rows: np.ndarray):
                release_unreferenced()  # the previous fold's model and its trainer are garbage by now
                folds.append(sorted(int(select[i]) for i in rows))
                where = folder / f"fold-{fold}"
                return train([row for i in rows for row in by_unit[i]], where, None), where

            def held_out(fitted, held: np.ndarray) -> np.ndarray:
                model, where = fitted
                return self.score_held(model, [units[i] for i in held], ctx, where)

            # each training prints its own time; the user should know there are K + 1 of them
            print(
                f"    {self.name}: cross-fitting on the {len(units)} selection {ctx.inputs.dev.unit}: {FOLDS} trainings without one fold each, then one on all",
                flush=True,
            )
            oof = out_of_fold(len(units), FOLDS, ctx.config.seed, fit, held_out)
            release_unreferenced()
            model = train([row for rows in by_unit for row in rows], folder, self.run_folder(ctx))
            scores = ctx.scorer.of_vectors(ctx.vectors_of(model, self.name))  # kept: a hybrid of this model reads them
            scores["dev"][select] = oof  # the selection part's scores: out of fold
            detail |= {
                "trained_on": "the selection part (cross-fitted)",
                "train_units": len(units),
                "folds": FOLDS,
                "dev_indices_trained_on": sorted(int(i) for i in select),
                "fold_dev_indices_trained_on": folds,
            }
        detail["recipe"] = recipes[folder]  # the refit's (the folds' differ in their rows only)
        return write_record(self, scores, detail, time.perf_counter() - started, label, ctx)


@dataclass
class SupervisedSearch(Supervised):
    """Supervised on search data: MultipleNegativesRankingLoss on (query, relevant document, BM25's best-ranked
    unjudged document, the unchanged model's best-ranked unjudged document) rows, one per judged-relevant document
    (sentune.methods.mnrl; no judged-relevant document is ever a negative). Mined here rather than with
    sentence-transformers' mine_hard_negatives, which mines with one embedding model: BM25's and the unchanged model's
    rankings of the whole corpus are what the run already holds. Held-out selection queries rank the selection pool,
    as every candidate's selection queries do."""

    search: ClassVar[bool] = True

    def recipe_name(self, ctx: Context) -> str:
        return f"adapt/{SUPERVISED_RECIPES['search']}"

    def selection_units(self, ctx: Context) -> list:
        from sentune.data.beir import read_beir_folder
        from sentune.tasks.user_queries import SELECT_SPLIT

        return read_beir_folder(ctx.selection_folder(), SELECT_SPLIT).queries  # split.select's order

    def given_units(self, ctx: Context) -> list | None:
        from sentune.data.beir import read_beir_folder

        given = ctx.out / "data" / "train"
        return read_beir_folder(given, "train").queries if given.is_dir() else None

    def training_rows(self, units: list, ctx: Context) -> list[list[tuple]]:
        """Each query's rows, one per judged-relevant document: (query, document, its two mined negatives). A query's
        negatives do not depend on the other queries mined with it: mined once for every training of the run."""
        texts = {d.id: d.text for d in ctx.retrieval_dev().corpus}
        negatives = ctx.hard_negatives(units)
        return [[(q.text, texts[doc], *negatives[q.id]) for doc in q.relevant if q.relevant[doc] > 0] for q in units]

    def write_training(self, rows: list[tuple], path: Path) -> None:
        path.write_text("".join("\t".join(" ".join(field.split()) for field in row) + "\n" for row in rows), encoding="utf-8")

    def score_held(self, model, units: list, ctx: Context, folder: Path):
        """The held-out queries against the selection pool; their and the pool's vectors stay in the fold's folder
        (HELD_VECTORS), which the hybrid of this candidate reads for its own out-of-fold scores."""
        import numpy as np

        scorer = held_scorer(units, ctx)
        vectors = scorer.encode(model, ["model"], f"{self.name}: scoring a held-out fold")["model"]
        np.save(folder / HELD_VECTORS, vectors)
        return scorer.of_vectors(vectors)["held"]


HELD_VECTORS = "held_vectors.npy"  # a fold's vectors of its held-out queries and the selection pool (held_scorer's rows)


def held_scorer(queries: list, ctx: Context):
    """Scores `queries` (held-out selection queries) against the selection pool, as every selection query is ranked."""
    import numpy as np

    from sentune.data.beir import RetrievalSet, read_beir_folder
    from sentune.tasks.user_queries import SELECT_SPLIT, QueryScorer, RankedQueries

    pool = read_beir_folder(ctx.selection_folder(), SELECT_SPLIT).corpus
    return QueryScorer({"held": [RankedQueries(RetrievalSet(queries, pool), np.arange(len(queries)))]})


@dataclass
class Wise(Candidate):
    kind: ClassVar[str] = "wise"
    phase: ClassVar[str] = "after_race"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(WISE)] if WISE in setup.methods else []

    def depends_on(self, ctx: Context) -> dict:
        return {"train_sha256": ctx.train_sha256}  # a supervised model trained on --train may be its tuned end

    def describe(self, ctx: Context) -> str:
        return "interpolating the best tuned candidate's weights (finished or raced out) with the unchanged model's (WiSE-FT), the mix chosen on the selection pairs"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        import copy

        from sentune.adapt.wise import MIXES, NotInterpolable, best_mix, interpolate
        from sentune.core.memory import release_freed_memory, release_unreferenced
        from sentune.modules.build import save_atomic

        # a model trained on the selection part would choose its own mix on the rows it learned: only --train's qualify
        tuned = [r for r in tuned_sources(ctx, (Trained.kind, Ensemble.kind, Supervised.kind)) if not r.get("dev_indices_trained_on")]
        if not tuned:
            return {}, {"skipped": "no tuned candidate with weights left to interpolate with (--prune removes them)"}
        source = max(tuned, key=lambda r: r["dev_score"])  # the selection score: finished or raced out
        from sentune.core.models import load_model

        model = load_model(str(tuned_model_path(source, ctx)), device=ctx.device)
        selection = ctx.selection_scorer()  # the mix is chosen on the selection pairs: only those are encoded for the search
        curve: dict[float, float] = {}
        mixed = copy.deepcopy(model)  # every mix is written into this one copy (sentune.adapt.wise.interpolate)
        try:
            for mix in MIXES:
                cosines = selection.of_model(interpolate(ctx.base, model, mix, into=mixed), f"{WISE}: mix {mix}")["select"]
                curve[mix] = ctx.selection_score_of(cosines)
                release_freed_memory()  # the encoder's batches of this mix
        except NotInterpolable as error:
            return {}, {"skipped": f"cannot interpolate with {source['name']}: {error}"}
        mix = best_mix(curve)
        print(
            f"    {WISE}: {1 - mix:g}·unchanged + {mix:g}·{source['name']} (selection {curve[mix]:.2f}; {source['name']} {source['dev_score']:.2f})", flush=True
        )
        chosen = interpolate(ctx.base, model, mix, into=mixed)
        del model  # the tuned end: only the mixed copy is scored and saved from here
        release_unreferenced()
        save_atomic(chosen, self.folder(ctx) / "model")
        detail = {"source": source["name"], "mix": mix, "curve": [[a, s] for a, s in curve.items()] + [[1.0, source["dev_score"]]]}
        return ctx.scorer.of_model(chosen, f"{WISE}: scoring the pairs"), detail


DENSE_KINDS = (Unchanged.kind, Pooling.kind, PostProcessed.kind, Trained.kind, Ensemble.kind, Supervised.kind, Wise.kind)


@dataclass
class Hybrid(Candidate):
    """Search: BM25 (stemmed, sentune.search.lexical) and a dense candidate fused by a convex combination of min-max
    normalised scores (sentune.search.fusion), its weight α chosen on the selection queries alone, each ranked against
    the whole corpus. `dense`: the unchanged model, or ('best') the dense candidate best on the selection queries when
    it is another (a trained one, say); that one is skipped when the unchanged model is the best. A model trained on the
    selection queries (a supervised candidate without --train) is not among them: its weight and its selection score
    would read the queries it learned, as wise's mix would (Wise.run)."""

    dense: str = UNCHANGED
    kind: ClassVar[str] = "hybrid"
    phase: ClassVar[str] = "after_race"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(HYBRID), cls(f"{HYBRID}-best", "best")] if setup.retrieval and HYBRID in setup.methods else []

    def describe(self, ctx: Context) -> str:
        which = "the unchanged model" if self.dense == UNCHANGED else "the best dense candidate on the selection queries"
        return f"fusing BM25 with {which}, the weight chosen on the selection queries"

    def source(self, ctx: Context) -> str | None:
        if self.dense == UNCHANGED:
            return UNCHANGED
        dense = [
            r
            for r in ctx.records.values()
            if r["kind"] in DENSE_KINDS and "dev_score" in r and "stopped" not in r and not r.get("skipped") and not r.get("dev_indices_trained_on")
        ]
        best = max(dense, key=lambda r: r["dev_score"], default=None)
        return None if best is None or best["name"] == UNCHANGED else best["name"]

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        from sentune.search.fusion import Fusion

        source = self.source(ctx)
        if source is None:
            return {}, {"skipped": f"the unchanged model is the best dense candidate on the selection queries: its hybrid is `{HYBRID}`"}
        vectors = ctx.untuned_vectors() if source == UNCHANGED else ctx.vectors_of(ctx.candidate(source).model(ctx), source)
        alpha, curve, read = ctx.choose_fusion_weight(vectors)
        fusion = Fusion("convex", alpha)
        print(f"    {self.name}: BM25 + {source}, α = {alpha:g} (selection, whole corpus: {curve[alpha]:.2f})", flush=True)
        detail = {"setting": fusion.label, "source": source, "fusion": fusion.to_dict(), "lexical": ctx.lexical_settings().label}
        detail |= {"alpha_curve": [[a, s] for a, s in curve.items()], "weight_read_queries": read}
        return ctx.rank_with(ctx.hybrid_ranker(vectors, fusion)), detail

    def model(self, ctx: Context):
        source = load_record(self.folder(ctx))["source"]
        return ctx.candidate(source).model(ctx)

    def system(self, ctx: Context) -> dict | None:
        record = load_record(self.folder(ctx))
        return {"fusion": record["fusion"], "source": record["source"]}


@dataclass
class HybridSupervised(Hybrid):
    """Search: BM25 fused with the supervised candidate trained on the selection queries (the best of them by its
    out-of-fold score), which `hybrid-best` leaves out. Its weight is `hybrid`'s (chosen with the unchanged model, which
    learned no query); its selection score is out of fold like its source's: each held-out fold's queries ranked
    against the selection pool by BM25 fused with the model trained without that fold (sentune.adapt.crossfit). The
    confirmation and test queries are ranked by the refit model fused the same way. A source trained on --train needs
    none of this: `hybrid-best` fuses it."""

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        wanted = setup.retrieval and setup.labels and HYBRID in setup.methods and {SUPERVISED, SUPERVISED_STACKED} & set(setup.methods)
        return [cls(f"{HYBRID}-{SUPERVISED}")] if wanted else []

    def describe(self, ctx: Context) -> str:
        return "fusing BM25 with the supervised candidate trained on the selection queries, scored out of fold"

    def source(self, ctx: Context) -> str | None:
        trained = [
            r
            for r in ctx.records.values()
            if r["kind"] == Supervised.kind and r.get("fold_dev_indices_trained_on") and "dev_score" in r and not r.get("skipped")
        ]
        return max(trained, key=lambda r: r["dev_score"])["name"] if trained else None

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        import numpy as np

        from sentune.search.fusion import Fusion

        source = self.source(ctx)
        if source is None:
            return {}, {"skipped": "no supervised candidate trained on the selection queries (one trained on --train: `hybrid-best` fuses it)"}
        record = ctx.records[source]
        weighted = ctx.records.get(HYBRID, {})
        alpha = weighted["fusion"]["alpha"] if "fusion" in weighted else ctx.choose_fusion_weight(ctx.untuned_vectors())[0]
        fusion = Fusion("convex", alpha)
        scores = ctx.rank_with(ctx.hybrid_ranker(ctx.vectors_of(ctx.candidate(source).model(ctx), source), fusion))
        dev, select = ctx.retrieval_dev(), ctx.inputs.split.select
        for fold, trained in enumerate(record["fold_dev_indices_trained_on"]):
            held = np.array(sorted(set(select.tolist()) - set(trained)))
            scorer = held_scorer([dev.queries[i] for i in held], ctx)
            folder = self.folder(ctx).parent / source / f"fold-{fold}"
            if (folder / HELD_VECTORS).is_file():
                vectors = np.load(folder / HELD_VECTORS)
            elif not (folder / "run" / "model").is_dir():
                return {}, {"skipped": f"{source}'s fold {fold} kept neither its vectors nor its model (--prune)"}
            else:  # a fold that kept its model but not its vectors: the model encodes them again
                from sentune.core.models import load_model

                model = load_model(str(folder / "run" / "model"), device=ctx.device)
                vectors = scorer.encode(model, ["model"], f"{self.name}: encoding a held-out fold")["model"]
            scores["dev"][held] = scorer.of_ranker(ctx.hybrid_ranker(vectors, fusion, texts=scorer.sentences()))["held"]
        print(f"    {self.name}: BM25 + {source}, α = {alpha:g} (hybrid's), selection out of fold", flush=True)
        detail = {"setting": fusion.label, "source": source, "fusion": fusion.to_dict(), "lexical": ctx.lexical_settings().label}
        detail |= {"weight_from": HYBRID, "trained_on": record.get("trained_on"), "dev_indices_trained_on": record["dev_indices_trained_on"]}
        return scores, detail


@dataclass
class Reference(WithRun):
    """sentence-transformers' own SimCSE recipe with its own defaults (one epoch, the last checkpoint): the user's usual
    alternative, reported beside the candidates and never chosen."""

    recipe_name: str = f"adapt/{REFERENCE}"
    kind: ClassVar[str] = "baseline"
    phase: ClassVar[str] = "after_race"
    eligible: ClassVar[bool] = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(REFERENCE)] if setup.reference else []

    def describe(self, ctx: Context) -> str:
        return "training sentence-transformers' SimCSE recipe (reported, never chosen)"

    def produce(self, label: str, ctx: Context) -> dict:
        from sentune.train.runs import train_run

        print(f"{label} {self.name}: {self.describe(ctx)}", flush=True)
        data_dir = ctx.data_dir or Path(".")
        train_run(ctx.recipe(self.recipe_name, reference=True), self.run_folder(ctx), data_dir=data_dir, show_progress=ctx.config.show_progress)
        return trained_record(self, self.run_folder(ctx), label, ctx)


@dataclass
class Lexical(Candidate):
    """Search: BM25 alone over the documents, the lexical baseline search is measured against (stemmed as BEIR runs it;
    the unstemmed variant beside it), reported and never chosen (it is not an encoder; the hybrid covers it at α = 0)."""

    stemmed: bool = True
    kind: ClassVar[str] = "baseline"
    phase: ClassVar[str] = "after_race"
    eligible: ClassVar[bool] = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(BM25), cls(BM25_UNSTEMMED, stemmed=False)] if setup.retrieval else []

    def describe(self, ctx: Context) -> str:
        return f"ranking the documents by {ctx.lexical_settings(self.stemmed).label} (reported, never chosen)"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        return ctx.rank_with(ctx.lexical(self.stemmed)), {"setting": ctx.lexical_settings(self.stemmed).label}


@dataclass
class Rrf(Candidate):
    """Search: reciprocal rank fusion of BM25 and the unchanged model (k = 60), the fusion most search engines offer
    first; reported beside the convex hybrid and never chosen."""

    kind: ClassVar[str] = "baseline"
    phase: ClassVar[str] = "after_race"
    eligible: ClassVar[bool] = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(RRF)] if setup.retrieval and HYBRID in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return "fusing BM25 with the unchanged model by reciprocal rank fusion (reported, never chosen)"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], dict]:
        from sentune.search.fusion import Fusion

        fusion = Fusion("rrf")
        return ctx.rank_with(ctx.hybrid_ranker(ctx.untuned_vectors(), fusion)), {"setting": fusion.label, "fusion": fusion.to_dict()}


# The registry: every kind a run may have, in run order within its phase. A new kind is a class and a line here.
KINDS: tuple[type[Candidate], ...] = (
    Unchanged,
    Pooling,
    PostProcessed,
    Trained,
    Ensemble,
    Supervised,
    SupervisedSearch,
    Wise,
    Hybrid,
    HybridSupervised,
    Reference,
    Lexical,
    Rrf,
)


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
    if not any(m in TRAINED for m in chosen):  # each is built from a trained candidate: without one it could only be skipped
        for needs in (m for m in (SED, SUPERVISED_STACKED, WISE) if m in chosen):
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


def plan(methods: tuple[str, ...], own: str | None, reference: bool, generated_queries: bool = False, retrieval: bool = False, labels: bool = True) -> Plan:
    setup = PlanSetup(methods, own, reference, generated_queries, retrieval, labels)
    found = Plan()
    for kind in KINDS:
        for candidate in kind.planned(setup):
            getattr(found, candidate.phase).append(candidate)
    return found
