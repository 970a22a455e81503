"""Multitask fine-tuning of the BERT-CF report (§4.3, §5.2, §5.3): a shared encoder f with three heads.

  sentiment   logits = W_sent · dropout₀.₃(f(x)),  L_sent = cross-entropy (SST-5, 5 classes)
  paraphrase  y_para = max(cos(W_para f(x₁), W_para f(x₂)), h_para),  h_para = 0.7,
              L_para = 1[y=1]·(1 − y_para) + 1[y=−1]·(y_para − h_para)          (QQP; mean over pairs)
  similarity  y_sem = max(cos(W_sem·dropout₀.₁(f(x₁)), W_sem·dropout₀.₁(f(x₂))), h_sem),  h_sem = 0,
              L_sem = MSE(y_sem, gold scaled linearly from [0, 5] to [h_sem, 1])     (STS-B)
  L_FT = 5·L_sent + 20·L_para + 1·L_sem;  every step one batch of 32 SST-5, 96 QQP and 32 STS examples.

The heads read f(x) at one scale for every encoder (`head_input`, default `unit`: the sentence embedding L2-normalised).
Encoders differ in the norm of their output (all-MiniLM-L6-v2 ends in Normalize; trained encoders need not; a flow's
output has norm about √d), and the sentiment head's logits scale with it while the two cosine heads do not; `as-is`
feeds the embedding unchanged.

A training row therefore bundles 1 SST-5 sentence, 3 QQP pairs and 1 STS pair (batch 32 rows = 32/96/32);
the labels travel as one vector per row. Evaluation (§5.2): SST-5 accuracy of the argmax; QQP accuracy
with y_para ≥ (1 + h_para)/2 meaning paraphrase; STS Pearson of y_sem rescaled from [h_sem, 1] to [0, 5].
The data directory holds QQP's dev and test halves only: training uses one, reporting the other.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers.evaluation import SentenceEvaluator
from torch import nn

from sentune.data.catalog import load_catalog, load_examples, load_task
from sentune.methods.base import Columns, TrainContext
from sentune.methods.citations import MULTITASK_CITATION as CITATION
from sentune.methods.records import QQP_PER_ROW, MultitaskParams, multitask_columns
from sentune.tasks.sts import correlation


def hinge_cosine(u: torch.Tensor, v: torch.Tensor, hinge: float) -> torch.Tensor:
    return F.cosine_similarity(u, v, dim=-1).clamp(min=hinge)


def paraphrase_loss(y_para: torch.Tensor, is_paraphrase: torch.Tensor, hinge: float) -> torch.Tensor:
    """Cosine-embedding loss with the hinge (Wilkinson & Brun 2016), mean over pairs."""
    return torch.where(is_paraphrase, 1 - y_para, y_para - hinge).mean()


class MultitaskHeads(nn.Module):
    def __init__(self, dim: int, classes: int = 5, e_para: int = 768, e_sem: int = 768) -> None:
        super().__init__()
        self.sent = nn.Linear(dim, classes)
        self.para = nn.Linear(dim, e_para)
        self.sem = nn.Linear(dim, e_sem)
        self.drop_sent, self.drop_sem = nn.Dropout(0.3), nn.Dropout(0.1)


def head_input(embedding: torch.Tensor, scale: str) -> torch.Tensor:
    """What the heads read: the sentence embedding on the unit sphere (`unit`) or as the encoder gives it (`as-is`)."""
    return F.normalize(embedding, dim=-1) if scale == "unit" else embedding


class MultitaskLoss(nn.Module):
    def __init__(
        self, model, h_para: float = 0.7, h_sem: float = 0.0, weights: tuple = (5.0, 20.0, 1.0), e_para: int = 768, e_sem: int = 768, head_input: str = "unit"
    ) -> None:
        super().__init__()
        self.model, self.h_para, self.h_sem, self.weights = model, h_para, h_sem, tuple(weights)
        self.head_input = head_input
        self.heads = MultitaskHeads(model.get_embedding_dimension(), 5, e_para, e_sem).to(model.device)

    def _embed(self, features: dict) -> torch.Tensor:
        return head_input(self.model(dict(features))["sentence_embedding"], self.head_input)

    def scores(self, sst, qqp_pairs, sts_pair):
        """Head outputs: SST-5 logits, y_para per QQP pair, y_sem per STS pair."""
        logits = self.heads.sent(self.heads.drop_sent(self._embed(sst)))
        y_para = torch.cat([hinge_cosine(self.heads.para(self._embed(a)), self.heads.para(self._embed(b)), self.h_para) for a, b in qqp_pairs])
        a, b = sts_pair
        y_sem = hinge_cosine(self.heads.sem(self.heads.drop_sem(self._embed(a))), self.heads.sem(self.heads.drop_sem(self._embed(b))), self.h_sem)
        return logits, y_para, y_sem

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor) -> dict[str, torch.Tensor]:
        sst, qqp, sts = sentence_features[0], sentence_features[1 : 1 + 2 * QQP_PER_ROW], sentence_features[-2:]
        logits, y_para, y_sem = self.scores(sst, list(zip(qqp[0::2], qqp[1::2], strict=True)), sts)
        sst_labels = labels[:, 0].long()
        qqp_labels = labels[:, 1 : 1 + QQP_PER_ROW].T.reshape(-1) > 0.5  # pair-major, as y_para
        sem_target = self.h_sem + (1 - self.h_sem) * labels[:, -1] / 5.0
        w_sent, w_para, w_sem = self.weights
        return {
            "sentiment": w_sent * F.cross_entropy(logits, sst_labels),
            "paraphrase": w_para * paraphrase_loss(y_para, qqp_labels, self.h_para),
            "similarity": w_sem * F.mse_loss(y_sem, sem_target),
        }

    def get_config_dict(self) -> dict:
        return {"h_para": self.h_para, "h_sem": self.h_sem, "weights": list(self.weights), "head_input": self.head_input}

    @property
    def citation(self) -> str:
        return CITATION


def multitask_rows(sst: list, qqp: list, sts: list, rows: int, seed: int) -> dict[str, list]:
    """`rows` training rows, each: 1 SST-5 sentence, QQP_PER_ROW QQP pairs, 1 STS pair; every source is
    walked in its own shuffled order and reshuffled when exhausted."""
    rng = random.Random(seed)

    def stream(items):
        while True:
            order = list(range(len(items)))
            rng.shuffle(order)
            yield from (items[i] for i in order)

    s_sst, s_qqp, s_sts = stream(sst), stream(qqp), stream(sts)
    columns: dict[str, list] = {name: [] for name in multitask_columns()}
    for _ in range(rows):
        example = next(s_sst)
        columns["sst"].append(example.text)
        labels = [float(example.label)]
        for k in range(QQP_PER_ROW):
            pair = next(s_qqp)
            columns[f"qqp_a{k}"].append(pair.a)
            columns[f"qqp_b{k}"].append(pair.b)
            labels.append(float(pair.label))
        pair = next(s_sts)
        columns["sts_a"].append(pair.a)
        columns["sts_b"].append(pair.b)
        columns["label"].append(labels + [pair.score])
    return columns


class MultitaskEvaluator(SentenceEvaluator):
    """Dev (or test) metrics of §5.2 through the loss's heads; primary metric = their mean ×100."""

    def __init__(self, loss: MultitaskLoss, sst: list, qqp: list, sts: list, name: str = "multitask-dev", batch_size: int = 64) -> None:
        super().__init__()
        self.loss, self.sst, self.qqp, self.sts, self.name, self.batch_size = loss, sst, qqp, sts, name, batch_size
        self.primary_metric = f"{name}_mean"

    @torch.no_grad()
    def __call__(self, model, output_path=None, epoch=-1, steps=-1) -> dict[str, float]:
        was_training = self.loss.training
        self.loss.eval()
        try:

            def embed(texts: list[str]) -> torch.Tensor:
                batches = (model.preprocess(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size))
                return torch.cat([self.loss._embed({k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in b.items()}) for b in batches])

            heads = self.loss.heads
            predicted = heads.sent(embed([e.text for e in self.sst])).argmax(-1).cpu().numpy()
            sst_acc = float((predicted == np.array([e.label for e in self.sst])).mean())
            y_para = hinge_cosine(heads.para(embed([p.a for p in self.qqp])), heads.para(embed([p.b for p in self.qqp])), self.loss.h_para).cpu().numpy()
            qqp_acc = float(((y_para >= (1 + self.loss.h_para) / 2) == np.array([p.label == 1 for p in self.qqp])).mean())
            y_sem = hinge_cosine(heads.sem(embed([p.a for p in self.sts])), heads.sem(embed([p.b for p in self.sts])), self.loss.h_sem).cpu().numpy()
            sts_pearson = correlation("pearson", np.array([p.score for p in self.sts]), 5 * (y_sem - self.loss.h_sem) / (1 - self.loss.h_sem))
        finally:
            self.loss.train(was_training)
        metrics = {"sst5_acc": 100 * sst_acc, "qqp_acc": 100 * qqp_acc, "sts_pearson": sts_pearson}
        metrics["mean"] = float(np.mean(list(metrics.values())))
        return {f"{self.name}_{k}": v for k, v in metrics.items()}


