"""Contrastive Tension, NLI softmax and the lower-bound STS regression against naive references, CT's
batch layout, and tiny training runs of each."""

from __future__ import annotations

import math

import pytest
import torch

from sentune.methods.ct import ContrastiveTensionLoss, ct_loss, ct_rows
from sentune.methods.sts_regression import LowerBoundCosineLoss


def test_ct_loss_matches_naive():
    g = torch.Generator().manual_seed(0)
    left, right = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(6, 4, generator=g, dtype=torch.float64)
    same = torch.tensor([1, 0, 0, 1, 0, 0])
    naive = 0.0
    for i in range(6):
        p = 1 / (1 + math.exp(-float(left[i] @ right[i])))
        naive += -(math.log(p) if same[i] else math.log(1 - p))
    assert ct_loss(left, right, same).item() == pytest.approx(naive / 6, rel=1e-9)


def test_ct_rows_blocks_of_one_positive_seven_negatives():
    rows = ct_rows([f"s{i}" for i in range(20)], rows=32, seed=0)
    labels = rows["label"]
    assert len(labels) == 32 and labels[0::8] == [1, 1, 1, 1] and sum(labels) == 4
    for a, b, y in zip(rows["sentence_a"], rows["sentence_b"], labels, strict=True):
        assert (a == b) == (y == 1)


def test_ct_towers_are_independent_copies_without_dropout(tiny_st):
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "mean")
    loss = ContrastiveTensionLoss(model)
    assert loss.model1 is not model and all(m.p == 0 for m in loss.modules() if isinstance(m, torch.nn.Dropout))
    features = model.preprocess(["a man plays", "the dog runs"])
    out = loss([dict(features), dict(features)], torch.tensor([1, 1]))
    out.backward()
    assert any(p.grad is not None for p in loss.model1.parameters()) and any(p.grad is not None for p in model.parameters())


def test_lower_bound_regression_matches_naive(tiny_st):
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "mean").eval()
    loss = LowerBoundCosineLoss(model, lower_bound=0.3)
    a, b = model.preprocess(["a man plays", "two kids eat"]), model.preprocess(["a man is playing", "the dog runs"])
    scores = torch.tensor([5.0, 1.0])
    got = loss([dict(a), dict(b)], scores).item()
    with torch.no_grad():
        ea, eb = model(dict(a))["sentence_embedding"], model(dict(b))["sentence_embedding"]
    naive = sum((float(torch.nn.functional.cosine_similarity(ea[i], eb[i], dim=0)) - (0.3 + 0.7 * float(scores[i]) / 5)) ** 2 for i in range(2)) / 2
    assert got == pytest.approx(naive, rel=1e-5)


def test_nli_softmax_matches_naive(tiny_st):
    from conftest import method_context

    from sentune.methods.nli import build_nli_loss
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "mean").eval()
    loss = build_nli_loss(model, {}, method_context("nli"))
    a, b = model.preprocess(["a man plays", "two kids eat"]), model.preprocess(["a man is playing", "the dog runs"])
    labels = torch.tensor([0, 2])
    got = loss([dict(a), dict(b)], labels).item()
    with torch.no_grad():
        u, v = model(dict(a))["sentence_embedding"], model(dict(b))["sentence_embedding"]
        logits = torch.cat([u, v, (u - v).abs()], dim=1) @ loss.classifier.weight.T + loss.classifier.bias
    naive = sum(-torch.log_softmax(logits[i], -1)[labels[i]].item() for i in range(2)) / 2
    assert got == pytest.approx(naive, rel=1e-5)


def test_best_lower_bound_is_the_best_mean_dev_score_and_the_smallest_on_a_tie():
    """The SED paper §5.5's choice of lb (benchmarks/best_lower_bound.py and sed.md read it), against a naive loop."""
    from sentune.methods.sts_regression import best_lower_bound

    means = {0.3: 84.0, 0.0: 83.0, 0.15: 84.0, 0.9: 70.0}
    best = None
    for lb in sorted(means):  # ascending: a later bound replaces the best only when strictly better
        if best is None or means[lb] > means[best]:
            best = lb
    assert best_lower_bound(means) == best == 0.15
    assert best_lower_bound({0.5: 1.0}) == 0.5
