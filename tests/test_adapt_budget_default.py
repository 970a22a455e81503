"""issue 72 item 6: a search supervised candidate trains as many steps for queries judged with ten times the documents
(a positive drawn per query per pass), and a run without --time is planned for a default time that leaves out what does
not fit, naming its expected minutes and the --time that would include it."""

from __future__ import annotations

import logging
import math
import random
from types import SimpleNamespace

import pytest

from sentune.adaptation import time_plan
from sentune.adaptation.hard_negatives import POSITIVE_DRAWS, drawn_positives, search_rows
from sentune.adaptation.time_plan import DEFAULT_TIME, Planned, fitted, time_to_include
from sentune.data.beir import Query
from sentune.data.readers import Source


def toy_queries(judged: int, count: int = 40, seed: int = 0) -> list[Query]:
    """`count` queries, each judged relevant to `judged` documents on average (seeded, 1 to 2 × judged - 1 each)."""
    rng = random.Random(seed)
    found = []
    for i in range(count):
        relevant = {f"d{rng.randrange(10_000)}": rng.choice((1, 2)) for _ in range(rng.randint(1, 2 * judged - 1))}
        found.append(Query(f"q{i}", f"query {i}", Source("toy", i + 1), relevant))
    return found


def steps_of(rows: int) -> int:
    """The supervised search recipe's steps over `rows` rows, as Context.labelled_recipe counts them (its epochs over
    them, in batches)."""
    from sentune.training.recipe import load_recipe

    training = load_recipe("adapt/mnrl-hard-negatives", check=False).training
    return max(1, math.ceil(training.epochs * math.ceil(rows / training.batch_size)))


def rows_of(queries: list[Query], seed: int = 0) -> list[list[tuple[str, ...]]]:
    texts = {doc: f"text of {doc}" for q in queries for doc in q.relevant}
    negatives = {q.id: (f"bm25 negative of {q.id}", f"dense negative of {q.id}") for q in queries}
    return search_rows(queries, texts, negatives, seed)


def test_ten_times_the_judgements_train_as_many_steps():
    few, many = toy_queries(3), toy_queries(30)
    judgements = lambda queries: sum(len(q.relevant) for q in queries)  # noqa: E731
    assert judgements(many) > 8 * judgements(few)  # the toy: about 10x the judgements, the same 40 queries
    # a row per judgement, 4 epochs (the code before): the steps grew with the judgements
    assert 4 * math.ceil(judgements(many) / 16) > 8 * 4 * math.ceil(judgements(few) / 16)
    few_rows, many_rows = rows_of(few), rows_of(many)
    assert [len(r) for r in few_rows] == [len(r) for r in many_rows] == [POSITIVE_DRAWS] * 40
    assert steps_of(sum(map(len, many_rows))) == steps_of(sum(map(len, few_rows))) == math.ceil(40 * POSITIVE_DRAWS / 16)
    # the count the time plan reads is the rows built
    from sentune.adaptation.candidates.supervised import SupervisedSearch

    assert [len(r) for r in SupervisedSearch("supervised").training_rows_counted(many)] == [len(r) for r in many_rows]
    # each row: the query, a document judged relevant to it, its two negatives
    for q, rows in zip(many, many_rows, strict=True):
        assert all(
            row[0] == q.text and row[1].removeprefix("text of ") in q.relevant and row[2:] == (f"bm25 negative of {q.id}", f"dense negative of {q.id}")
            for row in rows
        )


def test_the_draws_change_each_pass_cover_the_documents_and_are_seeded_by_the_query_alone():
    query = Query("q", "a query", Source("toy", 1), {f"d{i}": 1 for i in range(3)} | {"unjudged": 0})
    draws = drawn_positives(query, 9, seed=5)
    assert "unjudged" not in draws
    assert all(a != b for a, b in zip(draws, draws[1:], strict=False))  # never the same document two passes in a row
    assert sorted(draws[:3]) == sorted(draws[3:6]) == sorted(draws[6:]) == ["d0", "d1", "d2"]  # each before any again
    assert drawn_positives(query, 9, seed=5) == draws  # seeded
    assert any(drawn_positives(query, 9, seed=s) != draws for s in range(6, 12))  # another seed, another order
    # a query's rows are the same whichever queries train beside it (a fold's, the refit's)
    others = toy_queries(5, count=10)
    alone, beside = rows_of([others[3]]), rows_of(others)
    assert alone[0] == beside[3]
    assert drawn_positives(Query("x", "no judged document", Source("toy", 1), {"d": 0}), 4, 0) == []
    assert drawn_positives(Query("one", "one judged", Source("toy", 1), {"d": 2}), 3, 0) == ["d", "d", "d"]


