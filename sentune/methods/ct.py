"""Contrastive Tension (Carlsson et al., "Semantic Re-tuning with Contrastive Tension", ICLR 2021), with the
semantics of the official code (reference-implementations.md §2):

Two independent copies of the same checkpoint, f₁ (inside the loss) and f₂ (the model); masked-mean
pooling; a pair (a, b) is scored by the dot product f₁(a)·f₂(b) and trained with binary cross-entropy
with logits, averaged over the batch:

  L = −1/B Σ_(a,b) [ y log σ(f₁(a)·f₂(b)) + (1 − y) log(1 − σ(f₁(a)·f₂(b))) ],  y = 1 iff a = b

Each positive (one identical sentence to both towers) comes with K = 7 negatives (two different random
sentences), so a batch of 16 holds 2 positives and 14 negatives, in that layout (rows are built in
blocks of 8 and batched in order). Dropout is off in both towers (the original calls them with
training=False). Optimiser RMSprop with the stepped rate 1e-5 → 2e-6 (recipe `training.scheduler:
ct-steps`). After training, whichever tower scores better on the recipe's dev task (STS-B dev) is kept.
"""

from __future__ import annotations

import copy
import random

import torch
import torch.nn.functional as F
from torch import nn

from sentune.core.device import full_precision
from sentune.errors import UserError
from sentune.methods.base import Columns, TrainContext, training_sentences
from sentune.methods.citations import CT_CITATION as CITATION


def ct_loss(left: torch.Tensor, right: torch.Tensor, same: torch.Tensor) -> torch.Tensor:
    with full_precision(left, right) as (left, right):
        logits = (left * right).sum(-1)
        return F.binary_cross_entropy_with_logits(logits, same.to(logits.dtype))


def no_dropout(module: nn.Module) -> None:
    for sub in module.modules():
        if isinstance(sub, nn.Dropout):
            sub.p = 0.0


def ct_rows(sentences: list[str], rows: int, seed: int, negatives: int = 7) -> dict[str, list]:
    """Blocks of 1 positive (s, s) and `negatives` pairs of two different random sentences, in random
    block order: `rows` rows (rounded up to whole blocks)."""
    if len(set(sentences)) < 2:
        raise UserError("Contrastive Tension needs at least two different sentences")
    rng = random.Random(seed)
    out: dict[str, list] = {"sentence_a": [], "sentence_b": [], "label": []}
    while len(out["label"]) < rows:
        s = rng.choice(sentences)
        block = [(s, s, 1)]
        while len(block) < negatives + 1:
            a, b = rng.choice(sentences), rng.choice(sentences)
            if a != b:
                block.append((a, b, 0))
        for a, b, y in block:
            out["sentence_a"].append(a)
            out["sentence_b"].append(b)
            out["label"].append(y)
    return out


class ContrastiveTensionLoss(nn.Module):
    """Inputs: two text columns (sentence_a → f₁, sentence_b → f₂) and label 1/0 (identical or not)."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model
        self.model1 = copy.deepcopy(model)
        no_dropout(self.model)
        no_dropout(self.model1)

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        left = self.model1(dict(sentence_features[0]))["sentence_embedding"]
        right = self.model(dict(sentence_features[1]))["sentence_embedding"]
        return ct_loss(left, right, labels)

    @property
    def citation(self) -> str:
        return CITATION


def build_ct_loss(model, columns: Columns, ctx: TrainContext) -> ContrastiveTensionLoss:
    return ContrastiveTensionLoss(model)


def ct_view(ctx: TrainContext) -> Columns:
    """Blocks of 1 positive + 7 negatives, max_steps × batch rows (2000 steps by default), batched in order."""
    return ct_rows(training_sentences(ctx), ctx.planned_rows(2000), ctx.training.seed)


def keep_better_tower(model, loss: ContrastiveTensionLoss, ctx: TrainContext):
    """The original keeps whichever tower scores better on the dev task (STS-B dev)."""
    score2, score1 = ctx.score_on_dev(model), ctx.score_on_dev(loss.model1)
    if score1 > score2:
        model.load_state_dict(loss.model1.state_dict())
    return model, {"kept_tower": 1 if score1 > score2 else 2, "dev_spearman_by_tower": {1: score1, 2: score2}}


def build_st_ct_loss(model, columns: Columns, ctx: TrainContext):
    """sentence-transformers' own ContrastiveTensionLoss (sum-reduced BCE, dropout as the trainer leaves
    it, the second tower `model2` = the model kept), on the same rows, for the side-by-side comparison."""
    from sentence_transformers.losses import ContrastiveTensionLoss as LibraryContrastiveTensionLoss

    return LibraryContrastiveTensionLoss(model)
