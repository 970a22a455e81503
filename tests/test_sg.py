"""SG / SG-OPT losses against naive per-example loops written straight from Kim et al. 2021's formulas, and
where gradients flow."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import method_context, train_tiny

from sentune.methods import sg

TAU = 0.1


def _phi(u, v):
    return math.exp(float(np.dot(u, v)) / TAU)  # inputs already unit vectors: cos = dot


def _unit(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)


def test_base_matches_naive():
    c, h = _unit(5, 8), _unit(5, 8, seed=1)
    x = torch.cat([c, h]).numpy()
    b, total = 5, 0.0
    for m in range(2 * b):
        partner = m + b if m < b else m - b
        z = sum(_phi(x[m], x[n]) for n in range(2 * b) if n != m)
        total += -math.log(_phi(x[m], x[partner]) / z)
    assert sg.nt_xent_base(c, h, TAU).item() == pytest.approx(total / (2 * b), rel=1e-9)


def test_opt1_and_opt2_match_naive():
    c, h = _unit(6, 8), _unit(6, 8, seed=2)
    cn, hn = c.numpy(), h.numpy()
    opt1 = opt2 = 0.0
    for i in range(6):
        z1 = sum(_phi(cn[i], cn[j]) for j in range(6) if j != i) + sum(_phi(cn[i], hn[j]) for j in range(6))
        z2 = sum(_phi(cn[i], hn[j]) for j in range(6))
        opt1 += -math.log(_phi(cn[i], hn[i]) / z1)
        opt2 += -math.log(_phi(cn[i], hn[i]) / z2)
    assert sg.opt1_loss(c, h, TAU).item() == pytest.approx(opt1 / 6, rel=1e-9)
    assert sg.opt2_loss(c, h, TAU).item() == pytest.approx(opt2 / 6, rel=1e-9)


def test_opt3_matches_naive():
    b, layers = 4, 3
    c, views = _unit(b, 8), _unit(b, layers, 8, seed=3)
    cn, vn = c.numpy(), views.numpy()
    total = 0.0
    for i in range(b):
        negatives = sum(_phi(cn[i], vn[m, n]) for m in range(b) if m != i for n in range(layers))
        for k in range(layers):
            positive = _phi(cn[i], vn[i, k])
            total += -math.log(positive / (positive + negatives))
    assert sg.opt3_loss(c, views, TAU).item() == pytest.approx(total / (b * layers), rel=1e-9)


def test_regulariser_matches_naive():
    torch.manual_seed(0)
    tuned, frozen = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    naive = sum(((a - b) ** 2).sum().item() for a, b in zip(tuned.parameters(), frozen.parameters(), strict=True))
    assert sg.squared_distance(tuned, frozen).item() == pytest.approx(naive, rel=1e-6)


def test_regulariser_gradient_equals_autograds_of_the_formula():
    """The hand-written backward gives what autograd gives for Σ (θ_T − θ_F)² (bit for bit), and a parameter
    both models share adds nothing to the value or the gradient."""
    torch.manual_seed(0)
    tuned, frozen = torch.nn.Linear(5, 4), torch.nn.Linear(5, 4)
    frozen.bias = tuned.bias  # shared, as BERT_F's embeddings are BERT_T's
    sg.squared_distance(tuned, frozen).backward()
    weight_grad, bias_grad = tuned.weight.grad.clone(), tuned.bias.grad
    tuned.zero_grad(set_to_none=True)
    naive = ((tuned.weight - frozen.weight) ** 2).sum() + ((tuned.bias - frozen.bias) ** 2).sum()
    naive.backward()
    assert sg.squared_distance(tuned, frozen).item() == naive.item()
    assert torch.equal(weight_grad, tuned.weight.grad)
    assert bias_grad is None and torch.equal(tuned.bias.grad, torch.zeros(4))  # the formula's gradient there is 0


def test_frozen_copy_shares_layer_zero_only(tiny_st):
    """BERT_F holds BERT_T's (frozen) embeddings, not a copy, and its own copy of every other weight."""
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "cls")
    loss_fn = sg.SelfGuidedLoss(model, head_hidden=16)
    tuned = model[0].model
    assert all(a is b for a, b in zip(loss_fn.frozen.embeddings.parameters(), tuned.embeddings.parameters(), strict=True))
    assert all(a is not b for a, b in zip(loss_fn.frozen.encoder.parameters(), tuned.encoder.parameters(), strict=True))
    assert loss_fn.regularizer().item() == 0.0


