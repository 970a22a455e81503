"""Supervised adapt candidates (sentune.adaptation.candidates.Supervised): trained on labels it is allowed to read, scored
out of fold on the selection part (sentune.adaptation.crossfit), refused --train files that share pairs with dev or test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import tree_state

from sentune.adaptation.crossfit import fold_assignment, out_of_fold
from sentune.adaptation.store import CandidateStore
from sentune.cli import main
from sentune.data.user_data import write_corpus, write_scored_pairs

WORDS = "a the man woman dog cat plays runs eats guitar piano park food car street ball kid boy girl sings".split()


def test_out_of_fold_equals_a_naive_k_fold_loop():
    rng = np.random.default_rng(3)
    y = rng.normal(size=23)
    x = rng.normal(size=23)
    # a 'model' is the training rows' mean label and slope through the origin: what it predicts depends on its rows
    fit = lambda fold, rows: (y[rows].mean(), float(x[rows] @ y[rows] / (x[rows] @ x[rows])))  # noqa: E731
    predict = lambda model, rows: model[0] + model[1] * x[rows]  # noqa: E731
    found = out_of_fold(23, 5, seed=7, fit=fit, predict=predict)
    folds = fold_assignment(23, 5, seed=7)
    naive = np.zeros(23)
    for i in range(23):
        train = [j for j in range(23) if folds[j] != folds[i]]
        naive[i] = y[train].mean() + (x[train] @ y[train] / (x[train] @ x[train])) * x[i]
    np.testing.assert_allclose(found, naive)
    assert sorted(np.bincount(folds).tolist()) == [4, 4, 5, 5, 5]


def _graded(rng, n):
    """Pairs whose score is how many of five words survive: something a model can learn from the labels."""
    rows = []
    for _ in range(n):
        a = list(rng.choice(WORDS, size=5))
        keep = int(rng.integers(0, 6))
        b = a[:keep] + list(rng.choice(WORDS, size=5 - keep))
        rows.append((" ".join(a), " ".join(b), float(keep)))
    return rows


@pytest.fixture
def labelled(tmp_path):
    rng = np.random.default_rng(0)
    write_corpus(tmp_path / "corpus.txt", [" ".join(rng.choice(WORDS, size=6)) for _ in range(150)])
    write_scored_pairs(tmp_path / "dev.tsv", _graded(rng, 120))
    write_scored_pairs(tmp_path / "test.tsv", _graded(rng, 60))
    write_scored_pairs(tmp_path / "train.tsv", _graded(rng, 80))
    return tmp_path


def _args(tiny_model_dir, folder, out):
    return [
        "adapt",
        "--quiet",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(folder / "corpus.txt"),
        "--dev",
        str(folder / "dev.tsv"),
        "--test",
        str(folder / "test.tsv"),
        "--out",
        str(out),
    ]


@pytest.mark.slow
def test_the_supervised_candidate_trains_on_the_selection_part_only_and_is_scored_out_of_fold(tiny_model_dir, labelled, tmp_path, capsys):
    from sentune.adaptation.decide import split_dev

    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised"]) == 0
    told = capsys.readouterr().out  # the user is told how many trainings cross-fitting takes before the first starts
    record = json.loads((out / "results.json").read_text())["candidates"]["supervised"]
    split = split_dev(np.array([float(line.split("\t")[2]) for line in (out / "data" / "dev.tsv").read_text().splitlines()]))
    select, confirm = set(split.select.tolist()), set(split.confirm.tolist())
    assert record["trained_on"] == "the selection part (cross-fitted)" and record["setting"] == "adapt/cosent"
    assert set(record["dev_indices_trained_on"]) == select and not set(record["dev_indices_trained_on"]) & confirm
    folds = record["fold_dev_indices_trained_on"]
    assert len(folds) == 3 and all(set(f) < select for f in folds)
    # a lone supervised candidate races alone: the fold race trains its first fold, and its turn the other two
    assert f"fold race: supervised trains its first fold of 3 alone, judged on its {len(select) // 3} held-out selection units before the rest" in told
    assert (
        f"supervised: cross-fitting on the {len(select)} selection pairs: 2 trainings without one fold each (the fold race trained the first), then one on all"
        in told
    )
    held = [select - set(f) for f in folds]
    assert set().union(*held) == select and sum(len(h) for h in held) == len(select)  # every selection pair held out once
    # the selection scores are out of fold: not the refit model's own cosines of the pairs it trained on
    from sentence_transformers import SentenceTransformer

    from sentune.data.user_data import read_scored_pairs
    from sentune.tasks.user_pairs import PairScorer

    refit = SentenceTransformer(str(out / "candidates" / "supervised" / "run" / "model"), device="cpu")
    own = PairScorer({"dev": read_scored_pairs(out / "data" / "dev.tsv")}).of_model(refit)["dev"]
    scores = np.load(out / "candidates" / "supervised" / "scores.npz")["dev"]
    np.testing.assert_allclose(scores[split.confirm], own[split.confirm], atol=1e-5)
    assert not np.allclose(scores[split.select], own[split.select], atol=1e-3)
    # its recipe, fixed in advance: 4 epochs of batch 16 over the selection pairs, the last step kept and nothing evaluated
    # while it trains; --budget caps it as it caps every candidate
    assert record["recipe"]["training"]["max_steps"] == 4 * -(-len(select) // 16) and record["recipe"]["training"]["max_minutes"] is None
    assert record["recipe"]["eval"]["dev"] == "none" and record["recipe"]["training"]["checkpoint"] == "last"
    assert not list((out / "candidates" / "supervised").rglob("dev_cosines"))
    capped = tmp_path / "capped"
    assert main([*_args(tiny_model_dir, labelled, capped), "--methods", "supervised", "--budget", "3,5m"]) == 0
    training = json.loads((capped / "results.json").read_text())["candidates"]["supervised"]["recipe"]["training"]
    assert training["max_steps"] == 3 and training["max_minutes"] == 5


def _fold_trained_as_a_saved_run(candidate: Path, fold: int, data_dir: Path, out: Path):
    """A cross-fitted fold's model trained the way every saved run is (sentune.training.runs.train_run: checkpoints, the
    model written and read back): the refit's recipe on the fold's training rows, with the fold's steps."""
    import math
    from dataclasses import replace

    from sentune.core.models import load_model
    from sentune.data.kinds import kind
    from sentune.training.recipe import load_recipe
    from sentune.training.runs import train_run

    refit = load_recipe(str(candidate / "run" / "config.yaml"), check=False)  # its data were given as objects: its record describes them
    rows_kind = kind(refit.train_data["kind"])  # labelled pairs, or search tuples
    assert refit.train_data == rows_kind.from_file(candidate / "train.tsv").describe(candidate / "train.tsv")
    data = rows_kind.from_file(candidate / f"fold-{fold}" / "train.tsv")
    steps = math.ceil(refit.training.epochs * math.ceil(len(data) / refit.training.batch_size))
    recipe = replace(refit, training=replace(refit.training, max_steps=steps, eval_steps=steps))
    train_run(recipe, out, data_dir=data_dir, show_progress=False, data=data)
    return load_model(str(out / "model"), device="cpu")


