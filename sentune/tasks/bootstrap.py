"""Scores on a user's pairs, and the paired bootstrap that puts intervals on them (`sentune adapt`'s report).

Metrics, chosen by the labels (sentune.data.user_data): graded scores → Spearman ×100 of the cosine similarities;
0/1 labels → average precision ×100 of the cosines (and, reported beside it, the accuracy ×100 at the best threshold).

Paired bootstrap (Efron & Tibshirani 1993; Koehn 2004 for paired system comparison): draw B resamples of the pair
indices with replacement, the same resample for both systems; on each, d_b = m(candidate) − m(baseline). The 95 %
interval of the difference is the 2.5th and 97.5th percentiles of d_b, and P(better) is the share of resamples with
d_b > 0. These describe scores; they do not decide: on pairs that also chose the candidate they are optimistic, which
is why adapt's choice is confirmed on pairs no choice read (sentune.adapt.decide).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score

from sentune.tasks.batched_metrics import ROW_METRICS

Metric = Callable[[np.ndarray, np.ndarray], float]  # (gold labels, predicted similarities) -> score ×100


def spearman(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Spearman ×100; 0 where either side is constant (a resample can be), where SciPy gives NaN."""
    if np.ptp(gold) == 0 or np.ptp(predicted) == 0:
        return 0.0
    return float(spearmanr(gold, predicted)[0] * 100)


def average_precision(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Average precision ×100 of ranking the pairs by similarity, positives = label 1 (scikit-learn's); 0 without positives."""
    return float(average_precision_score(gold == 1, predicted) * 100) if (gold == 1).any() else 0.0


def best_threshold_accuracy(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Accuracy ×100 of `similarity > t` for the best threshold t (as SentEval's and MTEB's pair classification). A
    threshold cannot separate pairs with the same similarity, so only cuts between distinct values count."""
    order = np.argsort(-predicted, kind="stable")
    ranked = predicted[order]
    positives = (gold[order] == 1).astype(np.int64)
    # Predicting the first k as positive: correct = positives among them + negatives among the rest.
    correct = np.concatenate([[0], np.cumsum(2 * positives - 1)]) + (len(gold) - positives.sum())
    cuts = np.concatenate([[True], ranked[1:] != ranked[:-1], [True]])  # k = 0, between distinct values, k = n
    return float(correct[cuts].max() / len(gold) * 100)


def mean_of_items(gold: np.ndarray, values: np.ndarray) -> float:
    """Retrieval: each query's nDCG@10 ×100 was computed when it was ranked (sentune.tasks.retrieval); the score is their
    mean, and a resample draws queries."""
    return float(np.mean(values))


METRICS: dict[str, Metric] = {
    "spearman": spearman,
    "average_precision": average_precision,
    "accuracy": best_threshold_accuracy,
    "ndcg@10": mean_of_items,
}


@dataclass(frozen=True)
class Comparison:
    """A candidate against the baseline on the same pairs."""

    candidate: float
    baseline: float
    difference_low: float  # 95 % interval of candidate − baseline
    difference_high: float
    confidence: float  # share of resamples where the candidate is better


RESAMPLES = 1000


def resamples(n: int, count: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """(count, n) indices drawn with replacement, the same for every system compared."""
    return np.random.default_rng(seed).integers(0, n, size=(count, n))


def bootstrap_differences(gold: np.ndarray, candidate: np.ndarray, baseline: np.ndarray, metric: str, draws: np.ndarray) -> np.ndarray:
    """m(candidate) − m(baseline) on each resample of the pairs (the same resample for both)."""
    return ROW_METRICS[metric](gold[draws], candidate[draws]) - ROW_METRICS[metric](gold[draws], baseline[draws])


def paired_bootstrap(gold: np.ndarray, candidate: np.ndarray, baseline: np.ndarray, metric: str, draws: np.ndarray) -> Comparison:
    differences = bootstrap_differences(gold, candidate, baseline, metric, draws)
    return Comparison(
        candidate=METRICS[metric](gold, candidate),
        baseline=METRICS[metric](gold, baseline),
        difference_low=float(np.percentile(differences, 2.5)),
        difference_high=float(np.percentile(differences, 97.5)),
        confidence=float((differences > 0).mean()),
    )


def score_interval(gold: np.ndarray, predicted: np.ndarray, metric: str, draws: np.ndarray) -> tuple[float, float]:
    """95 % percentile interval of one system's score over the resamples."""
    scores = ROW_METRICS[metric](gold[draws], predicted[draws])
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))
