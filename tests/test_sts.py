"""STS aggregations against hand-computed values, on a seeded toy encoder with known cosines."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ToyEncoder, unit_at

from sentune.tasks.sts import aggregate, correlations, cosine_scores, evaluate_sts


def _toy_subsets():
    cosines = {"A": [0.2, 0.4, 0.8], "B": [0.9, 0.7, 0.5, 0.3, 0.1]}
    gold = {"A": [1, 2, 3], "B": [1, 2, 3, 4, 5]}
    table, subsets = {}, {}
    for name, values in cosines.items():
        firsts, seconds = [], []
        for i, c in enumerate(values):
            a, b = f"{name}{i}a", f"{name}{i}b"
            table[a], table[b] = unit_at(10.0 * i), unit_at(10.0 * i + np.rad2deg(np.arccos(c)))
            firsts.append(a)
            seconds.append(b)
        subsets[name] = (firsts, seconds, np.array(gold[name], dtype=float))
    encoder = ToyEncoder(table)
    return {n: (encoder(a), encoder(b), g) for n, (a, b, g) in subsets.items()}


def test_aggregations_match_hand_computed_values():
    result = evaluate_sts(_toy_subsets())
    assert result["subsets"]["A"]["spearman"] == pytest.approx(100)
    assert result["subsets"]["B"]["spearman"] == pytest.approx(-100)
    assert result["subsets"]["B"]["pearson"] == pytest.approx(-100)  # B is exactly linear
    assert result["mean"]["spearman"] == pytest.approx(0)
    assert result["wmean"]["spearman"] == pytest.approx((3 * 100 + 5 * -100) / 8)  # -25
    # 'all': predicted ranks [2,4,7,8,6,5,3,1], gold ranks [1.5,3.5,5.5,1.5,3.5,5.5,7,8] (ties averaged);
    # centred cross-products sum to -17, squares to 42 and 40.5, so rho = -17 / sqrt(42 * 40.5)
    assert result["all"]["spearman"] == pytest.approx(-17 / np.sqrt(42 * 40.5) * 100, abs=1e-6)
    assert result["n"] == 8


def test_cosine_handles_zero_and_nan_like_senteval():
    a = np.array([[1.0, 0.0], [0.0, 0.0], [np.nan, 1.0]])
    b = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(cosine_scores(a, b), [np.sqrt(0.5), 0.0, 1.0])


def test_single_subset_aggregations_coincide():
    rng = np.random.default_rng(0)
    p, g = rng.normal(size=20), rng.normal(size=20)
    result = aggregate({"test": (p, g)})
    assert result["all"]["spearman"] == pytest.approx(result["mean"]["spearman"]) == pytest.approx(result["wmean"]["spearman"])


def test_correlations_are_the_metric_records_and_undefined_ones_stay_nan():
    """STS's Pearson and Spearman are sentune.core.metrics' records (SciPy's values, checked against naive formulas in
    tests/test_adapt_parts.py); a constant side, which a bootstrap resample scores 0, is reported as undefined."""
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(2)
    gold = rng.integers(0, 6, size=300).astype(float)
    predicted = (gold + rng.normal(0, 2, size=300)).astype(np.float32)
    found = correlations(predicted, gold)
    assert found["pearson"] == pytest.approx(pearsonr(predicted, gold)[0] * 100, rel=1e-12)
    assert found["spearman"] == pytest.approx(spearmanr(predicted, gold)[0] * 100, rel=1e-12)
    assert all(np.isnan(v) for v in correlations(np.full(5, 0.3), np.arange(5.0)).values())
