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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sentune.data.text_files import DataError, Source, json_object, normalise, read_lines


@dataclass(frozen=True)
class Document:
    id: str
    text: str  # what is encoded: title + " " + body (the body alone when there is no title)
    source: Source
    title: str = ""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    source: Source
    relevant: dict[str, int] = field(default_factory=dict, compare=False, hash=False)  # document id -> grade > 0


@dataclass(frozen=True)
class RetrievalSet:
    """Queries (each with its relevant documents) against one corpus."""

    queries: list[Query]
    corpus: list[Document]

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


def read_queries(path: str | Path) -> list[Query]:
    """queries.jsonl (`_id`, `text`), or a `.tsv`/`.txt` file of `id<TAB>text` lines; ids must be unique."""
    path = Path(path)
    rows: list[tuple[int, str, str]] = []
    if path.suffix in (".tsv", ".txt"):
        for number, line in enumerate(read_lines(path), start=1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise DataError(path, number, f"malformed row: expected `id<TAB>query` (2 tab-separated fields), got {len(parts)}")
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
    qrels_path = Path(qrels_path)
    known_docs = {d.id for d in corpus}
    by_query: dict[str, dict[str, int]] = {q.id: {} for q in queries}
    for number, query_id, doc_id, grade in read_qrels(qrels_path):
        if query_id not in by_query:
            raise DataError(qrels_path, number, f"query {query_id!r} is not in the queries file")
        if doc_id not in known_docs:
            raise DataError(qrels_path, number, f"document {doc_id!r} is not in the corpus")
        if grade > 0:
            by_query[query_id][doc_id] = grade
    judged = [Query(q.id, q.text, q.source, by_query[q.id]) for q in queries if by_query[q.id]]
    if not judged:
        raise DataError(qrels_path, None, "no query has a relevant document (score > 0) in the corpus")
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
