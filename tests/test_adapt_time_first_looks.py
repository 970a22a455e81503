"""issue 80 item 2, time where the evidence points (sentune.adaptation.time_plan): the plan buys every candidate's
first look when that fits, not only those all of which fit; a cheap follow-up keeps its minutes; a run without --time
goes on while a candidate's rest fits and names the --time that would let it; and the race engine stops, best first,
those whose rest does not. Toys with known answers and a fake clock."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_supervised import _args, labelled  # noqa: F401  # the labelled pairs fixture

from sentune.adaptation import time_plan
from sentune.adaptation.race_engine import Field, Race, Racer
from sentune.adaptation.time_plan import DEFAULT_TIME, Planned, TimePlan, fitted, time_to_include
from sentune.tasks.bootstrap import resamples


def relatedness_toy() -> tuple[Planned, list[Planned]]:
    """The issue's relatedness run, in minutes: sed expected 31.2 (its members and learner's first round 12), supervised
    20 (first rung 4), wise 1.6 built on either, two raced trainings of 9 (first rounds 1.5)."""
    m = 60.0
    first = Planned("unchanged", 1 * m, 0.0)
    items = [
        Planned("simcse", 9 * m, 0.0, first=1.5 * m),
        Planned("ct", 9 * m, 0.0, first=1.5 * m),
        Planned("sed", 31.2 * m, 0.5, needs=("simcse", "ct"), first=12 * m),
        Planned("supervised", 20 * m, 2.0, first=4 * m),
        Planned("wise", 1.6 * m, 1.0, needs=("supervised", "sed", "simcse", "ct")),
    ]
    return first, items


def test_a_candidate_whose_first_look_fits_is_planned_though_all_of_it_does_not():
    first, items = relatedness_toy()
    default = fitted(DEFAULT_TIME, first, items, already=60.0, given=False)
    # 1 + 1 (spent) + 1.5 + 1.5 + 12 + 4 + 1.6 = 22.6 min of first looks fit in 30; all of them, 72.8 min, would not
    assert set(default.kept) == {"unchanged", "simcse", "ct", "sed", "supervised", "wise"} and not default.left_out
    assert default.summary()["kept"]["sed"] == {"expected_s": 1872.0, "expected_gain": 0.5, "first_look_s": 720.0}
    # the plan before this change, all of each candidate: sed does not fit beside the others
    whole = [Planned(i.name, i.seconds, i.gain, i.needs) for i in items]
    assert "sed" in fitted(DEFAULT_TIME, first, whole, already=60.0, given=False).left_out
    # one whose first look does not fit is left out, said with both, and named with the --time that includes its look
    tight = fitted(10 * 60.0, first, items, already=60.0)
    assert "sed" not in tight.kept and tight.left_out["sed"].startswith("its first look expected 12.0 min (all of it 31.2 min)")
    including = time_to_include(tight, first, items, already=60.0)
    assert "sed" in fitted(including["sed"] * 60.0, first, items, already=60.0).kept
    assert "sed" not in fitted((including["sed"] - 1) * 60.0, first, items, already=60.0).kept


def test_a_candidate_built_on_others_brings_their_first_looks_along():
    plan = TimePlan(limit=100.0)
    plan.fit([Planned("sed", 300.0, 3.0, needs=("simcse",), first=40.0), Planned("simcse", 200.0, 0.0, first=30.0), Planned("dear", 90.0, 0.1)])
    assert list(plan.kept) == ["simcse", "sed"]  # 30 + 40 of 100; "dear", all first look, has 30 left for its 90
    assert plan.left_out["dear"] == "expected 1.5 min; 0.5 min of --time left for it"


def test_a_cheap_follow_up_keeps_its_minutes(monkeypatch):
    """wise (1.6 min, built on supervised) under the default time: supervised ran over, the clock is past the limit;
    wise still runs, its minutes were planned with supervised. Under --time it is judged on them unscaled: twice late
    as the run is, it fits in its own 1.6 min."""
    now = [0.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    kept = lambda: {"supervised": Planned("supervised", 600.0, 2.0, first=120.0), "wise": Planned("wise", 96.0, 1.0, needs=("supervised",))}  # noqa: E731
    default = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, kept=kept())
    assert default.follow_up("wise") and not default.follow_up("supervised")
    now[0] = DEFAULT_TIME + 60.0
    default.finished("supervised", DEFAULT_TIME + 50.0)
    assert default.still_fits("wise") is None
    given = TimePlan(limit=1000.0, started=0.0, kept=kept())
    now[0] = 900.0
    given.finished("supervised", 700.0)  # 700 s for 600 expected: scale 7/6, which would make wise's 96 s 112
    assert given.scale() > 1 and given.still_fits("wise") is None  # 96 s of the 100 left
    now[0] = 910.0
    assert "expected 1.6 min now, 1.5 min left" in given.still_fits("wise")
    # one dearer than CHEAP_FOLLOW_UP of the limit is judged as any other
    dear = TimePlan(limit=600.0, started=0.0, given=False, kept={"a": Planned("a", 60.0, 0.0), "w": Planned("w", 90.0, 1.0, needs=("a",))})
    assert not dear.follow_up("w")


def test_a_default_run_goes_on_while_the_rest_fits_best_first_and_names_the_time_that_would_let_it(monkeypatch):
    now = [600.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    plan.kept = {n: Planned(n, 900.0, 1.0, first=60.0) for n in ("best", "second", "third")} | {"later": Planned("later", 300.0, 1.0, first=120.0)}
    plan.begin(["best", "second", "third"])
    # 1200 s left, 120 held for later's first look: 1080 for the rests, best first: 600 + 400 fit, 300 more do not
    late = plan.go_on({"best": 600.0, "second": 400.0, "third": 300.0})
    assert list(late) == ["third"]
    # 600 spent + 1000 taken + its 300 + 120 held = 2020 s: 34 minutes
    assert late["third"] == "the default --time 30m: the rest of it expected 5.0 min, 1.3 min left; --time 34m would let it go on"
    assert "--time 34m" in plan.go_on({"third": 300.0 + 1000.0})["third"]
    plan.given = True  # under --time each training is capped at its share instead: none is stopped here
    assert plan.go_on({"best": 600.0, "second": 400.0, "third": 300.0}) == {}
    assert plan.rest("best") == pytest.approx(840.0)


class Timed(Racer):
    """A racer whose predictions are fixed and that never ends by itself; it records the round it stopped at."""

    def __init__(self, name: str, predictions: np.ndarray) -> None:
        self.name, self.predictions = name, predictions
        self.rounds: list[int] = []
        self.stopped: tuple[int, str] | None = None

    def advance(self, rung: float, round_number: int) -> bool:
        self.rounds.append(round_number)
        return False

    def stop(self, reason: str, round_number: int, field: Field) -> None:
        self.stopped = (round_number, reason)


def test_the_race_stops_those_whose_rest_does_not_fit_after_the_rules_best_first():
    """Four alike racers (none behind another with 95 % confidence): halving keeps two after round 1; the time rule,
    given room for one rest, lets the better of them go on and stops the other at round 1 with the time's reason."""
    from sentune.core.metrics import METRICS

    rng = np.random.default_rng(3)
    gold = rng.normal(size=120)
    unchanged = gold + rng.normal(0, 3.0, 120)
    racers = [Timed(name, gold + rng.normal(0, 0.8, 120)) for name in "abcd"]
    naive = sorted(racers, key=lambda r: -METRICS["spearman"].score(gold, r.predictions))
    seen: list[list[str]] = []

    def field_of(active: list[Racer], round_number: int) -> Field:
        return Field(gold, unchanged, resamples(120, seed=0), "the toy units", {r.name: r.predictions for r in racers})

    def keep_to(going: list[Racer], round_number: int) -> dict[str, str]:
        seen.append([r.name for r in going])
        return {r.name: "out of time" for r in going[1:]}  # room for the best one's rest only

    Race((1 / 4, 1 / 2, 1.0), "spearman").run(list(racers), field_of, keep_to=keep_to)
    assert seen[0] == [naive[0].name, naive[1].name]  # after halving, best first
    assert all(r.stopped is not None and "successive halving" in r.stopped[1] for r in naive[2:])
    assert naive[1].stopped == (1, "out of time") and naive[1].rounds == [1]
    assert naive[0].stopped is None and naive[0].rounds == [1, 2, 3]


