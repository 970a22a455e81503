"""A model saved with any sentune pooling reloads with plain SentenceTransformer(path) and gives the
embeddings sentune's encoder computed."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SENTENCES
from sentence_transformers import SentenceTransformer

from sentune.core.encode import Encoder
from sentune.modules.build import save_atomic, with_pooling


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "first-last", "last2", "last3-cls", "layer2-max", "layer0-mean"])
def test_saved_pooling_reloads_without_remote_code(tiny_st, tmp_path, pooling):
    expected = Encoder(tiny_st, pooling, show_progress=False).encode(SENTENCES)
    path = save_atomic(with_pooling(tiny_st, pooling), tmp_path / pooling)
    reloaded = SentenceTransformer(str(path), device="cpu")  # trust_remote_code stays off
    np.testing.assert_allclose(reloaded.encode(SENTENCES, convert_to_numpy=True), expected, rtol=1e-4, atol=1e-5)


def test_wk_model_needs_and_works_with_remote_code(tiny_st, tmp_path):
    pooled = with_pooling(tiny_st, "wk")
    pooled[1].spec = pooled[1].spec.__class__("wk", "wk", (), wk_layer_start=1)
    pooled[1].wk_layer_start = 1
    expected = Encoder(pooled, "model", show_progress=False).encode(SENTENCES)
    path = save_atomic(pooled, tmp_path / "wk")
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(path), device="cpu")
    reloaded = SentenceTransformer(str(path), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(reloaded.encode(SENTENCES, convert_to_numpy=True), expected, rtol=1e-4, atol=1e-5)
