"""The Context of a search run (sentune.adapt.context): the selection queries ranked against their pool of documents,
and what only the search candidates read: BM25 over the whole collection (fixed, and fitted to the domain on the
selection queries: sentune.search.lexical_fit), rankers fused from the fitted one and a dense candidate
(sentune.search.fusion), the convex weight chosen on the selection queries, and hard negatives mined for the
supervised candidate. The selection pool and the hard negatives read the fixed BM25: they are made before, and apart
from, any choice. Each BM25 index is built once per settings: when the fit keeps the fixed settings, the fitted BM25
is the fixed one."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sentune.adapt.context import Context
from sentune.adapt.inputs import SearchTask
from sentune.adapt.names import UNTUNED_POOLINGS
from sentune.data.beir import RetrievalSet, read_beir_folder, write_beir_folder
from sentune.search.fusion import Fusion
from sentune.tasks.user_queries import SELECT_SPLIT, QueryScorer


@dataclass
class SearchContext(Context):
    task: SearchTask = field(kw_only=True)
    scorer: QueryScorer
    _lexical: dict[Any, Any] = field(default_factory=dict, kw_only=True)  # LexicalSettings -> its CollectionRanker
    _fit: Any = field(default=None, kw_only=True)
    _passages: Any = field(default=None, kw_only=True)
    _passage_choice: dict | None = field(default=None, kw_only=True)
    _pool: RetrievalSet | None = field(default=None, kw_only=True)
    _negatives: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict, kw_only=True)  # (query id, text) -> its mined pair

    # -- the selection queries, each ranked against their pool --
    def selection_folder(self) -> Path:
        """The selection queries and their pool as a BEIR folder (eval.dev: queries:DIR of every training)."""
        return self.out / "data" / "dev-select"

    def prepare_selection(self) -> None:
        self.use_selection_pool()

    @property
    def pool(self) -> RetrievalSet:
        """The selection queries (split.select's order) against their pool of documents, as use_selection_pool kept it."""
        if self._pool is None:
            raise RuntimeError("the selection pool is made before any candidate runs (use_selection_pool)")
        return self._pool

    def selection_units(self) -> list:
        return self.pool.queries

    def selection_scorer(self) -> QueryScorer:
        return self._scoring(QueryScorer.whole({SELECT_SPLIT: self.pool}, self.config.show_progress))

    def training_dev(self) -> str:
        from sentune.tasks.user_queries import QUERIES_PREFIX

        return f"{QUERIES_PREFIX}{self.selection_folder()}"

    def use_selection_pool(self) -> None:
        """The selection queries are ranked against a pool of the corpus (sentune.tasks.user_queries.selection_pool,
        built once from the unchanged model and kept in selection_folder()); the confirmation and test queries against
        the whole corpus. Every score of the run, training's included, then reads the same pool."""
        from sentune.tasks.user_queries import RankedQueries, selection_pool

        dev, split = self.task.dev, self.inputs.split
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
        self._pool = pool = read_beir_folder(folder, SELECT_SPLIT)  # as a resumed run reads it: the same texts either way
        confirm = RetrievalSet([dev.queries[i] for i in split.confirm], dev.corpus)
        splits = {"dev": [RankedQueries(pool, split.select), RankedQueries(confirm, split.confirm)]}
        if self.task.test is not None:
            splits["test"] = [RankedQueries(self.task.test, np.arange(self.task.test.units))]
        print(f"selection pool: {len(pool.corpus)} of the {len(dev.corpus)} documents for the {len(pool.queries)} selection queries", flush=True)
        self.scorer = self._scoring(QueryScorer(splits, self.config.show_progress))
        if untuned is not None:  # the same texts in the pooled scorer's order: the untuned candidates need no second pass
            texts, vectors = untuned
            row = {text: i for i, text in enumerate(texts)}
            order = [row[text] for text in self.scorer.sentences()]
            self._save_untuned({name: array[order] for name, array in vectors.items()})

    def corpus_to_encode(self) -> int:
        return 0 if self._documents_rows() is not None else super().corpus_to_encode()

    def corpus_vectors(self) -> np.ndarray:
        """The post-processors are fitted on the documents as they are ranked: their vectors under the model's own
        pipeline, which the untuned encoding of every dev and test text already holds (no second pass over passages)."""
        return self.document_vectors() if self._documents_rows() is not None else super().corpus_vectors()

    def document_vectors(self) -> np.ndarray:
        """Every document's vector under the model's own pipeline (rows: retrieval_dev().corpus), from the untuned pass."""
        rows = self._documents_rows()
        if rows is None:
            raise RuntimeError("every document is scored (the confirmation queries rank the whole corpus)")
        return self.untuned_vectors()[rows]

    def _documents_rows(self) -> list[int] | None:
        """Each document's row in the untuned vectors (scorer.sentences()); None when some document is not scored."""
        row = {text: i for i, text in enumerate(self.scorer.sentences())}
        rows = [row.get(d.text) for d in self.task.dev.corpus]
        return None if any(r is None for r in rows) else rows  # type: ignore[return-value]

    def held_scorer(self, queries: list) -> QueryScorer:
        """Scores `queries` (held-out selection queries) against the selection pool, as every selection query is ranked."""
        from sentune.tasks.user_queries import RankedQueries

        return QueryScorer({"held": [RankedQueries(RetrievalSet(queries, self.pool.corpus), np.arange(len(queries)))]})

    # -- BM25 over the whole document collection, and systems fused from it --
    def retrieval_dev(self) -> RetrievalSet:
        return self.task.dev

    def rank_with(self, ranker) -> dict[str, np.ndarray]:
        """Every split's per-query nDCG@10 ×100 under a ranker of documents (a system that is not one cosine)."""
        return self.scorer.of_ranker(ranker)

    def lexical_settings(self, stemmed: bool = True, fitted: bool = False):
        from sentune.search.lexical import LexicalSettings

        if fitted:
            return self.fitted_lexical().settings
        return LexicalSettings() if stemmed else LexicalSettings(stemmer=None)

    def fitted_lexical(self):
        """BM25's k1, b and title weight fitted on the selection queries alone, each ranked against the whole corpus
        (sentune.search.lexical_fit), once per run: a resumed run reads the fit a record keeps (recorded_fit). The
        fit's `read` names the queries it scored."""
        from sentune.search.lexical_fit import fit_lexical

        if self._fit is None:
            found = self.recorded_fit()
            if found is None:
                dev = self.retrieval_dev()
                found = fit_lexical(dev.corpus, [dev.queries[i] for i in self.inputs.split.select], self.lexical_settings())
                print(f"BM25 fitted on the selection queries: {found.settings.label}", flush=True)
                if found.index is not None:  # the fit's best index is the fitted BM25: no second build
                    self._lexical.setdefault(found.settings, self._ranker(found.index))
            self._fit = replace(found, index=None)  # the cache holds the index (or an equal one)
        return self._fit

    def recorded_fit(self):
        """The fit a record of this run keeps (`hybrid`'s, `bm25-fitted`'s: detail["lexical_fit"]), when it read these
        selection queries from these fixed settings; else None."""
        from sentune.search.lexical_fit import LexicalFit

        fixed = self.lexical_settings()
        dev = self.retrieval_dev()
        selection = [dev.queries[i].id for i in self.inputs.split.select]
        for record in self.records.values():
            saved = record.detail.get("lexical_fit")
            if saved and saved.get("fixed") == fixed.label and saved.get("read_queries") == selection:
                return LexicalFit.from_record(saved, fixed)
        return None

    def knows_lexical_fit(self) -> bool:
        """Whether the fitted settings are known without a fit: fitted in this process, or kept by a record."""
        return self._fit is not None or self.recorded_fit() is not None

    def lexical(self, stemmed: bool = True, fitted: bool = False):
        """BM25 over every document (built once per settings; sentune.search.lexical.CollectionRanker): a part ranking
        a subset of them reads the collection's statistics. `fitted`: with the settings fitted on the selection queries."""
        from sentune.search.lexical import LexicalIndex

        settings = self.lexical_settings(stemmed, fitted)
        if settings not in self._lexical:
            self._lexical[settings] = self._ranker(LexicalIndex.of_documents(self.retrieval_dev().corpus, settings, show_progress=self.config.show_progress))
        return self._lexical[settings]

    def hybrid_lexical(self):
        """The BM25 the hybrids fuse, and their weights are chosen with: fitted on the selection queries."""
        return self.lexical(fitted=True)

    def _ranker(self, index):
        from sentune.search.lexical import CollectionRanker
        from sentune.tasks.retrieval import DEPTH

        return CollectionRanker(index, [d.id for d in self.retrieval_dev().corpus], DEPTH)

    # -- long documents as passages (sentune.search.passages), for the unchanged model --
    def unchanged_passages(self):
        """The unchanged model's MaxP view of every document: its first windows (the untuned vectors) and its later
        windows, encoded once and kept in OUT/data/passages/; with index.json's record of them (window, stride, count)."""
        from sentune.core.encode import Encoder
        from sentune.search.passages import PassageVectors, later_windows, window_tokens

        if self._passages is None:
            documents = self.retrieval_dev().corpus
            window = window_tokens(self.base)
            stride = max(1, window // 2)
            texts, owners = later_windows(self.base.tokenizer, [d.text for d in documents], window, stride)
            path = self.out / "data" / "passages" / f"unchanged-window-{window}-stride-{stride}.npy"
            if path.is_file() and len(np.load(path, mmap_mode="r")) == len(texts):
                vectors = np.load(path)
            else:
                encoder = Encoder(self.base, "model", show_progress=self.config.show_progress, desc="encoding the documents' later windows")
                vectors = encoder.encode(texts) if texts else np.zeros((0, self.untuned_vectors().shape[1]), dtype=np.float32)
                path.parent.mkdir(parents=True, exist_ok=True)
                np.save(path.with_suffix(".partial.npy"), vectors)
                os.replace(path.with_suffix(".partial.npy"), path)
            first = self.document_vectors()
            self._passages = (PassageVectors(first, vectors, owners), {"kind": "maxp", "window": window, "stride": stride, "count": len(texts)})
        return self._passages

    def later_window_count(self) -> int:
        """How many later windows the unchanged model's MaxP encodes (tokenizing only)."""
        from sentune.search.passages import later_windows, window_tokens

        window = window_tokens(self.base)
        return len(later_windows(self.base.tokenizer, [d.text for d in self.retrieval_dev().corpus], window, max(1, window // 2))[0])

    def choose_passages(self) -> dict:
        """The unchanged model's documents as their first window or by their best passage (MaxP), whichever ranks the
        selection queries better against the whole corpus (a tie: the first window); the record names the queries read."""
        from sentune.search.fusion import id_order, top_by_score
        from sentune.search.passages import dense_scores
        from sentune.tasks.retrieval import DEPTH, HEADLINE, per_query_metrics

        if self._passage_choice is None:
            maxp, record = self.unchanged_passages()
            dev = self.retrieval_dev()
            queries = [dev.queries[i] for i in self.inputs.split.select]
            row = {text: i for i, text in enumerate(self.scorer.sentences())}
            query_vectors = self.untuned_vectors()[[row[q.text] for q in queries]]
            ids = [d.id for d in dev.corpus]
            position = {doc: i for i, doc in enumerate(ids)}
            own = [position.get(q.id) for q in queries]

            def score(vectors) -> float:
                ranked = top_by_score(dense_scores(query_vectors, vectors), id_order(ids), DEPTH, exclude=own)
                return 100 * float(per_query_metrics([[ids[i] for i in r] for r in ranked], queries)[HEADLINE].mean())

            first, best = score(maxp.documents), score(maxp)
            chosen = "maxp" if round(best, 9) > round(first, 9) else "first"
            self._passage_choice = record | {"chosen": chosen, "first_score": first, "maxp_score": best, "read_queries": [q.id for q in queries]}
            print(
                f"documents by their best passage (MaxP) or their first window: {chosen} (selection, whole corpus: first {first:.2f}, MaxP {best:.2f})",
                flush=True,
            )
        return self._passage_choice

    def maxp_ranker(self):
        """Rank by the unchanged model's MaxP scores (a query's own document left out)."""
        from sentune.search.fusion import id_order, top_by_score
        from sentune.search.passages import dense_scores
        from sentune.tasks.retrieval import DEPTH

        maxp = self.unchanged_passages()[0]
        row = {text: i for i, text in enumerate(self.scorer.sentences())}
        position = {d.id: i for i, d in enumerate(self.retrieval_dev().corpus)}

        def ranked(queries, corpus) -> list[list[int]]:
            ids = [d.id for d in corpus]
            own = {doc: i for i, doc in enumerate(ids)}
            scores = dense_scores(self.untuned_vectors()[[row[q.text] for q in queries]], maxp.subset([position[d] for d in ids]))
            return top_by_score(scores, id_order(ids), DEPTH, exclude=[own.get(q.id) for q in queries])

        return ranked

    def hybrid_ranker(self, vectors: np.ndarray, fusion: Fusion, texts: list[str] | None = None, passages=None):
        """Rank by `fusion` of BM25 (fitted on the selection queries) and the cosine of `vectors` (rows: `texts`, by
        default scorer.sentences()); with `passages` (sentune.search.passages.PassageVectors of every document, the
        queries still `vectors`' rows), each document's best passage's cosine instead."""
        from sentune.search.fusion import hybrid_rank
        from sentune.tasks.retrieval import DEPTH

        row = {text: i for i, text in enumerate(self.scorer.sentences() if texts is None else texts)}
        position = {d.id: i for i, d in enumerate(self.retrieval_dev().corpus)}

        def fused(queries, corpus) -> list[list[int]]:
            ids = [d.id for d in corpus]
            lexical = self.hybrid_lexical().scores([q.text for q in queries], ids)
            query_vectors = vectors[[row[q.text] for q in queries]]
            doc_vectors = vectors[[row[d.text] for d in corpus]] if passages is None else passages.subset([position[d] for d in ids])
            return hybrid_rank(query_vectors, doc_vectors, lambda rows: lexical[rows], ids, fusion, depth=DEPTH, query_ids=[q.id for q in queries])

        return fused

    def hard_negatives(self, queries) -> dict[str, tuple[str, str]]:
        """Per query: the best-ranked document over the whole corpus that is not judged relevant to it (nor the query's
        own document) under BM25 and under the unchanged model, as texts. A query's pair does not depend on the queries
        mined with it: each is mined once per run, whichever folds and refit ask for it."""
        todo = list({(q.id, q.text): q for q in queries if (q.id, q.text) not in self._negatives}.values())
        if todo:
            mined = self._mine(todo)
            self._negatives.update({(q.id, q.text): mined[q.id] for q in todo})
        return {q.id: self._negatives[(q.id, q.text)] for q in queries}

    def _mine(self, queries) -> dict[str, tuple[str, str]]:
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
        dense = rank(query_vectors, self.document_vectors(), ids, depth=depth)
        lexical = top_by_score(self.lexical().scores(texts, ids), id_order(ids), depth)
        found = {}
        for q, by_dense, by_bm25 in zip(queries, dense, lexical, strict=True):
            first = lambda ranked: next(documents[i].text for i in ranked if ids[i] not in q.relevant and ids[i] != q.id)  # noqa: E731,B023
            found[q.id] = (first(by_bm25), first(by_dense))
        return found

    def choose_fusion_weight(self, vectors: np.ndarray, passages=None) -> tuple[Fusion, dict[float, float], list[str]]:
        """The convex fusion whose weight α is best on the selection queries, each ranked against the whole corpus (not
        the pool: the normalisation reads every document's score, as it will when the system serves); ties: the α
        nearer 0.5. Only the selection queries are read: their ids are returned with the fusion and the α curve, and
        the record keeps them."""
        from sentune.search.fusion import ALPHAS
        from sentune.tasks.retrieval import HEADLINE, per_query_metrics

        dev, split = self.retrieval_dev(), self.inputs.split
        queries = [dev.queries[i] for i in split.select]
        curve = {}
        for alpha in ALPHAS:
            ranked = self.hybrid_ranker(vectors, Fusion("convex", alpha), passages=passages)(queries, dev.corpus)
            curve[alpha] = 100 * float(per_query_metrics([[dev.corpus[i].id for i in r] for r in ranked], queries)[HEADLINE].mean())
        best = max(curve, key=lambda a: (round(curve[a], 9), -abs(a - 0.5)))
        return Fusion("convex", best), curve, [q.id for q in queries]


def as_search(ctx: Context) -> SearchContext:
    """The search state of a run's context (sentune.adapt.run makes a SearchContext for a search run, and search
    candidates are planned for search runs only)."""
    if not isinstance(ctx, SearchContext):
        raise TypeError("a search candidate in a run on pairs")
    return ctx
