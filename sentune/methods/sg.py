"""Self-guided contrastive learning (SG, SG-OPT).

Kim, Yoo & Lee, "Self-Guided Contrastive Learning for BERT Sentence Representations", ACL 2021
(Kim et al. 2021, §3). Two copies of the encoder: BERT_F, a frozen clone of the initial weights, supplies
views h_{i,k} = p(H_{i,k}) — a token pooling p (max by default) of every hidden state k = 0..l of
sentence i — and BERT_T, the model being trained (its layer 0, the embeddings, frozen), supplies the
sentence vector c_i = its last-layer [CLS]. A projection head f (Linear d→4096, GELU, Linear
4096→4096, GELU; shared by c and h; discarded after training) and φ(u, v) = exp(cos(f(u), f(v)) / τ):

  L^base  = 1/(2b) Σ_m −log φ(x_m, μ(x_m)) / Σ_{n≠m} φ(x_m, x_n),  X = {c_i} ∪ {h_i},
            μ(c_i) = h_i, μ(h_i) = c_i, h_i = σ({h_{i,k}}) one layer sampled uniformly     (SG)
  L^opt1_i = −log φ(c_i, h_i) / (Σ_{j≠i} φ(c_i, c_j) + Σ_j φ(c_i, h_j))
  L^opt2_i = −log φ(c_i, h_i) / Σ_j φ(c_i, h_j)
  L^opt3_{i,k} = −log φ(c_i, h_{i,k}) / (φ(c_i, h_{i,k}) + Σ_{m≠i} Σ_{n=0..l} φ(c_i, h_{m,n}))   (SG-OPT)
  L^reg = λ ‖BERT_F − BERT_T‖²  (squared L2 over all parameters; the frozen embeddings add 0)
  L = mean of the contrastive terms + L^reg.

Choices where the released code (galsang/SG-BERT) differs from the paper — we follow the paper:
- BERT_F stays in eval mode (no dropout) for the whole run; the released code lets the trainer switch
  it back to train mode, so its views carry dropout noise.
- Views are max-pooled (paper §3.1); the released default is mean (`view_pooling: mean` gives it).
- L^base is the symmetric NT-Xent over 2b vectors; the released SG objective fails on a label-shape bug.
- The layer set is every hidden state 0..l unless `layers` selects a subset (A.3 drops lower layers).

Because BERT_F is frozen and deterministic in eval mode, a sentence's views never change: with
`cached_views` they are computed once for the whole training set (memory-mapped on disk) and looked
up by row index, instead of a second forward pass every step. The two-model path stays as reference.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import operator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sentune.core.cache import cached_array, read_rows
from sentune.core.device import full_precision
from sentune.core.distributed import gather, offset, own_columns
from sentune.methods.base import Columns, TrainContext
from sentune.methods.citations import SG_CITATION as CITATION
from sentune.methods.records import SGParams

logger = logging.getLogger(__name__)

OBJECTIVES = ("base", "opt1", "opt2", "opt3")


class ProjectionHead(nn.Sequential):
    """f: Linear(d, hidden) → GELU → Linear(hidden, hidden) → GELU (a GELU after each layer, §3 fn. 4)."""

    def __init__(self, dim: int, hidden: int = 4096) -> None:
        super().__init__(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        for layer in self:
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, std=0.02)  # BERT's initializer_range, as the released code
                nn.init.zeros_(layer.bias)


# Each objective takes this process's rows and, under data parallel training, contrasts them with every
# process's (sentune.core.distributed.gather): one process gives the formulas below exactly.


def nt_xent_base(c: torch.Tensor, h: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    with full_precision(c, h) as (c, h):
        return _nt_xent_base(c, h, temperature, gather_negatives)


def _nt_xent_base(c: torch.Tensor, h: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    """L^base over X = [c; h] (2b rows): unit vectors c, h of shape (b, D)."""
    b = c.shape[0]
    x = torch.cat([c, h])  # (2b, D): this process's rows
    everything = torch.cat([gather(c, gather_negatives), gather(h, gather_negatives)])  # (2B, D): [C; H]
    big_b, start = len(everything) // 2, offset(b, gather_negatives)
    logits = x @ everything.T / temperature
    mine = torch.cat([start + torch.arange(b), big_b + start + torch.arange(b)]).to(c.device)  # each row's own column
    logits = logits.masked_fill(torch.nn.functional.one_hot(mine, len(everything)).bool(), float("-inf"))
    positives = torch.cat([big_b + start + torch.arange(b), start + torch.arange(b)]).to(c.device)
    return F.cross_entropy(logits, positives)


def opt1_loss(c: torch.Tensor, h: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    with full_precision(c, h) as (c, h):
        return _opt1_loss(c, h, temperature, gather_negatives)


def _opt1_loss(c: torch.Tensor, h: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    all_c, all_h, start = gather(c, gather_negatives), gather(h, gather_negatives), offset(len(c), gather_negatives)
    own = own_columns(len(c), len(all_c), start, c.device)
    cc = (c @ all_c.T / temperature).masked_fill(own, float("-inf"))  # (b, B)
    ch = c @ all_h.T / temperature
    return (torch.logsumexp(torch.cat([cc, ch], dim=1), dim=1) - ch[own]).mean()


def opt2_loss(c: torch.Tensor, h: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    with full_precision(c, h) as (c, h):
        return _opt2_loss(c, h, temperature, gather_negatives)


def _opt2_loss(c: torch.Tensor, h: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    all_h, start = gather(h, gather_negatives), offset(len(c), gather_negatives)
    ch = c @ all_h.T / temperature
    return (torch.logsumexp(ch, dim=1) - ch[own_columns(len(c), len(all_h), start, c.device)]).mean()


def opt3_loss(c: torch.Tensor, views: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    with full_precision(c, views) as (c, views):
        return _opt3_loss(c, views, temperature, gather_negatives)


def _opt3_loss(c: torch.Tensor, views: torch.Tensor, temperature: float, gather_negatives: bool = True) -> torch.Tensor:
    """c: (b, D) unit; views: (b, L, D) unit. Mean of L^opt3_{i,k} over the b·L (sentence, layer) pairs."""
    all_views, start = gather(views, gather_negatives), offset(len(c), gather_negatives)
    scores = torch.einsum("id,mnd->imn", c, all_views) / temperature  # (b, B, L): c_i · h_{m,n}
    own = own_columns(len(c), len(all_views), start, c.device)
    positives = scores[own]  # (b, L): c_i · h_{i,k}
    negatives = torch.logsumexp(scores.masked_fill(own.unsqueeze(-1), float("-inf")).flatten(1), dim=1)  # (b,)
    return (torch.logaddexp(positives, negatives.unsqueeze(1)) - positives).mean()


class _SquaredDistanceTo(torch.autograd.Function):
    """‖θ − θ_F‖² with gradient 2(θ − θ_F), the difference recomputed in backward: autograd would keep every
    parameter's difference from forward to backward (pow saves its input), a second copy of the trained weights."""

    @staticmethod
    def forward(ctx, param: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(param, reference)
        return (param - reference).pow(2).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        param, reference = ctx.saved_tensors
        return grad * (2 * (param - reference)), None  # pow's own backward: grad · (2 · difference)


def squared_distance(tuned: nn.Module, frozen: nn.Module) -> torch.Tensor:
    """‖θ_T − θ_F‖² over parameters with the same name (a parameter both share adds exactly 0 and is skipped)."""
    reference = dict(frozen.named_parameters(remove_duplicate=False))
    named = [(name, param) for name, param in tuned.named_parameters() if param is not reference[name]]
    if not named:
        return torch.zeros((), device=next(tuned.parameters()).device)
    if named and named[0][1].device.type == "cuda":
        # On a GPU a step is bound by launching kernels (~3 a parameter here, ~600 at BERT-base, twice that backwards):
        # the foreach kernels take a few for all of them.
        params: list[torch.Tensor] = [param for _, param in named]
        others: list[torch.Tensor] = [reference[name] for name, _ in named]
        norms = torch._foreach_norm(torch._foreach_sub(params, others))
        return torch.stack(norms).pow(2).sum()
    # Summed left to right, term by term: the order the kept (CPU) results were computed with.
    return functools.reduce(operator.add, [_SquaredDistanceTo.apply(param, reference[name]) for name, param in named])


VIEWS_ON_DEVICE_BYTES = 4 << 30  # the cached views go to the GPU up to this size (BERT-base, 13 views: ~100k sentences)


class SelfGuidedLoss(nn.Module):
    """SG / SG-OPT. Inputs: one text column (the sentence) and `label` = the row's index into the
    training sentences (used by the view cache; ignored by the two-model path)."""

    def __init__(
        self,
        model,
        objective: str = "opt3",
        temperature: float = 0.01,
        reg_weight: float = 0.1,
        view_pooling: str = "max",
        layers: list[int] | None = None,
        head_hidden: int | None = 4096,
        views: np.ndarray | None = None,
        gather_negatives: bool = True,
    ) -> None:
        super().__init__()
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        if view_pooling not in ("max", "mean", "cls"):
            raise ValueError(f"view_pooling must be max, mean or cls, got {view_pooling!r}")
        self.model = model
        self.objective, self.temperature, self.reg_weight, self.view_pooling = objective, temperature, reg_weight, view_pooling
        tuned = model[0].model
        num_hidden = tuned.config.num_hidden_layers + 1
        self.layers = list(range(num_hidden)) if layers is None else [k % num_hidden for k in layers]
        for param in tuned.embeddings.parameters():  # layer 0 of BERT_T stays frozen (§3, fn. 5)
            param.requires_grad = False
        # BERT_F's layer 0 is BERT_T's own (both frozen, so equal for the whole run): the copy shares it instead of
        # holding a second one (the word embeddings are half of a MiniLM's weights), and it adds 0 to L^reg.
        shared = {id(param): param for param in tuned.embeddings.parameters()}
        self.frozen = copy.deepcopy(tuned, shared).eval()
        for param in self.frozen.parameters():
            param.requires_grad = False
        dim = tuned.config.hidden_size
        self.head = ProjectionHead(dim, head_hidden) if head_hidden else nn.Identity()
        self.views = views  # (N, len(layers), d) float32, possibly memory-mapped
        self._device_views: torch.Tensor | None = None  # the views on the GPU, when they fit (batch_views)
        self.gather_negatives = gather_negatives  # data parallel: negatives from every process's rows

    def train(self, mode: bool = True):
        super().train(mode)
        self.frozen.eval()  # BERT_F never gets dropout (see module docstring)
        return self

    def frozen_views(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """(b, L, d) pooled hidden states of BERT_F for this batch."""
        from sentune.core.pooling import pool_tokens

        with torch.no_grad():
            out = self.frozen(
                input_ids=features["input_ids"],
                attention_mask=features["attention_mask"],
                token_type_ids=features.get("token_type_ids"),
                output_hidden_states=True,
            )
        mask = features["attention_mask"]
        return torch.stack([pool_tokens(out.hidden_states[k], mask, self.view_pooling) for k in self.layers], dim=1)

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor | None) -> dict[str, torch.Tensor]:
        tuned_features = sentence_features[0]
        guide_features = sentence_features[-1]  # == tuned_features unless a paraphrase column guides (BT)
        c = self.model(dict(tuned_features))["sentence_embedding"]  # (b, d): last-layer [CLS] of BERT_T
        views = self.batch_views(guide_features, labels, c.device)
        out = {"contrastive": self.contrastive(c, views)}
        if self.reg_weight:
            out["regularizer"] = self.regularizer()
        return out

    # The parts of a step, also timed one by one by benchmarks/speed/sg_speed.py.
    def batch_views(self, features: dict[str, torch.Tensor], labels: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        """(b, L, d) views of this batch: looked up in the cache by row index, or BERT_F's forward pass."""
        if self.views is None:
            return self.frozen_views(features)
        if labels is None:
            raise ValueError("cached views need the row index in the 'label' column")
        if labels.device.type != "cpu" and self.views.nbytes <= VIEWS_ON_DEVICE_BYTES:
            # Looking rows up on the host would read the labels back from the GPU every step (a sync that empties
            # its queue of kernels): a cache that fits is copied to the device once and indexed there.
            if self._device_views is None or self._device_views.device != labels.device:
                self._device_views = torch.from_numpy(np.array(self.views, dtype=np.float32)).to(labels.device)  # a writable copy of the memory map
            return self._device_views[labels]
        return torch.from_numpy(read_rows(self.views, labels.cpu().numpy())).to(device)

    def contrastive(self, c: torch.Tensor, views: torch.Tensor) -> torch.Tensor:
        """The objective on BERT_T's vectors c (b, d) and the views (b, L, d), through the head f (the head may
        run under autocast; normalisation and similarities are in float32)."""
        c = self.head(c)
        if self.objective == "opt3":
            projected = self.head(views)
            with full_precision(c, projected) as (c, projected):
                return opt3_loss(F.normalize(c, dim=-1), F.normalize(projected, dim=-1), self.temperature, self.gather_negatives)
        sampled = torch.randint(len(self.layers), (len(views),), device=views.device)  # σ: uniform
        h = self.head(views[torch.arange(len(views)), sampled])
        objective = {"base": nt_xent_base, "opt1": opt1_loss, "opt2": opt2_loss}[self.objective]
        with full_precision(c, h) as (c, h):
            return objective(F.normalize(c, dim=-1), F.normalize(h, dim=-1), self.temperature, self.gather_negatives)

    def regularizer(self) -> torch.Tensor:
        """λ‖BERT_F − BERT_T‖²."""
        return self.reg_weight * squared_distance(self.model[0].model, self.frozen)

    def get_config_dict(self) -> dict:
        return {
            "objective": self.objective,
            "temperature": self.temperature,
            "reg_weight": self.reg_weight,
            "view_pooling": self.view_pooling,
            "layers": self.layers,
            "cached_views": self.views is not None,
        }

    @property
    def citation(self) -> str:
        return CITATION


def compute_views(model, sentences: list[str], layers: list[int], view_pooling: str, cache_dir: Path | None, show_progress: bool = True) -> np.ndarray:
    """Views of every training sentence under the *initial* model (= BERT_F), once, memory-mapped.

    Keyed by model weights, tokenizer length, layers and pooling, so a cache is reused only when it is
    the same computation; written atomically so an interrupted run never leaves a half cache.
    """
    from sentune.core.encode import Encoder

    key = _views_key(model, sentences, layers, view_pooling)

    def compute() -> np.ndarray:
        names = [f"layer{k}-{view_pooling}" for k in layers]
        # Encoded straight into the (N, L, d) array: stacking the layers afterwards would hold every view twice at
        # the peak (the memory adapt's --low-memory runs are measured by, benchmarks/results/retrieval.md).
        return Encoder(model, names, show_progress=show_progress, desc="SG: BERT_F views of the training sentences (cached)").encode_stacked(sentences)

    return cached_array(Path(cache_dir) / f"sg-views-{key}.npy" if cache_dir else None, compute)


def _views_key(model, sentences, layers, view_pooling) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps({"layers": layers, "pooling": view_pooling, "max_len": model.max_seq_length}).encode())
    for name, tensor in sorted(model[0].model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().float().numpy().tobytes()[:4096])  # a fingerprint, not a full hash
        digest.update(str(float(tensor.float().sum())).encode())
    for sentence in sentences:
        digest.update(sentence.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def build_sg_loss(model, columns: Columns, ctx: TrainContext) -> SelfGuidedLoss:
    params: SGParams = ctx.params
    loss = SelfGuidedLoss(model, **params.loss_settings())
    if params.cached_views:  # BT + SG-OPT guides with the paraphrase: its views are the paraphrases'
        guide = columns.get("paraphrase", columns["sentence"])
        loss.views = compute_views(model, guide, loss.layers, loss.view_pooling, ctx.cache_dir, ctx.show_progress)
    return loss
