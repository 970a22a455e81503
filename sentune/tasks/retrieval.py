"""Retrieval evaluation: rank a corpus for each query by cosine similarity and score the ranking against the
relevance judgements (BEIR's protocol, Thakur et al., 2021).

Metrics, per query, then averaged over the queries (×100, as every other sentune score):

- nDCG@10 (the headline, BEIR's): DCG = Σ_{i≤10} g_i / log2(i+1) over the ranked documents' grades g_i, divided by
  the DCG of the ideal ranking (trec_eval's linear gain; with 0/1 judgements it is sentence-transformers'
  InformationRetrievalEvaluator's formula, which a test checks to 1e-6);
- MRR@10: 1 / rank of the first relevant document within the top 10 (0 when none);
- Recall@k: relevant documents in the top k / relevant documents;
- MAP@100: Σ over relevant hits in the top 100 of precision at that rank, / min(100, relevant documents).

Ties in score are ranked by document id, as InformationRetrievalEvaluator does, so a ranking never depends on
the corpus order. `skip_same_id` drops a document whose id is the query's (BEIR's rule for Quora, where the questions
are both).

The search is exact at every size: every document is scored, with NumPy in blocks of documents (memory stays bounded),
or, from FAISS_FROM_PAIRS query-document pairs on and when faiss is installed (`pip install sentune[search]`), with
FAISS's flat inner-product index, the same exact search, faster at that size (benchmarks/results/search_speed.md
measures both and an approximate HNSW index, which did not pay off at any measured size: an evaluation searches once).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sentune.core.metrics import DEPTH, ranking_metrics
from sentune.data.beir import Query

HEADLINE = "ndcg@10"
BLOCK = 50_000  # documents scored at once: a 1,000-query block of 50k documents is 200 MB of float32 scores
FAISS_FROM_PAIRS = 100_000_000  # queries × documents from which FAISS's exact flat index replaces NumPy (about 3 s in NumPy)
FAISS_SLACK = 16  # extra results asked of FAISS, so documents tied at the cut are re-ranked by id


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32), so a dot product is a cosine."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def rank(
    query_vectors: np.ndarray,
    doc_vectors: np.ndarray,
    doc_ids: Sequence[str],
    *,
    depth: int = DEPTH,
    query_ids: Sequence[str] | None = None,
    skip_same_id: bool = False,
) -> list[list[int]]:
    """The indices of the top `depth` documents for each query, best first, by cosine similarity; ties by document id."""
    queries = unit_rows(query_vectors)
    n_docs = len(doc_ids)
    id_order = np.empty(n_docs, dtype=np.int64)
    id_order[np.argsort(np.asarray(doc_ids, dtype=object), kind="stable")] = np.arange(n_docs)  # rank of each id
    keep = depth + (1 if skip_same_id else 0)
    faiss = _faiss() if len(queries) * n_docs >= FAISS_FROM_PAIRS else None
    if faiss is not None:
        ranked = _rank_faiss(faiss, queries, doc_vectors, id_order, keep)
        return _finish(ranked, doc_ids, depth, query_ids, skip_same_id)
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    best = [empty] * len(queries)  # per query: (document indices, scores) of the best so far, best first
    for start in range(0, n_docs, BLOCK):
        scores = queries @ unit_rows(doc_vectors[start : start + BLOCK]).T
        take = min(keep, scores.shape[1])
        part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        boundary = np.take_along_axis(scores, part, axis=1).min(axis=1)
        # argpartition keeps any `take` of the scores tied at the boundary: widen those rows to every tied
        # document so the id tie-break below decides, never the block layout
        tied = (scores >= boundary[:, None]).sum(axis=1) > take
        for row in range(len(queries)):
            chosen = np.flatnonzero(scores[row] >= boundary[row]) if tied[row] else part[row]
            index = np.concatenate([best[row][0], chosen + start])
            values = np.concatenate([best[row][1], scores[row, chosen]])
            order = np.lexsort((id_order[index], -values))[:keep]
            best[row] = (index[order], values[order])
    return _finish([indices.tolist() for indices, _ in best], doc_ids, depth, query_ids, skip_same_id)


def _faiss():
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def _rank_faiss(faiss, queries: np.ndarray, doc_vectors: np.ndarray, id_order: np.ndarray, keep: int) -> list[list[int]]:
    """The same exact search by FAISS's flat inner-product index; its top keep + FAISS_SLACK re-sorted with ties by id."""
    index = faiss.IndexFlatIP(queries.shape[1])
    for start in range(0, len(doc_vectors), BLOCK):
        index.add(np.ascontiguousarray(unit_rows(doc_vectors[start : start + BLOCK])))
    scores, found = index.search(np.ascontiguousarray(queries), min(len(doc_vectors), keep + FAISS_SLACK))
    ranked = []
    for row_scores, row in zip(scores, found, strict=True):
        valid = row >= 0
        order = np.lexsort((id_order[row[valid]], -row_scores[valid]))[:keep]
        ranked.append(row[valid][order].tolist())
    return ranked


