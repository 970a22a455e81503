"""BM25 in a search run of `sentune adapt`, for the candidates that rank with it (the BM25 baselines, the hybrids, RRF,
hybrid-distill's teacher, the negatives mined for supervised training): BM25 over the whole document collection, fixed
and fitted to the domain on the selection queries (sentune.search.lexical_fit), rankers fused from the fitted one and
a dense candidate's vectors (sentune.search.fusion), and the convex weight chosen on the selection queries. Each BM25
index is built once per settings: when the fit keeps the fixed settings, the fitted BM25 is the fixed one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sentune.adaptation.text_table import EmbeddingTable
from sentune.core.progress import say
from sentune.data.beir import Document, Query
from sentune.search.fusion import Fusion


@dataclass
class LexicalService:
    """`documents`: every document, in the order rankers return; `selection`: the selection queries (called only when
    the fit needs them: nothing else of the dev queries is read); `records`: the run's records so far (a resumed run
    reads the fit one keeps)."""

    documents: list[Document]
    selection: Callable[[], list[Query]]
    records: dict[str, Any]
    show_progress: bool = False
    _built: dict[Any, Any] = field(default_factory=dict)  # LexicalSettings -> its CollectionRanker
    _fit: Any = None

    def settings(self, stemmed: bool = True, fitted: bool = False):
        from sentune.search.lexical import LexicalSettings

        if fitted:
            return self.fitted().settings
        return LexicalSettings() if stemmed else LexicalSettings(stemmer=None)

    def fitted(self):
        """BM25's k1, b and title weight fitted on the selection queries alone, each ranked against the whole corpus
        (sentune.search.lexical_fit), once per run: a resumed run reads the fit a record keeps (recorded_fit). The
        fit's `read` names the queries it scored."""
        from sentune.search.lexical_fit import fit_lexical

        if self._fit is None:
            found = self.recorded_fit()
            if found is None:
                found = fit_lexical(self.documents, self.selection(), self.settings())
                say(f"BM25 fitted on the selection queries: {found.settings.label}")
                if found.index is not None:  # the fit's best index is the fitted BM25: no second build
                    self._built.setdefault(found.settings, self._ranker(found.index))
            self._fit = replace(found, index=None)  # the cache holds the index (or an equal one)
        return self._fit

    def recorded_fit(self):
        """The fit a record of this run keeps (`hybrid`'s, `bm25-fitted`'s: detail["lexical_fit"]), when it read these
        selection queries from these fixed settings; else None."""
        from sentune.search.lexical_fit import LexicalFit

        fixed = self.settings()
        selection = [q.id for q in self.selection()]
        for record in self.records.values():
            saved = record.detail.get("lexical_fit")
            if saved and saved.get("fixed") == fixed.label and saved.get("read_queries") == selection:
                return LexicalFit.from_record(saved, fixed)
        return None

    def knows_fit(self) -> bool:
        """Whether the fitted settings are known without a fit: fitted in this process, or kept by a record."""
        return self._fit is not None or self.recorded_fit() is not None

    def ranker(self, stemmed: bool = True, fitted: bool = False):
        """BM25 over every document (built once per settings; sentune.search.lexical.CollectionRanker): a part ranking
        a subset of them reads the collection's statistics. `fitted`: with the settings fitted on the selection queries."""
        from sentune.search.lexical import LexicalIndex

        settings = self.settings(stemmed, fitted)
        if settings not in self._built:
            self._built[settings] = self._ranker(LexicalIndex.of_documents(self.documents, settings, show_progress=self.show_progress))
        return self._built[settings]

    def hybrid(self):
        """The BM25 the hybrids fuse, and their weights are chosen with: fitted on the selection queries."""
        return self.ranker(fitted=True)

    def _ranker(self, index):
        from sentune.search.lexical import CollectionRanker
        from sentune.tasks.retrieval import DEPTH

        return CollectionRanker(index, [d.id for d in self.documents], DEPTH)

    def hybrid_ranker(self, table: EmbeddingTable, fusion: Fusion, passages=None):
        """Rank by `fusion` of BM25 (fitted on the selection queries) and the cosine of `table`'s vectors; with
        `passages` (sentune.search.passages.PassageVectors of every document, the queries still the table's), each
        document's best passage's cosine instead."""
        from sentune.search.fusion import hybrid_rank
        from sentune.tasks.retrieval import DEPTH

        position = {d.id: i for i, d in enumerate(self.documents)}

        def fused(queries, corpus) -> list[list[int]]:
            ids = [d.id for d in corpus]
            lexical = self.hybrid().scores([q.text for q in queries], ids)
            query_vectors = table.of(q.text for q in queries)
            doc_vectors = table.of(d.text for d in corpus) if passages is None else passages.subset([position[d] for d in ids])
            return hybrid_rank(query_vectors, doc_vectors, lambda rows: lexical[rows], ids, fusion, depth=DEPTH, query_ids=[q.id for q in queries])

        return fused

    def choose_fusion_weight(self, table: EmbeddingTable, passages=None) -> tuple[Fusion, dict[float, float], list[str]]:
        """The convex fusion whose weight α is best on the selection queries, each ranked against the whole corpus (not
        the pool: the normalisation reads every document's score, as it will when the system serves); ties: the α
        nearer 0.5. Only the selection queries are read: their ids are returned with the fusion and the α curve, and
        the record keeps them."""
        from sentune.search.fusion import ALPHAS
        from sentune.tasks.retrieval import HEADLINE, per_query_metrics

        queries = self.selection()
        curve = {}
        for alpha in ALPHAS:
            ranked = self.hybrid_ranker(table, Fusion("convex", alpha), passages=passages)(queries, self.documents)
            curve[alpha] = 100 * float(per_query_metrics([[self.documents[i].id for i in r] for r in ranked], queries)[HEADLINE].mean())
        best = max(curve, key=lambda a: (round(curve[a], 9), -abs(a - 0.5)))
        return Fusion("convex", best), curve, [q.id for q in queries]
