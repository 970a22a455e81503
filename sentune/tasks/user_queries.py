"""Scoring a model on a user's queries with known relevant documents (retrieval; `sentune adapt --dev/--test` given a
retrieval set, `eval.dev: queries:DIR` in a recipe).

As BEIR's EvaluateRetrieval does by default, a document whose id is the query's is never a result (Quora-style sets, where
the questions are both queries and documents; a no-op where ids differ). The unit is a query: each query's nDCG@10 ×100 (sentune.tasks.retrieval) is computed when it is ranked, and the score is
their mean (metric `ndcg@10` of sentune.tasks.bootstrap), so a bootstrap or permutation test resamples queries. The
model is scored with its own pipeline ('model' pooling), as `SentenceTransformer(path).encode` would use it.

QueryScorer has PairScorer's interface (sentences / of_vectors / encode / of_model), so everything that scores pairs
(adapt's candidates, post-processors transforming vectors already encoded) scores queries the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sentence_transformers.evaluation import SentenceEvaluator

from sentune.data.beir import Document, Query, RetrievalSet, read_beir_folder
from sentune.tasks.dev_sets import SELECT_SPLIT as SELECT_SPLIT
from sentune.tasks.retrieval import HEADLINE, per_query_metrics, rank
from sentune.tasks.user_pairs import PairsEvaluator, Scorer


@dataclass(frozen=True)
class RankedQueries:
    """Queries ranked against one corpus; `positions`: where their values go in their split's array."""

    data: RetrievalSet
    positions: np.ndarray


class QueryScorer(Scorer):
    """Per-query nDCG@10 ×100 of named splits, each made of query sets ranked against their own corpus (adapt's dev
    split: the selection queries against the selection pool, the confirmation queries against the whole corpus). Every
    distinct text of the splits asked for is encoded once."""

    def __init__(self, splits: dict[str, list[RankedQueries]], show_progress: bool = False) -> None:
        self.splits, self.show_progress = splits, show_progress

    @classmethod
    def whole(cls, splits: dict[str, RetrievalSet], show_progress: bool = False) -> QueryScorer:
        """Each split's queries against its own whole corpus."""
        return cls({name: [RankedQueries(data, np.arange(len(data.queries)))] for name, data in splits.items()}, show_progress)

    def size(self, split: str) -> int:
        return sum(len(part.positions) for part in self.splits[split])

    def sentences(self, splits: list[str] | None = None) -> list[str]:
        """Every distinct query and document text of the splits, in order (the rows of_vectors reads)."""
        texts: dict[str, None] = {}
        for split in splits or list(self.splits):
            for part in self.splits[split]:
                texts.update(dict.fromkeys(q.text for q in part.data.queries))
                texts.update(dict.fromkeys(d.text for d in part.data.corpus))
        return list(texts)

    def of_vectors(self, vectors: np.ndarray, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        row = {text: i for i, text in enumerate(self.sentences(splits or list(self.splits)))}

        def by_cosine(queries: list[Query], corpus: list[Document]) -> list[list[int]]:
            query_vectors, doc_vectors = vectors[[row[q.text] for q in queries]], vectors[[row[d.text] for d in corpus]]
            return rank(query_vectors, doc_vectors, [d.id for d in corpus], query_ids=[q.id for q in queries], skip_same_id=True)

        return self.of_ranker(by_cosine, splits)

    def of_ranker(self, ranker: Callable[[list[Query], list[Document]], list[list[int]]], splits: list[str] | None = None) -> dict[str, np.ndarray]:
        """Each query's nDCG@10 ×100 under any ranking of a part's corpus (document indices, best first; a lexical
        baseline ranks without vectors)."""
        out = {}
        for split in splits or list(self.splits):
            values = np.zeros(self.size(split))
            for part in self.splits[split]:
                queries, corpus = part.data.queries, part.data.corpus
                ranked = [[corpus[i].id for i in row] for row in ranker(queries, corpus)]
                values[part.positions] = 100 * per_query_metrics(ranked, queries)[HEADLINE]
            out[split] = values
        return out


class QueriesEvaluator(PairsEvaluator):
    """A sentence-transformers evaluator on a BEIR folder of queries (the trainer calls it every eval_steps): the mean
    nDCG@10 ×100; with `record` set, every evaluation's per-query values go to record/step-N.npy (racing reads them)."""

    def __init__(self, data: str | Path | RetrievalSet, name: str = "dev", split: str = SELECT_SPLIT) -> None:
        SentenceEvaluator.__init__(self)  # not PairsEvaluator's: no pairs file to read
        self.record: Path | None = None
        self.data = data if isinstance(data, RetrievalSet) else read_beir_folder(data, split)  # read (and checked) once, not every N steps
        self.gold = np.zeros(len(self.data.queries))  # a query's value is its own score: nothing to compare it with
        self.name = name
        self.metric = HEADLINE
        self.primary_metric = f"{name}_{HEADLINE}"
        self.title = f"{Path(data).name if not isinstance(data, RetrievalSet) else name} nDCG@10"

    def similarities(self, model) -> np.ndarray:
        """Each query's nDCG@10 ×100 (what PairsEvaluator records as its pairs' cosines)."""
        return QueryScorer.whole({self.name: self.data}).of_model(model)[self.name]


POOL_DEPTH = 30  # each selection query's top documents under the unchanged model that join the selection pool


def selection_pool(
    data: RetrievalSet, query_vectors: np.ndarray, doc_vectors: np.ndarray, depth: int = POOL_DEPTH, lexical: np.ndarray | None = None
) -> RetrievalSet:
    """The selection queries against a pool of the corpus: every relevant document, each query's top `depth` under
    the unchanged model (`query_vectors`, `doc_vectors`: its embeddings of data.queries and data.corpus) and, given
    `lexical` (BM25 scores, queries × data.corpus), its top `depth` documents that share a word with it, in corpus
    order. Training evaluates every few steps: ranking a pool instead of the corpus makes each evaluation cost a few
    thousand documents whatever the corpus's size. A candidate ranks only the pool, so documents outside it can never
    push relevant ones down: pool scores flatter candidates that differ most from the unchanged model, and a pool only
    the dense model filled would flatter it against BM25 and the hybrid. That bias can pick the candidate but cannot
    confirm it: the confirmation queries rank the whole corpus."""

    ids = [d.id for d in data.corpus]
    query_ids = [q.id for q in data.queries]
    chosen = {doc for q in data.queries for doc in q.relevant}
    for row in rank(query_vectors, doc_vectors, ids, depth=depth, query_ids=query_ids, skip_same_id=True):
        chosen.update(ids[i] for i in row)
    if lexical is not None:
        for row, query_id in zip(np.asarray(lexical), query_ids, strict=True):
            top = np.argsort(-row, kind="stable")[: depth + 1]
            chosen.update(ids[i] for i in top if row[i] > 0 and ids[i] != query_id)
    return RetrievalSet(data.queries, [d for d in data.corpus if d.id in chosen])
