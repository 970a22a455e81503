"""The Context of a search run (sentune.adaptation.context): the selection queries ranked against their pool of documents,
and the parts only search candidates read, each owned by the kinds that use it:

- `selection`: the selection pool (sentune.adaptation.selection_pool), made before any candidate;
- `lexical`: BM25, fixed and fitted on the selection queries, and the hybrid rankers and their fusion weight
  (sentune.adaptation.lexical_service): the BM25 baselines, the hybrids, RRF, hybrid-distill;
- `passages`: the unchanged model's MaxP view of long documents (sentune.adaptation.unchanged_passages): `hybrid` of the
  unchanged model, `unchanged-maxp`, the saved index;
- `negatives`: hard negatives for the supervised candidate (sentune.adaptation.hard_negatives);
- the text-keyed tables of vectors they rank with (sentune.adaptation.text_table): one lookup of the scored texts' rows
  per scorer, shared by the untuned vectors and every candidate's."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sentune.adaptation.context import Context, Part
from sentune.adaptation.hard_negatives import HardNegatives
from sentune.adaptation.inputs import SearchTask
from sentune.adaptation.lexical_service import LexicalService
from sentune.adaptation.selection_pool import SelectionPool
from sentune.adaptation.text_table import EmbeddingTable, TextRows
from sentune.adaptation.unchanged_passages import UnchangedPassages
from sentune.data.beir import Query, RetrievalSet
from sentune.tasks.user_queries import QueryScorer

POOL_CACHE = ".selection-pool"  # the selection pool as the candidate store keeps it (OUT/data/dev-select records it)


@dataclass(frozen=True)
class SearchContext(Context):
    """A run on queries: the services search candidates read, each built once, when first read."""

    @property
    def task(self) -> SearchTask:
        task = self.inputs.task
        assert isinstance(task, SearchTask)
        return task

    scorer = Part[QueryScorer]("state")  # a search run's state holds a QueryScorer (sentune.adaptation.context.context_of)

    @cached_property
    def selection(self) -> SelectionPool:
        return SelectionPool(self.out / "data" / "dev-select", self.store.cache_folder(POOL_CACHE))

    @cached_property
    def lexical(self) -> LexicalService:
        return LexicalService(self.task.dev.corpus, self.selection_queries, self.records, self.config.show_progress)

    @cached_property
    def passages(self) -> UnchangedPassages:
        documents = self.task.dev.corpus
        return UnchangedPassages(
            self.base, documents, self.untuned_table, self.document_vectors, self.selection_queries, self.store, self.config.show_progress, self.runtime
        )

    @cached_property
    def negatives(self) -> HardNegatives:
        return HardNegatives(self.base, self.task.dev.corpus, self.untuned_table, self.document_vectors, self.lexical.ranker)

    @cached_property
    def _rows_by_scorer(self) -> dict[int, tuple[QueryScorer, TextRows]]:
        """The rows of scorer.sentences(), for the scorer they were built from (a cache, not the run's state)."""
        return {}

    # -- the selection queries, each ranked against their pool --
    def selection_folder(self):
        """The selection queries and their pool as a BEIR folder, the record every training's eval.dev names."""
        return self.selection.folder

    def prepare_selection(self) -> None:
        self.selection.make(self)

    @property
    def pool(self) -> RetrievalSet:
        return self.selection.pool

    def selection_units(self) -> list:
        return self.pool.queries

    def selection_queries(self) -> list[Query]:
        """The selection queries in split.select's order, each against the whole corpus (nothing else of the dev
        queries is read)."""
        return [self.task.dev.queries[i] for i in self.inputs.split.select]

    def selection_scorer(self) -> QueryScorer:
        return self._scoring(self.selection.scorer(self.config.show_progress))

    def training_dev(self) -> dict:
        return self.pool.describe(self.selection_folder())

    def training_dev_data(self) -> RetrievalSet:
        return self.pool

    # -- vectors by text --
    def rows(self) -> TextRows:
        """Each scored text's row (scorer.sentences()), built once per scorer."""
        found = self._rows_by_scorer.get(id(self.scorer))
        if found is None or found[0] is not self.scorer:
            found = self._rows_by_scorer[id(self.scorer)] = (self.scorer, TextRows(self.scorer.sentences()))
        return found[1]

    def table(self, vectors: np.ndarray) -> EmbeddingTable:
        """Vectors of every scored text (rows: scorer.sentences()), looked up by text."""
        return EmbeddingTable(self.rows(), vectors)

    def untuned_table(self) -> EmbeddingTable:
        return self.table(self.untuned_vectors())

    def corpus_to_encode(self) -> int:
        return 0 if self._documents_rows() is not None else super().corpus_to_encode()

    def corpus_vectors(self) -> np.ndarray:
        """The post-processors are fitted on the documents as they are ranked: their vectors under the model's own
        pipeline, which the untuned encoding of every dev and test text already holds (no second pass over passages)."""
        return self.document_vectors() if self._documents_rows() is not None else super().corpus_vectors()

    def document_vectors(self) -> np.ndarray:
        """Every document's vector under the model's own pipeline (rows: retrieval_dev().corpus), from the untuned pass."""
        rows = self._documents_rows()
        if rows is None:
            raise RuntimeError("every document is scored (the confirmation queries rank the whole corpus)")
        return self.untuned_vectors()[rows]

    def _documents_rows(self) -> list[int] | None:
        """Each document's row in the untuned vectors (scorer.sentences()); None when some document is not scored."""
        rows = [self.rows().get(d.text) for d in self.task.dev.corpus]
        return None if any(r is None for r in rows) else rows  # type: ignore[return-value]

    # -- ranking --
    def retrieval_dev(self) -> RetrievalSet:
        return self.task.dev

    def rank_with(self, ranker) -> dict[str, np.ndarray]:
        """Every split's per-query nDCG@10 ×100 under a ranker of documents (a system that is not one cosine)."""
        return self.scorer.of_ranker(ranker)


def as_search(ctx: Context) -> SearchContext:
    """The search state of a run's context (sentune.adaptation.run makes a SearchContext for a search run, and search
    candidates are planned for search runs only)."""
    if not isinstance(ctx, SearchContext):
        raise TypeError("a search candidate in a run on pairs")
    return ctx
