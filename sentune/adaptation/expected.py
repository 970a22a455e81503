"""The choice among the safe candidates (sentune.adaptation.decide): each one's expected gain over the unchanged model on
unseen pairs, from all the evidence the run has, corrected for having looked.

A candidate's selection gain g_k is optimistic: the checkpoint, the race, the mix and the weight inside it were chosen
on those pairs, and the best of K candidates on them is further ahead of its true gain than the others (the winner's
curse). Its confirmation gain h_k read no choice. The expected gain is their count-weighted mean, the selection gain
first shrunk toward the pool's mean by normal empirical Bayes (Efron & Morris, "Data analysis using Stein's estimator
and its generalizations", JASA 1975; that this shrinkage undoes selection bias: Efron, "Tweedie's formula and selection
bias", JASA 2011):

    ĝ_k = ḡ + τ²/(τ² + v_k) · (g_k − ḡ),    τ² = max(0, var(g) − mean(v)),
    E_k = (n_s · ĝ_k + n_c · h_k) / (n_s + n_c),

with ḡ the mean of the K candidates' selection gains, var(g) their sample variance (K − 1 in the denominator), and v_k
the noise of candidate k's gain apart from what every candidate shares (the same pairs, the same unchanged model):
K/(K − 1) times the variance, over paired bootstrap resamples of the selection pairs (within each source of pairs), of
g_k − ḡ. τ² is then the spread of the true gains (method of moments), and a candidate is trusted as far ahead of the
others as its lead stands out of that noise: where the candidates' leads are no larger than the resampling gives, every
selection gain is the pool's mean and the confirmation gains rank them. n_s, n_c: the pairs that judged it on each part.
"""

from __future__ import annotations

import numpy as np

from sentune.core.metrics import METRICS

VARIANCE_RESAMPLES = 200  # paired bootstrap resamples of the selection part for v_k (a variance: 200 give it within ~10 %)


def resample_within(strata: np.ndarray | None, n: int, count: int, seed: int) -> np.ndarray:
    """(count, n) positions drawn with replacement, each position from its own stratum (None: one stratum), so that a
    resample keeps every source's number of pairs."""
    rng = np.random.default_rng(seed)
    if strata is None:
        return rng.integers(0, n, size=(count, n))
    draws = np.empty((count, n), dtype=np.int64)
    for label in np.unique(strata):
        group = np.flatnonzero(strata == label)
        draws[:, group] = group[rng.integers(0, len(group), size=(count, len(group)))]
    return draws


def resampled_scores(metric: str, gold: np.ndarray, values: np.ndarray, draws: np.ndarray, strata: np.ndarray | None) -> np.ndarray:
    """`metric` of one system's `values` on each resample (rows of `draws`): within each stratum, pair-weighted, as
    sentune.tasks.permutation.measure_of scores a part holding dev and --train pairs."""
    rows = METRICS[metric].rows
    if strata is None:
        return rows(gold[draws], values[draws])
    total = np.zeros(len(draws))
    for label in np.unique(strata):
        group = np.flatnonzero(strata == label)
        picked = draws[:, group]
        total += len(group) * rows(gold[picked], values[picked])
    return total / draws.shape[1]


def gain_noise(
    metric: str,
    gold: np.ndarray,
    candidates: np.ndarray,
    baseline: np.ndarray,
    strata: np.ndarray | None = None,
    seed: int = 0,
    count: int = VARIANCE_RESAMPLES,
) -> np.ndarray:
    """v_k of each candidate (rows of `candidates`): K/(K − 1) · Var_b(g_k^b − ḡ^b) over paired resamples b (the module's
    docstring); zeros for one candidate (no pool to shrink toward)."""
    k = len(candidates)
    if k < 2:
        return np.zeros(k)
    draws = resample_within(strata, len(gold), count, seed)
    base = resampled_scores(metric, gold, baseline, draws, strata)
    gains = np.stack([resampled_scores(metric, gold, row, draws, strata) - base for row in candidates], axis=1)  # (B, K)
    return np.var(gains - gains.mean(axis=1, keepdims=True), axis=0) * k / (k - 1)


def shrink(gains: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """ĝ_k = ḡ + τ²/(τ² + v_k)·(g_k − ḡ), τ² = max(0, var(g) − mean(v)) (the module's docstring). A candidate with no
    noise keeps its gain."""
    gains, noise = np.asarray(gains, dtype=np.float64), np.asarray(noise, dtype=np.float64)
    if len(gains) < 2:
        return gains.copy()
    mean = gains.mean()
    spread = max(0.0, float(gains.var(ddof=1) - noise.mean()))
    total = spread + noise
    factor = np.divide(spread, total, out=np.ones_like(total), where=total > 0)
    return mean + factor * (gains - mean)


def expected_gains(shrunk: np.ndarray, confirmation: np.ndarray, select_counts: np.ndarray, confirm_counts: np.ndarray) -> np.ndarray:
    """E_k = (n_s · ĝ_k + n_c · h_k) / (n_s + n_c)."""
    select_counts, confirm_counts = np.asarray(select_counts, dtype=np.float64), np.asarray(confirm_counts, dtype=np.float64)
    return (select_counts * shrunk + confirm_counts * np.asarray(confirmation, dtype=np.float64)) / (select_counts + confirm_counts)
