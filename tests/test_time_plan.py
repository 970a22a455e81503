"""`sentune adapt --time`: the duration it takes, the race's expected share, the plan on toys with known answers, the
plan kept while the run goes (a fake clock), and a tiny run that leaves candidates out and says why."""

from __future__ import annotations

import json
import math

import pytest

from sentune.adaptation import time_plan
from sentune.adaptation.time_plan import Planned, TimePlan, parse_time, race_share
from sentune.errors import UserError


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("90s", 90), ("1.5h", 5400), ("10", 600), (" 2MIN ", 120), ("45sec", 45)])
def test_time_takes_a_duration(text, seconds):
    assert parse_time(text) == pytest.approx(seconds)
    assert parse_time(None) is None


@pytest.mark.parametrize("text", ["abc", "0", "-5m", "inf", "nan", "m", "5d", ""])
def test_time_refuses_what_is_not_a_duration(text):
    with pytest.raises(UserError, match="--time"):
        parse_time(text)


def naive_race_steps(raced: int, rungs: tuple[float, ...]) -> float:
    """Every candidate's steps written out rung by rung: all train to the first, then the first ceil(n / 2) of those
    still running go on to the next (one alone goes on)."""
    running = list(range(raced))
    trained = [0.0] * raced
    for index, rung in enumerate(rungs):
        for c in running:
            trained[c] = rung
        if index < len(rungs) - 1 and len(running) > 1:
            running = running[: math.ceil(len(running) / 2)]
    return sum(trained) / raced if raced else 0.0


@pytest.mark.parametrize("raced", [0, 1, 2, 3, 5, 8])
def test_race_share_is_the_steps_racing_and_halving_leave(raced):
    from sentune.adaptation.race import RUNGS

    assert race_share(raced) == pytest.approx(naive_race_steps(raced, RUNGS))
    assert race_share(1) == 1.0 and race_share(5) == pytest.approx(0.4)  # 5/8 + 3/8 + 2/4 + 1/2 = 2 of 5 trainings


def test_the_best_gain_a_second_is_kept_first_and_what_does_not_fit_is_left_out_with_its_reason():
    plan = TimePlan(limit=100.0)
    plan.fit(
        [
            Planned("big-gain-slow", 60.0, 6.0),  # 0.10 a second
            Planned("small-gain-fast", 10.0, 2.0),  # 0.20 a second: first
            Planned("no-gain-cheap", 5.0, 0.0),
            Planned("no-gain-dear", 50.0, 0.0),
            Planned("gain-too-slow", 200.0, 50.0),  # 0.25 a second, but longer than the limit
        ],
        already=20.0,
    )
    assert list(plan.kept) == ["small-gain-fast", "big-gain-slow", "no-gain-cheap"]  # 10 + 60 + 5 of 80
    assert set(plan.left_out) == {"gain-too-slow", "no-gain-dear"}
    assert "3.3 min" in plan.left_out["gain-too-slow"] and "1.3 min of --time left" in plan.left_out["gain-too-slow"]
    assert "0.1 min of --time left" in plan.left_out["no-gain-dear"]  # 80 - 75 = 5 s


def test_a_candidate_built_on_others_brings_the_cheapest_along_or_is_left_out():
    plan = TimePlan(limit=60.0)
    plan.fit(
        [Planned("sed", 30.0, 3.0, needs=("simcse", "ct")), Planned("simcse", 20.0, 0.0), Planned("ct", 40.0, 0.0), Planned("wise", 10.0, 1.0, needs=("sed",))]
    )
    # wise first (as good a second as sed, and cheaper): it brings sed, which brings simcse, the cheaper of its two
    assert list(plan.kept) == ["simcse", "sed", "wise"] and "0.0 min of --time left" in plan.left_out["ct"]
    tight = TimePlan(limit=45.0)
    tight.fit([Planned("sed", 30.0, 3.0, needs=("simcse",)), Planned("simcse", 20.0, 0.0), Planned("cheap", 5.0, 0.1)])
    assert set(tight.kept) == {"cheap", "simcse"} and "with simcse, which it is built on" in tight.left_out["sed"]
    # of the candidates it is built on, the one that lost least where it ran comes along, not merely the cheapest
    choosy = TimePlan(limit=100.0)
    choosy.fit([Planned("wise", 10.0, 2.0, needs=("tsdae", "simcse")), Planned("tsdae", 5.0, -5.4), Planned("simcse", 30.0, -0.3)])
    assert list(choosy.kept) == ["simcse", "wise", "tsdae"]  # wise with simcse first; tsdae after, in what is left
    orphan = TimePlan(limit=100.0, left_out={"simcse": "untrainable"})
    orphan.fit([Planned("sed", 30.0, 3.0, needs=("simcse",))])
    assert not orphan.kept and "all left out" in orphan.left_out["sed"]


