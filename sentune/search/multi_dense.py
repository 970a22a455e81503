"""Several dense models fused with BM25: each system's scores of every document min-max normalised per query
(sentune.search.fusion.minmax) and summed with one weight per system, the weights summing to 1 (the convex hybrid's
fusion, Bruch, Gai & Ingber, TOIS 2023, over more than two systems; the linear combination of Fox & Shaw's CombSUM,
1994, with weights). The weights are chosen on a grid of steps of 0.1 on queries the caller picks (an adapt run's
selection queries). A query's own document (Quora-style sets) is neither ranked nor normalised over."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sentune.search.fusion import minmax, top_by_score

STEPS = 10  # the grid's weights are multiples of 1 / STEPS


@dataclass(frozen=True)
class MultiFusion:
    """One weight per dense system, in order, then BM25's."""

    weights: tuple[float, ...]

    def fuse(self, dense: Sequence[np.ndarray], lexical: np.ndarray) -> np.ndarray:
        if len(dense) + 1 != len(self.weights):
            raise ValueError(f"{len(self.weights)} weights for {len(dense)} dense systems and BM25")
        return np.sum([w * minmax(s) for w, s in zip(self.weights, [*dense, lexical], strict=True)], axis=0)

    def to_dict(self) -> dict:
        return {"weights": list(self.weights)}

    @classmethod
    def from_dict(cls, saved: dict) -> MultiFusion:
        weights = saved.get("weights") if isinstance(saved, dict) else None
        if not isinstance(weights, list) or len(weights) < 3 or any(not isinstance(w, int | float) or w < 0 for w in weights) or abs(sum(weights) - 1) > 1e-6:
            raise ValueError(f"not a fusion of several dense systems sentune writes: {saved!r} (3 or more weights from 0, summing to 1)")
        return cls(tuple(float(w) for w in weights))

    @property
    def label(self) -> str:
        return "convex, weights " + ", ".join(f"{w:g}" for w in self.weights[:-1]) + f" on the dense systems, {self.weights[-1]:g} on BM25"


def weight_grid(systems: int, steps: int = STEPS) -> list[tuple[float, ...]]:
    """Every choice of `systems` weights, multiples of 1 / steps, summing to 1."""
    return [tuple(c / steps for c in combo) for combo in itertools.product(range(steps + 1), repeat=systems) if sum(combo) == steps]


def without_own(scores: np.ndarray, own: Sequence[int | None] | None) -> np.ndarray:
    """A copy where each query's own document scores its row's minimum: out of the normalisation (the row's min and max
    do not change), as sentune.search.fusion.hybrid_rank_rows does."""
    scores = np.array(scores, dtype=np.float64)
    for row, doc in enumerate(own or []):
        if doc is not None and scores.shape[1] > 1:
            scores[row, doc] = np.delete(scores[row], doc).min()
    return scores


def multi_rank(
    dense: Sequence[np.ndarray], lexical: np.ndarray, ties: np.ndarray, fusion: MultiFusion, depth: int, own=None
) -> tuple[list[list[int]], list[list[float]]]:
    """The top `depth` documents per query (rows) under `fusion`, with their fused scores, ties by `ties`."""
    fused = fusion.fuse([without_own(d, own) for d in dense], without_own(lexical, own))
    ranked = top_by_score(fused, ties, depth, exclude=own)
    return ranked, [[float(fused[r, d]) for d in row] for r, row in enumerate(ranked)]


def choose_weights(
    blocks: Iterable[tuple[Sequence[np.ndarray], np.ndarray, Sequence[int | None] | None]], ties: np.ndarray, score, depth: int
) -> tuple[MultiFusion, dict]:
    """The grid's weights whose ranking `score(ranked)` (the queries' mean metric) is highest; ties: the weights
    nearest equal ones. `blocks`: the queries a block at a time, each its dense systems' scores, BM25's and its queries'
    own documents (a block's scores held at once, never every query's). Returns the weights and every weight's score."""
    ranked: dict[tuple[float, ...], list[list[int]]] = {}
    for dense, lexical, own in blocks:
        parts = [minmax(without_own(s, own)) for s in [*dense, lexical]]  # normalised once: each weight is a sum of these
        for weights in weight_grid(len(parts)):
            fused = np.sum([w * p for w, p in zip(weights, parts, strict=True)], axis=0)
            ranked.setdefault(weights, []).extend(top_by_score(fused, ties, depth, exclude=own))
    curve = {weights: float(score(rows)) for weights, rows in ranked.items()}
    even = 1.0 / len(next(iter(curve)))
    best = max(curve, key=lambda w: (round(curve[w], 9), -sum(abs(x - even) for x in w)))
    return MultiFusion(best), curve
