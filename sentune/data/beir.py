"""Retrieval sets in BEIR's layout (Thakur et al., 2021): `corpus.jsonl`, `queries.jsonl` and `qrels/SPLIT.tsv`.

- corpus.jsonl: one JSON object per line with `_id`, `text` and optionally `title`; a document is encoded as
  `title + " " + text`, as BEIR's sentence-transformers wrapper does.
- queries.jsonl: `_id` and `text` per line (or a TSV file `id<TAB>text`, for queries a user writes by hand).
- qrels/SPLIT.tsv: `query-id<TAB>corpus-id<TAB>score`, an optional header line, CRLF or LF; TREC's 4-column
  `qid 0 docid score` is read too. A judgement with score > 0 marks a relevant document; only queries with at
  least one relevant document are evaluated (BEIR, MTEB and sentence-transformers' InformationRetrievalEvaluator
  do the same).

Every problem is a DataError naming the file and line: a line that is not JSON, a document without `text`, an id
given twice, a judgement naming a query or document that does not exist, a set with no relevant document.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentune.data.tables import Kind, RowSource, error_at, number_cell, row_error, text_cell
from sentune.data.text_files import DataError, Source, json_object, normalise, read_lines

# Where an item came from is not part of what it is (compare=False): a corpus built from dicts equals the same corpus
# read from corpus.jsonl.


@dataclass(frozen=True)
class Document:
    id: str
    text: str  # what is encoded: title + " " + body (the body alone when there is no title)
    source: Source = field(compare=False)
    title: str = ""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    source: Source = field(compare=False)
    relevant: dict[str, int] = field(default_factory=dict, compare=False, hash=False)  # document id -> grade > 0


@dataclass(frozen=True)
class Judgement:
    query_id: str
    doc_id: str
    grade: int
    source: Source = field(compare=False)


def _identity(value: Any, where: str, index: int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise row_error(where, index, f"{what} must be a non-empty string or integer, got {value!r}")
    return str(value).strip()


def _unique(items: list, where: str) -> list:
    seen: dict[str, Source] = {}
    for item in items:
        if item.id in seen:
            raise error_at(item.source, f"id {item.id!r} already given at {seen[item.id]}")
        seen[item.id] = item.source
    if not items:
        raise DataError(where, None, "nothing given")
    return items


def _id_text_row(row: Any, where: str, index: int, text_keys: tuple[str, ...]) -> tuple[str, str, str]:
    """(id, title, text) of a corpus or queries row: a string (its id: its position), a dict with `_id` (or `id`),
    `text` and an optional `title`, or an (id, text) or (id, title, text) tuple."""
    if isinstance(row, str):
        return str(index), "", text_cell(row, where, index, "text")
    if isinstance(row, Mapping):
        if "text" not in row:
            raise row_error(where, index, f"no key 'text' (keys: {', '.join(map(str, row))})")
        title = row.get("title") if "title" in text_keys else None
        return _identity(row.get("_id", row.get("id")), where, index, "_id"), normalise(title or ""), normalise(str(row["text"] or ""))
    if isinstance(row, tuple | list) and 2 <= len(row) <= len(text_keys) + 1:
        title = row[1] if len(row) == 3 else ""
        return _identity(row[0], where, index, "id"), normalise(title or ""), normalise(str(row[-1] or ""))
    raise row_error(where, index, f"expected a string, a dict with {', '.join(('_id', *text_keys))} or an (id, {', '.join(text_keys)}) tuple, got {row!r}")


@dataclass(frozen=True)
class Corpus(Kind):
    """The documents searched: strings (each one's id its position), BEIR-style dicts `{"_id", "title", "text"}`,
    `{id: text}`, a DataFrame or Dataset with `_id`, `title`, `text` columns, or BEIR's corpus.jsonl. A document is
    encoded as title + " " + text, as BEIR's sentence-transformers wrapper does."""

    documents: list[Document]
    name = "corpus"
    columns = ("_id", "title", "text")

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "corpus") -> Corpus:
        documents = []
        for index, row in enumerate(rows.items() if isinstance(rows, Mapping) else rows):
            doc_id, title, body = _id_text_row(row, where, index, ("title", "text"))
            text = f"{title} {body}".strip()
            if not text:
                raise row_error(where, index, f"document {doc_id!r} has an empty title and text")
            documents.append(Document(doc_id, text, RowSource(where, index), title))
        return cls(_unique(documents, where))

    @classmethod
    def from_file(cls, path: str | Path) -> Corpus:
        return cls(read_corpus_jsonl(path))

    @property
    def texts(self) -> list[str]:
        return [d.text for d in self.documents]


