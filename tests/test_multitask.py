"""Multitask heads: the hinge-cosine and cosine-embedding losses against naive loops, the row bundling,
and a tiny fine-tuning run with the §5.2 dev/test metrics."""

from __future__ import annotations

import json
import math

import pytest
import torch

from sentune.methods.multitask import QQP_PER_ROW, hinge_cosine, multitask_rows, paraphrase_loss


def test_hinge_cosine_and_paraphrase_loss_match_naive():
    g = torch.Generator().manual_seed(0)
    u, v = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(6, 4, generator=g, dtype=torch.float64)
    labels = torch.tensor([True, False, True, False, False, True])
    h = 0.7
    y = hinge_cosine(u, v, h)
    naive_y, naive_loss = [], 0.0
    for i in range(6):
        cos = float(u[i] @ v[i] / (u[i].norm() * v[i].norm()))
        yi = max(cos, h)
        naive_y.append(yi)
        naive_loss += (1 - yi) if labels[i] else (yi - h)
    assert y.tolist() == pytest.approx(naive_y, rel=1e-9)
    assert paraphrase_loss(y, labels, h).item() == pytest.approx(naive_loss / 6, rel=1e-9)
    assert all(math.isclose(v, h) or v > h for v in y.tolist())


def test_rows_bundle_one_sst_three_qqp_one_sts():
    from sentune.data.readers import Labeled, LabeledPair, Pair, Source

    src = Source("x", 1)
    sst = [Labeled(f"s{i}", i % 5, src) for i in range(4)]
    qqp = [LabeledPair(f"q{i}", f"r{i}", i % 2, src) for i in range(5)]
    sts = [Pair(f"a{i}", f"b{i}", float(i), src) for i in range(3)]
    rows = multitask_rows(sst, qqp, sts, rows=10, seed=0)
    assert len(rows["sst"]) == 10 and all(len(label) == 2 + QQP_PER_ROW for label in rows["label"])
    assert sorted(rows["sst"][:4]) == ["s0", "s1", "s2", "s3"]  # a full pass before any repeat
    for k in range(QQP_PER_ROW):
        for a, b, label in zip(rows[f"qqp_a{k}"], rows[f"qqp_b{k}"], (r[1 + k] for r in rows["label"]), strict=True):
            assert b == "r" + a[1:] and label == int(a[1:]) % 2


def _train_multitask(tmp_path, data_dir, model, *, steps: int, learning_rate: float, extra: str = ""):
    """Train a tiny multitask recipe through the CLI; returns the run folder."""
    from sentune.cli import main

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"method: multitask\nmodel: {model}\n{extra}params: {{e_para: 16, e_sem: 16}}\n"
        f"training: {{batch_size: 4, max_steps: {steps}, eval_steps: 3, patience: 0, learning_rate: {learning_rate}, weight_decay: 0.01}}\n"
        "eval: {tasks: STS-B}\n"
    )
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--out", str(run), "--data", str(data_dir)]) == 0
    return run


@pytest.mark.slow
def test_tiny_multitask_fine_tuning(tiny_model_dir, tiny_data_dir, tmp_path):
    run = _train_multitask(tmp_path, tiny_data_dir, tiny_model_dir, steps=6, learning_rate=1e-5)
    meta = json.loads((run / "results.json").read_text())["meta"]
    test = meta["method_metrics"]["test"]
    assert set(test) == {"multitask-test_sst5_acc", "multitask-test_qqp_acc", "multitask-test_sts_pearson", "multitask-test_mean"}
    assert 0 <= test["multitask-test_sst5_acc"] <= 100
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("eval_multitask-dev_mean" in m for m in metrics)


@pytest.mark.slow
def test_recipe_pooling_model_trains_through_a_head(tiny_model_dir, tiny_data_dir, tmp_path):
    """`pooling: model` keeps a saved head (here whitening's Dense) under the task heads and trains it."""
    from safetensors.torch import load_file

    from sentune.cli import main

    head = tmp_path / "whitened"
    assert (
        main(["whiten", "--model", str(tiny_model_dir), "--pooling", "mean", "--fit-on", "tasks:STS-B", "--data", str(tiny_data_dir), "--out", str(head)]) == 0
    )
    run = _train_multitask(tmp_path, tiny_data_dir, head, steps=3, learning_rate=1e-3, extra="pooling: model\n")
    modules = json.loads((run / "model" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == [m["type"].rsplit(".", 1)[-1] for m in json.loads((head / "modules.json").read_text())]
    dense = next(m["path"] for m in modules if m["type"].endswith("Dense"))
    before, after = load_file(str(head / dense / "model.safetensors")), load_file(str(run / "model" / dense / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the head was trained, not dropped


def test_held_out_qqp_split_keeps_both_labels_in_dev_and_test():
    """BiMPM's QQP file alternates labels 1, 0, 1, 0: alternate rows would give one-label halves."""
    from sentune.data.readers import LabeledPair, Source
    from sentune.methods.multitask import split_held_out

    src = Source("qqp.tsv", 1)
    pairs = [LabeledPair(f"q{i}", f"r{i}", 1 - i % 2, src) for i in range(200)]
    dev, test = split_held_out(pairs)
    assert len(dev) == len(test) == 100
    assert sum(p.label for p in dev) == sum(p.label for p in test) == 50
    assert sorted(p.a for p in dev + test) == sorted(p.a for p in pairs)  # a partition: nothing lost or repeated
    assert split_held_out(pairs)[0] == dev  # fixed seed: the same split every run


def test_heads_read_one_scale_whatever_the_encoder_outputs(tiny_st):
    """Issue 25 (5): the sentiment head's logits would grow with the encoder's output norm (a flow's is about √d); with
    head_input unit every encoder reaches the heads on the unit sphere. The cosine heads never depend on the scale."""
    import torch

    from sentune.methods.multitask import MultitaskLoss, head_input
    from sentune.modules.build import with_pooling

    x = torch.randn(4, 32)
    torch.testing.assert_close(head_input(3 * x, "unit"), head_input(x, "unit"))
    torch.testing.assert_close(head_input(3 * x, "as-is"), 3 * x)
    model = with_pooling(tiny_st, "mean")
    features = model.preprocess(["a man plays the guitar", "the dog runs"])
    for scale, expected in (("unit", torch.ones(2)), ("as-is", None)):
        embedded = MultitaskLoss(model, e_para=8, e_sem=8, head_input=scale)._embed(features)
        norms = embedded.norm(dim=-1).detach()
        if expected is not None:
            torch.testing.assert_close(norms, expected)
        else:
            assert not torch.allclose(norms, torch.ones(2))  # mean pooling of the tiny model: not unit length
