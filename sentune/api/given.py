"""Plain Python data as the Python API takes it, read into sentune's data kinds (sentune.data.kinds: `ScoredPairs` from
`(text1, text2, score)` tuples, `Sentences` from strings, `Corpus` from BEIR-style dicts `{"_id", "title", "text"}`,
`Queries` from a dict of id → text, `Qrels` from {query id: {document id: grade}}; a list, a pandas DataFrame or a
`datasets.Dataset` of them, or the kind itself), each bad row one error naming its position (`--dev[3]: ...`).

adapt reads its inputs from files today (sentune.adapt.inputs.prepare), so data given as objects are written once, into
the run's folder, in the formats `sentune adapt` reads (pairs as s1<TAB>s2<TAB>score lines, a search run's splits as BEIR
folders): the record of what the run was given, read once by the same checks a file on the command line gets."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from sentune.data.beir import Corpus, RetrievalSet, write_beir_folder
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


def write_given_corpus(value: Given, folder: Path, option: str = "--corpus") -> Path:
    """Sentences as corpus.txt (a pairs run)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_corpus(folder / "corpus.txt", as_kind(Sentences, value, option).texts)
    return folder / "corpus.txt"


def write_pairs(value: Given, path: Path, option: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_scored_pairs(path, [(p.a, p.b, p.score) for p in as_kind(ScoredPairs, value, option).pairs])
    return path


def search_files(where: Path, corpus: Given, splits: dict[str, tuple[Given, Given]]) -> dict[str, Path | None]:
    """A search run's inputs as the paths adapt reads: each split (dev, test, train: its queries and judgements) given as
    objects becomes a BEIR folder under `where` (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv, sentune.data.beir), its
    queries judged against the documents (`corpus`, else the dev folder's corpus.jsonl); paths stay as given. A train
    split is `(queries, qrels)` or a RetrievalSet."""
    files: dict[str, Path | None] = {"corpus": Path(corpus) if is_path(corpus) else None}
    read: list[Corpus] = []  # the documents, read once when a split needs them

    def documents() -> Corpus:
        if not read:
            source = corpus if corpus is not None else Path(splits["dev"][0]) / "corpus.jsonl"
            read.append(Corpus.from_file(Path(source)) if is_path(source) else as_kind(Corpus, source, "--corpus"))
        return read[0]

    for split, (queries, qrels) in splits.items():
        if queries is None or (is_path(queries) and (qrels is None or is_path(qrels))):
            files[split] = Path(queries) if queries is not None else None
            files[f"{split}_qrels"] = Path(qrels) if qrels is not None else None
            continue
        judged = queries if isinstance(queries, RetrievalSet) else RetrievalSet.from_parts(documents(), queries, qrels)
        files[split], files[f"{split}_qrels"] = write_beir_folder(where / split, judged, split), None
        if files["corpus"] is None:  # the documents, as written beside the queries
            files["corpus"] = where / split / "corpus.jsonl"
    if files["corpus"] is None and corpus is not None:  # documents given as objects, every split as files
        files["corpus"] = write_beir_folder(where / "corpus", RetrievalSet([], documents().documents), "none") / "corpus.jsonl"
    return files
