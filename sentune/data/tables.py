"""What every data kind (sentune.data.kinds) shares: rows from Python objects, a pandas DataFrame or a Hugging Face
`datasets.Dataset`, each problem one DataError naming the row.

A kind names its columns (`columns`, in order) and builds itself from rows (`from_rows`): a row is a tuple in that
order, a dict with those keys, or (for a one-column kind) a plain value. A table is read by column name; `columns=`
maps a kind's column to the table's own name (`{"text": "sentence"}`). This module sits under the readers (beir.py,
user_data.py and kinds.py build on it), so that a reader may return the kind its file holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from sentune.data.text_files import DataError, Source, normalise


def row_error(where: str, index: int, message: str) -> DataError:
    """A problem with one row of Python data: `where[index]: message` (a file's rows are named file:line instead)."""
    return DataError(f"{where}[{index}]", None, message)


@dataclass(frozen=True)
class RowSource(Source):
    """Where an item given as Python data came from: its container and its index there (`queries[3]`)."""

    def __str__(self) -> str:
        return f"{self.path}[{self.line}]"


def error_at(source: Source, message: str) -> DataError:
    """The error about one item: `file:line: message`, or `where[index]: message` for an item of Python data."""
    if isinstance(source, RowSource):
        return row_error(source.path, source.line, message)
    return DataError(source.path, source.line, message)


def text_cell(value: Any, where: str, index: int, column: str) -> str:
    """A text column's value, whitespace-normalised as the readers normalise a file's text; not text, or empty, is an
    error naming the row."""
    if not isinstance(value, str):
        raise row_error(where, index, f"{column} must be a string, got {type(value).__name__}")
    text = normalise(value)
    if not text:
        raise row_error(where, index, f"empty {column}")
    return text


def number_cell(value: Any, where: str, index: int, column: str) -> float:
    """A numeric column's value as a finite float (a bool is not a number here: True would read as 1.0 unnoticed)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise row_error(where, index, f"{column} {value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise row_error(where, index, f"{column} {value!r} is not a finite number")
    return number


class Kind:
    """The base of every data kind: `name` (its key in sentune.data.kinds.KINDS), `columns` (a row's fields, in order)
    and the constructors every kind has; a kind gives `from_rows`, and `from_file` for the files sentune reads."""

    name: ClassVar[str]
    columns: ClassVar[tuple[str, ...]]
    # A table's other names for a column, read when it has no column of the kind's name: sentence-transformers'
    # datasets call a pair's score `label`, an unscored pair's texts `sentence1`, `sentence2`.
    aliases: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def __len__(self) -> int:
        """How many items (sentences, pairs, rows, documents, queries, judgements): a kind's first field holds them."""
        return len(getattr(self, fields(self)[0].name))  # type: ignore[arg-type]  # every kind is a dataclass

    def describe(self, source: str | os.PathLike | None = None) -> dict[str, Any]:
        """The data as a record names them: their kind, how many rows, and (`source`) the file that records them. What a
        run folder's config.yaml and adapt's records hold instead of a `PREFIX:PATH` string: the trainer received the
        data themselves."""
        return {"kind": self.name, "rows": len(self), **({"source": os.fspath(source)} if source is not None else {})}

    @classmethod
    def of(cls, data: Any) -> Self:
        """Whatever the user has, as this kind: the kind itself, a file (a str or os.PathLike: `from_file`), a pandas
        DataFrame, a `datasets.Dataset`, or Python rows (a mapping too, where the kind reads one: `{id: text}`)."""
        if isinstance(data, cls):
            return data
        if isinstance(data, str | os.PathLike):
            return cls.from_file(Path(data))
        if type(data).__module__.startswith("pandas"):  # duck-typed: pandas is imported only by the user who has a frame
            return cls.from_pandas(data)
        if hasattr(data, "column_names"):
            return cls.from_dataset(data)
        return cls.from_rows(data)

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "rows") -> Self:
        raise NotImplementedError

    @classmethod
    def from_file(cls, path: str | Path) -> Self:
        raise DataError(path, None, f"{cls.name} is not read from a file; give it as Python data")

    @classmethod
    def from_pandas(cls, frame: Any, *, columns: Mapping[str, str] | None = None, where: str = "DataFrame") -> Self:
        """From a pandas DataFrame, reading the kind's columns by name (`columns`: the frame's names mapped to the kind's,
        as pandas' `rename(columns=...)`: `{"question": "text"}`)."""
        names = cls.table_names(list(frame.columns), columns, where)
        return cls.from_rows(frame[names].itertuples(index=False, name=None), where=where)

    @classmethod
    def from_dataset(cls, dataset: Any, *, columns: Mapping[str, str] | None = None, where: str = "Dataset") -> Self:
        """From a Hugging Face `datasets.Dataset` (sentence-transformers trains on them; `datasets` is installed with
        sentune), reading the kind's columns by name (`columns`: as from_pandas's)."""
        if isinstance(dataset.column_names, Mapping):  # a DatasetDict: load_dataset() without split=
            raise DataError(where, None, f"a DatasetDict of splits {', '.join(dataset.column_names)}: give one split, e.g. dataset['train']")
        names = cls.table_names(list(dataset.column_names), columns, where)
        return cls.from_rows(zip(*(dataset[name] for name in names), strict=True), where=where)

    @classmethod
    def table_names(cls, available: Sequence[str], renamed: Mapping[str, str] | None, where: str) -> list[str]:
        """The table's columns this kind reads, in its row order (default: its `columns`; `renamed` maps the table's
        names to the kind's)."""
        return table_columns(cls, available, renamed, where)


def data_label(value: str | Mapping[str, Any]) -> str:
    """A recipe's train_data or eval.dev for a message: as written, or what a description of data given as objects
    (Kind.describe) says: `scored-pairs, 150 rows (OUT/data/dev-select.tsv)`."""
    if isinstance(value, str):
        return value
    counts = ", ".join(f"{n} {k}" for k, n in value.items() if isinstance(n, int) and not isinstance(n, bool))
    return f"{value.get('kind', 'data')}, {counts}" + (f" ({value['source']})" if "source" in value else "")


def table_columns(kind: type[Kind], available: Sequence[str], renamed: Mapping[str, str] | None, where: str) -> list[str]:
    """The table's names of the kind's columns, in the kind's order: the column `renamed` maps to it (the table's name →
    the kind's; names the table does not have are left to the other tables a mapping is given for), else its own name,
    else one of its aliases; a mapping to no column of the kind, or a column missing, is one error naming both lists."""
    renamed = {theirs: ours for theirs, ours in (renamed or {}).items() if theirs in available}
    unknown = sorted(f"{theirs} to {ours}" for theirs, ours in renamed.items() if ours not in kind.columns)
    if unknown:
        raise DataError(where, None, f"columns= maps {', '.join(unknown)}, not a column of {kind.name} ({', '.join(kind.columns)})")
    theirs_for = {ours: theirs for theirs, ours in renamed.items()}
    names = [theirs_for.get(column) or next((n for n in (column, *kind.aliases.get(column, ())) if n in available), column) for column in kind.columns]
    missing = [name for name in names if name not in available]
    if missing:
        raise DataError(
            where,
            None,
            f"no column {', '.join(map(repr, missing))} for {kind.name} (it has {', '.join(map(str, available))}); name yours with "
            f"columns={{'your column': {missing[0]!r}, ...}}",
        )
    return names


def row_fields(row: Any, columns: tuple[str, ...], where: str, index: int) -> tuple:
    """A row as a tuple in `columns` order: a dict by key, a one-column kind's plain value, else a sequence of exactly
    that many fields."""
    if isinstance(row, Mapping):
        missing = [c for c in columns if c not in row]
        if missing:
            raise row_error(where, index, f"no key {', '.join(map(repr, missing))} (keys: {', '.join(map(str, row))})")
        return tuple(row[c] for c in columns)
    if len(columns) == 1 and not isinstance(row, tuple | list):
        return (row,)
    if not isinstance(row, tuple | list) or len(row) != len(columns):
        size = f"{len(row)} fields" if isinstance(row, tuple | list) else type(row).__name__
        raise row_error(where, index, f"expected ({', '.join(columns)}), got {size}")
    return tuple(row)
