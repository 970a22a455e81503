"""Passages for the training methods when the corpus is documents (retrieval): every document's title and text split
into sentences, consecutive sentences packed into passages of at most PASSAGE_WORDS words.

Why: the label-free methods (SimCSE, CT, TSDAE, SG-OPT, ...) train on sentence-length inputs (TSDAE's domain adaptation
splits documents into sentences, Wang et al. 2021 §6; GPL trains on passages of at most 350 word pieces, Wang et al.
2022), and a 250-word abstract would be truncated to max_seq_length and cost 16× a sentence's compute a step. 64 words
is about 90 word pieces: nothing is cut in training, and a passage still holds a few sentences of context. A single
sentence longer than PASSAGE_WORDS is its own passage, cut at 2 × PASSAGE_WORDS words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PASSAGE_WORDS = 64
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def sentences(text: str) -> list[str]:
    """A document's sentences: cut after . ! or ? followed by space and an upper-case letter or digit."""
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s]


def passages(documents: Iterable[str], max_words: int = PASSAGE_WORDS) -> list[str]:
    """Every document's sentences packed greedily, in order, into passages of at most `max_words` words (unique, first
    occurrence kept)."""
    out: dict[str, None] = {}
    for document in documents:
        current: list[str] = []
        for sentence in sentences(document):
            words = sentence.split()
            if current and len(current) + len(words) > max_words:
                out.setdefault(" ".join(current), None)
                current = []
            current += words[: 2 * max_words]
            if len(current) >= max_words:
                out.setdefault(" ".join(current), None)
                current = []
        if current:
            out.setdefault(" ".join(current), None)
    return list(out)
