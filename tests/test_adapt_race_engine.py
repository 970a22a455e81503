"""The race engine every kind of racer runs on (sentune.adaptation.race_engine), on seeded toys whose answers are known
by construction: racing stops one far behind the unchanged model after its first round, successive halving keeps at
most half of the rest each round, the best on the units first, and a racer that ends by itself (a fusion, scored at
once) stays a rival the others are judged against."""

from __future__ import annotations

import numpy as np

from sentune.adaptation.race_engine import Field, Race, Racer
from sentune.core.metrics import METRICS
from sentune.tasks.bootstrap import resamples


class Toy(Racer):
    """A racer whose predictions of the units are fixed; `ends_at`: the rung at which it ends by itself."""

    def __init__(self, name: str, predictions: np.ndarray, ends_at: float | None = None) -> None:
        self.name, self.predictions, self.ends_at = name, predictions, ends_at
        self.rounds: list[int] = []
        self.stopped: tuple[int, str] | None = None

    def advance(self, rung: float, round_number: int) -> bool:
        self.rounds.append(round_number)
        return self.ends_at is not None and rung >= self.ends_at

    def stop(self, reason: str, round_number: int, field: Field) -> None:
        self.stopped = (round_number, reason)


def _race(gold: np.ndarray, unchanged: np.ndarray, racers: list[Toy]) -> list[Racer]:
    def field_of(active: list[Racer], round_number: int) -> Field:
        standing = {r.name: r.predictions for r in racers if r in active or r.stopped is None}  # the finished stay rivals
        return Field(gold, unchanged, resamples(len(gold), seed=0), f"the toy units after round {round_number}", standing)

    return Race((1 / 4, 1 / 2, 1.0), "spearman").run(list(racers), field_of)


def test_halving_keeps_the_best_racer_and_stops_the_others_at_the_expected_round():
    rng = np.random.default_rng(0)
    gold = rng.normal(size=100)
    unchanged = gold + rng.normal(0, 1.0, 100)
    bad = Toy("bad", gold + rng.normal(0, 6.0, 100))
    alike = [Toy(name, gold + rng.normal(0, 0.8, 100), ends_at=1.0) for name in ("a", "b", "c")]  # one quality: none behind another
    finished = _race(gold, unchanged, [bad, *alike])
    naive = {t.name: METRICS["spearman"].score(gold, t.predictions) for t in alike}
    order = sorted(naive, key=lambda name: -naive[name])
    by_name = {t.name: t for t in alike}
    assert finished == []  # the one left ran to its last rung and ended by itself
    assert bad.stopped is not None and bad.stopped[0] == 1 and bad.stopped[1].startswith("behind the unchanged model on the toy units after round 1")
    assert by_name[order[2]].stopped is not None and by_name[order[2]].stopped[0] == 1 and "successive halving" in by_name[order[2]].stopped[1]
    assert by_name[order[1]].stopped is not None and by_name[order[1]].stopped[0] == 2 and "successive halving" in by_name[order[1]].stopped[1]
    assert by_name[order[0]].stopped is None and by_name[order[0]].rounds == [1, 2, 3]  # the best on the units trains to the end
    assert bad.rounds == [1] and by_name[order[2]].rounds == [1] and by_name[order[1]].rounds == [1, 2]


def test_a_racer_scored_at_once_ends_in_its_first_round_and_leads_those_behind_it():
    """A fusion (nearly free) ends in round 1; a training far behind it stops there, behind it, though ahead of the
    unchanged model; one as good as it (a tie) goes on to the end."""
    rng = np.random.default_rng(1)
    gold = rng.normal(size=200)
    unchanged = gold + rng.normal(0, 2.0, 200)
    fusion = Toy("fusion", gold + rng.normal(0, 0.3, 200), ends_at=0.0)
    behind = Toy("behind", gold + rng.normal(0, 1.2, 200), ends_at=1.0)
    level = Toy("level", fusion.predictions.copy(), ends_at=1.0)  # a tie: not behind, and the first listed leads
    _race(gold, unchanged, [fusion, behind, level])
    assert fusion.rounds == [1] and fusion.stopped is None
    assert behind.stopped is not None and behind.stopped[0] == 1 and behind.stopped[1].startswith("behind fusion on the toy units after round 1")
    assert level.stopped is None and level.rounds == [1, 2, 3]