@dataclass(frozen=True)
class Queries(Kind):
    """Queries by id: `{id: text}`, strings (each one's id its position), dicts `{"_id", "text"}`, a DataFrame or
    Dataset with `_id` and `text` columns, or queries.jsonl (or a `.tsv` of `id<TAB>text` lines)."""

    queries: list[Query]
    name = "queries"
    columns = ("_id", "text")

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "queries") -> Queries:
        queries = []
        for index, row in enumerate(rows.items() if isinstance(rows, Mapping) else rows):
            query_id, _, text = _id_text_row(row, where, index, ("text",))
            if not text:
                raise row_error(where, index, f"query {query_id!r} is empty")
            queries.append(Query(query_id, text, RowSource(where, index)))
        return cls(_unique(queries, where))

    @classmethod
    def from_file(cls, path: str | Path) -> Queries:
        return cls(read_queries(path))


@dataclass(frozen=True)
class Qrels(Kind):
    """Relevance judgements: `{query id: {document id: grade}}`, (query id, document id, grade) rows, a DataFrame or
    Dataset with BEIR's `query-id`, `corpus-id`, `score` columns, or a qrels file (sentune.data.beir.read_qrels)."""

    judgements: list[Judgement]
    name = "qrels"
    columns = ("query-id", "corpus-id", "score")

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "qrels") -> Qrels:
        if isinstance(rows, Mapping):  # {query id: {document id: grade}}
            rows = [(q, d, g) for q, docs in rows.items() for d, g in docs.items()]
        judgements = []
        for index, row in enumerate(rows):
            fields = tuple(row[c] for c in cls.columns) if isinstance(row, Mapping) and set(cls.columns) <= set(row) else row
            if not isinstance(fields, tuple | list) or len(fields) != 3:
                raise row_error(where, index, f"expected (query-id, corpus-id, score), got {row!r}")
            grade = number_cell(fields[2], where, index, "score")
            if not grade.is_integer():
                raise row_error(where, index, f"score {fields[2]!r} is not an integer")
            judgements.append(
                Judgement(_identity(fields[0], where, index, "query-id"), _identity(fields[1], where, index, "corpus-id"), int(grade), RowSource(where, index))
            )
        if not judgements:
            raise DataError(where, None, "no judgements")
        return cls(judgements)

    @classmethod
    def from_file(cls, path: str | Path) -> Qrels:
        return cls([Judgement(q, d, g, Source(str(path), n)) for n, q, d, g in read_qrels(path)])


@dataclass(frozen=True)
class RetrievalSet(Kind):
    """Queries (each with its relevant documents) against one corpus: from a BEIR folder (`from_folder`, or `from_file`
    / `Kind.of` given the folder) or from its three parts (`from_parts`), each given as its kind accepts it. Not rows of
    one table: `from_rows`, `from_pandas` and `from_dataset` name the parts to give instead."""

    queries: list[Query]
    corpus: list[Document]
    name = "retrieval-set"
    columns = ("queries", "corpus")  # its parts, not a table's columns

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, where: str = "retrieval-set") -> RetrievalSet:
        raise DataError(
            where, None, "a retrieval set is judged queries against a corpus: give RetrievalSet.from_parts(corpus, queries, qrels) or a BEIR folder"
        )

    @classmethod
    def from_pandas(cls, frame: Any, *, columns: Mapping[str, str] | None = None, where: str = "DataFrame") -> RetrievalSet:
        return cls.from_rows([], where=where)

    @classmethod
    def from_dataset(cls, dataset: Any, *, columns: Mapping[str, str] | None = None, where: str = "Dataset") -> RetrievalSet:
        return cls.from_rows([], where=where)

    @classmethod
    def from_file(cls, path: str | Path) -> RetrievalSet:
        """A BEIR folder's test split (`from_folder` for another)."""
        return cls.from_folder(path)

    @classmethod
    def from_parts(cls, corpus: Any, queries: Any, qrels: Any) -> RetrievalSet:
        """The judged queries against the corpus; a judgement naming an unknown query or document is an error naming
        its row (or its file's line)."""
        documents, asked, judged = Corpus.of(corpus), Queries.of(queries), Qrels.of(qrels)
        return cls(attach_judgements(asked.queries, documents.documents, judged.judgements), documents.documents)

    @classmethod
    def from_folder(cls, folder: str | Path, split: str = "test") -> RetrievalSet:
        return read_beir_folder(folder, split)

    def describe(self, source: str | os.PathLike | None = None) -> dict[str, Any]:
        """The set as a record names it (sentune.data.tables.Kind.describe): its kind, queries, documents and source."""
        described = {"kind": self.name, "queries": len(self.queries), "documents": len(self.corpus)}
        return described | ({"source": os.fspath(source)} if source is not None else {})

    def examples(self) -> dict[str, list]:
        """The catalog's view: examples by part, so `sentences_of` finds every text to encode."""
        return {"queries": self.queries, "corpus": self.corpus}

    # what adapt's rule reads of any dev or test set (sentune.data.user_data.ScoredPairs has the same)
    metric = "ndcg@10"
    unit = "queries"

    @property
    def units(self) -> int:
        return len(self.queries)

    @property
    def gold(self) -> np.ndarray:
        """A query's value is its own nDCG@10 (sentune.tasks.user_queries): there is no separate gold to compare with."""
        return np.zeros(len(self.queries))

    def subset(self, query_ids: list[str]) -> RetrievalSet:
        wanted = set(query_ids)
        return RetrievalSet([q for q in self.queries if q.id in wanted], self.corpus)


