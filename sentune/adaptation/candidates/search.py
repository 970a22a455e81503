"""Search-only candidates: BM25 fused with a dense candidate (sentune.search.fusion), and the baselines reported beside
them, BM25 alone and reciprocal rank fusion. They read the search run's state (sentune.adaptation.search_context)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup, best
from sentune.adaptation.candidates.supervised import Supervised
from sentune.adaptation.names import BM25, BM25_FITTED, BM25_UNSTEMMED, HYBRID, RRF, SUPERVISED, SUPERVISED_STACKED, UNCHANGED, UNCHANGED_MAXP
from sentune.adaptation.records import CandidateRecord, standing
from sentune.core.progress import say
from sentune.search.fusion import Fusion

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.time_plan import Costs


@dataclass
class Hybrid(Candidate):
    """Search: BM25 (stemmed, k1, b and the title weight fitted on the selection queries: sentune.search.lexical_fit) and
    a dense candidate (the unchanged model's documents by their best passage when the selection queries favour it
    over their first window: sentune.search.passages, UnchangedPassages.choose) fused by a convex combination of min-max
    normalised scores (sentune.search.fusion), its weight α chosen on the selection queries alone, each ranked against
    the whole corpus. `dense_source`: the unchanged model, or ('best') the dense candidate best on the selection queries
    when it is another (a trained one, say); that one is skipped when the unchanged model is the best. A model trained
    on the selection queries (a supervised candidate without --train) is not among them: its weight and its selection
    score would read the queries it learned, as wise's mix would (Wise.run)."""

    dense_source: str = UNCHANGED
    kind: ClassVar[str] = "hybrid"
    phase: ClassVar[str] = "after_race"
    dense: ClassVar[bool] = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(HYBRID), cls(f"{HYBRID}-best", "best")] if setup.search and HYBRID in setup.methods else []

    def describe(self, ctx: Context) -> str:
        which = "the unchanged model" if self.dense_source == UNCHANGED else "the best dense candidate on the selection queries"
        return f"fusing BM25 with {which}, the weight chosen on the selection queries"

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """BM25 and the weight search rank with vectors the run holds, and the unchanged model's later windows of long
        documents (MaxP); another source than the unchanged model is encoded first (every query and document)."""
        from sentune.adaptation.search_context import as_search

        return costs.encode(as_search(ctx).passages.later_window_count()) if self.dense_source == UNCHANGED else costs.encode(ctx.eval_texts())

    def first_look_seconds(self, ctx: Context, costs: Costs) -> float:
        """Its fusion of the documents' first windows, which the run holds (nothing to encode); the unchanged model's
        later windows (MaxP) are the rest, encoded at its turn when they fit the time left (maxp_left_out)."""
        return 0.0 if self.dense_source == UNCHANGED else self.expected_seconds(ctx, costs)

    def expected_at_turn(self, ctx: Context, costs: Costs) -> tuple[float, float] | None:
        """`hybrid-best` once no candidate still to run could be its source (every dense one kept has been scored; a
        supervised one without --train reads the selection queries and never is): nothing to encode when the unchanged
        model is the best dense candidate (it is skipped: `hybrid` fuses that one), else, as planned, its source's
        encoding of every query and document. Held as planned against those before it, it kept minutes it would never
        spend (quora's default run: query-side left out beside 12.3 min held for it, and it skipped)."""
        if self.dense_source == UNCHANGED:
            return None
        given = ctx.inputs.task.train_units() is not None
        pending = [c for c in ctx.plan.all if c is not self and c.dense and c.eligible and (given or c.kind != Supervised.kind) and c.name not in ctx.records]
        if pending:
            return None
        seconds = 0.0 if self.source(ctx) is None else self.expected_seconds(ctx, costs)
        return seconds, seconds

    def maxp_left_out(self, ctx: Context) -> str | None:
        """Why the later windows are not encoded at its turn (None: they fit, or no time plan judges them): their
        encoding, scaled by how late the run is, past what is left beside the first looks held for the others."""
        from sentune.adaptation.search_context import as_search
        from sentune.adaptation.time_plan import minutes

        timing = ctx.time_plan
        passages = as_search(ctx).passages
        if timing is None or timing.costs is None or passages.ready:
            return None
        expected = timing.costs.encode(passages.later_window_count()) * timing.scale()
        room = timing.left() - timing.held_back(timing.with_followers(self.name))
        if expected <= room:
            return None
        return f"{timing.source}: the later windows of MaxP expected {minutes(expected)}, {minutes(max(room, 0.0))} left: fused on the first windows"

    def depends_on(self, ctx: Context) -> dict:
        if self.dense_source != "best":
            return {}
        # a record made when another was the best (one produced since, by a resumed run that names more, say) is redone
        source = self.source(ctx)
        return {"fuses": standing(None if source is None else ctx.records[source])}

    def source(self, ctx: Context) -> str | None:
        if self.dense_source == UNCHANGED:
            return UNCHANGED
        dense = [
            r
            for r in ctx.records.values()
            if ctx.candidate(r.name).dense and ctx.candidate(r.name).eligible and r.scored and r.stopped is None and not r.read_selection
        ]
        found = best(dense) if dense else None
        return None if found is None or found.name == UNCHANGED else found.name

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentune.adaptation.search_context import as_search

        search = as_search(ctx)
        source = self.source(ctx)
        if source is None:
            return {}, self.skip(f"the unchanged model is the best dense candidate on the selection queries: its hybrid is `{HYBRID}`")
        vectors = ctx.untuned_vectors() if source == UNCHANGED else ctx.vectors_of(ctx.candidate(source).model(ctx), source)
        left_out = self.maxp_left_out(ctx) if source == UNCHANGED else None
        if left_out is not None:
            say(f"    {self.name}: {left_out}")
            ctx.time_plan.reached[self.name] = 0.0  # its first look only: charged as such
        choice = search.passages.choose() if source == UNCHANGED and left_out is None else None  # another source: its first windows
        passages = search.passages.vectors()[0] if choice is not None and choice["chosen"] == "maxp" else None
        fusion, curve, read = search.lexical.choose_fusion_weight(search.table(vectors), passages)
        say(f"    {self.name}: BM25 + {source}, α = {fusion.alpha:g} (selection, whole corpus: {curve[fusion.alpha]:.2f})")
        detail = {
            "setting": fusion.label,
            "lexical": search.lexical.settings(fitted=True).label,
            "lexical_fit": search.lexical.fitted().record(),
            "alpha_curve": [[a, s] for a, s in curve.items()],
            "weight_read_queries": read,
        }
        if choice is not None:
            detail["passages"] = choice
        if left_out is not None:
            detail["maxp_left_out"] = left_out
        return search.rank_with(search.lexical.hybrid_ranker(search.table(vectors), fusion, passages=passages)), CandidateRecord(
            self.name, self.kind, source=source, fusion=fusion, detail=detail
        )

    def model(self, ctx: Context):
        source = ctx.records[self.name].source
        if source is None:
            raise ValueError(f"{self.name} was skipped: it stands for no model")
        return ctx.candidate(source).model(ctx)

    def fused(self, ctx: Context) -> tuple[Fusion, str] | None:
        record = ctx.records[self.name]
        return None if record.fusion is None or record.source is None else (record.fusion, record.source)


