"""The pair metrics of sentune.core.metrics computed for many versions of the predictions at once: one row per
bootstrap resample or per permutation. A loop of 1,000 SciPy / scikit-learn calls takes seconds; these take tens of
milliseconds, which is what lets the calibration benchmark simulate thousands of `sentune adapt` runs.

Both are exact, ties included (tests/test_adapt_parts.py checks them against SciPy's Spearman and scikit-learn's
average precision):
- Spearman ×100: Pearson of average ranks (ties share the mean of their positions, as scipy.stats.rankdata);
- average precision ×100: scikit-learn's step-wise definition, Σ_k (R_k − R_{k−1}) · P_k over the distinct
  thresholds k, i.e. every positive scores the precision at the end of its tie group.
"""

from __future__ import annotations

import numpy as np


def _tie_groups(sorted_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted along axis 1: the first and the last position of each element's tie group."""
    n = sorted_rows.shape[1]
    positions = np.broadcast_to(np.arange(n), sorted_rows.shape)
    starts = np.ones(sorted_rows.shape, dtype=bool)
    starts[:, 1:] = sorted_rows[:, 1:] != sorted_rows[:, :-1]
    ends = np.ones(sorted_rows.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, positions, 0), axis=1)
    last = (n - 1) - np.maximum.accumulate(np.where(ends[:, ::-1], positions, 0), axis=1)[:, ::-1]
    return first, last


def average_ranks(rows: np.ndarray) -> np.ndarray:
    """Ranks 1..n along axis 1, ties given their average rank (scipy.stats.rankdata(rows, axis=1))."""
    rows = np.atleast_2d(rows)
    order = np.argsort(rows, axis=1, kind="stable")
    first, last = _tie_groups(np.take_along_axis(rows, order, axis=1))
    ranks = np.empty(rows.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, (first + last) / 2 + 1, axis=1)
    return ranks


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        found = (a * b).sum(axis=1) / denominator
    return np.where(denominator > 0, found, 0.0)  # a constant row scores 0, as sentune.tasks.bootstrap.spearman


def pearson_rows(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Pearson ×100 of each row of `predicted` against the same row of `gold` (or one gold vector for every row)."""
    gold, predicted = np.atleast_2d(gold).astype(np.float64), np.atleast_2d(predicted).astype(np.float64)
    return _pearson_rows(gold, predicted) * 100


def spearman_rows(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Spearman ×100 of each row of `predicted` against the same row of `gold` (or one gold vector for every row)."""
    gold, predicted = np.atleast_2d(gold), np.atleast_2d(predicted)
    return _pearson_rows(average_ranks(gold), average_ranks(predicted)) * 100


def average_precision_rows(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Average precision ×100 of ranking each row's pairs by `predicted` (positives: gold == 1); 0 without positives."""
    predicted = np.atleast_2d(predicted)
    gold = np.broadcast_to(np.atleast_2d(gold), predicted.shape)
    order = np.argsort(-predicted, axis=1, kind="stable")
    positive = np.take_along_axis(gold == 1, order, axis=1)
    _, last = _tie_groups(np.take_along_axis(-predicted, order, axis=1))
    true_positives = np.cumsum(positive, axis=1)
    precision_at_group_end = np.take_along_axis(true_positives, last, axis=1) / (last + 1)
    count = positive.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        found = (precision_at_group_end * positive).sum(axis=1) / count
    return np.where(count > 0, found, 0.0) * 100


def mean_rows(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """A metric already computed per item (a query's nDCG@10 ×100): the mean of each row; `gold` is not read."""
    return np.atleast_2d(predicted).mean(axis=1)