def _json_objects(path: Path) -> list[tuple[int, dict]]:
    out = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        out.append((number, json_object(path, number, line)))
    return out


def _identifier(path: Path, number: int, record: dict) -> str:
    value = record.get("_id", record.get("id"))
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataError(path, number, "no `_id` field")
    if not isinstance(value, str | int):
        raise DataError(path, number, f"`_id` must be a string or integer, got {type(value).__name__}")
    return str(value)


def _text_field(path: Path, number: int, record: dict, name: str, *, required: bool) -> str:
    if name not in record:
        if required:
            raise DataError(path, number, f"no `{name}` field")
        return ""
    value = record[name]
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise DataError(path, number, f"`{name}` must be a string, got {type(value).__name__}")
    return normalise(value)


def read_corpus_jsonl(path: str | Path) -> list[Document]:
    """BEIR corpus.jsonl -> documents in file order; a document whose title and text are both empty is an error."""
    path = Path(path)
    documents: list[Document] = []
    seen: dict[str, int] = {}
    for number, record in _json_objects(path):
        doc_id = _identifier(path, number, record)
        if doc_id in seen:
            raise DataError(path, number, f"document id {doc_id!r} already used at line {seen[doc_id]}")
        seen[doc_id] = number
        body = _text_field(path, number, record, "text", required=True)
        title = _text_field(path, number, record, "title", required=False)
        text = f"{title} {body}".strip()
        if not text:
            raise DataError(path, number, f"document {doc_id!r} has an empty title and text")
        documents.append(Document(doc_id, text, Source(str(path), number), title))
    if not documents:
        raise DataError(path, None, "no documents")
    return documents


QUERY_ID_COLUMNS = {"id", "_id", "qid", "query_id", "query-id", "queryid", "query id"}
QUERY_TEXT_COLUMNS = {"text", "query", "question", "query_text", "query-text", "querytext", "query text"}


def is_header(parts: list[str]) -> bool:
    return parts[0].strip().lower() in QUERY_ID_COLUMNS and parts[1].strip().lower() in QUERY_TEXT_COLUMNS


