"""`sentune adapt` on a retrieval set: documents instead of sentences, queries with relevant documents instead
of scored pairs. Read and checked here before any model loads, like the pairs (sentune.adapt.inputs).

- `--corpus`: the documents, a BEIR corpus.jsonl (`_id`, `title`, `text`); optional when `--dev` is a BEIR folder
  (its corpus.jsonl is used).
- `--dev` / `--test`: a BEIR folder (queries.jsonl, qrels/dev.tsv or qrels/test.tsv), or a queries file (.jsonl, or .tsv
  of `id<TAB>query`) with its judgements in `--dev-qrels` / `--test-qrels`.
- The training methods read passages of the documents (sentune.data.passages: whole sentences, at most 64 words);
  every query is ranked against the whole document corpus.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sentune.adapt.budget import AdaptError
from sentune.data.beir import Document, RetrievalSet, attach_qrels, read_corpus_jsonl, read_queries

logger = logging.getLogger(__name__)


def is_retrieval(dev: Path | None, test: Path | None, dev_qrels: Path | None, test_qrels: Path | None) -> bool:
    """Whether the run is a retrieval one: a folder or a .jsonl queries file as --dev/--test, or judgements given (pairs
    are always a tab-separated file)."""
    return any(p is not None and (p.is_dir() or p.suffix == ".jsonl") for p in (dev, test)) or dev_qrels is not None or test_qrels is not None


def documents_path(corpus: Path | None, dev: Path | None) -> Path:
    if corpus is not None:
        return corpus
    if dev is not None and dev.is_dir():
        return dev / "corpus.jsonl"
    raise AdaptError("--corpus FILE (the documents, a BEIR corpus.jsonl) is required unless --dev is a BEIR folder holding corpus.jsonl")


def query_set(path: Path, qrels: Path | None, documents: list[Document], split: str, option: str) -> RetrievalSet:
    """The queries of `path` (a BEIR folder, or a queries file with `qrels`) that have a relevant document, against every document."""
    if path.is_dir():
        queries, qrels = path / "queries.jsonl", qrels or path / "qrels" / f"{split}.tsv"
        if not qrels.is_file():
            found = sorted(p.name for p in (path / "qrels").glob("*.tsv")) if (path / "qrels").is_dir() else []
            raise AdaptError(
                f"{option} {path}: no qrels/{split}.tsv"
                + (f" (it has {', '.join(found)})" if found else "")
                + f"; name the judgements with {option}-qrels FILE"
            )
    else:
        queries = path
        if qrels is None:
            raise AdaptError(f"{option} {path}: a queries file needs its judgements: {option}-qrels FILE (query-id<TAB>corpus-id<TAB>score)")
    return RetrievalSet(attach_qrels(read_queries(queries), documents, qrels), documents)


def read_retrieval_inputs(
    corpus: Path | None, dev: Path, test: Path | None, dev_qrels: Path | None, test_qrels: Path | None
) -> tuple[list[Document], RetrievalSet, RetrievalSet | None]:
    documents = read_corpus_jsonl(documents_path(corpus, dev))
    dev_set = query_set(dev, dev_qrels, documents, "dev", "--dev")
    test_set = query_set(test, test_qrels, documents, "test", "--test") if test is not None else None
    if test_set is not None:
        shared = {q.text for q in dev_set.queries} & {q.text for q in test_set.queries}
        if shared:
            logger.warning(
                "%d of the %d test queries are also dev queries: the choice has seen them, so their test score does not measure it independently",
                len(shared),
                len(test_set.queries),
            )
    return documents, dev_set, test_set
