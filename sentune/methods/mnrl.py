"""sentence-transformers' MultipleNegativesRankingLoss on (s, s) pairs: the library's way of doing
unsupervised SimCSE (anchors against the positives of the batch only, no anchor-anchor negatives),
registered so sentune's own SimCSE can be compared with it on the same trainer, data and seed."""

from __future__ import annotations

from sentence_transformers.losses import MultipleNegativesRankingLoss

from sentune.methods import Method, register


def build_mnrl_loss(model, *, train_sentences, cache_dir, paraphrases=None, scale: float = 20.0):
    return MultipleNegativesRankingLoss(model, scale=scale)


def make_columns(recipe, data_dir):
    from sentune.train.trainer import base_columns

    sentences = base_columns(recipe, data_dir)["sentence"]
    return {"sentence": sentences, "positive": list(sentences)}


register(Method("st-mnrl", build_mnrl_loss, pooling="mean", columns=("sentence", "positive"), make_columns=make_columns))