@dataclass
class HybridSupervised(Hybrid):
    """Search: BM25 fused with the supervised candidate trained on the selection queries (the best of them by its
    out-of-fold score), which `hybrid-best` leaves out. Its fusion is `hybrid`'s (the weight chosen with the unchanged
    model, which learned no query, and BM25 fitted to the domain; both read every selection query, the held-out folds'
    included, and the weight was chosen for `hybrid`'s dense scores, which may be MaxP's while this one fuses first
    windows); its model's part of the selection score is out of fold like its source's: each held-out fold's queries
    ranked against the selection pool by BM25 fused with the model trained without that fold (sentune.adaptation.crossfit).
    The confirmation and test queries are ranked by the refit model fused the same way. A source trained on --train
    needs none of this: `hybrid-best` fuses it."""

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        wanted = setup.search and setup.labels and HYBRID in setup.methods and {SUPERVISED, SUPERVISED_STACKED} & set(setup.methods)
        return [cls(f"{HYBRID}-{SUPERVISED}")] if wanted else []

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        return 0.0  # its source's vectors, and each fold's of the held-out queries, were kept when it trained

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        return tuple(c.name for c in others if c.kind == "supervised")

    def describe(self, ctx: Context) -> str:
        return "fusing BM25 with the supervised candidate trained on the selection queries, scored out of fold"

    def source(self, ctx: Context) -> str | None:
        trained = [r for r in ctx.records.values() if r.kind == Supervised.kind and r.fold_dev_indices_trained_on and r.scored]
        return best(trained).name if trained else None

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        import numpy as np

        from sentune.adaptation.search_context import as_search
        from sentune.adaptation.text_table import EmbeddingTable, TextRows

        source = self.source(ctx)
        if source is None:
            return {}, self.skip("no supervised candidate trained on the selection queries (one trained on --train: `hybrid-best` fuses it)")
        hybrid = ctx.records.get(HYBRID)  # `hybrid` runs first (the registry's order), unless the time left it out
        if hybrid is None or hybrid.skipped:
            return {}, self.skip(f"`{HYBRID}`, whose fusion weight it fuses with, has no record (left out for time, or skipped)")
        search = as_search(ctx)
        record, fusion = ctx.records[source], hybrid.fusion
        if fusion is None:
            return {}, self.skip(f"`{HYBRID}` chose no fusion weight")
        scores = search.rank_with(search.lexical.hybrid_ranker(search.table(ctx.vectors_of(ctx.candidate(source).model(ctx), source)), fusion))
        dev, select = search.retrieval_dev(), ctx.inputs.split.select
        for fold, trained in enumerate(record.fold_dev_indices_trained_on or []):
            held = np.array(sorted(set(select.tolist()) - set(trained)))
            scorer = search.selection.held_scorer([dev.queries[i] for i in held])
            if not ctx.store.has_held(source, fold, "vectors"):
                return {}, self.skip(f"{source}'s fold {fold} kept no vectors of its held-out queries ({ctx.store.fold_folder(source, fold)})")
            held_table = EmbeddingTable(TextRows(scorer.sentences()), ctx.store.held(source, fold, "vectors"))
            scores["dev"][held] = scorer.of_ranker(search.lexical.hybrid_ranker(held_table, fusion))["held"]
        say(f"    {self.name}: BM25 + {source}, α = {fusion.alpha:g} (hybrid's), selection out of fold")
        found = CandidateRecord(self.name, self.kind, source=source, fusion=fusion, trained_on=record.trained_on)
        found.dev_indices_trained_on = record.dev_indices_trained_on
        found.detail = {"setting": fusion.label, "lexical": search.lexical.settings(fitted=True).label, "weight_from": HYBRID}
        return scores, found