def test_the_plan_is_kept_with_a_clock_that_scales_by_how_late_the_run_is(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=600.0, started=1000.0)
    plan.kept = {"a": Planned("a", 100.0, 1.0), "b": Planned("b", 200.0, 1.0), "c": Planned("c", 100.0, 1.0, first=40.0)}
    assert plan.allowance("a") == pytest.approx(600.0 * 100 / 400)
    plan.current = "a"
    assert plan.minutes_cap() == pytest.approx(150.0 / 60)
    now[0] += 200.0  # a took twice what it was expected to
    plan.finished("a", 200.0)
    assert plan.scale() == 2.0 and plan.left() == pytest.approx(400.0)
    # b (all first look) may start while 2 x 200 fits beside c's first look, 40 s, held back for it: 360 s are left so
    assert "expected 6.7 min now, 6.0 min left beside 0.7 min held for the others' first looks" in plan.still_fits("b")
    now[0] -= 40.0  # 440 s left: 400 fit beside the 40
    assert plan.still_fits("b") is None
    now[0] += 50.0
    assert plan.allowance("c") == pytest.approx(390.0 * 100 / 300)
    assert plan.still_fits("c") is None  # its first look, 80 s scaled, fits beside b's 200 held back
    assert plan.still_fits("not-planned") is None
    assert TimePlan(limit=10.0).scale() == 1.0  # nothing finished: expectations stand


def test_a_candidate_stopped_at_its_first_look_is_charged_what_it_spent_against_what_its_look_was_expected_to_take():
    """Costs as measured: a racer stopped at round one spent 20 s of a first look expected at 10 s (all of it 100 s):
    the run is twice as slow as expected, not five times as fast; the rest of its share is free for the others."""
    plan = TimePlan(limit=600.0)
    plan.kept = {"raced": Planned("raced", 100.0, 1.0, first=10.0), "other": Planned("other", 300.0, 1.0)}
    assert plan.allowance("other") == pytest.approx(plan.left() * 300 / 400, rel=1e-3)
    plan.finished("raced", 20.0, reached=0.0)
    assert plan.expected_spent == 10.0 and plan.scale() == 2.0
    assert plan.allowance("other") == pytest.approx(plan.left(), rel=1e-3)  # the stopped one's share is the other's
    halfway = TimePlan(limit=600.0)
    halfway.kept = {"raced": Planned("raced", 100.0, 1.0, first=10.0)}
    halfway.finished("raced", 55.0, reached=0.5)  # halfway from its look to its end: 10 + 45 expected
    assert halfway.scale() == 1.0 and halfway.expected_spent == pytest.approx(55.0)


def test_costs_weigh_a_step_by_its_recipe_and_batch(tmp_path):
    from types import SimpleNamespace

    table = tmp_path / "step_costs.json"
    table.write_text(json.dumps({"recipes": {"simcse": {"per_batch_text": 2.5}, "ct": {"per_batch_text": 4.0}}}))
    costs = time_plan.Costs.measured(0.01, table)
    recipe = lambda name, batch: SimpleNamespace(name=f"adapt/{name}", training=SimpleNamespace(batch_size=batch))  # noqa: E731
    assert costs.encode(300) == pytest.approx(3.0)
    assert costs.steps(recipe("simcse", 32), 10) == pytest.approx(10 * 2.5 * 32 * 0.01)
    assert costs.steps(recipe("unknown", 8), 10) == pytest.approx(10 * 4.0 * 8 * 0.01)  # the heaviest known


