"""sentence-transformers' MultipleNegativesRankingLoss on (s, s) pairs: the library's way of doing
unsupervised SimCSE (anchors against the positives of the batch only, no anchor-anchor negatives),
registered so sentune's own SimCSE can be compared with it on the same trainer, data and seed.

`mnrl-hard-negatives`: the same loss on (query, relevant passage, hard negative 1, hard negative 2) rows
(`train_data: tuples:PATH`, four tab-separated fields), each query's own negatives added to the batch's passages
(sentence-transformers' n-tuple form of the loss; Karpukhin et al., "Dense Passage Retrieval", EMNLP 2020, §3.2).

`mnrl-pairs`: the same loss on given (anchor, positive) pairs (`train_data: pairs:PATH`), e.g. GenQ (Thakur et al.,
"BEIR", NeurIPS 2021 Datasets and Benchmarks, §4): generated queries paired with the passages they were generated from,

  L = −1/b Σ_i log exp(s·cos(q_i, p_i)) / Σ_j exp(s·cos(q_i, p_j)),   s = `scale` (20),

the other passages of the batch as negatives."""

from __future__ import annotations

from sentence_transformers.losses import MultipleNegativesRankingLoss

from sentune.data.kinds import Tuples
from sentune.errors import UserError
from sentune.methods.base import Columns, TrainContext, sentence_rows, training_sentences
from sentune.methods.records import HARD_NEGATIVES


def build_mnrl_loss(model, columns: Columns, ctx: TrainContext):
    return MultipleNegativesRankingLoss(model, scale=ctx.params.scale, gather_across_devices=ctx.params.gather_negatives)


def pair_view(ctx: TrainContext) -> Columns:
    sentences = training_sentences(ctx)
    return {"sentence": sentences, "positive": list(sentences)}


def given_pairs_view(ctx: TrainContext) -> Columns:
    rows = sentence_rows(ctx)  # given Pairs: sentence = the anchor, paraphrase = the positive
    return {"sentence": rows["sentence"], "positive": rows["paraphrase"]}


def given_tuples(ctx: TrainContext, width: int, method: str, fields: str) -> list[tuple[str, ...]]:
    """The rows of the training data (Tuples), which must be `width` wide."""
    data = ctx.training_data()
    assert isinstance(data, Tuples)  # Method.takes
    if data.width != width:
        raise UserError(f"method {method}: the training tuples have {data.width} fields a row; it trains on {width} ({fields})")
    return data.rows


def tuples_view(ctx: TrainContext) -> Columns:
    rows = given_tuples(ctx, 2 + HARD_NEGATIVES, "mnrl-hard-negatives", "anchor, positive, 2 negatives")
    columns = {"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows]}
    return columns | {f"negative_{i}": [r[1 + i] for r in rows] for i in range(1, HARD_NEGATIVES + 1)}
