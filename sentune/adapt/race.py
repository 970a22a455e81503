"""Racing the training candidates of `sentune adapt`: they share the budget in rounds instead of each taking all of it.

Every candidate plans its whole budget (its learning-rate schedule is the planned one) and is paused at 1/8, 1/4 and
1/2 of its steps (sentune.train.trainer's pause_at_step; a later round resumes from that checkpoint). After each round,
on the selection pairs only (so the confirmation of the final choice stays independent, sentune.adapt.decide):

1. racing (Maron & Moore, "Hoeffding races", NIPS 1994; Birattari et al., "A racing algorithm for configuring
   metaheuristics", GECCO 2002): a candidate whose best checkpoint so far is behind the unchanged model, or behind the
   leader (the best candidate so far, running or finished), in ≥ 95 % of 1,000 paired bootstrap resamples stops;
2. successive halving (Jamieson & Talwalkar, "Non-stochastic best arm identification and hyperparameter
   optimization", AISTATS 2016): of those still running, at most half (rounded up) go on, the best on the selection
   pairs.

A candidate also ends by itself: its last step, early stopping (patience: evaluations without a new best, counted on
across rounds; a round's own evaluation at its pause counts too, so a round ending between two planned evaluations can
stop a run earlier than one trained in one go) or --budget's minutes. A stopped candidate
keeps its selection score in the report and is not eligible (the race chose against it), though its best checkpoint
may still seed SED or wise (sentune.adapt.records.CandidateRecord.weights). Everything a round decides is
read back from the run folders (paused.json, dev_cosines/, candidate.json), so a killed race resumes where it was.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sentune.adapt.records import CandidateRecord, Stopped, load_record, record_path
from sentune.core.memory import peak_resident_mib
from sentune.core.metrics import METRICS
from sentune.core.progress import say
from sentune.core.results import write_atomic
from sentune.tasks.bootstrap import bootstrap_differences, resamples
from sentune.train.runs import finished_run, train_run

if TYPE_CHECKING:
    from sentune.adapt.context import Context
    from sentune.train.recipe import Recipe

RUNGS = (1 / 8, 1 / 4, 1 / 2, 1.0)  # fractions of a candidate's steps after which the race compares
CONFIDENCE = 0.95  # a candidate behind a rival in this share of the resamples stops


@dataclass
class Entry:
    """One racing candidate: its name, its recipe (the whole budget) and its run folder."""

    name: str
    kind: str  # the candidate's kind, written into the record of a stopped one
    recipe: Recipe
    run: Path
    folder: Path  # the candidate's folder: its record (written when it finishes or stops) and scores
    member_seconds: float = 0.0  # what it trained before racing (SED: its other seeds), counted in a stopped one's seconds too
    # what its record depends on (Candidate.depends_on): a stopped one's record keeps it as write_record does a finished
    # one's, so a resumed run reads it as done (Candidate.finished) instead of producing it again
    depends_on: dict = field(default_factory=dict)

    @property
    def record(self) -> Path:
        return record_path(self.folder)


def _paused_step(run: Path) -> int:
    paused = run / "paused.json"
    return json.loads(paused.read_text())["step"] if paused.is_file() else 0


def best_selection_cosines(entry: Entry, ctx: Context) -> tuple[int, float, np.ndarray] | None:
    """(step, selection score, cosines of the selection pairs) of the entry's best evaluation so far."""
    folder = entry.run / "dev_cosines"
    found = []
    for path in folder.glob("step-*.npy") if folder.is_dir() else []:
        cosines = np.load(path)
        found.append((ctx.selection_score_of(cosines), -int(path.stem.split("-")[1]), cosines))
    if not found:
        return None
    score, negative_step, cosines = max(found, key=lambda item: (item[0], item[1]))  # ties: the earlier step
    return -negative_step, score, cosines


def race(entries: list[Entry], ctx: Context, finish, rivals: dict[str, np.ndarray] | None = None) -> None:
    """Train the entries in rounds, stopping those behind; `finish(entry)` scores a finished one and writes its record.
    `rivals`: selection cosines of candidates already finished elsewhere (the leader may be one of them)."""
    active = [e for e in entries if not e.record.is_file()]
    finished: dict[str, np.ndarray] = dict(rivals or {})
    for e in entries:
        if e.record.is_file() and load_record(e.folder).stopped is None:
            finished[e.name] = ctx.store.scores(e.name)["select"]
    started = {e.name: time.perf_counter() for e in active}
    for index, fraction in enumerate(RUNGS):
        if not active:
            return
        for entry in list(active):
            target = max(1, math.ceil(fraction * entry.recipe.training.max_steps))
            if not finished_run(entry.run) and _paused_step(entry.run) < target:
                say(f"    race round {index + 1}/{len(RUNGS)}: {entry.name} to step {target} of {entry.recipe.training.max_steps}")
                train_run(
                    entry.recipe,
                    entry.run,
                    data_dir=ctx.data_dir or Path("."),
                    pause_at_step=target,
                    show_progress=ctx.config.show_progress,
                    data=ctx.training_data(entry.recipe),  # its data and dev set as objects: no file under OUT/data is read
                    dev=ctx.training_dev_data(),
                )
            if finished_run(entry.run):
                finished[entry.name] = finish(entry)["select"]
                active.remove(entry)
        if index == 0:
            _print_expected(entries, active, ctx)
        if index < len(RUNGS) - 1:
            active = _eliminate(active, finished, ctx, index + 1, started)


