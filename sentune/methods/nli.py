"""SBERT NLI training (Reimers & Gurevych 2019): a softmax classifier on (u, v, |u − v|) over the three NLI
labels, cross-entropy; 1 epoch, lr 2e-5, 10% linear warm-up, batch 16, mean pooling. The classifier lives
in the loss (sentence-transformers' SoftmaxLoss, trained through the Trainer's loss-level optimiser) and
is discarded after training. Data: the NLI pairs of the data directory (SNLI dev+test, XNLI-en dev)."""

from __future__ import annotations

from sentence_transformers.losses import SoftmaxLoss

from sentune.methods import Method, register

LABELS = ("entailment", "neutral", "contradiction")
CITATION = """@inproceedings{reimers-gurevych-2019-sentence,
  title = {Sentence-{BERT}: Sentence Embeddings using Siamese {BERT}-Networks},
  author = {Reimers, Nils and Gurevych, Iryna},
  booktitle = {Proceedings of EMNLP-IJCNLP 2019},
  year = {2019}
}"""


def build_nli_loss(model, *, train_sentences, cache_dir, paraphrases=None) -> SoftmaxLoss:
    return SoftmaxLoss(model, sentence_embedding_dimension=model.get_embedding_dimension(), num_labels=len(LABELS),
                       concatenation_sent_rep=True, concatenation_sent_difference=True)


def nli_pairs(data_dir) -> list:
    from sentune.data import readers

    pairs = []
    for split in ("dev", "test"):
        pairs += readers.read_nli_senteval(data_dir / "corpora/nli/SNLI", split)
    pairs += readers.read_pair_tsv(data_dir / "corpora/nli/XNLI-en/dev-en.tsv", labels=LABELS)
    return pairs


def make_columns(recipe, data_dir) -> dict[str, list]:
    pairs = nli_pairs(data_dir)[: recipe.training.max_sentences]
    return {"premise": [p.a for p in pairs], "hypothesis": [p.b for p in pairs], "label": [LABELS.index(p.label) for p in pairs]}


register(Method("nli", build_nli_loss, pooling="mean", columns=("premise", "hypothesis", "label"), citation=CITATION, make_columns=make_columns))
