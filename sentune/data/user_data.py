"""A user's own data for `sentune adapt`: an unlabelled corpus and scored sentence pairs.

Corpus: one sentence per line (.txt), a JSON object per line with a text field (.jsonl), or a column of a CSV file
with a header (.csv); blank lines are skipped and counted, duplicates removed (first occurrence kept).
Pairs: `s1<TAB>s2<TAB>label` per line. The labels decide the metric: all 0 or 1 → duplicate-style data ("binary":
average precision and best-threshold accuracy); otherwise numbers → graded similarity ("scores": Spearman).
Every problem is a DataError naming the file and line.
"""

from __future__ import annotations

import csv
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sentune.data.readers import DataError, Pair, Source, _fields, _nonempty, normalise, read_lines
from sentune.data.tables import Kind, RowSource, number_cell, row_fields, text_cell
from sentune.data.text_files import json_object

logger = logging.getLogger(__name__)

CORPUS_TEXT_FIELDS = ("text", "sentence")  # the .jsonl field tried when none is named


@dataclass(frozen=True)
class ScoredPairs(Kind):
    """Sentence pairs with a label each: `(text1, text2, score)` tuples, dicts `{"sentence1", "sentence2", "score"}`
    (or `"label"`), a DataFrame or Dataset with those columns, or a file of `s1<TAB>s2<TAB>label` lines. The labels
    choose the scale (`kind`) and with it the metric: all 0 or 1 → "binary" (average precision), otherwise graded
    "scores" (Spearman)."""

    pairs: list[Pair]
    kind: Literal["scores", "binary"]  # the scale the labels are on
    path: str = field(compare=False)  # the file (or Python data) they came from
    name = "scored-pairs"
    columns = ("sentence1", "sentence2", "score")
    aliases = {"score": ("label",)}  # sentence-transformers' datasets: `label` (pair-class sets too)

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "pairs") -> ScoredPairs:
        pairs = []
        for index, row in enumerate(rows):
            if isinstance(row, Mapping) and "score" not in row and "label" in row:  # a classification set's column name
                row = {**row, "score": row["label"]}
            a, b, label = row_fields(row, cls.columns, where, index)
            source = RowSource(where, index)
            pairs.append(
                Pair(text_cell(a, where, index, "sentence1"), text_cell(b, where, index, "sentence2"), number_cell(label, where, index, "score"), source)
            )
        if not pairs:
            raise DataError(where, None, "no pairs")
        return scored_pairs(pairs, where)

    @classmethod
    def from_file(cls, path: str | Path) -> ScoredPairs:
        return read_scored_pairs(path)

    def describe(self, source: str | os.PathLike | None = None) -> dict[str, Any]:
        """Kind.describe with the labels' scale; the source is where they came from unless another is named."""
        return super().describe(self.path if source is None else source) | {"labels": self.kind}

    @property
    def scale(self) -> tuple[float, float]:
        """The lowest and highest label."""
        return min(p.score for p in self.pairs), max(p.score for p in self.pairs)

    @property
    def metric(self) -> str:
        return "spearman" if self.kind == "scores" else "average_precision"

    # what adapt's rule reads of any dev or test set (sentune.data.beir.RetrievalSet has the same)
    unit = "pairs"

    @property
    def units(self) -> int:
        return len(self.pairs)

    @property
    def gold(self) -> np.ndarray:
        return np.array([p.score for p in self.pairs])


def _user_lines(path: Path) -> list[str]:
    """read_lines for a file the user named: a missing one is just that, never a hint at the data directory."""
    return read_lines(path, user_file=True)


def read_scored_pairs(path: str | Path) -> ScoredPairs:
    """`s1<TAB>s2<TAB>label` lines; see the module docstring for how the labels choose the metric."""
    path = Path(path)
    pairs = []
    for number, line in enumerate(_user_lines(path), start=1):
        fields = _fields(path, number, line, 3, "s1, s2, label", exact=True)
        raw = fields[2].strip()
        try:
            label = float(raw)
        except ValueError:
            raise DataError(path, number, f"label {raw!r} is neither a score (a number) nor 0/1") from None
        if not math.isfinite(label):
            raise DataError(path, number, f"label {raw!r} is not a finite number")
        pairs.append(Pair(_nonempty(path, number, fields[0], "s1"), _nonempty(path, number, fields[1], "s2"), label, Source(str(path), number)))
    return scored_pairs(pairs, path)


