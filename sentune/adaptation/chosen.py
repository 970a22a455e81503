"""What a `sentune adapt` run writes of its choice (the last phase, sentune.adaptation.phases): OUT/model, and for a
search run OUT as an index of the chosen system."""

from __future__ import annotations

import logging
from dataclasses import replace

from sentune.adaptation.candidates import Candidate, Plan
from sentune.adaptation.context import Context
from sentune.adaptation.names import UNCHANGED
from sentune.adaptation.search_context import SearchContext, as_search
from sentune.core.progress import say
from sentune.modules.build import save_atomic

logger = logging.getLogger(__name__)


def save_choice(results: dict, candidates: Plan, ctx: Context) -> None:
    """OUT/model: the chosen candidate, loadable with SentenceTransformer(path), its card saying why it was chosen. A
    base model whose pipeline ends by normalising (all-MiniLM-L6-v2) keeps doing so: candidates trained or pooled without
    it get it back (the cosines they were scored on do not change)."""
    chosen = results["choice"]["name"]
    candidate = next(c for c in candidates.all if c.name == chosen)
    card = f"\n\n## Chosen by sentune adapt\n\n{results['choice']['reason']}\n"
    model = candidate.model(ctx)
    if type(list(ctx.base)[-1]).__name__ == "Normalize" and type(list(model)[-1]).__name__ != "Normalize":
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.models import Normalize

        model = SentenceTransformer(modules=[*model, Normalize()], device=str(model.device))
    save_atomic(model, ctx.out / "model", readme_extra=card)
    logger.info("saved the chosen model (%s) to %s", chosen, ctx.out / "model")
    if ctx.inputs.task.search:
        _save_index(candidate, model, as_search(ctx))


def _save_index(candidate: Candidate, model, ctx: SearchContext) -> None:
    """Search: OUT is also an index of the chosen system (sentune.search.build) over every document, its model OUT/model,
    so `sentune search OUT` ranks as the run scored it: the fusion the candidate's record holds, BM25 with the settings
    fitted on the selection queries (the hybrids' and `bm25-fitted`'s, as their records keep them: a resumed run fits
    nothing again), and the documents' passages when the hybrid chose MaxP. A dense system ranks without BM25 (its
    index's serves `sentune search --system bm25`): the fitted settings when known, else the fixed ones, no fit. The dense
    part reuses the vectors the run scored with when it has them (the unchanged model's, or a hybrid's source's)."""
    from sentune.search.build import BuildPlan, build_index

    fused = candidate.fused(ctx)
    fusion, source = fused if fused is not None else (None, candidate.name)
    documents = ctx.retrieval_dev().corpus
    kept = None if source == UNCHANGED else ctx.store.kept_vectors(source)
    vectors = None
    if source == UNCHANGED or kept is not None:
        vectors = (ctx.untuned_table() if kept is None else ctx.table(kept)).of(d.text for d in documents)
    passages = ctx.records[candidate.name].detail.get("passages") if fused is not None else None
    plan = BuildPlan("hybrid" if fusion else "dense", fusion, ctx.lexical.settings(fitted=fusion is not None or ctx.lexical.knows_fit()))
    passage_vectors = None
    if passages is not None and passages["chosen"] == "maxp" and source == UNCHANGED:  # the unchanged model's later windows, as the run scored them
        plan = replace(plan, passages="maxp", stride=passages["stride"])
        passage_vectors = ctx.passages.vectors()[0].passages
    build_index(  # an earlier choice's index stays whole until this one switches in (sentune.search.folder)
        model,
        "model",
        documents,
        ctx.out,
        plan,
        show_progress=ctx.config.show_progress,
        vectors=vectors,
        passage_vectors=passage_vectors,
        shared_folder=True,
        expansion=candidate.expansion(ctx),  # the index ranks as the candidate was scored (sentune.search.expansion)
    )
    say(f"index: {ctx.out} ({plan.system}{', ' + fusion.label if fusion else ''}): sentune search {ctx.out} --query TEXT")
