"""Mirror-BERT / SimCSE InfoNCE against a naive loop, span masking, and a tiny training run."""

from __future__ import annotations

import math
import random

import pytest
import torch

from sentune.methods.mirror import mask_characters, mask_token_spans, mirror_infonce


def test_infonce_matches_naive_loop():
    g = torch.Generator().manual_seed(0)
    a, m = torch.randn(5, 7, generator=g, dtype=torch.float64), torch.randn(5, 7, generator=g, dtype=torch.float64)
    tau = 0.2

    def sim(u, v):
        return float(u @ v / (u.norm() * v.norm()))

    total = 0.0
    for i in range(5):
        candidates = [m[i]] + [m[j] for j in range(5) if j != i] + [a[j] for j in range(5) if j != i]  # 2b − 1
        assert len(candidates) == 9
        z = sum(math.exp(sim(a[i], c) / tau) for c in candidates)
        total += -math.log(math.exp(sim(a[i], m[i]) / tau) / z)
    assert mirror_infonce(a, m, tau).item() == pytest.approx(total / 5, rel=1e-9)


def test_token_spans_respect_cap_and_special_tokens():
    ids = torch.tensor([[2, 10, 11, 12, 13, 14, 15, 3, 0], [2, 10, 3, 0, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    special = torch.isin(ids, torch.tensor([0, 2, 3]))
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        out = mask_token_spans(ids, mask, special, 4, p=0.3, cap=5, generator=g)
        masked = out == 4
        assert torch.equal(out[special], ids[special])
        for row in range(2):
            where = torch.nonzero(masked[row]).flatten()
            assert 1 <= len(where) <= 5 and torch.all(where.diff() == 1)  # one contiguous span
    assert torch.equal(mask_token_spans(ids, mask, special, 4, p=0.3, cap=0), ids)  # SimCSE: nothing masked


def test_character_masking_as_original():
    rng = random.Random(0)
    text = "a fairly long sentence that has more than thirty characters"
    out = mask_characters(text, rng)
    assert "[MASK]" in out and len(out) == len(text) - 5 + len("[MASK]")
    assert mask_characters("short one", rng) == "short one"
