"""The supervised candidates (`supervised`, `supervised-stacked`) raced like the training candidates
(sentune.adaptation.race): after a first round, by its two rules on selection units no member trained on, one behind the
unchanged model or the leader in ≥ 95 % of the paired bootstrap resamples stops, and of the rest at most half (rounded
up) go on, the best first. Of two members at most one goes on: the pair costs one training and a first round instead of two.
A lone member races too: its first round is its first look, after which it stops behind the unchanged model, and under
the default time the rest of it goes on only while it fits (sentune.adaptation.phases.stop_for_time), so a candidate
whose cost the plan under-expected cannot take the run's half hour whole (a search run's only supervised candidate).

The race is a phase of the run before the first member (sentune.adaptation.phases.SupervisedRace: race_supervised), a race of
first looks on the race engine (sentune.adaptation.race_engine: each member one round, then the verdict), and
written to OUT/candidates/; each member reads its verdict when its turn comes, so a resumed run does not race again. A verdict is read back only on the inputs it was run on and while
what it trained of each member going on is still there (a member whose inputs changed is produced again from nothing,
and its folder with it); otherwise the members not yet produced race again.

**Without --train: the fold race (FoldRace).** A fold where the training race has a fraction of the steps.

Each member trains the first fold of its cross-fitting (sentune.adaptation.crossfit; the same rows for every member, one
seed) and scores that fold's held-out selection units. On those units only, by the rules of the training race: a
member behind the unchanged model, or behind the leader, in ≥ 95 % of the paired bootstrap resamples stops; of the rest,
at most half (rounded up) go on, the best first (successive halving). Only those going on train the other folds and the
refit. Every unit the race reads is a selection unit scored by a model that did not train on it, so the confirmation
part stays independent of the choice (sentune.adaptation.decide).

**With --train: the first rung (TrainRace), pairs runs.** Each member is a saved run (sentune.training.runs) that pauses
at FIRST_RUNG of its steps and is evaluated there on the selection pairs, which --train never holds, and, when --train's
evidence judges and every member is held out of its selection pairs, on the sample of them that the label-free race
reads too (sentune.adaptation.race_rows: each kind ranked among its own), so that one member is not stopped by the noise of
a few hundred dev pairs that the train pairs would have outweighed; the one going on
resumes its run to the end and keeps its last step, as its recipe fixed in advance says: the race decides only which
trains on, never which checkpoint is kept. On search data each evaluation would encode the selection pool again: the
members train there one after the other, unraced."""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from sentune.adaptation.race_engine import Field, Race, Racer
from sentune.adaptation.race_rows import score_on
from sentune.adaptation.records import record_path
from sentune.core.progress import say
from sentune.core.results import write_atomic

if TYPE_CHECKING:
    from sentune.adaptation.context import Context

FILE = "supervised-fold-race.json"
TRAIN_FILE = "supervised-train-race.json"


def first_rung() -> float:
    """The share of its steps a member trains before the race on --train compares: the training race's first round."""
    from sentune.adaptation.race import RUNGS

    return RUNGS[0]


