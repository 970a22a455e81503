"""TSDAE: a transformer-based sequential denoising auto-encoder (Wang, Reimers & Gurevych, Findings of EMNLP 2021),
the method sentence-transformers points users to for adapting an encoder to a domain's unlabelled text.

Each sentence x is damaged by deleting every word with probability p = 0.6 (at least one word kept), giving x̃.
The encoder turns x̃ into one vector s = f(x̃); a decoder initialised from the same checkpoint (its weights tied
to the encoder's, cross-attention added) must rebuild x token by token while attending only to s:

  L_TSDAE = − 1/|T| Σ_{x} Σ_{t=1..|x|−1} log P_dec(x_{t+1} | x_{≤t}, s = f(x̃))      (padding ignored; T = the tokens)

An encoder family that transformers cannot run as a causal language model (MPNet) cannot be its own decoder; with
`params.decoder` (a model that can, of the encoder's hidden size) the decoder is that model, untied, re-tokenizing the
target when its tokenizer differs (the library's own option; the paper's tied weights are then not possible).

The loss is sentence-transformers' own DenoisingAutoEncoderLoss; this file supplies the damaged copies (seeded by
training.seed, one draw per row as for one epoch of the library's DenoisingAutoEncoderDataset) and keeps the decoder's
own weights (cross-attention, LM head) in the checkpoints. The paper pools with [CLS]; sentune keeps whatever pooling the
recipe trains (`pooling: model` keeps the model's own, which suits an already sentence-tuned encoder). Words are split on
white space and punctuation (the paper uses NLTK's tokenizer, not a dependency here); the encoder's WordPiece splits
punctuation the same way, so the damaged input differs at most in spacing.
"""

from __future__ import annotations

import random
import re

import torch
from sentence_transformers.losses import DenoisingAutoEncoderLoss
from torch import nn

from sentune.methods.base import Columns, TrainContext, training_sentences
from sentune.methods.citations import TSDAE_CITATION as CITATION
from sentune.methods.records import TSDAEParams

WORD = re.compile(r"\w+|[^\w\s]")


def delete_words(text: str, ratio: float, rng: random.Random) -> str:
    """The sentence with each word deleted with probability `ratio`; one word (chosen at random) survives if none would."""
    words = WORD.findall(text)
    if not words:
        return text
    kept = [w for w in words if rng.random() >= ratio]
    return " ".join(kept) if kept else rng.choice(words)


class TSDAELoss(nn.Module):
    """sentence-transformers' DenoisingAutoEncoderLoss with the encoder under `model` (so the checkpoint's loss state
    holds only the decoder's own weights) and the decoder on the model's device. `decoder`: a model to decode with,
    untied (None: the encoder's own architecture, its weights tied)."""

    def __init__(self, model, decoder: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.denoising = DenoisingAutoEncoderLoss(model, decoder_name_or_path=decoder, tie_encoder_decoder=decoder is None)
        self.denoising.decoder.to(model.device)

    def forward(self, sentence_features: list[dict[str, torch.Tensor]], labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.denoising(sentence_features, labels)

    @property
    def citation(self) -> str:
        return CITATION


def damaged_rows(ctx: TrainContext) -> Columns:
    """`noisy` (the damaged copy, the encoder's input) and `sentence` (the decoder's target), one draw per row."""
    sentences = training_sentences(ctx)
    rng = random.Random(ctx.training.seed)
    return {"noisy": [delete_words(s, ctx.params.deletion_ratio, rng) for s in sentences], "sentence": sentences}


def build_tsdae_loss(model, columns: Columns, ctx: TrainContext) -> TSDAELoss:
    return TSDAELoss(model, ctx.params.decoder)


def without_decoder(config, params: TSDAEParams) -> str | None:
    """Why TSDAE cannot decode for this encoder: by default the decoder is the encoder's own architecture run as a causal
    language model with its weights tied, which a family transformers has no causal-LM class for (MPNet, say) cannot
    be; `params.decoder` must be able to decode, and its hidden size must be the encoder's (the decoder attends to the
    sentence vector). Read from the configs alone, before any weights load."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig

    if params.decoder is None:
        if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
            return None
        return (
            f"TSDAE decodes with the encoder's own architecture as a causal language model, and transformers has none for {config.model_type!r}; "
            "give params.decoder a model that has one, of the same hidden size"
        )
    try:
        decoder = AutoConfig.from_pretrained(params.decoder)
    except (OSError, ValueError) as error:
        return f"params.decoder {params.decoder!r}: not a model transformers can load ({str(error).splitlines()[0]})"
    if type(decoder) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        return f"params.decoder {params.decoder!r}: transformers cannot run {decoder.model_type!r} as a causal language model"
    if decoder.hidden_size != config.hidden_size:
        return f"params.decoder {params.decoder!r}: hidden size {decoder.hidden_size}, the encoder's is {config.hidden_size} (they must be equal)"
    return None
