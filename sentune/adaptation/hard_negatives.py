"""The supervised search candidate's training rows (sentune.adaptation.candidates.supervised): per query, POSITIVE_DRAWS
of its judged-relevant documents, one a pass (search_rows), and its hard negatives: the best-ranked document over the
whole corpus that is not judged relevant to it (nor the query's own document) under the fixed BM25 and under the
unchanged model. They read the fixed BM25: made apart from any choice."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sentune.adaptation.text_table import EmbeddingTable
from sentune.data.beir import Document, Query

# Passes over the queries a supervised search candidate trains, a judged-relevant document drawn for each query in each
# (the recipe, adapt/mnrl-hard-negatives, trains one pass over these rows). A query judged with 35 documents weighs as
# much as one judged with one: the steps follow the queries, not the judgements (a row per judgement and 4 epochs made
# 1,248 steps on issue 72's biomedical set, 35 judgements a query), and a batch seldom holds a query twice (the copy's
# document one of its in-batch negatives).
POSITIVE_DRAWS = 4


def drawn_positives(query: Query, draws: int, seed: int) -> list[str]:
    """`draws` of the query's judged-relevant document ids, one a pass: its documents in a seeded order, then in another
    (two passes in a row never draw the same one when it has others), so each is drawn before any is drawn again. The
    draws depend on the seed and the query alone, not on the queries trained beside it (a fold's and the refit's
    rows of a query are the same)."""
    relevant = sorted(doc for doc, grade in query.relevant.items() if grade > 0)
    if not relevant:
        return []
    rng = random.Random(f"{seed}\t{query.id}\t{query.text}")  # a str seed: the same on every machine and process
    found: list[str] = []
    while len(found) < draws:
        order = rng.sample(relevant, len(relevant))
        if found and len(order) > 1 and order[0] == found[-1]:
            order[0], order[-1] = order[-1], order[0]
        found.extend(order)
    return found[:draws]


def search_rows(queries: list[Query], texts: dict[str, str], negatives: dict[str, tuple[str, str]], seed: int) -> list[list[tuple[str, ...]]]:
    """Each query's training rows: (query, a drawn relevant document, its two mined negatives), POSITIVE_DRAWS of them
    (none for a query without a relevant document)."""
    return [[(q.text, texts[doc], *negatives[q.id]) for doc in drawn_positives(q, POSITIVE_DRAWS, seed)] for q in queries]


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