def _eliminate(active: list[Entry], finished: dict[str, np.ndarray], ctx: Context, round_number: int, started: dict[str, float]) -> list[Entry]:
    standing = {e.name: best_selection_cosines(e, ctx) for e in active}
    cosines = {name: found[2] for name, found in standing.items() if found is not None} | finished
    scored = [e.name for e in active if e.name in cosines]  # one not evaluated yet goes on
    if not scored:
        return active
    gold = ctx.selection_gold()
    unchanged = ctx.selection_cosines(ctx.untuned("model")["dev"])
    where = f"the selection {ctx.inputs.dev.unit} after round {round_number}"
    stopped = verdict(gold, cosines, scored, unchanged, ctx.metric, resamples(len(gold), seed=ctx.config.seed), where)
    for entry in active:
        if entry.name in stopped:
            _write_stopped(entry, standing[entry.name], stopped[entry.name], ctx, time.perf_counter() - started[entry.name])
    going = [e for e in active if e.name not in stopped]
    return sorted(going, key=lambda e: -ctx.selection_score_of(cosines[e.name]) if e.name in cosines else 0.0)


def verdict(
    gold: np.ndarray, standing: dict[str, np.ndarray], racing: list[str], unchanged: np.ndarray, metric: str, draws: np.ndarray, where: str
) -> dict[str, str]:
    """Which of `racing` stop, and why, by the race's two rules on the units `where` names: one behind the unchanged
    model or behind the leader (the best of `standing`, racing or finished; the first listed on a tie) in ≥ CONFIDENCE
    of the paired bootstrap resamples `draws` stops; of the rest at most half (rounded up) go on, the best first (a tie
    keeps the listed order)."""
    score_of = METRICS[metric].score
    score = {name: float(score_of(gold, predicted)) for name, predicted in standing.items()}
    leader = max(score, key=lambda name: score[name])
    stopped: dict[str, str] = {}
    going = []
    for name in racing:
        for rival, theirs in (("the unchanged model", unchanged), (leader, standing[leader])):
            if rival == name:
                continue
            behind = share_behind(gold, standing[name], theirs, metric, draws)
            if behind >= CONFIDENCE:
                stopped[name] = f"behind {rival} on {where} ({score[name]:.2f} vs {float(score_of(gold, theirs)):.2f}, in {behind:.1%} of the resamples)"
                break
        else:
            going.append(name)
    going.sort(key=lambda name: -score[name])
    keep = math.ceil(len(going) / 2)
    for name in going[keep:]:
        stopped[name] = f"in the lower half of the race ({score[name]:.2f} vs {going[0]}'s {score[going[0]]:.2f} on {where}; successive halving)"
    return stopped


def share_behind(gold: np.ndarray, candidate: np.ndarray, rival: np.ndarray, metric: str, draws: np.ndarray) -> float:
    """The share of paired bootstrap resamples in which the candidate scores strictly below the rival (a tie is not behind)."""
    return float(np.mean(bootstrap_differences(gold, candidate, rival, metric, draws) < 0))


def _write_stopped(entry: Entry, standing: tuple[int, float, np.ndarray] | None, reason: str, ctx: Context, seconds: float) -> None:
    step, score, cosines = standing if standing else (None, None, None)
    say(f"    race: {entry.name} stops: {reason}")
    if cosines is not None:
        ctx.store.save_scores(entry.name, {"select": cosines})
    paused = json.loads((entry.run / "paused.json").read_text()) if (entry.run / "paused.json").is_file() else {}
    detail = {
        "setting": entry.recipe.name,
        "recipe": entry.recipe.to_dict(),
        "best_checkpoint": {"step": step, "dev_score": score} if step is not None else None,
        **({"selection_only": True} if score is not None else {}),
        **({"member_seconds": entry.member_seconds} if entry.member_seconds else {}),
        **entry.depends_on,
    }
    # peak memory: the process's when the record is written (every round's training before it)
    spent = paused.get("training_seconds", seconds) + entry.member_seconds
    record = CandidateRecord(entry.name, entry.kind, spent, peak_resident_mib(), score, detail=detail)
    record.run, record.stopped = str(entry.run.relative_to(ctx.out)), Stopped(reason, paused.get("step"), step)
    write_atomic(entry.record, json.dumps(record.to_dict(), indent=2))


def _print_expected(entries: list[Entry], active: list[Entry], ctx: Context) -> None:
    """After the first round: each candidate's measured seconds a step and the minutes the rest of its budget would
    take if no rule stopped it (an upper bound: racing and early stopping end most sooner)."""
    lines, total = [], 0.0
    for entry in active:
        paused = entry.run / "paused.json"
        if not paused.is_file():
            continue
        state = json.loads(paused.read_text())
        per_step = state["training_seconds"] / max(1, state["step"])
        left = per_step * (entry.recipe.training.max_steps - state["step"]) / 60
        total += left
        lines.append(f"{entry.name} {per_step:.2f} s a step, ≤ {left:.1f} min")
    if lines:
        say(f"    expected after round 1 (measured): {'; '.join(lines)}; ≤ {total:.1f} min in all if none stopped")
