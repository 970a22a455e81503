"""Supervised STS regression with a tuned lower bound (the SED paper §5.5): the cosine of the two sentence
embeddings is regressed with MSE onto the gold score mapped linearly from [0, 5] to [lb, 1]:

  L = 1/B Σ (cos(f(a), f(b)) − (lb + (1 − lb)·y/5))²

lb = 0 is SBERT's CosineSimilarityLoss; the paper picks lb on STS-B dev from {0, 0.05, …, 0.95}
(`params.lower_bound`, one run per value). Data: STS-B train pairs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sentune.core.device import full_precision
from sentune.data.catalog import load_examples
from sentune.methods.base import Columns, TrainContext


def best_lower_bound(dev_means: dict[float, float]) -> float:
    """The paper's choice of lb: the value with the best mean STS-B dev Spearman over its runs; on a tie the smallest."""
    return max(sorted(dev_means), key=lambda lb: dev_means[lb])


def lower_bound_target(score: torch.Tensor, lower_bound: float) -> torch.Tensor:
    return lower_bound + (1 - lower_bound) * score / 5.0


class LowerBoundCosineLoss(nn.Module):
    def __init__(self, model, lower_bound: float = 0.0) -> None:
        super().__init__()
        if not 0 <= lower_bound < 1:
            raise ValueError(f"lower_bound must be in [0, 1), got {lower_bound}")
        self.model, self.lower_bound = model, lower_bound

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        a = self.model(dict(sentence_features[0]))["sentence_embedding"]
        b = self.model(dict(sentence_features[1]))["sentence_embedding"]
        with full_precision(a, b) as (a, b):
            return F.mse_loss(F.cosine_similarity(a, b, dim=-1), lower_bound_target(labels.float(), self.lower_bound))

    def get_config_dict(self) -> dict:
        return {"lower_bound": self.lower_bound}


def build_loss(model, columns: Columns, ctx: TrainContext) -> LowerBoundCosineLoss:
    return LowerBoundCosineLoss(model, ctx.params.lower_bound)


def sts_train_view(ctx: TrainContext) -> Columns:
    """The `stsb-train` set's pairs with their gold scores, the first training.max_sentences of them."""
    pairs = load_examples("stsb-train", ctx.data_dir)[: ctx.training.max_sentences]
    return {"sentence_a": [p.a for p in pairs], "sentence_b": [p.b for p in pairs], "label": [p.score for p in pairs]}
