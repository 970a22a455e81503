"""One yardstick (issue 72): with --train's evidence judging, every candidate's deciding gain is measured on the same
pairs. The supervised candidates are cross-fitted over the evidence selection pairs (no fold model scores a pair it
trained on; the refit is what is confirmed and tested), and sentune.adaptation.decide compares every candidate on the
selection pairs all of them were judged on."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from test_supervised import _args, labelled  # noqa: F401  # the labelled pairs fixture

from sentune.adaptation.decide import TrainJudges, decide, split_dev
from sentune.adaptation.evidence import sample_evidence
from sentune.cli import main


def _miniature(seed: int = 0):
    """scripts/main.sh in miniature: `pooling` (label-free) is a little ahead of the unchanged model on the dev pairs and
    far ahead on the train pairs; `supervised` is well ahead on the dev pairs and further still on the train pairs, but
    trained on the train selection pairs (NaN there) unless cross-fitted."""
    rng = np.random.default_rng(seed)
    gold, t_gold = rng.normal(size=400), rng.normal(size=1200)
    noise, t_noise = rng.normal(size=400), rng.normal(size=1200)
    dev = {"unchanged": gold + noise, "pooling": gold + 0.95 * noise, "supervised": gold + 0.7 * noise}
    train = {"unchanged": t_gold + t_noise, "pooling": t_gold + 0.2 * t_noise, "supervised": t_gold + 0.1 * t_noise}
    return gold, t_gold, dev, train


def _stratified(gold, t_gold, scores, t_scores, index, t_index):
    """Spearman within the dev pairs and within the train pairs, weighted by their numbers of pairs (naive)."""
    dev, extra = spearmanr(gold[index], scores[index])[0], spearmanr(t_gold[t_index], t_scores[t_index])[0] if len(t_index) else 0.0
    return 100 * (len(index) * dev + len(t_index) * extra) / (len(index) + len(t_index))


def test_every_candidate_is_compared_on_the_pairs_all_of_them_were_judged_on():
    """Today's rule measured pooling's gain on dev + train selection pairs and supervised's on the dev ones alone, and the
    larger number chose pooling; on the same pairs supervised is ahead, whichever set they are."""
    gold, t_gold, dev, train = _miniature()
    split, t_split = split_dev(gold, seed=0), split_dev(t_gold, seed=1)
    masked = train["supervised"].copy()
    masked[t_split.select] = np.nan  # trained on the train selection pairs: they cannot judge it
    candidates = {"pooling": dev["pooling"], "supervised": dev["supervised"]}
    # what decided before: each candidate's gain on its own pairs
    own = {
        "pooling": _stratified(gold, t_gold, dev["pooling"], train["pooling"], split.select, t_split.select)
        - _stratified(gold, t_gold, dev["unchanged"], train["unchanged"], split.select, t_split.select),
        "supervised": _stratified(gold, t_gold, dev["supervised"], masked, split.select, t_split.select[:0])
        - _stratified(gold, t_gold, dev["unchanged"], train["unchanged"], split.select, t_split.select[:0]),
    }
    assert own["pooling"] > own["supervised"]  # the situation of the issue: the larger gain on other pairs would choose
    for supervised_train, shared in ((masked, t_split.select[:0]), (train["supervised"], t_split.select)):
        judges = TrainJudges(t_gold, t_split, {"unchanged": train["unchanged"], "pooling": train["pooling"], "supervised": supervised_train})
        decision = decide(gold, split, ("unchanged", dev["unchanged"]), candidates, "spearman", train=judges)
        for name in ("unchanged", "pooling", "supervised"):
            t_scores = train[name] if name != "supervised" else supervised_train
            assert decision.selection[name] == pytest.approx(_stratified(gold, t_gold, dev[name], t_scores, split.select, shared))
            assert decision.judged[name]["select"] == {"dev": len(split.select), "train": len(shared)}
        assert decision.ahead == pytest.approx({n: decision.selection[n] - decision.selection["unchanged"] for n in candidates})
        assert decision.best == "supervised"


def _fold_trained_as_a_saved_run(candidate, fold: int, data_dir, out):
    """A fold's model trained the way every saved run is (sentune.training.runs.train_run: checkpoints, the model written
    and read back): the refit's recipe on the rows of the fold's train.tsv, with the fold's steps."""
    import math
    from dataclasses import replace

    from sentune.core.models import load_model
    from sentune.data.user_data import read_scored_pairs
    from sentune.training.recipe import load_recipe
    from sentune.training.runs import train_run

    refit = load_recipe(str(candidate / "run" / "config.yaml"), check=False)
    data = read_scored_pairs(candidate / f"fold-{fold}" / "train.tsv")
    steps = math.ceil(refit.training.epochs * math.ceil(len(data.pairs) / refit.training.batch_size))
    # the refit raced (a lone supervised candidate races on --train): the race's checks of it on the selection pairs
    # are no part of a fold's training, which keeps its last step as the refit does
    assert refit.training.checkpoint == "last"
    recipe = replace(refit, training=replace(refit.training, max_steps=steps, eval_steps=steps), eval=replace(refit.eval, dev="none"))
    train_run(recipe, out, data_dir=data_dir, show_progress=False, data=data)
    return load_model(str(out / "model"), device="cpu")


