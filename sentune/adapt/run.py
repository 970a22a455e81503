"""`sentune adapt`: try every candidate on the user's corpus, score each on the dev (and test) pairs, and keep the
unchanged model unless the candidate best on the selection half of the dev pairs is confirmed better on the other half
(sentune.adapt.decide: every choice reads the selection half only, so the confirmation is a calibrated test).

Output folder:
  adapt.json              the settings (model, data hashes, budget); a resume with other settings is refused
  data/                   corpus.txt (de-duplicated), dev.tsv, test.tsv: exactly what was used; dev-select.tsv: the
                          selection half, the only dev pairs training reads
  candidates/NAME/        one per candidate: candidate.json (its record, written last: marks it done), scores.npz (the
                          cosine of every dev and test pair), run/ (a trained candidate's run folder) or model/ (a
                          post-processed or interpolated one)
  model/                  the chosen model (SentenceTransformer(path) loads it)
  results.json/.md, report.html and its plots

A killed run continues where it stopped: finished candidates are read back, a training candidate resumes from its last
checkpoint. Test pairs are scored for every candidate but never reach the choice.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from sentune.adapt.candidates import Candidate, Ensemble, Plan, Reference, Trained, own_pooling, plan, tuned_model_path, tuned_sources
from sentune.adapt.context import Context
from sentune.adapt.decide import detectable_gain
from sentune.adapt.inputs import AdaptConfig, Inputs, prepare
from sentune.core.memory import map_large_allocations, peak_resident_mib, release_unreferenced
from sentune.core.models import load_model
from sentune.core.results import write_atomic
from sentune.data.user_data import ScoredPairs
from sentune.modules.build import save_atomic

logger = logging.getLogger(__name__)


def _warn_overlong(inputs: Inputs, base) -> None:
    """Sentences longer than the model reads are truncated (as every encoder does): say so, naming the first."""
    from sentune.core.encode import overlong_indices

    limit = base.max_seq_length
    corpus = overlong_indices(inputs.corpus, base)
    if corpus:
        first = inputs.corpus[corpus[0]]
        print(
            f"warning: {len(corpus)} of the {len(inputs.corpus)} corpus sentences are longer than the model's {limit} tokens and are read "
            f"only up to there (the first: {first[:60]!r}{'...' if len(first) > 60 else ''})",
            file=sys.stderr,
        )
    if inputs.documents is not None:
        long = overlong_indices([d.text for d in inputs.documents], base)
        if long:
            print(
                f"note: {len(long)} of the {len(inputs.documents)} documents are longer than the model's {limit} tokens: their first {limit} are ranked, as BEIR does",
                file=sys.stderr,
            )
        return
    for name, pairs in (("dev", inputs.dev), ("test", inputs.test)):
        if not isinstance(pairs, ScoredPairs):
            continue
        sentences = [s for p in pairs.pairs for s in (p.a, p.b)]
        hits = sorted({i // 2 for i in overlong_indices(sentences, base)})
        if hits:
            source = pairs.pairs[hits[0]].source
            print(
                f"warning: {len(hits)} of the {len(pairs.pairs)} {name} pairs have a sentence longer than the model's {limit} tokens, read only up "
                f"to there (the first: {source.path}:{source.line})",
                file=sys.stderr,
            )


def adapt(config: AdaptConfig, out: Path, *, data_dir: Path | None, command: str | None = None, inputs: Inputs | None = None) -> dict:
    """Run (or resume) every candidate, choose, save the chosen model and the results; returns results.json's content.
    `inputs`: what sentune.adapt.inputs.prepare returned (the CLI prepares before importing this module)."""
    from sentune.adapt.report import write_results
    from sentune.adapt.select import select

    if inputs is None:
        inputs = prepare(config, out, data_dir)  # creates `out` only once every input is checked
    if config.low_memory:
        map_large_allocations()  # freed activations go back to the system within a training step (sentune.core.memory)
    base = load_model(config.model, device=config.device)
    own = own_pooling(base)
    config = replace(config, training_pooling=own or "model")
    candidates = plan(config.methods, own, config.reference, generated_queries=config.queries_from is not None, retrieval=inputs.retrieval)
    ctx = Context(config, inputs, out, data_dir, base, inputs.scorer(config.show_progress))
    _warn_overlong(inputs, base)
    if inputs.retrieval:
        ctx.use_selection_pool()
    print(
        f"sentune adapt: {len(candidates.all)} candidates for {config.model} on {len(inputs.corpus)} corpus "
        + (f"passages of {len(inputs.documents)} documents; " if inputs.documents is not None else "sentences; ")
        + f"dev {inputs.dev_label} ({inputs.dev.units} {inputs.dev.unit}, {inputs.dev.metric}: {len(inputs.split.select)} select, "
        f"{len(inputs.split.confirm)} confirm); " + (f"test {config.test} ({inputs.test.units} {inputs.test.unit})" if inputs.test else "no test set"),
        flush=True,
    )
    gain = detectable_gain(inputs.dev.metric, inputs.dev.units)
    if gain is not None:
        print(
            f"with {inputs.dev.units} dev pairs, a candidate about {gain:.1f} points better than the model is confirmed 80 % of the time "
            "(benchmarks/results/adapt_calibration.md); smaller gains will usually keep the model as it is",
            flush=True,
        )
    total = len(candidates.all)
    for index, candidate in enumerate(candidates.before_race, start=1):
        ctx.records[candidate.name] = _run_candidate(candidate, f"[{index}/{total}]", ctx)
    _race_trained(candidates, ctx)
    for index, candidate in enumerate(candidates.after_race, start=len(candidates.before_race) + len(candidates.raced) + 1):
        if isinstance(candidate, Ensemble):
            ctx.records[candidate.name] = _ensemble(candidate, f"[{index}/{total}]", ctx)
        elif isinstance(candidate, Reference):
            ctx.records[candidate.name] = _reference(candidate, f"[{index}/{total}]", ctx)
        else:
            ctx.records[candidate.name] = _run_candidate(candidate, f"[{index}/{total}]", ctx)
    results = select(ctx.records, candidates.all, inputs, inputs.split, out, config)
    _save_choice(results, candidates, ctx)
    write_results(results, out, command)
    return results


def _run_candidate(candidate: Candidate, label: str, ctx: Context) -> dict:
    """A candidate that is not trained: read back when done, else run, scored and recorded."""
    done = candidate.folder(ctx) / "candidate.json"
    if done.is_file():
        print(f"{label} {candidate.name}: done before, read back", flush=True)
        return json.loads(done.read_text())
    candidate.folder(ctx).mkdir(parents=True, exist_ok=True)
    print(f"{label} {candidate.name}: {candidate.describe(ctx)}", flush=True)
    started = time.perf_counter()
    scores, detail = candidate.run(ctx)
    return _record(candidate, scores, detail, time.perf_counter() - started, label, ctx)


def _record(candidate: Candidate, scores: dict[str, np.ndarray], detail: dict, seconds: float, label: str, ctx: Context) -> dict:
    """Save the candidate's cosines and write its record (candidate.json, written last: it marks the candidate done)."""
    if scores:
        np.savez(str(candidate.folder(ctx) / "scores.npz"), **scores)  # type: ignore[arg-type]  # numpy stubs type **kwds as bool
    record = {"name": candidate.name, "kind": candidate.kind, "seconds": seconds, "peak_memory_mib": peak_resident_mib(), **detail}
    if scores:
        record["dev_score"] = ctx.selection_score(scores["dev"])  # every choice reads this, never the confirmation pairs
        print(f"{label} {candidate.name}: selection {ctx.metric} {record['dev_score']:.2f} ({seconds / 60:.1f} min)", flush=True)
    write_atomic(candidate.folder(ctx) / "candidate.json", json.dumps(record, indent=2))
    release_unreferenced()  # the candidate's model is garbage now (sentune.core.memory)
    return record