@dataclass
class SupervisedRace:
    """A race's verdict as OUT/candidates/FILE keeps it; FoldRace and TrainRace say what a member's first round is."""

    scores: dict[str, float]  # each member's score on the units the race read
    unchanged: float  # the unchanged model's on the same units
    stopped: dict[str, str]  # member -> why it stops
    seconds: dict[str, float]  # each member's first round (its training and scoring)
    key: list  # the inputs it was run on: read back only on the same
    detail: dict  # what the summary adds: the held-out units (fold race), the step each paused at (train race)

    FILE: ClassVar[str]

    def summary(self) -> dict:
        return {**self.detail, "scores": self.scores, "unchanged": self.unchanged, "stopped": self.stopped}

    @classmethod
    def run(cls, ctx: Context) -> SupervisedRace | None:
        """This run's race: read back, or run now (race_supervised's phase). None: no member, or no race for this run."""
        if not cls.applies(ctx):
            return None
        path = ctx.out / "candidates" / cls.FILE
        found = cls._read(path)
        if found is not None and found.key == cls.key_of(ctx) and found._work_kept(ctx):
            return found
        path.unlink(missing_ok=True)
        members, starts = _members(ctx)
        if not members:
            return None
        say(f"    {cls.announce([c.name for c in members], ctx)}")
        detail: dict = {}
        racers = [_FirstRound(cls, member, starts[member.name], ctx, detail) for member in members]
        fields: list[Field] = []

        def field_of(active: list[Racer], round_number: int) -> Field:
            gold, unchanged, where = cls.units(ctx, detail)
            strata, draws = cls.strata_and_draws(ctx, len(gold))
            fields.append(Field(gold, unchanged, draws, where, {r.name: r.predictions for r in racers}, strata))
            return fields[-1]

        Race((first_rung(),), ctx.metric, judge_last=True).run(list(racers), field_of)  # one round: the first looks
        field = fields[-1]
        scores = {r.name: field.score(r.name, ctx.metric) for r in racers}
        stopped = {r.name: r.reason for r in racers if r.reason is not None}
        unchanged = score_on(field.gold, field.unchanged, ctx.metric, field.strata)
        found = cls(scores, unchanged, stopped, {r.name: r.seconds for r in racers}, cls.key_of(ctx), detail)
        write_atomic(path, json.dumps(asdict(found), indent=2))
        return found

    @classmethod
    def _read(cls, path: Path) -> SupervisedRace | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):  # none yet, or one written by a sentune that kept other fields
            return None

    def _work_kept(self, ctx: Context) -> bool:
        """Whether every member going on is produced already or still has what the race trained of it: a member whose
        folder holds a record of other inputs was produced again after this race (a run on other --train), and what
        its folder holds is that run's work, which its turn clears."""
        going = [c for c in ctx.plan.after_race if c.kind == "supervised" and c.name in self.seconds and c.name not in self.stopped]
        return all(c.finished(ctx) or (not record_path(c.folder(ctx)).is_file() and self.kept_work(c, ctx)) for c in going)

    # -- what each race fills in --
    @classmethod
    def applies(cls, ctx: Context) -> bool:
        raise NotImplementedError

    @classmethod
    def key_of(cls, ctx: Context) -> list:
        raise NotImplementedError

    @classmethod
    def announce(cls, names: list[str], ctx: Context) -> str:
        raise NotImplementedError

    @classmethod
    def first_round(cls, member, start_model: str, ctx: Context, detail: dict) -> np.ndarray:
        """The member's first round, trained now: its predictions of the units the race reads."""
        raise NotImplementedError

    @classmethod
    def units(cls, ctx: Context, detail: dict) -> tuple[np.ndarray, np.ndarray, str]:
        """The gold labels of the units the race reads, the unchanged model's predictions of them, and their name."""
        raise NotImplementedError

    @classmethod
    def kept_work(cls, member, ctx: Context) -> bool:
        """Whether what a member going on needs from its first round is still there."""
        raise NotImplementedError

    @classmethod
    def strata_and_draws(cls, ctx: Context, units: int) -> tuple[np.ndarray | None, np.ndarray]:
        """Which units are dev and which train pairs (None: one kind) and the paired bootstrap's resamples of them."""
        from sentune.tasks.bootstrap import resamples

        return None, resamples(units, seed=ctx.config.seed)


