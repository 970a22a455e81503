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
from sentune.core.metrics import METRICS
from sentune.data.beir import RetrievalSet, read_beir_folder, write_beir_folder
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
    plan: Any = None  # sentune.adapt.candidates.Plan: the run's candidates, for those built on another
    records: dict[str, dict] = field(default_factory=dict)
    _lexical: dict[bool, Any] = field(default_factory=dict)

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
    def train_sha256(self) -> str | None:
        """The digest of the run's --train data (OUT/data/train.tsv, or train/ for search), None without --train."""
        from sentune.data.catalog import sha256_of

        data = self.out / "data"
        files = [data / "train.tsv"] if (data / "train.tsv").is_file() else sorted((data / "train").rglob("*.*")) if (data / "train").is_dir() else []
        return "+".join(sha256_of(f) for f in files) or None

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
            lexical = self.lexical().scores([q.text for q in select.queries], [d.id for d in select.corpus])  # BM25's top documents join the pool too
            pool = selection_pool(select, model[[row[q.text] for q in select.queries]], model[[row[d.text] for d in select.corpus]], lexical=lexical)
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
        return METRICS[self.metric].score(self.selection_gold(), selection_cosines)

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

    # -- search: BM25 over the whole document collection, and systems fused from it --
    def retrieval_dev(self) -> RetrievalSet:
        assert isinstance(self.inputs.dev, RetrievalSet)  # the search candidates are planned for retrieval runs only
        return self.inputs.dev

    def rank_with(self, ranker) -> dict[str, np.ndarray]:
        """Every split's per-query nDCG@10 ×100 under a ranker of documents (a system that is not one cosine)."""
        from sentune.tasks.user_queries import QueryScorer

        assert isinstance(self.scorer, QueryScorer)
        return self.scorer.of_ranker(ranker)

    def candidate(self, name: str):
        return next(c for c in self.plan.all if c.name == name)

    def vectors_of(self, model, name: str) -> np.ndarray:
        """A model's vectors of every text the scorer reads (rows: scorer.sentences()), encoded once per run."""
        cache = self.out / "candidates" / name / ".vectors.npy"
        if not cache.is_file():
            np.save(cache, self.scorer.encode(model, ["model"], f"{name}: encoding every dev and test text")["model"])
        return np.load(cache)

    def lexical_settings(self, stemmed: bool = True):
        from sentune.search.lexical import LexicalSettings

        return LexicalSettings() if stemmed else LexicalSettings(stemmer=None)

    def lexical(self, stemmed: bool = True):
        """BM25 over every document (built once; sentune.search.lexical.CollectionRanker): a part ranking a subset of
        them reads the collection's statistics."""
        from sentune.search.lexical import CollectionRanker, LexicalIndex
        from sentune.tasks.retrieval import DEPTH

        if stemmed not in self._lexical:
            documents = self.retrieval_dev().corpus
            index = LexicalIndex.build([d.text for d in documents], self.lexical_settings(stemmed), show_progress=self.config.show_progress)
            self._lexical[stemmed] = CollectionRanker(index, [d.id for d in documents], DEPTH)
        return self._lexical[stemmed]

    def hybrid_ranker(self, vectors: np.ndarray, fusion, texts: list[str] | None = None):
        """Rank by `fusion` of BM25 and the cosine of `vectors` (rows: `texts`, by default scorer.sentences())."""
        from sentune.search.fusion import hybrid_rank
        from sentune.tasks.retrieval import DEPTH

        row = {text: i for i, text in enumerate(self.scorer.sentences() if texts is None else texts)}

        def fused(queries, corpus) -> list[list[int]]:
            ids = [d.id for d in corpus]
            lexical = self.lexical().scores([q.text for q in queries], ids)
            query_vectors, doc_vectors = vectors[[row[q.text] for q in queries]], vectors[[row[d.text] for d in corpus]]
            return hybrid_rank(query_vectors, doc_vectors, lambda rows: lexical[rows], ids, fusion, depth=DEPTH, query_ids=[q.id for q in queries])

        return fused

    def hard_negatives(self, queries) -> dict[str, tuple[str, str]]:
        """Per query: the best-ranked document over the whole corpus that is not judged relevant to it (nor the query's
        own document) under BM25 and under the unchanged model, as texts."""
        from sentune.core.encode import Encoder
        from sentune.search.fusion import id_order, top_by_score
        from sentune.tasks.retrieval import rank

        documents = self.retrieval_dev().corpus
        ids = [d.id for d in documents]
        texts = [q.text for q in queries]
        row = {text: i for i, text in enumerate(self.scorer.sentences())}
        known = self.untuned_vectors()
        missing = [t for t in texts if t not in row]  # --train's queries: not among the scored texts
        extra = Encoder(self.base, "model", show_progress=False).encode(missing) if missing else None
        query_vectors = np.stack([known[row[t]] if t in row else extra[missing.index(t)] for t in texts])  # type: ignore[index]
        depth = max(len(q.relevant) for q in queries) + 2
        dense = rank(query_vectors, known[[row[d.text] for d in documents]], ids, depth=depth)
        lexical = top_by_score(self.lexical().scores(texts, ids), id_order(ids), depth)
        found = {}
        for q, by_dense, by_bm25 in zip(queries, dense, lexical, strict=True):
            first = lambda ranked: next(documents[i].text for i in ranked if ids[i] not in q.relevant and ids[i] != q.id)  # noqa: E731,B023
            found[q.id] = (first(by_bm25), first(by_dense))
        return found

    def choose_fusion_weight(self, vectors: np.ndarray) -> tuple[float, dict[float, float], list[str]]:
        """The convex weight α best on the selection queries, each ranked against the whole corpus (not the pool:
        the normalisation reads every document's score, as it will when the system serves); ties: the α nearer 0.5.
        Only the selection queries are read: their ids are returned with the weight, and the record keeps them."""
        from sentune.search.fusion import ALPHAS, Fusion
        from sentune.tasks.retrieval import HEADLINE, per_query_metrics

        dev, split = self.retrieval_dev(), self.inputs.split
        queries = [dev.queries[i] for i in split.select]
        curve = {}
        for alpha in ALPHAS:
            ranked = self.hybrid_ranker(vectors, Fusion("convex", alpha))(queries, dev.corpus)
            curve[alpha] = 100 * float(per_query_metrics([[dev.corpus[i].id for i in r] for r in ranked], queries)[HEADLINE].mean())
        best = max(curve, key=lambda a: (round(curve[a], 9), -abs(a - 0.5)))
        return best, curve, [q.id for q in queries]

    # -- training --
    def budget_text(self) -> str:
        budget = self.config.budget
        steps = f"{budget.steps} steps" if budget.steps else "one pass over the corpus"
        return steps + (f", {budget.minutes:g} min" if budget.minutes else "")

    def recipe(self, name: str, *, steps: int | None = None, seed: int | None = None, members: list[str] | None = None, reference: bool = False):
        """A bundled candidate recipe set for this run: the model, the corpus, the selection pairs as dev, the steps
        (default: the budget) with 10 evaluations and early stopping. The reference keeps its own defaults (one epoch,
        the last checkpoint, no budget); only its dev curve is set."""
        from sentune.methods.registry import get_method
        from sentune.train.recipe import load_recipe, validate_recipe

        recipe = load_recipe(name, check=False)
        data = self.out / "data"
        given_pairs = get_method(recipe.method).needs_pairs  # GenQ trains on the user's generated queries, not on the corpus
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

    def labelled_recipe(self, name: str, train_file: Path, rows: int, model: str | None = None):
        """A supervised candidate's recipe (sentune/recipes/adapt/NAME.yaml), fixed in advance: its epochs over the `rows`
        training rows of `train_file` (labelled pairs, or search tuples), its last step kept and no evaluation while it
        trains (nothing may be chosen on the rows it trained on, and on search data each evaluation would encode the
        selection pool again), from `model` (default: the unchanged one). --budget caps it as it caps every training
        candidate: at most its steps, and its minutes."""
        from sentune.methods.labelled import LABELLED_PREFIX
        from sentune.methods.mnrl import TUPLES_PREFIX
        from sentune.methods.registry import get_method
        from sentune.train.recipe import NO_DEV, load_recipe, validate_recipe

        recipe = load_recipe(name, check=False)
        prefix = TUPLES_PREFIX if get_method(recipe.method).needs_tuples else LABELLED_PREFIX
        steps = max(1, math.ceil(recipe.training.epochs * math.ceil(rows / recipe.training.batch_size)))
        steps = min(steps, self.config.budget.steps or steps)
        training = replace(
            recipe.training,
            device=self.device,
            max_steps=steps,
            eval_steps=steps,
            patience=0,
            checkpoint="last",
            max_minutes=self.config.budget.minutes,
            gradient_checkpointing=recipe.training.gradient_checkpointing or self.config.low_memory,
        )
        recipe = replace(
            recipe,
            model=model or self.config.model,
            train_data=f"{prefix}{train_file}",
            pooling=self.config.training_pooling,
            training=training,
            eval=replace(recipe.eval, dev=NO_DEV),
        )
        validate_recipe(recipe, name)
        return recipe

    def _training_dev(self) -> str:
        from sentune.tasks.user_pairs import PAIRS_PREFIX
        from sentune.tasks.user_queries import QUERIES_PREFIX

        if self.inputs.retrieval:
            return f"{QUERIES_PREFIX}{self.selection_folder()}"
        return f"{PAIRS_PREFIX}{self.out / 'data' / 'dev-select.tsv'}"
