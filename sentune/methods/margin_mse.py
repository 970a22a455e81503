"""`margin-mse`: sentence-transformers' MarginMSELoss (Hofstätter et al., "Improving Efficient Neural Ranking Models
with Cross-Architecture Knowledge Distillation", 2020; GPL's loss, Wang et al., NAACL 2022) on
(query, positive, negative 1, negative 2, margin 1, margin 2) rows (`train_data: tuples:PATH`, six tab-separated
fields): a teacher's margins, the student learns to reproduce them,

  L = 1/(b·k) Σ_i Σ_j ( [sim(q_i, p_i) − sim(q_i, n_ij)] − m_ij )²,

sim the cosine (not the library's default dot product: the student trains without the base model's Normalize module,
and the margins sentune hands it are on a cosine's scale: sentune.adaptation.pseudo_queries.teacher_scale)."""

from __future__ import annotations

from sentence_transformers.util import pairwise_cos_sim

from sentune.errors import UserError
from sentune.methods.base import Columns, TrainContext
from sentune.methods.records import HARD_NEGATIVES


def build_margin_mse_loss(model, columns: Columns, ctx: TrainContext):
    from sentence_transformers.losses import MarginMSELoss

    return MarginMSELoss(model, similarity_fct=pairwise_cos_sim)


def margin_tuples_view(ctx: TrainContext) -> Columns:
    from sentune.methods.mnrl import given_tuples

    rows = given_tuples(ctx, 2 + 2 * HARD_NEGATIVES, "margin-mse", "anchor, positive, 2 negatives, 2 margins")
    columns: Columns = {"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows]}
    columns |= {f"negative_{i}": [r[1 + i] for r in rows] for i in range(1, HARD_NEGATIVES + 1)}
    try:
        columns["label"] = [[float(m) for m in r[2 + HARD_NEGATIVES :]] for r in rows]
    except ValueError as error:
        raise UserError(f"margin-mse: a margin of the training tuples is not a number ({error})") from None
    return columns