def _trained_record(candidate: Candidate, run: Path, label: str, ctx: Context, extra: dict | None = None) -> dict:
    """A finished run scored on the dev (and test) pairs with its saved model, and recorded."""
    started = time.perf_counter()
    results = json.loads((run / "results.json").read_text())
    scores = ctx.scorer.of_model(load_model(str(run / "model"), device=ctx.device), f"{candidate.name}: scoring the pairs")
    detail = {
        "setting": results["meta"]["recipe"]["name"],
        "run": str(run.relative_to(ctx.out)),
        "recipe": results["meta"]["recipe"],
        "best_checkpoint": results["meta"]["best_checkpoint"],
        "training_seconds": results["meta"].get("training_seconds"),
        "finalize": results["meta"].get("finalize"),
        **(extra or {}),
    }
    seconds = (results["meta"].get("training_seconds") or 0.0) + time.perf_counter() - started + (extra or {}).get("member_seconds", 0.0)
    return _record(candidate, scores, detail, seconds, label, ctx)


def _race_trained(candidates: Plan, ctx: Context) -> None:
    from sentune.adapt.race import RUNGS, Entry, race

    raced = candidates.raced
    if not raced:
        return
    first = len(candidates.before_race) + 1
    labels = {c.name: f"[{first + i}/{len(candidates.all)}]" for i, c in enumerate(raced)}
    entries = []
    for candidate in raced:
        candidate.folder(ctx).mkdir(parents=True, exist_ok=True)
        recipe = ctx.recipe(candidate.recipe_name)
        print(f"{labels[candidate.name]} {candidate.name}: {candidate.describe(ctx)}: {recipe.training.max_steps} steps", flush=True)
        entries.append(Entry(candidate.name, recipe, candidate.run_folder(ctx), candidate.folder(ctx) / "candidate.json"))
    print(
        f"race: {len(entries)} training candidates in rounds to {', '.join(f'{f:g}' for f in RUNGS)} of their steps; after each, one behind the "
        "unchanged model or the leader on the selection pairs with 95 % confidence stops, and at most half go on",
        flush=True,
    )
    by_name = {c.name: c for c in raced}
    race(entries, ctx, lambda entry: _finish(by_name[entry.name], labels[entry.name], ctx))
    for candidate in raced:
        ctx.records[candidate.name] = json.loads((candidate.folder(ctx) / "candidate.json").read_text())