def scored_pairs(pairs: list[Pair], path: str | Path) -> ScoredPairs:
    """Pairs as one set: their labels choose the metric (see the module docstring); all alike is an error."""
    labels = {p.score for p in pairs}
    if len(labels) < 2:
        raise DataError(path, None, f"every pair has the label {pairs[0].score:g}: a metric needs at least two different labels")
    return ScoredPairs(pairs, "binary" if labels <= {0.0, 1.0} else "scores", str(path))


def pairs_as_written(path: str | Path, rows: list[tuple[str, str, float]]) -> ScoredPairs:
    """What read_scored_pairs(path) reads back after write_scored_pairs(path, rows), without reading it."""
    return scored_pairs([Pair(normalise(a), normalise(b), float(y), Source(str(path), number)) for number, (a, b, y) in enumerate(rows, start=1)], path)


def read_user_corpus(path: str | Path, column: str | None = None) -> list[str]:
    """The corpus's unique sentences in first-seen order (see the module docstring for the formats)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = _jsonl_texts(path, column)
    elif suffix == ".csv":
        rows = _csv_texts(path, column)
    else:
        if column is not None:
            raise DataError(path, None, f"a column ({column!r}) is only for .jsonl and .csv corpora; this one is read as one sentence per line")
        rows = _user_lines(path)
    sentences: dict[str, None] = {}
    blank = 0
    for text in map(normalise, rows):
        if not text:
            blank += 1
            continue
        sentences.setdefault(text, None)
    if not sentences:
        raise DataError(path, None, "the corpus has no sentences")
    duplicates = len(rows) - blank - len(sentences)
    if blank or duplicates:
        logger.warning("%s: %d sentences kept; %d blank lines skipped, %d duplicates removed", path, len(sentences), blank, duplicates)
    return list(sentences)


def _jsonl_texts(path: Path, column: str | None) -> list[str]:
    rows = []
    for number, line in enumerate(_user_lines(path), start=1):
        if not line.strip():
            rows.append("")
            continue
        record = json_object(path, number, line)
        names = [column] if column else [n for n in CORPUS_TEXT_FIELDS if n in record]
        if not names or names[0] not in record:
            wanted = repr(column) if column else " or ".join(repr(n) for n in CORPUS_TEXT_FIELDS)
            raise DataError(path, number, f"no field {wanted} (fields: {', '.join(record) or 'none'}); name it with --corpus-column")
        value = record[names[0]]
        if not isinstance(value, str):
            raise DataError(path, number, f"field {names[0]!r} is not a string")
        rows.append(value)
    return rows


def _csv_texts(path: Path, column: str | None) -> list[str]:
    lines = _user_lines(path)
    reader = csv.reader(lines)
    header = next(reader)
    wanted = column or next((n for n in CORPUS_TEXT_FIELDS if n in header), None)
    if wanted is None or wanted not in header:
        raise DataError(path, 1, f"no column {wanted or 'text or sentence'!r} in the header ({', '.join(header)}); name it with --corpus-column")
    index = header.index(wanted)
    rows = []
    for number, fields in enumerate(reader, start=2):
        if fields and len(fields) <= index:
            raise DataError(path, number, f"malformed row: {len(fields)} fields, column {wanted!r} is field {index + 1}")
        rows.append(fields[index] if fields else "")
    return rows


def write_scored_pairs(path: str | Path, rows: list[tuple[str, str, float]]) -> None:
    """`s1<TAB>s2<TAB>label` lines, the format read_scored_pairs reads (labels written as integers when they are)."""
    lines = [f"{normalise(a)}\t{normalise(b)}\t{int(y) if float(y).is_integer() else y}" for a, b, y in rows]
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def write_corpus(path: str | Path, sentences: list[str]) -> None:
    Path(path).write_text("".join(normalise(s) + "\n" for s in sentences), encoding="utf-8")