def _pairs(path):
    return [tuple(line.split("\t")[:2]) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_the_supervised_candidate_is_cross_fitted_over_the_evidence_selection_pairs(tiny_model_dir, labelled, tmp_path, capsys):  # noqa: F811
    """supervised trains on --train without the evidence confirmation pairs, and each evidence selection pair is scored
    by a fold model that never trained on it: it is judged on every evidence pair, as whitening is; its scores of the
    dev and test pairs and of the evidence confirmation pairs are the refit's."""
    from sentune.data.user_data import ScoredPairs, read_scored_pairs
    from sentune.tasks.user_pairs import PairScorer

    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised,whitening", "--train", str(labelled / "train.tsv")]) == 0
    assert "supervised: cross-fitting on the 20 evidence selection pairs of --train: 3 trainings without one fold each" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    train = read_scored_pairs(out / "data" / "train.tsv").pairs
    indices, split = sample_evidence(np.array([p.score for p in train]), seed=0)
    selection, confirm = {int(i) for i in indices[split.select]}, {int(i) for i in indices[split.confirm]}
    record = results["candidates"]["supervised"]
    folds = record["evidence_folds"]
    assert record["evidence_mode"] == "cross-fitted"  # 4 epochs of 16 steps read its 60 rows: the folds cost what they add
    assert len(folds) == 3 and sorted(i for fold in folds for i in fold) == sorted(selection)
    assert set(record["train_indices_trained_on"]) == set(range(80)) - confirm
    candidate = out / "candidates" / "supervised"
    refit = set(_pairs(candidate / "train.tsv"))
    kept = np.load(candidate / "out-of-fold-train.npz")
    oof = dict(zip(kept["indices"].tolist(), kept["scores"][0], strict=True))
    for fold, held in enumerate(folds):
        trained = set(_pairs(candidate / f"fold-{fold}" / "train.tsv"))
        # a fold model trained on the refit's rows less its fold, and never on a pair it scores
        assert trained == refit - {(train[i].a, train[i].b) for i in held} and not trained & {(train[i].a, train[i].b) for i in held}
        model = _fold_trained_as_a_saved_run(candidate, fold, out, tmp_path / f"saved-{fold}")
        expected = PairScorer({"held": ScoredPairs([train[i] for i in held], "scores", "held")}).of_model(model)["held"]
        np.testing.assert_allclose([oof[i] for i in held], expected, rtol=0, atol=1e-6)
    for name in ("supervised", "whitening"):  # judged on the same pairs: every evidence pair
        assert results["candidates"][name]["judged_on"] == {"select": {"dev": 60, "train": 20}, "confirm": {"dev": 60, "train": 20}}
    # its selection score is a naive stratified Spearman of the refit's dev selection scores and the folds' train ones
    gold = np.array([p.score for p in train])[indices]
    dev = read_scored_pairs(out / "data" / "dev.tsv").pairs
    dev_gold = np.array([p.score for p in dev])
    dev_split = split_dev(dev_gold, seed=0)
    refit_train = np.load(candidate / "train-scores.npz")["scores"]
    folded = refit_train.copy()
    folded[np.searchsorted(indices, kept["indices"])] = kept["scores"][0]
    assert not np.allclose(folded[split.select], refit_train[split.select])  # the refit's own scores of them are not used
    base_train = np.load(out / "candidates" / ".untuned-train.npz")["model"]
    scores = {name: np.load(out / "candidates" / name / "scores.npz")["dev"] for name in ("supervised", "unchanged")}
    naive = {
        "supervised": _stratified(dev_gold, gold, scores["supervised"], folded, dev_split.select, split.select),
        "unchanged": _stratified(dev_gold, gold, scores["unchanged"], base_train, dev_split.select, split.select),
    }
    assert record["selection_score"] == pytest.approx(naive["supervised"]) and record["ahead"] == pytest.approx(naive["supervised"] - naive["unchanged"])


def test_a_wise_of_the_cross_fitted_candidate_is_judged_by_its_fold_models_at_its_mix(tmp_path):
    """judges reads a cross-fitted candidate's out-of-fold scores of the evidence selection pairs in place of its refit's,
    and a wise of it its fold models' at wise's mix; a pair that no fold scored, but the candidate trained on, stays
    masked (NaN), and a candidate that read no label keeps its own scores."""
    from types import SimpleNamespace

    from sentune.adaptation.evidence import Evidence
    from sentune.adaptation.records import CandidateRecord
    from sentune.adaptation.store import CandidateStore
    from sentune.adaptation.train_evidence import SCORES_FILE, judges

    rng = np.random.default_rng(3)
    indices = np.arange(0, 60, 2)  # 30 evidence pairs among 60 --train pairs
    evidence = Evidence(indices, rng.normal(size=30), split_dev(rng.normal(size=30), seed=0))
    store = CandidateStore(tmp_path, np.arange(4))
    own = {name: rng.normal(size=30) for name in ("unchanged", "whitening", "supervised", "wise")}
    for name, scores in own.items():  # each one's model's scores of every evidence pair, as _candidate_scores caches them
        store.folder(name).mkdir(parents=True)
        np.savez(str(store.folder(name) / SCORES_FILE), digest=np.array(evidence.digest), scores=scores)
    folded = indices[evidence.split.select][:-1]  # the last selection pair: trained on, scored by no fold
    by_mix = rng.normal(size=(3, len(folded)))
    store.save_out_of_fold_train("supervised", evidence.digest, folded, np.array([1.0, 0.3, 0.6]), by_mix)
    trained = [int(i) for i in range(60) if i not in set(indices[evidence.split.confirm].tolist())]
    records = {
        "supervised": CandidateRecord("supervised", "supervised", train_indices_trained_on=trained),
        "wise": CandidateRecord("wise", "wise", source="supervised", mix=0.3),
        "whitening": CandidateRecord("whitening", "postprocessed"),
    }
    ctx = SimpleNamespace(evidence=evidence, records=records, store=store, out=tmp_path)
    candidates = [SimpleNamespace(name=name, folder=lambda c, name=name: store.folder(name)) for name in own]
    found = judges(candidates, ctx, {"whitening", "supervised", "wise"})  # type: ignore[arg-type]
    assert found is not None
    positions = np.searchsorted(indices, folded)
    last = evidence.split.select[-1]
    for name, mix_row in (("supervised", 0), ("wise", 1)):
        np.testing.assert_array_equal(found.scores[name][positions], by_mix[mix_row])
        np.testing.assert_array_equal(found.scores[name][evidence.split.confirm], own[name][evidence.split.confirm])
        assert np.isnan(found.scores[name][last])
        assert len(found.judging(name, "select")) == len(evidence.split.select) - 1
    np.testing.assert_array_equal(found.scores["whitening"], own["whitening"])
    # decide then compares every one on the selection pairs all of them have: the one no fold scored is left out for all
    assert len(found.common(("unchanged", "whitening", "supervised", "wise"), "select")) == len(evidence.split.select) - 1


@pytest.mark.slow
def test_with_wise_and_a_trained_candidate_every_candidate_is_judged_on_the_same_pairs(tiny_model_dir, labelled, tmp_path):  # noqa: F811
    """supervised, simcse, wise (of whichever tuned candidate leads) and whitening: every eligible candidate is judged on
    every evidence pair, selection and confirmation, and the choice's selection numbers are on those pairs; a wise of
    the supervised candidate is scored there by its fold models at its mix."""
    out = tmp_path / "run"
    methods = "simcse,supervised,wise,whitening"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", methods, "--budget", "16", "--train", str(labelled / "train.tsv")]) == 0
    results = json.loads((out / "results.json").read_text())
    judged = {name: c["judged_on"] for name, c in results["candidates"].items() if c.get("judged_on") and name != "unchanged"}
    assert {"supervised", "whitening", "wise"} <= set(judged)
    assert all(j == {"select": {"dev": 60, "train": 20}, "confirm": {"dev": 60, "train": 20}} for j in judged.values()), judged
    from sentune.data.user_data import read_scored_pairs

    train = read_scored_pairs(out / "data" / "train.tsv").pairs
    indices, split = sample_evidence(np.array([p.score for p in train]), seed=0)
    dev_gold = np.array([p.score for p in read_scored_pairs(out / "data" / "dev.tsv").pairs])
    kept = np.load(out / "candidates" / "supervised" / "out-of-fold-train.npz")
    mixes = [round(float(m), 6) for m in kept["mixes"]]
    assert mixes == [1.0, *[round(0.1 * i, 6) for i in range(1, 10)]]  # the refit's own and wise's mixes
    wise = results["candidates"]["wise"]
    scores = np.load(out / "candidates" / "wise" / "train-scores.npz")["scores"].copy()
    if wise["source"] == "supervised":  # its evidence selection scores are the supervised folds' at its mix
        scores[np.searchsorted(indices, kept["indices"])] = kept["scores"][mixes.index(round(wise["mix"], 6))]
    dev = np.load(out / "candidates" / "wise" / "scores.npz")["dev"]
    expected = _stratified(dev_gold, np.array([p.score for p in train])[indices], dev, scores, split_dev(dev_gold, seed=0).select, split.select)
    assert wise["selection_score"] == pytest.approx(expected)


@pytest.mark.slow
def test_a_training_that_reads_fewer_rows_than_it_has_holds_the_evidence_selection_pairs_out(tiny_model_dir, labelled, tmp_path):  # noqa: F811
    """--budget 2: two steps of 16 read 32 of its 60 rows, so the evidence selection pairs are held out of its training
    (no fold trained) and its model scores them; it is judged on the same pairs as whitening all the same."""
    from sentune.data.user_data import read_scored_pairs

    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised,whitening", "--budget", "2", "--train", str(labelled / "train.tsv")]) == 0
    results = json.loads((out / "results.json").read_text())
    record = results["candidates"]["supervised"]
    train = read_scored_pairs(out / "data" / "train.tsv").pairs
    indices, split = sample_evidence(np.array([p.score for p in train]), seed=0)
    assert record["evidence_mode"] == "held out" and "evidence_folds" not in record and record["train_units"] == 40
    assert set(record["train_indices_trained_on"]) == set(range(80)) - {int(i) for i in indices}
    candidate = out / "candidates" / "supervised"
    assert not (candidate / "out-of-fold-train.npz").exists() and not list(candidate.glob("fold-*"))
    for name in ("supervised", "whitening"):
        assert results["candidates"][name]["judged_on"] == {"select": {"dev": 60, "train": 20}, "confirm": {"dev": 60, "train": 20}}
    dev_gold = np.array([p.score for p in read_scored_pairs(out / "data" / "dev.tsv").pairs])
    own = np.load(candidate / "train-scores.npz")["scores"]  # its model's, on pairs it never trained on
    dev = np.load(candidate / "scores.npz")["dev"]
    expected = _stratified(dev_gold, np.array([p.score for p in train])[indices], dev, own, split_dev(dev_gold, seed=0).select, split.select)
    assert record["selection_score"] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("pairs", "budget", "expected"), [(80, None, "cross-fitted"), (80, 2, "held out"), (400, None, "cross-fitted"), (1000, None, "held out")]
)
def test_the_evidence_selection_pairs_are_cross_fitted_only_where_the_folds_add_what_they_cost(pairs, budget, expected):
    """Cross-fitted when its steps (4 epochs of 16 rows over --train less the evidence confirmation pairs, capped by
    --budget) read all its rows and number at most CROSS_FIT_STEPS; held out otherwise; None when the evidence does not
    judge."""
    import math
    from types import SimpleNamespace

    from sentune.adaptation.candidates.supervised import CROSS_FIT_STEPS, Supervised

    confirm = set(range(0, pairs, 4))  # a quarter of --train confirms
    evidence = SimpleNamespace(judges=True, confirm_train_indices=confirm)
    ctx = SimpleNamespace(
        inputs=SimpleNamespace(task=SimpleNamespace(train_units=lambda: list(range(pairs)))),
        evidence=evidence,
        metric="spearman",
        config=SimpleNamespace(budget=SimpleNamespace(steps=budget)),
    )
    rows = pairs - len(confirm)
    steps = min(math.ceil(4 * math.ceil(rows / 16)), budget or math.inf)
    assert (steps * 16 >= rows and steps <= CROSS_FIT_STEPS) == (expected == "cross-fitted")  # the naive rule agrees
    assert Supervised("supervised").evidence_mode(ctx) == expected  # type: ignore[arg-type]
    evidence.judges = False
    assert Supervised("supervised").evidence_mode(ctx) is None  # type: ignore[arg-type]
