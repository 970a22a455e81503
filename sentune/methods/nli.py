"""SBERT NLI training (Reimers & Gurevych 2019): a softmax classifier on (u, v, |u − v|) over the three NLI
labels, cross-entropy; 1 epoch, lr 2e-5, 10% linear warm-up, batch 16, mean pooling. The classifier lives
in the loss (sentence-transformers' SoftmaxLoss, trained through the Trainer's loss-level optimiser) and
is discarded after training. Data: the `nli` set of the data catalog (SNLI dev+test, XNLI-en dev)."""

from __future__ import annotations

from sentence_transformers.losses import SoftmaxLoss

from sentune.data.catalog import load_examples
from sentune.methods.base import Columns, TrainContext

LABELS = ("entailment", "neutral", "contradiction")


def build_nli_loss(model, columns: Columns, ctx: TrainContext) -> SoftmaxLoss:
    return SoftmaxLoss(
        model,
        sentence_embedding_dimension=model.get_embedding_dimension(),
        num_labels=len(LABELS),
        concatenation_sent_rep=True,
        concatenation_sent_difference=True,
    )


def nli_view(ctx: TrainContext) -> Columns:
    """The labelled pairs of the `nli` set (sets.yaml), the first training.max_sentences of them."""
    pairs = load_examples("nli", ctx.data_dir)[: ctx.training.max_sentences]
    return {"premise": [p.a for p in pairs], "hypothesis": [p.b for p in pairs], "label": [LABELS.index(p.label) for p in pairs]}