def test_the_supervised_race_members_going_on_stop_when_their_rest_does_not_fit(monkeypatch):
    from sentune.adaptation.phases import stop_for_time

    now = [1500.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, kept={"supervised": Planned("supervised", 900.0, 2.0, first=150.0)})
    timing.begin("supervised")
    race = SimpleNamespace(seconds={"supervised": 150.0, "supervised-stacked": 150.0}, stopped={"supervised-stacked": "behind"}, scores={"supervised": 80.0})
    stop_for_time(race, SimpleNamespace(time_plan=timing))
    # 300 s left, its rest 750: it stops after its first look, as one the race stopped, and the plan names it
    assert race.stopped["supervised"].startswith("the default --time 30m: the rest of it expected 12.5 min, 5.0 min left; --time 38m")
    assert timing.summary()["stopped"] == {"supervised": race.stopped["supervised"]}
    from sentune.adaptation.report import time_lines

    assert time_lines(timing.summary())[0] == f"Stopped after a first look by --time 30m, the default: `supervised` ({race.stopped['supervised']})."


def test_a_lone_supervised_member_goes_on_at_the_pace_its_own_first_look_ran(monkeypatch):
    """A search run's only supervised candidate races alone: its first look is timed, and its rest (its other folds
    and refit, more of the same work) is expected as late as that look ran, however fast the run's others finished."""
    from sentune.adaptation.phases import stop_for_time

    now = [600.0]  # 20 of the 30 minutes left
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])

    def raced(look_took: float):
        timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, kept={"supervised": Planned("supervised", 900.0, 2.0, first=150.0)})
        race = SimpleNamespace(seconds={"supervised": look_took}, stopped={}, scores={"supervised": 70.0})
        stop_for_time(race, SimpleNamespace(time_plan=timing))
        return race, timing

    race, timing = raced(150.0)  # on time: its rest, 12.5 min, fits the 20 left
    assert race.stopped == {} and "supervised" in timing.begun and timing.rest("supervised", 150.0) == pytest.approx(750.0)
    race, timing = raced(450.0)  # three times later than expected: its rest is 37.5 min
    assert timing.rest("supervised", 450.0) == pytest.approx(2250.0)
    assert race.stopped["supervised"].startswith("the default --time 30m: the rest of it expected 37.5 min, 20.0 min left; --time 48m")
    assert timing.summary()["stopped"] == race.stopped
    timing.spent, timing.expected_spent = 400.0, 100.0  # the run's others ran four times late: the later pace wins
    assert timing.rest("supervised", 450.0) == pytest.approx(3000.0) and timing.rest("supervised", 50.0) == pytest.approx(3000.0)