def test_the_bundled_tables_cover_every_adapt_recipe_and_candidate():
    from sentune.adaptation.names import DEFAULT_METHODS, QUERY_SIDE, RETRIEVAL_NATIVE, SUPERVISED, SUPERVISED_RECIPES, TRAINED

    costs = json.loads(time_plan.STEP_COSTS.read_text())["recipes"]
    assert set(TRAINED) | {"sed", QUERY_SIDE} | set(SUPERVISED_RECIPES.values()) <= set(costs)
    assert all(r["per_batch_text"] > 0 for r in costs.values())
    gains = json.loads(time_plan.EXPECTED_GAIN.read_text())
    # every candidate a run tries without --methods has a prior from the kept runs (those kinds: search runs only); an
    # opt-in one (tsdae) may have none when no kept run tried it, and the plan reads a missing prior as no gain
    assert {m for m in DEFAULT_METHODS if m not in ("poolings", "hybrid", QUERY_SIDE, *RETRIEVAL_NATIVE)} <= set(gains["pairs"])
    assert {"hybrid", SUPERVISED, f"hybrid-{SUPERVISED}", QUERY_SIDE, f"hybrid-{QUERY_SIDE}", "prf"} <= set(gains["search"])
    assert time_plan.expected_gains(False)["supervised"] == gains["pairs"]["supervised"] > 0 and time_plan.expected_gains(True) == gains["search"]


def tiny_adapt_args(model_dir, folder) -> list[str]:
    """`sentune adapt` on 120 seeded sentences of a toy vocabulary and 100 scored dev pairs of them, written to `folder`."""
    import numpy as np

    from sentune.data.user_data import write_corpus, write_scored_pairs

    rng = np.random.default_rng(0)
    words = ["a", "man", "plays", "guitar", "woman", "cuts", "onion", "dog", "runs", "cat", "sleeps", "child", "reads"]
    sentence = lambda: " ".join(rng.choice(words, size=int(rng.integers(3, 8))))  # noqa: E731
    write_corpus(folder / "corpus.txt", [sentence() for _ in range(120)])
    write_scored_pairs(folder / "dev.tsv", [(sentence(), sentence(), float(rng.uniform(0, 5))) for _ in range(100)])
    return ["adapt", "--quiet", "--model", str(model_dir), "--corpus", str(folder / "corpus.txt"), "--dev", str(folder / "dev.tsv")]


@pytest.mark.slow
def test_a_run_with_little_time_leaves_candidates_out_says_why_and_chooses_among_the_rest(tiny_model_dir, tmp_path, capsys):
    from sentune.cli import main

    common = tiny_adapt_args(tiny_model_dir, tmp_path)
    common += ["--methods", "poolings,whitening,simcse,ct,sed,supervised,wise", "--budget", "4", "--sed-members", "2"]
    # over before it starts: everything but the unchanged model, which is always scored, is left out
    assert main([*common, "--time", "0.01s", "--out", str(tmp_path / "short")]) == 0
    printed = capsys.readouterr().out
    results = json.loads((tmp_path / "short" / "results.json").read_text())
    planned = results["meta"]["time"]
    assert planned["limit_s"] == 0.01 and list(planned["kept"]) == ["unchanged"] and len(planned["left_out"]) == 10
    assert set(results["candidates"]) == set(planned["kept"])  # what was left out never ran
    # named when planned ("left out: NAME: why") or, when the run fell behind, as its turn came ("NAME: left out: why")
    assert all(f"left out: {name}: " in printed or f"{name}: left out: " in printed for name in planned["left_out"])
    assert results["choice"]["name"] in results["candidates"]
    assert main([*common, "--time", "10h", "--out", str(tmp_path / "long")]) == 0
    roomy = json.loads((tmp_path / "long" / "results.json").read_text())
    assert not roomy["meta"]["time"]["left_out"] and {"simcse", "ct", "sed", "supervised", "wise"} <= set(roomy["candidates"])


