"""Sentence Ensemble Distillation (Carlsson & Sahlgren et al., seeds 003/004 §4).

N members trained with the same recipe and different seeds; for every sentence of a distillation corpus
the target is the mean of the members' embeddings (masked mean of the last layer), computed once and
cached on disk; a learner initialised from the base model is trained with MSE to that target:

  L = 1/(B·d) Σ_i ‖f_learner(s_i) − (1/N) Σ_n f_n(s_i)‖²     (Adam, batch 32, lr 2e-5, 10% linear warm-up)

and evaluated with the mean of its last two layers (`eval_layers`: 1, 2 or 3; `dev` picks the one of the three
with the best STS-B dev Spearman — the paper's two layers come from its layer study on BERT-Large, and a model
trained for last-layer mean pooling, like all-MiniLM-L6-v2, can score lower with them). Members are given as model
folders (`params.members`); `sentune.train.ensemble.save_ensemble` saves their average as one model (loads with
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

from sentune.core.cache import cached_array
from sentune.methods import Method, register

logger = logging.getLogger(__name__)

CITATION = """@article{carlsson2021sed,
  title = {Sentence Embeddings by Ensemble Distillation},
  author = {Carlsson, Fredrik and Sahlgren, Magnus},
  journal = {arXiv preprint arXiv:2104.06719},
  year = {2021}
}"""


def ensemble_targets(members: list[str], sentences: list[str], cache_dir: Path | None, *, show_progress: bool = True) -> np.ndarray:
    """Mean of the members' masked-mean embeddings for every sentence, cached under cache_dir and reused
    (the key covers the member folders' weights and the sentences)."""
    from sentune.core.build import with_pooling
    from sentune.core.encode import Encoder
    from sentune.core.models import load_model

    def compute() -> np.ndarray:
        total = None
        for member in members:
            vectors = Encoder(with_pooling(load_model(member), "mean"), "model", show_progress=show_progress).encode(sentences).astype(np.float64)
            total = vectors if total is None else total + vectors
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
        target = torch.from_numpy(np.ascontiguousarray(self.targets[labels.cpu().numpy()])).to(predicted.device)
        return F.mse_loss(predicted, target)

    @property
    def citation(self) -> str:
        return CITATION


def build_sed_loss(model, *, train_sentences, cache_dir, paraphrases=None, members: list[str] | None = None, eval_layers: int | str = 2) -> DistillationLoss:
    if not members:
        raise ValueError("SED needs params.members: the model folders of the ensemble members")
    if eval_layers not in EVAL_LAYERS:
        raise ValueError(f"params.eval_layers must be 1, 2, 3 or 'dev', got {eval_layers!r}")
    loss = DistillationLoss(model, ensemble_targets(list(members), train_sentences, cache_dir))
    loss.eval_layers = eval_layers
    return loss


def learner_pooling(model, loss, data_dir=None):
    """Evaluate (and save) the learner with the mean of its last `eval_layers` layers; with 'dev', the number
    of layers whose pooling scores best on STS-B dev (ties: fewer layers)."""
    from sentune.core.build import with_pooling

    layers = getattr(loss, "eval_layers", 2)
    if layers != "dev":
        return with_pooling(model, LAYER_POOLING[layers])
    from sentune.train.trainer import DevEvaluator

    evaluator = DevEvaluator("STS-B-dev", data_dir)
    scores = {n: evaluator(with_pooling(model, LAYER_POOLING[n]))[evaluator.primary_metric] for n in (1, 2, 3)}
    chosen = max(scores, key=lambda n: (scores[n], -n))
    loss.finalize_note = {"eval_layers": chosen, "dev_spearman_by_layers": scores}  # into results.json's meta
    logger.info("SED learner pooling chosen on STS-B dev: last %d layer(s) (dev Spearman %s)", chosen,
                ", ".join(f"{n}: {score:.2f}" for n, score in scores.items()))
    return with_pooling(model, LAYER_POOLING[chosen])


LAYER_POOLING = {1: "mean", 2: "last2", 3: "last3"}
EVAL_LAYERS = (*LAYER_POOLING, "dev")


register(Method("sed", build_sed_loss, pooling="mean", columns=("sentence", "label"), citation=CITATION, finalize=learner_pooling))