def test_a_raced_trainings_first_look_is_its_first_round(monkeypatch):
    """Trained: the first rung of its steps with their evaluations, its evaluation at the pause and one of the race's
    three checks of it on the train pairs; all of it is its share of the race and its scoring."""
    from sentune.adaptation import race_rows
    from sentune.adaptation.candidates import Trained
    from sentune.adaptation.context import EVALUATIONS
    from sentune.adaptation.race import RUNGS

    monkeypatch.setattr(race_rows, "race_train_pairs", lambda ctx: 100)
    recipe = SimpleNamespace(name="adapt/simcse", training=SimpleNamespace(max_steps=400, batch_size=32))
    ctx = SimpleNamespace(recipe=lambda name: recipe, selection_texts=lambda: 500, eval_texts=lambda: 4000)
    costs = time_plan.Costs(0.01, {"simcse": 10.0}, raced=4)
    training = 400 * 10.0 * 32 * 0.01 + EVALUATIONS * 500 * 0.01
    look = Trained("simcse", "adapt/simcse").first_look_seconds(ctx, costs)
    assert look == pytest.approx(RUNGS[0] * training + 500 * 0.01 + 2 * 100 * 0.01)
    assert Trained("simcse", "adapt/simcse").expected_seconds(ctx, costs) == pytest.approx(
        time_plan.race_share(4) * training + 3 * 2 * 100 * 0.01 + 4000 * 0.01
    )


def test_one_that_had_its_first_look_is_not_judged_again_when_its_turn_comes(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=600.0, started=0.0, kept={"supervised": Planned("supervised", 900.0, 2.0, first=100.0)})
    now[0] = 550.0
    assert "expected 1.7 min now, 0.8 min left" in plan.still_fits("supervised")
    plan.begin("supervised")  # its race ran: under --time it goes on capped at its share (minutes_cap)
    assert plan.still_fits("supervised") is None
    plan.current = "supervised"
    assert plan.minutes_cap() == pytest.approx(50.0 / 60)


