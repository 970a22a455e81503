"""`query-side`: the query encoder fine-tuned against fixed document vectors (query-side fine-tuning, as DensePhrases
adapts a phrase index to a new domain without re-encoding it: Lee et al., "Learning Dense Representations of Phrases
at Scale", ACL 2021, §4.3). The documents are never encoded while training: their vectors are given (`sentune adapt`
hands it the unchanged model's vectors of the corpus, which its index already holds) or, without them, the starting
model's, encoded once before the first step. Only the model that encodes the queries is trained; a search then ranks
the same document vectors with the trained query encoder (sentune.adaptation.candidates.query_side saves the two as
one sentence-transformers Router model).

Each training query q_i is contrasted with EVERY document vector, not with a batch's: an InfoNCE softmax (van den
Oord et al., "Representation Learning with Contrastive Predictive Coding", 2018) over the cosines at the scale of
MultipleNegativesRankingLoss, with its judged documents P_i (relevance > 0) as positives, several of them pooled by a
log-sum-exp:

  L = −1/b Σ_i [ log Σ_{p ∈ P_i} exp(s·cos(q_i, d_p)) − log Σ_{j ≠ own(i)} exp(s·cos(q_i, d_j)) ],   s = `scale` (20),

d_j the fixed document vectors and own(i) the document whose id is the query's (left out, as every sentune ranking
leaves it out: Quora-style sets, where the questions are documents too). The gradient reaches the query encoder only.

The partition (the second sum) is exact, over every document, in bounded memory: the documents are read CHUNK rows at
a time from the matrix as it is given (a memory-mapped float16 file from `sentune adapt`: 2 bytes a coordinate of page
cache, where a float32 copy in memory would take twice that, and its device copy as much again: hundreds of MB for a
corpus of half a million documents), each chunk cast to float32 on the device, and the partition and its gradient are accumulated in one pass,
as an online softmax does (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018): a running maximum
m_i, Z_i = Σ exp(l_ij − m_i) and E_i = Σ exp(l_ij − m_i) · u_j, rescaled by exp(m_old − m_new) at each chunk, where
l_ij = s·cos(q_i, d_j) and u_j = d_j / ‖d_j‖. The partition is m_i + log Z_i and its gradient with respect to the unit
query vector is s · E_i / Z_i (the softmax-weighted mean of the documents' unit vectors), kept for the backward pass:
a step holds one chunk, the batch's logits of it and a vector per query, whatever the corpus's size, and reads the
matrix once. Exact rather than sampled (the positives, hard negatives mined once and a random sample, as DPR-style
training does): the formula above is DensePhrases' query-side objective, every document a negative, and a sampled
partition would be another, biased one (its softmax over a subset). float16 storage rounds each coordinate of a unit
vector by at most 2^-11 of it, which moves a cosine by at most 2^-11 ≈ 5e-4 (Cauchy–Schwarz) and typically by far less
(independent roundings, shrinking with the dimension: about 1e-5 at a few hundred), a logit by 20 times that.

It trains on the project's one loop (sentune.training.trainer): its rows are the judged queries (column `query`) and
their row number (`label`), by which the loss looks up each row's positives."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from sentune.core.options import option
from sentune.data.beir import RetrievalSet
from sentune.data.tables import Kind
from sentune.methods.base import Columns, Method, TrainContext, deferred

QUERY_SIDE_CITATION = """@inproceedings{lee-etal-2021-learning-dense,
  title = {Learning Dense Representations of Phrases at Scale},
  author = {Lee, Jinhyuk and Sung, Mujeen and Kang, Jaewoo and Chen, Danqi},
  booktitle = {Proceedings of ACL-IJCNLP 2021},
  year = {2021}
}
@article{oord2018representation,
  title = {Representation Learning with Contrastive Predictive Coding},
  author = {van den Oord, Aaron and Li, Yazhe and Vinyals, Oriol},
  journal = {arXiv:1807.03748},
  year = {2018}
}"""


@dataclass(frozen=True)
class FixedDocuments(RetrievalSet):
    """Judged queries against a corpus whose documents are the given vectors (`vectors`: documents × dimension, rows
    in corpus order; None: the starting model's, encoded once when training starts)."""

    vectors: Any = None


@dataclass
class QuerySideParams:
    scale: float = option(20.0, "s: 1/τ of the softmax over cosines (MultipleNegativesRankingLoss's)", minimum=0, exclusive=True)


def judged_queries(data: RetrievalSet) -> list[tuple[str, list[int], int]]:
    """(text, positives, own) of each query with a judged document besides its own: the positives' and its own
    document's rows in the corpus (own -1: none). The data view and the loss read the same list, row by row."""
    row = {d.id: i for i, d in enumerate(data.corpus)}
    found = []
    for q in data.queries:
        positives = [row[doc] for doc, grade in q.relevant.items() if grade > 0 and doc in row and doc != q.id]
        if positives:
            found.append((q.text, positives, row.get(q.id, -1)))
    return found


def query_rows(ctx: TrainContext) -> Columns:
    data = ctx.training_data()
    assert isinstance(data, RetrievalSet)  # Method.takes
    rows = judged_queries(data)
    return {"query": [text for text, _, _ in rows], "label": list(range(len(rows)))}


def document_vectors(data: RetrievalSet, ctx: TrainContext):
    """The fixed documents, rows in corpus order, as given (any float array: a memory-mapped one is read a chunk at a
    time, never copied whole), or the starting model's vectors (loaded again: the model being trained has the
    training rows' length set, and documents are read as far as the model reads them) as float16 unit rows."""
    if isinstance(data, FixedDocuments) and data.vectors is not None:
        vectors = data.vectors
        if len(vectors.shape) != 2 or vectors.shape[0] != len(data.corpus):
            raise ValueError(f"query-side: document vectors of shape {tuple(vectors.shape)} for {len(data.corpus)} documents")
        return vectors
    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.modules.build import with_pooling

    model = with_pooling(load_model(ctx.recipe.model, device=ctx.device), ctx.recipe.pooling or "model")
    encoded = Encoder(model, "model", show_progress=ctx.show_progress, desc="query-side: encoding the documents once").encode([d.text for d in data.corpus])
    return unit_float16(encoded)


def unit_float16(vectors):
    """Rows scaled to unit length, in float16 (how the loss best keeps a document matrix: see the module docstring)."""
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    return (vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)).astype(np.float16)


