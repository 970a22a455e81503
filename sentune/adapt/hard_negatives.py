"""Hard negatives for the supervised search candidate of `sentune adapt` (sentune.adapt.candidates.supervised): per
query, the best-ranked document over the whole corpus that is not judged relevant to it (nor the query's own document)
under the fixed BM25 and under the unchanged model. They read the fixed BM25: made apart from any choice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sentune.adapt.text_table import EmbeddingTable
from sentune.data.beir import Document, Query


@dataclass
class HardNegatives:
    """`untuned`: the unchanged model's vectors of every scored text; `document_vectors`: of each document (rows:
    `documents`); `lexical`: the fixed BM25's ranker over them."""

    base: Any
    documents: list[Document]
    untuned: Callable[[], EmbeddingTable]
    document_vectors: Callable[[], np.ndarray]
    lexical: Callable[[], Any]
    _mined: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (query id, text) -> its mined pair

    def of(self, queries: list[Query]) -> dict[str, tuple[str, str]]:
        """Per query: its (BM25, dense) hard negatives as texts. A query's pair does not depend on the queries mined
        with it: each is mined once per run, whichever folds and refit ask for it."""
        todo = list({(q.id, q.text): q for q in queries if (q.id, q.text) not in self._mined}.values())
        if todo:
            mined = self._mine(todo)
            self._mined.update({(q.id, q.text): mined[q.id] for q in todo})
        return {q.id: self._mined[(q.id, q.text)] for q in queries}

    def _mine(self, queries: list[Query]) -> dict[str, tuple[str, str]]:
        from sentune.core.encode import Encoder
        from sentune.search.fusion import id_order, top_by_score
        from sentune.tasks.retrieval import rank

        documents = self.documents
        ids = [d.id for d in documents]
        texts = [q.text for q in queries]
        known = self.untuned()
        missing = [t for t in texts if known.rows.get(t) is None]  # --train's queries: not among the scored texts
        extra = Encoder(self.base, "model", show_progress=False).encode(missing) if missing else None
        query_vectors = np.stack([extra[missing.index(t)] if t in missing else known.of([t])[0] for t in texts])  # type: ignore[index]
        depth = max(len(q.relevant) for q in queries) + 2
        dense = rank(query_vectors, self.document_vectors(), ids, depth=depth)
        lexical = top_by_score(self.lexical().scores(texts, ids), id_order(ids), depth)
        found = {}
        for q, by_dense, by_bm25 in zip(queries, dense, lexical, strict=True):
            first = lambda ranked: next(documents[i].text for i in ranked if ids[i] not in q.relevant and ids[i] != q.id)  # noqa: E731,B023
            found[q.id] = (first(by_bm25), first(by_dense))
        return found
