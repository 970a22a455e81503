"""The training candidates' race reads the selection rows that judge at the end (sentune.adaptation.race_rows): the dev
selection pairs and, when --train's evidence pairs judge, a seeded sample of the evidence selection pairs, each ranked
among their own; its records say after which round, at which step of how many and on how many pairs it stopped one."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score
from test_supervised import _args, labelled  # noqa: F401  # the labelled pairs fixture

from sentune.adaptation.decide import DevSplit, split_dev
from sentune.adaptation.evidence import Evidence
from sentune.adaptation.store import CandidateStore
from sentune.adaptation.train_evidence import UNTUNED_FILE
from sentune.core.metrics import METRICS
from sentune.data.user_data import ScoredPairs


def _naive(gold: np.ndarray, predicted: np.ndarray, metric: str) -> float:
    if metric == "spearman":
        return float(spearmanr(gold, predicted)[0] * 100)
    return float(average_precision_score(gold == 1, predicted) * 100)


@pytest.mark.parametrize("metric", ["spearman", "average_precision"])
def test_the_stratified_score_and_bootstrap_against_their_formula(metric):
    """score_on: the pair-weighted mean of the metric within the dev and the train rows; differences: that score's
    difference on each resample, every resample drawing each stratum's rows within it (RaceRows.draws)."""
    from sentune.adaptation.race_rows import RaceRows, differences, score_on

    rng = np.random.default_rng(3)
    dev, train = 40, 90
    binary = metric == "average_precision"
    gold = (rng.random(dev + train) < 0.4).astype(float) if binary else np.concatenate([rng.random(dev) * 5, rng.random(train)])
    a, b = gold + rng.normal(0, 0.7, dev + train), gold + rng.normal(0, 1.0, dev + train)
    rows = RaceRows(gold, b, dev, np.arange(train), np.arange(train) * 2)
    strata = rows.strata
    expected = (dev * _naive(gold[:dev], a[:dev], metric) + train * _naive(gold[dev:], a[dev:], metric)) / (dev + train)
    assert score_on(gold, a, metric, strata) == pytest.approx(expected)
    draws = rows.draws(seed=0)
    assert draws.shape == (1000, dev + train) and (draws[:, :dev] < dev).all() and (draws[:, dev:] >= dev).all()
    found = differences(gold, a, b, metric, draws, strata)
    for k in (0, 1, 517):  # a few resamples, written out
        d = draws[k]
        naive = [(dev * _naive(gold[d[:dev]], x[d[:dev]], metric) + train * _naive(gold[d[dev:]], x[d[dev:]], metric)) / (dev + train) for x in (a, b)]
        assert found[k] == pytest.approx(naive[0] - naive[1], abs=1e-6)
    # without train rows: the plain metric and the race's old resamples
    only = rows.dev_only()
    assert only.strata is None and only.train == 0 and len(only.gold) == dev
    assert score_on(only.gold, a[:dev], metric) == pytest.approx(_naive(gold[:dev], a[:dev], metric))


def _toy(tmp_path, dev_gold, unchanged_dev, train_gold, unchanged_train, *, binary=False):
    """A race's context on `dev_gold` (the dev selection pairs) with evidence pairs whose selection part is `train_gold`
    (its confirmation part as many pairs again), the unchanged model's scores of them cached as draw_evidence leaves them."""
    n = len(train_gold)
    gold = np.empty(2 * n)
    gold[0::2], gold[1::2] = train_gold, train_gold[::-1]
    untuned = np.empty(2 * n)
    untuned[0::2], untuned[1::2] = unchanged_train, unchanged_train[::-1]
    indices = np.arange(2 * n) * 3 + 1  # --train indices of the evidence pairs
    evidence = Evidence(indices, gold, DevSplit(np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2)))
    (tmp_path / "candidates").mkdir(parents=True, exist_ok=True)
    np.savez(str(tmp_path / "candidates" / UNTUNED_FILE), digest=np.array(evidence.digest), model=untuned)
    train = ScoredPairs.from_rows([(f"a{i}", f"b{i}", float(i % 2 if binary else i % 5)) for i in range(indices[-1] + 1)], where="train.tsv")
    metric = "average_precision" if binary else "spearman"
    return SimpleNamespace(
        out=tmp_path,
        metric=metric,
        device="cpu",
        base=SimpleNamespace(max_seq_length=64),
        store=CandidateStore(tmp_path, np.arange(len(dev_gold))),
        config=SimpleNamespace(seed=0, show_progress=False),
        inputs=SimpleNamespace(dev=SimpleNamespace(unit="pairs"), task=SimpleNamespace(train=train)),
        evidence=evidence,
        selection_gold=lambda: dev_gold,
        selection_cosines=lambda dev: dev,
        selection_score_of=lambda cosines: METRICS[metric].score(dev_gold, cosines),
        untuned=lambda pooling: {"dev": unchanged_dev},
        _scoring=lambda scorer: scorer,
    )