def test_a_training_candidate_that_no_longer_fits_does_not_start_the_race(monkeypatch, tmp_path):
    """Under --time the race's members are checked as every other candidate is: one whose expected time no longer fits
    what is left is taken out of the run with its reason before any training starts."""
    from types import SimpleNamespace

    from sentune.adaptation import phases
    from sentune.adaptation.candidates import Plan, Trained, Unchanged

    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    timing = TimePlan(limit=600.0, started=1000.0)
    timing.kept = {"simcse": Planned("simcse", 100.0, 1.0), "ct": Planned("ct", 500.0, 1.0)}
    now[0] += 300.0  # 300 s left: simcse fits, ct does not
    candidates = Plan(before_race=[Unchanged("unchanged")], raced=[Trained("simcse", "simcse"), Trained("ct", "ct")])
    started: list[str] = []
    monkeypatch.setattr("sentune.adaptation.race.race", lambda entries, ctx, finish: started.extend(e.name for e in entries))
    monkeypatch.setattr(phases, "load_record", lambda folder: SimpleNamespace(seconds=1.0, stopped=None, race=None, skipped=None))
    recipe = SimpleNamespace(training=SimpleNamespace(max_minutes=None, max_steps=10))
    ctx = SimpleNamespace(
        time_plan=timing,
        out=tmp_path,
        records={},
        recipe=lambda name: recipe,
        base=SimpleNamespace(max_seq_length=64),  # what a trained record depends on (WithRun.depends_on)
        config=SimpleNamespace(seed=0),
        inputs=SimpleNamespace(dev=SimpleNamespace(unit="pairs")),
        evidence=None,  # no --train: no evidence pairs to score once a candidate is done
    )
    monkeypatch.setattr(Trained, "finished", lambda self, ctx: False)
    monkeypatch.setattr(Trained, "describe", lambda self, ctx: "training")
    monkeypatch.setattr(phases, "replace", lambda obj, **changes: obj)
    phases.race_trained(candidates, ctx)
    assert started == ["simcse"] and [c.name for c in candidates.raced] == ["simcse"]
    assert timing.left_out["ct"] == "--time: expected 8.3 min now, 3.3 min left beside the race's others" and "ct" not in timing.kept


def test_race_members_that_fit_alone_but_not_together_are_left_out_in_the_plans_order(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=600.0, started=1000.0)
    plan.kept = {"b": Planned("b", 200.0, 2.0), "a": Planned("a", 200.0, 1.0), "c": Planned("c", 200.0, 1.0), "x": Planned("x", 50.0, 1.0)}
    now[0] += 300.0  # 300 s left, 250 beside x's first look, held back for it: each member fits alone
    plan.begin(["a", "b", "c"])
    assert all(plan.still_fits(n) is None for n in "abc")
    late = plan.still_fit_together(["a", "b", "c", "not-planned"])  # x is not a member: its first look is held back
    assert set(late) == {"a", "c"} and late["c"] == "--time: expected 3.3 min now, 0.8 min left beside the race's others"
    assert plan.still_fit_together(["x"]) == {}


def test_one_expected_to_gain_more_keeps_the_rest_it_needs_against_those_ranked_below_it(monkeypatch):
    """The race's members (expected to gain nothing) start only beside the whole of the supervised candidate the plan
    ranked above them (the rest after its first look reserved, as far as the time allows), not only its first look:
    on a slow machine their first round took the minutes the supervised candidate needed to go on."""
    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=1800.0, started=1000.0, given=False)
    plan.kept = {
        "unchanged": Planned("unchanged", 10.0, 0.0),
        "supervised": Planned("supervised", 600.0, 1.8, first=120.0, whole=900.0, ships_first_look=False),
        "sed": Planned("sed", 300.0, 0.6, needs=("a", "b"), first=200.0),
        "a": Planned("a", 400.0, 0.0, first=400.0),
        "b": Planned("b", 400.0, 0.0, first=400.0),
    }
    plan.finished("unchanged", 10.0)
    now[0] += 300.0  # 1500 s left
    # held: supervised's first look (sed follows the members: not held against them); reserved: the rest of
    # supervised, 900 - 120 = 780 s; the members' first looks, 400 s each, share 1500 - 120 - 780 = 600 s
    assert plan.reserved("a", plan.with_followers("a") | plan.with_followers("b")) == pytest.approx(780.0)
    late = plan.still_fit_together(["a", "b"])
    assert set(late) == {"b"}
    assert "13.0 min kept for the rest of those ranked above it" in late["b"] and "--time 37m would include it" in late["b"]
    # ranked below the ones it is held against, or begun, or expected to gain no more: nothing reserved
    assert plan.reserved("supervised") == 0.0 and plan.reserved("unchanged") == 0.0
    assert plan.reserved("sed", ["a", "b", "sed"]) == pytest.approx(780.0)  # sed (0.6) ranks below supervised (1.8)
    assert plan.reserved("sed") == 0.0  # beside every first look held, supervised's rest no longer fits: nothing kept for it
    plan.begin("supervised")
    assert plan.reserved("a") == 0.0 and plan.still_fit_together(["a", "b"]) == {}