def split_held_out(pairs: list, seed: int = 0) -> tuple[list, list]:
    """Halve labelled pairs into dev and test, stratified by label with a fixed seed. The files are
    ordered (BiMPM's QQP test.tsv alternates 1, 0, 1, 0, …), so taking alternate rows gave an
    all-duplicate dev half and an all-non-duplicate test half."""
    from sklearn.model_selection import train_test_split

    dev, test = train_test_split(pairs, test_size=0.5, random_state=seed, stratify=[p.label for p in pairs])
    return dev, test


def load_multitask_data(data_dir: Path, qqp_train: str = "dev", *, allow_modified: bool = False) -> dict[str, dict[str, list]]:
    """SST-5 train/dev/test (task SST5), STS-B train/dev/test (task STS-B-reg), QQP: the `qqp-{qqp_train}`
    half for training, the other half split in two for dev and test (the data directory has no QQP train
    split; see split_held_out)."""
    catalog = load_catalog()
    sst = load_task(catalog["SST5"], data_dir, allow_modified=allow_modified)
    sts = load_task(catalog["STS-B-reg"], data_dir, allow_modified=allow_modified)
    other = "test" if qqp_train == "dev" else "dev"
    dev, test = split_held_out(load_examples(f"qqp-{other}", data_dir))
    qqp = {"train": load_examples(f"qqp-{qqp_train}", data_dir), "dev": dev, "test": test}
    return {"sst": sst, "qqp": qqp, "sts": sts}


def multitask_view(ctx: TrainContext) -> Columns:
    data = load_multitask_data(ctx.data_dir, ctx.params.qqp_train, allow_modified=ctx.allow_modified)
    return multitask_rows(data["sst"]["train"], data["qqp"]["train"], data["sts"]["train"], ctx.planned_rows(5000), ctx.training.seed)


def make_evaluator(loss: MultitaskLoss, ctx: TrainContext, split: str) -> MultitaskEvaluator:
    data = load_multitask_data(ctx.data_dir, ctx.params.qqp_train, allow_modified=ctx.allow_modified)
    return MultitaskEvaluator(loss, data["sst"][split], data["qqp"][split], data["sts"][split], name=f"multitask-{split}")


def build_multitask_loss(model, columns: Columns, ctx: TrainContext) -> MultitaskLoss:
    p: MultitaskParams = ctx.params
    return MultitaskLoss(model, h_para=p.h_para, h_sem=p.h_sem, weights=p.weights, e_para=p.e_para, e_sem=p.e_sem, head_input=p.head_input)