def _racer(ctx, name: str, dev_cosines: np.ndarray, train_cosines: np.ndarray | None, steps: int = 80):
    """A racer paused at step 10 whose best evaluation is there, with its checkpoint's cosines of the race's train
    rows as the race caches them (None: its checkpoint is gone)."""
    from sentune.adaptation.candidates import Trained
    from sentune.adaptation.race_rows import FOLDER, race_rows

    candidate = Trained(name, f"adapt/{name}")
    run = candidate.run_folder(ctx)
    (run / "dev_cosines").mkdir(parents=True)
    np.save(run / "dev_cosines" / "step-10.npy", dev_cosines)
    (run / "paused.json").write_text(json.dumps({"step": 10, "training_seconds": 5.0}))
    if train_cosines is not None:
        (run / "checkpoints" / "checkpoint-10").mkdir(parents=True)
        (run / "checkpoints" / "checkpoint-10" / "modules.json").write_text("[]")
        (run / FOLDER).mkdir()
        np.savez(str(run / FOLDER / "checkpoint-10.npz"), digest=np.array(race_rows(ctx).digest), cosines=train_cosines)
    recipe = SimpleNamespace(name=f"adapt/{name}", training=SimpleNamespace(max_steps=steps), to_dict=lambda: {"training": {"eval_steps": 10}})
    return candidate.race_entry(recipe, ctx)


def _dev_alone_stops(ctx, cosines: np.ndarray) -> bool:
    """What the race read before: the dev selection pairs alone (the toy's premise, checked)."""
    from sentune.adaptation.race_engine import verdict
    from sentune.tasks.bootstrap import resamples

    gold, unchanged = ctx.selection_gold(), ctx.untuned("model")["dev"]
    return bool(verdict(gold, {"x": cosines}, ["x"], unchanged, ctx.metric, resamples(len(gold), seed=0), "the dev pairs"))