def test_nothing_is_reserved_for_one_that_cannot_go_all_the_way_or_ships_its_first_look_and_a_rest_goes_on_beside_it(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=1800.0, started=1000.0, given=False)
    plan.kept = {
        # its rest, 2900 s, is more than is left: it would stop after its first look whatever the others do
        "supervised": Planned("supervised", 1200.0, 1.8, first=100.0, whole=3000.0, ships_first_look=False),
        "hybrid": Planned("hybrid", 900.0, 8.0, first=1.0),  # its first look is a fusion to choose: its rest is not kept
        "wise": Planned("wise", 60.0, 1.9, needs=("supervised",)),
        "a": Planned("a", 300.0, 0.0, first=100.0, whole=500.0),
    }
    now[0] += 600.0  # 1200 s left
    assert plan.reserved("a") == 0.0 and plan.still_fit_together(["a"]) == {}
    plan.kept["supervised"] = Planned("supervised", 600.0, 1.8, first=100.0, whole=700.0, ships_first_look=False)  # its rest 600 s now
    assert plan.reserved("a") == pytest.approx(600.0)
    plan.begin("a")
    # after a's first round its rest (400 s) goes on only beside the first looks held (supervised 100, hybrid 1, wise
    # 60) and supervised's rest (600): 1200 - 161 - 600 = 439 s
    assert plan.go_on({"a": 400.0}) == {}
    stopped = plan.go_on({"a": 440.0})
    assert set(stopped) == {"a"} and "10.0 min kept for the rest of those ranked above it" in stopped["a"]


def test_a_follower_that_a_better_ranked_candidate_still_brings_stays_held_against_one_ranked_below(monkeypatch):
    """qqp's default run (default_budget.sh at d2262d4), its plan's numbers: sed (gain 0.59, first look 843 s) was to
    start 491 s in, and wise (built on sed or on supervised, ranked above sed) was not held against it: 1309 - 110
    (both supervised candidates' first looks) - 269 (supervised's rest, reserved) = 930 s let it start, and after it
    wise's 209 s were held against supervised's rest, which did not go on. wise will run after supervised anyway: its
    first look stays held, and sed does not start; against supervised, the best it can follow, wise is not held."""
    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=1800.0, started=1000.0, given=False)
    plan.kept = {  # the plan's order
        "unchanged": Planned("unchanged", 172.2, 0.0),
        "supervised": Planned("supervised", 324.4, 1.809, first=55.4, ships_first_look=False),
        "simcse": Planned("simcse", 1736.8, -0.315, first=199.7),
        "sed": Planned("sed", 1484.2, 0.59, needs=("simcse",), first=842.6),
        "supervised-stacked": Planned("supervised-stacked", 324.4, 2.068, needs=("simcse",), first=55.4, ships_first_look=False),
        "wise": Planned("wise", 209.1, 1.937, needs=("simcse", "sed", "supervised-stacked", "supervised")),
    }
    plan.finished("unchanged", 89.0)
    plan.finished("simcse", 298.0, reached=0.0)
    now[0] += 491.0  # 1309 s left
    assert plan.with_followers("sed") == {"sed"} and plan.with_followers("supervised") == {"supervised", "wise"}
    # the racers judged together: sed and supervised-stacked follow them alone, so they are not held against their start
    assert plan.with_followers("simcse", ["simcse"]) == {"simcse", "sed", "supervised-stacked"}
    why = plan.still_fits("sed")  # 1309 - (55.4 + 55.4 + 209.1) - 269.0 = 720.1 s left for its 842.6
    assert why is not None and "12.0 min left beside 5.3 min held" in why and "4.5 min kept for the rest of those ranked above it" in why
    plan.left_out["sed"] = why  # as sentune.adaptation.phases.leave_out takes it out of the run
    plan.kept.pop("sed")
    # supervised's race starts beside wise's first look (the best it follows: not held), and its rest goes on beside it
    assert plan.still_fit_together(["supervised", "supervised-stacked"]) == {}
    plan.begin(["supervised", "supervised-stacked"])
    now[0] += 127.0
    assert plan.go_on({"supervised": 366.0}) == {}  # 1182 s left, wise's 209 held: its measured rest, 366 s, fits


