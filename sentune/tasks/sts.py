"""Unsupervised STS: cosine similarity of the two embeddings against gold scores.

For a task with several subsets (STS12-16) three aggregations are reported side by side, because the
literature mixes them (reference-implementations.md §9):
  all   — one correlation over the concatenation of every subset (SimCSE's fork; the headline here)
  mean  — plain average of the per-subset correlations (original SentEval)
  wmean — average weighted by subset size (BERT-flow, BERT-whitening)
Correlations are ×100, computed by their records in sentune.core.metrics.
"""

from __future__ import annotations

import numpy as np

from sentune.core.metrics import METRICS

AGGREGATIONS = ("all", "mean", "wmean")
CORRELATIONS = ("pearson", "spearman")  # the METRICS records an STS result reports


def cosine_scores(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (n, d) arrays; like SentEval, NaN coordinates count as 0 and a zero
    vector scores 0 instead of NaN."""
    a = np.nan_to_num(a.astype(np.float64))
    b = np.nan_to_num(b.astype(np.float64))
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide((a * b).sum(1), norms, out=np.zeros(len(a)), where=norms > 0)


def correlation(metric: str, gold: np.ndarray, predicted: np.ndarray) -> float:
    """One evaluation's correlation ×100 by its metric record; NaN where it is undefined (either side constant: layer 0's
    CLS vector is the same for every sentence), which results show as such, where a bootstrap resample scores 0."""
    if np.ptp(gold) == 0 or np.ptp(predicted) == 0:
        return float("nan")
    return METRICS[metric].score(gold, predicted)


def correlations(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    if len(predicted) < 2:
        raise ValueError("a correlation needs at least two pairs")
    return {metric: correlation(metric, gold, predicted) for metric in CORRELATIONS}


def aggregate(subsets: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    """subsets: name -> (predicted scores, gold scores). Returns per-subset and aggregated correlations."""
    per_subset = {name: {**correlations(p, g), "n": int(len(g))} for name, (p, g) in subsets.items()}
    sizes = np.array([r["n"] for r in per_subset.values()], dtype=np.float64)
    out: dict = {"subsets": per_subset, "n": int(sizes.sum())}
    for metric in CORRELATIONS:
        values = np.array([r[metric] for r in per_subset.values()])
        out.setdefault("mean", {})[metric] = float(values.mean())
        out.setdefault("wmean", {})[metric] = float(np.average(values, weights=sizes))
    predicted = np.concatenate([p for p, _ in subsets.values()])
    gold = np.concatenate([g for _, g in subsets.values()])
    out["all"] = correlations(predicted, gold)
    return out


def evaluate_sts(subset_embeddings: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> dict:
    """subset name -> (embeddings of first sentences, of second sentences, gold scores)."""
    return aggregate({name: (cosine_scores(a, b), gold) for name, (a, b, gold) in subset_embeddings.items()})