def build_query_side_loss(model, columns: Columns, ctx: TrainContext):
    import torch

    data = ctx.training_data()
    assert isinstance(data, RetrievalSet)
    rows = judged_queries(data)
    width = max(len(positives) for _, positives, _ in rows)
    positives = torch.full((len(rows), width), -1, dtype=torch.long)
    for i, (_, found, _) in enumerate(rows):
        positives[i, : len(found)] = torch.tensor(found)
    own = torch.tensor([o for _, _, o in rows], dtype=torch.long)
    return FixedDocumentsLoss(model, document_vectors(data, ctx), positives, own, ctx.params.scale)


CHUNK = 16384  # documents scored at once: at a thousand dimensions, 64 MB of float32 on the device


@cache
def _loss_class():
    import numpy as np
    import torch
    from torch import nn

    class Partition(torch.autograd.Function):
        """log Σ_{j ≠ own} exp(s·cos(q_i, d_j)) over every document of `loss`, a chunk at a time (the module
        docstring's online accumulation); its gradient with respect to the unit queries, s · E_i / Z_i, is computed in
        the same pass and kept."""

        @staticmethod
        def forward(ctx, queries, own, loss):
            device, batch = queries.device, len(queries)
            with torch.autocast(device.type, enabled=False):  # float32 throughout, whatever the training's precision
                queries = queries.float()
                floor = torch.finfo(torch.float32).min  # a left-out document: adds nothing once any other is seen
                top = torch.full((batch,), floor, device=device)
                total = torch.zeros(batch, device=device)
                weighted = torch.zeros_like(queries)
                for start in range(0, len(loss.documents), loss.chunk):
                    documents = loss.rows(slice(start, start + loss.chunk), device)
                    inverse = loss.inverse_norms[start : start + loss.chunk].to(device)
                    logits = loss.scale * (queries @ documents.T) * inverse
                    column = own - start
                    inside = (own >= 0) & (column >= 0) & (column < len(documents))
                    logits[inside.nonzero(as_tuple=True)[0], column[inside]] = floor
                    new_top = torch.maximum(top, logits.max(dim=1).values)
                    rescale = torch.exp(top - new_top)
                    weights = torch.exp(logits - new_top[:, None])
                    total = total * rescale + weights.sum(dim=1)
                    weighted = weighted * rescale[:, None] + (weights * inverse) @ documents
                    top = new_top
                ctx.save_for_backward(loss.scale * weighted / total[:, None])
                return top + torch.log(total)

        @staticmethod
        def backward(ctx, grad):
            (gradient,) = ctx.saved_tensors
            return grad[:, None] * gradient, None, None

    class _FixedDocumentsLoss(nn.Module):
        """The loss of the module docstring. `documents`: the document matrix (rows: the corpus; any float array, a
        memory-mapped one included), read `chunk` rows at a time and held by reference, outside the module's state;
        its rows' inverse norms (computed once, a chunk at a time), each row's positives (-1: padding) and its own
        document (-1: none) are buffers, kept out of the state the trainer saves."""

        inverse_norms: torch.Tensor
        positives: torch.Tensor
        own: torch.Tensor

        def __init__(self, model, documents, positives, own, scale: float, chunk: int = CHUNK) -> None:
            super().__init__()
            self.model, self.scale, self.chunk = model, float(scale), int(chunk)
            self.documents = documents.detach().cpu().numpy() if isinstance(documents, torch.Tensor) else documents
            norms = [
                np.linalg.norm(np.asarray(self.documents[i : i + self.chunk], dtype=np.float32), axis=1) for i in range(0, len(self.documents), self.chunk)
            ]
            inverse = 1.0 / np.maximum(np.concatenate(norms) if norms else np.zeros(0, np.float32), 1e-12)
            self.register_buffer("inverse_norms", torch.from_numpy(inverse.astype(np.float32)), persistent=False)
            self.register_buffer("positives", positives, persistent=False)
            self.register_buffer("own", own, persistent=False)

        def rows(self, rows, device) -> torch.Tensor:
            """Document rows (a slice or indices) as they are stored, in float32 on `device`."""
            return torch.from_numpy(np.array(self.documents[rows], copy=True)).to(device).float()

        def forward(self, sentence_features, labels):
            queries = nn.functional.normalize(self.model(sentence_features[0])["sentence_embedding"].float(), dim=-1)
            device = queries.device
            labelled = labels.to(device).long()
            own, positives = self.own.to(device)[labelled], self.positives.to(device)[labelled]
            found = positives.clamp(min=0)
            judged = nn.functional.normalize(self.rows(found.flatten().cpu().numpy(), device), dim=-1).view(*found.shape, -1)  # (batch, width, dim)
            chosen = (self.scale * (judged @ queries.unsqueeze(-1)).squeeze(-1)).masked_fill(positives < 0, float("-inf"))
            return (Partition.apply(queries, own, self) - torch.logsumexp(chosen, dim=1)).mean()

        def get_config_dict(self) -> dict:
            return {"scale": self.scale, "documents": int(len(self.documents))}

        @property
        def citation(self) -> str:
            return QUERY_SIDE_CITATION

    return _FixedDocumentsLoss


def FixedDocumentsLoss(model, documents, positives, own, scale: float, chunk: int = CHUNK):  # noqa: N802 (a class, built on first use: no torch import here)
    return _loss_class()(model, documents, positives, own, scale, chunk)


QUERY_SIDE = Method(
    "query-side",
    deferred("sentune.methods.query_side:build_query_side_loss"),
    pooling="mean",
    columns=("query", "label"),
    params=QuerySideParams,
    data_view=query_rows,
    takes=(cast("type[Kind]", RetrievalSet),),  # a data kind of sentune.data.kinds, not a sentune.data.tables.Kind subclass
    citation=QUERY_SIDE_CITATION,
)
