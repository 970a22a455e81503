"""TREC run files, what `sentune search --run` writes and trec_eval, pyserini and ranx read: `qid Q0 docid rank score tag`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sentune.errors import UserError

if TYPE_CHECKING:
    from sentune.data.beir import Query


class Hit(Protocol):  # sentune.search.index.Hit's fields a run line writes (that module imports this one)
    doc_id: str
    score: float


NOT_TREC_SAFE = "holds whitespace, which a TREC run line (qid Q0 docid rank score tag, split at whitespace) cannot carry"


def trec_safe(identifier: str) -> bool:
    """An id a TREC run line carries as one field: not empty, no whitespace (what str.split() splits at)."""
    return identifier.split() == [identifier]


def write_trec_run(path: Path, queries: Sequence[Query], hits: Sequence[Sequence[Hit]], tag: str = "sentune") -> None:
    """TREC's run format, one line a result: `qid Q0 docid rank score tag` (rank from 1), what trec_eval, pyserini and
    ranx read. An id with whitespace is refused, not written as a line of more fields (or encoded into an id the
    judgements do not name)."""
    from sentune.core.results import write_atomic

    for q, row in zip(queries, hits, strict=True):
        for identifier in (q.id, *(h.doc_id for h in row)):
            if not trec_safe(identifier):
                raise UserError(f"{path}: id {identifier!r} {NOT_TREC_SAFE}")
    lines = [f"{q.id} Q0 {h.doc_id} {i} {h.score:.6f} {tag}" for q, row in zip(queries, hits, strict=True) for i, h in enumerate(row, start=1)]
    write_atomic(path, "\n".join(lines) + ("\n" if lines else ""))


def read_trec_run(path: Path) -> dict[str, list[str]]:
    """A TREC run file (what write_trec_run, trec_eval and pyserini write): each query's documents in the order of the
    rank column, whatever the file's order; a malformed line is one error naming the file and line."""
    rows: dict[str, list[tuple[int, str]]] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6 or not parts[3].isdigit():
            raise UserError(f"{path}:{number}: not a TREC run line (qid Q0 docid rank score tag)")
        rows.setdefault(parts[0], []).append((int(parts[3]), parts[2]))
    return {qid: [doc for _, doc in sorted(ranked)] for qid, ranked in rows.items()}
