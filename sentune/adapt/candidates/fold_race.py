"""The fold race of the cross-fitted supervised candidates (`supervised` and `supervised-stacked` without --train),
raced like the training candidates (sentune.adapt.race) with a fold where those have a fraction of their steps.

Each member trains the first fold of its cross-fitting (sentune.adapt.crossfit; the same rows for every member, one
seed) and scores that fold's held-out selection units. On those units only, by the rules of the training race: a
member behind the unchanged model, or behind the leader, in ≥ 95 % of the paired bootstrap resamples stops; of the rest,
at most half (rounded up) go on, the best first (successive halving). Only those going on train the other folds and the
refit. Every unit the race reads is a selection unit scored by a model that did not train on it, so the confirmation
part stays independent of the choice (sentune.adapt.decide). With two members, one goes on: the cost of the pair
falls from two cross-fittings to one and a fold.

The race is run by the first member to produce and written to OUT/candidates/FILE; each member reads its verdict when
its turn comes, so a resumed run does not race again."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from sentune.core.metrics import METRICS
from sentune.core.results import write_atomic

if TYPE_CHECKING:
    from sentune.adapt.context import Context

FILE = "supervised-fold-race.json"


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
        from sentune.adapt.candidates.supervised import Supervised
        from sentune.adapt.crossfit import FOLDS, fold_rows
        from sentune.adapt.records import record_path

        path = ctx.out / "candidates" / FILE
        units = len(ctx.selection_units())
        if path.is_file():
            found = cls(**json.loads(path.read_text()))
            if (found.seed, found.folds, found.units) == (ctx.config.seed, FOLDS, units):
                return found
        members = [c for c in ctx.plan.after_race if isinstance(c, Supervised) and not record_path(c.folder(ctx)).is_file()]
        found_starts = {c.name: c.start_model(ctx) for c in members}
        starts = {name: start for name, start in found_starts.items() if start is not None}  # one with nothing to start from skips itself
        members = [c for c in members if c.name in starts]
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
        stopped = race_verdict(gold, predictions, unchanged, ctx.metric, ctx.config.seed, ctx.inputs.dev.unit)
        metric = METRICS[ctx.metric]
        found = cls(
            {n: float(metric.score(gold, p)) for n, p in predictions.items()},
            float(metric.score(gold, unchanged)),
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


def race_verdict(gold: np.ndarray, predictions: dict[str, np.ndarray], unchanged: np.ndarray, metric: str, seed: int, unit: str = "pairs") -> dict[str, str]:
    """Which members stop, and why (sentune.adapt.race's two rules on one fold's held-out units); ties keep the
    listed order."""
    from sentune.adapt.race import CONFIDENCE, share_behind
    from sentune.tasks.bootstrap import resamples

    draws = resamples(len(gold), seed=seed)
    score = {n: float(METRICS[metric].score(gold, p)) for n, p in predictions.items()}
    leader = max(score, key=lambda n: score[n])  # the first listed on a tie
    where = f"the first fold's {len(gold)} held-out selection {unit}"
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
        stopped[name] = f"in the lower half of the fold race ({score[name]:.2f} vs {going[0]}'s {score[going[0]]:.2f} on {where}; successive halving)"
    return stopped