def _finish(candidate: Trained | Ensemble, label: str, ctx: Context, extra: dict | None = None) -> dict[str, np.ndarray]:
    _trained_record(candidate, candidate.run_folder(ctx), label, ctx, extra)
    return dict(np.load(candidate.folder(ctx) / "scores.npz"))


def _ensemble(candidate: Ensemble, label: str, ctx: Context) -> dict:
    """SED: seeds 2..N of the best trained candidate on the selection pairs (finished, or raced out: its best checkpoint is
    seed 1), each trained for as many steps as that candidate needed to reach its best checkpoint; then the learner,
    raced alone against the unchanged model and that candidate."""
    from sentune.adapt.race import Entry, race
    from sentune.train.runs import train_each

    done = candidate.folder(ctx) / "candidate.json"
    if done.is_file():
        print(f"{label} {candidate.name}: done before, read back", flush=True)
        return json.loads(done.read_text())
    trained = tuned_sources(ctx, (Trained.kind,))
    if not trained:
        print(f"{label} {candidate.name}: skipped: no trained candidate with weights left", flush=True)
        return _record(candidate, {}, {"skipped": "no trained candidate with weights left to take an ensemble from (--prune removes them)"}, 0.0, label, ctx)
    source = max(trained, key=lambda r: r["dev_score"])  # finished or raced out: its best checkpoint is seed 1
    steps = max(source["best_checkpoint"]["step"] or 1, source["recipe"]["training"]["eval_steps"])
    print(f"{label} {candidate.name}: {candidate.describe(ctx)}: seeds 1..{ctx.config.sed_members} of {source['name']} ({steps} steps each)", flush=True)
    started = time.perf_counter()
    jobs = [
        (ctx.recipe(f"adapt/{source['name']}", steps=steps, seed=seed), candidate.folder(ctx) / f"member-{seed}")
        for seed in range(2, ctx.config.sed_members + 1)
    ]
    train_each(jobs, data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress)
    members = [str(tuned_model_path(source, ctx)), *(str(folder / "model") for _, folder in jobs)]
    member_seconds = time.perf_counter() - started
    recipe = ctx.recipe("adapt/sed", members=members)
    scores = np.load(ctx.out / "candidates" / source["name"] / "scores.npz")
    rivals = {source["name"]: scores["select"] if "select" in scores else ctx.selection_cosines(scores["dev"])}
    entry = Entry(candidate.name, recipe, candidate.run_folder(ctx), done)
    race([entry], ctx, lambda e: _finish(candidate, label, ctx, {"source": source["name"], "member_seconds": member_seconds}), rivals=rivals)
    return json.loads(done.read_text())


def _reference(candidate: Reference, label: str, ctx: Context) -> dict:
    from sentune.train.runs import train_run

    done = candidate.folder(ctx) / "candidate.json"
    if done.is_file():
        print(f"{label} {candidate.name}: done before, read back", flush=True)
        return json.loads(done.read_text())
    print(f"{label} {candidate.name}: {candidate.describe(ctx)}", flush=True)
    train_run(
        ctx.recipe(candidate.recipe_name, reference=True), candidate.run_folder(ctx), data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress
    )
    return _trained_record(candidate, candidate.run_folder(ctx), label, ctx)


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


def prune(out: Path, chosen: str) -> list[Path]:
    """Remove the model folders of candidates not chosen (--prune); their scores and records stay."""
    removed = []
    for folder in (out / "candidates").glob("*"):
        if folder.name == chosen:
            continue
        for model in [folder / "model", *folder.glob("*/model")]:
            if model.is_dir():
                shutil.rmtree(model)
                removed.append(model)
    return removed
