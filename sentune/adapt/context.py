"""What one `sentune adapt` run holds while its candidates run: its settings (AdaptConfig, Budget), the user's data as
read and split (Inputs), the pair scorer, and the Context every candidate reads (sentune.adapt.candidates,
sentune.adapt.race): the selection pairs each choice reads, the untuned model's cosines encoded once, and the
candidate recipes built for this run."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sentune.adapt.inputs import AdaptConfig, Inputs
from sentune.adapt.names import UNTUNED_POOLINGS
from sentune.core.encode import Encoder
from sentune.data.beir import RetrievalSet, read_beir_folder, write_beir_folder
from sentune.tasks.bootstrap import METRICS
from sentune.tasks.user_pairs import Scorer

PATIENCE = 3  # evaluations without a new best on the selection pairs before a candidate stops early
EVALUATIONS = 10  # dev evaluations per candidate's planned steps


@dataclass
class Context:
    """What every candidate of one run reads: the settings, the data, the base model and the records so far."""

    config: AdaptConfig
    inputs: Inputs
    out: Path
    data_dir: Path | None
    base: Any
    scorer: Scorer
    records: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scorer = self._scoring(self.scorer)

    def _scoring(self, scorer: Scorer) -> Scorer:
        """`scorer` scoring models through the run's backend (--backend onnx: their ONNX graphs)."""
        scorer.backend = self.config.backend
        return scorer

    @property
    def device(self) -> str:
        return self.config.device

    @property
    def metric(self) -> str:
        return self.inputs.dev.metric

    # -- the selection pairs: every choice of the run reads these only (sentune.adapt.decide) --
    def selection_scorer(self) -> Scorer:
        """Scores the selection pairs (or queries, against their pool) alone, split 'select', in the order of
        selection_gold: what training reads."""
        if self.inputs.retrieval:
            from sentune.tasks.user_queries import SELECT_SPLIT, QueryScorer

            return self._scoring(QueryScorer.whole({"select": read_beir_folder(self.selection_folder(), SELECT_SPLIT)}, self.config.show_progress))
        from sentune.data.user_data import read_scored_pairs
        from sentune.tasks.user_pairs import PairScorer

        return self._scoring(PairScorer({"select": read_scored_pairs(self.out / "data" / "dev-select.tsv")}, self.config.show_progress))

    def selection_folder(self) -> Path:
        """Retrieval: the selection queries and their pool as a BEIR folder (eval.dev: queries:DIR of every training)."""
        return self.out / "data" / "dev-select"

    def use_selection_pool(self) -> None:
        """Retrieval: the selection queries are ranked against a pool of the corpus (sentune.tasks.user_queries.
        selection_pool, built once from the unchanged model and kept in selection_folder()); the confirmation and test
        queries against the whole corpus. Every score of the run, training's included, then reads the same pool."""
        from sentune.tasks.user_queries import SELECT_SPLIT, QueryScorer, RankedQueries, selection_pool

        dev, split = self.inputs.dev, self.inputs.split
        assert isinstance(dev, RetrievalSet)
        folder = self.selection_folder()
        untuned = None  # the untuned poolings of every text, when this call encodes them (the pool reads the model's own)
        if not (folder / "qrels" / f"{SELECT_SPLIT}.tsv").is_file():
            texts = self.scorer.sentences()  # prepare's scorer: every query against the whole corpus
            untuned = (texts, self.scorer.encode(self.base, ["model", *UNTUNED_POOLINGS], "scoring the untuned poolings"))
            row = {text: i for i, text in enumerate(texts)}
            select = RetrievalSet([dev.queries[i] for i in split.select], dev.corpus)
            model = untuned[1]["model"]
            pool = selection_pool(select, model[[row[q.text] for q in select.queries]], model[[row[d.text] for d in select.corpus]])
            with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".pool-") as scratch:
                os.replace(write_beir_folder(Path(scratch) / "pool", pool, SELECT_SPLIT), folder)
        pool = read_beir_folder(folder, SELECT_SPLIT)
        confirm = RetrievalSet([dev.queries[i] for i in split.confirm], dev.corpus)
        splits = {"dev": [RankedQueries(pool, split.select), RankedQueries(confirm, split.confirm)]}
        if isinstance(self.inputs.test, RetrievalSet):
            splits["test"] = [RankedQueries(self.inputs.test, np.arange(self.inputs.test.units))]
        print(f"selection pool: {len(pool.corpus)} of the {len(dev.corpus)} documents for the {len(pool.queries)} selection queries", flush=True)
        self.scorer = self._scoring(QueryScorer(splits, self.config.show_progress))
        if untuned is not None:  # the same texts in the pooled scorer's order: the untuned candidates need no second pass
            texts, vectors = untuned
            row = {text: i for i, text in enumerate(texts)}
            order = [row[text] for text in self.scorer.sentences()]
            self._save_untuned({name: array[order] for name, array in vectors.items()})

    def selection_gold(self) -> np.ndarray:
        return self.inputs.dev.gold[self.inputs.split.select]

    def selection_cosines(self, dev_scores: np.ndarray) -> np.ndarray:
        return dev_scores[self.inputs.split.select]

    def selection_score_of(self, selection_cosines: np.ndarray) -> float:
        return METRICS[self.metric](self.selection_gold(), selection_cosines)

    def selection_score(self, dev_scores: np.ndarray) -> float:
        return self.selection_score_of(self.selection_cosines(dev_scores))

    # -- the untuned model, encoded once --
    def untuned(self, pooling: str) -> dict[str, np.ndarray]:
        flat = dict(np.load(self._untuned_cache()))
        return {split: flat[f"{pooling}/{split}"] for split in self.scorer.splits}

    def untuned_vectors(self) -> np.ndarray:
        """The pairs' vectors under the model's own pipeline (post-processors transform these instead of encoding again)."""
        return np.load(self._untuned_cache())["model_vectors"]

    def _untuned_cache(self) -> Path:
        cache = self.out / "candidates" / ".untuned.npz"
        if not cache.is_file():
            self._save_untuned(self.scorer.encode(self.base, ["model", *UNTUNED_POOLINGS], "scoring the untuned poolings"))
        return cache

    def _save_untuned(self, vectors: dict[str, np.ndarray]) -> None:
        """The untuned poolings' scores of every split, and the model's own vectors (rows: self.scorer.sentences())."""
        cache = self.out / "candidates" / ".untuned.npz"
        cache.parent.mkdir(parents=True, exist_ok=True)
        flat = {f"{name}/{split}": sims for name, v in vectors.items() for split, sims in self.scorer.of_vectors(v).items()}
        np.savez(str(cache), model_vectors=vectors["model"], **flat)  # type: ignore[arg-type]

    def corpus_vectors(self) -> np.ndarray:
        """The corpus under the model's own pipeline, encoded once for every post-processor fitted on it."""
        cache = self.out / "candidates" / ".corpus-model.npy"
        if not cache.is_file():
            desc = "encoding the corpus to fit the post-processors"
            np.save(cache, Encoder(self.base, "model", show_progress=self.config.show_progress, desc=desc).encode(self.inputs.corpus))
        return np.load(cache)

    # -- training --
    def budget_text(self) -> str:
        budget = self.config.budget
        steps = f"{budget.steps} steps" if budget.steps else "one pass over the corpus"
        return steps + (f", {budget.minutes:g} min" if budget.minutes else "")

    def recipe(self, name: str, *, steps: int | None = None, seed: int | None = None, members: list[str] | None = None, reference: bool = False):
        """A bundled candidate recipe set for this run: the model, the corpus, the selection pairs as dev, the steps
        (default: the budget) with 10 evaluations and early stopping. The reference keeps its own defaults (one epoch,
        the last checkpoint, no budget); only its dev curve is set."""
        from sentune.train.recipe import load_recipe, validate_recipe

        recipe = load_recipe(name, check=False)
        data = self.out / "data"
        given_pairs = recipe.method == "mnrl-pairs"  # GenQ trains on the user's generated queries, not on the corpus
        rows = len(self.inputs.generated) if given_pairs and self.inputs.generated else len(self.inputs.corpus)
        epoch = max(1, math.ceil(rows / recipe.training.batch_size))
        training = replace(
            recipe.training,
            device=self.device,
            seed=seed if seed is not None else recipe.training.seed,
            gradient_checkpointing=recipe.training.gradient_checkpointing or self.config.low_memory,
        )
        if reference:
            training = replace(training, eval_steps=max(1, math.ceil(epoch / EVALUATIONS)))
        else:
            steps = steps or self.config.budget.steps or epoch
            training = replace(
                training, max_steps=steps, eval_steps=max(1, math.ceil(steps / EVALUATIONS)), patience=PATIENCE, max_minutes=self.config.budget.minutes
            )
        recipe = replace(
            recipe,
            model=self.config.model,
            train_data=f"pairs:{data / 'queries-from.tsv'}" if given_pairs else f"file:{data / 'corpus.txt'}",
            pooling=recipe.pooling if reference else self.config.training_pooling,
            params={**recipe.params, **({"members": members} if members is not None else {})},
            training=training,
            eval=replace(recipe.eval, dev=self._training_dev()),  # checkpoints are chosen on the selection pairs (or queries)
        )
        validate_recipe(recipe, name)
        return recipe

    def _training_dev(self) -> str:
        from sentune.tasks.user_pairs import PAIRS_PREFIX
        from sentune.tasks.user_queries import QUERIES_PREFIX

        if self.inputs.retrieval:
            return f"{QUERIES_PREFIX}{self.selection_folder()}"
        return f"{PAIRS_PREFIX}{self.out / 'data' / 'dev-select.tsv'}"
