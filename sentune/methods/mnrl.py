"""sentence-transformers' MultipleNegativesRankingLoss on (s, s) pairs: the library's way of doing
unsupervised SimCSE (anchors against the positives of the batch only, no anchor-anchor negatives),
registered so sentune's own SimCSE can be compared with it on the same trainer, data and seed."""

from __future__ import annotations

from dataclasses import dataclass

from sentence_transformers.losses import MultipleNegativesRankingLoss

from sentune.core.options import option
from sentune.methods.base import Columns, Method, TrainContext, training_sentences


@dataclass
class MNRLParams:
    scale: float = option(20.0, "1/τ of the library's loss", minimum=0, exclusive=True)
    gather_negatives: bool = option(True, "data parallel: every process's positives are negatives (the library's gather_across_devices)")


def build_mnrl_loss(model, columns: Columns, ctx: TrainContext):
    return MultipleNegativesRankingLoss(model, scale=ctx.params.scale, gather_across_devices=ctx.params.gather_negatives)


def pair_view(ctx: TrainContext) -> Columns:
    sentences = training_sentences(ctx)
    return {"sentence": sentences, "positive": list(sentences)}


ST_MNRL = Method("st-mnrl", build_mnrl_loss, pooling="mean", columns=("sentence", "positive"), params=MNRLParams, data_view=pair_view)
