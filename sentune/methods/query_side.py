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

It trains on the project's one loop (sentune.training.trainer): its rows are the judged queries (column `query`) and
their row number (`label`), by which the loss looks up each row's positives; the loss holds the document matrix."""

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
    """The fixed documents: given, or the starting model's vectors (loaded again: the model being trained has the
    training rows' length set, and documents are read as far as the model reads them)."""
    import numpy as np

    if isinstance(data, FixedDocuments) and data.vectors is not None:
        vectors = np.asarray(data.vectors, dtype=np.float32)
        if vectors.shape[0] != len(data.corpus):
            raise ValueError(f"query-side: {vectors.shape[0]} document vectors for {len(data.corpus)} documents")
        return vectors
    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.modules.build import with_pooling

    model = with_pooling(load_model(ctx.recipe.model, device=ctx.device), ctx.recipe.pooling or "model")
    return Encoder(model, "model", show_progress=ctx.show_progress, desc="query-side: encoding the documents once").encode([d.text for d in data.corpus])


def build_query_side_loss(model, columns: Columns, ctx: TrainContext):
    import torch

    data = ctx.training_data()
    assert isinstance(data, RetrievalSet)
    rows = judged_queries(data)
    documents = torch.nn.functional.normalize(torch.as_tensor(document_vectors(data, ctx)), dim=-1)
    width = max(len(positives) for _, positives, _ in rows)
    positives = torch.full((len(rows), width), -1, dtype=torch.long)
    for i, (_, found, _) in enumerate(rows):
        positives[i, : len(found)] = torch.tensor(found)
    own = torch.tensor([o for _, _, o in rows], dtype=torch.long)
    return FixedDocumentsLoss(model, documents, positives, own, ctx.params.scale)


@cache
def _loss_class():
    import torch
    from torch import nn

    class _FixedDocumentsLoss(nn.Module):
        """The loss of the module docstring; the document matrix, each row's positives (-1: padding) and its own
        document (-1: none) are buffers, kept out of the state the trainer saves."""

        documents: torch.Tensor
        positives: torch.Tensor
        own: torch.Tensor

        def __init__(self, model, documents, positives, own, scale: float) -> None:
            super().__init__()
            self.model, self.scale = model, float(scale)
            self.register_buffer("documents", documents, persistent=False)
            self.register_buffer("positives", positives, persistent=False)
            self.register_buffer("own", own, persistent=False)

        def forward(self, sentence_features, labels):
            queries = nn.functional.normalize(self.model(sentence_features[0])["sentence_embedding"], dim=-1)
            device = queries.device
            rows = labels.to(device).long()
            logits = self.scale * queries.float() @ self.documents.to(device).T  # (batch, every document)
            own = self.own.to(device)[rows]
            mask = torch.zeros_like(logits, dtype=torch.bool)
            has = own >= 0
            mask[has.nonzero(as_tuple=True)[0], own[has]] = True
            logits = logits.masked_fill(mask, float("-inf"))
            positives = self.positives.to(device)[rows]
            chosen = logits.gather(1, positives.clamp(min=0)).masked_fill(positives < 0, float("-inf"))
            return (torch.logsumexp(logits, dim=1) - torch.logsumexp(chosen, dim=1)).mean()

        def get_config_dict(self) -> dict:
            return {"scale": self.scale, "documents": int(self.documents.shape[0])}

        @property
        def citation(self) -> str:
            return QUERY_SIDE_CITATION

    return _FixedDocumentsLoss


def FixedDocumentsLoss(model, documents, positives, own, scale: float):  # noqa: N802 (a class, built on first use: no torch import here)
    return _loss_class()(model, documents, positives, own, scale)


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
