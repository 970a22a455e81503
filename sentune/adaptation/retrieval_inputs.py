"""`sentune adapt` on a retrieval set: documents instead of sentences, queries with relevant documents instead
of scored pairs. Read and checked here before any model loads, like the pairs (sentune.adaptation.inputs).

- `--corpus`: the documents, a BEIR corpus.jsonl (`_id`, `title`, `text`); optional when `--dev` is a BEIR folder
  (its corpus.jsonl is used).
- `--dev` / `--test`: a BEIR folder (queries.jsonl, qrels/dev.tsv or qrels/test.tsv), or a queries file (.jsonl, or .tsv
  of `id<TAB>query`) with its judgements in `--dev-qrels` / `--test-qrels`.
- From Python (sentune.api.adapt): the documents as a `Corpus` and each split as a `RetrievalSet`, used as they are.
- The training methods read passages of the documents (sentune.data.passages: whole sentences, at most 64 words);
  every query is ranked against the whole document corpus.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sentune.adaptation.budget import AdaptError
from sentune.data.beir import Corpus, Document, RetrievalSet, attach_qrels, read_corpus_jsonl, read_queries

logger = logging.getLogger(__name__)


def is_retrieval(dev: object, test: object, dev_qrels: Path | None, test_qrels: Path | None) -> bool:
    """Whether the run is a retrieval one: a folder, a .jsonl queries file or a RetrievalSet as --dev/--test, or
    judgements given (pairs are always a tab-separated file or ScoredPairs)."""
    return (
        any(isinstance(p, RetrievalSet) or (isinstance(p, Path) and (p.is_dir() or p.suffix == ".jsonl")) for p in (dev, test))
        or dev_qrels is not None
        or test_qrels is not None
    )


def documents_path(corpus: Path | None, dev: Path | RetrievalSet | None) -> Path:
    if corpus is not None:
        return corpus
    if isinstance(dev, Path) and dev.is_dir():
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
    corpus: Path | Corpus | None, dev: Path | RetrievalSet, test: Path | RetrievalSet | None, dev_qrels: Path | None, test_qrels: Path | None
) -> tuple[list[Document], RetrievalSet, RetrievalSet | None]:
    """The documents and the dev (and test) sets: each given in memory as it is, each given as files read."""
    if isinstance(corpus, Corpus):
        documents = corpus.documents
    elif corpus is None and isinstance(dev, RetrievalSet):
        documents = dev.corpus
    else:
        documents = read_corpus_jsonl(documents_path(corpus, dev))

    def judged(value, qrels: Path | None, split: str) -> RetrievalSet:
        return value if isinstance(value, RetrievalSet) else query_set(value, qrels, documents, split, f"--{split}")

    dev_set = judged(dev, dev_qrels, "dev")
    test_set = judged(test, test_qrels, "test") if test is not None else None
    if test_set is not None:
        shared = {q.text for q in dev_set.queries} & {q.text for q in test_set.queries}
        if shared:
            logger.warning(
                "%d of the %d test queries are also dev queries: the choice has seen them, so their test score does not measure it independently",
                len(shared),
                len(test_set.queries),
            )
    return documents, dev_set, test_set