def test_the_train_rows_keep_a_racer_the_dev_selection_pairs_alone_would_stop(tmp_path):
    """Seeded toy: on its 60 dev selection pairs a racer is far behind the unchanged model (the race on those alone
    stops it), on the 500 evidence selection pairs far ahead: on the rows that judge at the end it goes on. Another,
    slightly ahead on the dev pairs and far behind on the train pairs, stops there, its record saying on what."""
    from sentune.adaptation.race import _eliminate

    rng = np.random.default_rng(0)
    dev_gold, train_gold = rng.normal(size=60), rng.random(500) * 5  # another label scale: ranked apart
    unchanged_dev, unchanged_train = dev_gold + rng.normal(0, 1.0, 60), train_gold + rng.normal(0, 6.0, 500)
    ctx = _toy(tmp_path, dev_gold, unchanged_dev, train_gold, unchanged_train)
    unlucky = dev_gold + rng.normal(0, 4.0, 60)
    assert _dev_alone_stops(ctx, unlucky)
    entry = _racer(ctx, "unlucky", unlucky, train_gold + rng.normal(0, 0.5, 500))
    assert [e.name for e in _eliminate([entry], {}, ctx, 1, {"unlucky": 0.0})] == ["unlucky"]
    assert not entry.record.is_file()

    lucky = dev_gold + rng.normal(0, 0.9, 60)
    assert not _dev_alone_stops(ctx, lucky)
    entry = _racer(ctx, "lucky", lucky, train_gold + rng.normal(0, 20.0, 500), steps=298)
    assert _eliminate([entry], {}, ctx, 2, {"lucky": 0.0}) == []
    record = json.loads(entry.record.read_text())
    assert record["stopped"]["reason"].startswith("behind the unchanged model on the 560 selection pairs (60 dev + 500 train) after round 2 (")
    assert record["stopped"]["at_step"] == 10 and record["stopped"]["best_step"] == 10
    assert record["race"]["round"] == 2 and record["race"]["steps"] == 298 and record["race"]["rows"] == {"dev": 60, "train": 500}
    train = np.load(entry.run / "race_rows" / "checkpoint-10.npz")["cosines"]
    strata = np.r_[np.zeros(60), np.ones(500)]
    expected = (60 * _naive(dev_gold, lucky, "spearman") + 500 * _naive(train_gold, train, "spearman")) / 560
    assert record["race"]["score"] == pytest.approx(expected)
    assert record["dev_score"] == pytest.approx(_naive(dev_gold, lucky, "spearman"))  # the record's selection score: the dev pairs'
    np.testing.assert_array_equal(ctx.store.scores("lucky")["select"], lucky)  # the store keeps the dev selection cosines only
    assert len(strata) == len(np.concatenate([lucky, train]))

    from sentune.adaptation.report import race_check

    note = race_check(record)
    assert note == " of 298, after round 2, on 60 dev + 500 train selection pairs"


def test_a_racer_whose_checkpoint_is_gone_is_raced_on_the_dev_selection_pairs_alone(tmp_path, caplog):
    """The trainer keeps the best checkpoint, yet if it is gone that round compares every racer on the dev selection
    pairs alone (the same rows for all), and says so."""
    from sentune.adaptation.race import _eliminate

    rng = np.random.default_rng(1)
    dev_gold, train_gold = rng.normal(size=60), rng.normal(size=500)
    ctx = _toy(tmp_path, dev_gold, dev_gold + rng.normal(0, 1.0, 60), train_gold, train_gold + rng.normal(0, 6.0, 500))
    entry = _racer(ctx, "gone", dev_gold + rng.normal(0, 4.0, 60), None)
    caplog.set_level("INFO", logger="sentune.progress")
    assert _eliminate([entry], {}, ctx, 1, {"gone": 0.0}) == []
    record = json.loads(entry.record.read_text())
    assert record["stopped"]["reason"].startswith("behind the unchanged model on the 60 selection pairs after round 1")
    assert record["race"]["rows"] == {"dev": 60, "train": 0}
    assert "round 1 reads the dev selection pairs alone" in caplog.text


def test_the_race_samples_at_most_its_cap_of_the_evidence_selection_pairs_per_class(tmp_path):
    """A seeded sample of RACE_TRAIN_PAIRS of the evidence selection pairs, the share of positives kept (0/1 labels),
    the unchanged model's scores of them read from what draw_evidence encoded; none without evidence that judges."""
    from sentune.adaptation.race_rows import RACE_TRAIN_PAIRS, race_rows, race_train_pairs

    rng = np.random.default_rng(2)
    dev_gold = (rng.random(125) < 0.3).astype(float)
    train_gold = (rng.random(1375) < 0.3).astype(float)
    unchanged_train = rng.random(1375)
    ctx = _toy(tmp_path, dev_gold, rng.random(125), train_gold, unchanged_train, binary=True)
    rows = race_rows(ctx)
    assert race_train_pairs(ctx) == RACE_TRAIN_PAIRS == 500 and abs(rows.train - 500) <= 1
    select = ctx.evidence.split.select
    assert set(rows.train_positions) <= set(select) and np.array_equal(rows.train_indices, ctx.evidence.indices[rows.train_positions])
    sampled = ctx.evidence.gold[rows.train_positions]
    assert abs(sampled.mean() - ctx.evidence.gold[select].mean()) < 0.01  # per class, as the dev split is
    np.testing.assert_array_equal(rows.gold, np.concatenate([dev_gold, sampled]))
    np.testing.assert_array_equal(rows.unchanged[125:], unchanged_train[np.searchsorted(select, rows.train_positions)])
    assert np.array_equal(race_rows(ctx).train_positions, rows.train_positions)  # seeded
    expected = select[split_dev(ctx.evidence.gold[select], seed=11, fraction=500 / 1375).select]
    assert np.array_equal(rows.train_positions, expected)
    refused = SimpleNamespace(**{**vars(ctx), "evidence": Evidence(ctx.evidence.indices, ctx.evidence.gold, ctx.evidence.split, "another kind")})
    assert race_rows(refused).train == 0 and race_rows(refused).strata is None and race_train_pairs(refused) == 0