def test_the_supervised_search_candidates_expected_minutes_follow_the_queries_not_the_judgements():
    """Its expected seconds (what the default plan weighs) are the same for queries judged ten times as densely, and
    count its held-out folds' pool encodings."""
    from sentune.adaptation.candidates.supervised import SupervisedSearch
    from sentune.adaptation.crossfit import FOLDS

    candidate = SupervisedSearch("supervised")
    costs = time_plan.Costs(0.01, {"mnrl-hard-negatives": 20.0})

    def expected(queries: list[Query]) -> float:
        ctx = SimpleNamespace(
            inputs=SimpleNamespace(task=SimpleNamespace(train_units=lambda: None, search=True)),
            evidence=None,
            selection_units=lambda: queries,
            selection_texts=lambda: 1000,
            eval_texts=lambda: 5000,
            config=SimpleNamespace(budget=SimpleNamespace(steps=None), seed=0),
            plan=SimpleNamespace(after_race=[candidate]),
        )
        return candidate.expected_seconds(ctx, costs)

    few, many = expected(toy_queries(3)), expected(toy_queries(30))
    assert few == pytest.approx(many)
    steps = math.ceil(40 * POSITIVE_DRAWS / 16)
    # K fold trainings on (K - 1)/K of the queries each and the refit, weighed at the recipe's batch; every text scored
    # once by the refit; each fold's held-out queries and pool encoded by that fold's model
    assert few == pytest.approx(FOLDS * steps * 20.0 * 16 * 0.01 + 5000 * 0.01 + FOLDS * 1000 * 0.01)


def planned_toy() -> tuple[Planned, list[Planned]]:
    """The unchanged model, two cheap candidates and a supervised one of 50 expected minutes."""
    first = Planned("unchanged", 120.0, 0.0)
    items = [Planned("hybrid", 240.0, 2.0), Planned("pooling-mean", 30.0, 0.0), Planned("supervised", 50 * 60.0, 1.5)]
    return first, items


def test_the_default_time_leaves_out_a_candidate_too_long_for_it_and_names_the_time_that_includes_it():
    first, items = planned_toy()
    default = fitted(DEFAULT_TIME, first, items, already=60.0, given=False)
    assert set(default.kept) == {"unchanged", "hybrid", "pooling-mean"}
    why = default.left_out["supervised"]
    assert why.startswith("expected 50.0 min;") and "of the default --time 30m left for it" in why
    # 60 s spent, the unchanged model's 120, hybrid's 240 and supervised's 3000: 3420 s, 57 min (pooling's 30 s, expected
    # to gain nothing, is then the one left out)
    including = time_to_include(default, first, items, already=60.0)
    assert including == {"supervised": 57}
    assert "supervised" in fitted(57 * 60.0, first, items, already=60.0).kept
    assert "supervised" not in fitted(56 * 60.0, first, items, already=60.0).kept
    assert default.summary()["default"] is True and default.summary()["time_to_include_min"] == {} != including
    # a --time beyond it runs everything, and says the limit is --time's
    roomy = fitted(90 * 60.0, first, items, already=60.0)
    assert set(roomy.kept) == {"unchanged", "hybrid", "pooling-mean", "supervised"} and not roomy.left_out
    tight = fitted(5 * 60.0, first, items, already=60.0)
    assert "of --time left for it" in tight.left_out["supervised"]
    # the default caps no training (a run without --time trains the same steps each time, and resumes); --time does
    assert default.minutes_cap() is None and roomy.minutes_cap() == pytest.approx(roomy.left() / 60)