def test_one_left_out_late_under_the_default_time_is_named_with_the_time_that_would_include_it(monkeypatch):
    now = [1500.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    plan.kept = {"sed": Planned("sed", 1800.0, 0.5, first=400.0), "supervised": Planned("supervised", 900.0, 2.0, first=200.0)}
    # 300 s left, supervised's 200 held back: sed's 400 would need 1500 + 400 + 200 = 2100 s, 35 minutes
    assert plan.still_fits("sed") == (
        "the default --time 30m: expected 6.7 min now, 1.7 min left beside 3.3 min held for the others' first looks; --time 35m would include it"
    )
    assert plan.still_fit_together(["sed"])["sed"].endswith("; --time 35m would include it")
    plan.given = True  # under --time the user chose the limit: no other is named
    assert "would include it" not in plan.still_fits("sed")


@pytest.mark.slow
def test_a_run_without_time_stops_after_a_first_look_those_whose_rest_does_not_fit(tiny_model_dir, labelled, tmp_path, monkeypatch):  # noqa: F811
    """Through `sentune adapt` without --time, the time rule answering 'no room' for simcse after the race's first round
    and for the supervised member going on: simcse ends at its best checkpoint so far and is scored as a finished
    candidate (it may still be chosen), the member is skipped with the time's reason, results.json's meta.time.stopped
    and results.md name both, and wise, a cheap follow-up, still runs on the best tuned weights there are."""
    import json

    from sentune.cli import main

    asked: list[list[str]] = []
    real = TimePlan.go_on

    def no_room(self, rests, scored=()):
        asked.append(list(rests))
        real(self, rests, scored)  # the real rule runs too (it stops nothing here: the toy is fast)
        return {
            name: f"no room for the rest of {name}; --time 99m would let it go on"
            for name in rests
            if name in ("simcse", "ct", "supervised", "supervised-stacked")
        }

    monkeypatch.setattr(TimePlan, "go_on", no_room)
    out = tmp_path / "run"
    methods = ["--methods", "simcse,ct,supervised,supervised-stacked,wise", "--train", str(labelled / "train.tsv"), "--budget", "8"]
    assert main([*_args(tiny_model_dir, labelled, out), *methods]) == 0
    results = json.loads((out / "results.json").read_text())
    stopped = results["meta"]["time"]["stopped"]
    assert len(asked[0]) == 1  # after round 1 the other is behind by halving: the one going on alone is asked about
    going = asked[0][0]
    assert going in stopped and len(stopped) == 2
    ended = results["candidates"][going]  # ended at its best checkpoint so far: judged as a finished one, choosable
    assert ended.get("stopped") is None and ended["test"] is not None and ended["confirm"] is not None
    member = next(n for n in stopped if n != going)
    assert results["candidates"][member]["skipped"] == stopped[member]
    assert "wise" in results["candidates"] and results["candidates"]["wise"].get("skipped") is None
    assert f"Stopped after a first look by --time 30m, the default: `{going}` (no room for the rest of {going}" in (out / "results.md").read_text()


def test_a_supervised_member_that_did_not_race_is_judged_whole_at_its_turn(monkeypatch):
    from sentune.adaptation.phases import stop_for_time

    now = [1500.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, kept={"supervised": Planned("supervised", 900.0, 2.0)})
    stop_for_time(None, SimpleNamespace(time_plan=timing))  # no race ran
    assert "supervised" not in timing.begun and timing.still_fits("supervised").startswith("the default --time 30m: expected 15.0 min now, 5.0 min left")


def test_under_time_a_race_going_on_never_takes_the_first_looks_of_those_not_begun(monkeypatch):
    """scripts/main.sh's case (--time 6m): the race's round 1 ran late, 69 s are left, and supervised (first look 24 s)
    and wise after it (84 s, built on supervised or sg-opt) have not begun. sg-opt does not go on (nothing is left beside
    their 108 s), supervised still starts (wise, built on it, is not held against it), and its training
    may take what is left; a racer's cap never eats a first look still held for another."""
    now = [0.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    kept = {  # in the plan's order: the best expected gain a second of first look first
        "supervised": Planned("supervised", 126.0, 3.0, first=24.0),
        "sg-opt": Planned("sg-opt", 160.0, 0.5, first=20.0),
        "wise": Planned("wise", 84.0, 1.0, needs=("supervised", "sg-opt")),  # built on either
    }
    plan = TimePlan(limit=360.0, started=0.0, kept=dict(kept))
    plan.begin("sg-opt")
    now[0] = 291.0
    # wise follows supervised (sg-opt ranks below it); against sg-opt it stays held: it will follow supervised anyway
    assert plan.with_followers("supervised") == {"supervised", "wise"} and plan.with_followers("sg-opt") == {"sg-opt"}
    stopped = plan.go_on({"sg-opt": 140.0})
    assert list(stopped) == ["sg-opt"] and "held for the first looks of those not begun" in stopped["sg-opt"]
    # its cap, were it to go on: never the 24 s held for supervised nor wise's 84 that follow it: nothing of the 69 s
    assert plan.allowance("sg-opt") == 0.0
    plan.finished("sg-opt", 30.0, reached=0.0)  # 30 s for its 20: the run is 1.5 times late
    assert plan.still_fits("supervised") is None  # 36 s (24, late 1.5 times) of 69, wise not held against it
    plan.current = "supervised"
    plan.begin("supervised")
    assert plan.allowance("supervised") == pytest.approx(69.0 * 126.0 / (126.0 + 84.0))  # its share; wise keeps the rest
    # with time to spare, a racer goes on under --time (its training capped at its share instead)
    roomy = TimePlan(limit=3600.0, started=0.0, kept=dict(kept))
    roomy.begin("sg-opt")
    assert roomy.go_on({"sg-opt": 140.0}) == {}
    # a candidate that is not a follower stays held: another racer's cap leaves supervised's first look alone
    assert roomy.allowance("sg-opt") <= roomy.left() - kept["supervised"].look


def _sed_toy(monkeypatch, records: dict):
    """A context for sed over one raced simcse of 400 steps, a corpus of 3,200 texts and 3 members."""
    from dataclasses import replace

    from sentune.adaptation import race_rows
    from sentune.training.recipe import load_recipe

    monkeypatch.setattr(race_rows, "race_train_pairs", lambda ctx: 100)

    def recipe(name, steps=400, seed=1, **_):
        found = load_recipe(name, check=False)
        return replace(found, training=replace(found.training, max_steps=steps, eval_steps=10, seed=seed))

    raced = [SimpleNamespace(name="simcse", recipe_name="adapt/simcse")]
    return SimpleNamespace(
        recipe=recipe, plan=SimpleNamespace(raced=raced), records=records, out=None, selection_texts=lambda: 500, eval_texts=lambda: 4000,
        config=SimpleNamespace(budget=SimpleNamespace(steps=None), sed_members=3), inputs=SimpleNamespace(corpus=["x"] * 3200),
    )  # fmt: skip


def test_sed_plans_its_members_to_the_races_first_rung_and_is_judged_at_its_turn_on_the_steps_its_source_took(monkeypatch):
    """A member trains as many steps as the race's best candidate needed (its best step): before the race the first look
    counts the members to the race's first rung, not a share of all their steps; at sed's turn the plan expects it again
    with the best step the race found, so a source that needed 40 steps makes sed cheap and one that needed 400 dear."""
    from sentune.adaptation.candidates.trained import Ensemble
    from sentune.adaptation.context import EVALUATIONS
    from sentune.adaptation.race import RUNGS

    costs = time_plan.Costs(0.01, {"simcse": 10.0, "sed": 3.0}, raced=4)
    step = {"simcse": 10.0 * 32 * 0.01, "sed": 3.0 * 32 * 0.01}  # a step's seconds: per text of the batch × batch × text cost
    learner = 100 * step["sed"] + EVALUATIONS * 500 * 0.01  # the learner: one pass over the corpus, 3200 / 32 steps
    targets, checks, scoring = 3 * 3200 * 0.01, 3 * 2 * 100 * 0.01, 4000 * 0.01

    ctx = _sed_toy(monkeypatch, {})
    sed = Ensemble("sed")
    assert sed.expected_at_turn(ctx, costs) is None  # no trained record yet: as planned
    look = sed.first_look_seconds(ctx, costs)
    assert look == pytest.approx(2 * RUNGS[0] * 400 * step["simcse"] + targets + RUNGS[0] * learner + checks / 3)
    whole = 2 * time_plan.race_share(4) * 400 * step["simcse"] + targets + learner + checks + scoring
    assert sed.expected_seconds(ctx, costs) == pytest.approx(whole)

    def source(best_step):
        record = SimpleNamespace(kind="trained", scored=True, weights=lambda out: "w", dev_score=80.0, best_step=best_step, name="simcse")
        record.detail = {"recipe": {"training": {"eval_steps": 10}}}
        return {"simcse": record}

    plan = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, kept={"sed": Planned("sed", whole, 0.5, first=look)}, costs=costs)
    for best_step in (40, 400):
        ctx.records = source(best_step)
        plan.re_expect(sed, ctx)
        members = 2 * best_step * step["simcse"] + targets
        assert plan.kept["sed"].seconds == pytest.approx(members + learner + checks + scoring)
        assert plan.kept["sed"].look == pytest.approx(members + RUNGS[0] * learner + checks / 3)
    plan.begin("sed")  # once begun it is not expected again
    ctx.records = source(40)
    plan.re_expect(sed, ctx)
    assert plan.kept["sed"].look == pytest.approx(2 * 400 * step["simcse"] + targets + RUNGS[0] * learner + checks / 3)


def test_a_race_whose_costs_were_expected_exactly_leaves_the_run_on_time(monkeypatch):
    """Four racers of T seconds each, halved 4 → 2 → 1: two stop after round 1 (T/8 each), one after round 2 (T/4),
    one trains all of T. Each is planned at the race's average share (race_share) with T as its whole; charged as far as
    each went, the run is on time (scale 1), and the one going on is expected to need the rest of all of T."""
    from sentune.adaptation.candidates import Trained
    from sentune.adaptation.race import RUNGS, reached

    T = 800.0
    share = time_plan.race_share(4)
    assert share * 4 == pytest.approx(1.5)  # 4·T/8 + 2·T/8 + 1·T/4 + 1·T/2
    plan = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    plan.kept = {n: Planned(n, share * T, 0.0, first=RUNGS[0] * T, whole=T) for n in "abcd"}
    for name, spent, round_number in (("a", T / 8, 1), ("b", T / 8, 1), ("c", T / 4, 2), ("d", T, None)):
        plan.finished(name, spent, reached(round_number))
    assert plan.scale() == pytest.approx(1.0)
    going = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, kept={"d": Planned("d", share * T, 0.0, first=RUNGS[0] * T, whole=T)})
    assert going.rest("d") == pytest.approx(T - RUNGS[0] * T)  # not share·T − T/8
    # a raced training's whole is all of its steps with the race's checks and its scoring, its expected the share of them
    monkeypatch.setattr(time_plan, "race_share", lambda raced: 0.25)
    from sentune.adaptation import race_rows

    monkeypatch.setattr(race_rows, "race_train_pairs", lambda ctx: 100)
    recipe = SimpleNamespace(name="adapt/simcse", training=SimpleNamespace(max_steps=400, batch_size=32))
    ctx = SimpleNamespace(recipe=lambda name: recipe, selection_texts=lambda: 0, eval_texts=lambda: 1000)
    costs = time_plan.Costs(0.01, {"simcse": 10.0}, raced=4)
    trained = Trained("simcse", "adapt/simcse")
    rest = 3 * 2 * 100 * 0.01 + 1000 * 0.01  # the checks and the scoring
    assert trained.whole_seconds(ctx, costs) - rest == pytest.approx(4 * (trained.expected_seconds(ctx, costs) - rest))


