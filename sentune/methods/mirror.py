"""Mirror-BERT and unsupervised SimCSE: contrastive learning with two views of the same sentence.

Liu et al. 2021 ("Fast, Effective, and Self-Supervised: Transforming Masked Language Models into
Universal Lexical and Sentence Encoders", EMNLP) and Gao et al. 2021 ("SimCSE", EMNLP), in the form of
the BERT-CF report §4.1: the same encoder f runs twice with independent dropout; the second view x'_i has a span of
tokens replaced by [MASK], its length drawn from Geometric(p_g) and capped at `span_cap` (cap 0 = SimCSE:
dropout only). With candidates N(x_i) = f'(x'_i) ∪ ⋃_{j≠i} {f'(x'_j), f(x_j)} (2b − 1 of them):

  L_mirror = −1/b Σ_i log  exp(sim(f(x_i), f'(x'_i))/τ) / Σ_{n ∈ N(x_i)} exp(sim(f(x_i), n)/τ)

sim = cosine; f(x) = masked mean of the last layer (§5.3). `masking: char` replaces a random 5-character
substring of the raw text by "[MASK]" as the original Mirror-BERT code does (strings of 30+ characters);
it needs the text, so it happens when the dataset is built (one draw per example).
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

from sentune.core.device import full_precision
from sentune.core.distributed import gather, offset, own_columns
from sentune.methods.base import Columns, TrainContext, sentence_rows
from sentune.methods.citations import MIRROR_CITATION as CITATION


def mirror_infonce(anchors: torch.Tensor, mirrors: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    """anchors f(x_i), mirrors f'(x'_i): (b, d), any scale (cosine inside). Under data parallel training the
    candidates are every process's (sentune.core.distributed); one process gives the formula above."""
    with full_precision(anchors, mirrors) as (anchors, mirrors):
        return _mirror_infonce(anchors, mirrors, temperature, gather_negatives)


def _mirror_infonce(anchors: torch.Tensor, mirrors: torch.Tensor, temperature: float, gather_negatives: bool) -> torch.Tensor:
    a, m = F.normalize(anchors, dim=-1), F.normalize(mirrors, dim=-1)
    all_a, all_m, start = gather(a, gather_negatives), gather(m, gather_negatives), offset(len(a), gather_negatives)
    own = own_columns(len(a), len(all_a), start, a.device)
    to_mirrors = a @ all_m.T / temperature  # (b, B): the positive at the row's own column, f'(x'_j) negatives elsewhere
    to_anchors = (a @ all_a.T / temperature).masked_fill(own, float("-inf"))
    logits = torch.cat([to_mirrors, to_anchors], dim=1)  # 2B columns, one of them -inf: 2B − 1 candidates
    return F.cross_entropy(logits, start + torch.arange(len(a), device=a.device))


def mask_token_spans(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, special: torch.Tensor, mask_id: int, p: float, cap: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One span per sentence of length min(Geometric(p), cap, real tokens) set to [MASK]; special tokens kept."""
    out = input_ids.clone()
    if cap <= 0:
        return out
    for row in range(len(out)):
        positions = torch.nonzero((attention_mask[row] == 1) & ~special[row]).flatten()
        if len(positions) == 0:
            continue
        u = torch.rand((), generator=generator).clamp(min=1e-12)
        length = int(min(cap, len(positions), 1 + int(torch.log(u) / torch.log(torch.tensor(1 - p)))))  # Geometric(p) on {1, 2, …}
        start = int(torch.randint(0, len(positions) - length + 1, (), generator=generator))
        out[row, positions[start : start + length]] = mask_id
    return out


def mask_characters(text: str, rng: random.Random, span: int = 5, min_length: int = 30) -> str:
    """The original Mirror-BERT augmentation: a random `span`-character substring becomes "[MASK]"."""
    if len(text) < min_length:
        return text
    start = rng.randrange(0, len(text) - span + 1)
    return text[:start] + "[MASK]" + text[start + span :]


class MirrorLoss(nn.Module):
    """Inputs: one text column (token masking, or none for SimCSE) or two (the sentence and its
    character-masked copy, `masking: char`)."""

    def __init__(self, model, temperature: float = 0.05, span_p: float = 0.3, span_cap: int = 5, masking: str = "token", gather_negatives: bool = True) -> None:
        super().__init__()
        if masking not in ("token", "char"):
            raise ValueError(f"masking must be token or char, got {masking!r}")
        self.model, self.temperature, self.span_p, self.span_cap, self.masking = model, temperature, span_p, span_cap, masking
        self.gather_negatives = gather_negatives

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels=None) -> torch.Tensor:
        features = sentence_features[0]
        anchors = self.model(dict(features))["sentence_embedding"]
        # char-masked copy prepared in the dataset, or token spans masked here
        mirror_features = dict(sentence_features[1]) if len(sentence_features) > 1 else self.masked_view(features)
        mirrors = self.model(mirror_features)["sentence_embedding"]  # a second pass: independent dropout
        return mirror_infonce(anchors, mirrors, self.temperature, self.gather_negatives)

    def masked_view(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        view = dict(features)
        if self.span_cap > 0:
            tokenizer = self.model.tokenizer
            ids = features["input_ids"]
            special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids, device=ids.device))
            view["input_ids"] = mask_token_spans(ids, features["attention_mask"], special, tokenizer.mask_token_id, self.span_p, self.span_cap)
        return view

    def get_config_dict(self) -> dict:
        return {
            "temperature": self.temperature,
            "span_p": self.span_p,
            "span_cap": self.span_cap,
            "masking": self.masking,
            "gather_negatives": self.gather_negatives,
        }

    @property
    def citation(self) -> str:
        return CITATION


def build_mirror_loss(model, columns: Columns, ctx: TrainContext) -> MirrorLoss:
    return MirrorLoss(model, **vars(ctx.params))


def char_masked_rows(ctx: TrainContext) -> Columns:
    """The sentences and their character-masked copies (one draw per row, seeded by training.seed)."""
    columns = sentence_rows(ctx)
    rng = random.Random(ctx.training.seed)
    columns["masked"] = [mask_characters(s, rng) for s in columns["sentence"]]
    return columns
