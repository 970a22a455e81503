"""Fine-tuning on the user's labelled pairs (`train_data: labelled:PATH`, s1<TAB>s2<TAB>label lines: what `sentune adapt`
reads as --dev, --test or --train), with sentence-transformers' losses:

- `cosent`, graded labels (Su, "CoSENT: A more efficient sentence vector scheme than Sentence-BERT", 2022; the loss
  AnglE builds on): every pair of pairs whose gold order is i above j is penalised when the model ranks them the other way,

    L = log(1 + Σ_{(i, j): y_i > y_j} exp(λ · (cos_j − cos_i))),   λ = `scale` (20);

- `online-contrastive`, 0/1 labels (Hadsell, Chopra & LeCun, "Dimensionality Reduction by Learning an Invariant
  Mapping", CVPR 2006; sentence-transformers' online variant): in each batch only the hard pairs count, the positives
  whose distance exceeds the closest negative's and the negatives closer than the farthest positive,

    L = Σ_{hard positives} d² + Σ_{hard negatives} max(0, m − d)²,   d = 1 − cos (cosine distance), m = `margin` (0.5).

Both read every row of the file, in file order (the trainer shuffles them with training.seed)."""

from __future__ import annotations

from sentence_transformers.losses import CoSENTLoss, OnlineContrastiveLoss, SiameseDistanceMetric

from sentune.data.kinds import ScoredPairs
from sentune.methods.base import Columns, TrainContext


def labelled_rows(ctx: TrainContext) -> Columns:
    """The labelled pairs of the training data (ScoredPairs), each row a pair and its label."""
    data = ctx.training_data()
    assert isinstance(data, ScoredPairs)  # Method.takes
    return {"sentence_a": [p.a for p in data.pairs], "sentence_b": [p.b for p in data.pairs], "label": [float(p.score) for p in data.pairs]}


def build_cosent(model, columns: Columns, ctx: TrainContext):
    return CoSENTLoss(model, scale=ctx.params.scale)


def build_contrastive(model, columns: Columns, ctx: TrainContext):
    return OnlineContrastiveLoss(model, distance_metric=SiameseDistanceMetric.COSINE_DISTANCE, margin=ctx.params.margin)
