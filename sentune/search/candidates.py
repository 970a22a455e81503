"""Hybrid ranking from each system's top candidates, as a search engine's hybrid query does (OpenSearch's hybrid query with
its normalization processor, Elasticsearch's linear retriever), instead of scoring every document with both systems:

- each system returns its own top K: the approximate dense index its K nearest documents (cosine), BM25 its K best
  documents that share a word with the query;
- convex: within each system's K candidates, its scores are min-max normalised to [0, 1] (OpenSearch's `min_max`);
  a candidate the other system did not return gets 0 from it, as the lowest of its candidates does; the fused score
  is α · dense + (1 − α) · BM25 (OpenSearch's `arithmetic_mean` with weights α and 1 − α), over the union of both
  candidate sets. A system whose candidates all score the same gives 0 to each, as sentune.search.fusion.minmax does
  for a constant row (OpenSearch gives such a lone score 1.0; one rule is kept throughout sentune);
- rrf: Σ 1 / (k + rank) over the systems that returned the document, rank from 1 within each system's candidates.

Ties are ranked by document id, as every sentune ranking. Against exact hybrid search (sentune.search.fusion, every
document scored by both systems) this differs in two ways: a document outside a system's top K gets that system's
lowest normalised score instead of its own, and the min-max range is the candidates' range, not the whole collection's
(benchmarks/results/ann.md measures what it costs in nDCG@10).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sentune.search.fusion import Fusion, top_by_score


@dataclass(frozen=True)
class Candidates:
    """One system's candidates for one query: document rows, best first, and their scores."""

    rows: np.ndarray
    scores: np.ndarray


def minmax_within(scores: np.ndarray) -> np.ndarray:
    """Scores mapped to [0, 1] by their own min and max (float64); all equal: 0 each."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) == 0:
        return scores
    span = scores.max() - scores.min()
    return (scores - scores.min()) / span if span > 0 else np.zeros_like(scores)


def fuse(dense: Candidates, lexical: Candidates, fusion: Fusion, ties: np.ndarray, depth: int) -> tuple[list[int], list[float]]:
    """The top `depth` documents of the union of both candidate sets under `fusion`, best first, with fused scores."""
    union = np.union1d(dense.rows, lexical.rows).astype(np.int64)
    fused = np.zeros(len(union), dtype=np.float64)
    for system, weight in ((dense, fusion.alpha), (lexical, 1.0 - fusion.alpha)):
        where = np.searchsorted(union, system.rows)
        if fusion.kind == "convex":
            fused[where] += weight * minmax_within(system.scores)
        elif fusion.kind == "rrf":
            fused[where] += 1.0 / (fusion.k + np.arange(1, len(system.rows) + 1))
        else:
            raise ValueError(f"unknown fusion {fusion.kind!r}")
    order = np.lexsort((ties[union], -fused))[:depth]
    return [int(union[i]) for i in order], [float(fused[i]) for i in order]


def lexical_candidates(scores: np.ndarray, ties: np.ndarray, depth: int) -> list[Candidates]:
    """Per row of BM25 scores (queries × documents), its `depth` best documents with a score above 0 (a document
    sharing no word with the query is no BM25 match, as in an engine), best first, ties by id."""
    out = []
    for row, ranked in zip(scores, top_by_score(scores, ties, depth), strict=True):
        rows = np.asarray([d for d in ranked if row[d] > 0], dtype=np.int64)
        out.append(Candidates(rows, row[rows].astype(np.float64)))
    return out
