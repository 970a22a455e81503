"""The selection queries of a search run of `sentune adapt`, each ranked against a pool of the corpus
(sentune.tasks.user_queries.selection_pool: built once from the unchanged model and the fixed BM25, before and apart
from any choice); the confirmation and test queries against the whole corpus. Every score of the run, training's
included, then reads the same pool; a cross-fitted fold's held-out selection queries are ranked against it too."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentune.adaptation.names import UNTUNED_POOLINGS
from sentune.adaptation.text_table import TextRows
from sentune.core.progress import say
from sentune.data.beir import RetrievalSet, read_beir_folder, write_beir_folder
from sentune.tasks.user_queries import SELECT_SPLIT, QueryScorer


@dataclass
class SelectionPool:
    """`folder`: where the pool is recorded as a BEIR folder (OUT/data/dev-select: what the trainings' eval.dev names;
    they receive the pool itself); `cache`: where the run keeps it to read back (a resumed run), in the candidate
    store, so that nothing under OUT/data is read back."""

    folder: Path
    cache: Path
    _pool: RetrievalSet | None = None

    @property
    def pool(self) -> RetrievalSet:
        """The selection queries (split.select's order) against their pool of documents, as make kept it."""
        if self._pool is None:
            raise RuntimeError("the selection pool is made before any candidate runs (SelectionPool.make)")
        return self._pool

    def make(self, ctx: Any) -> None:  # ctx: the run's SearchContext (sentune.adaptation.search_context, which imports this module)
        """Build the pool (or read the one a resumed run kept), and give `ctx` the scorer that ranks the selection
        queries against it; when this call encodes the untuned poolings for the pool, they are kept for the untuned
        candidates in the scorer's order (no second pass)."""
        from sentune.tasks.user_queries import RankedQueries, selection_pool

        dev, split = ctx.task.dev, ctx.inputs.split
        folder = self.cache
        untuned = None  # the untuned poolings of every text, when this call encodes them (the pool reads the model's own)
        if not _kept(folder) and _kept(self.folder):  # a run from before the pool was cached: its record is the pool
            folder = self.folder
        if not _kept(folder):
            texts = ctx.scorer.sentences()  # prepare's scorer: every query against the whole corpus
            untuned = (texts, ctx.scorer.encode(ctx.base, ["model", *UNTUNED_POOLINGS], "scoring the untuned poolings"))
            rows = TextRows(texts)
            select = RetrievalSet([dev.queries[i] for i in split.select], dev.corpus)
            model = untuned[1]["model"]
            lexical = ctx.lexical.ranker().scores([q.text for q in select.queries], [d.id for d in select.corpus])  # BM25's top documents join the pool too
            pool = selection_pool(select, model[rows(q.text for q in select.queries)], model[rows(d.text for d in select.corpus)], lexical=lexical)
            folder.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".pool-") as scratch:
                os.replace(write_beir_folder(Path(scratch) / "pool", pool, SELECT_SPLIT), folder)
        self._pool = pool = read_beir_folder(folder, SELECT_SPLIT)  # as a resumed run reads it: the same texts either way
        if not _kept(self.folder):  # the run's record of it
            with tempfile.TemporaryDirectory(dir=self.folder.parent, prefix=".pool-") as scratch:
                shutil.copytree(folder, Path(scratch) / "pool")
                os.replace(Path(scratch) / "pool", self.folder)
        confirm = RetrievalSet([dev.queries[i] for i in split.confirm], dev.corpus)
        splits = {"dev": [RankedQueries(pool, split.select), RankedQueries(confirm, split.confirm)]}
        if ctx.task.test is not None:
            splits["test"] = [RankedQueries(ctx.task.test, np.arange(ctx.task.test.units))]
        say(f"selection pool: {len(pool.corpus)} of the {len(dev.corpus)} documents for the {len(pool.queries)} selection queries")
        ctx.state.scorer = ctx._scoring(QueryScorer(splits, ctx.config.show_progress))  # the run's state (sentune.adaptation.run_state)
        if untuned is not None:  # the same texts in the pooled scorer's order: the untuned candidates need no second pass
            texts, vectors = untuned
            order = TextRows(texts)(ctx.scorer.sentences())
            ctx._save_untuned({name: array[order] for name, array in vectors.items()})

    def scorer(self, show_progress: bool) -> QueryScorer:
        """Scores the selection queries alone (split 'select') against the pool."""
        return QueryScorer.whole({SELECT_SPLIT: self.pool}, show_progress)

    def held_scorer(self, queries: list) -> QueryScorer:
        """Scores `queries` (held-out selection queries) against the pool, as every selection query is ranked."""
        from sentune.tasks.user_queries import RankedQueries

        return QueryScorer({"held": [RankedQueries(RetrievalSet(queries, self.pool.corpus), np.arange(len(queries)))]})


def _kept(folder: Path) -> bool:
    """Whether `folder` holds a whole pool (its qrels are written last)."""
    return (folder / "qrels" / f"{SELECT_SPLIT}.tsv").is_file()
