"""Hybrid retrieval: one ranking from a dense (cosine) and a lexical (BM25) score of every document.

- convex (the default; Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023,
  found it above RRF once its weight is tuned on a few queries): s(d) = α · MM(dense)(d) + (1 − α) · MM(lexical)(d),
  where MM maps one query's scores over the documents ranked to [0, 1] by their min and max; a query whose scores are
  all equal (no document shares a word with it, for BM25) gets 0 for every document from that system, so the other
  decides. α = 1 is the dense ranking, α = 0 BM25's (ties by document id in both).
- rrf (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual rank learning
  methods", SIGIR 2009): s(d) = Σ_systems 1 / (k + rank_system(d)), k = 60, over each system's top RRF_DEPTH; a
  document a system does not rank (outside its top, or no BM25 match) adds nothing from it. Reported beside convex.

Ties of the fused score are ranked by document id, as every sentune ranking (sentune.tasks.retrieval).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sentune.search.passages import PassageVectors, UnitVectors, dense_scores

ALPHAS = tuple(round(a, 2) for a in np.linspace(0.0, 1.0, 21))  # the convex weights tried on the selection queries
RRF_K = 60
RRF_DEPTH = 1000  # as pyserini's fusion of BEIR runs


def minmax(scores: np.ndarray) -> np.ndarray:
    """Each row to [0, 1] by its own min and max (float64); a constant row to 0."""
    scores = np.asarray(scores, dtype=np.float64)
    low, high = scores.min(axis=1, keepdims=True), scores.max(axis=1, keepdims=True)
    span = high - low
    return np.divide(scores - low, span, out=np.zeros_like(scores), where=span > 0)


def id_order(doc_ids: Sequence[str]) -> np.ndarray:
    """Each document's position in id order: the tie-break of every ranking."""
    order = np.empty(len(doc_ids), dtype=np.int64)
    order[np.argsort(np.asarray(doc_ids, dtype=object), kind="stable")] = np.arange(len(doc_ids))
    return order


def top_by_score(scores: np.ndarray, ties: np.ndarray, depth: int, exclude: Sequence[int | None] | None = None) -> list[list[int]]:
    """Per row, the indices of the `depth` highest scores, best first, ties by `ties` (id_order); `exclude[row]`: a
    document index never returned for that row (the query's own document, Quora-style sets)."""
    ranked = []
    for row, values in enumerate(np.asarray(scores)):
        drop = exclude[row] if exclude is not None else None
        keep = min(depth + (drop is not None), len(values))
        if keep < len(values):  # the top `keep` and every document tied with the last of them, then sorted exactly
            boundary = np.partition(values, len(values) - keep)[len(values) - keep]
            chosen = np.flatnonzero(values >= boundary)
        else:
            chosen = np.arange(len(values))
        order = chosen[np.lexsort((ties[chosen], -values[chosen]))]
        ranked.append([int(i) for i in order if i != drop][:depth])
    return ranked