def test_a_followers_first_look_held_against_the_race_does_not_cancel_what_is_reserved_for_the_one_it_follows(monkeypatch):
    """scripts/main.sh's race start (--time 6m, 300 s left): wise (96 s, built on the racers or on supervised, ranked
    above them) is held against the race, since it will follow supervised anyway; but against supervised's own rest
    (186 s) it is not held, as still_fits holds none of its followers against supervised: held there, 300 - 30 - 96 = 174
    s would leave supervised's rest nothing reserved, and the racers would take its minutes (the run chose sg-opt, 2.9
    test points behind supervised)."""
    now = [0.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=360.0, started=0.0)
    plan.kept = {  # the plan's order
        "unchanged": Planned("unchanged", 0.0, 0.0),
        "supervised": Planned("supervised", 216.0, 1.8, first=30.0, ships_first_look=False),
        "wise": Planned("wise", 96.0, 1.9, needs=("ct", "sg-opt", "supervised")),
        "ct": Planned("ct", 160.0, 0.0, first=40.0),
        "sg-opt": Planned("sg-opt", 160.0, 0.0, first=40.0),
    }
    plan.finished("unchanged", 0.0)
    now[0] = 60.0
    racers = ["ct", "sg-opt"]
    followers = plan.with_followers("ct", racers) | plan.with_followers("sg-opt", racers)
    assert "wise" not in followers
    assert plan.reserved("ct", followers) == pytest.approx(186.0)
    late = plan.still_fit_together(racers)
    assert set(late) == {"ct", "sg-opt"} and all("3.1 min kept for the rest of those ranked above it" in why for why in late.values())
    assert plan.still_fits("supervised") is None  # wise, which follows it, is not held against it


def test_those_left_out_are_brought_back_best_first_while_the_whole_of_one_fits_what_is_left(monkeypatch):
    """quora's default run left query-side out at planning (the others' expected minutes filled the half hour) and then
    ended with half of it unspent. Once every kept candidate is done, those left out run while all of one fits: the
    best expected gain a second first (the cheapest among equals), each once one it is built on has run."""
    now = [900.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=1800.0, started=0.0, given=False)
    plan.fit(
        [
            Planned("sed", 2000.0, 3.0),  # the best gain a second, longer than the limit: left out first
            Planned("supervised", 1500.0, 2.0),  # kept: 200 s left
            Planned("wise", 100.0, 1.0, needs=("supervised",)),  # kept: 100 s left
            Planned("query-side", 360.0, 0.0),
            Planned("hybrid-query-side", 10.0, 0.0, needs=("query-side",)),
            Planned("whitening", 200.0, -1.0),  # a loss counts as no gain
        ],
        already=100.0,
    )
    assert list(plan.kept) == ["supervised", "wise"] and set(plan.waiting) == {"sed", "query-side", "hybrid-query-side", "whitening"}
    assert plan.left_out["hybrid-query-side"] == "built on query-side, all left out"
    for name in list(plan.kept):
        plan.finished(name, plan.kept[name].seconds / 2)  # half what they were expected to take: the scale stays 1
    assert plan.bring_back({"sed"}) is None  # all 2000 s of it in the 900 left

    def ready() -> set[str]:  # what the phase passes: those with nothing to be built on, or one that ran
        return {n for n, c in plan.waiting.items() if not c.needs or any(m in plan.done for m in c.needs)}

    order = []
    while (name := plan.bring_back(ready())) is not None:
        order.append(name)
        assert name in plan.kept and name not in plan.left_out and "run with the time left" in plan.brought_back[name]
        plan.finished(name, plan.kept[name].seconds)
        now[0] += plan.kept[name].seconds
    assert order == ["whitening", "query-side", "hybrid-query-side"]  # equal gains (none): the cheapest first
    assert list(plan.left_out) == ["sed"] and set(plan.summary()["brought_back"]) == set(order)


def test_one_brought_back_is_costed_as_late_as_the_run_is(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=1800.0, started=0.0, given=False)
    plan.kept["trained"] = Planned("trained", 400.0, 1.0)
    plan.waiting["query-side"] = Planned("query-side", 500.0, 0.0)
    plan.left_out["query-side"] = "expected 8.3 min"
    plan.finished("trained", 800.0)  # twice as long as expected: query-side is expected to take 1000 s in 800 left
    assert plan.scale() == pytest.approx(2.0) and plan.bring_back({"query-side"}) is None
    now[0] = 700.0  # 1100 s left
    assert plan.bring_back({"query-side"}) == "query-side"