def test_a_supervised_member_going_on_is_expected_to_train_all_its_folds():
    """Two supervised members race (pairs, no --train): each is planned at the share the fold race is expected to keep
    (one of two goes on), the one that goes on is whole: all K folds and the refit."""
    from sentune.adaptation.candidates.supervised import Supervised
    from sentune.adaptation.crossfit import FOLDS

    member = Supervised("supervised")
    costs = time_plan.Costs(0.01, {"cosent": 5.0, "online-contrastive": 5.0})
    unit = SimpleNamespace()
    ctx = SimpleNamespace(
        plan=SimpleNamespace(after_race=[member, Supervised("supervised-stacked")]), inputs=SimpleNamespace(task=SimpleNamespace(train_units=lambda: None, search=False)),
        selection_units=lambda: [unit] * 300, eval_texts=lambda: 0, metric="spearman", config=SimpleNamespace(budget=SimpleNamespace(steps=None)),
    )  # fmt: skip
    expected, whole = member.expected_seconds(ctx, costs), member.whole_seconds(ctx, costs)
    assert expected > 0
    fold = (FOLDS - 1) / FOLDS
    assert whole / expected == pytest.approx(FOLDS / (fold + (FOLDS - fold) * 0.5))


def test_one_skipped_before_it_spent_anything_says_nothing_of_the_runs_lateness():
    plan = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    plan.kept = {"a": Planned("a", 100.0, 0.0), "sed": Planned("sed", 1800.0, 0.5)}
    plan.finished("a", 200.0)  # twice as long as expected
    plan.finished("sed", 0.0)  # skipped: nothing to build on; it would have hidden a's lateness (200 / 1900)
    assert plan.scale() == pytest.approx(2.0)


