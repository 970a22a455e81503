"""An index whose system ranks beyond one fusion of BM25 and its model's cosine: index.json's `expansion`, written by an
adapt run that chose such a candidate, read by sentune.search.index.SearchIndex.search for the index's own system
(`--system dense` or `bm25` still rank plainly).

- {"kind": "prf", ...}: pseudo-relevance feedback (sentune.search.prf), Rocchio on the dense side and RM3 on BM25's,
  fused with the index's fusion."""

from __future__ import annotations

from typing import Any

import numpy as np

from sentune.data.text_files import DataError
from sentune.search.documents import DAMAGED
from sentune.search.prf import Feedback, prf_rank

KINDS = ("prf",)


def feedback_of(index: Any) -> Feedback:
    """The feedback index.json records; one line naming the file when it is not one sentune writes."""
    from sentune.search.index import INDEX_FILE

    saved = index.settings.get("expansion")
    try:
        return Feedback.from_dict(saved)
    except ValueError as exc:
        raise DataError(index.folder / INDEX_FILE, None, f"expansion: {exc}; {DAMAGED}") from None


def expanded_rank(index: Any, query_vectors: np.ndarray, texts: list[str], top: int, own: list[int | None] | None) -> tuple[list[list[int]], list[list[float]]]:
    """The index's system's top `top` documents per query with their scores (sentune.search.index.SearchIndex's rows):
    every document scored exactly (an approximate index is not read: feedback reads the first results of both sides)."""
    from sentune.search.index import INDEX_FILE

    feedback = feedback_of(index)
    if index.fusion is None:
        raise DataError(index.folder / INDEX_FILE, None, f"expansion {feedback.label} without a fusion; {DAMAGED}")

    def read(rows: list[int]) -> list[str]:
        return [text for _, text in index.documents.read(rows)]

    return prf_rank(query_vectors, np.asarray(index.vectors), index.lexical(), texts, read, index.documents.order, index.fusion, feedback, depth=top, own=own)