@pytest.mark.slow
def test_the_folds_trained_in_memory_score_out_of_fold_as_saved_and_reloaded_fold_models_do(tiny_model_dir, labelled, tmp_path, monkeypatch):
    """Only the refit's model is written; each fold's stays in memory while it scores its held-out pairs, and gives the
    out-of-fold scores the same fold trained as a saved run and read back gives (same seeds, same weights)."""
    monkeypatch.setattr("sentune.adaptation.crossfit.FOLDS", 2)
    from sentune.data.user_data import ScoredPairs, read_scored_pairs, write_scored_pairs
    from sentune.tasks.user_pairs import PairScorer

    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised"]) == 0
    candidate = out / "candidates" / "supervised"
    record = json.loads((out / "results.json").read_text())["candidates"]["supervised"]
    assert [p.relative_to(candidate).as_posix() for p in candidate.rglob("model")] == ["run/model"] and not list(candidate.rglob("checkpoints"))
    dev = read_scored_pairs(out / "data" / "dev.tsv").pairs
    found = np.load(candidate / "scores.npz")["dev"]
    for fold, trained in enumerate(record["fold_dev_indices_trained_on"]):
        fold_rows = tmp_path / f"fold-{fold}.tsv"  # the fold's training pairs, from the record's indices
        write_scored_pairs(fold_rows, [(dev[i].a, dev[i].b, dev[i].score) for i in trained])
        assert fold_rows.read_text() == (candidate / f"fold-{fold}" / "train.tsv").read_text()
        model = _fold_trained_as_a_saved_run(candidate, fold, out, tmp_path / f"saved-{fold}")
        held = sorted(set(record["dev_indices_trained_on"]) - set(trained))
        expected = PairScorer({"held": ScoredPairs([dev[i] for i in held], "scores", "held")}).of_model(model)["held"]
        np.testing.assert_allclose(found[held], expected, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_training_in_memory_leaves_the_weights_a_saved_run_leaves_and_writes_only_where_asked(tiny_model_dir, labelled, tmp_path):
    """train_in_memory (adapt's supervised trainings) runs train()'s loop without checkpoints: its weights are those
    train() saves and load_model reads back. Without a run folder it writes nothing; with one, the finished run train()
    leaves, less the checkpoints."""
    import torch

    from sentune.core.models import load_model
    from sentune.training.recipe import load_recipe
    from sentune.training.trainer import train, train_in_memory

    settings = ["training.max_steps=6", "training.eval_steps=6", "training.checkpoint=last", "training.patience=0", "eval.dev=none"]
    recipe = load_recipe("adapt/cosent", [f"model={tiny_model_dir}", f"train_data=labelled:{labelled / 'train.tsv'}", *settings])
    train(recipe, tmp_path / "saved", data_dir=labelled, show_progress=False)
    saved = load_model(str(tmp_path / "saved" / "model"), device="cpu").state_dict()
    untrained = load_model(str(tiny_model_dir), device="cpu").state_dict()
    before = tree_state(tmp_path)
    kept = train_in_memory(recipe, data_dir=labelled, show_progress=False)
    assert tree_state(tmp_path) == before
    weights = kept.model.state_dict()
    assert weights.keys() == saved.keys() and all(torch.equal(weights[k], saved[k]) for k in saved)
    assert not all(torch.equal(weights[k], untrained[k]) for k in untrained)  # it trained
    assert kept.best == {"step": 6, "dev_score": None, "dev_metric": None}
    again = train_in_memory(recipe, tmp_path / "run", data_dir=labelled, show_progress=False)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["config.yaml", "metrics.jsonl", "model", "results.json", "results.md"]
    reloaded = load_model(str(tmp_path / "run" / "model"), device="cpu").state_dict()
    assert all(torch.equal(reloaded[k], saved[k]) and torch.equal(again.model.state_dict()[k], saved[k]) for k in saved)
    assert json.loads((tmp_path / "run" / "results.json").read_text())["meta"]["best_checkpoint"]["step"] == 6
    best = load_recipe("adapt/cosent", [f"model={tiny_model_dir}", f"train_data=labelled:{labelled / 'train.tsv'}"])
    with pytest.raises(ValueError, match="keeps the last step"):
        train_in_memory(best, data_dir=labelled)


@pytest.mark.slow
def test_shuffled_labels_keep_the_unchanged_model(tiny_model_dir, labelled, tmp_path, monkeypatch):
    monkeypatch.setattr("sentune.adaptation.crossfit.FOLDS", 2)  # the folds' structure is the first test's; two keep this one short
    rows = [line.split("\t") for line in (labelled / "dev.tsv").read_text().splitlines()]
    shuffled = np.random.default_rng(1).permutation([r[2] for r in rows])
    (labelled / "dev.tsv").write_text("".join(f"{a}\t{b}\t{s}\n" for (a, b, _), s in zip(rows, shuffled, strict=True)))
    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised"]) == 0
    assert json.loads((out / "results.json").read_text())["choice"]["name"] == "unchanged"


@pytest.mark.slow
def test_a_train_file_trains_and_never_selects_and_a_second_run_redoes_only_what_read_it(tiny_model_dir, labelled, tmp_path, monkeypatch, capsys):
    """--train trains the supervised candidate and selects nothing; the same folder run again with another --train (or
    none) produces the supervised candidate again and reads the others back: only it depends on the train data."""
    monkeypatch.setattr("sentune.adaptation.crossfit.FOLDS", 2)
    out = tmp_path / "run"
    with_train = [*_args(tiny_model_dir, labelled, out), "--methods", "supervised,whitening", "--train", str(labelled / "train.tsv")]
    assert main(with_train) == 0
    record = json.loads((out / "results.json").read_text())["candidates"]["supervised"]
    # the 20 train pairs that confirm beside the dev pairs are left out of its training (sentune.adaptation.train_evidence)
    assert record["trained_on"] == "--train" and record["train_units"] == 60 and record["dev_indices_trained_on"] == []
    assert (out / "data" / "train.tsv").read_text() == (labelled / "train.tsv").read_text() and record["train_sha256"]
    capsys.readouterr()
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised,whitening"]) == 0
    said = capsys.readouterr().out
    record = json.loads((out / "results.json").read_text())["candidates"]["supervised"]
    assert record["trained_on"] == "the selection part (cross-fitted)" and record["train_sha256"] is None
    assert not (out / "data" / "train.tsv").exists()
    assert "supervised: its inputs changed (train_sha256, train_held_out): produced again" in said and "whitening: done before, read back" in said
    assert "supervised: done before, read back" not in said  # a record redone is not said to be read back
    capsys.readouterr()
    assert main(with_train) == 0
    assert json.loads((out / "results.json").read_text())["candidates"]["supervised"]["trained_on"] == "--train"
    said = capsys.readouterr().out
    assert "whitening: done before, read back" in said
    # the first run's race is not read back: its paused run went when the second run produced supervised again
    assert "race: supervised trains" in said and "on --train alone" in said


def test_a_train_file_sharing_pairs_with_dev_or_test_is_refused_and_no_labels_plans_none(tiny_model_dir, labelled, tmp_path, capsys):
    leaky = tmp_path / "leaky.tsv"
    leaky.write_text(
        (labelled / "train.tsv").read_text() + "\t".join((labelled / "test.tsv").read_text().splitlines()[3].split("\t")[::-1][1:][::-1] + ["2.0"]) + "\n"
    )
    before = tree_state(tmp_path)
    assert main([*_args(tiny_model_dir, labelled, tmp_path / "run"), "--train", str(leaky)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--train {leaky}:81: 1 of its pairs are also pairs of --test {labelled / 'test.tsv'}" in err[0], err
    assert tree_state(tmp_path) == before
    from sentune.adaptation.candidates import parse_methods, plan

    assert "supervised" in [c.name for c in plan(parse_methods(None), "mean", reference=False).all]
    assert not [c for c in plan(parse_methods(None), "mean", reference=False, labels=False).all if c.kind == "supervised"]


@pytest.mark.slow
def test_the_search_candidate_trains_on_selection_queries_with_mined_negatives(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("sentune.adaptation.crossfit.FOLDS", 2)
    from test_adapt_retrieval import _toy_beir

    from sentune.adaptation.decide import split_dev
    from sentune.adaptation.hard_negatives import POSITIVE_DRAWS, HardNegatives, drawn_positives
    from sentune.data.beir import read_beir_folder

    mine = HardNegatives._mine
    mined: list[str] = []

    def counted(self, queries):
        mined.extend(q.id for q in queries)
        return mine(self, queries)

    monkeypatch.setattr(HardNegatives, "_mine", counted)
    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "supervised"]
    assert main(args) == 0
    record = json.loads((out / "results.json").read_text())["candidates"]["supervised"]
    queries = read_beir_folder(out / "data" / "dev", "dev").queries
    split = split_dev(np.zeros(len(queries)))
    assert sorted(mined) == sorted(queries[i].id for i in split.select)  # each mined once, for the folds and the refit alike
    assert record["setting"] == "adapt/mnrl-hard-negatives" and set(record["dev_indices_trained_on"]) == set(split.select.tolist())
    # every training row of the refit: a selection query, one of its relevant documents (POSITIVE_DRAWS a query, drawn as
    # sentune.adaptation.hard_negatives.drawn_positives draws them), two documents not judged relevant to it
    by_text = {q.text: q for q in queries}
    texts = {d.id: d.text for d in read_beir_folder(out / "data" / "dev", "dev").corpus}
    rows = [line.split("\t") for line in (out / "candidates" / "supervised" / "train.tsv").read_text().splitlines()]
    selected = {queries[i].text for i in split.select}
    assert [row[0] for row in rows] == [queries[i].text for i in split.select for _ in range(POSITIVE_DRAWS)]
    assert [row[1] for row in rows] == [texts[d] for i in split.select for d in drawn_positives(queries[i], POSITIVE_DRAWS, 0)]
    for query, positive, *negatives in rows:
        q = by_text[query]
        assert query in selected and positive in {texts[d] for d in q.relevant}
        assert len(negatives) == 2 and not set(negatives) & {texts[d] for d in q.relevant}


def test_the_hybrid_of_the_best_dense_candidate_never_fuses_a_model_trained_on_the_selection_queries():
    """Its weight and selection score would read the queries that model learned: the best dense candidate it fuses is
    the best of the others (a --train model qualifies, as for wise)."""
    from types import SimpleNamespace

    from sentune.adaptation.candidates import Hybrid, Lexical, PostProcessed, Supervised, Unchanged
    from sentune.adaptation.records import CandidateRecord

    best = Hybrid("hybrid-best", "best")
    candidates = [Unchanged("unchanged"), PostProcessed("flow", "flow"), Supervised("supervised"), Lexical("bm25"), Hybrid("hybrid")]
    records = [
        CandidateRecord("unchanged", "unchanged", dev_score=63.0),
        CandidateRecord("flow", "postprocess", dev_score=64.0),
        CandidateRecord("supervised", "supervised", dev_score=70.0, dev_indices_trained_on=[0, 2, 4]),
        CandidateRecord("bm25", "baseline", dev_score=80.0),  # not dense: never the hybrid's dense part
        CandidateRecord("hybrid", "hybrid", dev_score=85.0),
    ]
    ctx = SimpleNamespace(records={r.name: r for r in records}, candidate=lambda name: next(c for c in candidates if c.name == name))
    assert best.source(ctx) == "flow"
    ctx.records["flow"].dev_score = 62.0
    assert best.source(ctx) is None  # the unchanged model is then the best: `hybrid` is its hybrid
    ctx.records["supervised"].dev_indices_trained_on = []  # trained on --train: it qualifies
    assert best.source(ctx) == "supervised"


def _ndcg10(ranked: list[str], relevant: dict[str, int]) -> float:
    """nDCG@10 ×100 by its formula."""
    import math

    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return 100 * dcg / ideal


@pytest.mark.slow
def test_the_hybrid_of_the_supervised_candidate_is_scored_out_of_fold_with_the_unchanged_models_weight(tiny_model_dir, tmp_path, monkeypatch):
    """hybrid-supervised: BM25 fused with the supervised candidate at `hybrid`'s α; each selection query's score comes
    from the fold model that never trained on it, fused by hand here: min-max of the cosine and of BM25 (the whole
    collection's statistics, the settings fitted on the selection queries) over the selection pool, α · dense + (1 − α) ·
    BM25, nDCG@10 of that ranking."""
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    monkeypatch.setattr("sentune.adaptation.crossfit.FOLDS", 2)
    from test_adapt_retrieval import _toy_beir

    from sentune.data.beir import read_beir_folder
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out)]
    assert main([*args, "--methods", "supervised,hybrid"]) == 0
    results = json.loads((out / "results.json").read_text())["candidates"]
    record = results["hybrid-supervised"]
    alpha = results["hybrid"]["fusion"]["alpha"]
    assert record["source"] == "supervised" and record["fusion"] == {"kind": "convex", "alpha": alpha} and record["weight_from"] == "hybrid"
    assert results["hybrid-best"].get("source") != "supervised"  # hybrid-best leaves the selection-trained model out
    queries = read_beir_folder(out / "data" / "dev", "dev").queries
    corpus = read_beir_folder(out / "data" / "dev", "dev").corpus
    pool = read_beir_folder(out / "data" / "dev-select", "select").corpus
    columns = [[d.id for d in corpus].index(d.id) for d in pool]
    fitted = LexicalSettings(**results["hybrid"]["lexical_fit"]["settings"])  # the BM25 the hybrids fuse: fitted on the selection queries
    assert record["lexical"] == fitted.label
    bm25 = LexicalIndex.of_documents(corpus, fitted)
    found = np.load(out / "candidates" / "hybrid-supervised" / "scores.npz")["dev"]
    select = sorted(set(results["supervised"]["dev_indices_trained_on"]))
    for fold, trained in enumerate(results["supervised"]["fold_dev_indices_trained_on"]):  # fold models are kept in memory only: trained again here
        model = _fold_trained_as_a_saved_run(out / "candidates" / "supervised", fold, out, tmp_path / f"saved-{fold}")
        docs = model.encode([d.text for d in pool], normalize_embeddings=True)
        for i in sorted(set(select) - set(trained)):
            q = queries[i]
            dense = docs @ model.encode([q.text], normalize_embeddings=True)[0]
            lexical = bm25.scores([q.text])[0][columns]
            unit = lambda v: (v - v.min()) / (v.max() - v.min())  # noqa: E731
            fused = alpha * unit(dense) + (1 - alpha) * unit(lexical)
            ranked = [pool[j].id for j in sorted(range(len(pool)), key=lambda j: (-fused[j], pool[j].id))]
            assert found[i] == pytest.approx(_ndcg10(ranked, q.relevant), abs=1e-6), (fold, i)


def test_the_race_verdict_follows_the_training_races_two_rules():
    from sentune.adaptation.race_engine import verdict
    from sentune.core.metrics import METRICS
    from sentune.tasks.bootstrap import resamples

    rng = np.random.default_rng(0)
    gold = rng.normal(size=60)
    good = gold + rng.normal(scale=0.3, size=60)
    fair = gold + rng.normal(scale=0.6, size=60)
    noise = rng.normal(size=60)
    where = "the 60 pairs"
    draws = resamples(60, seed=0)

    def race(standing: dict, unchanged: np.ndarray, racing: list | None = None) -> dict:
        return verdict(gold, standing, list(standing) if racing is None else racing, unchanged, "spearman", draws, where)

    # the better of two goes on (halving), whichever is listed first
    assert list(race({"a": fair, "b": good}, fair)) == ["a"]
    assert list(race({"b": good, "a": fair}, fair)) == ["a"]
    # one behind the unchanged model in (nearly) every resample stops for that reason, even as the only member
    found = race({"noise": noise}, good)
    assert list(found) == ["noise"] and found["noise"].startswith("behind the unchanged model on the 60 pairs")
    # a tie: the first listed goes on; of three, one goes on, and the lower half's reason names the leader's score
    found = race({"x": good, "y": good.copy(), "z": fair}, noise)
    assert set(found) == {"y", "z"}
    leader = METRICS["spearman"].score(gold, good)
    assert found["y"] == f"in the lower half of the race ({leader:.2f} vs x's {leader:.2f} on the 60 pairs; successive halving)"
    # a finished candidate leads without racing: one far behind it stops, though the unchanged model is worse still
    found = race({"done": gold.copy(), "noise": noise}, -gold, racing=["noise"])
    assert list(found) == ["noise"] and found["noise"].startswith("behind done on the 60 pairs (")


@pytest.mark.slow
def test_the_cross_fitted_supervised_candidates_race_on_their_first_fold(tiny_model_dir, labelled, tmp_path, capsys):
    """supervised and supervised-stacked train their first fold; the race keeps one, which trains the other folds and
    the refit; the other is skipped with the race's reason. Every score the race read is out of fold."""
    from sentune.adaptation.candidates.supervised_race import FILE
    from sentune.adaptation.crossfit import FOLDS, fold_rows
    from sentune.adaptation.decide import split_dev

    out = tmp_path / "run"
    args = [*_args(tiny_model_dir, labelled, out), "--methods", "simcse,supervised,supervised-stacked", "--budget", "4"]
    assert main(args) == 0
    told = capsys.readouterr().out
    race = json.loads((out / "candidates" / FILE).read_text())
    results = json.loads((out / "results.json").read_text())["candidates"]
    assert set(race["scores"]) == {"supervised", "supervised-stacked"} and race["detail"]["folds"] == FOLDS
    stopped = set(race["stopped"])
    assert len(stopped) >= 1 and "fold race" in told
    split = split_dev(np.array([float(line.split("\t")[2]) for line in (out / "data" / "dev.tsv").read_text().splitlines()]))
    training, held = fold_rows(len(split.select), FOLDS, 0, 0)
    for name in ("supervised", "supervised-stacked"):
        record = results[name]
        if name in stopped:
            assert record["skipped"] == race["stopped"][name] and record["select"] is None
            continue
        # the winner's first fold is the race's: trained without the held-out rows, its scores those the race read
        assert record["fold_dev_indices_trained_on"][0] == sorted(int(split.select[i]) for i in training)
        assert not set(record["fold_dev_indices_trained_on"][0]) & {int(split.select[i]) for i in held}
        scores = np.load(out / "candidates" / name / "scores.npz")["dev"]
        kept = CandidateStore(out, split.select).held(name, 0, "scores")  # what the fold race kept of its first fold
        np.testing.assert_allclose(scores[split.select[held]], kept)
        assert record["race"]["held_units"] == len(held)
    # read back, not raced again
    assert main(args) == 0
    assert "fold race:" not in capsys.readouterr().out


def test_a_lone_supervised_candidate_races_alone_on_its_first_fold(tiny_model_dir, labelled, tmp_path, capsys):
    """The only supervised candidate of a run (a search run's, or a pairs run's without supervised-stacked) has a first
    look too: its first fold, timed and judged before its other folds (stopped there behind the unchanged model, or
    for want of time: sentune.adaptation.phases.stop_for_time), and reused by its cross-fitting when it goes on."""
    from sentune.adaptation.candidates.supervised_race import FILE
    from sentune.adaptation.crossfit import FOLDS, fold_rows
    from sentune.adaptation.decide import split_dev

    out = tmp_path / "run"
    assert main([*_args(tiny_model_dir, labelled, out), "--methods", "supervised", "--budget", "4"]) == 0
    told = capsys.readouterr().out
    race = json.loads((out / "candidates" / FILE).read_text())
    record = json.loads((out / "results.json").read_text())["candidates"]["supervised"]
    assert set(race["scores"]) == {"supervised"} and race["seconds"]["supervised"] > 0
    assert f"fold race: supervised trains its first fold of {FOLDS} alone" in told
    if "supervised" in race["stopped"]:
        assert record["skipped"] == race["stopped"]["supervised"]
        return
    split = split_dev(np.array([float(line.split("\t")[2]) for line in (out / "data" / "dev.tsv").read_text().splitlines()]))
    held = fold_rows(len(split.select), FOLDS, 0, 0)[1]
    scores = np.load(out / "candidates" / "supervised" / "scores.npz")["dev"]
    np.testing.assert_allclose(scores[split.select[held]], CandidateStore(out, split.select).held("supervised", 0, "scores"))
    assert record["race"]["held_units"] == len(held) and "(the fold race trained the first)" in told


@pytest.mark.slow
def test_the_supervised_candidates_on_train_race_at_their_first_rung(tiny_model_dir, labelled, tmp_path, capsys):
    """With --train both train an eighth of their steps as saved runs, evaluated on the selection pairs; the one kept
    resumes its run to its last step (the model it keeps), the other is skipped with the race's reason."""
    from sentune.adaptation.candidates.supervised_race import TRAIN_FILE

    out = tmp_path / "run"
    args = [
        *_args(tiny_model_dir, labelled, out),
        "--methods",
        "simcse,supervised,supervised-stacked",
        "--budget",
        "16",
        "--train",
        str(labelled / "train.tsv"),
    ]
    assert main(args) == 0
    race = json.loads((out / "candidates" / TRAIN_FILE).read_text())
    results = json.loads((out / "results.json").read_text())["candidates"]
    assert set(race["scores"]) == {"supervised", "supervised-stacked"} and race["detail"]["at_step"] == {"supervised": 2, "supervised-stacked": 2}
    assert len(race["stopped"]) >= 1
    for name in ("supervised", "supervised-stacked"):
        record = results[name]
        if name in race["stopped"]:
            assert record["skipped"] == race["stopped"][name] and not (out / "candidates" / name / "run").exists()
            continue
        run = json.loads((out / "candidates" / name / "run" / "results.json").read_text())["meta"]
        assert record["trained_on"] == "--train" and record["dev_indices_trained_on"] == []
        assert run["resumed_from"] == "checkpoint-2" and run["best_checkpoint"]["step"] == 16  # the last step, kept
        # the race read the selection pairs at its first rung: the evaluation the run saved there
        cosines = np.load(out / "candidates" / name / "run" / "dev_cosines" / "step-2.npy")
        from sentune.adaptation.decide import split_dev
        from sentune.core.metrics import METRICS

        gold = np.array([float(line.split("\t")[2]) for line in (out / "data" / "dev.tsv").read_text().splitlines()])
        assert race["scores"][name] == pytest.approx(METRICS["spearman"].score(gold[split_dev(gold).select], cosines))
    capsys.readouterr()
    assert main(args) == 0
    assert "race: supervised" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_race_whose_work_is_gone_is_run_again(tiny_model_dir, labelled, tmp_path, capsys):
    """Without --train, with it, then without it again in one folder: a member whose inputs changed is produced from
    nothing (its folder with what the race trained of it goes), so the verdict of the first run is not read back in the
    third: the members race again and every one going on is produced."""
    from sentune.adaptation.candidates.supervised_race import FILE, TRAIN_FILE

    out = tmp_path / "run"
    plain = [*_args(tiny_model_dir, labelled, out), "--methods", "simcse,supervised,supervised-stacked", "--budget", "16"]
    given = [*plain, "--train", str(labelled / "train.tsv")]
    for args, file, announced in (
        (plain, FILE, "fold race: supervised, supervised-stacked"),
        (given, TRAIN_FILE, "race: supervised, supervised-stacked"),
        (plain, FILE, "fold race: supervised, supervised-stacked"),
    ):
        capsys.readouterr()
        assert main(args) == 0
        told = capsys.readouterr().out
        assert f"    {announced} each train" in told
        assert (out / "candidates" / file).is_file(), told
        race = json.loads((out / "candidates" / file).read_text())
        results = json.loads((out / "results.json").read_text())["candidates"]
        for name in ("supervised", "supervised-stacked"):
            if name in race["stopped"]:
                assert results[name]["skipped"] == race["stopped"][name]
            else:
                assert results[name].get("skipped") is None and results[name]["select"] is not None


def test_hybrid_supervised_is_skipped_with_its_reason_when_hybrid_has_no_record():
    """SciFact's default run at ca36b4e: `hybrid` was left out at its turn (the half hour spent) and hybrid-supervised,
    expected to cost nothing, ran and read hybrid's fusion weight from a record that did not exist (KeyError): the run
    stopped. It is skipped instead, saying why; a skipped `hybrid` skips it too."""
    from types import SimpleNamespace

    from sentune.adaptation.candidates.search import HybridSupervised
    from sentune.adaptation.records import CandidateRecord

    trained = CandidateRecord("supervised", "supervised", dev_score=70.0, fold_dev_indices_trained_on=[[0, 1], [2, 3]])
    ctx = SimpleNamespace(records={"supervised": trained})
    scores, record = HybridSupervised("hybrid-supervised").run(ctx)
    assert scores == {} and "`hybrid`, whose fusion weight it fuses with, has no record" in record.skipped
    ctx.records["hybrid"] = CandidateRecord("hybrid", "hybrid", skipped="left out")
    assert HybridSupervised("hybrid-supervised").run(ctx)[1].skipped == record.skipped