class FoldRace(SupervisedRace):
    """Without --train: each member's first round is fold 0 of its cross-fitting, scored on that fold's held-out
    selection units."""

    FILE = FILE

    @classmethod
    def applies(cls, ctx: Context) -> bool:
        return ctx.inputs.task.train_units() is None

    @classmethod
    def key_of(cls, ctx: Context) -> list:
        from sentune.adaptation.crossfit import FOLDS

        return [ctx.config.seed, FOLDS, len(ctx.selection_units())]

    @classmethod
    def announce(cls, names: list[str], ctx: Context) -> str:
        from sentune.adaptation.crossfit import FOLDS

        held = len(cls._held(ctx))
        if len(names) == 1:
            return f"fold race: {names[0]} trains its first fold of {FOLDS} alone, judged on its {held} held-out selection units before the rest"
        return f"fold race: {', '.join(names)} each train their first fold of {FOLDS}, compared on its {held} held-out selection units"

    @classmethod
    def _held(cls, ctx: Context) -> np.ndarray:
        from sentune.adaptation.crossfit import FOLDS, fold_rows

        return fold_rows(len(ctx.selection_units()), FOLDS, ctx.config.seed, 0)[1]

    @classmethod
    def first_round(cls, member, start_model: str, ctx: Context, detail: dict) -> np.ndarray:
        from sentune.adaptation.crossfit import FOLDS

        detail |= {"held_units": len(cls._held(ctx)), "folds": FOLDS}
        return member.first_fold(ctx, start_model)

    @classmethod
    def units(cls, ctx: Context, detail: dict) -> tuple[np.ndarray, np.ndarray, str]:
        held = cls._held(ctx)
        unchanged = ctx.selection_cosines(ctx.untuned("model")["dev"])[held]
        return ctx.selection_gold()[held], unchanged, f"the first fold's {len(held)} held-out selection {ctx.inputs.dev.unit}"

    @classmethod
    def kept_work(cls, member, ctx: Context) -> bool:
        return ctx.store.has_held(member.name, 0, "scores")  # its first fold's held-out scores, kept for its cross-fitting


class TrainRace(SupervisedRace):
    """With --train on pairs: each member's first round is first_rung() of its steps as a saved run, paused and
    evaluated there on the selection pairs. Search runs do not race on --train (each evaluation would encode the
    selection pool again): their members train one after the other."""

    FILE = TRAIN_FILE

    @classmethod
    def applies(cls, ctx: Context) -> bool:
        return ctx.inputs.task.train_units() is not None and not ctx.inputs.task.search

    @classmethod
    def key_of(cls, ctx: Context) -> list:
        from sentune.adaptation.evidence import held_out_digest

        modes = sorted({str(c.evidence_mode(ctx)) for c in ctx.plan.after_race if c.kind == "supervised"})  # the rows it trains on
        return [ctx.inputs.train_sha256, held_out_digest(ctx.evidence), ctx.config.seed, modes, cls.rows(ctx).digest]

    @classmethod
    def announce(cls, names: list[str], ctx: Context) -> str:
        if len(names) == 1:
            return f"race: {names[0]} trains {first_rung():g} of its steps on --train alone, judged on the selection pairs before the rest"
        return f"race: {', '.join(names)} each train {first_rung():g} of their steps on --train, compared on the selection pairs"

    @classmethod
    def first_round(cls, member, start_model: str, ctx: Context, detail: dict) -> np.ndarray:
        from sentune.training.runs import train_run

        recipe = member.race_recipe(ctx, start_model)
        step = max(1, math.ceil(first_rung() * recipe.training.max_steps))
        detail.setdefault("at_step", {})[member.name] = step
        data, dev = member.given_data(ctx), ctx.training_dev_data()
        train_run(
            recipe, member.run_folder(ctx), data_dir=ctx.data_dir or Path("."), pause_at_step=step, show_progress=ctx.config.show_progress, data=data, dev=dev
        )
        on_dev = np.load(member.run_folder(ctx) / "dev_cosines" / f"step-{step}.npy")
        rows = cls.rows(ctx)
        if rows.train:
            from sentune.adaptation.race_rows import train_cosines

            on_train = train_cosines(rows, member.run_folder(ctx) / "checkpoints" / f"checkpoint-{step}", ctx)
            if on_train is None:  # its paused checkpoint is gone (cannot happen after train_run): a loud failure, not a dev-only race
                raise RuntimeError(f"{member.name}: no checkpoint at step {step} to score the race's train pairs on")
            return np.concatenate([on_dev, on_train])
        return on_dev

    @classmethod
    def rows(cls, ctx: Context):
        """The race's rows (sentune.adaptation.race_rows): the dev selection pairs, and the evidence selection pairs the label-
        free race reads when every member is held out of them (evidence_mode HELD_OUT: none trains on them, so each is
        judged on them as the candidates it races against will be); cross-fitted members train on those pairs, and race
        on the dev selection pairs alone."""
        from sentune.adaptation.race_rows import race_rows

        rows = race_rows(ctx)
        return rows if cls.reads_train_pairs(ctx) else rows.dev_only()

    @staticmethod
    def reads_train_pairs(ctx: Context) -> bool:
        """Whether its rows hold the evidence selection pairs: every member is held out of them (rows)."""
        from sentune.adaptation.names import HELD_OUT

        members = [c for c in ctx.plan.after_race if c.kind == "supervised"]  # by kind: supervised.py imports this module
        return bool(members) and all(c.evidence_mode(ctx) == HELD_OUT for c in members)

    @classmethod
    def train_pairs_read(cls, ctx: Context) -> int:
        """How many evidence selection pairs it checks each member's first round on (0: the dev selection pairs alone)."""
        from sentune.adaptation.race_rows import race_train_pairs

        return race_train_pairs(ctx) if cls.reads_train_pairs(ctx) else 0

    @classmethod
    def units(cls, ctx: Context, detail: dict) -> tuple[np.ndarray, np.ndarray, str]:
        rows = cls.rows(ctx)
        detail["rows"] = rows.counted()
        return rows.gold, rows.unchanged, f"{rows.words(ctx.inputs.dev.unit)} after {first_rung():g} of their steps"

    @classmethod
    def strata_and_draws(cls, ctx: Context, units: int) -> tuple[np.ndarray | None, np.ndarray]:
        rows = cls.rows(ctx)
        assert rows.dev + rows.train == units
        return rows.strata, rows.draws(ctx.config.seed)

    @classmethod
    def kept_work(cls, member, ctx: Context) -> bool:
        return (member.run_folder(ctx) / "config.yaml").is_file()  # a saved run: train_run goes on from wherever it stopped


