"""The supervised candidates (`supervised`, `supervised-stacked`) raced like the training candidates
(sentune.adapt.race): after a first round, by its two rules on selection units no member trained on, one behind the
unchanged model or the leader in ≥ 95 % of the paired bootstrap resamples stops, and of the rest at most half (rounded
up) go on, the best first. With two members one goes on: the pair costs one training and a first round instead of two.

The race is run by the first member to produce and written to OUT/candidates/; each member reads its verdict when its
turn comes, so a resumed run does not race again.

**Without --train: the fold race (FoldRace).** A fold where the training race has a fraction of the steps.

Each member trains the first fold of its cross-fitting (sentune.adapt.crossfit; the same rows for every member, one
seed) and scores that fold's held-out selection units. On those units only, by the rules of the training race: a
member behind the unchanged model, or behind the leader, in ≥ 95 % of the paired bootstrap resamples stops; of the rest,
at most half (rounded up) go on, the best first (successive halving). Only those going on train the other folds and the
refit. Every unit the race reads is a selection unit scored by a model that did not train on it, so the confirmation
part stays independent of the choice (sentune.adapt.decide).

**With --train: the first rung (TrainRace), pairs runs.** Each member is a saved run (sentune.train.runs) that pauses
at FIRST_RUNG of its steps and is evaluated there on the selection pairs, which --train never holds; the one going on
resumes its run to the end and keeps its last step, as its recipe fixed in advance says: the race decides only which
trains on, never which checkpoint is kept. On search data each evaluation would encode the selection pool again: the
members train there one after the other, unraced."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sentune.core.metrics import METRICS
from sentune.core.results import write_atomic

if TYPE_CHECKING:
    from sentune.adapt.context import Context

FILE = "supervised-fold-race.json"
TRAIN_FILE = "supervised-train-race.json"
FIRST_RUNG = 1 / 8  # the training race's first round (sentune.adapt.race.RUNGS)


@dataclass
class FoldRace:
    scores: dict[str, float]  # each member's score on the first fold's held-out selection units
    unchanged: float  # the unchanged model's on the same units
    stopped: dict[str, str]  # member -> why it stops
    seconds: dict[str, float]  # each member's first fold (training and scoring)
    held: int  # the first fold's held-out selection units
    seed: int
    folds: int
    units: int  # the selection units cross-fitted

    def summary(self) -> dict:
        return {"held_units": self.held, "scores": self.scores, "unchanged": self.unchanged, "stopped": self.stopped}

    @classmethod
    def run(cls, ctx: Context) -> FoldRace | None:
        """This run's fold race: read back, or run now (by the first member to produce). None: fewer than two members."""
        from sentune.adapt.crossfit import FOLDS, fold_rows

        path = ctx.out / "candidates" / FILE
        units = len(ctx.selection_units())
        if path.is_file():
            found = cls(**json.loads(path.read_text()))
            if (found.seed, found.folds, found.units) == (ctx.config.seed, FOLDS, units):
                return found
        members, starts = _members(ctx)
        if len(members) < 2:
            return None
        held = fold_rows(units, FOLDS, ctx.config.seed, 0)[1]
        print(
            f"    fold race: {', '.join(c.name for c in members)} each train their first fold of {FOLDS}, compared on its {len(held)} held-out selection units",
            flush=True,
        )
        predictions, seconds = {}, {}
        for member in members:
            member.folder(ctx).mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            predictions[member.name] = member.first_fold(ctx, starts[member.name])
            seconds[member.name] = time.perf_counter() - started
        gold = ctx.selection_gold()[held]
        unchanged = ctx.selection_cosines(ctx.untuned("model")["dev"])[held]
        stopped = race_verdict(
            gold, predictions, unchanged, ctx.metric, ctx.config.seed, f"the first fold's {len(held)} held-out selection {ctx.inputs.dev.unit}"
        )
        found = cls(
            *_scores(gold, predictions, unchanged, ctx.metric),
            stopped,
            seconds,
            len(held),
            ctx.config.seed,
            FOLDS,
            units,
        )
        for name, reason in stopped.items():
            print(f"    fold race: {name} stops: {reason}", flush=True)
        write_atomic(path, json.dumps(asdict(found), indent=2))
        return found