def test_a_run_without_time_is_planned_for_the_default_and_prints_what_it_leaves_out(monkeypatch, caplog):
    """sentune.adaptation.time_plan.plan_run without --time: the plan for DEFAULT_TIME, the candidate too long for it taken out
    of the run, and the line naming it with its expected minutes and the --time that includes it."""
    from sentune.adaptation.candidates.plan import Plan

    probed: list[list[str]] = []
    monkeypatch.setattr(time_plan, "probe_text_seconds", lambda model, texts: probed.append(list(texts)) or 0.01)
    monkeypatch.setattr(time_plan, "expected_gains", lambda search: {"hybrid": 2.0, "supervised": 1.5})
    finished: set[str] = set()
    candidate = lambda name, seconds, phase: SimpleNamespace(  # noqa: E731
        name=name,
        phase=phase,
        expected_seconds=lambda ctx, costs: seconds,
        first_look_seconds=lambda ctx, costs: seconds,  # none of them raced: each is all first look
        whole_seconds=lambda ctx, costs: seconds,
        scoring_seconds=lambda ctx, costs: 0.0,
        builds_on=lambda others, ctx: (),
        finished=lambda ctx: name in finished,
        ships_first_look=name != "supervised",
    )
    plan = SimpleNamespace(
        before_race=[candidate("unchanged", 60.0, "before_race"), candidate("pooling-mean", 30.0, "before_race")],
        raced=[],
        after_race=[candidate("supervised", 50 * 60.0, "after_race"), candidate("hybrid", 240.0, "after_race")],
    )
    plan.all = [*plan.before_race, *plan.after_race]

    def run_plan(time_limit: float | None):
        ctx = SimpleNamespace(
            config=SimpleNamespace(time_limit=time_limit),
            base=None,
            inputs=SimpleNamespace(corpus=["a passage"], task=SimpleNamespace(search=True, documents=[SimpleNamespace(text="a whole document")])),
        )
        found = Plan(before_race=list(plan.before_race), after_race=list(plan.after_race))
        return time_plan.plan_run(found, ctx, time_plan.time.monotonic()), found

    with caplog.at_level(logging.INFO, logger="sentune.progress"):
        timing, found = run_plan(None)
    assert timing.limit == DEFAULT_TIME and not timing.given and "supervised" not in [c.name for c in found.after_race]
    assert [c.name for c in found.left_out] == ["supervised"]  # kept aside: the time left at the end may bring it back
    assert probed == [["a whole document"]]  # a search run's text cost is a document's, not a passage's
    printed = caplog.text
    assert "no --time: planned for 30.0 min (--time raises it)" in printed
    assert "left out: supervised: expected 50.0 min;" in printed and "of the default --time 30m left for it; --time 56m would include it" in printed
    caplog.clear()
    timing, found = run_plan(56 * 60.0)  # the --time it named
    assert timing.given and "supervised" in timing.kept and "supervised" in [c.name for c in found.after_race] and not timing.left_out
    finished.add("supervised")  # a resumed run whose supervised candidate finished reads it back: it fits any time
    timing, found = run_plan(None)
    assert "supervised" in [c.name for c in found.after_race] and timing.kept["supervised"].seconds == 0.0 and not timing.left_out


