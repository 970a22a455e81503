"""One race for every kind of adapt candidate that can be looked at early and cheaply (Race): its racers (Racer) each
advance to a share of their budget a round (a paused training its next rung, sentune.adaptation.race; a supervised
candidate its first fold or first rung, sentune.adaptation.candidates.supervised_race; a fusion, scored at once, ends in
its first round), and after a round, on the units the Field of that round names (selection units only, so the
confirmation of the final choice stays independent, sentune.adaptation.decide):

1. racing (Maron & Moore, "Hoeffding races", NIPS 1994; Birattari et al., "A racing algorithm for configuring
   metaheuristics", GECCO 2002): a racer whose standing is behind the unchanged model, or behind the leader (the best
   so far, racing or finished), in ≥ 95 % of 1,000 paired bootstrap resamples stops;
2. successive halving (Jamieson & Talwalkar, "Non-stochastic best arm identification and hyperparameter
   optimization", AISTATS 2016): of those still racing, at most half (rounded up) go on, the best on those units.

A racer that ends by itself (its last step, early stopping) leaves the race and stays a rival: the leader may be it.
After a round's rules, the caller's time rule (`keep_to`) may stop those of the rest, best first, whose remaining rounds
no longer fit (sentune.adaptation.time_plan.TimePlan.go_on: under the default time, whose trainings nothing caps, or
under --time once nothing is left beside the first looks held for those not begun)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sentune.adaptation.race_rows import differences, score_on

CONFIDENCE = 0.95  # a racer behind a rival in this share of the resamples stops


@dataclass(frozen=True)
class Field:
    """What one round compares on: the units' gold labels, the unchanged model's predictions of them, the paired
    bootstrap's resamples, the units' words in a reason, and `strata` (which are dev and which train pairs, each
    ranked among their own; None: one kind). `standing`: each racer's and rival's predictions of them (a racer not
    evaluated yet has none and goes on); `rows`: what the racers' stop records say of the units (their kind's)."""

    gold: np.ndarray
    unchanged: np.ndarray
    draws: np.ndarray
    where: str
    standing: dict[str, np.ndarray]
    strata: np.ndarray | None = None
    rows: Any = None

    def score(self, name: str, metric: str) -> float:
        return score_on(self.gold, self.standing[name], metric, self.strata)


class Racer:
    """One candidate in a race: `advance` takes it to a share of its budget; `stop` records why the race stopped it."""

    name: str

    def advance(self, rung: float, round_number: int) -> bool:
        """Go on to `rung` of the budget (round `round_number`, from 1); True when it has ended by itself."""
        raise NotImplementedError

    def stop(self, reason: str, round_number: int, field: Field) -> None:
        raise NotImplementedError

    def out_of_time(self, reason: str, round_number: int, field: Field) -> None:
        """The time left cannot take it further (the caller's keep_to): it stops as one behind would, unless its kind
        can end where it is and still be judged (a training: its best checkpoint so far)."""
        self.stop(reason, round_number, field)


@dataclass(frozen=True)
class Race:
    """Rounds at `rungs` (shares of each racer's budget); after each round but the last (and after the last too when
    `judge_last`: a race of first looks, whose racers go on outside it), those behind stop."""

    rungs: tuple[float, ...]
    metric: str
    judge_last: bool = False

    def run(
        self,
        racers: list[Racer],
        field_of: Callable[[list[Racer], int], Field | None],
        after_round: Callable[[int, list[Racer]], None] | None = None,
        keep_to: Callable[[list[Racer], int], dict[str, str]] | None = None,
    ) -> list[Racer]:
        """Race `racers`; `field_of(active, round)`: the round's field (None: nothing to compare yet, all go on);
        `after_round(round, active)`: what the caller does between rounds; `keep_to(going, round)`: of those going on
        (best first) after a round but the last, the ones the time left cannot take further, each with why (only a
        racer the round's field scored is stopped so). Returns those still racing after the last."""
        active = list(racers)
        for index, rung in enumerate(self.rungs):
            if not active:
                break
            for racer in list(active):
                if racer.advance(rung, index + 1):
                    active.remove(racer)
            if after_round is not None:
                after_round(index + 1, active)
            if active and (index < len(self.rungs) - 1 or self.judge_last):
                field = field_of(active, index + 1)
                active = self.eliminate(active, field, index + 1)
                if keep_to is not None and field is not None and index < len(self.rungs) - 1:
                    active = self.out_of_time(active, field, keep_to(active, index + 1), index + 1)
        return active

    @staticmethod
    def out_of_time(active: list[Racer], field: Field, late: dict[str, str], round_number: int) -> list[Racer]:
        """Stop the racers `late` names (with its reasons) that the round's field scored; the rest go on."""
        stopped = {name for name in late if name in field.standing}
        for racer in active:
            if racer.name in stopped:
                racer.out_of_time(late[racer.name], round_number, field)
        return [r for r in active if r.name not in stopped]

    def eliminate(self, active: list[Racer], field: Field | None, round_number: int) -> list[Racer]:
        """Stop those behind on `field`; the rest, best first (one not evaluated yet last among equals)."""
        if field is None:
            return active
        racing = [r.name for r in active if r.name in field.standing]
        stopped = self.verdict(field, racing)
        for racer in active:
            if racer.name in stopped:
                racer.stop(stopped[racer.name], round_number, field)
        going = [r for r in active if r.name not in stopped]
        return sorted(going, key=lambda r: -field.score(r.name, self.metric) if r.name in field.standing else 0.0)

    def verdict(self, field: Field, racing: list[str]) -> dict[str, str]:
        return verdict(field.gold, field.standing, racing, field.unchanged, self.metric, field.draws, field.where, field.strata)


def verdict(
    gold: np.ndarray,
    standing: dict[str, np.ndarray],
    racing: list[str],
    unchanged: np.ndarray,
    metric: str,
    draws: np.ndarray,
    where: str,
    strata: np.ndarray | None = None,
) -> dict[str, str]:
    """Which of `racing` stop, and why, by the race's two rules on the units `where` names: one behind the unchanged
    model or behind the leader (the best of `standing`, racing or finished; the first listed on a tie) in ≥ CONFIDENCE
    of the paired bootstrap resamples `draws` stops; of the rest at most half (rounded up) go on, the best first (a tie
    keeps the listed order). `strata`: which units are dev and which train pairs, each ranked among their own
    (sentune.adaptation.race_rows; `draws` then resample within each)."""
    score = {name: score_on(gold, predicted, metric, strata) for name, predicted in standing.items()}
    leader = max(score, key=lambda name: score[name])
    stopped: dict[str, str] = {}
    going = []
    for name in racing:
        for rival, theirs in (("the unchanged model", unchanged), (leader, standing[leader])):
            if rival == name:
                continue
            behind = share_behind(gold, standing[name], theirs, metric, draws, strata)
            if behind >= CONFIDENCE:
                stopped[name] = (
                    f"behind {rival} on {where} ({score[name]:.2f} vs {score_on(gold, theirs, metric, strata):.2f}, in {behind:.1%} of the resamples)"
                )
                break
        else:
            going.append(name)
    going.sort(key=lambda name: -score[name])
    keep = math.ceil(len(going) / 2)
    for name in going[keep:]:
        stopped[name] = f"in the lower half of the race ({score[name]:.2f} vs {going[0]}'s {score[going[0]]:.2f} on {where}; successive halving)"
    return stopped


def share_behind(gold: np.ndarray, candidate: np.ndarray, rival: np.ndarray, metric: str, draws: np.ndarray, strata: np.ndarray | None = None) -> float:
    """The share of paired bootstrap resamples in which the candidate scores strictly below the rival (a tie is not behind)."""
    return float(np.mean(differences(gold, candidate, rival, metric, draws, strata) < 0))