@dataclass
class TrainRace:
    scores: dict[str, float]  # each member's selection score at the first rung
    unchanged: float
    stopped: dict[str, str]
    seconds: dict[str, float]  # each member's first rung (its training and evaluation)
    steps: dict[str, int]  # the step each paused at
    train_sha256: str | None
    held_out: str | None  # the train pairs left out of training to judge (sentune.adapt.evidence.held_out_digest)
    seed: int

    def summary(self) -> dict:
        return {"at_step": self.steps, "scores": self.scores, "unchanged": self.unchanged, "stopped": self.stopped}

    @classmethod
    def run(cls, ctx: Context) -> TrainRace | None:
        """This run's race on --train: read back, or run now (by the first member to produce). None: fewer than two
        members, or a search run."""
        from sentune.adapt.evidence import held_out_digest
        from sentune.train.runs import train_run

        if ctx.inputs.task.search:
            return None
        path = ctx.out / "candidates" / TRAIN_FILE
        if path.is_file():
            found = cls(**json.loads(path.read_text()))
            if (found.train_sha256, found.held_out, found.seed) == (ctx.inputs.train_sha256, held_out_digest(ctx.evidence), ctx.config.seed):
                return found
        members, starts = _members(ctx)
        if len(members) < 2:
            return None
        print(
            f"    race: {', '.join(c.name for c in members)} each train {FIRST_RUNG:g} of their steps on --train, compared on the selection pairs", flush=True
        )
        predictions, seconds, steps = {}, {}, {}
        for member in members:
            started = time.perf_counter()
            recipe = member.race_recipe(ctx, starts[member.name])
            steps[member.name] = max(1, math.ceil(FIRST_RUNG * recipe.training.max_steps))
            train_run(
                recipe, member.run_folder(ctx), data_dir=ctx.data_dir or Path("."), pause_at_step=steps[member.name], show_progress=ctx.config.show_progress
            )
            predictions[member.name] = np.load(member.run_folder(ctx) / "dev_cosines" / f"step-{steps[member.name]}.npy")
            seconds[member.name] = time.perf_counter() - started
        gold = ctx.selection_gold()
        unchanged = ctx.selection_cosines(ctx.untuned("model")["dev"])
        where = f"the {len(gold)} selection pairs after {FIRST_RUNG:g} of their steps"
        stopped = race_verdict(gold, predictions, unchanged, ctx.metric, ctx.config.seed, where)
        for name, reason in stopped.items():
            print(f"    race: {name} stops: {reason}", flush=True)
        found = cls(
            *_scores(gold, predictions, unchanged, ctx.metric),
            stopped,
            seconds,
            steps,
            ctx.inputs.train_sha256,
            held_out_digest(ctx.evidence),
            ctx.config.seed,
        )
        write_atomic(path, json.dumps(asdict(found), indent=2))
        return found


def _members(ctx: Context) -> tuple[list, dict[str, str]]:
    """The supervised candidates of the run still to produce, and the model each starts from; one with nothing to start
    from (supervised-stacked without a trained candidate) skips itself and does not race."""
    from sentune.adapt.records import record_path

    # by kind, not class: sentune.adapt.candidates.supervised imports this module
    members = [c for c in ctx.plan.after_race if c.kind == "supervised" and not record_path(c.folder(ctx)).is_file()]
    found = {c.name: c.start_model(ctx) for c in members}
    starts = {name: start for name, start in found.items() if start is not None}
    return [c for c in members if c.name in starts], starts


def _scores(gold: np.ndarray, predictions: dict[str, np.ndarray], unchanged: np.ndarray, metric: str) -> tuple[dict[str, float], float]:
    """Each member's score on the units the race read, and the unchanged model's."""
    found = METRICS[metric]
    return {n: float(found.score(gold, p)) for n, p in predictions.items()}, float(found.score(gold, unchanged))


def race_verdict(gold: np.ndarray, predictions: dict[str, np.ndarray], unchanged: np.ndarray, metric: str, seed: int, where: str) -> dict[str, str]:
    """Which members stop, and why (sentune.adapt.race's two rules on the units `where` names); ties keep the listed
    order."""
    from sentune.adapt.race import CONFIDENCE, share_behind
    from sentune.tasks.bootstrap import resamples

    draws = resamples(len(gold), seed=seed)
    score = {n: float(METRICS[metric].score(gold, p)) for n, p in predictions.items()}
    leader = max(score, key=lambda n: score[n])  # the first listed on a tie
    stopped: dict[str, str] = {}
    going = []
    for name, predicted in predictions.items():
        for rival, theirs in (("the unchanged model", unchanged), (leader, predictions[leader])):
            if rival == name:
                continue
            behind = share_behind(gold, predicted, theirs, metric, draws)
            if behind >= CONFIDENCE:
                rival_score = float(METRICS[metric].score(gold, theirs))
                stopped[name] = f"behind {rival} on {where} ({score[name]:.2f} vs {rival_score:.2f}, in {behind:.1%} of the resamples)"
                break
        else:
            going.append(name)
    going.sort(key=lambda n: -score[n])  # stable: a tie keeps the listed order
    keep = math.ceil(len(going) / 2)
    for name in going[keep:]:
        stopped[name] = f"in the lower half of the race ({score[name]:.2f} vs {going[0]}'s {score[going[0]]:.2f} on {where}; successive halving)"
    return stopped