def test_the_race_starts_though_those_built_on_its_members_would_not_fit_beside_them(monkeypatch):
    """15 min left at the race's start, sed (12 min of first look, built on the racers) not begun: held against them, no
    racer could start and sed would then have nothing to be built on; another candidate's first look stays held."""
    now = [900.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    plan.kept = {
        "simcse": Planned("simcse", 400.0, 0.0, first=150.0),
        "ct": Planned("ct", 400.0, 0.0, first=150.0),
        "sed": Planned("sed", 1200.0, 0.5, needs=("simcse", "ct"), first=720.0),
        "supervised": Planned("supervised", 900.0, 2.0, first=500.0),
    }
    late = plan.still_fit_together(["simcse", "ct"])
    assert late == {}  # 300 s of their looks in the 900 left beside supervised's 500
    plan.kept["supervised"] = Planned("supervised", 900.0, 2.0, first=700.0)
    assert set(plan.still_fit_together(["simcse", "ct"])) == {"ct"}  # 200 beside supervised's 700: one of them starts


def test_one_left_out_at_its_turn_takes_those_built_on_it_alone_along(monkeypatch):
    """SciFact under the default time: hybrid (MaxP's later windows, minutes) no longer fits at its turn; unchanged-maxp,
    planned as costing nothing more since it reads hybrid's windows, must not then pay for them itself. One built on
    another that is still kept stays."""
    from sentune.adaptation import phases
    from sentune.adaptation.candidates.plan import Plan
    from sentune.adaptation.candidates.search import Hybrid, UnchangedMaxp
    from sentune.adaptation.candidates.untuned import Unchanged

    now = [1500.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    timing.kept = {
        "hybrid": Planned("hybrid", 700.0, 8.0),
        "unchanged-maxp": Planned("unchanged-maxp", 0.0, 0.0, needs=("hybrid",)),
        "prf": Planned("prf", 10.0, 1.0, needs=("hybrid", "unchanged")),
    }
    plan = Plan(before_race=[Unchanged("unchanged")], after_race=[Hybrid("hybrid"), UnchangedMaxp("unchanged-maxp"), UnchangedMaxp("prf")])
    ctx = SimpleNamespace(time_plan=timing)
    monkeypatch.setattr(Hybrid, "finished", lambda self, ctx: False)
    assert phases.left_out_late(plan.after_race[0], plan, "[9/17]", ctx)
    assert [c.name for c in plan.after_race] == ["prf"]
    assert timing.left_out["unchanged-maxp"] == "built on hybrid, left out" and "unchanged-maxp" not in timing.kept


def test_hybrid_fuses_the_first_windows_when_maxps_later_windows_do_not_fit(monkeypatch):
    """Hybrid's first look is its fusion of the first windows, which the run holds; MaxP's later windows are encoded at
    its turn only when they fit beside the first looks held for the others (6,000 windows at 0.1 s: 10 min)."""
    from sentune.adaptation import search_context
    from sentune.adaptation.candidates.search import Hybrid

    now = [0.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    costs = time_plan.Costs(0.1, {})
    passages = SimpleNamespace(ready=False, later_window_count=lambda: 6000)
    monkeypatch.setattr(search_context, "as_search", lambda ctx: SimpleNamespace(passages=passages))
    hybrid = Hybrid("hybrid")
    ctx = SimpleNamespace(time_plan=None)
    assert hybrid.first_look_seconds(ctx, costs) == 0.0
    assert hybrid.maxp_left_out(ctx) is None  # no plan: MaxP is chosen on the selection queries as ever
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, costs=costs)
    timing.kept = {"hybrid": Planned("hybrid", 600.0, 8.0, first=0.0), "prf": Planned("prf", 60.0, 1.0)}
    ctx.time_plan = timing
    now[0] = DEFAULT_TIME - 700.0  # 700 s left, prf's 60 held: 640 for 600
    assert hybrid.maxp_left_out(ctx) is None
    now[0] = DEFAULT_TIME - 600.0  # 540 for 600
    assert hybrid.maxp_left_out(ctx) == "the default --time 30m: the later windows of MaxP expected 10.0 min, 9.0 min left: fused on the first windows"
    passages.ready = True  # encoded already (a resumed run, another candidate): nothing more to pay
    assert hybrid.maxp_left_out(ctx) is None


def test_the_supervised_races_members_start_together_where_one_by_one_each_held_the_other_out(monkeypatch):
    """mrpc's default run: 4.2 min left when the supervised race's turn came, supervised and supervised-stacked 1.8 min
    of first look each, wise 2.3 (built on sed: without --train a supervised candidate learns the selection pairs).
    One by one, each held the other's look and wise's against itself and both were left out; together the better by
    the plan's order starts (1.8 of the 1.9 beside wise's); with 6 min left both start."""
    from sentune.adaptation import phases
    from sentune.adaptation.candidates.plan import Plan
    from sentune.adaptation.candidates.supervised import Supervised
    from sentune.adaptation.candidates.trained import Wise

    m = 60.0
    for left, starting in ((4.2 * m, ["supervised"]), (6.0 * m, ["supervised", "supervised-stacked"])):
        monkeypatch.setattr(time_plan.time, "monotonic", lambda at=DEFAULT_TIME - left: at)
        timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
        timing.kept = {
            "supervised": Planned("supervised", 5 * m, 2.0, first=1.8 * m),
            "supervised-stacked": Planned("supervised-stacked", 5 * m, 1.5, first=1.8 * m),
            "wise": Planned("wise", 2.3 * m, 1.0, needs=("sed",)),
        }
        members = [Supervised("supervised"), Supervised("supervised-stacked")]
        plan = Plan(after_race=[*members, Wise("wise")])
        monkeypatch.setattr(Supervised, "finished", lambda self, ctx: False)
        state = SimpleNamespace(plan=plan, labels={"supervised": "[11/13]", "supervised-stacked": "[12/13]"})
        one_by_one = [timing.still_fits(c.name) is None for c in members]
        phases.members_fit_together(members, state, SimpleNamespace(time_plan=timing))
        assert [c.name for c in plan.after_race if c.kind == "supervised"] == starting
        assert "wise" in timing.kept
        if left < 5 * m:
            assert one_by_one == [False, False]  # the rule before: each left out beside the other's held look


def test_sed_is_charged_all_it_took_not_only_its_trainings_clocks(tmp_path):
    """sed's members' targets and its learner's pooling choice run outside the trainings' clocks that its record
    counts (mrpc's default run: 6.9 min counted, 14.0 taken): its record carries what the whole took, on disk too."""
    import json

    from sentune.adaptation.candidates.trained import Ensemble
    from sentune.adaptation.records import CandidateRecord, load_record, record_path
    from sentune.core.results import write_atomic

    sed, ctx = Ensemble("sed"), SimpleNamespace(out=tmp_path)
    sed.folder(ctx).mkdir(parents=True)
    record = CandidateRecord("sed", "sed", 416.0)
    write_atomic(record_path(sed.folder(ctx)), json.dumps(record.to_dict()))
    assert sed._charged_all(load_record(sed.folder(ctx)), 843.0, ctx).seconds == 843.0
    assert load_record(sed.folder(ctx)).seconds == 843.0
    assert sed._charged_all(load_record(sed.folder(ctx)), 100.0, ctx).seconds == 843.0  # never less than it counted


def _quora_turn(monkeypatch, *, train: bool, whitening_score: float = 77.74):
    """quora's default run at query-side's turn (default_budget.sh at d2262d4): 1554 s left, query-side's 820 s to
    start, hybrid-best planned at 735.7 s (every query and document encoded by a dense candidate better than the
    unchanged model), the unchanged model (79.09) and whitening scored, supervised still to come."""
    from sentune.adaptation.candidates.plan import Plan
    from sentune.adaptation.candidates.search import Hybrid
    from sentune.adaptation.records import CandidateRecord

    now = [246.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    costs = time_plan.Costs(0.02, {})
    best = Hybrid("hybrid-best", "best")
    unchanged = SimpleNamespace(name="unchanged", kind="unchanged", dense=True, eligible=True, phase="before_race")
    whitening = SimpleNamespace(name="whitening", kind="postprocess", dense=True, eligible=True, phase="before_race")
    supervised = SimpleNamespace(name="supervised", kind="supervised", dense=True, eligible=True, phase="after_race", expected_at_turn=lambda ctx, costs: None)
    query_side = SimpleNamespace(
        name="query-side",
        kind="query-side",
        dense=False,
        eligible=True,
        phase="after_race",
        finished=lambda ctx: False,
        expected_at_turn=lambda ctx, costs: None,
    )
    plan = Plan(before_race=[unchanged, whitening], after_race=[query_side, supervised, best])
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False, costs=costs)
    timing.kept = {
        "unchanged": Planned("unchanged", 0.0, 0.0),
        "whitening": Planned("whitening", 0.0, 0.0),
        "query-side": Planned("query-side", 820.0, 0.0),
        "supervised": Planned("supervised", 0.0, 0.0),  # its cost apart: what is held for hybrid-best is the question
        "hybrid-best": Planned("hybrid-best", 735.7, 0.0),
    }
    timing.finished("unchanged", 0.0)
    timing.finished("whitening", 6.0)
    records = {
        "unchanged": CandidateRecord("unchanged", "unchanged", dev_score=79.09, dev_indices_trained_on=[]),
        "whitening": CandidateRecord("whitening", "postprocess", dev_score=whitening_score, dev_indices_trained_on=[]),
    }
    by_name = {c.name: c for c in plan.all}
    ctx = SimpleNamespace(
        time_plan=timing,
        plan=plan,
        records=records,
        inputs=SimpleNamespace(task=SimpleNamespace(train_units=lambda: [1] if train else None)),
        candidate=lambda name: by_name[name],
        eval_texts=lambda: 36785,
    )
    return plan, ctx, timing, best


def test_hybrid_best_is_held_against_those_before_it_only_while_one_still_to_come_could_be_its_source(monkeypatch):
    """quora's default run left query-side out at its turn (13.6 min, 13.6 left beside 12.3 held for hybrid-best), and
    hybrid-best then skipped: every dense candidate still to come was the supervised one, which read the selection
    queries and is never its source, and none scored was better than the unchanged model. Expected again at query-side's
    turn, hybrid-best holds nothing and query-side starts; with --train, supervised could be its source and the planned
    minutes stay held; with whitening ahead of the unchanged model, they stay held too."""
    from sentune.adaptation import phases

    plan, ctx, timing, best = _quora_turn(monkeypatch, train=False)
    assert best.expected_at_turn(ctx, timing.costs) == (0.0, 0.0)
    assert not phases.left_out_late(plan.after_race[0], plan, "[7/18]", ctx)
    assert timing.kept["hybrid-best"].seconds == 0.0

    plan, ctx, timing, best = _quora_turn(monkeypatch, train=True)
    assert best.expected_at_turn(ctx, timing.costs) is None
    assert phases.left_out_late(plan.after_race[0], plan, "[7/18]", ctx)
    assert "12.3 min held for the others' first looks" in timing.left_out["query-side"]

    plan, ctx, timing, best = _quora_turn(monkeypatch, train=False, whitening_score=80.0)
    assert best.expected_at_turn(ctx, timing.costs) == pytest.approx((36785 * 0.02, 36785 * 0.02))
    assert phases.left_out_late(plan.after_race[0], plan, "[7/18]", ctx)


def test_the_phase_with_the_time_left_runs_those_left_out_once_what_they_are_built_on_has_run(monkeypatch):
    """quora's default run: query-side left out at planning, and hybrid-query-side with it; with 13 minutes unspent at
    the end, both run (the fusion once the model it fuses has a record); a label-free training left out races alone
    once its first look fits (the cheapest first among equal gains), and one built only on a skipped candidate is not run."""
    from sentune.adaptation import phases
    from sentune.adaptation.candidates.plan import Plan
    from sentune.adaptation.records import CandidateRecord
    from sentune.adaptation.run_state import RunState

    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)

    def fake(name: str, phase: str = "after_race"):
        return SimpleNamespace(name=name, kind=name, phase=phase, expected_at_turn=lambda ctx, costs: None)

    unchanged, flow, query_side, fused, mirror, after_flow = (
        fake("unchanged", "before_race"),
        fake("flow", "before_race"),
        fake("query-side"),
        fake("hybrid-query-side"),
        fake("mirror", "raced"),
        fake("prf"),
    )
    plan = Plan(before_race=[unchanged, flow], raced=[mirror], after_race=[query_side, fused, after_flow])
    timing.kept = {"unchanged": Planned("unchanged", 5.0, 0.0), "flow": Planned("flow", 60.0, 0.0)}
    waiting = {
        "query-side": Planned("query-side", 360.0, 0.0),
        "hybrid-query-side": Planned("hybrid-query-side", 10.0, 0.0, needs=("query-side",)),
        "mirror": Planned("mirror", 100.0, 0.0, first=20.0),
        "prf": Planned("prf", 10.0, 0.0, needs=("flow",)),
    }
    for candidate in (query_side, fused, mirror, after_flow):
        plan.leave_out(candidate)
        timing.leave_out(candidate.name, "at planning")
    timing.waiting |= waiting
    state = RunState(plan, scorer=None)
    state.records = {
        "unchanged": CandidateRecord("unchanged", "unchanged", dev_score=79.0),
        "flow": CandidateRecord("flow", "postprocess", skipped="no vectors"),
    }
    for name in ("unchanged", "flow"):
        timing.finished(name, 1.0)
    ran = []

    def run_candidate(candidate, candidates, label, ctx):
        assert candidate in candidates.after_race and candidate.name in timing.kept
        ran.append((candidate.name, label))
        now[0] += timing.kept[candidate.name].seconds
        record = state.records[candidate.name] = CandidateRecord(candidate.name, candidate.kind, dev_score=80.0)
        timing.finished(candidate.name, timing.kept[candidate.name].seconds)
        return record

    def race_members(members, candidates, labels, ctx):
        assert [m.name for m in members] == ["mirror"] and members[0] in candidates.raced and labels == {"mirror": "[+]"}
        ran.append(("mirror alone", labels["mirror"]))
        now[0] += timing.kept["mirror"].look  # the race stopped it after its first round
        state.records["mirror"] = CandidateRecord("mirror", "mirror", dev_score=78.0)
        timing.finished("mirror", timing.kept["mirror"].look, 0.0)

    monkeypatch.setattr(phases, "run_candidate", run_candidate)
    monkeypatch.setattr(phases, "race_members", race_members)
    found = phases.WithTimeLeft("with the time left").run(SimpleNamespace(time_plan=timing, records=state.records), state)
    assert ran == [("mirror alone", "[+]"), ("query-side", "[+]"), ("hybrid-query-side", "[+]")]
    assert set(found) == {"mirror", "query-side", "hybrid-query-side"}
    assert [c.name for c in plan.left_out] == ["prf"] and set(timing.left_out) == {"prf"}
    assert [c.name for c in plan.after_race] == ["query-side", "hybrid-query-side"] and [c.name for c in plan.raced] == ["mirror"]
    assert phases.WithTimeLeft("with the time left").run(SimpleNamespace(time_plan=None), state) == {}


def test_one_brought_back_and_left_out_at_its_turn_is_not_tried_again(monkeypatch):
    from sentune.adaptation import phases
    from sentune.adaptation.candidates.plan import Plan
    from sentune.adaptation.run_state import RunState

    monkeypatch.setattr(time_plan.time, "monotonic", lambda: 100.0)
    timing = TimePlan(limit=DEFAULT_TIME, started=0.0, given=False)
    query_side = SimpleNamespace(name="query-side", kind="query-side", phase="after_race", expected_at_turn=lambda ctx, costs: None)
    plan = Plan()
    plan.left_out.append(query_side)
    timing.waiting["query-side"] = Planned("query-side", 60.0, 0.0)
    timing.left_out["query-side"] = "at planning"
    tries = []

    def left_out_at_its_turn(candidate, candidates, label, ctx):
        tries.append(candidate.name)
        timing.leave_out(candidate.name, "dearer at its turn")
        candidates.leave_out(candidate)

    monkeypatch.setattr(phases, "run_candidate", left_out_at_its_turn)
    assert phases.WithTimeLeft("with the time left").run(SimpleNamespace(time_plan=timing), RunState(plan, scorer=None)) == {}
    assert tries == ["query-side"] and timing.left_out["query-side"] == "dearer at its turn"
