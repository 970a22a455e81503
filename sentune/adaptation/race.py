"""Racing the training candidates of `sentune adapt`: they share the budget in rounds instead of each taking all of it.

Every candidate plans its whole budget (its learning-rate schedule is the planned one) and is paused at 1/8, 1/4 and
1/2 of its steps (sentune.training.trainer's pause_at_step; a later round resumes from that checkpoint): a racer of
sentune.adaptation.race_engine (a paused training), whose rules, racing and successive halving, stop those behind after
each round, on the selection pairs only: the dev selection pairs and, when --train's evidence pairs judge, a sample of
the evidence selection pairs, each ranked among their own as at the end (sentune.adaptation.race_rows: the rows, what
they cost, and each racer's best checkpoint scored on them).

A candidate also ends by itself: its last step, early stopping (patience: evaluations without a new best, counted on
across rounds; a round's own evaluation at its pause counts too, so a round ending between two planned evaluations can
stop a run earlier than one trained in one go) or --budget's minutes. A stopped candidate
keeps its selection score in the report and is not eligible (the race chose against it), though its best checkpoint
may still seed SED or wise (sentune.adaptation.records.CandidateRecord.weights); its record says after which round, at
which step of how many, and on how many dev and train pairs it stopped (detail `race`, which the report's note shows).
Everything a round decides is read back from the run folders (paused.json, dev_cosines/, race_rows/, candidate.json),
so a killed race resumes where it was.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sentune.adaptation.race_engine import Field, Race, Racer
from sentune.adaptation.race_rows import RaceRows, race_rows, raced_elsewhere, train_cosines
from sentune.adaptation.records import BestCheckpoint, CandidateRecord, RaceCheck, Stopped, load_record, record_path
from sentune.core.memory import peak_resident_mib
from sentune.core.progress import say
from sentune.core.results import write_atomic
from sentune.training.runs import finished_run, train_run

if TYPE_CHECKING:
    from sentune.adaptation.context import Context
    from sentune.training.recipe import Recipe

RUNGS = (1 / 8, 1 / 4, 1 / 2, 1.0)  # fractions of a candidate's steps after which the race compares
# training.max_minutes for a racer the default time ends where it is: spent already, so the trainer's clock (which counts
# the training time before the resume) stops it at its next step, evaluated and saved, and the run ends at its best
END_NOW = 1e-6


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


class _Training(Racer):
    """An entry as a racer: each round trains it to the rung's share of its steps (resuming from its paused checkpoint)."""

    def __init__(self, entry: Entry, ctx: Context, finish, finished: dict[str, tuple[np.ndarray, Path | None]], started: float) -> None:
        self.entry, self.name, self.ctx, self.finish, self.finished, self.started = entry, entry.name, ctx, finish, finished, started
        self.best: tuple[int, float, np.ndarray] | None = None  # its best evaluation so far, as the last field read it

    def advance(self, rung: float, round_number: int) -> bool:
        entry, ctx = self.entry, self.ctx
        target = max(1, math.ceil(rung * entry.recipe.training.max_steps))
        if not finished_run(entry.run) and _paused_step(entry.run) < target:
            say(f"    race round {round_number}/{len(RUNGS)}: {entry.name} to step {target} of {entry.recipe.training.max_steps}")
            train_run(
                entry.recipe,
                entry.run,
                data_dir=ctx.data_dir or Path("."),
                pause_at_step=target,
                show_progress=ctx.config.show_progress,
                data=ctx.training_data(entry.recipe),  # its data and dev set as objects: no file under OUT/data is read
                dev=ctx.training_dev_data(),
            )
        if not finished_run(entry.run):
            return False
        self.finished[entry.name] = (self.finish(entry)["select"], entry.run / "model")
        return True

    def out_of_time(self, reason: str, round_number: int, field: Field) -> None:
        """The default time cannot take it further: it ends at the step it reached, its best checkpoint so far kept and
        scored as a finished candidate's (a --time cap ends a training so too), rather than stopped as one behind,
        which could not be chosen however good it is; the plan notes it stopped after a first look, and how far it
        went. A run that cannot end so (its checkpoints gone) stops as one behind."""
        from dataclasses import replace

        entry, ctx = self.entry, self.ctx
        say(f"    race: {entry.name} ends at its best checkpoint so far: {reason}")
        if ctx.time_plan is not None:
            ctx.time_plan.stopped[entry.name] = reason
            ctx.time_plan.reached[entry.name] = reached(round_number)
        ending = replace(entry.recipe, training=replace(entry.recipe.training, max_minutes=END_NOW))
        train_run(
            ending, entry.run, data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress,
            data=ctx.training_data(entry.recipe), dev=ctx.training_dev_data(),
        )  # fmt: skip
        if not finished_run(entry.run):
            self.stop(reason, round_number, field)
            return
        self.finished[entry.name] = (self.finish(entry)["select"], entry.run / "model")

    def stop(self, reason: str, round_number: int, field: Field) -> None:
        rows = field.rows  # rows_digest: a run resumed on other rows races it again (race_rows.raced_elsewhere)
        race = RaceCheck(
            round_number, self.entry.recipe.training.max_steps, rows.counted(), self.ctx.inputs.dev.unit, rows.digest, field.score(self.name, self.ctx.metric)
        )
        _write_stopped(self.entry, self.best, reason, self.ctx, time.perf_counter() - self.started, race)


