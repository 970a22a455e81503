"""Transfer protocols, relatedness regressor and alignment/uniformity on toy data with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from sentune.data.readers import Pair, Source
from sentune.tasks import relatedness, transfer
from sentune.tasks.alignment import alignment, uniformity


def _separable(n=80, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    x = rng.normal(size=(n, 4)) * 0.1
    x[:, 0] += np.where(y == 1, 3.0, -3.0)
    return x, y


def test_nested_cv_separable_is_perfect_and_random_is_chance():
    preset = transfer.PRESETS["fast"]
    x, y = _separable()
    assert transfer.nested_cv(x, y, preset)["acc"] == pytest.approx(100)
    rng = np.random.default_rng(1)
    noise = transfer.nested_cv(rng.normal(size=(400, 4)), rng.integers(0, 2, 400), preset)["acc"]
    assert 35 < noise < 65


def test_split_and_cv_then_test_protocols():
    preset = transfer.PRESETS["fast"]
    x, y = _separable(120)
    out = transfer.split_protocol((x[:60], y[:60]), (x[60:90], y[60:90]), (x[90:], y[90:]), preset)
    assert out["acc"] == pytest.approx(100) and out["C"] in transfer.C_GRID
    out = transfer.cv_then_test((x[:80], y[:80]), (x[80:], y[80:]), preset, f1=True)
    assert out["acc"] == pytest.approx(100) and out["f1"] == pytest.approx(100)


def test_pair_features_are_senteval_s():
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    np.testing.assert_array_equal(transfer.pair_features(u, v), [[2.0, 3.0, 3.0, -2.0]])


def test_tai_encoding_known_values():
    np.testing.assert_allclose(
        relatedness.tai_encode(np.array([1.0, 2.5, 5.0, 4.2])), [[1, 0, 0, 0, 0], [0, 0.5, 0.5, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0.8, 0.2]], atol=1e-6
    )
    np.testing.assert_allclose(relatedness.to_one_five(np.array([0.0, 2.5, 5.0]), 0, 5), [1, 3, 5])


def test_relatedness_reports_the_pearson_and_spearman_of_its_predictions(monkeypatch):
    """The regressor is replaced by a fixed one, so the test predictions are known: the reported correlations are
    theirs against the gold scores on [1, 5], by the naive formulas."""
    import torch

    rng = np.random.default_rng(5)
    vectors = {f"s{i}": rng.normal(size=3) for i in range(60)}
    examples = {
        split: [Pair(f"s{i}", f"s{i + 30}", float(i % 6), Source("toy", i)) for i in range(start, start + 10)]
        for split, start in (("train", 0), ("dev", 10), ("test", 20))
    }
    torch.manual_seed(0)
    fixed = torch.nn.Sequential(torch.nn.Linear(6, relatedness.CLASSES), torch.nn.Softmax(dim=-1))
    monkeypatch.setattr(relatedness, "fit_regressor", lambda train, dev, seed: (fixed, 0.5))
    result = relatedness.evaluate_relatedness(examples, lambda texts: np.array([vectors[t] for t in texts]), score_range=(0.0, 5.0))
    test = examples["test"]
    features = transfer.pair_features(np.array([vectors[p.a] for p in test]), np.array([vectors[p.b] for p in test]))
    with torch.no_grad():
        predicted = (fixed(torch.from_numpy(features).float()) @ torch.arange(1, 6, dtype=torch.float32)).numpy().astype(np.float64)
    gold = relatedness.to_one_five(np.array([p.score for p in test]), 0.0, 5.0)

    def naive_pearson(x, y):
        x, y = x - x.mean(), y - y.mean()
        return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()) * 100)

    def ranks(v):  # ties share the mean of their positions
        return np.array([np.sum(v < a) + (np.sum(v == a) + 1) / 2 for a in v])

    assert result["pearson"] == pytest.approx(naive_pearson(predicted, gold), rel=1e-5)
    assert result["spearman"] == pytest.approx(naive_pearson(ranks(predicted), ranks(gold)), rel=1e-9)
    assert result["n_test"] == 10 and result["dev_pearson"] == 0.5


def test_alignment_and_uniformity_known_values():
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    b = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert alignment(a, b) == pytest.approx((2.0 + 0.0) / 2)  # ‖e1−e2‖² = 2, identical = 0
    square = np.array([[1.0, 0], [0, 1.0], [-1.0, 0], [0, -1.0]])
    # 6 pairs: 4 at squared distance 2, 2 at squared distance 4
    assert uniformity(square, chunk=3) == pytest.approx(np.log((4 * np.exp(-4) + 2 * np.exp(-8)) / 6))


def test_warm_started_grid_equals_cold_fits():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 12))
    y = (x[:, 0] + 0.8 * rng.normal(size=300) > 0).astype(int)
    preset = transfer.PRESETS["fast"]
    warm = transfer._path_scores(x[:200], y[:200], x[200:], y[200:], preset)
    cold = [transfer._fit(x[:200], y[:200], c, preset).score(x[200:], y[200:]) for c in transfer.C_GRID]
    np.testing.assert_allclose(warm, cold)


def _xor(n=4000, seed=0):
    """Two clusters per class on opposite corners: no linear classifier beats chance, one hidden layer separates them."""
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(n, 2))
    x = signs * 2.0 + rng.normal(size=(n, 2)) * 0.3
    return x, (signs[:, 0] * signs[:, 1] > 0).astype(int)


@pytest.mark.slow  # seconds: plain `pytest -q` stays short; scripts/test.sh runs it
def test_mlp_preset_learns_what_logistic_regression_cannot():
    x, y = _xor()  # enough data: like SentEval's, the MLP stops after 20 passes without a better validation score
    train, dev, test = (x[:2400], y[:2400]), (x[2400:3200], y[2400:3200]), (x[3200:], y[3200:])
    linear = transfer.split_protocol(train, dev, test, transfer.PRESETS["fast"])
    mlp = transfer.split_protocol(train, dev, test, transfer.PRESETS["fast-mlp"])
    assert linear["acc"] < 70 and "C" in linear  # chance on XOR
    assert mlp["acc"] > 95 and mlp["l2"] in transfer.L2_GRID
    assert transfer.PRESETS["standard-mlp"].kfold == 10 and transfer.PRESETS["fast-mlp"].grid == transfer.L2_GRID


def test_mlp_is_senteval_s_shape():
    model = transfer._fit(*_xor(200), 1e-3, transfer.PRESETS["fast-mlp"])
    assert [w.shape for w in model.coefs_] == [(2, transfer.MLP_HIDDEN), (transfer.MLP_HIDDEN, 1)] and model.activation == "logistic"
