"""Sentence Ensemble Distillation (Carlsson & Sahlgren, "Sentence Embeddings by Ensemble Distillation", 2021, §4: the SED paper).

N members trained with the same recipe and different seeds; for every sentence of a distillation corpus
the target is the mean of the members' embeddings (masked mean of the last layer), computed once and
cached on disk; a learner initialised from the base model is trained with MSE to that target:

  L = 1/(B·d) Σ_i ‖f_learner(s_i) − (1/N) Σ_n f_n(s_i)‖²     (Adam, batch 32, lr 2e-5, 10% linear warm-up)

and evaluated with the mean of its last two layers (`eval_layers`: 1, 2 or 3; `dev` picks the one of the three
with the best Spearman on the recipe's dev task (STS-B dev) — the paper's two layers come from its layer study on BERT-Large, and a model
trained for last-layer mean pooling, like all-MiniLM-L6-v2, can score lower with them). Members are given as model
folders (`params.members`); `sentune.training.ensemble.save_ensemble` saves their average as one model (loads with
`SentenceTransformer(path)`) for the full-ensemble row of Table 3.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sentune.core.cache import cached_array, read_rows
from sentune.core.device import full_precision
from sentune.methods.base import Columns, TrainContext
from sentune.methods.citations import SED_CITATION as CITATION

logger = logging.getLogger(__name__)


def ensemble_targets(members: list[str], sentences: list[str], cache_dir: Path | None, *, device: str, show_progress: bool = True) -> np.ndarray:
    """Mean of the members' masked-mean embeddings for every sentence, cached under cache_dir and reused
    (the key covers the member folders' weights and the sentences)."""
    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.modules.build import with_pooling

    def compute() -> np.ndarray:
        total = np.zeros((0,))
        for index, member in enumerate(members):
            desc = f"SED: ensemble targets, member {index + 1}/{len(members)} (cached)"
            vectors = (
                Encoder(with_pooling(load_model(member, device=device), "mean"), "model", show_progress=show_progress, desc=desc)
                .encode(sentences)
                .astype(np.float64)
            )
            total = vectors if index == 0 else total + vectors
        return (total / len(members)).astype(np.float32)

    key = _targets_key(members, sentences)
    return cached_array(Path(cache_dir) / f"sed-targets-{key}.npy" if cache_dir else None, compute)


def _targets_key(members: list[str], sentences: list[str]) -> str:
    digest = hashlib.sha256()
    for member in members:
        folder = Path(member)
        weights = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
        digest.update(member.encode())
        for weight in weights:  # size and modification time identify a saved model cheaply
            stat = weight.stat()
            digest.update(f"{weight.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for sentence in sentences:
        digest.update(sentence.encode() + b"\0")
    return digest.hexdigest()[:16]


class DistillationLoss(nn.Module):
    """Inputs: one text column and `label` = the row index into the cached targets."""

    def __init__(self, model, targets: np.ndarray) -> None:
        super().__init__()
        self.model, self.targets = model, targets

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> torch.Tensor:
        predicted = self.model(dict(sentence_features[0]))["sentence_embedding"]
        target = torch.from_numpy(read_rows(self.targets, labels.cpu().numpy())).to(predicted.device)
        with full_precision(predicted) as (predicted,):
            return F.mse_loss(predicted, target)

    @property
    def citation(self) -> str:
        return CITATION


LAYER_POOLING = {1: "mean", 2: "last2", 3: "last3"}


def build_sed_loss(model, columns: Columns, ctx: TrainContext) -> DistillationLoss:
    targets = ensemble_targets(list(ctx.params.members), columns["sentence"], ctx.cache_dir, device=ctx.device, show_progress=ctx.show_progress)
    return DistillationLoss(model, targets)


def choose_layers(scores: dict[int, float]) -> int:
    """The number of last layers whose mean pooling scores best on dev; ties go to fewer layers."""
    return max(scores, key=lambda n: (scores[n], -n))


def learner_pooling(model, loss, ctx: TrainContext):
    """Evaluate (and save) the learner with the mean of its last `eval_layers` layers; with 'dev', the number
    of layers whose pooling scores best on the recipe's dev task (choose_layers)."""
    from sentune.modules.build import with_pooling

    layers = ctx.params.eval_layers
    if layers != "dev":
        return with_pooling(model, LAYER_POOLING[layers]), None
    scores = {n: ctx.score_on_dev(with_pooling(model, LAYER_POOLING[n])) for n in (1, 2, 3)}
    chosen = choose_layers(scores)
    logger.info(
        "SED learner pooling chosen on %s: last %d layer(s) (dev score, the dev set's metric ×100: %s)",
        ctx.dev_task,
        chosen,
        ", ".join(f"{n}: {score:.2f}" for n, score in scores.items()),
    )
    return with_pooling(model, LAYER_POOLING[chosen]), {"eval_layers": chosen, "dev_spearman_by_layers": scores}