def race(entries: list[Entry], ctx: Context, finish, rivals: dict[str, tuple[np.ndarray, Path | None]] | None = None) -> None:
    """Train the entries in rounds, stopping those behind; `finish(entry)` scores a finished one and writes its record.
    `rivals`: candidates already finished elsewhere (the leader may be one of them), each its cosines of the dev
    selection pairs and the weights they came from (scored on the race's train rows too)."""
    rows = race_rows(ctx)
    for e in entries:
        if e.record.is_file() and raced_elsewhere(load_record(e.folder), ctx):
            say(f"    race: {e.name} was stopped on other selection rows: raced again on {rows.words(ctx.inputs.dev.unit)}")
            e.record.unlink()  # its run folder stays: it resumes from its paused checkpoint
    if rows.train:
        say(f"    race: read on {rows.words(ctx.inputs.dev.unit)}, each ranked among their own")
    # each finished one's dev selection cosines and its weights, scored on the train rows when a round compares it
    finished: dict[str, tuple[np.ndarray, Path | None]] = dict(rivals or {})
    for e in entries:
        if e.record.is_file() and load_record(e.folder).stopped is None:
            finished[e.name] = (ctx.store.scores(e.name)["select"], e.run / "model")
    now = time.perf_counter()
    racers: list[Racer] = [_Training(e, ctx, finish, finished, now) for e in entries if not e.record.is_file()]

    def between(round_number: int, active: list[Racer]) -> None:
        if round_number == 1:
            _print_expected(entries, [r.entry for r in active if isinstance(r, _Training)], ctx)

    def keep_to(going: list[Racer], round_number: int) -> dict[str, str]:
        """Those the time left cannot take further (each ends at its best checkpoint: _Training.out_of_time)."""
        rests = {r.name: measured_rest(r.entry) for r in going if isinstance(r, _Training)}
        return {} if ctx.time_plan is None else ctx.time_plan.go_on(rests, scored=list(rests))  # ended or not, each is scored

    Race(RUNGS, ctx.metric).run(racers, lambda active, round_number: _field(active, finished, ctx, round_number, rows), between, keep_to)


def measured_rest(entry: Entry) -> float:
    """The seconds the rest of a paused entry's steps would take at its measured seconds a step (0: not paused)."""
    paused = entry.run / "paused.json"
    if not paused.is_file():
        return 0.0
    state = json.loads(paused.read_text())
    return state["training_seconds"] / max(1, state["step"]) * max(0, entry.recipe.training.max_steps - state["step"])


def reached(round_number: int | None) -> float:
    """How far from its first look (0) to its end (1) a racer stopped after `round_number` went (None: to its end)."""
    if round_number is None:
        return 1.0
    rung = RUNGS[min(max(round_number, 1), len(RUNGS)) - 1]
    return (rung - RUNGS[0]) / (1 - RUNGS[0])


def _on_rows(rows: RaceRows, select: np.ndarray, weights: Path | None, ctx: Context) -> np.ndarray | None:
    """A model's cosines of the race rows: its dev selection cosines, then the train rows' under `weights` (None when
    those weights cannot be scored)."""
    train = train_cosines(rows, weights, ctx)
    return None if train is None else np.concatenate([select, train])