def test_a_checkpoint_is_scored_on_the_train_rows_once(tmp_path, tiny_st, monkeypatch):
    """train_cosines: the cosine of each train row's two sentences under the checkpoint's model, at the reading length
    of the model it started from; cached beside the run, so a later check reads it back."""
    from sentune.adaptation.race_rows import race_rows, train_cosines
    from sentune.core import models

    rng = np.random.default_rng(4)
    ctx = _toy(tmp_path, rng.normal(size=20), rng.normal(size=20), rng.normal(size=30), rng.normal(size=30))
    words = ["a man plays the guitar", "the dog runs in the park", "two kids eat food", "a woman is playing the piano"]
    ctx.inputs.task.train = ScoredPairs.from_rows([(words[i % 4], words[(i // 4) % 4], float(i % 5)) for i in range(len(ctx.inputs.task.train.pairs))])
    pairs = ctx.inputs.task.train.pairs
    weights = tmp_path / "candidates" / "x" / "run" / "checkpoints" / "checkpoint-4"
    tiny_st.max_seq_length = 8  # a recipe's truncation, saved with the checkpoint
    tiny_st.save(str(weights))
    rows = race_rows(ctx)
    found = train_cosines(rows, weights, ctx)
    tiny_st.max_seq_length = 64
    a = tiny_st.encode([pairs[i].a for i in rows.train_indices], normalize_embeddings=True)
    b = tiny_st.encode([pairs[i].b for i in rows.train_indices], normalize_embeddings=True)
    np.testing.assert_allclose(found, np.sum(a * b, axis=1), atol=1e-5)
    assert (weights.parent.parent / "race_rows" / "checkpoint-4.npz").is_file()
    monkeypatch.setattr(models, "load_model_with_runtime", lambda *args, **kwargs: pytest.fail("scored again"))
    np.testing.assert_array_equal(train_cosines(rows, weights, ctx), found)
    assert train_cosines(rows, tmp_path / "nowhere", ctx) is None


@pytest.mark.slow
def test_an_adapt_run_resumed_with_train_pairs_races_again_on_them(tiny_model_dir, labelled, tmp_path, capsys):  # noqa: F811
    """`sentune adapt` run again in its folder with --train (as adapt_experiments.sh's EXAMPLE_TRAIN=1 does): a candidate
    the race stopped on the dev selection pairs alone races again from its paused checkpoint on those and the evidence
    selection pairs; every one stopped then says on results.md at which step of how many and on what it stopped."""
    from sentune.cli import main

    out = tmp_path / "run"
    command = [*_args(tiny_model_dir, labelled, out), "--methods", "simcse,mirror,sed", "--budget", "8", "--sed-members", "2"]
    assert main(command) == 0
    before = json.loads((out / "results.json").read_text())["candidates"]
    stopped = [name for name, c in before.items() if c.get("stopped")]
    assert stopped and all(before[name]["race"]["rows"] == {"dev": 60, "train": 0} for name in stopped)
    capsys.readouterr()
    assert main([*command, "--train", str(labelled / "train.tsv")]) == 0
    said = capsys.readouterr().out
    assert all(
        f"{name} was stopped on other selection rows: raced again" in said or f"{name}: stopped by the race on other selection rows" in said for name in stopped
    )
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["train_evidence"]["select_pairs"] == 20
    page = (out / "results.md").read_text()
    for c in results["candidates"].values():
        if not c.get("stopped"):
            continue
        assert c["race"]["rows"] == {"dev": 60, "train": 20} and "(60 dev + 20 train)" in c["stopped"]["reason"]
        assert (out / c["run"] / "race_rows" / f"checkpoint-{c['stopped']['best_step']}.npz").is_file()
        assert f"stopped by the race at step {c['stopped']['at_step']} of {c['race']['steps']}, after round {c['race']['round']}, on 60 dev + 20 train" in page
    assert any((out / "candidates" / name / "run" / "race_rows").is_dir() for name in ("simcse", "mirror"))


def test_a_record_stopped_on_other_rows_is_not_current(tmp_path):
    """A stopped record names the rows its race read; one stopped on other rows (or, written before the race read
    train pairs, on the dev pairs alone) is raced again where the evidence now judges; a finished one stays."""
    from sentune.adaptation.candidates import Trained
    from sentune.adaptation.race_rows import digest_of, race_rows, raced_elsewhere
    from sentune.adaptation.records import CandidateRecord, RaceCheck, Stopped

    rng = np.random.default_rng(5)
    ctx = _toy(tmp_path, rng.normal(size=30), rng.normal(size=30), rng.normal(size=40), rng.normal(size=40))
    alone = SimpleNamespace(**{**vars(ctx), "evidence": None})
    here = race_rows(ctx).digest
    stopped = Stopped("behind", 10, 10)
    record = CandidateRecord(
        "simcse", "trained", stopped=stopped, race=RaceCheck(1, 10, {"dev": 30, "train": 40}, rows_digest=here), detail={"reads_tokens": 64}
    )
    old = CandidateRecord("simcse", "trained", stopped=stopped, detail={"reads_tokens": 64})  # written before: on the dev selection pairs alone
    assert not raced_elsewhere(record, ctx) and raced_elsewhere(record, alone)
    assert raced_elsewhere(old, ctx) and not raced_elsewhere(old, alone) and digest_of(np.zeros(0)) == race_rows(alone).digest
    assert not raced_elsewhere(CandidateRecord("simcse", "trained"), ctx)  # finished: the race's rows do not matter
    candidate = Trained("simcse", "adapt/simcse")
    assert candidate._current(record, ctx) and not candidate._current(old, ctx)


@pytest.mark.slow
def test_supervised_candidates_held_out_of_the_evidence_race_on_its_selection_pairs_too(tiny_model_dir, labelled, tmp_path, monkeypatch, capsys):  # noqa: F811
    """With --train's evidence judging and both supervised candidates held out of its selection pairs (trained without
    them), their race at the first rung reads the dev selection pairs and the race's sample of those pairs (each
    member's paused checkpoint scored there once, cached beside its run); cross-fitted, they race on the dev selection
    pairs alone (test_supervised.test_the_supervised_candidates_on_train_race_at_their_first_rung)."""
    from sentune.adaptation.candidates import supervised
    from sentune.adaptation.candidates.supervised_race import TRAIN_FILE
    from sentune.adaptation.race_rows import FOLDER
    from sentune.cli import main

    monkeypatch.setattr(supervised, "CROSS_FIT_STEPS", 0)  # any training counts as too long to cross-fit: held out
    out = tmp_path / "run"
    args = [*_args(tiny_model_dir, labelled, out), "--methods", "simcse,supervised,supervised-stacked", "--budget", "16"]
    assert main([*args, "--train", str(labelled / "train.tsv")]) == 0
    said = capsys.readouterr().out
    race = json.loads((out / "candidates" / TRAIN_FILE).read_text())
    assert race["detail"]["rows"] == {"dev": 60, "train": 20}
    for name in race["stopped"]:  # the line the race prints for it names the rows it read
        assert "(60 dev + 20 train)" in next(line for line in said.splitlines() if f"race: {name} stops: " in line)
    results = json.loads((out / "results.json").read_text())["candidates"]
    for name, step in race["detail"]["at_step"].items():
        if name in race["stopped"]:
            assert "(60 dev + 20 train)" in results[name]["skipped"]
            continue
        cached = np.load(out / "candidates" / name / "run" / FOLDER / f"checkpoint-{step}.npz")
        assert len(cached["cosines"]) == 20  # its paused checkpoint, scored on the race's train pairs
