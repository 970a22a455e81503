"""Long documents as passages, each document scored by its best passage (MaxP: Dai & Callan, "Deeper Text
Understanding for IR with Contextual Neural Language Modeling", SIGIR 2019), instead of by the first window the model
reads (a model truncates a text at its max_seq_length tokens).

A document's passages are windows of W tokens, W the model's max_seq_length less its special tokens, starting every
`stride` tokens (W // 2 unless given), until a window reaches the document's last token:

- the first window is the document itself as the model reads it, truncated at W: its row of the index's
  document vectors, so a document the model reads whole has one passage, and MaxP never ranks below the first window for
  want of that window;
- each later window is the document's characters its tokens span (the tokenizer's offsets), encoded as any text.

The dense score of a document is the highest cosine of the query with any of its passages. An index built with
passages (`sentune index --passages maxp`) holds the later windows apart from the documents' vectors (where:
sentune.search.folder): their vectors, float32 (later windows × dimension), memory-mapped when read; each later
window's document row, int64, ascending; and how many rows of their vectors are written (a build resumes there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("first", "maxp")


def window_tokens(model: Any) -> int:
    """W: the tokens of a text the model reads, its special tokens left out."""
    tokenizer = model.tokenizer
    return int(model.max_seq_length) - int(tokenizer.num_special_tokens_to_add(pair=False))


def later_windows(tokenizer: Any, texts: list[str], window: int, stride: int) -> tuple[list[str], np.ndarray]:
    """The texts of every document's windows after its first, in document order, and each one's document row."""
    if not 0 < stride <= window:
        raise ValueError(f"a stride from 1 to the window ({window} tokens), not {stride}")
    found: list[str] = []
    owners: list[int] = []
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    for row, (text, offsets) in enumerate(zip(texts, encoded["offset_mapping"], strict=True)):
        count = len(offsets)
        start = stride
        while start - stride + window < count:  # the window before this one ended before the last token
            stop = min(start + window, count)
            found.append(text[offsets[start][0] : offsets[stop - 1][1]])
            owners.append(row)
            start += stride
    return found, np.asarray(owners, dtype=np.int64)


@dataclass
class PassageVectors:
    """A collection's dense side scored by MaxP: `documents` (each document's first window, the index's vectors) and
    `passages` (the later windows) with `owners` (each later window's document row, ascending)."""

    documents: np.ndarray
    passages: np.ndarray
    owners: np.ndarray

    def __len__(self) -> int:
        return len(self.documents)

    def cosines(self, query_vectors: np.ndarray) -> np.ndarray:
        """(queries, documents): each document's highest cosine over its passages."""
        best = cosines(query_vectors, self.documents)
        if len(self.owners):
            later = cosines(query_vectors, self.passages)
            starts = np.flatnonzero(np.r_[True, self.owners[1:] != self.owners[:-1]])
            rows = self.owners[starts]
            best[:, rows] = np.maximum(best[:, rows], np.maximum.reduceat(later, starts, axis=1))
        return best

    def subset(self, rows: list[int]) -> PassageVectors:
        """The documents `rows` (distinct, in that order) with their passages: a pool of a collection."""
        position = np.full(len(self.documents), -1, dtype=np.int64)
        position[np.asarray(rows, dtype=np.int64)] = np.arange(len(rows))
        kept = np.flatnonzero(position[self.owners] >= 0)
        owners = position[self.owners[kept]]
        order = np.argsort(owners, kind="stable")
        return PassageVectors(self.documents[rows], self.passages[kept[order]], owners[order])

    @classmethod
    def open(cls, folder: Path, documents: np.ndarray, record: dict) -> PassageVectors:
        """An index version's passages (its settings' `passages` record names their count); one line naming the file
        when it is missing or disagrees with the record."""
        from sentune.data.text_files import DataError
        from sentune.search.damaged import DAMAGED
        from sentune.search.folder import IndexVersion

        vectors_path, owners_path = IndexVersion(folder).passage_vectors, IndexVersion(folder).passage_owners
        try:
            passages = np.load(vectors_path, mmap_mode="r")
            owners = np.load(owners_path)
        except (OSError, ValueError, EOFError) as exc:
            raise DataError(vectors_path.parent, None, f"its passages cannot be read ({exc}); {DAMAGED}") from None
        count = record.get("count")
        if passages.ndim != 2 or len(passages) != count or passages.shape[1:] != documents.shape[1:] or owners.shape != (count,):
            raise DataError(vectors_path, None, f"shape {passages.shape} with {owners.shape[0]} owners, but the index holds {count} passages; {DAMAGED}")
        if count and (owners.min() < 0 or owners.max() >= len(documents) or np.any(np.diff(owners) < 0)):
            raise DataError(owners_path, None, f"passage owners outside the documents or out of order; {DAMAGED}")
        return cls(documents, passages, owners)


def dense_scores(query_vectors: np.ndarray, doc_vectors: Any) -> np.ndarray:
    """Every query's dense score of every document: MaxP's for PassageVectors, the cosine (of the vectors normalised once
    for UnitVectors)."""
    return doc_vectors.cosines(query_vectors) if isinstance(doc_vectors, PassageVectors | UnitVectors) else cosines(query_vectors, doc_vectors)


UNIT_COPY_BYTES = 128 * 2**20  # an index's vectors up to this size are held normalised; larger ones stay memory-mapped


@dataclass(frozen=True)
class UnitVectors:
    """Document vectors normalised once (an index opened for searching), so that a query's cosines are not preceded by
    normalising every document again (on SciFact's 5,183 documents, most of a hybrid query's time past the encoder).
    The cosines are the very numbers `cosines` gives (the same rows, the same products), so a search ranks exactly as
    the evaluation's in-memory ranking does. Held as a copy, so only for vectors up to UNIT_COPY_BYTES; larger ones
    stay memory-mapped (`of` returns them as they are) and are normalised a block at a time per query."""

    unit: np.ndarray

    @classmethod
    def of(cls, vectors: np.ndarray) -> UnitVectors | np.ndarray:
        if len(vectors) * vectors.shape[1] * 4 > UNIT_COPY_BYTES:
            return vectors
        from sentune.tasks.retrieval import unit_rows

        return cls(unit_rows(vectors))

    def __len__(self) -> int:
        return len(self.unit)

    def cosines(self, query_vectors: np.ndarray) -> np.ndarray:
        return cosines(query_vectors, self.unit, normalised=True)


def cosines(query_vectors: np.ndarray, doc_vectors: np.ndarray, normalised: bool = False) -> np.ndarray:
    """Every query's cosine with every document, the documents normalised a block at a time (sentune.tasks.retrieval's
    BLOCK, as the evaluation's rank scores them): a memory-mapped index of millions of vectors is never copied whole.
    `normalised`: the documents are unit rows already (UnitVectors), the same products without normalising again."""
    from sentune.tasks.retrieval import BLOCK, unit_rows

    queries = unit_rows(query_vectors)
    out = np.empty((len(queries), len(doc_vectors)), dtype=np.float32)
    for start in range(0, len(doc_vectors), BLOCK):
        block = doc_vectors[start : start + BLOCK]
        out[:, start : start + BLOCK] = queries @ (block if normalised else unit_rows(block)).T
    return out
