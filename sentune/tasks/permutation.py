"""The paired permutation test (approximate randomisation) that confirms `sentune adapt`'s choice on pairs no choice read.

Noreen, "Computer-Intensive Methods for Testing Hypotheses" (1989); Riezler & Maxwell, "On some pitfalls in automatic
evaluation and significance testing for MT" (2005) and Dror et al., "The Hitchhiker's Guide to Testing Statistical
Significance in NLP" (ACL 2018) for its use on metrics that are not means over items, such as Spearman and average
precision.

H0: for every pair, the candidate's and the baseline's predictions are exchangeable (neither system is better).
Statistic: d = m(candidate) − m(baseline). Under H0, swapping the two systems' predictions on any set of pairs leaves
the distribution unchanged, so R random swap patterns give the null distribution d_1..d_R, and the one-sided p-value

    p = (1 + #{r : d_r ≥ d}) / (R + 1)

is valid at any R (Phipson & Smyth, "Permutation p-values should never be zero", 2010): P(p ≤ level | H0) ≤ level for every level.

Raw cosines of two models can live on different scales (e.g. after whitening), where swapping one pair's two numbers
would mean little, so each system's predictions are first standardised over the pairs (mean 0, standard deviation 1).
That is an increasing affine map, so neither metric changes, and for two systems of one distribution it is nearly the
same map for both, which a swap commutes with: the test stays (nearly) exact. Replacing each system's predictions by
its own ranks instead is not such a common map, and a rule built on it ships no-gain candidates above its level
(benchmarks/results/adapt_calibration.md measures the rule as shipped).

Retrieval (nDCG@10) is a mean of per-query values on one scale: those are swapped as they are (the classic paired
randomisation test of IR, Smucker, Allan & Carterette, CIKM 2007).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sentune.core.metrics import METRICS

PERMUTATIONS = 1000
# The significance level of the confirmation: a candidate replaces the baseline when p ≤ LEVEL. Not 0.05: the test is exact only
# up to the standardisation above, and adapt promises at most 5 % in every setting of the calibration, not on average;
# benchmarks/results/adapt_calibration.md shows the simulated rule's rates at 0.03, 0.04 and 0.05 and the power 0.03 costs.
LEVEL = 0.03
_TOLERANCE = 1e-9  # permuted differences this close to the observed one count as reaching it (conservative)


@dataclass(frozen=True)
class Confirmation:
    """A candidate against the baseline on the confirmation pairs."""

    candidate: float
    baseline: float
    p_value: float  # one-sided: the candidate is better
    permutations: int
    pairs: int

    @property
    def difference(self) -> float:
        return self.candidate - self.baseline

    @property
    def confirmed(self) -> bool:
        return self.p_value <= LEVEL


def standardise(values: np.ndarray) -> np.ndarray:
    """(x − mean) / standard deviation; a constant vector becomes zeros."""
    values = np.asarray(values, dtype=np.float64)
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def measure_of(metric: str, strata: np.ndarray | None = None):
    """`metric` of each row of predictions; with `strata` (a label per pair) the pair-weighted mean of its value within
    each stratum, so that pairs of different sources (adapt's dev and --train pairs) are ranked among their own only."""
    rows = METRICS[metric].rows
    if strata is None:
        return rows
    groups = [np.flatnonzero(strata == label) for label in np.unique(strata)]

    def measure(gold: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        predicted = np.atleast_2d(predicted)
        return np.sum([len(group) * rows(gold[group], predicted[:, group]) for group in groups], axis=0) / len(gold)

    return measure


CHUNK = 100  # permutations drawn at a time (the same swap patterns as drawing all at once: one generator stream)
EARLY_CHUNK = 20


def paired_permutation_test(
    gold: np.ndarray,
    candidate: np.ndarray,
    baseline: np.ndarray,
    metric: str,
    count: int = PERMUTATIONS,
    seed: int = 0,
    stop_above: float | None = None,
    strata: np.ndarray | None = None,
) -> Confirmation:
    """One-sided test that `candidate` scores higher than `baseline` under `metric` ('spearman' or 'average_precision'),
    within each stratum of `strata` when given (measure_of).

    `stop_above`: stop drawing permutations once p is certain to exceed it (the decision p ≤ level is then the full
    test's for every level ≤ stop_above, and the p-value returned is a lower bound of the full one). The calibration
    benchmark uses it to simulate thousands of runs; adapt runs the full test and reports the exact p-value."""
    measure = measure_of(metric, strata)
    n = len(gold)
    a, b = (candidate, baseline) if METRICS[metric].mean_of_items else (standardise(candidate), standardise(baseline))
    rng = np.random.default_rng(seed)
    observed = float(measure(gold, a)[0] - measure(gold, b)[0])
    enough = math.inf if stop_above is None else stop_above * (count + 1) - 1  # this many reached: p > stop_above
    reached, drawn = 0, 0
    while drawn < count and reached <= enough:
        swap = rng.random((min(CHUNK, count - drawn), n)) < 0.5
        permuted = measure(gold, np.where(swap, b, a)) - measure(gold, np.where(swap, a, b))
        reached += int(np.sum(permuted >= observed - _TOLERANCE))
        drawn += len(swap)
    return Confirmation(
        candidate=float(measure(gold, a)[0]),
        baseline=float(measure(gold, b)[0]),
        p_value=(1 + reached) / (count + 1),
        permutations=count,
        pairs=n,
    )


@dataclass(frozen=True)
class NonInferiority:
    """A candidate against a reference on the same items: is it worse by no more than `margin`?"""

    candidate: float
    reference: float
    margin: float
    p_value: float  # one-sided, H0: mean(candidate − reference) ≤ −margin
    permutations: int
    items: int

    difference = property(lambda self: self.candidate - self.reference)
    safe = property(lambda self: self.p_value <= LEVEL)  # H0 rejected: worse by less than the margin, at LEVEL


def non_inferiority_test(
    candidate: np.ndarray, reference: np.ndarray, margin: float, count: int = PERMUTATIONS, seed: int = 0, stop_above: float | None = None
) -> NonInferiority:
    """One-sided paired test that `candidate` is not worse than `reference` by more than `margin`, on per-item values
    whose mean is the metric (a query's nDCG@10: metrics with mean_of_items).

    H0: mean(candidate − reference) ≤ −margin; H1: it is above. The shifted differences s_i = d_i + margin have mean ≤ 0
    under H0; at its boundary (mean 0) a paired swap of the shifted candidate (candidate + margin) and the reference
    flips the sign of s_i, so the sign-flip (permutation) distribution of T = mean(s) gives

        p = (1 + #{r : T_r ≥ T}) / (R + 1),

    exact when the s_i are symmetric about their mean, conservative for every mean below the boundary (Wellek,
    "Testing Statistical Hypotheses of Equivalence and Noninferiority", 2nd ed. 2010, ch. 5; the shift of the
    differences by the margin is the standard construction). Rejecting H0 at LEVEL says the candidate is within
    `margin` of the reference or better: far easier to show than that it is better, which a second superiority test
    would demand. `stop_above`: as paired_permutation_test."""
    a, b = np.asarray(candidate, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"candidate and reference must be per-item values of the same items (shapes {a.shape} and {b.shape})")
    if not margin >= 0:
        raise ValueError(f"margin must be ≥ 0 (got {margin})")
    shifted = a - b + margin
    observed = float(shifted.mean())
    rng = np.random.default_rng(seed)
    enough = math.inf if stop_above is None else stop_above * (count + 1) - 1
    reached, drawn = 0, 0
    while drawn < count and reached <= enough:
        signs = np.where(rng.random((min(CHUNK, count - drawn), len(a))) < 0.5, -1.0, 1.0)
        reached += int(np.sum((signs * shifted).mean(axis=1) >= observed - _TOLERANCE))
        drawn += len(signs)
    return NonInferiority(float(a.mean()), float(b.mean()), float(margin), (1 + reached) / (count + 1), count, len(a))


@dataclass(frozen=True)
class MaxT:
    """Every candidate against one baseline on the same pairs, p-values adjusted for the family."""

    differences: np.ndarray  # (K,) m(candidate) − m(baseline)
    adjusted_p: np.ndarray  # (K,) step-down max-T adjusted one-sided p-values
    permutations: int

    def best_confirmed(self, level: float = LEVEL) -> int:
        """Index of the candidate with the largest difference among those with adjusted p ≤ level, or -1."""
        ok = np.flatnonzero(self.adjusted_p <= level)
        return int(ok[np.argmax(self.differences[ok])]) if len(ok) else -1


def step_down_max_t(
    gold: np.ndarray, candidates: np.ndarray, baseline: np.ndarray, metric: str, count: int = PERMUTATIONS, seed: int = 0, stop_above: float | None = None
) -> MaxT:
    """Westfall & Young's step-down max-T test ("Resampling-Based Multiple Testing", 1993, algorithm 2.8), one-sided:
    each of K candidates (rows of `candidates`) against `baseline`, all on the same pairs. One swap pattern per
    permutation is applied to every candidate at once, so the permuted statistics keep the candidates' dependence.
    With candidates ordered by observed difference t_(1) ≥ … ≥ t_(K) and u_(j)^r = max_{i ≥ j} t_(i)^r,

        p̃_(j) = (1 + #{r : u_(j)^r ≥ t_(j)}) / (R + 1),   p_(j) = max_{i ≤ j} p̃_(i),

    which controls the family-wise error (the chance of calling any no-gain candidate better) under subset pivotality;
    the benchmark measures it on simulated users. Shipping the confirmed candidate with the largest difference is then a
    choice among candidates each certified for the family: no selection part is spent.

    `stop_above`: stop once p̃_(1) is certain to exceed it; every adjusted p-value is then above it too (a lower bound is
    returned), so decisions at levels ≤ stop_above are the full test's."""
    measure = METRICS[metric].rows
    candidates = np.atleast_2d(np.asarray(candidates, dtype=np.float64))
    k, n = candidates.shape
    if METRICS[metric].mean_of_items:
        a, b = candidates, np.asarray(baseline, dtype=np.float64)
    else:
        a, b = np.stack([standardise(row) for row in candidates]), standardise(baseline)
    observed = measure(gold, a) - measure(gold, b[None, :])[0]
    order = np.argsort(-observed, kind="stable")
    rng = np.random.default_rng(seed)
    reached = np.zeros(k, dtype=np.int64)
    enough = math.inf if stop_above is None else stop_above * (count + 1) - 1
    drawn = 0
    while drawn < count and reached[0] <= enough:
        # small chunks while stopping early is possible: a no-gain family's top candidate is settled within a few dozen
        swap = rng.random((min(CHUNK if stop_above is None else EARLY_CHUNK, count - drawn), n)) < 0.5
        # (R, K): each candidate's permuted difference under the permutation's one swap pattern
        mine = np.where(swap[:, None, :], b[None, None, :], a[None, :, :])
        theirs = np.where(swap[:, None, :], a[None, :, :], b[None, None, :])
        r = len(swap)
        permuted = (measure(gold, mine.reshape(r * k, n)) - measure(gold, theirs.reshape(r * k, n))).reshape(r, k)[:, order]
        successive = np.maximum.accumulate(permuted[:, ::-1], axis=1)[:, ::-1]  # u_(j) = max over i ≥ j
        reached += np.sum(successive >= observed[order][None, :] - _TOLERANCE, axis=0)
        drawn += r
    raw = (1 + reached) / (count + 1)
    adjusted = np.empty(k)
    adjusted[order] = np.maximum.accumulate(raw)
    return MaxT(differences=observed, adjusted_p=adjusted, permutations=count)
