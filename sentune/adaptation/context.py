"""The Context every candidate of one `sentune adapt` run reads (sentune.adaptation.candidates, the races): the run's
frozen inputs and its state (sentune.adaptation.run_state), and the services built once on them: the selection units
each choice reads, the untuned model's cosines encoded once, the candidate store and the recipe book
(sentune.adaptation.recipe_book). PairsContext is a run on pairs; SearchContext (sentune.adaptation.search_context) a run
on queries, with the services only search candidates read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import numpy as np

from sentune.adaptation.inputs import AdaptConfig, Inputs, PairsTask
from sentune.adaptation.names import UNTUNED_POOLINGS
from sentune.adaptation.recipe_book import EVALUATIONS, PATIENCE, RecipeBook
from sentune.adaptation.records import CandidateRecord
from sentune.adaptation.run_state import RunInputs, RunState
from sentune.adaptation.store import CandidateStore
from sentune.core.encode import Encoder
from sentune.core.metrics import METRICS
from sentune.tasks.user_pairs import Scorer

__all__ = ["EVALUATIONS", "PATIENCE", "Context", "PairsContext"]

S = TypeVar("S", bound=Scorer)
T = TypeVar("T", covariant=True)


class Part(Generic[T]):
    """An attribute of the context's `run` (its frozen inputs) or `state`, read through the context under the same
    name; the context itself has nothing to assign."""

    def __init__(self, part: str) -> None:
        self.part = part

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Part[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T | Part[T]:
        return self if obj is None else getattr(getattr(obj, self.part), self.name)


@dataclass(frozen=True)
class Context:
    """What every candidate of one run reads: its frozen inputs (`run`: the settings, the data, the base model) and its
    state (`state`: the records so far, the time plan, ...), the one place a run changes; the Context itself holds no
    state, only the services built once on the inputs (the candidate store, the recipe book). What differs between
    pairs and search (the selection units, how training reads them, and the search-only services) is PairsContext's and
    SearchContext's (sentune.adaptation.search_context); sentune.adaptation.run makes the one its task needs (context_of)."""

    run: RunInputs
    state: RunState

    # the inputs, read-only, and the run's state as candidates read it (the phases of sentune.adaptation.phases write
    # it, on `state`)
    config = Part[AdaptConfig]("run")
    inputs = Part[Inputs]("run")
    out = Part[Path]("run")
    data_dir = Part["Path | None"]("run")
    base = Part[Any]("run")
    runtime = Part[Any]("run")  # the base model's (sentune.core.runtime), for its encoders
    scorer = Part[Scorer]("state")
    plan = Part[Any]("state")  # sentune.adaptation.candidates.Plan: the run's candidates, for those built on another
    records = Part[dict[str, CandidateRecord]]("state")
    time_plan = Part[Any]("state")  # sentune.adaptation.time_plan.TimePlan
    evidence = Part[Any]("state")  # sentune.adaptation.evidence.Evidence
    supervised_race = Part[Any]("state")

    def _scoring(self, scorer: S) -> S:
        """`scorer` scoring models through the run's backend (--backend onnx: their ONNX graphs)."""
        scorer.backend = self.config.backend
        scorer.spread = self.runtime is not None and self.runtime.spread  # every GPU scores, as the base model was loaded
        return scorer

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def metric(self) -> str:
        return self.inputs.dev.metric

    # -- the selection units: every choice of the run reads these only (sentune.adaptation.decide) --
    def prepare_selection(self) -> None:
        """Make the selection units ready to score, before any candidate runs (search: their pool of documents)."""

    def selection_units(self) -> list:
        """The selection part's units (pairs, or queries), in split.select's order: what the supervised candidates train on."""
        raise NotImplementedError

    def selection_scorer(self) -> Scorer:
        """Scores the selection units alone, split 'select', in the order of selection_gold: what training reads."""
        raise NotImplementedError

    def eval_texts(self) -> int:
        """How many texts scoring a model encodes: every dev and test text (search: the queries and the corpus), and
        those of --train's evidence pairs when they judge (sentune.adaptation.train_evidence)."""
        judging = self.evidence is not None and self.evidence.judges
        return len(self.scorer.sentences()) + (2 * len(self.evidence.indices) if judging else 0)

    def selection_texts(self) -> int:
        """How many texts one evaluation on the selection units encodes (search: with their pool)."""
        return len(self.selection_scorer().sentences())

    def training_dev(self) -> dict:
        """The selection units as a training recipe's eval.dev describes them (its checkpoints are chosen on them): their
        kind, size and the file under OUT/data that records them (Kind.describe), what its record shows; the trainer
        receives training_dev_data and reads no file."""
        raise NotImplementedError

    def training_dev_data(self):
        """The selection units as the trainings' dev data object (sentune.training.trainer's `dev`)."""
        raise NotImplementedError

    def training_data(self, recipe):
        """What a training candidate's recipe (Context.recipe) trains on, as the object the trainer receives (its
        train_data describes it, naming the file under OUT/data that records it, never read back): the user's generated
        queries with their passages for a method that takes pairs and not sentences (GenQ), else the corpus, as
        OUT/data/corpus.txt holds it."""
        from sentune.data.kinds import Sentences
        from sentune.methods.registry import get_method

        return self._corpus_data if get_method(recipe.method).refuses(Sentences) is None else self._generated_data

    def _training_record(self, data) -> Path:
        """The file under OUT/data that records what training_data gives (sentune.adaptation.inputs writes them)."""
        return self.out / "data" / ("corpus.txt" if data is self._corpus_data else "queries-from.tsv")

    @cached_property
    def _corpus_data(self):
        from sentune.data.kinds import Sentences
        from sentune.data.text_files import normalise

        return Sentences(list(dict.fromkeys(text for text in map(normalise, self.inputs.corpus) if text)))  # as corpus.txt reads

    @cached_property
    def _generated_data(self):
        from sentune.data.kinds import Pairs

        return Pairs(list(self.inputs.generated or []))

    def selection_gold(self) -> np.ndarray:
        return self.inputs.dev.gold[self.inputs.split.select]

    def selection_cosines(self, dev_scores: np.ndarray) -> np.ndarray:
        return dev_scores[self.inputs.split.select]

    def selection_score_of(self, selection_cosines: np.ndarray) -> float:
        return METRICS[self.metric].score(self.selection_gold(), selection_cosines)

    def selection_score(self, dev_scores: np.ndarray) -> float:
        return self.selection_score_of(self.selection_cosines(dev_scores))

    # -- the untuned model, encoded once --
    @cached_property
    def store(self) -> CandidateStore:
        """OUT/candidates: the candidates' scores and the encodings made once per run (sentune.adaptation.store)."""
        return CandidateStore(self.out, self.inputs.split.select)

    def untuned(self, pooling: str) -> dict[str, np.ndarray]:
        self._encode_untuned()
        return self.store.untuned_scores(pooling, self.scorer.splits)

    def untuned_vectors(self) -> np.ndarray:
        """The pairs' vectors under the model's own pipeline (post-processors transform these instead of encoding again)."""
        self._encode_untuned()
        return self.store.untuned_vectors()

    def untuned_encoded(self) -> bool:
        return self.store.has_untuned()

    def training_minutes(self) -> float | None:
        """A training's minute limit: --budget's, or what is left of --time when that is less."""
        caps = [m for m in (self.config.budget.minutes, self.time_plan.minutes_cap() if self.time_plan else None) if m is not None]
        return min(caps) if caps else None

    def _encode_untuned(self) -> None:
        if not self.store.has_untuned():
            self._save_untuned(self.scorer.encode(self.base, ["model", *UNTUNED_POOLINGS], "scoring the untuned poolings"))

    def _save_untuned(self, vectors: dict[str, np.ndarray]) -> None:
        """The untuned poolings' scores of every split, and the model's own vectors (rows: self.scorer.sentences())."""
        self.store.save_untuned(vectors["model"], {name: self.scorer.of_vectors(v) for name, v in vectors.items()})

    def corpus_to_encode(self) -> int:
        """How many texts corpus_vectors encodes (what its first caller pays)."""
        return len(self.inputs.corpus)

    def corpus_vectors(self) -> np.ndarray:
        """The corpus under the model's own pipeline, encoded once for every post-processor fitted on it."""
        desc = "encoding the corpus to fit the post-processors"
        return self.store.corpus_vectors(
            lambda: Encoder(self.base, "model", show_progress=self.config.show_progress, desc=desc, runtime=self.runtime).encode(self.inputs.corpus)
        )

    def candidate(self, name: str):
        """The run's candidate of that name (its class says what it is: dense, eligible, ...)."""
        return next(c for c in self.plan.all if c.name == name)

    def vectors_of(self, model, name: str) -> np.ndarray:
        """A model's vectors of every text the scorer reads (rows: scorer.sentences()), encoded once per run."""
        return self.store.vectors(name, lambda: self.scorer.encode(model, ["model"], f"{name}: encoding every dev and test text")["model"])

    # -- training --
    def budget_text(self) -> str:
        budget = self.config.budget
        steps = f"{budget.steps} steps" if budget.steps else "one pass over the corpus"
        return steps + (f", {budget.minutes:g} min" if budget.minutes else "")

    @cached_property
    def book(self) -> RecipeBook:
        """The run's candidate recipes, each built and validated once (sentune.adaptation.recipe_book)."""
        return RecipeBook(self)

    def recipe(self, name: str, *, steps: int | None = None, seed: int | None = None, members: list[str] | None = None, reference: bool = False):
        """A label-free training candidate's recipe for this run (RecipeBook.training)."""
        return self.book.training(name, steps=steps, seed=seed, members=members, reference=reference)

    def labelled_recipe(self, name: str, train_file: Path, rows: int, model: str | None = None, *, data):
        """A supervised candidate's recipe for this run (RecipeBook.labelled)."""
        return self.book.labelled(name, train_file, rows, model, data=data)


@dataclass(frozen=True)
class PairsContext(Context):
    """A run on scored pairs: the selection pairs are the dev pairs of split.select, kept as OUT/data/dev-select.tsv for
    the trainings' dev evaluations."""

    @property
    def task(self) -> PairsTask:
        task = self.inputs.task
        assert isinstance(task, PairsTask)
        return task

    def selection_path(self) -> Path:
        return self.out / "data" / "dev-select.tsv"

    def selection_units(self) -> list:
        return [self.task.dev.pairs[i] for i in self.inputs.split.select]

    def selection_scorer(self) -> Scorer:
        from sentune.data.user_data import scored_pairs
        from sentune.tasks.user_pairs import PairScorer

        return self._scoring(PairScorer({"select": scored_pairs(self.selection_units(), self.selection_path())}, self.config.show_progress))

    def training_dev(self) -> dict:
        return self.training_dev_data().describe()  # a ScoredPairs names its file: OUT/data/dev-select.tsv

    def training_dev_data(self):
        from sentune.data.user_data import scored_pairs

        return scored_pairs(self.selection_units(), self.selection_path())
