"""Data kinds: the typed data sentune trains, evaluates and searches on, and one registry of them (`KINDS`, name →
class).

| kind | what | a row |
|---|---|---|
| `Sentences` | unlabelled sentences (most training methods; adapt's corpus) | a string |
| `Pairs` | (anchor, positive) pairs without a score (BT's paraphrases, GenQ's queries with their passages) | 2 strings |
| `ScoredPairs` | pairs with a label, whose scale chooses the metric (adapt's dev/test/train, cosent) | 2 strings, a number |
| `Tuples` | (anchor, positive, negative...) rows of one width (mnrl-hard-negatives, margin-mse) | 3+ strings |
| `Corpus`, `Queries`, `Qrels` | a search corpus, its queries by id, the relevance judgements | BEIR's fields |
| `RetrievalSet` | judged queries against a corpus (`from_parts(corpus, queries, qrels)`, `from_folder`) | (its parts) |

Every kind (sentune.data.tables.Kind) is built the same ways: `Kind.of(anything)`, `from_rows` (tuples, dicts,
strings), `from_pandas` (a DataFrame), `from_dataset` (a Hugging Face `datasets.Dataset`) and `from_file` (the files
sentune reads, through its readers: a bad line is one error naming file:line). Each kind is defined beside the reader
of its files (beir.py, user_data.py, or here), so that a reader returns its kind without an import cycle; this module
is where they are all found, and `KINDS` the lookup by name: a recipe's `train_data: PREFIX:PATH` names its kind there
(sentune.data.catalog.TRAIN_FILES; parsed into sentune.data.catalog.TrainData), a run's record of data given as objects
(`Kind.describe`) is read back through it (sentune.training.recipe.described_kind), and a method declares the kinds it
takes (`Method.takes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentune.data.beir import Corpus, Document, Qrels, Queries, Query, RetrievalSet
from sentune.data.readers import Pair, read_paraphrase_pairs, read_tuples
from sentune.data.tables import Kind, row_error, row_fields, text_cell
from sentune.data.text_files import DataError
from sentune.data.user_data import ScoredPairs, read_user_corpus

__all__ = ["KINDS", "Corpus", "Document", "Kind", "Pair", "Pairs", "Qrels", "Queries", "Query", "RetrievalSet", "ScoredPairs", "Sentences", "Tuples", "kind"]


@dataclass(frozen=True)
class Sentences(Kind):
    """Sentences: strings, dicts with a `text` key, a DataFrame or Dataset with a `text` (or `sentence`) column
    (`columns={"question": "text"}` for another name), or a corpus file (.txt one a line, .jsonl, .csv:
    sentune.data.user_data)."""

    texts: list[str]
    name = "sentences"
    columns = ("text",)
    aliases = {"text": ("sentence",)}

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "sentences") -> Sentences:
        texts = [text_cell(row_fields(row, cls.columns, where, index)[0], where, index, "text") for index, row in enumerate(rows)]
        if not texts:
            raise DataError(where, None, "no sentences")
        return cls(texts)

    @classmethod
    def from_file(cls, path: str | Path, column: str | None = None) -> Sentences:
        """A corpus file's unique sentences in first-seen order, blank lines skipped (sentune.data.user_data)."""
        return cls(read_user_corpus(path, column))

    def unique(self) -> Sentences:
        return Sentences(list(dict.fromkeys(self.texts)))


@dataclass(frozen=True)
class Pairs(Kind):
    """(anchor, positive) pairs without a score: 2-tuples, dicts with `anchor` and `positive`, a DataFrame or Dataset
    with those columns (or sentence-transformers' `sentence1`, `sentence2`), or a file of `sentence<TAB>paraphrase`
    lines."""

    pairs: list[tuple[str, str]]
    name = "pairs"
    columns = ("anchor", "positive")
    aliases = {"anchor": ("sentence1",), "positive": ("sentence2",)}

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "pairs") -> Pairs:
        pairs = []
        for index, row in enumerate(rows):
            a, b = row_fields(row, cls.columns, where, index)
            pairs.append((text_cell(a, where, index, "anchor"), text_cell(b, where, index, "positive")))
        if not pairs:
            raise DataError(where, None, "no pairs")
        return cls(pairs)

    @classmethod
    def from_file(cls, path: str | Path) -> Pairs:
        return cls(read_paraphrase_pairs(path, user_file=True))


@dataclass(frozen=True)
class Tuples(Kind):
    """Rows of one width, at least 3 texts: (anchor, positive, negative, ...), possibly followed by numbers a method
    reads (margin-mse's teacher margins, kept as text here). From tuples, a DataFrame or Dataset (every column, in
    order, or the ones `columns=` names, in its order) or a file of tab-separated lines."""

    rows: list[tuple[str, ...]]
    name = "tuples"
    columns = ("anchor", "positive", "negative")  # the least a row has; a table's columns are read in its order

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "tuples") -> Tuples:
        out: list[tuple[str, ...]] = []
        for index, row in enumerate(rows):
            fields = tuple(row.values()) if isinstance(row, Mapping) else row
            if not isinstance(fields, tuple | list) or len(fields) < 3 or (out and len(fields) != len(out[0])):
                width = f"{len(out[0])} fields, as the first row" if out else "at least 3 fields"
                raise row_error(where, index, f"expected {width} (anchor, positive, negative...), got {fields!r}")
            out.append(tuple(text_cell(str(f) if isinstance(f, int | float) else f, where, index, f"field {i + 1}") for i, f in enumerate(fields)))
        if not out:
            raise DataError(where, None, "no rows")
        return cls(out)

    @classmethod
    def table_names(cls, available: Sequence[str], renamed: Mapping[str, str] | None, where: str) -> list[str]:
        chosen = [theirs for theirs in (renamed or {}) if theirs in available]  # the table's columns the mapping names, in its order
        return chosen or list(available)

    @classmethod
    def from_file(cls, path: str | Path) -> Tuples:
        return cls(read_tuples(path, user_file=True))

    @property
    def width(self) -> int:
        return len(self.rows[0])


KINDS: dict[str, type[Kind]] = {k.name: k for k in (Sentences, Pairs, ScoredPairs, Tuples, Corpus, Queries, Qrels, RetrievalSet)}


def kind(name: str) -> type[Kind]:
    """The data kind registered as `name`; an unknown name is an error listing the kinds."""
    if name not in KINDS:
        raise DataError("<data kind>", None, f"unknown data kind {name!r}; kinds: {', '.join(KINDS)}")
    return KINDS[name]
