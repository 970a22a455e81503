"""Every pooling in one place: training, evaluation and baselines all call these functions.

Hidden states follow Hugging Face's convention: `hidden_states[0]` is the embedding-layer output and
`hidden_states[k]` the output of transformer block k (k = 1..L). A pooling is named by a short string:

=============  ==========================================================================
name           meaning
=============  ==========================================================================
model          the model's own pipeline as shipped (e.g. all-MiniLM's mean + Normalize)
cls            last-layer [CLS] vector (not BERT's tanh pooler)
mean, max      masked mean / masked max over the tokens of the last layer
first-last     average of the masked means of block 1 and block L (BERT-flow's "last2avg",
               BERT-whitening's "first-last-avg": block 1, *not* the embedding layer)
last2          average of the masked means of the last two blocks
lastN[-tok]    average over the last N blocks of a token pooling (mean unless -cls/-max given)
layerK[-tok]   hidden state K alone (0 = embeddings) with a token pooling (mean by default)
wk             SBERT-WK (Wang & Kuo 2020), see :func:`wk_pool`
=============  ==========================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sentune.errors import UserError

if TYPE_CHECKING:  # the names parse without torch, so a recipe's pooling is checked before torch loads
    import torch

TOKEN_POOLINGS = ("cls", "mean", "max")


class PoolingError(UserError):
    """An unknown pooling name, or a pooling that needs more layers than the model has."""


@dataclass(frozen=True)
class PoolingSpec:
    """A parsed pooling name. `layers` index `hidden_states` (negative from the end)."""

    name: str
    tokens: str  # cls | mean | max | wk | model
    layers: tuple[int, ...] = (-1,)
    wk_layer_start: int = 4
    wk_window: int = 2

    @property
    def needs_all_layers(self) -> bool:
        return self.tokens == "wk" or (self.tokens != "model" and self.layers != (-1,))

    @classmethod
    def parse(cls, name: str) -> PoolingSpec:
        key = name.strip().lower().replace("_", "-")
        if key == "model":
            return cls(key, "model", ())
        if key in TOKEN_POOLINGS:
            return cls(key, key, (-1,))
        if key in ("first-last", "first-last-avg"):
            return cls("first-last", "mean", (1, -1))
        if key == "wk":
            return cls("wk", "wk", ())
        match = re.fullmatch(r"last(\d+)(?:-(cls|mean|max))?", key)
        if match:
            count, tokens = int(match.group(1)), match.group(2) or "mean"
            if count < 1:
                raise PoolingError(f"pooling {name!r}: lastN needs N >= 1")
            canonical = f"last{count}" if tokens == "mean" else f"last{count}-{tokens}"
            return cls(canonical, tokens, tuple(range(-count, 0)))
        match = re.fullmatch(r"layer(\d+)(?:-(cls|mean|max))?", key)
        if match:
            layer, tokens = int(match.group(1)), match.group(2) or "mean"
            return cls(f"layer{layer}-{tokens}", tokens, (layer,))
        raise PoolingError(f"unknown pooling {name!r}; choose model, cls, mean, max, first-last, last2, lastN[-cls|-max], layerK[-cls|-mean|-max] or wk")

    def check_layers(self, num_hidden_states: int) -> None:
        """Fail early, naming the pooling, when a layer index does not exist in this model."""
        for layer in self.layers:
            if not -num_hidden_states <= layer < num_hidden_states:
                raise PoolingError(
                    f"pooling {self.name!r} asks for hidden state {layer}, the model has {num_hidden_states} "
                    f"(0 = embeddings .. {num_hidden_states - 1} = last block)"
                )
        if self.tokens == "wk" and self.wk_layer_start >= num_hidden_states:
            raise PoolingError(f"wk pooling starts at layer {self.wk_layer_start}; model has {num_hidden_states}")


def check_trainable(name: str) -> PoolingSpec:
    """A pooling training can run through: any but SBERT-WK (an SVD per sentence, no useful gradient)."""
    spec = PoolingSpec.parse(name)
    if spec.tokens == "wk":
        raise PoolingError("pooling: 'wk' (SBERT-WK) is an evaluation-only pooling; train with cls, mean, max, first-last, lastN or layerK")
    return spec


def pool_tokens(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """(batch, tokens, dim) hidden states and a (batch, tokens) 0/1 mask -> (batch, dim).

    Padding never takes part: mean divides by the real token count, max ignores padded positions
    (without writing into `hidden`, unlike sentence-transformers' Pooling).
    """
    if how == "cls":
        return hidden[:, 0]
    keep = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    if how == "mean":
        return (hidden * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
    if how == "max":
        return hidden.masked_fill(keep == 0, float("-inf")).max(1).values
    raise PoolingError(f"unknown token pooling {how!r}")


def pool(spec: PoolingSpec, hidden_states: tuple[torch.Tensor, ...] | list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """Apply a parsed pooling to the hidden states of one batch -> (batch, dim)."""
    if spec.tokens == "wk":
        return wk_pool(hidden_states, mask, layer_start=spec.wk_layer_start, window=spec.wk_window)
    if spec.tokens == "model":
        raise PoolingError("the 'model' pooling runs the model's own modules; it is not a hidden-state pooling")
    import torch

    pooled = [pool_tokens(hidden_states[layer], mask, spec.tokens) for layer in spec.layers]
    return pooled[0] if len(pooled) == 1 else torch.stack(pooled).mean(0)


def _window_rows(num_layers: int, k: int, window: int) -> list[int]:
    """Rows of the SBERT-WK context window for layer k, with the reference's Python slicing kept:
    `x[k-window:k]` is EMPTY for k < window (a negative start wraps around), so the first layers get
    no left context at all rather than a clamped one."""
    rows = list(range(num_layers))
    return rows[k - window : k] + rows[k + 1 : k + window + 1] + [k]


def wk_layer_weights(tokens: torch.Tensor, window: int = 2) -> torch.Tensor:
    """SBERT-WK layer weights for each token. tokens: (N, layers, dim) -> (N, layers) summing to 1.

    For layer k the token's window matrix W = [left; right; x_k] (rows) is QR-decomposed as
    Wᵀ = QR; with r the last column of R:
      novelty   n(k) = |r_m| / ‖r‖
      alignment g(k) = 1 / (2·m·a),  a = (mean over rows of column-normalised R[:-1,:-1]) · r[:-1] / ‖r[:-1]‖
    each normalised to sum 1 over layers, the weight v(k) = n(k) + g(k) renormalised (the paper's α).
    """
    import torch

    num_tokens, num_layers, _ = tokens.shape
    novelty = tokens.new_zeros(num_tokens, num_layers)
    alignment = tokens.new_zeros(num_tokens, num_layers)
    for k in range(num_layers):
        rows = _window_rows(num_layers, k, window)
        m = len(rows)
        if m < 2:
            raise PoolingError("wk pooling needs at least two layers in its window")
        _, r_mat = torch.linalg.qr(tokens[:, rows, :].transpose(1, 2))  # (N, m, m)
        r = r_mat[:, :, -1]  # (N, m)
        novelty[:, k] = r[:, -1].abs() / r.norm(dim=1)
        upper = r_mat[:, :-1, :-1]
        upper = upper / upper.norm(dim=1, keepdim=True).clamp(min=1e-300)
        a = (upper.mean(dim=2) * r[:, :-1]).sum(1) / r[:, :-1].norm(dim=1)
        alignment[:, k] = 1.0 / (a * m * 2)
    novelty = novelty / novelty.sum(1, keepdim=True)
    alignment = alignment / alignment.sum(1, keepdim=True)
    weights = novelty + alignment
    return weights / weights.sum(1, keepdim=True)


def wk_pool(
    hidden_states: tuple[torch.Tensor, ...] | list[torch.Tensor],
    mask: torch.Tensor,
    layer_start: int = 4,
    window: int = 2,
) -> torch.Tensor:
    """SBERT-WK sentence embedding (Wang & Kuo, "SBERT-WK", IEEE/ACM TASLP 2020), as the reference code does it.

    Uses hidden states `layer_start..L` (block outputs 4..L for BERT-base). Tokens: the first
    `len - 1` positions (keeps [CLS], drops the final [SEP]). Each token becomes Σ_k v_k·h_k with
    v from :func:`wk_layer_weights`; the sentence is Σ_t w_t·token_t with w_t ∝ the variance (ddof 0)
    of the cosine similarities between adjacent layers of token t. Window note: for the first
    `window` layers the reference takes no left context (Python's negative slice is empty), and so
    do we. Computed in float64 so the QR signs and weights match the numpy reference.
    """
    import torch
    import torch.nn.functional as F

    stack = torch.stack(list(hidden_states[layer_start:]), dim=1).double()  # (B, Lw, T, D)
    lengths = mask.sum(1).long() - 1  # drop the final [SEP]
    batch, _, seq, _ = stack.shape
    positions = torch.arange(seq, device=mask.device).unsqueeze(0)
    valid = positions < lengths.unsqueeze(1)  # (B, T)
    sentence_of = torch.arange(batch, device=mask.device).unsqueeze(1).expand(batch, seq)[valid]  # (N,)
    tokens = stack.permute(0, 2, 1, 3)[valid]  # (N, Lw, D)

    layer_weights = wk_layer_weights(tokens, window)  # (N, Lw)
    token_vectors = (layer_weights.unsqueeze(-1) * tokens).sum(1)  # (N, D)

    unit = F.normalize(tokens, dim=-1)
    adjacent_cos = (unit[:, 1:] * unit[:, :-1]).sum(-1)  # (N, Lw-1)
    importance = adjacent_cos.var(dim=1, unbiased=False)  # (N,)
    totals = torch.zeros(batch, dtype=importance.dtype, device=importance.device).index_add_(0, sentence_of, importance)
    weights = importance / totals[sentence_of]
    out = torch.zeros(batch, stack.shape[-1], dtype=stack.dtype, device=stack.device)
    out.index_add_(0, sentence_of, weights.unsqueeze(1) * token_vectors)
    return out.to(hidden_states[-1].dtype)
