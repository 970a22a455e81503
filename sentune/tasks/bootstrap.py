"""Scores on a user's pairs, and the paired bootstrap that puts intervals on them (`sentune adapt`'s report).

Metrics, chosen by the labels (sentune.data.user_data): graded scores → Spearman ×100 of the cosine similarities;
0/1 labels → average precision ×100 of the cosines (and, reported beside it, the accuracy ×100 at the best threshold).

Paired bootstrap (Efron & Tibshirani 1993; Koehn 2004 for paired system comparison): draw B resamples of the pair
indices with replacement, the same resample for both systems; on each, d_b = m(candidate) − m(baseline). The 95 %
interval of the difference is the 2.5th and 97.5th percentiles of d_b, and P(better) is the share of resamples with
d_b > 0. These describe scores; they do not decide: on pairs that also chose the candidate they are optimistic, which
is why adapt's choice is confirmed on pairs no choice read (sentune.adaptation.decide).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sentune.core.metrics import METRICS


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
    return METRICS[metric].rows(gold[draws], candidate[draws]) - METRICS[metric].rows(gold[draws], baseline[draws])


def paired_bootstrap(gold: np.ndarray, candidate: np.ndarray, baseline: np.ndarray, metric: str, draws: np.ndarray) -> Comparison:
    differences = bootstrap_differences(gold, candidate, baseline, metric, draws)
    return Comparison(
        candidate=METRICS[metric].score(gold, candidate),
        baseline=METRICS[metric].score(gold, baseline),
        difference_low=float(np.percentile(differences, 2.5)),
        difference_high=float(np.percentile(differences, 97.5)),
        confidence=float((differences > 0).mean()),
    )


def score_interval(gold: np.ndarray, predicted: np.ndarray, metric: str, draws: np.ndarray) -> tuple[float, float]:
    """95 % percentile interval of one system's score over the resamples."""
    scores = METRICS[metric].rows(gold[draws], predicted[draws])
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))
