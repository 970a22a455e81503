"""Contrastive (BT): contrastive learning with back-translated paraphrases as positives.

Kim et al. 2021, Appendix A.2 (after Fang & Xie 2020, CERT): "identical with our Contrastive (SG) model, except
that it utilizes back-translation to generate positive samples", trained with NT-Xent. For sentence s_i
and its paraphrase s'_i, c_i = [CLS] of BERT_T(s_i) and c'_i = [CLS] of BERT_T(s'_i); with the same
projection head f, temperature τ and regulariser as SG:

  L = 1/(2b) Σ_m −log φ(x_m, x_{m±b}) / Σ_{n≠m} φ(x_m, x_n),  X = {c_i} ∪ {c'_i}  (+ λ‖BERT_F − BERT_T‖²)

BT + SG-OPT (Table 7) is the SG-OPT loss with the paraphrase fed to BERT_F instead: method `bt-sg-opt`.
Data: a file of `sentence<TAB>paraphrase` lines (train_data: pairs:PATH), made offline with
`sentune paraphrase` (Marian en→de→en) or any other back-translator.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sentune.methods.base import Columns, TrainContext
from sentune.methods.sg import SelfGuidedLoss, nt_xent_base, squared_distance


class ContrastiveBTLoss(SelfGuidedLoss):
    """Inputs: the sentence and its paraphrase (two text columns); both go through BERT_T."""

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor | None) -> dict[str, torch.Tensor]:
        if len(sentence_features) != 2:
            raise ValueError("Contrastive (BT) needs two text columns: sentence and paraphrase")
        c = F.normalize(self.head(self.model(dict(sentence_features[0]))["sentence_embedding"]), dim=-1)
        c_para = F.normalize(self.head(self.model(dict(sentence_features[1]))["sentence_embedding"]), dim=-1)
        out = {"contrastive": nt_xent_base(c, c_para, self.temperature, self.gather_negatives)}
        if self.reg_weight:
            out["regularizer"] = self.reg_weight * squared_distance(self.model[0].model, self.frozen)
        return out


def build_bt_loss(model, columns: Columns, ctx: TrainContext) -> ContrastiveBTLoss:
    return ContrastiveBTLoss(model, **ctx.params.loss_settings())


# SG-OPT whose views come from BERT_F(paraphrase): build_sg_loss caches the paraphrases' views.
