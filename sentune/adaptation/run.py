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

from sentune.adaptation.candidates import own_pooling, plan
from sentune.adaptation.context import Context, PairsContext
from sentune.adaptation.inputs import AdaptConfig, Inputs, prepare
from sentune.adaptation.phases import declared
from sentune.adaptation.run_state import RunInputs, RunState
from sentune.adaptation.search_context import SearchContext
from sentune.core.memory import map_large_allocations
from sentune.core.models import load_model_with_runtime
from sentune.core.progress import say

logger = logging.getLogger(__name__)


def adapt(
    config: AdaptConfig, out: Path, *, data_dir: Path | None, command: str | None = None, inputs: Inputs | None = None, started: float | None = None
) -> dict:
    """Run (or resume) every candidate, choose, save the chosen model and the results; returns results.json's content.
    `inputs`: what sentune.adaptation.inputs.prepare returned (the CLI prepares before importing this module); `started`:
    when the command started (time.monotonic(); what --time counts from; default now). The run is its declared phases
    (sentune.adaptation.phases), run in turn over its frozen inputs and its state."""
    started = time.monotonic() if started is None else started
    if inputs is None:
        inputs = prepare(config, out, data_dir)  # creates `out` only once every input is checked
    if config.low_memory:
        map_large_allocations()  # freed activations go back to the system within a training step (sentune.core.memory)
    base, runtime = load_model_with_runtime(config.model, device=config.device)
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
    ctx = context_of(RunInputs(config, inputs, out, data_dir, base, started, command, runtime), candidates)
    state = ctx.state
    phases = declared()
    logger.info("phases: %s", ", ".join(phase.name for phase in phases))
    state.phases = {phase.name: None for phase in phases}
    for phase in phases:
        began = time.monotonic()
        state.records |= phase.run(ctx, state)
        state.phases[phase.name] = time.monotonic() - began
        logger.info("phase %s: %.1f s", phase.name, state.phases[phase.name])
    assert state.results is not None
    return state.results


def context_of(run: RunInputs, plan) -> Context:
    """The run's Context: a SearchContext for a search run (what search candidates read is its), else a PairsContext;
    its state starts with the plan and the task's scorer, scoring through the run's backend."""
    task = run.inputs.task
    kind = SearchContext if task.search else PairsContext
    ctx = kind(run, RunState(plan, task.scorer(run.config.show_progress)))
    ctx.state.scorer = ctx._scoring(ctx.state.scorer)
    return ctx


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