class _FirstRound(Racer):
    """A member as a racer of the engine: its one round is its race's first round (a fold, or the first rung)."""

    def __init__(self, race: type[SupervisedRace], member, start_model: str, ctx: Context, detail: dict) -> None:
        self.race, self.member, self.name, self.start_model, self.ctx, self.detail = race, member, member.name, start_model, ctx, detail
        self.predictions = np.zeros(0)
        self.seconds = 0.0
        self.reason: str | None = None

    def advance(self, rung: float, round_number: int) -> bool:
        member, ctx = self.member, self.ctx
        # what a run on other inputs left of it, its record with it: else, at its turn, that record's inputs differ and
        # its folder would go, this race's work with it
        member.forget_other_inputs("   ", ctx)
        shutil.rmtree(member.folder(ctx), ignore_errors=True)  # a record-less leftover (a run cut off) too
        member.folder(ctx).mkdir(parents=True)
        started = time.perf_counter()
        self.predictions = self.race.first_round(member, self.start_model, ctx, self.detail)
        self.seconds = time.perf_counter() - started
        return False  # it goes on (or not) outside the race: the race judges its first round only

    def stop(self, reason: str, round_number: int, field: Field) -> None:
        self.reason = reason
        say(f"    race: {self.name} stops: {reason}")


def race_supervised(ctx: Context) -> SupervisedRace | None:
    """The run's supervised race: on the selection part's folds without --train, on --train's first rung with it."""
    return FoldRace.run(ctx) or TrainRace.run(ctx)


def _members(ctx: Context) -> tuple[list, dict[str, str]]:
    """The supervised candidates of the run not yet produced on its inputs, and the model each starts from; one with
    nothing to start from (supervised-stacked without a trained candidate) skips itself and does not race."""
    # by kind, not class: sentune.adaptation.candidates.supervised imports this module
    members = [c for c in ctx.plan.after_race if c.kind == "supervised" and not c.finished(ctx)]
    found = {c.name: c.start_model(ctx) for c in members}
    starts = {name: start for name, start in found.items() if start is not None}
    return [c for c in members if c.name in starts], starts
