"""BERT-CF's joint stage: gradients reach only the flow (encoder frozen), the loss is the sum of its
formula's parts, and the trained model saves with the flow compiled to built-in modules."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import method_context

from sentune.methods.bert_cf import build_flow_joint_loss
from sentune.methods.mirror import mirror_infonce
from sentune.modules.build import with_pooling


def test_joint_loss_parts_and_gradients(tiny_st):
    model = with_pooling(tiny_st, "mean")
    loss_fn = build_flow_joint_loss(model, {}, method_context("flow-joint", {"lambda_mirror": 0.3, "span_cap": 0, "hidden": 8}))
    model.eval()  # no dropout: both views identical, so the parts can be recomputed exactly
    features = model.preprocess(["a man plays the guitar", "the dog runs", "two kids eat food"])
    out = loss_fn([dict(features)], None)
    flow = model[-1].flow
    with torch.no_grad():
        embedded = model[1](model[0](dict(features)))["sentence_embedding"]
        z = flow(embedded)[0]
    assert out["flow_nll"].item() == pytest.approx(flow.nll(embedded).mean().item(), rel=1e-5)
    assert out["mirror"].item() == pytest.approx(0.3 * mirror_infonce(z, z, 0.05).item(), rel=1e-5)
    sum(out.values()).backward()
    assert all(p.grad is None for p in model[0].parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in flow.parameters())


@pytest.mark.parametrize("lambda_mirror", [0.0, 0.3])
def test_flow_nll_alone_trains_the_flow(tiny_st, lambda_mirror):
    """L_flow's own gradient reaches every flow parameter with the encoder frozen (also for Mirror-flow, λ 0)."""
    model = with_pooling(tiny_st, "mean")
    loss_fn = build_flow_joint_loss(model, {}, method_context("flow-joint", {"lambda_mirror": lambda_mirror, "hidden": 8}))
    out = loss_fn([dict(model.preprocess(["a man plays the guitar", "the dog runs", "two kids eat food"]))], None)
    assert set(out) == ({"flow_nll", "mirror"} if lambda_mirror else {"flow_nll"})
    out["flow_nll"].backward()
    flow = model[-1].flow
    assert all(p.grad is not None for p in flow.parameters() if p.requires_grad)
    assert sum(p.grad.abs().sum() for p in flow.parameters() if p.requires_grad) > 0
    assert all(p.grad is None for p in model[0].parameters())


def test_flow_joint_training_saves_plain_model(tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import train_tiny
    from sentence_transformers import SentenceTransformer

    from sentune.data.catalog import select_tasks
    from sentune.tasks.evaluate import evaluate

    run = train_tiny(
        tmp_path, "flow-joint", tiny_model_dir, tiny_data_dir, params={"hidden": 8}, training={"max_steps": 6, "eval_steps": 3, "learning_rate": 3e-4}
    )
    modules = json.loads((run / "model" / "modules.json").read_text())
    assert (
        all(m["type"].startswith("sentence_transformers.") for m in modules) and sum("Dense" in m["type"] for m in modules) == 7
    )  # 2 per coupling + 1 final affine
    model = SentenceTransformer(str(run / "model"), device="cpu")
    again = evaluate(model, select_tasks("STS-B"), tiny_data_dir, show_progress=False)["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"]
    saved = json.loads((run / "results.json").read_text())["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"]
    assert again == pytest.approx(saved, abs=1e-3)
    assert np.isfinite(saved)


def test_minbert_joint_encoder_learns_from_the_contrastive_term_only(tiny_st):
    """The BERT-CF report §6.1, MinBERT-joint: the unfrozen encoder is updated by L_mirror; L_flow's gradient stops at the flow."""
    model = with_pooling(tiny_st, "mean")
    loss_fn = build_flow_joint_loss(model, {}, method_context("flow-joint", {"freeze_encoder": False, "hidden": 8}))
    features = model.preprocess(["a man plays the guitar", "the dog runs", "two kids eat food"])
    out = loss_fn([dict(features)], None)
    out["flow_nll"].backward(retain_graph=True)
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model[0].parameters())
    assert sum(p.grad.abs().sum() for p in model[-1].flow.parameters() if p.grad is not None) > 0
    out["mirror"].backward()
    assert sum(p.grad.abs().sum() for p in model[0].parameters() if p.grad is not None) > 0


@pytest.mark.slow
def test_the_flow_trains_at_its_own_learning_rate(tiny_model_dir, tiny_data_dir, tmp_path):
    """flow_learning_rate reaches the optimizer: with the encoder's rate at 1e-12 only the flow moves."""
    from conftest import train_tiny
    from safetensors.torch import load_file

    from sentune.methods.bert_cf import flow_learning_rates
    from sentune.methods.records import FlowJointParams

    assert flow_learning_rates(FlowJointParams(flow_learning_rate=0.0)) == {}
    model = with_pooling(__import__("sentence_transformers").SentenceTransformer(str(tiny_model_dir), device="cpu"), "mean")
    loss_fn = build_flow_joint_loss(model, {}, method_context("flow-joint", {"freeze_encoder": False, "hidden": 8}))
    (pattern,) = flow_learning_rates(FlowJointParams(flow_learning_rate=3e-4))
    matched = {n for n, _ in loss_fn.named_parameters() if __import__("re").search(pattern, n)}
    assert matched == {f"model.2.flow.{n}" for n, _ in model[-1].flow.named_parameters()}  # the flow, and only the flow

    from sentence_transformers import SentenceTransformer

    outputs = {}
    for rate in (3e-4, 0.0):  # 0: the flow at the encoder's rate too
        params = {"freeze_encoder": False, "hidden": 8, "flow_learning_rate": rate}
        (tmp_path / str(rate)).mkdir()
        run = train_tiny(tmp_path / str(rate), "flow-joint", tiny_model_dir, tiny_data_dir, params=params, training={"learning_rate": 1e-12, "max_steps": 4})
        assert json.loads((run / "results.json").read_text())["meta"]["recipe"]["params"]["flow_learning_rate"] == rate
        before, after = load_file(str(tiny_model_dir / "model.safetensors")), load_file(str(run / "model" / "model.safetensors"))
        assert max(float((after[name] - before[name]).abs().max()) for name in before) < 1e-9  # the encoder at 1e-12: still
        outputs[rate] = SentenceTransformer(str(run / "model"), device="cpu").encode(["a man plays the guitar", "the dog runs"])
    assert np.abs(outputs[3e-4] - outputs[0.0]).max() > 1e-4  # only the flow at its own rate moved
