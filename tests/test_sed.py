"""SED: the ensemble-target cache (correct, and reused: a second run computes nothing), the distillation
loss against a naive reference, the learner's pooling, and the full ensemble as a model."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import SENTENCES

from sentune.methods import sed


@pytest.fixture
def members(tiny_st, tmp_path):
    from sentune.modules.build import save_atomic, with_pooling

    paths = []
    for seed in (0, 1):
        model = with_pooling(tiny_st, "mean")
        with torch.no_grad():
            g = torch.Generator().manual_seed(seed)
            for p in model[0].model.encoder.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=g))
        paths.append(str(save_atomic(model, tmp_path / f"member{seed}")))
    return paths


def test_targets_are_the_member_mean_and_cached(members, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer

    targets = sed.ensemble_targets(members, SENTENCES, tmp_path / "cache", device="cpu", show_progress=False)
    expected = np.mean([SentenceTransformer(m, device="cpu").encode(SENTENCES, convert_to_numpy=True) for m in members], axis=0)
    np.testing.assert_allclose(targets, expected, rtol=1e-4, atol=1e-5)

    def no_encoding(*args, **kwargs):
        raise AssertionError("a cached run must not encode")

    monkeypatch.setattr("sentune.core.encode.Encoder.encode_many", no_encoding)
    again = sed.ensemble_targets(members, SENTENCES, tmp_path / "cache", device="cpu", show_progress=False)
    np.testing.assert_array_equal(again, targets)


def test_distillation_loss_matches_naive(tiny_st):
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "mean").eval()
    targets = np.random.default_rng(0).normal(size=(4, 32)).astype(np.float32)
    loss = sed.DistillationLoss(model, targets)
    features = model.preprocess(SENTENCES[:2])
    got = loss([dict(features)], torch.tensor([3, 1])).item()
    with torch.no_grad():
        out = model(dict(features))["sentence_embedding"].numpy()
    assert got == pytest.approx(float(((out - targets[[3, 1]]) ** 2).mean()), rel=1e-5)


@pytest.mark.slow
def test_sed_training_and_full_ensemble(members, tiny_data_dir, tmp_path, monkeypatch):
    from conftest import train_tiny
    from sentence_transformers import SentenceTransformer

    from sentune.cli import main

    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    run = train_tiny(
        tmp_path, "sed", members[0], tiny_data_dir, params={"members": members, "eval_layers": 2}, training={"learning_rate": 2e-5, "warmup_ratio": 0.1}
    )
    modules = json.loads((run / "model" / "modules.json").read_text())
    assert any("WeightedLayerPooling" in m["type"] for m in modules)  # learner saved with the last-two-layer mean
    assert len(list((tmp_path / "cache").glob("sed-targets-*.npy"))) == 1 and not (run / "cache").exists()
    SentenceTransformer(str(run / "model"), device="cpu")

    ensemble = tmp_path / "ensemble"
    assert main(["ensemble", "--member", members[0], "--member", members[1], "--out", str(ensemble)]) == 0
    # SentenceTransformer loads it (sentune's EnsembleMean: trust_remote_code, no code in the folder) and
    # gives the mean of the members' mean-pooled embeddings.
    expected = np.mean([SentenceTransformer(m, device="cpu").encode(SENTENCES) for m in members], axis=0)
    assert not list(ensemble.rglob("*.py"))
    np.testing.assert_allclose(SentenceTransformer(str(ensemble), device="cpu", trust_remote_code=True).encode(SENTENCES), expected, rtol=1e-5, atol=1e-6)
    for member in members:  # the folder carries the members' weights: it stands on its own
        import shutil

        shutil.rmtree(member)
    np.testing.assert_allclose(SentenceTransformer(str(ensemble), device="cpu", trust_remote_code=True).encode(SENTENCES), expected, rtol=1e-5, atol=1e-6)
    assert main(["eval", "--model", str(ensemble), "--tasks", "STS-B", "--data", str(tiny_data_dir), "--out", str(tmp_path / "ens-eval"), "--quiet"]) == 0
    assert "STS-B" in json.loads((tmp_path / "ens-eval" / "results.json").read_text())["runs"]["model"]["tasks"]


def test_learner_pooling_chosen_on_dev(members, tiny_data_dir):
    """eval_layers='dev' keeps the pooling (last 1, 2 or 3 layers) with the best STS-B dev Spearman, computed
    here independently for each, and records the choice; a fixed number is applied as given."""
    from conftest import method_context

    from sentune.core.models import load_model
    from sentune.core.options import OptionError
    from sentune.modules.build import with_pooling
    from sentune.tasks.dev import DevEvaluator

    evaluator = DevEvaluator("STS-B-dev", tiny_data_dir)
    learner = load_model(members[0])
    expected = {n: evaluator(with_pooling(learner, p))[evaluator.primary_metric] for n, p in ((1, "mean"), (2, "last2"), (3, "last3"))}
    assert len(set(expected.values())) == 3  # the toy members must separate the three, or the check proves nothing
    best = max(expected, key=expected.get)
    ctx = method_context("sed", {"members": members, "eval_layers": "dev"}, data_dir=tiny_data_dir, dev_score=evaluator.score)
    chosen, note = sed.learner_pooling(learner, None, ctx)
    assert note["eval_layers"] == best
    assert evaluator(chosen)[evaluator.primary_metric] == pytest.approx(expected[best])
    fixed, note = sed.learner_pooling(learner, None, method_context("sed", {"members": members, "eval_layers": 3}))
    assert note is None and evaluator(fixed)[evaluator.primary_metric] == pytest.approx(expected[3])
    with pytest.raises(OptionError, match="eval_layers"):
        method_context("sed", {"members": members, "eval_layers": 4})
    with pytest.raises(OptionError, match="params.members"):
        method_context("sed", {})


def test_a_cache_entry_is_built_once_when_two_ask_at_once(tmp_path):
    """Two builders of one cache entry (parallel pipeline workers computing the same ensemble targets): the
    second waits for the first and reuses its file instead of computing it again."""
    import threading

    from sentune.core.cache import cached_array

    path = tmp_path / "cache" / "entry.npy"
    first_started, calls, results = threading.Event(), [], {}

    def slow_compute():
        calls.append("first")
        first_started.set()
        threading.Event().wait(1.0)  # long enough for the second caller to arrive while the entry is being built
        return np.arange(6.0)

    def second_compute():
        calls.append("second")
        return np.zeros(6)

    first = threading.Thread(target=lambda: results.setdefault("first", cached_array(path, slow_compute)))
    first.start()
    assert first_started.wait(30)
    results["second"] = cached_array(path, second_compute)  # a separate lock handle: blocks like another process
    first.join()
    assert calls == ["first"]
    np.testing.assert_array_equal(results["second"], np.arange(6.0))
    np.testing.assert_array_equal(results["first"], np.arange(6.0))