@dataclass
class SearchBaseline(Candidate):
    """A search system reported beside the candidates and never chosen, ranking with BM25 (alone or fused)."""

    kind: ClassVar[str] = "baseline"
    phase: ClassVar[str] = "after_race"
    eligible: ClassVar[bool] = False
    dense: ClassVar[bool] = False


@dataclass
class Lexical(SearchBaseline):
    """Search: BM25 alone over the documents, the lexical baseline search is measured against (stemmed as BEIR runs it;
    the unstemmed variant beside it, and the one whose k1, b and title weight are fitted on the selection queries, the
    BM25 the hybrids fuse), reported and never chosen (it is not an encoder; the hybrid covers it at α = 0)."""

    stemmed: bool = True
    fitted: bool = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(BM25), cls(BM25_UNSTEMMED, stemmed=False), cls(BM25_FITTED, fitted=True)] if setup.search else []

    def describe(self, ctx: Context) -> str:
        from sentune.adaptation.search_context import as_search

        if self.fitted:
            return "ranking the documents by BM25 with k1, b and the title weight fitted on the selection queries (reported, never chosen)"
        return f"ranking the documents by {as_search(ctx).lexical.settings(self.stemmed).label} (reported, never chosen)"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentune.adaptation.search_context import as_search

        search = as_search(ctx)
        scores = search.rank_with(search.lexical.ranker(self.stemmed, self.fitted))
        detail: dict = {"setting": search.lexical.settings(self.stemmed, self.fitted).label}
        if self.fitted:
            detail["lexical_fit"] = search.lexical.fitted().record()
        return scores, CandidateRecord(self.name, self.kind, detail=detail)


@dataclass
class UnchangedMaxp(SearchBaseline):
    """Search: the unchanged model with each document scored by its best passage (MaxP, sentune.search.passages),
    reported beside the unchanged model's first window and never chosen (the hybrid fuses it when the selection
    queries favour it)."""

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(UNCHANGED_MAXP)] if setup.search and HYBRID in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return "ranking the documents by the unchanged model's best passage (MaxP; reported, never chosen)"

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        """`hybrid` (planned with it, run before it) encodes the later windows it reads: it costs nothing more."""
        return (HYBRID,)

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentune.adaptation.search_context import as_search

        hybrid = ctx.records.get(HYBRID)
        if hybrid is not None and hybrid.detail.get("maxp_left_out"):
            return {}, self.skip(f"reported with {HYBRID}'s later windows, which it did not encode ({hybrid.detail['maxp_left_out']})")
        search = as_search(ctx)
        choice = search.passages.choose()
        detail = {"setting": f"MaxP, windows of {choice['window']} tokens every {choice['stride']}", "passages": choice}
        return search.rank_with(search.passages.ranker()), CandidateRecord(self.name, self.kind, detail=detail)


@dataclass
class Rrf(SearchBaseline):
    """Search: reciprocal rank fusion of BM25 (the hybrid's, fitted) and the unchanged model (k = 60), the fusion most
    search engines offer first; reported beside the convex hybrid, never a candidate, and a reference: kept when it is
    stronger than the unchanged model on the selection queries and no candidate is confirmed against it."""

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(RRF)] if setup.search and HYBRID in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return "fusing BM25 with the unchanged model by reciprocal rank fusion (a reference: kept when stronger and no candidate beats it)"

    def model(self, ctx: Context):
        return ctx.candidate(UNCHANGED).model(ctx)

    def fused(self, ctx: Context) -> tuple[Fusion, str] | None:
        """Kept as the search reference (sentune.adaptation.decide), it ranks as it was scored: BM25 fused with the unchanged model."""
        return Fusion("rrf"), UNCHANGED

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentune.adaptation.search_context import as_search

        search, fusion = as_search(ctx), Fusion("rrf")
        scores = search.rank_with(search.lexical.hybrid_ranker(search.untuned_table(), fusion))
        return scores, CandidateRecord(self.name, self.kind, fusion=fusion, detail={"setting": fusion.label})