@dataclass(frozen=True)
class Fusion:
    """How a hybrid system combines its two scores: convex with weight `alpha` on the dense one, or rrf."""

    kind: str = "convex"
    alpha: float = 0.5
    k: int = RRF_K

    def fuse(self, dense: np.ndarray, lexical: np.ndarray, ties: np.ndarray) -> np.ndarray:
        """The fused score of every document (rows: queries), from both systems' scores of the same documents."""
        if self.kind == "convex":
            return self.alpha * minmax(dense) + (1.0 - self.alpha) * minmax(lexical)
        if self.kind == "rrf":
            return reciprocal_rank(dense, ties, self.k, matched=None) + reciprocal_rank(lexical, ties, self.k, matched=lexical > 0)
        raise ValueError(f"unknown fusion {self.kind!r}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "alpha": self.alpha} if self.kind == "convex" else {"kind": self.kind, "k": self.k}

    @classmethod
    def from_dict(cls, saved: dict) -> Fusion:
        """What to_dict wrote; anything else (a convex fusion without its weight, an unknown kind) is a ValueError,
        never a guessed weight."""
        kind = saved.get("kind") if isinstance(saved, dict) else None
        if kind == "convex" and isinstance(saved.get("alpha"), int | float) and 0.0 <= saved["alpha"] <= 1.0:
            return cls("convex", float(saved["alpha"]))
        if kind == "rrf" and isinstance(saved.get("k"), int) and saved["k"] > 0:
            return cls("rrf", k=saved["k"])
        raise ValueError(f"not a fusion sentune writes: {saved!r} (convex with an alpha from 0 to 1, or rrf with k)")

    @property
    def label(self) -> str:
        return f"convex, α = {self.alpha:g} on the dense scores" if self.kind == "convex" else f"reciprocal rank fusion, k = {self.k}"


def reciprocal_rank(scores: np.ndarray, ties: np.ndarray, k: int, matched: np.ndarray | None, depth: int = RRF_DEPTH) -> np.ndarray:
    """1 / (k + rank) for each row's top `depth` documents (rank from 1), 0 elsewhere; `matched`: documents a system
    ranks at all (False: it adds nothing for them)."""
    out = np.zeros(np.shape(scores), dtype=np.float64)
    for row, top in enumerate(top_by_score(scores, ties, depth)):
        top = [d for d in top if matched is None or matched[row, d]]
        out[row, top] = 1.0 / (k + np.arange(1, len(top) + 1))
    return out


QUERY_BLOCK = 256  # queries fused at once: a block of 256 queries × 1M documents is 2 GB of float64 scores


def hybrid_rank(
    query_vectors: np.ndarray,
    doc_vectors: np.ndarray,
    lexical_scores,
    doc_ids: Sequence[str],
    fusion: Fusion,
    *,
    depth: int,
    query_ids: Sequence[str] | None = None,
    with_scores: bool = False,
):
    """The top `depth` documents per query under `fusion` of the cosine and the lexical score (and, `with_scores`,
    their fused scores). `lexical_scores(rows)`: the BM25 scores of those queries (rows of query_vectors) against
    these documents. With `query_ids`, a document whose id is the query's is neither ranked nor normalised over
    (BEIR's rule for Quora-style sets)."""
    position = {doc: i for i, doc in enumerate(doc_ids)}
    own = [position.get(q) for q in query_ids] if query_ids is not None else None
    return hybrid_rank_rows(query_vectors, doc_vectors, lexical_scores, id_order(doc_ids), fusion, depth=depth, own=own, with_scores=with_scores)


def hybrid_rank_rows(
    query_vectors: np.ndarray,
    doc_vectors: np.ndarray | PassageVectors | UnitVectors,
    lexical_scores,
    ties: np.ndarray,
    fusion: Fusion,
    *,
    depth: int,
    own: Sequence[int | None] | None = None,
    with_scores: bool = False,
):
    """hybrid_rank with the documents' id order given (`ties`, id_order's) and each query's own document as a row
    (`own[q]`, None: none), for an index whose ids stay in their file. `doc_vectors`: vectors, or an index's
    sentune.search.passages.PassageVectors (each document its best passage's cosine)."""
    ranked: list[list[int]] = []
    values: list[list[float]] = []
    for start in range(0, len(query_vectors), QUERY_BLOCK):
        rows = np.arange(start, min(start + QUERY_BLOCK, len(query_vectors)))
        dense = dense_scores(query_vectors[rows], doc_vectors)  # MaxP's for an index of passages (sentune.search.passages)
        lexical = np.asarray(lexical_scores(rows), dtype=np.float32)
        block_own = [own[int(r)] for r in rows] if own is not None else [None] * len(rows)
        for i, doc in enumerate(block_own):
            if doc is not None:  # out of both normalisations: the row's minimum changes neither min nor max
                dense[i, doc] = np.delete(dense[i], doc).min() if len(ties) > 1 else 0.0
                lexical[i, doc] = np.delete(lexical[i], doc).min() if len(ties) > 1 else 0.0
        fused = fusion.fuse(dense, lexical, ties)
        block = top_by_score(fused, ties, depth, exclude=block_own)
        ranked += block
        values += [[float(fused[i, d]) for d in row] for i, row in enumerate(block)]
    return (ranked, values) if with_scores else ranked
