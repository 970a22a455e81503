"""Exact dense search of an index: every document's cosine, ties by the index's precomputed id order
(sentune.search.documents), so a query sorts no ids. The same scores and ranking as sentune.tasks.retrieval.rank
(the evaluation's): the same product in the same blocks of documents, or FAISS's flat index from the same size on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sentune.search.fusion import top_by_score


def dense_top(query_vectors: np.ndarray, doc_vectors: np.ndarray, ties: np.ndarray, depth: int, exclude: Sequence[int | None] | None = None) -> list[list[int]]:
    """Per query, the rows of the `depth` documents of highest cosine, best first, ties by `ties`; `exclude[q]`: a row
    never returned for query q (its own document)."""
    from sentune.tasks.retrieval import BLOCK, FAISS_FROM_PAIRS, _faiss, _rank_faiss, unit_rows

    queries = unit_rows(query_vectors)
    keep = depth + (exclude is not None)
    faiss = _faiss() if len(queries) * len(doc_vectors) >= FAISS_FROM_PAIRS else None
    if faiss is not None:
        ranked = _rank_faiss(faiss, queries, doc_vectors, ties, keep)
    else:
        best = [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))] * len(queries)  # per query: rows and scores so far
        for start in range(0, len(doc_vectors), BLOCK):
            scores = queries @ unit_rows(doc_vectors[start : start + BLOCK]).T
            for row, chosen in enumerate(top_by_score(scores, ties[start : start + BLOCK], keep)):
                rows = np.concatenate([best[row][0], np.asarray(chosen, dtype=np.int64) + start])
                values = np.concatenate([best[row][1], scores[row, chosen]])
                order = np.lexsort((ties[rows], -values))[:keep]
                best[row] = (rows[order], values[order])
        ranked = [rows.tolist() for rows, _ in best]
    drops = exclude if exclude is not None else [None] * len(ranked)
    return [[d for d in row if d != drop][:depth] for row, drop in zip(ranked, drops, strict=True)]
