"""The supervised losses (sentune.methods.labelled) against naive implementations of their formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sentune.methods.labelled import build_contrastive, build_cosent
from sentune.methods.records import ContrastiveParams, CoSENTParams


class FixedVectors(torch.nn.Module):
    """A stand-in model: each 'sentence' is an index into a table of vectors."""

    def __init__(self, vectors: torch.Tensor) -> None:
        super().__init__()
        self.vectors = torch.nn.Parameter(vectors.clone())

    def forward(self, features: dict) -> dict:
        return {"sentence_embedding": self.vectors[features["index"]]}


def naive_cosent(a: np.ndarray, b: np.ndarray, labels: list[float], scale: float) -> float:
    cos = [float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))) for x, y in zip(a, b, strict=True)]
    terms = [math.exp(scale * (cos[j] - cos[i])) for i in range(len(cos)) for j in range(len(cos)) if labels[i] > labels[j]]
    return math.log(1 + sum(terms))


def naive_online_contrastive(a: np.ndarray, b: np.ndarray, labels: list[int], margin: float) -> float:
    d = [1 - float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))) for x, y in zip(a, b, strict=True)]
    positives = [x for x, y in zip(d, labels, strict=True) if y == 1]
    negatives = [x for x, y in zip(d, labels, strict=True) if y == 0]
    hard_positives = [x for x in positives if x > min(negatives)] if len(positives) > 1 else positives
    hard_negatives = [x for x in negatives if x < max(positives)] if len(negatives) > 1 else negatives
    return sum(x**2 for x in hard_positives) + sum(max(0.0, margin - x) ** 2 for x in hard_negatives)


def _loss_value(build, params, vectors_a, vectors_b, labels):
    n = len(labels)
    model = FixedVectors(torch.cat([torch.tensor(vectors_a), torch.tensor(vectors_b)]).float())
    ctx = type("Ctx", (), {"params": params})()
    loss = build(model, {}, ctx)
    features = [{"index": torch.arange(n)}, {"index": torch.arange(n, 2 * n)}]
    return float(loss(features, torch.tensor(labels, dtype=torch.float32)).detach())


@pytest.mark.parametrize("seed", range(4))
def test_cosent_equals_its_formula(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(7, 5)), rng.normal(size=(7, 5))
    labels = rng.integers(0, 6, size=7).astype(float).tolist()  # ties in gold: no term for them
    assert _loss_value(build_cosent, CoSENTParams(scale=20.0), a, b, labels) == pytest.approx(naive_cosent(a, b, labels, 20.0), rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_online_contrastive_equals_its_formula(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(8, 5)), rng.normal(size=(8, 5))
    labels = [1, 0, 1, 0, 1, 1, 0, 0]
    expected = naive_online_contrastive(a, b, labels, 0.5)
    assert _loss_value(build_contrastive, ContrastiveParams(margin=0.5), a, b, [float(x) for x in labels]) == pytest.approx(expected, rel=1e-4, abs=1e-5)
