"""Each pooling against a naive per-sentence loop, and WK against a slow numpy port of the reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import SENTENCES

from sentune.core.pooling import PoolingError, PoolingSpec, pool, wk_pool


def _hidden_states(model, sentences):
    model.eval()
    hf = model[0].model
    hf.config.output_hidden_states = True
    features = model.preprocess(sentences)
    with torch.no_grad():
        out = hf(input_ids=features["input_ids"], attention_mask=features["attention_mask"], output_hidden_states=True)
    return out.hidden_states, features["attention_mask"]


def _naive(spec: PoolingSpec, hidden_states, mask):
    rows = []
    for i in range(mask.shape[0]):
        n = int(mask[i].sum())
        per_layer = []
        for layer in spec.layers:
            h = hidden_states[layer][i, :n].numpy()
            per_layer.append({"cls": h[0], "mean": h.mean(0), "max": h.max(0)}[spec.tokens])
        rows.append(np.mean(per_layer, axis=0))
    return np.stack(rows)


@pytest.mark.parametrize("name", ["cls", "mean", "max", "first-last", "last2", "last3", "last2-max", "layer0-mean", "layer2-cls", "layer5-max"])
def test_pooling_matches_naive_loop(tiny_st, name):
    spec = PoolingSpec.parse(name)
    hidden, mask = _hidden_states(tiny_st, SENTENCES)
    np.testing.assert_allclose(pool(spec, hidden, mask).numpy(), _naive(spec, hidden, mask), rtol=1e-5, atol=1e-6)


def test_first_last_is_block_one_and_last_not_embeddings():
    spec = PoolingSpec.parse("first-last")
    assert spec.layers == (1, -1)


def test_unknown_pooling_and_missing_layer_are_clear():
    with pytest.raises(PoolingError, match="unknown pooling 'avg'"):
        PoolingSpec.parse("avg")
    with pytest.raises(PoolingError, match="hidden state 9"):
        PoolingSpec.parse("layer9").check_layers(6)


def _reference_wk(hidden_states, mask, layer_start=4, window=2):
    """Slow numpy port of SBERT-WK's `dissecting` (utils.py), loop for loop."""
    all_layers = np.stack([h.numpy() for h in hidden_states], axis=1)[:, layer_start:].astype(np.float64)
    lengths = mask.sum(1).numpy() - 1
    out = []
    for s in range(len(lengths)):
        feature = all_layers[s, :, : lengths[s], :]
        tokens = []
        for t in range(feature.shape[1]):
            tf = feature[:, t, :]
            align, novelty = np.zeros(tf.shape[0]), np.zeros(tf.shape[0])
            for k in range(tf.shape[0]):
                left, right = tf[k - window : k, :], tf[k + 1 : k + window + 1, :]
                w = np.vstack([left, right, tf[k, :][None, :]])
                _, r_mat = np.linalg.qr(w.T)
                r = r_mat[:, -1]
                cols = r_mat[:-1, :-1] / np.linalg.norm(r_mat[:-1, :-1], axis=0, keepdims=True)
                align[k] = np.mean(cols, axis=1).dot(r_mat[:-1, -1]) / np.linalg.norm(r[:-1])
                align[k] = 1 / (align[k] * w.shape[0] * 2)
                novelty[k] = abs(r[-1]) / np.linalg.norm(r)
            weights = novelty / novelty.sum() + align / align.sum()
            tokens.append(tf.T.dot(weights / weights.sum()))
        tokens = np.array(tokens)
        var = np.zeros(len(tokens))
        for t in range(len(tokens)):
            tf = feature[:, t, :]
            unit = tf / np.linalg.norm(tf, axis=1, keepdims=True)
            var[t] = np.var(np.diagonal(unit @ unit.T, -1))
        out.append(tokens.T.dot(var / var.sum()))
    return np.array(out)


def test_wk_matches_slow_reference(tiny_st):
    hidden, mask = _hidden_states(tiny_st, SENTENCES[:6])
    ours = wk_pool(hidden, mask, layer_start=1).numpy()  # tiny model: 6 hidden states, use 5 of them
    np.testing.assert_allclose(ours, _reference_wk(hidden, mask, layer_start=1), rtol=1e-4, atol=1e-5)


def test_wk_first_layers_have_no_left_context():
    from sentune.core.pooling import _window_rows

    assert _window_rows(5, 0, 2) == [1, 2, 0]
    assert _window_rows(5, 1, 2) == [2, 3, 1]
    assert _window_rows(5, 3, 2) == [1, 2, 4, 3]


FAMILY_POOLINGS = ["cls", "mean", "max", "first-last", "last2", "layer0-mean", "layer2-cls"]


@pytest.mark.parametrize("family", ["tiny_mpnet_dir", "tiny_roberta_dir"])
def test_every_pooling_of_the_encoder_on_families_without_token_type_ids(family, request):
    """MPNet and a RoBERTa-style model (<s> first, no token type ids, other position ids): sentune's encoder gives, for
    every pooling, what a naive loop over the model's own hidden states gives."""
    from sentence_transformers import SentenceTransformer

    from sentune.core.encode import Encoder

    model = SentenceTransformer(str(request.getfixturevalue(family)), device="cpu")
    hidden, mask = _hidden_states(model, SENTENCES)
    found = Encoder(model, FAMILY_POOLINGS, show_progress=False).encode_many(SENTENCES)
    for name in FAMILY_POOLINGS:
        np.testing.assert_allclose(found[name], _naive(PoolingSpec.parse(name), hidden, mask), rtol=1e-4, atol=1e-5, err_msg=f"{family} {name}")
