"""Scores on a user's pairs, and the paired bootstrap that decides whether a candidate beats the unchanged model
(`sentune adapt`, issue 15).

Metrics, chosen by the labels (sentune.data.user_data): graded scores → Spearman ×100 of the cosine similarities;
0/1 labels → average precision ×100 of the cosines (and, reported beside it, the accuracy ×100 at the best threshold).

Paired bootstrap (Efron & Tibshirani 1993; Koehn 2004 for paired system comparison): draw B resamples of the pair
indices with replacement, the same resample for both systems; on each, d_b = m(candidate) − m(baseline). The
confidence that the candidate is better is the share of resamples with d_b > 0, and the 95 % interval of the
difference is the 2.5th and 97.5th percentiles of d_b. A candidate replaces the baseline only when that confidence
is at least 0.95; ties (d_b = 0 everywhere) count as not better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score

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
    """Accuracy ×100 of `similarity > t` for the best threshold t (as SentEval's and MTEB's pair classification)."""
    order = np.argsort(-predicted, kind="stable")
    positives = (gold[order] == 1).astype(np.int64)
    # Predicting the first k as positive: correct = positives among them + negatives among the rest.
    correct = np.concatenate([[0], np.cumsum(2 * positives - 1)]) + (len(gold) - positives.sum())
    return float(correct.max() / len(gold) * 100)


METRICS: dict[str, Metric] = {"spearman": spearman, "average_precision": average_precision, "accuracy": best_threshold_accuracy}


@dataclass(frozen=True)
class Comparison:
    """A candidate against the baseline on the same pairs."""

    candidate: float
    baseline: float
    difference_low: float  # 95 % interval of candidate − baseline
    difference_high: float
    confidence: float  # share of resamples where the candidate is better

    @property
    def better(self) -> bool:
        return self.confidence >= CONFIDENCE


CONFIDENCE = 0.95
RESAMPLES = 1000


def resamples(n: int, count: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """(count, n) indices drawn with replacement, the same for every system compared."""
    return np.random.default_rng(seed).integers(0, n, size=(count, n))


def paired_bootstrap(gold: np.ndarray, candidate: np.ndarray, baseline: np.ndarray, metric: Metric, draws: np.ndarray) -> Comparison:
    differences = np.array([metric(gold[i], candidate[i]) - metric(gold[i], baseline[i]) for i in draws])
    return Comparison(
        candidate=metric(gold, candidate),
        baseline=metric(gold, baseline),
        difference_low=float(np.percentile(differences, 2.5)),
        difference_high=float(np.percentile(differences, 97.5)),
        confidence=float((differences > 0).mean()),
    )


def score_interval(gold: np.ndarray, predicted: np.ndarray, metric: Metric, draws: np.ndarray) -> tuple[float, float]:
    """95 % percentile interval of one system's score over the resamples."""
    scores = np.array([metric(gold[i], predicted[i]) for i in draws])
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


@dataclass(frozen=True)
class Choice:
    name: str  # the chosen candidate, or the baseline's name
    comparisons: dict[str, Comparison]
    reason: str


def choose(gold: np.ndarray, baseline: tuple[str, np.ndarray], candidates: Sequence[tuple[str, np.ndarray]], metric: Metric, seed: int = 0) -> Choice:
    """The candidate with the best dev score, if the paired bootstrap says it beats the baseline with ≥ 95 %
    confidence; otherwise the baseline. Only the dev pairs given here are read: test pairs never reach a choice."""
    base_name, base_predictions = baseline
    draws = resamples(len(gold), seed=seed)
    comparisons = {name: paired_bootstrap(gold, predicted, base_predictions, metric, draws) for name, predicted in candidates}
    if not comparisons:
        return Choice(base_name, comparisons, "no candidate to compare")
    best = max(comparisons, key=lambda name: comparisons[name].candidate)
    found = comparisons[best]
    if found.better:
        return Choice(
            best, comparisons, f"{best} beats {base_name} on dev with {found.confidence:.1%} confidence ({found.candidate:.2f} vs {found.baseline:.2f})"
        )
    if found.candidate <= found.baseline:
        return Choice(
            base_name,
            comparisons,
            f"no candidate scores above {base_name} on dev (the best, {best}: {found.candidate:.2f} vs {found.baseline:.2f}): {base_name} is kept",
        )
    return Choice(
        base_name,
        comparisons,
        f"the best candidate, {best} ({found.candidate:.2f} vs {found.baseline:.2f}), beats {base_name} with only {found.confidence:.1%} "
        f"confidence (< {CONFIDENCE:.0%}): {base_name} is kept",
    )