def _finish(ranked: list[list[int]], doc_ids: Sequence[str], depth: int, query_ids: Sequence[str] | None, skip_same_id: bool) -> list[list[int]]:
    if skip_same_id:
        if query_ids is None:
            raise ValueError("skip_same_id needs query_ids")
        ranked = [[d for d in row if doc_ids[d] != qid][:depth] for row, qid in zip(ranked, query_ids, strict=True)]
    return [row[:depth] for row in ranked]


def per_query_metrics(ranked_doc_ids: Sequence[Sequence[str]], queries: Sequence[Query]) -> dict[str, np.ndarray]:
    """Every ranking metric (sentune.core.metrics) for every query (0-1 scale), from its ranked document ids and its
    judgements."""
    return {m.name: np.array([m.per_query(ranked, q.relevant) for ranked, q in zip(ranked_doc_ids, queries, strict=True)]) for m in ranking_metrics()}  # type: ignore[misc]


def query_scores(
    query_vectors: np.ndarray, doc_vectors: np.ndarray, queries: Sequence[Query], doc_ids: Sequence[str], *, skip_same_id: bool = False
) -> dict[str, np.ndarray]:
    """Per-query metrics of one embedding of the queries and the corpus (the unit a bootstrap resamples)."""
    ranked = rank(query_vectors, doc_vectors, doc_ids, query_ids=[q.id for q in queries], skip_same_id=skip_same_id)
    return per_query_metrics([[doc_ids[i] for i in row] for row in ranked], queries)


def evaluate_retrieval(
    queries: Sequence[Query], query_vectors: np.ndarray, doc_ids: Sequence[str], doc_vectors: np.ndarray, *, skip_same_id: bool = False
) -> dict:
    """The task result: every metric averaged over the queries, ×100, with the counts."""
    scores = query_scores(query_vectors, doc_vectors, queries, doc_ids, skip_same_id=skip_same_id)
    result = {name: 100.0 * float(values.mean()) for name, values in scores.items()}
    return {**result, "main": HEADLINE, "n_queries": len(queries), "n_documents": len(doc_ids), "search": "exact"}


def reference_evaluator(queries: Sequence[Query], corpus: Sequence, show_progress: bool = False):
    """sentence-transformers' InformationRetrievalEvaluator on the same queries, documents and judgements, asking for
    these metrics: the independent implementation sentune's numbers are checked against (tests, benchmarks). Its
    results are keyed `cosine_<metric>`, on the 0-1 scale; it reads 0/1 relevance only."""
    from sentence_transformers.evaluation import InformationRetrievalEvaluator

    return InformationRetrievalEvaluator(
        queries={q.id: q.text for q in queries},
        corpus={d.id: d.text for d in corpus},
        relevant_docs={q.id: set(q.relevant) for q in queries},
        mrr_at_k=[10],
        ndcg_at_k=[10],
        accuracy_at_k=[10],
        precision_recall_at_k=[10, 100],
        map_at_k=[100],
        show_progress_bar=show_progress,
        batch_size=64,
    )