def read_queries(path: str | Path) -> list[Query]:
    """queries.jsonl (`_id`, `text`), or a `.tsv`/`.txt` file of `id<TAB>text` lines, after an optional header line
    naming those two columns (`id<TAB>text`, `query-id<TAB>query`, ...); ids must be unique."""
    path = Path(path)
    rows: list[tuple[int, str, str]] = []
    if path.suffix in (".tsv", ".txt"):
        for number, line in enumerate(read_lines(path), start=1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise DataError(path, number, f"malformed row: expected `id<TAB>query` (2 tab-separated fields), got {len(parts)}")
            if not rows and is_header(parts):  # `id<TAB>text` atop a spreadsheet's export names the columns: no query
                continue
            rows.append((number, parts[0].strip(), normalise(parts[1])))
    else:
        rows = [(n, _identifier(path, n, r), _text_field(path, n, r, "text", required=True)) for n, r in _json_objects(path)]
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for number, query_id, text in rows:
        if not query_id:
            raise DataError(path, number, "empty query id")
        if query_id in seen:
            raise DataError(path, number, f"query id {query_id!r} already used at line {seen[query_id]}")
        if not text:
            raise DataError(path, number, f"query {query_id!r} is empty")
        seen[query_id] = number
        queries.append(Query(query_id, text, Source(str(path), number)))
    if not queries:
        raise DataError(path, None, "no queries")
    return queries


def read_qrels(path: str | Path) -> list[tuple[int, str, str, int]]:
    """(line, query id, document id, grade) of every judgement; a header line (non-numeric score) is skipped."""
    path = Path(path)
    out = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) == 4:  # TREC: qid iteration docid grade
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise DataError(path, number, f"malformed row: expected `query-id<TAB>corpus-id<TAB>score` (3 fields), got {len(parts)}")
        query_id, doc_id, grade = (p.strip() for p in parts)
        try:
            value = int(grade)
        except ValueError:
            if number == 1:  # BEIR writes `query-id corpus-id score` first
                continue
            raise DataError(path, number, f"score {grade!r} is not an integer") from None
        out.append((number, query_id, doc_id, value))
    if not out:
        raise DataError(path, None, "no judgements")
    return out


def attach_qrels(queries: list[Query], corpus: list[Document], qrels_path: str | Path) -> list[Query]:
    """The queries that have at least one relevant document (grade > 0), each carrying its judgements.
    A judgement naming an unknown query or document is an error naming its line."""
    return attach_judgements(queries, corpus, Qrels.from_file(qrels_path).judgements, qrels_path, "the queries file")


def attach_judgements(
    queries: list[Query], corpus: list[Document], judgements: list[Judgement], where: str | Path = "qrels", queries_are: str = "the queries"
) -> list[Query]:
    """attach_qrels for judgements already read (from a file or from Python rows), each error naming the judgement's
    source."""
    known_docs = {d.id for d in corpus}
    by_query: dict[str, dict[str, int]] = {q.id: {} for q in queries}
    for judgement in judgements:
        if judgement.query_id not in by_query:
            raise error_at(judgement.source, f"query {judgement.query_id!r} is not in {queries_are}")
        if judgement.doc_id not in known_docs:
            raise error_at(judgement.source, f"document {judgement.doc_id!r} is not in the corpus")
        if judgement.grade > 0:
            by_query[judgement.query_id][judgement.doc_id] = judgement.grade
    judged = [Query(q.id, q.text, q.source, by_query[q.id]) for q in queries if by_query[q.id]]
    if not judged:
        raise DataError(where, None, "no query has a relevant document (score > 0) in the corpus")
    return judged


def read_retrieval_set(corpus_path: str | Path, queries_path: str | Path, qrels_path: str | Path) -> RetrievalSet:
    corpus = read_corpus_jsonl(corpus_path)
    return RetrievalSet(attach_qrels(read_queries(queries_path), corpus, qrels_path), corpus)


def read_beir_folder(folder: str | Path, split: str = "test") -> RetrievalSet:
    """A BEIR dataset folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv."""
    folder = Path(folder)
    qrels = folder / "qrels" / f"{split}.tsv"
    if not qrels.is_file():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        hint = f"; splits here: {', '.join(found)}" if found else "; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv"
        raise DataError(qrels, None, f"file not found{hint}")
    return read_retrieval_set(folder / "corpus.jsonl", folder / "queries.jsonl", qrels)


def write_beir_folder(folder: str | Path, data: RetrievalSet, split: str) -> Path:
    """`data` as a BEIR folder that read_beir_folder(folder, split) reads back: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv."""
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    docs = ({"_id": d.id, "title": d.title, "text": d.text[len(d.title) :].strip() if d.title else d.text} for d in data.corpus)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q.id, "text": q.text}, ensure_ascii=False) + "\n" for q in data.queries), encoding="utf-8")
    rows = [f"{q.id}\t{doc}\t{grade}\n" for q in data.queries for doc, grade in q.relevant.items()]
    (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(rows), encoding="utf-8")
    return folder
