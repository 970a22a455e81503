"""Plain Python data as the Python API takes it, read into sentune's data kinds (sentune.data.kinds: `ScoredPairs` from
`(text1, text2, score)` tuples, `Sentences` from strings, `Corpus` from BEIR-style dicts `{"_id", "title", "text"}`,
`Queries` from a dict of id → text, `Qrels` from {query id: {document id: grade}}; a list, a pandas DataFrame or a
`datasets.Dataset` of them, or the kind itself), each bad row one error naming its position (`--dev[3]: ...`).

adapt reads its inputs from files today (sentune.adapt.inputs.prepare), so data given as objects are written once, into
the run's folder, in the formats `sentune adapt` reads: the record of what the run was given, read once by the same
checks a file on the command line gets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from sentune.data.beir import Corpus, Qrels, Queries
from sentune.data.kinds import Sentences
from sentune.data.tables import Kind
from sentune.data.user_data import ScoredPairs, write_corpus, write_scored_pairs

Given = Any  # a path, or data as Python objects (see the module's docstring)
K = TypeVar("K", bound=Kind)


def is_path(value: Given) -> bool:
    return isinstance(value, str | PathLike)


def as_kind(kind: type[K], value: Given, option: str) -> K:
    """`value` (not a path) as `kind`: the kind itself, a DataFrame, a Dataset, or rows, whose errors name `option`."""
    if isinstance(value, kind):
        return value
    if type(value).__module__.startswith("pandas"):
        return kind.from_pandas(value)
    if hasattr(value, "column_names"):
        return kind.from_dataset(value)
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


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def write_given_corpus(value: Given, folder: Path, option: str = "--corpus") -> Path:
    """Sentences as corpus.txt, or documents as a BEIR corpus.jsonl (a search run)."""
    if is_documents(value):
        corpus = as_kind(Corpus, value, option)
        records = [{"_id": d.id, "title": d.title, "text": d.text[len(d.title) :].strip() if d.title else d.text} for d in corpus.documents]
        return write_jsonl(folder / "corpus.jsonl", records)
    folder.mkdir(parents=True, exist_ok=True)
    write_corpus(folder / "corpus.txt", as_kind(Sentences, value, option).texts)
    return folder / "corpus.txt"


def write_pairs(value: Given, path: Path, option: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_scored_pairs(path, [(p.a, p.b, p.score) for p in as_kind(ScoredPairs, value, option).pairs])
    return path


def write_queries(value: Given, path: Path, option: str) -> Path:
    return write_jsonl(path, [{"_id": q.id, "text": q.text} for q in as_kind(Queries, value, option).queries])


def write_qrels(value: Given, path: Path, option: str) -> Path:
    """Judgements as BEIR's query-id<TAB>corpus-id<TAB>score lines."""
    judgements = as_kind(Qrels, value, option).judgements
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{j.query_id}\t{j.doc_id}\t{j.grade}\n" for j in judgements), encoding="utf-8")
    return path
