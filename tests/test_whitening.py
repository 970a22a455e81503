"""Whitening against numpy, and a saved model with a whitening module reloads to identical embeddings."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import WORDS
from sentence_transformers import SentenceTransformer

from sentune.core.encode import Encoder
from sentune.modules.build import save_atomic, with_pooling
from sentune.postprocess.whitening import Whitening


def test_whitening_matches_numpy_formula():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6)) + 3.0
    mu = x.mean(0)
    cov = (x - mu).T @ (x - mu) / (len(x) - 1)
    s, u = np.linalg.eigh(cov)
    order = np.argsort(s)[::-1]
    w = u[:, order] / np.sqrt(s[order])
    raw = Whitening(normalize=False).fit_transform(x)
    np.testing.assert_allclose(np.abs(raw), np.abs((x - mu) @ w), rtol=1e-4, atol=1e-5)  # eigenvector signs are free
    np.testing.assert_allclose(np.cov(raw.T), np.eye(6), atol=1e-4)
    kept = Whitening(n_components=3).fit(x).transform(x)
    assert kept.shape == (200, 3)
    np.testing.assert_allclose(np.linalg.norm(kept, axis=1), 1.0, rtol=1e-5)


def test_whitening_refuses_singular_and_unfitted():
    few = np.random.default_rng(0).normal(size=(4, 8))  # 4 points span at most 3 directions
    assert Whitening().fit(few).kernel_.shape == (8, 3)
    with pytest.raises(ValueError, match="only 3 non-zero components, fewer than the 5 asked for"):
        Whitening(n_components=5).fit(few)
    with pytest.raises(RuntimeError, match="not fitted"):
        Whitening().transform(np.zeros((2, 3)))


def test_saved_whitening_model_reloads_identically(tiny_st, tmp_path):
    rng = np.random.default_rng(1)
    sentences = [" ".join(rng.choice(WORDS, size=rng.integers(3, 12))) for _ in range(120)]
    pooled = with_pooling(tiny_st, "first-last")
    encoder = Encoder(pooled, "model", show_progress=False)
    whitening = Whitening(n_components=16).fit(encoder.encode(sentences))
    expected = whitening.transform(encoder.encode(sentences[:20]))
    model = SentenceTransformer(modules=list(pooled) + whitening.to_modules(), device="cpu")
    path = save_atomic(model, tmp_path / "whitened")
    reloaded = SentenceTransformer(str(path), device="cpu")
    got = reloaded.encode(sentences[:20], convert_to_numpy=True)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert got.shape[1] == 16
    assert not list(tmp_path.glob(".whitened*")), "no temporary folder may be left behind"
