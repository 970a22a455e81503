"""Search: pseudo-relevance feedback (sentune.search.prf) as an adapt candidate: each query moved toward its first
results on both sides (Rocchio on the unchanged model's vectors, RM3 on the fitted BM25), fused as the hybrid is, its
weight α chosen on the selection queries alone. It learns nothing, reads no label, and the saved index ranks as it was
scored (the index settings' `expansion`, sentune.search.expansion)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup
from sentune.adaptation.names import HYBRID, UNCHANGED
from sentune.adaptation.records import CandidateRecord
from sentune.core.progress import say
from sentune.search.fusion import Fusion
from sentune.search.prf import Feedback

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context

PRF = "prf"


@dataclass
class FusedWithUnchanged(Candidate):
    """A search candidate planned with the hybrid (a run that asks for `hybrid` has it) that fuses BM25 with the
    unchanged model beyond one convex weight: it stands for the unchanged model, and its saved index is a hybrid whose
    `expansion` (Candidate.expansion) says the rest."""

    phase: ClassVar[str] = "after_race"
    dense: ClassVar[bool] = False
    planned_as: ClassVar[str] = ""

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(cls.planned_as)] if setup.search and HYBRID in setup.methods else []

    def model(self, ctx: Context):
        return ctx.candidate(UNCHANGED).model(ctx)

    def fused(self, ctx: Context) -> tuple[Fusion, str] | None:
        fusion = ctx.records[self.name].fusion
        return None if fusion is None else (fusion, UNCHANGED)


@dataclass
class Prf(FusedWithUnchanged):
    """The hybrid with both sides' queries expanded from their first results."""

    kind: ClassVar[str] = "prf"
    planned_as: ClassVar[str] = PRF

    def describe(self, ctx: Context) -> str:
        return f"pseudo-relevance feedback, {Feedback().label}, fused with the weight chosen on the selection queries"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        import numpy as np

        from sentune.adaptation.search_context import as_search
        from sentune.search.fusion import ALPHAS, QUERY_BLOCK, id_order
        from sentune.search.prf import fuse_rank, in_blocks, prf_scores, unit
        from sentune.tasks.retrieval import DEPTH, HEADLINE, per_query_metrics

        search, feedback = as_search(ctx), Feedback()
        collection = search.retrieval_dev().corpus  # feedback reads the whole collection, as the saved index does
        ids = [d.id for d in collection]
        position, ties = {doc: i for i, doc in enumerate(ids)}, id_order(ids)
        doc_units, table, lexical = unit(search.document_vectors()), search.untuned_table(), search.lexical.hybrid().index

        def read(rows: list[int]) -> list[str]:
            return [collection[i].text for i in rows]

        def scored(queries) -> tuple[np.ndarray, np.ndarray, list]:
            own = [position.get(q.id) for q in queries]
            texts = [q.text for q in queries]
            return (*prf_scores(table.of(texts), doc_units, lexical, texts, read, ties, feedback, own), own)

        queries = search.selection_queries()
        ranked: dict[float, list[list[int]]] = {alpha: [] for alpha in ALPHAS}
        for start in range(0, len(queries), QUERY_BLOCK):  # a block's scores held at once, never every query's
            dense, words, own = scored(queries[start : start + QUERY_BLOCK])
            for alpha in ALPHAS:
                ranked[alpha] += fuse_rank(dense, words, ties, Fusion("convex", alpha), DEPTH, own)[0]
        curve = {alpha: 100 * float(per_query_metrics([[ids[i] for i in row] for row in rows], queries)[HEADLINE].mean()) for alpha, rows in ranked.items()}
        fusion = Fusion("convex", max(curve, key=lambda a: (round(curve[a], 9), -abs(a - 0.5))))  # ties: as the hybrid's
        say(f"    {self.name}: α = {fusion.alpha:g} (selection, whole corpus: {curve[fusion.alpha]:.2f})")

        def ranker(part_queries, corpus) -> list[list[int]]:
            """A part's documents ranked by the fused scores over the whole collection's feedback, as the index serves."""
            columns = np.array([position[d.id] for d in corpus])
            local = {int(c): i for i, c in enumerate(columns)}

            def block(queries) -> list[list[int]]:
                dense_part, words_part, own_all = scored(queries)
                part_own = [None if o is None else local.get(o) for o in own_all]
                return fuse_rank(dense_part[:, columns], words_part[:, columns], ties[columns], fusion, DEPTH, part_own)[0]

            return in_blocks(block, part_queries)

        detail = {
            "setting": f"{feedback.label}; {fusion.label}",
            "feedback": feedback.to_dict(),
            "lexical": search.lexical.settings(fitted=True).label,
            "alpha_curve": [[a, s] for a, s in curve.items()],
            "weight_read_queries": [q.id for q in queries],
        }
        return search.rank_with(ranker), CandidateRecord(self.name, self.kind, source=UNCHANGED, fusion=fusion, detail=detail)

    def expansion(self, ctx: Context) -> dict | None:
        return ctx.records[self.name].detail.get("feedback")