def test_a_raced_training_is_brought_back_when_its_first_look_fits_and_a_whole_one_only_when_all_of_it_does(monkeypatch):
    """qqp's default run left ct out at planning (its first look 2.4 min, all of it 13.0) and ended with 4.5 minutes
    unspent: racing alone, the time plan ends it at its best checkpoint when its rest does not fit, so its first look
    fitting is enough; a candidate that is only whole (a supervised one) still needs all of it to fit."""
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: 1530.0)  # 270 s left
    plan = TimePlan(limit=1800.0, started=0.0, given=False)
    plan.waiting |= {"ct": Planned("ct", 400.0, 0.5, first=144.0, whole=780.0), "supervised": Planned("supervised", 200.0, 2.0, first=60.0)}
    plan.left_out |= {"ct": "its first look expected 2.4 min (all of it 13.0 min)", "supervised": "expected 3.3 min"}
    assert plan.bring_back({"ct"}) is None  # all 780 s of it in 270
    assert plan.bring_back({"ct", "supervised"}, first_look_enough={"ct"}) == "supervised"  # 200 s whole: the best gain a second
    assert "expected 3.3 min, 4.5 min left" in plan.brought_back["supervised"]
    plan.finished("supervised", 100.0)
    assert plan.bring_back({"ct"}, first_look_enough={"ct"}) == "ct" and "expected 2.4 min, 4.5 min left" in plan.brought_back["ct"]


def test_a_raced_training_brought_back_on_its_first_look_must_fit_its_scoring_too(monkeypatch):
    """scripts/main.sh (--time 6m) brought sg-opt back with 72 s left on its 36 s first round, then scored it on every
    dev, test and train pair (72 s more) and ended 1.4 minutes past its --time: ended at its best checkpoint or not, a
    raced training is scored, so its first look and its scoring must fit."""
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: 288.0)  # 72 s left
    plan = TimePlan(limit=360.0, started=0.0)
    plan.waiting["sg-opt"] = Planned("sg-opt", 150.0, 0.5, first=36.0, whole=190.0, finish=72.0)
    plan.left_out["sg-opt"] = "expected 0.6 min now"
    assert plan.bring_back({"sg-opt"}, first_look_enough={"sg-opt"}) is None  # 36 + 72 s in 72
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: 240.0)  # 120 s left
    assert plan.bring_back({"sg-opt"}, first_look_enough={"sg-opt"}) == "sg-opt"
    assert "expected 1.8 min, 2.0 min left" in plan.brought_back["sg-opt"]
    # a look that is all of it already counts its scoring: nothing is added twice
    plan = TimePlan(limit=360.0, started=0.0)
    plan.waiting["ct"] = Planned("ct", 100.0, 0.5, first=100.0, finish=72.0)
    plan.left_out["ct"] = "expected 1.7 min"
    assert plan.bring_back({"ct"}, first_look_enough={"ct"}) == "ct" and "expected 1.7 min" in plan.brought_back["ct"]


def test_a_raced_training_goes_on_and_is_capped_only_with_its_scoring_kept_aside(monkeypatch):
    """Under --time a racer goes on while something is left beside the first looks held back and its own scoring (it is
    scored whether it goes on or ends now); a capped training leaves its scoring room within its allowance; a member
    whose rest counts its scoring (a supervised one) is not charged it twice."""
    now = [300.0]  # 60 s left
    monkeypatch.setattr(time_plan.time, "monotonic", lambda: now[0])
    plan = TimePlan(limit=360.0, started=0.0, kept={"sg-opt": Planned("sg-opt", 150.0, 0.5, first=36.0, finish=72.0)})
    plan.begin("sg-opt")
    stopped = plan.go_on({"sg-opt": 80.0}, scored=["sg-opt"])
    assert list(stopped) == ["sg-opt"] and "1.2 min for their scoring" in stopped["sg-opt"]
    assert plan.go_on({"sg-opt": 80.0}) == {}  # one whose rest holds its scoring: 60 s is room enough to go on
    now[0] = 200.0  # 160 s left
    assert plan.go_on({"sg-opt": 80.0}, scored=["sg-opt"]) == {}
    plan.current = "sg-opt"
    assert plan.minutes_cap() == pytest.approx((160.0 - 72.0) / 60)  # all that is left but its scoring
    # the default time: the rest must fit beside the scoring too, and the --time named counts it
    plan = TimePlan(limit=360.0, started=0.0, given=False, kept={"sg-opt": Planned("sg-opt", 150.0, 0.5, first=36.0, finish=72.0)})
    plan.begin("sg-opt")
    assert plan.go_on({"sg-opt": 80.0}) == {}  # 80 of 160
    late = plan.go_on({"sg-opt": 100.0}, scored=["sg-opt"])  # 100 + 72 of 160
    assert "--time 7m would let it go on" in late["sg-opt"]  # 200 spent + 100 + 72 s


