"""Long documents as passages (sentune.search.passages) for the unchanged model in a search run of `sentune adapt`,
owned by the candidates that rank with them (`hybrid` of the unchanged model, the `unchanged-maxp` baseline) and the
index the run saves: the model's MaxP view of every document (its first window, the untuned vectors; and its later
windows, encoded once and kept in the candidate store), whether MaxP or the first window ranks the selection queries
better, and a ranker by MaxP."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sentune.adaptation.store import CandidateStore
from sentune.adaptation.text_table import EmbeddingTable
from sentune.core.progress import say
from sentune.data.beir import Document, Query


@dataclass
class UnchangedPassages:
    """`untuned`: the unchanged model's vectors of every scored text; `document_vectors`: its first window of each
    document (rows: `documents`); `selection`: the selection queries."""

    base: Any
    documents: list[Document]
    untuned: Callable[[], EmbeddingTable]
    document_vectors: Callable[[], np.ndarray]
    selection: Callable[[], list[Query]]
    store: CandidateStore
    show_progress: bool = False
    runtime: Any = None  # the base model's (sentune.core.runtime)
    _passages: Any = None
    _choice: dict | None = None

    def vectors(self):
        """The unchanged model's MaxP view of every document: its first windows (the untuned vectors) and its later
        windows, encoded once per run; with the index settings' record of them (window, stride, count)."""
        from sentune.core.encode import Encoder
        from sentune.search.passages import PassageVectors, later_windows, window_tokens

        if self._passages is None:
            window = window_tokens(self.base)
            stride = max(1, window // 2)
            texts, owners = later_windows(self.base.tokenizer, [d.text for d in self.documents], window, stride)

            def encode() -> np.ndarray:
                if not texts:
                    return np.zeros((0, self.untuned().vectors.shape[1]), dtype=np.float32)
                return Encoder(self.base, "model", show_progress=self.show_progress, desc="encoding the documents' later windows", runtime=self.runtime).encode(
                    texts
                )

            vectors = self.store.later_windows(f"unchanged-window-{window}-stride-{stride}", len(texts), encode)
            self._passages = (
                PassageVectors(self.document_vectors(), vectors, owners),
                {"kind": "maxp", "window": window, "stride": stride, "count": len(texts)},
            )
        return self._passages

    @property
    def ready(self) -> bool:
        """The later windows are encoded already in this run (ranking with them costs nothing more)."""
        return self._passages is not None

    def later_window_count(self) -> int:
        """How many later windows the unchanged model's MaxP encodes (tokenizing only)."""
        from sentune.search.passages import later_windows, window_tokens

        window = window_tokens(self.base)
        return len(later_windows(self.base.tokenizer, [d.text for d in self.documents], window, max(1, window // 2))[0])

    def choose(self) -> dict:
        """The unchanged model's documents as their first window or by their best passage (MaxP), whichever ranks the
        selection queries better against the whole corpus (a tie: the first window); the record names the queries read."""
        from sentune.search.fusion import id_order, top_by_score
        from sentune.search.passages import dense_scores
        from sentune.tasks.retrieval import DEPTH, HEADLINE, per_query_metrics

        if self._choice is None:
            maxp, record = self.vectors()
            queries = self.selection()
            query_vectors = self.untuned().of(q.text for q in queries)
            ids = [d.id for d in self.documents]
            position = {doc: i for i, doc in enumerate(ids)}
            own = [position.get(q.id) for q in queries]

            def score(vectors) -> float:
                ranked = top_by_score(dense_scores(query_vectors, vectors), id_order(ids), DEPTH, exclude=own)
                return 100 * float(per_query_metrics([[ids[i] for i in r] for r in ranked], queries)[HEADLINE].mean())

            first, best = score(maxp.documents), score(maxp)
            chosen = "maxp" if round(best, 9) > round(first, 9) else "first"
            self._choice = record | {"chosen": chosen, "first_score": first, "maxp_score": best, "read_queries": [q.id for q in queries]}
            say(
                f"documents by their best passage (MaxP) or their first window: {chosen} (selection, whole corpus: first {first:.2f}, MaxP {best:.2f})",
            )
        return self._choice

    def ranker(self):
        """Rank by the unchanged model's MaxP scores (a query's own document left out)."""
        from sentune.search.fusion import id_order, top_by_score
        from sentune.search.passages import dense_scores
        from sentune.tasks.retrieval import DEPTH

        maxp = self.vectors()[0]
        untuned = self.untuned()
        position = {d.id: i for i, d in enumerate(self.documents)}

        def ranked(queries, corpus) -> list[list[int]]:
            ids = [d.id for d in corpus]
            own = {doc: i for i, doc in enumerate(ids)}
            scores = dense_scores(untuned.of(q.text for q in queries), maxp.subset([position[d] for d in ids]))
            return top_by_score(scores, id_order(ids), DEPTH, exclude=[own.get(q.id) for q in queries])

        return ranked
