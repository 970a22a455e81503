"""Vectors keyed by the texts they encode: a search run's untuned vectors, or a candidate's, are rows of one list of
texts (the scorer's, sentune.tasks.user_queries.QueryScorer.sentences), and every part that ranks looks its queries and
documents up by text. TextRows is that lookup, built once per list of texts and shared by every table on it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(eq=False)
class TextRows:
    """Each text's row in `texts` (a text listed twice: its last row; encodings of equal texts are equal)."""

    texts: list[str]

    @cached_property
    def row(self) -> dict[str, int]:
        return {text: i for i, text in enumerate(self.texts)}

    def __call__(self, texts: Iterable[str]) -> list[int]:
        return [self.row[text] for text in texts]

    def get(self, text: str) -> int | None:
        return self.row.get(text)


@dataclass(eq=False)
class EmbeddingTable:
    """`vectors`, whose rows are `rows.texts`, looked up by text."""

    rows: TextRows
    vectors: np.ndarray

    def of(self, texts: Iterable[str]) -> np.ndarray:
        return self.vectors[self.rows(texts)]