@pytest.mark.slow
def test_a_run_that_planned_too_dearly_runs_what_it_left_out_with_the_time_left(tiny_model_dir, tmp_path, monkeypatch):
    """A tiny run planned as if supervised took 100 of its 120 s: whitening (30 s) is left out at planning; supervised
    takes seconds, so whitening runs with the time left, is scored and may be chosen, and the results say so."""
    from sentune.adaptation.candidates.postprocessed import PostProcessed
    from sentune.adaptation.candidates.supervised import Supervised
    from sentune.cli import main

    monkeypatch.setattr(time_plan, "expected_gains", lambda search: {"supervised": 2.0})
    for method in ("expected_seconds", "first_look_seconds", "whole_seconds"):
        monkeypatch.setattr(Supervised, method, lambda self, ctx, costs: 100.0)
    monkeypatch.setattr(PostProcessed, "expected_seconds", lambda self, ctx, costs: 30.0)
    args = tiny_adapt_args(tiny_model_dir, tmp_path)
    assert main([*args, "--methods", "whitening,supervised", "--budget", "4", "--time", "120s", "--out", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    planned = results["meta"]["time"]
    assert "whitening" in planned["brought_back"] and "run with the time left" in planned["brought_back"]["whitening"]
    assert not planned["left_out"] and {"whitening", "supervised"} <= set(results["candidates"])
    assert results["candidates"]["whitening"]["select"] is not None
    assert "with the time left" in results["meta"]["phases"]


@pytest.mark.slow
def test_a_label_free_training_left_out_at_planning_races_alone_with_the_time_left(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """A tiny run planned as if supervised took 100 of its 120 s: simcse (its first look 30 s, all of it 300 s) is left
    out at planning; supervised takes seconds, so simcse races alone with the time left, costed by its first look (all
    of it would not fit), and the results name it brought back."""
    from sentune.adaptation.candidates.supervised import Supervised
    from sentune.adaptation.candidates.trained import Trained
    from sentune.cli import main

    monkeypatch.setattr(time_plan, "expected_gains", lambda search: {"supervised": 2.0, "simcse": 0.1})
    for method in ("expected_seconds", "first_look_seconds", "whole_seconds"):
        monkeypatch.setattr(Supervised, method, lambda self, ctx, costs: 100.0)
    for method, seconds in (("expected_seconds", 60.0), ("first_look_seconds", 30.0), ("whole_seconds", 300.0)):
        monkeypatch.setattr(Trained, method, lambda self, ctx, costs, seconds=seconds: seconds)
    args = tiny_adapt_args(tiny_model_dir, tmp_path)
    assert main([*args, "--methods", "simcse,supervised", "--budget", "4", "--time", "120s", "--out", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    planned = results["meta"]["time"]
    assert "its first look expected 0.5 min (all of it 1.0 min)" in planned["brought_back"]["simcse"]
    assert "run with the time left: expected 0.5 min" in planned["brought_back"]["simcse"]
    assert not planned["left_out"] and results["candidates"]["simcse"]["select"] is not None
    assert "race: simcse alone in rounds" in capsys.readouterr().out


def test_the_probe_takes_the_fastest_of_its_passes_after_a_warm_up(monkeypatch):
    """The probe's measure is the least of its passes over the same texts (a fake clock: the warm-up on 4 texts is not
    counted, the first pass is slowed, the second is not)."""
    from sentune.core import encode

    clock, per_text, calls = [0.0], [0.05, 0.02, 0.008], []

    class Fake:
        def __init__(self, model, poolings, show_progress=True):
            pass

        def encode(self, texts):
            calls.append(len(texts))
            clock[0] += len(texts) * (per_text.pop(0) if len(texts) > 4 else 1.0)

    monkeypatch.setattr(encode, "Encoder", Fake)
    monkeypatch.setattr(time_plan.time, "perf_counter", lambda: clock[0])
    texts = [f"text {i % 300}" for i in range(1000)]  # 300 distinct: the probe reads the first PROBE_TEXTS of them
    assert time_plan.probe_text_seconds(None, texts) == pytest.approx(0.02)  # of 0.05 and 0.02 a text
    assert calls == [4, time_plan.PROBE_TEXTS, time_plan.PROBE_TEXTS]
    calls.clear()
    assert time_plan.probe_text_seconds(None, texts, passes=1) == pytest.approx(0.008) and calls == [4, time_plan.PROBE_TEXTS]