def test_the_quora_clusters_example_judges_each_question_of_a_large_cluster_with_the_rest_of_it(tmp_path):
    """quora-clusters (the search example with many judgements a query): duplicates of duplicates are relevant too,
    checked against the closure by repeated joining; a cluster under 6 questions gives no query; the question itself is
    never relevant to itself, and every query and relevant document is a question of the corpus."""
    from sentune.adaptation.examples import write_example
    from sentune.data.beir import read_beir_folder

    def half(prefix: str) -> list[str]:
        chain = [f"{prefix} chained question {i} ?" for i in range(7)]  # one cluster of 7, joined pair by pair
        small = [f"{prefix} small question {i} ?" for i in range(3)]  # a cluster of 3: left out
        rows = [f"{a}\t{b}\t1" for a, b in zip(chain, chain[1:], strict=False)] + [f"{a}\t{b}\t1" for a, b in zip(small, small[1:], strict=False)]
        return [*rows, f"{chain[0]}\t{small[0]}\t0", f"{prefix} lone ?\t{chain[3]}\t0"]

    qqp = tmp_path / "data" / "corpora" / "qqp"
    qqp.mkdir(parents=True)
    for split in ("dev", "test"):
        (qqp / f"{split}.tsv").write_text("\n".join(half(split)) + "\n", encoding="utf-8")
    files = write_example("quora-clusters", tmp_path / "data", tmp_path / "example")
    for split, folder in (("dev", files.dev), ("test", files.test)):
        found = read_beir_folder(folder, split)
        text = {d.id: d.text for d in found.corpus}
        pairs = {(q.text, text[d]) for q in found.queries for d in q.relevant}
        joined = {(a, b) for line in half(split) for a, b, label in [line.split("\t")] if label == "1"}
        closure = joined | {(b, a) for a, b in joined}
        while True:  # the naive closure: join pairs until nothing new
            more = closure | {(a, d) for a, b in closure for c, d in closure if b == c and a != d}
            if more == closure:
                break
            closure = more
        assert pairs == {(a, b) for a, b in closure if "chained" in a}  # the cluster of 7 only, each with its 6 others
        assert len(found.queries) == 7 and all(len(q.relevant) == 6 and q.id not in q.relevant for q in found.queries)
        assert len(found.corpus) == 2 * 11  # every question of both halves


def test_the_report_names_what_the_default_time_left_out_and_the_time_that_includes_it():
    from sentune.adaptation.report import time_lines

    first, items = planned_toy()
    default = fitted(DEFAULT_TIME, first, items, already=60.0, given=False)
    default.including = time_to_include(default, first, items, already=60.0)
    line = time_lines(default.summary())[0]
    assert line == f"Left out by --time 30m, the default: `supervised` ({default.left_out['supervised']}; --time 57m includes it)."
    assert time_lines(fitted(90 * 60.0, first, items, already=60.0).summary()) == [] and time_lines(None) == []


def test_supervised_members_held_out_of_the_train_pairs_expect_the_race_check_on_them(monkeypatch):
    """With --train pairs whose evidence judges and every member held out of its selection pairs, the race checks each
    member's first round on up to 500 of those pairs (sentune.adaptation.candidates.supervised_race.TrainRace): two
    encodings of each pair count in a member's expected seconds; with the evidence silent they do not."""
    from sentune.adaptation import race_rows
    from sentune.adaptation.candidates.supervised import Supervised
    from sentune.adaptation.names import HELD_OUT

    members = [Supervised("supervised"), Supervised("supervised-stacked", "best")]
    monkeypatch.setattr(Supervised, "evidence_mode", lambda self, ctx: HELD_OUT)
    monkeypatch.setattr(Supervised, "given_indices", lambda self, ctx: list(range(800)))
    costs = time_plan.Costs(0.01, {"cosent": 20.0})
    ctx = SimpleNamespace(
        metric="spearman",
        inputs=SimpleNamespace(task=SimpleNamespace(train_units=lambda: [None] * 1000, search=False)),
        config=SimpleNamespace(budget=SimpleNamespace(steps=None), seed=0),
        plan=SimpleNamespace(after_race=members),
        eval_texts=lambda: 5000,
    )
    monkeypatch.setattr(race_rows, "race_train_pairs", lambda ctx: 0)
    silent = members[0].expected_seconds(ctx, costs)
    monkeypatch.setattr(race_rows, "race_train_pairs", lambda ctx: 300)
    assert members[0].expected_seconds(ctx, costs) - silent == pytest.approx(2 * 300 * 0.01)
    ctx.plan.after_race = members[:1]  # a lone member races too (its first look): checked on the same pairs
    alone = members[0].expected_seconds(ctx, costs)
    monkeypatch.setattr(race_rows, "race_train_pairs", lambda ctx: 0)
    assert alone - members[0].expected_seconds(ctx, costs) == pytest.approx(2 * 300 * 0.01)
