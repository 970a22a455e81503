"""--train's pairs as evidence (sentune.adaptation.evidence, sentune.adaptation.train_evidence, sentune.adaptation.decide): which
pairs judge which candidate, never one it trained on, each kind of pair ranked among its own; the dev-only decision
unchanged without them; the checks that fall back to the dev pairs alone when the train pairs measure something else,
and never for their labels' scale."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from test_supervised import _args, labelled  # noqa: F401  # the labelled pairs fixture

from sentune.adaptation.decide import DevSplit, TrainJudges, decide, split_dev
from sentune.adaptation.evidence import EVIDENCE_CAP, domain_auc, domain_shift, evidence_size, kind_shift, sample_evidence, score_gap, score_shift
from sentune.adaptation.records import CandidateRecord
from sentune.adaptation.train_evidence import trained_train_indices
from sentune.cli import main


def _user(seed: int, n: int, gains: dict[str, float]):
    """Gold, the baseline and candidates whose predictions are the gold plus noise (smaller noise: a better one)."""
    rng = np.random.default_rng(seed)
    gold = rng.normal(size=n)
    return gold, gold + rng.normal(size=n), {name: gold + rng.normal(size=n) * (1 - gain) for name, gain in gains.items()}


def test_evidence_judges_every_candidate_on_the_same_selection_pairs_as_a_naive_stratified_spearman_does():
    """One yardstick: b lacks scores of some evidence selection pairs (NaN: a model of it trained on them), so every
    candidate and the unchanged model are compared on the selection pairs all of them have scores of; the best is
    confirmed on its own confirmation pairs."""
    gold, base, found = _user(0, 200, {"a": 0.0, "b": 0.3})
    t_gold, t_base, t_found = _user(1, 300, {"a": 0.0, "b": 0.3})
    split, t_split = split_dev(gold, seed=0), split_dev(t_gold, seed=1)
    b_train = t_found["b"].copy()
    trained = t_split.select[::2]  # b trained on some selection evidence pairs: NaN there
    b_train[trained] = np.nan
    train = TrainJudges(t_gold, t_split, {"unchanged": t_base, "a": t_found["a"], "b": b_train})
    decision = decide(gold, split, ("unchanged", base), found, "spearman", train=train)

    def naive(scores, t_scores, part, keep):
        """Spearman on the dev pairs of the part and on the evidence pairs, weighted by their numbers of pairs."""
        index = getattr(split, part)
        dev, extra = spearmanr(gold[index], scores[index])[0], spearmanr(t_gold[keep], t_scores[keep])[0]
        return 100 * (len(index) * dev + len(keep) * extra) / (len(index) + len(keep))

    shared = np.setdiff1d(t_split.select, trained)
    assert decision.selection["a"] == pytest.approx(naive(found["a"], t_found["a"], "select", shared))
    assert decision.selection["b"] == pytest.approx(naive(found["b"], t_found["b"], "select", shared))
    assert decision.selection["unchanged"] == pytest.approx(naive(base, t_base, "select", shared))
    assert decision.ahead["b"] == pytest.approx(decision.selection["b"] - decision.selection["unchanged"])
    assert decision.judged["b"] == {"select": {"dev": 100, "train": len(shared)}, "confirm": {"dev": 100, "train": 150}}
    assert decision.judged["a"] == decision.judged["b"] and not set(trained) & set(t_split.confirm)
    assert decision.best == "b" and decision.confirmation is not None and decision.confirmation.pairs == 250
    assert decision.confirmation.candidate == pytest.approx(naive(found["b"], t_found["b"], "confirm", t_split.confirm))
    assert "250 confirmation pairs (100 dev + 150 train)" in decision.reason


def test_a_monotone_rescaling_of_the_train_labels_changes_no_decision():
    """Rank metrics: train scores on another scale (0-100, or squashed into a narrower range than the dev sample's)
    judge exactly as the same pairs on the dev scale do."""
    gold, base, found = _user(8, 200, {"a": 0.1, "b": 0.25})
    t_gold, t_base, t_found = _user(9, 600, {"a": 0.1, "b": 0.25})
    split, t_split = split_dev(gold, seed=0), split_dev(t_gold, seed=1)
    scores = {"unchanged": t_base, **t_found}
    as_is = decide(gold, split, ("unchanged", base), found, "spearman", train=TrainJudges(t_gold, t_split, scores))
    for rescaled in (100 * t_gold, np.exp(t_gold), 0.5 + 0.1 * np.tanh(t_gold)):
        again = decide(gold, split, ("unchanged", base), found, "spearman", train=TrainJudges(rescaled, t_split, scores))
        assert (again.name, again.reason, again.selection, again.confirmation) == (as_is.name, as_is.reason, as_is.selection, as_is.confirmation)
    # a pooled Spearman would rank every train pair above every dev pair on the 0-100 scale: the train ranks apart
    assert as_is.judged["b"]["confirm"]["train"] == 300 and as_is.name == "b"


def test_without_evidence_scores_the_decision_is_the_dev_only_one():
    gold, base, found = _user(2, 160, {"a": 0.1, "b": 0.2, "c": 0.0})
    split = split_dev(gold, seed=3)
    alone = decide(gold, split, ("unchanged", base), found, "spearman", seed=3)
    t_gold, t_base, _ = _user(4, 50, {})
    t_split = split_dev(t_gold, seed=0)
    # evidence that judges no candidate, or lacks the baseline's scores, changes nothing
    for train in (TrainJudges(t_gold, t_split, {"unchanged": t_base}), TrainJudges(t_gold, t_split, {"a": t_base})):
        again = decide(gold, split, ("unchanged", base), found, "spearman", seed=3, train=train)
        assert (again.name, again.best, again.reason, again.selection, again.confirmation) == (
            alone.name,
            alone.best,
            alone.reason,
            alone.selection,
            alone.confirmation,
        )
    assert all(j["select"]["train"] == 0 and j["confirm"]["train"] == 0 for j in alone.judged.values())
    assert "train" not in alone.reason and str(len(split.select if alone.confirmation is None else split.confirm)) in alone.reason


def test_train_labels_are_refused_for_their_kind_never_for_their_scale_or_range():
    rng = np.random.default_rng(5)
    skewed = np.clip(rng.beta(5, 2, 5500), 0, 1)
    skewed[:10], skewed[10:20] = 0.0, 1.0  # a few train pairs at the scale's ends, which a dev sample of 250 may miss
    dev = np.clip(rng.beta(5, 2, 250), 0.19, 0.91)  # the dev sample of the issue: 0.19 to 0.91
    assert kind_shift(dev, skewed) is None and kind_shift(dev, 100 * skewed) is None and kind_shift(dev, skewed[:200] ** 3) is None
    binary = (rng.random(300) < 0.3).astype(float)
    said = kind_shift(dev, binary)
    assert said is not None and said.startswith("the labels check: they have 0/1 labels") and "to let them judge, give --train graded scores" in said
    assert kind_shift(binary, binary[::-1]) is None


def test_the_score_and_text_checks():
    rng = np.random.default_rng(6)
    gold = rng.normal(size=400)
    good, poor = gold + 0.3 * rng.normal(size=400), gold + 3 * rng.normal(size=400)
    assert score_shift("spearman", gold, good, gold, good + 0.01 * rng.normal(size=400)) is None
    said = score_shift("spearman", gold, good, gold, poor) or ""
    assert said.startswith("the scores check:") and "another domain; to let them judge, draw --dev and --train from one labelled source" in said
    gap, low, high = score_gap("spearman", gold, good, gold[:200], poor[:200])
    assert gap == pytest.approx(100 * (spearmanr(gold[:200], poor[:200])[0] - spearmanr(gold, good)[0])) and low < gap < high
    few = np.arange(12)  # a dozen pairs: a gap of more than the limit by chance alone is not flagged
    assert score_shift("spearman", gold, good, gold[few], good[few] + rng.normal(size=12)) is None
    alike, other = rng.normal(size=(300, 8)), rng.normal(size=(300, 8))
    assert domain_auc(alike, other) < 0.65 and domain_shift(alike, other) is None
    assert domain_auc(alike, other + 1.5) > 0.9
    said = domain_shift(alike, other + 1.5) or ""
    assert said.startswith("the texts check: a classifier tells their texts") and "to let them judge, draw --dev and --train from one labelled source" in said


def test_the_evidence_sample_is_seeded_capped_and_split_like_dev():
    gold = np.random.default_rng(7).integers(0, 6, 10000).astype(float)
    indices, split = sample_evidence(gold, seed=3)
    again, _ = sample_evidence(gold, seed=3)
    assert len(indices) == evidence_size(10000) == EVIDENCE_CAP and np.array_equal(indices, again) and np.all(np.diff(indices) > 0)
    assert evidence_size(5000) == 2500  # below the cap: half of --train
    assert np.array_equal(split.select, split_dev(gold[indices], seed=3 + 7).select)
    assert evidence_size(80) == 40  # at most half of --train: the supervised candidates keep three quarters of it


def test_a_candidate_built_on_another_counts_the_train_pairs_its_sources_trained_on():
    records = {
        "supervised": CandidateRecord("supervised", "supervised", train_indices_trained_on=[0, 2, 5]),
        "wise": CandidateRecord("wise", "wise", source="supervised"),
        "sed": CandidateRecord("sed", "sed", source="simcse"),
        "simcse": CandidateRecord("simcse", "trained"),
        "loop": CandidateRecord("loop", "wise", source="loop"),
    }
    assert trained_train_indices("wise", records) == trained_train_indices("supervised", records) == {0, 2, 5}
    assert trained_train_indices("sed", records) == set() == trained_train_indices("loop", records)


def _train_of(run) -> np.ndarray:
    return np.array([float(line.split("\t")[2]) for line in (run / "data" / "train.tsv").read_text().splitlines()])


@pytest.mark.slow
def test_no_candidate_is_judged_on_a_train_pair_it_trained_on(tiny_model_dir, labelled, tmp_path, capsys):  # noqa: F811
    """supervised trains on --train without the evidence confirmation pairs and is judged on those as it is and on the
    evidence selection pairs by its fold models (cross-fitted, tests/test_adapt_yardstick.py); whitening, which read no
    label, on every evidence pair too."""
    out = tmp_path / "run"
    command = [*_args(tiny_model_dir, labelled, out), "--methods", "supervised,whitening", "--train", str(labelled / "train.tsv")]
    assert main(command) == 0
    said = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    indices, split = sample_evidence(_train_of(out), seed=0)
    meta = results["meta"]["train_evidence"]
    assert meta == {"train_pairs": 80, "evidence_pairs": 40, "select_pairs": 20, "confirm_pairs": 20, "judges": True, "shift": None}
    assert "--train: 40 of its 80 pairs judge the candidates that never trained on them too (20 select, 20 confirm" in said
    confirm = {int(i) for i in indices[split.confirm]}
    candidates = results["candidates"]
    supervised = candidates["supervised"]
    trained = set(supervised["train_indices_trained_on"])
    assert trained == set(range(80)) - confirm and supervised["train_units"] == 60
    assert (out / "candidates" / "supervised" / "train.tsv").read_text().count("\n") == 60
    for name, record in candidates.items():
        if not record.get("judged_on"):
            continue
        scores = np.load(out / "candidates" / name / "train-scores.npz")["scores"] if name != "unchanged" else None
        folded = {int(i) for i in indices[split.select]}  # scored by fold models that never trained on them
        read = trained - folded if name == "supervised" or record.get("source") == "supervised" else set()
        # judged on exactly the evidence pairs no model that scored it trained on: as many as those, no more
        never_read = [p for part in ("select", "confirm") for p in getattr(split, part) if int(indices[p]) not in read]
        counts = record["judged_on"]
        assert counts["select"]["train"] + counts["confirm"]["train"] == len(never_read)
        if scores is not None:
            assert np.all(np.isfinite(scores))  # the cache holds every evidence pair; the mask is applied from the records
    assert candidates["supervised"]["judged_on"] == {"select": {"dev": 60, "train": 20}, "confirm": {"dev": 60, "train": 20}}
    assert candidates["whitening"]["judged_on"] == {"select": {"dev": 60, "train": 20}, "confirm": {"dev": 60, "train": 20}}


@pytest.mark.slow
def test_train_pairs_on_another_scale_judge_and_pairs_of_another_kind_only_train(tiny_model_dir, labelled, tmp_path, capsys):  # noqa: F811
    rows = [line.split("\t") for line in (labelled / "train.tsv").read_text().splitlines()]
    (labelled / "train-100.tsv").write_text("".join(f"{a}\t{b}\t{20 * float(s):g}\n" for a, b, s in rows))
    out = tmp_path / "scale"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "whitening", "--train", str(labelled / "train-100.tsv")]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("--train:")]
    assert len(said) == 1 and "of its 80 pairs judge the candidates that never trained on them too" in said[0]
    assert json.loads((out / "results.json").read_text())["meta"]["train_evidence"]["judges"] is True

    (labelled / "train-binary.tsv").write_text("".join(f"{a}\t{b}\t{int(float(s) >= 2.5)}\n" for a, b, s in rows))
    out = tmp_path / "kind"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised,whitening", "--train", str(labelled / "train-binary.tsv")]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("--train:")]
    assert len(said) == 1 and said[0].startswith(
        "--train: its pairs only train, the dev pairs alone select and confirm: the labels check: they have 0/1 labels"
    )
    assert "to let them judge, give --train graded scores" in said[0]
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["train_evidence"]["judges"] is False
    assert results["candidates"]["supervised"]["train_units"] == 80  # nothing held out: all of --train trains
    assert all(not r["judged_on"]["select"]["train"] and not r["judged_on"]["confirm"]["train"] for r in results["candidates"].values() if r.get("judged_on"))
    assert not (out / "candidates" / "whitening" / "train-scores.npz").exists()


@pytest.mark.slow
def test_without_train_the_records_and_the_decision_are_the_dev_only_ones(tiny_model_dir, labelled, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "whitening,poolings"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["train_evidence"] is None
    split = split_dev(np.array([float(line.split("\t")[2]) for line in (out / "data" / "dev.tsv").read_text().splitlines()]), seed=0)
    assert results["meta"]["dev"]["select_pairs"] == len(split.select) == 60
    dev_gold = np.array([float(line.split("\t")[2]) for line in (out / "data" / "dev.tsv").read_text().splitlines()])
    scores = {n: np.load(out / "candidates" / n / "scores.npz")["dev"] for n, r in results["candidates"].items() if r["eligible"] or n == "unchanged"}
    eligible = {n: s for n, s in scores.items() if n != "unchanged"}
    alone = decide(dev_gold, DevSplit(split.select, split.confirm), ("unchanged", scores["unchanged"]), eligible, "spearman")
    assert results["choice"]["name"] == alone.name and results["choice"]["reason"] == alone.reason
    for name, record in results["candidates"].items():
        assert record["dev_score"] == pytest.approx(100 * spearmanr(dev_gold[split.select], scores[name][split.select])[0])
        assert record["judged_on"] == {"select": {"dev": 60, "train": 0}, "confirm": {"dev": 60, "train": 0}}
        assert "train_indices_trained_on" not in record
        assert not (out / "candidates" / name / "train-scores.npz").exists()


@pytest.mark.slow
def test_each_candidate_scores_the_evidence_pairs_when_it_is_done_and_a_resumed_run_reads_them_back(tiny_model_dir, labelled, tmp_path, monkeypatch):  # noqa: F811
    """The decision encodes no evidence pair: every eligible candidate scored them when it was done (its seconds count
    them, as its expected scoring does), and a resumed run reads every one back from the store."""
    from sentune.adaptation import select, train_evidence, untuned_evidence

    encoded: list[str] = []  # the phase each evidence encode ran in
    deciding = [False]
    real_scorer, real_judges = train_evidence.evidence_scorer, select.judges
    monkeypatch.setattr(train_evidence, "evidence_scorer", lambda ctx, e: encoded.append("decide" if deciding[0] else "run") or real_scorer(ctx, e))
    monkeypatch.setattr(untuned_evidence, "evidence_scorer", lambda ctx, e: encoded.append("untuned") or real_scorer(ctx, e))

    def judging(*args, **kwargs):
        deciding[0] = True
        try:
            return real_judges(*args, **kwargs)
        finally:
            deciding[0] = False

    monkeypatch.setattr(select, "judges", judging)
    out = tmp_path / "run"
    command = [*_args(tiny_model_dir, labelled, out), "--methods", "simcse,whitening,wise", "--train", str(labelled / "train.tsv"), "--budget", "8"]
    assert main(command) == 0
    results = json.loads((out / "results.json").read_text())
    judged = [name for name, record in results["candidates"].items() if record.get("judged_on") and name != "unchanged"]
    assert sorted(judged) == ["simcse", "whitening", "wise"]
    assert encoded == ["untuned"] + ["run"] * len(judged)  # the unchanged model before the plan, each other once, none in decide
    encoded.clear()
    assert main(command) == 0
    assert encoded == []
