"""Search: BM25 fused with the query-side candidate (`hybrid-query-side`): its shipped Router model's query route for
the queries, the unchanged model's vectors for the documents (the query-side model's document route is the unchanged
model: its index's vectors), fused with the fitted BM25 by the hybrid's convex combination of min-max normalised
scores (sentune.search.fusion). A hybrid looks one model's vectors up by text for queries and documents alike; this one
looks the queries up among the query route's vectors and the documents among the unchanged model's.

Judged as its source is. Without --train, each selection query is ranked by the query encoder of the fold that never
trained on it (the vectors query-side's folds kept of their held-out queries, sentune.adaptation.crossfit): its
selection score is out of fold, and so is the weight α, chosen on the selection queries alone, each ranked against the
whole corpus by its fold's vectors (the refit learned every selection query: a weight read from its rankings would
favour the dense side). The confirmation and test queries are ranked by the refit, the model it ships. With --train,
the one model trained on --train's queries ranks them all.

The saved index ranks as it was scored: the Router model (its query route encodes the queries: sentune.search.index),
the unchanged model's document vectors, BM25 with the fitted settings and the fusion (the index settings' `fusion`),
first windows of the documents (the unchanged model's MaxP view is `hybrid`'s)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sentune.adaptation.candidates.base import Candidate, PlanSetup
from sentune.adaptation.candidates.search import Hybrid
from sentune.adaptation.names import HYBRID, QUERY_SIDE
from sentune.adaptation.records import CandidateRecord, standing
from sentune.core.progress import say
from sentune.search.fusion import Fusion

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.text_table import EmbeddingTable
    from sentune.data.beir import Document, Query

HYBRID_QUERY_SIDE = f"{HYBRID}-{QUERY_SIDE}"


@dataclass
class HybridQuerySide(Hybrid):
    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        wanted = setup.search and setup.labels and HYBRID in setup.methods and QUERY_SIDE in setup.methods
        return [cls(HYBRID_QUERY_SIDE, QUERY_SIDE)] if wanted else []

    def describe(self, ctx: Context) -> str:
        return "fusing BM25 with the query-side candidate (its query encoder, the unchanged model's documents), the weight chosen out of fold on the selection queries"

    def expected_seconds(self, ctx: Context, costs) -> float:
        return 0.0  # its source kept its vectors of every query, and each fold's of its held-out queries

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        return tuple(c.name for c in others if c.kind == QUERY_SIDE)

    def depends_on(self, ctx: Context) -> dict:
        return {"fuses": standing(ctx.records.get(QUERY_SIDE))}  # query-side produced again: fused again

    def source(self, ctx: Context) -> str | None:
        record = ctx.records.get(QUERY_SIDE)
        return QUERY_SIDE if record is not None and record.scored else None

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentune.adaptation.candidates.query_side import QuerySide, query_table
        from sentune.adaptation.crossfit import fold_rows
        from sentune.adaptation.search_context import as_search

        search = as_search(ctx)
        if self.source(ctx) is None:
            return {}, self.skip(f"no scored `{QUERY_SIDE}` candidate to fuse")
        record, query_side = ctx.records[QUERY_SIDE], ctx.candidate(QUERY_SIDE)
        assert isinstance(query_side, QuerySide)
        queries, documents, lexical = query_side.query_vectors(ctx), search.untuned_table(), search.lexical.hybrid()
        select, units = ctx.inputs.split.select, ctx.selection_units()
        # each selection query with the vectors of the model that never trained on it: a fold's, or with --train the one model's
        folds: list[tuple[np.ndarray, list[Query], EmbeddingTable]] = []
        for fold in range(len(record.fold_dev_indices_trained_on or [])):
            held = fold_rows(len(units), len(record.fold_dev_indices_trained_on or []), ctx.config.seed, fold)[1]
            vectors = query_side.held_vectors(ctx, fold)
            if vectors is None or len(vectors) != len(held):
                return {}, self.skip(f"{QUERY_SIDE}'s fold {fold} kept no vectors of its held-out queries ({ctx.store.fold_folder(QUERY_SIDE, fold)})")
            fold_units = [units[i] for i in held]
            folds.append((held, fold_units, query_table([q.text for q in fold_units], vectors)))
        groups = [(fold_units, table) for _, fold_units, table in folds] or [(list(units), queries)]
        fusion, curve = choose_alpha(groups, documents, lexical, search.retrieval_dev().corpus)
        say(f"    {self.name}: BM25 + {QUERY_SIDE}, α = {fusion.alpha:g} (selection, out of fold, whole corpus: {curve[fusion.alpha]:.2f})")
        scores = search.rank_with(fused_ranker(queries, documents, lexical, fusion))
        for held, fold_units, table in folds:  # the selection part's scores: out of fold
            scores["dev"][select[held]] = search.selection.held_scorer(fold_units).of_ranker(fused_ranker(table, documents, lexical, fusion))["held"]
        found = CandidateRecord(self.name, self.kind, source=QUERY_SIDE, fusion=fusion, trained_on=record.trained_on)
        found.dev_indices_trained_on, found.fold_dev_indices_trained_on = record.dev_indices_trained_on, record.fold_dev_indices_trained_on
        found.detail = {
            "setting": fusion.label,
            "lexical": search.lexical.settings(fitted=True).label,
            "alpha_curve": [[a, s] for a, s in curve.items()],
            "weight_read_queries": [q.id for group, _ in groups for q in group],
            "weight_from": "out of fold" if folds else "train",
        } | self.depends_on(ctx)
        return scores, found


def fused_ranker(queries: EmbeddingTable, documents: EmbeddingTable, lexical, fusion: Fusion) -> Callable[[list, list], list[list[int]]]:
    """Rank a part's documents by `fusion` of BM25 (`lexical`: a sentune.search.lexical.CollectionRanker over the whole
    collection) and the cosine of the query's vector in `queries` with the document's in `documents` (each looked up by
    text), a block of queries at a time (sentune.search.fusion.hybrid_rank, as the saved index ranks), a query's own
    document left out."""
    from sentune.search.fusion import hybrid_rank
    from sentune.search.prf import in_blocks
    from sentune.tasks.retrieval import DEPTH

    def ranked(part: list[Query], corpus: list[Document]) -> list[list[int]]:
        ids = [d.id for d in corpus]
        document_vectors = documents.of(d.text for d in corpus)

        def block(block_queries: list[Query]) -> list[list[int]]:
            words = lexical.scores([q.text for q in block_queries], ids)
            query_vectors = queries.of(q.text for q in block_queries)
            return hybrid_rank(query_vectors, document_vectors, lambda rows: words[rows], ids, fusion, depth=DEPTH, query_ids=[q.id for q in block_queries])

        return in_blocks(block, part)

    return ranked


def choose_alpha(
    groups: list[tuple[list[Query], EmbeddingTable]], documents: EmbeddingTable, lexical, corpus: list[Document]
) -> tuple[Fusion, dict[float, float]]:
    """The convex weight α (sentune.search.fusion.ALPHAS) best on the queries of every group together, each group's
    queries by its own vectors, each ranked against the whole `corpus`: the mean nDCG@10 ×100 at each α, and the best
    (ties: the α nearer 0.5, as the hybrid's). The cosines and BM25's scores of a block of queries are computed once
    and fused at every α (the numbers hybrid_rank fuses)."""
    from sentune.search.fusion import ALPHAS, QUERY_BLOCK, id_order
    from sentune.search.passages import cosines
    from sentune.search.prf import fuse_rank
    from sentune.tasks.retrieval import DEPTH, HEADLINE, per_query_metrics

    ids = [d.id for d in corpus]
    position, ties = {doc: i for i, doc in enumerate(ids)}, id_order(ids)
    document_vectors = documents.of(d.text for d in corpus)
    ranked: dict[float, list[list[int]]] = {alpha: [] for alpha in ALPHAS}
    every: list[Query] = []
    for queries, table in groups:
        every += queries
        for start in range(0, len(queries), QUERY_BLOCK):
            block = queries[start : start + QUERY_BLOCK]
            dense = cosines(table.of(q.text for q in block), document_vectors)
            words = lexical.scores([q.text for q in block], ids)
            own = [position.get(q.id) for q in block]
            for alpha in ALPHAS:
                ranked[alpha] += fuse_rank(dense, words, ties, Fusion("convex", alpha), DEPTH, own)[0]
    curve = {alpha: 100 * float(per_query_metrics([[ids[i] for i in row] for row in rows], every)[HEADLINE].mean()) for alpha, rows in ranked.items()}
    return Fusion("convex", max(curve, key=lambda a: (round(curve[a], 9), -abs(a - 0.5)))), curve
