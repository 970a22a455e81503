"""Symmetric SimCSE: the InfoNCE of unsupervised SimCSE in both directions between two dropout views of
each sentence (the worked example of adding a method; README "Adding a method").

  z_i, z'_i = normalise(f(x_i)), normalise(f'(x_i))   (two passes, independent dropout)
  L = ½ [ CE(z z'ᵀ / τ, I) + CE(z' zᵀ / τ, I) ]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sentune.core.options import option
from sentune.methods.base import Columns, Method, TrainContext


@dataclass
class SymmetricParams:
    temperature: float = option(0.05, "τ of the softmax", minimum=0, exclusive=True)


class SymmetricInfoNCE(nn.Module):
    """Inputs: one text column (the default data view: `sentence` and its row index `label`)."""

    def __init__(self, model, temperature: float) -> None:
        super().__init__()
        self.model, self.temperature = model, temperature

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor | None = None) -> torch.Tensor:
        z = F.normalize(self.model(dict(sentence_features[0]))["sentence_embedding"], dim=-1)
        z2 = F.normalize(self.model(dict(sentence_features[0]))["sentence_embedding"], dim=-1)  # a second dropout mask
        logits = z @ z2.T / self.temperature  # (b, b): positives on the diagonal
        target = torch.arange(len(z), device=z.device)
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def build_loss(model, columns: Columns, ctx: TrainContext) -> SymmetricInfoNCE:
    return SymmetricInfoNCE(model, ctx.params.temperature)


METHOD = Method("simcse-sym", build_loss, pooling="mean", columns=("sentence",), params=SymmetricParams)
