"""`sentune adapt`: try every candidate on the user's corpus, score each on the dev (and test) pairs, and keep the
unchanged model unless the candidate best on the selection half of the dev pairs is confirmed better on the other half
(sentune.adaptation.decide: every choice reads the selection half only, so the confirmation is a calibrated test).

Output folder:
  adapt.json              the settings (model, data hashes, budget); a resume with other settings is refused
  data/                   corpus.txt (de-duplicated), dev.tsv, test.tsv: exactly what was used; dev-select.tsv (a
                          search run: dev-select/, with its pool): the selection half, the only dev units training
                          evaluates on. A record of the run: it hands these to its candidates as objects and reads
                          nothing back from here
  candidates/NAME/        one per candidate: candidate.json (its record, written last: marks it done), scores.npz (the
                          cosine of every dev and test pair), run/ (a trained candidate's run folder) or model/ (a
                          post-processed or interpolated one); candidates/ also keeps what a resumed run reads instead
                          of encoding again (sentune.adaptation.store)
  model/                  the chosen model (SentenceTransformer(path) loads it)
  results.json/.md, report.html and its plots

A killed run continues where it stopped: finished candidates are read back, a training candidate resumes from its last
checkpoint. Test pairs are scored for every candidate but never reach the choice.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sentune.adaptation.candidates import Candidate, Plan, own_pooling, plan
from sentune.adaptation.candidates.supervised import Supervised
from sentune.adaptation.context import Context, PairsContext
from sentune.adaptation.inputs import AdaptConfig, Inputs, prepare
from sentune.adaptation.names import UNCHANGED
from sentune.adaptation.records import load_record
from sentune.adaptation.search_context import SearchContext, as_search
from sentune.adaptation.train_evidence import draw_evidence, say_detectable_gain
from sentune.core.memory import map_large_allocations
from sentune.core.models import load_model
from sentune.core.progress import say
from sentune.modules.build import save_atomic

if TYPE_CHECKING:
    from sentune.adaptation.time_plan import TimePlan

logger = logging.getLogger(__name__)
SUPERVISED_KIND = Supervised.kind  # its members race in a phase of their own (_race_supervised)


def _warn_overlong(inputs: Inputs, base) -> None:
    """Sentences longer than the model reads are truncated (as every encoder does): say so, naming the first."""
    from sentune.core.encode import overlong_indices

    limit, task = base.max_seq_length, inputs.task
    corpus = overlong_indices(inputs.corpus, base)
    if corpus:
        first = inputs.corpus[corpus[0]]
        logger.warning(
            "%d of the %d corpus sentences are longer than the model's %d tokens and are read only up to there (the first: %r%s)",
            len(corpus),
            len(inputs.corpus),
            limit,
            first[:60],
            "..." if len(first) > 60 else "",
        )
    if task.search:
        long = overlong_indices([d.text for d in task.documents], base)
        if long:
            logger.info(
                "%d of the %d documents are longer than the model's %d tokens: their first %d are ranked, as BEIR does",
                len(long),
                len(task.documents),
                limit,
                limit,
            )
        return
    for name, pairs in (("dev", task.dev), ("test", task.test)):
        if pairs is None:
            continue
        sentences = [s for p in pairs.pairs for s in (p.a, p.b)]
        hits = sorted({i // 2 for i in overlong_indices(sentences, base)})
        if hits:
            source = pairs.pairs[hits[0]].source
            logger.warning(
                "%d of the %d %s pairs have a sentence longer than the model's %d tokens, read only up to there (the first: %s:%s)",
                len(hits),
                len(pairs.pairs),
                name,
                limit,
                source.path,
                source.line,
            )


def adapt(
    config: AdaptConfig, out: Path, *, data_dir: Path | None, command: str | None = None, inputs: Inputs | None = None, started: float | None = None
) -> dict:
    """Run (or resume) every candidate, choose, save the chosen model and the results; returns results.json's content.
    `inputs`: what sentune.adaptation.inputs.prepare returned (the CLI prepares before importing this module); `started`:
    when the command started (time.monotonic(); what --time counts from; default now)."""
    from sentune.adaptation.report import write_results
    from sentune.adaptation.select import select

    started = time.monotonic() if started is None else started
    if inputs is None:
        inputs = prepare(config, out, data_dir)  # creates `out` only once every input is checked
    if config.low_memory:
        map_large_allocations()  # freed activations go back to the system within a training step (sentune.core.memory)
    base = load_model(config.model, device=config.device)
    own = own_pooling(base)
    config = replace(config, training_pooling=own or "model")
    task = inputs.task
    candidates = plan(config.methods, own, config.reference, generated_queries=config.queries_from is not None, search=task.search, labels=config.labels)
    if config.methods is None:
        say("tsdae only when --methods names it (behind the unchanged model at the race's first round in every example run)")
    if config.methods is None and task.search:
        from sentune.adaptation.names import SEARCH_OPT_IN

        say(
            f"search run: {', '.join(SEARCH_OPT_IN)} only when --methods names them (sentence-pair trainings, each behind "
            "the unchanged model on SciFact's selection queries, with minutes of pool encodings per evaluation)",
        )
    ctx: Context
    if task.search:  # the one place a run's context is made: what search candidates read is SearchContext's
        ctx = SearchContext(config, inputs, out, data_dir, base, task.scorer(config.show_progress), plan=candidates, task=task)
    else:
        ctx = PairsContext(config, inputs, out, data_dir, base, task.scorer(config.show_progress), plan=candidates, task=task)
    _warn_overlong(inputs, base)
    _leave_out_untrainable(candidates, ctx)
    ctx.prepare_selection()
    say(
        f"sentune adapt: {len(candidates.all)} candidates for {config.model} on {len(inputs.corpus)} corpus "
        + (f"passages of {len(task.documents)} documents; " if task.search else "sentences; ")
        + f"dev {inputs.dev_label} ({inputs.dev.units} {inputs.dev.unit}, {inputs.dev.metric}: {len(inputs.split.select)} select, "
        f"{len(inputs.split.confirm)} confirm); " + (f"test {inputs.test_label} ({inputs.test.units} {inputs.test.unit})" if inputs.test else "no test set"),
    )
    ctx.evidence = draw_evidence(ctx)  # before any candidate: the supervised ones leave its confirmation pairs out
    say_detectable_gain(ctx)
    ctx.time_plan = _plan_time(candidates, ctx, started)  # without --time, for its default (time_plan.DEFAULT_TIME)
    total = len(candidates.all)
    for index, candidate in enumerate(list(candidates.before_race), start=1):
        _run_candidate(candidate, candidates, f"[{index}/{total}]", ctx)
    _race_trained(candidates, ctx)
    first = len(candidates.before_race) + len(candidates.raced) + 1
    labels = {c.name: f"[{first + i}/{total}]" for i, c in enumerate(candidates.after_race)}
    for candidate in list(candidates.after_race):
        if candidate.kind == SUPERVISED_KIND and not ctx.supervised_raced:
            _race_supervised(candidates, labels, ctx)
        if candidate in candidates.after_race:  # not left out (--time) by the supervised race's phase
            _run_candidate(candidate, candidates, labels[candidate.name], ctx)
    results = select(ctx.records, candidates.all, inputs, inputs.split, out, config, ctx=ctx)
    if ctx.time_plan is not None:
        results["meta"]["time"] = ctx.time_plan.summary()
    _save_choice(results, candidates, ctx)
    write_results(results, out, command)
    return results


def _left_out_late(candidate: Candidate, candidates: Plan, label: str, ctx: Context) -> bool:
    """Under --time, a candidate not yet produced whose expected time no longer fits what is left is taken out of the
    run, with its reason (True); the unchanged model is always scored."""
    timing = ctx.time_plan
    if timing is None or candidate.name == UNCHANGED or candidate.finished(ctx):
        return False
    reason = timing.still_fits(candidate.name)
    if reason is not None:
        _leave_out(candidate, candidates, label, reason, ctx)
    return reason is not None


def _leave_out(candidate: Candidate, candidates: Plan, label: str, reason: str, ctx: Context) -> None:
    assert ctx.time_plan is not None
    say(f"{label} {candidate.name}: left out: {reason}")
    ctx.time_plan.left_out[candidate.name] = reason
    ctx.time_plan.kept.pop(candidate.name, None)
    getattr(candidates, candidate.phase).remove(candidate)


def _run_candidate(candidate: Candidate, candidates: Plan, label: str, ctx: Context) -> None:
    """Its record (read back or produced); under --time, skipped when its expected time no longer fits."""
    if _left_out_late(candidate, candidates, label, ctx):
        return
    timing = ctx.time_plan
    if timing is not None:
        timing.current = candidate.name
    record = candidate.record(label, ctx)
    ctx.records[candidate.name] = record
    if timing is not None:
        timing.finished(candidate.name, record.seconds)


def _plan_time(candidates: Plan, ctx: Context, started: float) -> TimePlan:
    """--time (or, without it, DEFAULT_TIME): the run's text cost measured, every candidate's seconds and gain expected,
    the plan fitted, and the candidates left out taken out of the run, each with its reason and the --time that would
    keep it, before the first of them starts (sentune.adaptation.time_plan)."""
    from sentune.adaptation.time_plan import DEFAULT_TIME, Costs, Planned, expected_gains, fitted, minutes, probe_text_seconds, time_to_include

    given = ctx.config.time_limit is not None
    limit = ctx.config.time_limit if ctx.config.time_limit is not None else DEFAULT_TIME
    # search: the documents, which its default candidates encode and train on (at up to the model's length), not the
    # corpus's passages of at most 64 words (on SciFact a document cost 2.3 times a passage)
    task = ctx.inputs.task
    costs = Costs.measured(probe_text_seconds(ctx.base, [d.text for d in task.documents] if task.search else ctx.inputs.corpus))
    gains = expected_gains(ctx.inputs.task.search)
    unchanged = candidates.all[0]  # the unchanged model: always scored
    raced = {c.name for c in candidates.raced}
    done = {c.name for c in candidates.all if c.finished(ctx)}  # a resumed run reads them back: they cost nothing
    assumed = len(raced)
    while True:  # a race of fewer trains each longer: planned again for as many as the last plan kept, until it keeps them all
        costs = replace(costs, raced=max(assumed, 1))
        expected = {c.name: 0.0 if c.name in done else c.expected_seconds(ctx, costs) for c in candidates.all}
        first = Planned(unchanged.name, expected[unchanged.name], 0.0)
        items = [Planned(c.name, expected[c.name], gains.get(c.name, 0.0), c.builds_on(candidates.all, ctx)) for c in candidates.all[1:]]
        already = time.monotonic() - started
        timing = fitted(limit, first, items, already, given=given, started=started)
        kept = len(raced & set(timing.kept))
        if kept >= assumed:
            break
        assumed = kept
    timing.including = time_to_include(timing, first, items, already)
    for candidate in list(candidates.all):
        if candidate.name in timing.left_out:
            getattr(candidates, candidate.phase).remove(candidate)
    total = sum(c.seconds for c in timing.kept.values())
    say(
        (f"--time {minutes(timing.limit)}" if given else f"no --time: planned for {minutes(timing.limit)} (--time raises it)")
        + f": a text costs {costs.text_seconds * 1000:.1f} ms to encode here; {len(timing.kept)} candidates planned "
        f"(expected {minutes(total)} after the {minutes(time.monotonic() - started)} spent so far)"
        + "".join(
            f"\n    left out: {name}: {why}" + (f"; --time {timing.including[name]}m would include it" if name in timing.including else "")
            for name, why in timing.left_out.items()
        ),
    )
    return timing


def _leave_out_untrainable(candidates: Plan, ctx: Context) -> None:
    """A training method that cannot train this model's family (TSDAE without a causal-LM class, say) is left out,
    with the reason, rather than stopping the run when its turn comes."""
    from sentune.methods.registry import get_method
    from sentune.training.recipe import load_recipe

    for candidate in list(candidates.raced):
        recipe = load_recipe(candidate.recipe_name, check=False)
        method = get_method(recipe.method)
        reason = method.cannot_train(ctx.base, method.resolve_params(recipe.params))
        if reason:
            candidates.raced.remove(candidate)
            logger.warning("%s is left out: %s", candidate.name, reason)


def _race_trained(candidates: Plan, ctx: Context) -> None:
    from sentune.adaptation.race import CONFIDENCE, RUNGS, race

    first = len(candidates.before_race) + 1
    labels = {c.name: f"[{first + i}/{len(candidates.all)}]" for i, c in enumerate(candidates.raced)}
    if ctx.time_plan is not None:  # the members train side by side: those that no longer fit together do not start
        late = ctx.time_plan.still_fit_together([c.name for c in candidates.raced if not c.finished(ctx)])
        for candidate in [c for c in candidates.raced if c.name in late]:
            _leave_out(candidate, candidates, labels[candidate.name], late[candidate.name], ctx)
    raced = candidates.raced
    if not raced:
        return
    entries = []
    for candidate in raced:
        candidate.folder(ctx).mkdir(parents=True, exist_ok=True)
        recipe = ctx.recipe(candidate.recipe_name)
        if ctx.time_plan is not None and ctx.time_plan.given:  # each its share of what is left, not all of it (the default caps none)
            allowance = max(ctx.time_plan.allowance(candidate.name), 5.0) / 60
            minutes = min(allowance, recipe.training.max_minutes or allowance)
            recipe = replace(recipe, training=replace(recipe.training, max_minutes=minutes))
        say(f"{labels[candidate.name]} {candidate.name}: {candidate.describe(ctx)}: {recipe.training.max_steps} steps")
        entries.append(candidate.race_entry(recipe, ctx))
    say(
        f"race: {len(entries)} training candidates in rounds to {', '.join(f'{f:g}' for f in RUNGS)} of their steps; after each, one behind the "
        f"unchanged model or the leader on the selection pairs with {CONFIDENCE:.0%} confidence stops, and at most half go on",
    )
    by_name = {c.name: c for c in raced}
    race(entries, ctx, lambda entry: by_name[entry.name].finish(labels[entry.name], ctx))
    for candidate in raced:
        ctx.records[candidate.name] = load_record(candidate.folder(ctx))
        if ctx.time_plan is not None:
            ctx.time_plan.finished(candidate.name, ctx.records[candidate.name].seconds)


def _race_supervised(candidates: Plan, labels: dict[str, str], ctx: Context) -> None:
    """The supervised candidates' race (sentune.adaptation.candidates.supervised_race), a phase of the run before the
    first of them: under --time each not yet produced is first checked as at its turn (one no longer fitting is left
    out and does not race), then the members race (or the verdict of an earlier process of the run is read back), and
    each reads the verdict when its turn comes (ctx.supervised_race)."""
    from sentune.adaptation.candidates.supervised_race import race_supervised

    for member in [c for c in candidates.after_race if c.kind == SUPERVISED_KIND]:
        _left_out_late(member, candidates, labels[member.name], ctx)
    ctx.supervised_race, ctx.supervised_raced = race_supervised(ctx), True


def _save_choice(results: dict, candidates: Plan, ctx: Context) -> None:
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
    """Search: OUT is also an index of the chosen system (sentune.search.index) over every document, its model OUT/model,
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


def prune(out: Path, chosen: str) -> list[Path]:
    """Remove the model folders of candidates not chosen (--prune), at any depth (a trained candidate's is in its run
    folder: NAME/run/model); their scores and records stay."""
    removed = []
    for folder in (out / "candidates").glob("*"):
        if folder.name == chosen:
            continue
        for model in sorted(folder.rglob("model"), key=lambda path: len(path.parts)):
            if model.is_dir():  # outermost first: a folder inside one already removed is gone
                shutil.rmtree(model)
                removed.append(model)
    return removed