def _field(active: list[Racer], finished: dict[str, tuple[np.ndarray, Path | None]], ctx: Context, round_number: int, rows: RaceRows) -> Field | None:
    """What a round compares the racing entries on: each one's best checkpoint so far and each finished rival on the
    race rows (the dev selection pairs alone when some model compared cannot be scored on the train rows); None when
    none has been evaluated yet and none has finished."""
    trainings = [r for r in active if isinstance(r, _Training)]
    for racer in trainings:
        racer.best = best_selection_cosines(racer.entry, ctx)
    dev = {r.name: r.best[2] for r in trainings if r.best is not None}  # one not evaluated yet goes on
    if not any(r.name in dev or r.name in finished for r in trainings):
        return None
    cosines = {r.name: _on_rows(rows, dev[r.name], _checkpoint(r.entry, r.best), ctx) for r in trainings if r.name in dev}
    cosines |= {name: _on_rows(rows, select, weights, ctx) for name, (select, weights) in finished.items()}
    if rows.train and any(found is None for found in cosines.values()):  # weights gone (a checkpoint the trainer rotated away)
        say(f"    race: a model compared cannot be scored on the train pairs; round {round_number} reads the dev selection {ctx.inputs.dev.unit} alone")
        cosines = {name: found[: rows.dev] if found is not None else _dev_cosines(name, dev, finished) for name, found in cosines.items()}
        rows = rows.dev_only()
    judged = {name: found for name, found in cosines.items() if found is not None}
    where = f"{rows.words(ctx.inputs.dev.unit)} after round {round_number}"
    return Field(rows.gold, rows.unchanged, rows.draws(ctx.config.seed), where, judged, rows.strata, rows)


def _eliminate(
    active: list[Entry],
    finished: dict[str, tuple[np.ndarray, Path | None]],
    ctx: Context,
    round_number: int,
    started: dict[str, float],
    rows: RaceRows | None = None,
) -> list[Entry]:
    """One check of the race between rounds: the entries still racing after it, best first (those stopped have their
    records written)."""
    rows = rows or race_rows(ctx)
    racers: list[Racer] = [_Training(e, ctx, None, finished, started[e.name]) for e in active]
    going = Race(RUNGS, ctx.metric).eliminate(racers, _field(racers, finished, ctx, round_number, rows), round_number)
    return [r.entry for r in going if isinstance(r, _Training)]


def _dev_cosines(name: str, racing: dict[str, np.ndarray], finished: dict[str, tuple[np.ndarray, Path | None]]) -> np.ndarray:
    """A racer's best checkpoint's cosines of the dev selection pairs, or a finished candidate's."""
    return racing[name] if name in racing else finished[name][0]


def _checkpoint(entry: Entry, found: tuple[int, float, np.ndarray] | None) -> Path | None:
    """The weights of the entry's best checkpoint so far (the trainer keeps the best and the latest)."""
    return None if found is None else entry.run / "checkpoints" / f"checkpoint-{found[0]}"


def _write_stopped(entry: Entry, standing: tuple[int, float, np.ndarray] | None, reason: str, ctx: Context, seconds: float, race: RaceCheck) -> None:
    step, score, cosines = standing if standing else (None, None, None)
    say(f"    race: {entry.name} stops: {reason}")
    if cosines is not None:
        ctx.store.save_scores(entry.name, {"select": cosines})
    paused = json.loads((entry.run / "paused.json").read_text()) if (entry.run / "paused.json").is_file() else {}
    detail = {
        "setting": entry.recipe.name,
        "recipe": entry.recipe.to_dict(),
        **({"selection_only": True} if score is not None else {}),
        **({"member_seconds": entry.member_seconds} if entry.member_seconds else {}),
        **entry.depends_on,
    }
    # peak memory: the process's when the record is written (every round's training before it)
    spent = paused.get("training_seconds", seconds) + entry.member_seconds
    record = CandidateRecord(entry.name, entry.kind, spent, peak_resident_mib(), score, detail=detail, race=race)
    record.best_checkpoint = BestCheckpoint(step, score) if step is not None else None
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
