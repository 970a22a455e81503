"""Plain Python data as the Python API takes it, read into sentune's data kinds (sentune.data.kinds: `ScoredPairs` from
`(text1, text2, score)` tuples, `Sentences` from strings, `Corpus` from BEIR-style dicts `{"_id", "title", "text"}`,
`Queries` from a dict of id → text, `Qrels` from {query id: {document id: grade}}; a list, a pandas DataFrame or a
`datasets.Dataset` of them, or the kind itself), each bad row one error naming its position (`--dev[3]: ...`).

adapt takes these kinds as they are (sentune.adaptation.inputs.prepare reads a path into the same kinds first), and writes
what it used once under OUT/data, the record of the run."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from sentune.data.beir import Corpus, Qrels, Queries, RetrievalSet
from sentune.data.tables import Kind

Given = Any  # a path, or data as Python objects (see the module's docstring)
K = TypeVar("K", bound=Kind)


def is_path(value: Given) -> bool:
    return isinstance(value, str | PathLike)


def as_kind(kind: type[K], value: Given, option: str, columns: Mapping[str, str] | None = None) -> K:
    """`value` (not a path) as `kind`: the kind itself, a DataFrame, a Dataset, or rows, whose errors name `option`.
    `columns`: a table's column names mapped to the kind's (`{"question": "text", "label": "score"}`), as pandas'
    `rename(columns=...)`; one mapping may serve several tables, each reading the names it has."""
    if isinstance(value, kind):
        return value
    if type(value).__module__.startswith("pandas"):
        return kind.from_pandas(value, columns=columns, where=option)
    if hasattr(value, "column_names"):
        return kind.from_dataset(value, columns=columns, where=option)
    return kind.from_rows(value, where=option)


def is_documents(value: Given) -> bool:
    """Whether a corpus given as objects holds documents with ids (a search run's), not plain sentences."""
    if isinstance(value, Corpus | Mapping):
        return True
    columns = getattr(value, "column_names", None) or list(getattr(value, "columns", []))
    if columns:
        return "_id" in columns
    first = next(iter(value), None) if isinstance(value, list | tuple) else None
    return isinstance(first, Mapping) and ("_id" in first or "id" in first)


def search_kinds(corpus: Given, splits: dict[str, tuple[Given, Given]], columns: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A search run's inputs as adapt takes them (sentune.adaptation.inputs.AdaptConfig): each split (dev, test, train: its
    queries and judgements) given as objects becomes a `RetrievalSet`, its queries judged against the documents
    (`corpus`, else the dev folder's corpus.jsonl), and the documents then a `Corpus`; paths stay as given. A train
    split is `(queries, qrels)` or a RetrievalSet. `columns`: as as_kind's, for every table given."""
    found: dict[str, Any] = {"corpus": Path(corpus) if is_path(corpus) else None}
    read: list[Corpus] = []  # the documents, read once when a split needs them

    def documents() -> Corpus:
        if not read:
            source = corpus if corpus is not None else Path(splits["dev"][0]) / "corpus.jsonl"
            read.append(Corpus.from_file(Path(source)) if is_path(source) else as_kind(Corpus, source, "--corpus", columns))
        return read[0]

    for split, (queries, qrels) in splits.items():
        if queries is None or (is_path(queries) and (qrels is None or is_path(qrels))):
            found[split] = Path(queries) if queries is not None else None
            found[f"{split}_qrels"] = Path(qrels) if qrels is not None else None
            continue
        if isinstance(queries, RetrievalSet):
            found[split] = queries
        else:
            asked, judged = as_kind(Queries, queries, f"--{split}", columns), as_kind(Qrels, qrels, f"--{split}-qrels", columns)
            found[split] = RetrievalSet.from_parts(documents(), asked, judged)
        found[f"{split}_qrels"] = None
    if corpus is not None and (read or not is_path(corpus)):  # documents given as objects, or read for a split's judgements
        found["corpus"] = documents()
    return found