def _batch(model, sentences):
    features = model.preprocess(sentences)
    return [dict(features)], torch.arange(len(sentences))


@pytest.mark.parametrize("objective", sg.OBJECTIVES)
def test_gradients_reach_tuned_and_head_never_frozen_or_embeddings(tiny_st, objective):
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "cls")
    loss_fn = sg.SelfGuidedLoss(model, objective=objective, temperature=0.05, reg_weight=0.1, head_hidden=64)
    loss_fn.train()
    assert not loss_fn.frozen.training
    with torch.no_grad():  # move BERT_T away from BERT_F so the regulariser has a gradient too
        for p in model[0].model.encoder.parameters():
            p.add_(0.01)
    features, labels = _batch(model, ["a man plays the guitar", "the dog runs", "two kids eat food", "a cat"])
    out = loss_fn(features, labels)
    sum(out.values()).backward()
    bert_t = model[0].model
    assert all(p.grad is None for p in bert_t.embeddings.parameters())
    assert all(p.grad is None for p in loss_fn.frozen.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in bert_t.encoder.parameters())
    assert all(p.grad is not None for p in loss_fn.head.parameters())
    assert out["regularizer"].item() > 0


def test_cached_views_equal_frozen_forward(tiny_st, tmp_path):
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "cls")
    sentences = ["a man plays the guitar", "the dog runs in the park", "two kids eat food", "a"]
    loss_fn = sg.build_sg_loss(model, {"sentence": sentences}, method_context("sg-opt", {"head_hidden": 64}, cache_dir=tmp_path))
    features, labels = _batch(model, sentences)
    cached = torch.from_numpy(np.asarray(loss_fn.views[labels.numpy()]))
    np.testing.assert_allclose(cached.numpy(), loss_fn.frozen_views(features[0]).numpy(), rtol=1e-4, atol=1e-5)
    again = sg.compute_views(model, sentences, loss_fn.layers, "max", tmp_path)  # reused from disk
    assert isinstance(again, np.memmap) and len(list(tmp_path.glob("sg-views-*.npy"))) == 1


@pytest.mark.slow
def test_shared_cache_reused_across_runs(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, caplog):
    """With SENTUNE_CACHE two runs of the same recipe share BERT_F's views: the second computes none."""
    import logging

    shared = tmp_path / "shared-cache"
    monkeypatch.setenv("SENTUNE_CACHE", str(shared))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = train_tiny(tmp_path / "a", "sg-opt", tiny_model_dir, tiny_data_dir, params={"head_hidden": 16}, training={"max_steps": 2})
    views = sorted(shared.glob("sg-views-*.npy"))
    assert len(views) == 1 and not (first / "cache").exists()
    stamp = views[0].stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="sentune.core.cache"):
        train_tiny(tmp_path / "b", "sg-opt", tiny_model_dir, tiny_data_dir, params={"head_hidden": 16, "temperature": 0.1}, training={"max_steps": 2})
    assert sorted(shared.glob("sg-views-*.npy")) == views and views[0].stat().st_mtime_ns == stamp
    assert any("reusing cache" in record.getMessage() for record in caplog.records)


@pytest.mark.slow
def test_quiet_training_shows_no_bar_of_the_method_either(tiny_model_dir, tiny_data_dir, tmp_path, capsys, monkeypatch):
    """--quiet reaches the method: SG's views of the training sentences are computed without a progress bar."""
    from conftest import tiny_recipe

    from sentune.cli import main

    recipe = tiny_recipe(tmp_path / "r.yaml", "sg-opt", tiny_model_dir, params={"head_hidden": 16}, training={"max_steps": 2})
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "quiet-cache"))  # each run computes its views (none read back)
    assert main(["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir), "--quiet"]) == 0
    assert "BERT_F views" not in capsys.readouterr().err
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "loud-cache"))
    assert main(["train", str(recipe), "--out", str(tmp_path / "loud"), "--data", str(tiny_data_dir)]) == 0
    assert "BERT_F views" in capsys.readouterr().err  # the bar this test looks for exists
