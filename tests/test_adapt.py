"""`sentune adapt` on the tiny model: the choice (ties keep the unchanged model, a planted better candidate wins, test
labels never change it), the saved model is the one scored, resume after SIGKILL retrains nothing finished, bad inputs
are one line naming file:line, and the ready-made examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from conftest import kill_when, tree_state

from sentune.adaptation.budget import AdaptError, Budget
from sentune.adaptation.candidates import Pooling, Unchanged, parse_methods, plan
from sentune.adaptation.decide import split_dev
from sentune.adaptation.names import TRAINED
from sentune.adaptation.records import CandidateRecord, Stopped
from sentune.adaptation.select import select
from sentune.adaptation.store import CandidateStore
from sentune.cli import main
from sentune.core.memory import peak_resident_mib
from sentune.data.user_data import read_scored_pairs, write_corpus, write_scored_pairs
from sentune.errors import UserError

WORDS = "a the man woman dog cat plays runs eats guitar piano park food car street ball kid red blue big small".split()


def _sentence(rng) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8))))


@pytest.fixture
def user_files(tmp_path):
    """A corpus, dev pairs with graded scores, test pairs: random tiny-vocabulary sentences."""
    rng = np.random.default_rng(0)
    write_corpus(tmp_path / "corpus.txt", [_sentence(rng) for _ in range(120)])
    write_scored_pairs(tmp_path / "dev.tsv", [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 5))) for _ in range(100)])
    write_scored_pairs(tmp_path / "test.tsv", [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 5))) for _ in range(40)])
    return tmp_path


def _adapt(args: list[str]) -> int:
    return main(["adapt", "--quiet", *args])


def _planted(tmp_path: Path, dev_scores: dict[str, np.ndarray], gold: np.ndarray):
    """select()'s inputs for candidates whose dev cosines are given."""
    candidates = [Unchanged(n) if n == "unchanged" else Pooling(n, n) for n in dev_scores]
    records = {}
    for name, scores in dev_scores.items():
        folder = tmp_path / "candidates" / name
        folder.mkdir(parents=True)
        np.savez(folder / "scores.npz", dev=scores)
        records[name] = CandidateRecord(name, "pooling", dev_score=0.0)
    pairs = SimpleNamespace(gold=np.asarray(gold), units=len(gold), unit="pairs", metric="spearman")
    inputs = SimpleNamespace(dev=pairs, test=None, corpus=["x"], dev_label="dev", test_label="test")
    config = SimpleNamespace(model="m", example=None, test=None, budget=Budget(), sed_members=3, seed=0)
    return records, candidates, inputs, split_dev(gold), tmp_path, config


@pytest.mark.slow
def test_selection_keeps_unchanged_on_ties_takes_a_planted_better_candidate_and_never_reads_test_labels(tmp_path):
    rng = np.random.default_rng(3)
    gold = rng.normal(size=300)
    unchanged = gold + rng.normal(0, 1.5, 300)
    # "a" is the same vectors, "b" a rescaling: the same ranking, so the same Spearman on every resample.
    tied = select(*_planted(tmp_path / "tie", {"unchanged": unchanged, "a": unchanged.copy(), "b": unchanged * 2}, gold))
    assert tied["choice"]["name"] == "unchanged" and "is kept" in tied["choice"]["reason"] and tied["choice"]["confirmation"] is None
    assert tied["candidates"]["a"]["select"]["vs_unchanged"]["confidence"] == 0.0

    better = gold + rng.normal(0, 0.5, 300)
    args = _planted(tmp_path / "planted", {"unchanged": unchanged, "noisy": unchanged + rng.normal(0, 1, 300), "better": better}, gold)
    found = select(*args)
    assert found["choice"]["name"] == "better" and found["candidates"]["better"]["chosen"]
    assert found["choice"]["confirmation"]["p_value"] <= 0.05 and found["meta"]["dev"]["select_pairs"] == 150
    for part in ("select", "confirm"):
        row = found["candidates"]["better"][part]
        assert row["low"] <= row["score"] <= row["high"]

    # Test labels shuffled: the same choice and dev rows; only the test rows move.
    records, candidates, inputs, split, out, config = args
    test_gold = rng.normal(size=200)
    for name in records:
        np.savez(out / "candidates" / name / "scores.npz", dev=np.load(out / "candidates" / name / "scores.npz")["dev"], test=test_gold + rng.normal(0, 1, 200))
    test = SimpleNamespace(gold=test_gold, units=len(test_gold), unit="pairs", metric="spearman")
    scored = select(records, candidates, SimpleNamespace(**{**vars(inputs), "test": test}), split, out, config)
    shuffled = SimpleNamespace(gold=rng.permutation(test_gold), units=len(test_gold), unit="pairs", metric="spearman")
    moved = select(records, candidates, SimpleNamespace(**{**vars(inputs), "test": shuffled}), split, out, config)
    assert moved["choice"] == scored["choice"] == found["choice"]
    assert all(moved["candidates"][n][p] == scored["candidates"][n][p] for n in records for p in ("select", "confirm"))
    assert moved["candidates"]["better"]["test"] != scored["candidates"]["better"]["test"]


def test_budget_and_methods_are_checked():
    assert Budget.parse(None) == Budget() and Budget.parse("epoch") == Budget()
    assert Budget.parse("500") == Budget(steps=500) and Budget.parse("10m") == Budget(minutes=10.0) and Budget.parse("300,2.5m") == Budget(300, 2.5)
    for bad in ("0", "ten", "-3m", "5s"):
        with pytest.raises(AdaptError, match="--budget"):
            Budget.parse(bad)
    assert Budget.parse("epoch,10m") == Budget(minutes=10.0)  # one pass over the corpus, at most 10 minutes
    for twice, message in (("10,20", "two step counts"), ("epoch,500", "two step counts"), ("10m,20m", "two time limits")):
        with pytest.raises(AdaptError, match=message):  # refused, not the last one kept
            Budget.parse(twice)
    assert parse_methods("ct,simcse,ct") == ("ct", "simcse")
    with pytest.raises(UserError, match="--methods: unknown bert-flow"):
        parse_methods("simcse,bert-flow")
    for alone in ("sed", "poolings,wise", "supervised,supervised-stacked"):
        with pytest.raises(UserError, match="is built from a trained candidate; add one of simcse"):
            parse_methods(alone)
    planned = plan(parse_methods(None), "mean", reference=True)
    names = [c.name for c in planned.all]
    assert names[0] == "unchanged" and "pooling-mean" not in names and "pooling-cls" in names  # the model's own pooling is not tried twice
    assert [c.name for c in planned.raced] == ["simcse", "mirror", "ct", "sg-opt"] and names[-5:] == [
        "sed",
        "supervised",
        "supervised-stacked",
        "wise",
        "st-simcse",
    ]
    assert "st-simcse" not in [c.name for c in plan(parse_methods(None), "mean", reference=False).all]
    # a search run's defaults leave out the sentence-pair trainings and what is built from them; named, they run
    searched = [c.name for c in plan(parse_methods(None), "mean", reference=False, search=True).all]
    assert "supervised" in searched and "whitening" in searched and "hybrid" in searched
    assert not {"simcse", "mirror", "ct", "sg-opt", "tsdae", "sed", "supervised-stacked", "wise", "ict"} & set(searched)
    assert "simcse" in [c.name for c in plan(parse_methods("simcse,hybrid"), "mean", reference=False, search=True).all]
    assert "tsdae" in [c.name for c in plan(parse_methods("simcse,tsdae"), "mean", reference=False).raced]  # opt-in: named, it runs
    # each supervised candidate is named on its own: scripts/main.sh leaves the stacked one out
    assert [c.name for c in plan(parse_methods("simcse,supervised"), "mean", reference=False).all][-2:] == ["simcse", "supervised"]
    assert [c.name for c in plan(parse_methods("simcse,supervised-stacked"), "mean", reference=False).all][-1] == "supervised-stacked"


@pytest.mark.slow
def test_end_to_end_saves_the_model_it_scored_and_test_labels_never_change_the_choice(tiny_model_dir, user_files, tmp_path):
    from sentence_transformers import SentenceTransformer

    from sentune.tasks.sts import cosine_scores

    common = ["--model", str(tiny_model_dir), "--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv")]
    common += ["--methods", "poolings,whitening,flow,simcse,tsdae,sed,wise", "--budget", "4", "--sed-members", "2", "--reference"]
    out = tmp_path / "run"
    assert _adapt([*common, "--test", str(user_files / "test.tsv"), "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    names = list(results["candidates"])
    assert names[:2] == ["unchanged", "pooling-cls"] and {"whitening", "flow", "simcse", "tsdae", "sed", "wise", "st-simcse"} <= set(names)
    assert not results["candidates"]["st-simcse"]["eligible"] and not results["candidates"]["st-simcse"]["chosen"]
    assert sum(c["chosen"] for c in results["candidates"].values()) == 1
    # The dev labels are random, so no candidate can be truly better: a null with a dozen candidates (one of them far
    # ahead on the 50 selection pairs by chance) keeps the unchanged model, and says why.
    assert results["choice"]["name"] == "unchanged" and results["choice"]["confirmation"]["p_value"] > 0.05
    assert all(c["select"] and (c.get("stopped") or (c["confirm"] and c["test"])) for c in results["candidates"].values())
    assert all(not c["eligible"] for c in results["candidates"].values() if c.get("stopped"))
    wise = results["candidates"]["wise"]
    # wise builds on the best tuned candidate on the selection pairs, finished or raced out (its best checkpoint)
    tuned = {n: c["select"]["score"] for n, c in results["candidates"].items() if c["kind"] in ("trained", "sed") and c["select"]}
    assert wise["source"] == max(tuned, key=tuned.get) and wise["mix"] in [a for a, _ in wise["curve"]]
    assert wise["select"]["score"] == pytest.approx(max(s for _, s in wise["curve"][:-1]), abs=1e-9)  # the best mix on the selection pairs
    # Training reads the selection half of the dev pairs and nothing else of them.
    dev, selection = read_scored_pairs(out / "data" / "dev.tsv"), read_scored_pairs(out / "data" / "dev-select.tsv")
    split = split_dev(np.array([p.score for p in dev.pairs]))
    assert [(p.a, p.b) for p in selection.pairs] == [(dev.pairs[i].a, dev.pairs[i].b) for i in split.select]
    for name in ("simcse", "tsdae", "sed"):  # the selection pairs, described by the record of them the run keeps
        described = {"kind": "scored-pairs", "rows": len(split.select), "source": str(out / "data" / "dev-select.tsv"), "labels": "scores"}
        assert results["candidates"][name]["recipe"]["eval"]["dev"] == described
    assert results["meta"]["dev"]["select_pairs"] == len(split.select) and results["meta"]["dev"]["confirm_pairs"] == len(split.confirm)
    # SED's second seed trains as many steps as its source needed and keeps its last step, evaluated only at its end
    member = yaml.safe_load((out / "candidates" / "sed" / "member-2" / "config.yaml").read_text())["training"]
    assert member["max_steps"] == member["eval_steps"] and member["checkpoint"] == "last" and member["patience"] == 0
    logged = [json.loads(line) for line in (out / "candidates" / "sed" / "member-2" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if any(k.startswith("eval_") for k in m)] == [member["max_steps"]]
    for page in ("results.md", "report.html", "scores.png", "dev_curves.png", "wise_curve.png"):
        assert (out / page).is_file(), page
    assert wise["tuned_end"] == f"{wise['source']} {results['candidates'][wise['source']]['dev_score']!r}"

    # The saved model gives exactly the dev and test cosines its candidate was scored with; so does the interpolated
    # one's (its dev cosines are kept from the search over α, its test pairs encoded apart).
    chosen = results["choice"]["name"]
    pairs = {split: read_scored_pairs(out / "data" / f"{split}.tsv") for split in ("dev", "test")}
    for name, folder in ((chosen, out / "model"), ("wise", out / "candidates" / "wise" / "model")):
        saved = SentenceTransformer(str(folder), device="cpu")
        for split, scored in pairs.items():
            vectors = saved.encode([s for p in scored.pairs for s in (p.a, p.b)], convert_to_numpy=True)
            stored = np.load(out / "candidates" / name / "scores.npz")[split]
            np.testing.assert_allclose(cosine_scores(vectors[0::2], vectors[1::2]), stored, atol=1e-4, err_msg=f"{name} {split}")

    # Its tuned end's record changed since (as when a code change has it produced again): wise is mixed again on a
    # resume, not read back.
    source = out / "candidates" / wise["source"] / "candidate.json"
    changed = json.loads(source.read_text())
    changed["dev_score"] += 1.0
    source.write_text(json.dumps(changed))
    assert _adapt([*common, "--test", str(user_files / "test.tsv"), "--out", str(out)]) == 0
    again = json.loads((out / "candidates" / "wise" / "candidate.json").read_text())
    assert again["tuned_end"] == f"{wise['source']} {changed['dev_score']!r}" != wise["tuned_end"]


def test_bad_inputs_are_one_line_naming_file_and_line(tiny_model_dir, user_files, tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("\n  \n")
    (tmp_path / "malformed.tsv").write_text("a man\ta guy\t4\nthe dog runs\t3\n")
    (tmp_path / "words.tsv").write_text("a man\ta guy\t4\nthe dog\ta cat\tsimilar\n")
    base = ["--model", str(tiny_model_dir), "--out", str(tmp_path / "out")]
    cases = {
        ("--corpus", str(tmp_path / "empty.txt"), "--dev", str(user_files / "dev.tsv")): "empty.txt: file is empty",
        ("--corpus", str(user_files / "corpus.txt"), "--dev", str(tmp_path / "malformed.tsv")): "malformed.tsv:2: malformed row",
        (
            "--corpus",
            str(user_files / "corpus.txt"),
            "--dev",
            str(user_files / "dev.tsv"),
            "--test",
            str(tmp_path / "words.tsv"),
        ): "words.tsv:2: label 'similar'",
        ("--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv"), "--budget", "5x"): "--budget '5x'",
        ("--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv"), "--budget", "10,20"): "--budget '10,20': two step counts",
    }
    for args, message in cases.items():
        assert _adapt([*base, *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0 and "Traceback" not in err, err
    assert not (tmp_path / "out" / "candidates").exists()  # nothing ran


@pytest.mark.slow
def test_resume_after_a_kill_in_mid_round_retrains_nothing_finished(tiny_model_dir, user_files, tmp_path):
    """Killed in the race's first round, after simcse has run its round and while mirror runs its own: the resumed run
    reads whitening back, does not train simcse's round again, continues mirror from its checkpoint and finishes."""
    out = tmp_path / "run"
    args = [sys.executable, "-m", "sentune", "adapt", "--quiet", "--model", str(tiny_model_dir), "--corpus", str(user_files / "corpus.txt")]
    args += ["--dev", str(user_files / "dev.tsv"), "--methods", "whitening,simcse,mirror", "--budget", "80", "--out", str(out)]
    env = {**os.environ, "SENTUNE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    simcse, mirror = out / "candidates" / "simcse" / "run", out / "candidates" / "mirror" / "run"
    kill_when(proc, lambda: (simcse / "paused.json").is_file() and any(mirror.glob("checkpoints/checkpoint-*/COMPLETE")), what="adapt")
    whitening = out / "candidates" / "whitening" / "candidate.json"
    round_one = json.loads((simcse / "paused.json").read_text())["step"]
    before = (whitening.read_text(), whitening.stat().st_mtime_ns, _lines_up_to(simcse / "metrics.jsonl", round_one))

    resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "whitening: done before, read back" in resumed.stdout
    assert "race round 1/4: simcse" not in resumed.stdout and "race round 1/4: mirror" in resumed.stdout
    assert before == (whitening.read_text(), whitening.stat().st_mtime_ns, _lines_up_to(simcse / "metrics.jsonl", round_one))
    results = json.loads((out / "results.json").read_text())
    assert set(results["candidates"]) == {"unchanged", "whitening", "simcse", "mirror"} and (out / "model" / "modules.json").is_file()


def _lines_up_to(metrics: Path, step: int) -> list[str]:
    return [line for line in metrics.read_text().splitlines() if json.loads(line)["step"] <= step]


def test_examples_write_the_users_formats_from_the_catalog(tiny_data_dir, tmp_path):
    from sentune.adaptation.examples import example_names, write_example

    assert example_names(retrieval=False) == ["sick", "qqp", "mrpc", "stsb", "stsb-250"]
    assert example_names(retrieval=True) == ["scifact", "quora", "quora-clusters"]
    for name in example_names(retrieval=False):
        files = write_example(name, tiny_data_dir, tmp_path / name)
        corpus = files.corpus.read_text().splitlines()
        dev, test = read_scored_pairs(files.dev), read_scored_pairs(files.test)
        assert corpus and len(corpus) == len(set(corpus))
        assert dev.pairs and test.pairs
        assert dev.kind == ("binary" if name in ("qqp", "mrpc") else "scores"), name
    # The sampled dev pairs are a fixed subset of their set: the same on every call.
    first = (tmp_path / "qqp" / "dev.tsv").read_text()
    assert write_example("qqp", tiny_data_dir, tmp_path / "again").dev.read_text() == first
    # stsb-250: a sample of STS-B dev (at most 250 pairs) with the same test; its train split shares no pair with either
    whole, small = read_scored_pairs(tmp_path / "stsb" / "dev.tsv").pairs, read_scored_pairs(tmp_path / "stsb-250" / "dev.tsv").pairs
    assert len(small) == min(250, len(whole)) and set(small) <= set(whole)
    assert (tmp_path / "stsb-250" / "test.tsv").read_text() == (tmp_path / "stsb" / "test.tsv").read_text()
    pairs_of = lambda rows: {frozenset((p.a, p.b)) for p in rows}  # noqa: E731
    train = read_scored_pairs(tmp_path / "stsb-250" / "train.tsv").pairs
    assert train and not pairs_of(train) & (pairs_of(small) | pairs_of(read_scored_pairs(tmp_path / "stsb-250" / "test.tsv").pairs))
    with pytest.raises(UserError, match="--example 'bank': unknown; examples: sick, qqp, mrpc, stsb, stsb-250, scifact, quora, quora-clusters"):
        write_example("bank", tiny_data_dir, tmp_path / "x")


def test_example_train_splits_share_no_pair_with_dev_or_test(tmp_path):
    """sick, mrpc and stsb write their labelled train split: every pair of the source split that is not a dev or test pair
    (MRPC: the rest of the train file once the 500 dev pairs are drawn); a train row repeating a test pair is left out."""
    from conftest import write_tiny_data_dir

    from sentune.adaptation.examples import write_example

    data = write_tiny_data_dir(tmp_path / "data")
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    test_row = (data / "senteval/MRPC/msr_paraphrase_test.txt").read_text().splitlines()[1]
    rows = [f"{i % 2}\t{i}\t{i + 1}\tsentence {i} a\tsentence {i} b" for i in range(520)] + [test_row]
    (data / "senteval/MRPC/msr_paraphrase_train.txt").write_text("\n".join([header, *rows]) + "\n")
    mrpc = write_example("mrpc", data, tmp_path / "mrpc")
    dev, train = read_scored_pairs(mrpc.dev).pairs, read_scored_pairs(mrpc.train).pairs
    test_pair = tuple(test_row.split("\t")[3:5])
    assert len(dev) == 500 and len(train) + (test_pair not in {(p.a, p.b) for p in dev}) == 21  # the test pair is never a train pair
    assert {(p.a, p.b) for p in train} | {(p.a, p.b) for p in dev} >= {(f"sentence {i} a", f"sentence {i} b") for i in range(520)}
    assert not {(p.a, p.b) for p in train} & {(p.a, p.b) for p in dev}
    for name in ("sick", "stsb"):
        files = write_example(name, data, tmp_path / name)
        train = read_scored_pairs(files.train).pairs
        others = {frozenset((p.a, p.b)) for f in (files.dev, files.test) for p in read_scored_pairs(f).pairs}
        assert len(train) == 24 and not {frozenset((p.a, p.b)) for p in train} & others, name
    assert write_example("qqp", data, tmp_path / "qqp").train is None


def test_scifact_tests_on_beirs_test_claims_when_the_data_has_them_and_trains_on_the_claims_dev_left(tmp_path):
    """Without BEIR's test judgements the example tests on the train claims dev left and has no train split; with them
    (qrels/test.tsv) those are its test set, and the claims dev left (none also a dev or test query) its train split."""
    import json

    from test_retrieval import _toy_data_dir

    from sentune.adaptation.examples import has_train, write_example
    from sentune.data.beir import read_beir_folder

    data = _toy_data_dir(tmp_path)  # 25 train claims, 120 abstracts
    without = write_example("scifact", data, tmp_path / "without")
    assert without.train is None and not has_train("scifact", data)
    dev = read_beir_folder(without.dev, "dev").queries
    assert len(dev) == 12 and len(read_beir_folder(without.test, "test").queries) == 13  # half each: a small data directory
    folder = data / "retrieval" / "scifact"
    extra = [{"_id": f"t{i}", "text": f"a test claim {i}"} for i in range(5)] + [{"_id": "t5", "text": dev[0].text}]  # one repeats a dev claim
    with (folder / "queries.jsonl").open("a") as f:
        f.write("".join(json.dumps(q) + "\n" for q in extra))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"t{i}\t{1000 + i}\t1\n" for i in range(6)))
    files = write_example("scifact", data, tmp_path / "with")
    assert has_train("scifact", data) and "BEIR's 300 test claims" in files.about
    test, train = read_beir_folder(files.test, "test").queries, read_beir_folder(files.train, "train").queries
    assert [q.id for q in test] == [f"t{i}" for i in range(6)] and [q.id for q in read_beir_folder(files.dev, "dev").queries] == [q.id for q in dev]
    assert {q.id for q in train} == {q.id for q in read_beir_folder(without.test, "test").queries}  # the 13 claims dev left
    assert not {q.text for q in train} & {q.text for q in dev + test}


def test_example_train_is_refused_where_an_example_has_none(tiny_data_dir, tmp_path, capsys):
    import shutil

    from sentune.cli import main

    data = Path(shutil.copytree(tiny_data_dir, tmp_path / "data"))
    (data / "retrieval" / "scifact" / "qrels" / "test.tsv").unlink()  # as in the shared data: BEIR's test judgements left out
    for args, said in (
        (
            ["--example", "scifact", "--example-train"],
            f"--example-train: the example scifact has no labelled train split apart from its dev and test in {data}",
        ),
        (["--corpus", "x.txt", "--example-train"], "--example-train: give it with --example, instead of --train"),
    ):
        assert main(["adapt", *args, "--data", str(data), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1].endswith(said), err
        assert not (tmp_path / "out").exists()


def test_a_normalising_pipeline_trains_raw_and_is_saved_normalised(tiny_st, tmp_path):
    """A base model ending in Normalize (as all-MiniLM-L6-v2) trains its own pooling without it (CT's dot product and
    TSDAE's decoder need the raw vector) and the chosen model gets it back, so users' dot products stay cosines."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    from sentune.adaptation.candidates import Plan, own_pooling
    from sentune.adaptation.chosen import save_choice

    base = SentenceTransformer(modules=[*tiny_st, Normalize()], device="cpu")
    assert own_pooling(base) == "mean" and own_pooling(tiny_st) == "mean"
    results = {"choice": {"name": "pooling-cls", "reason": "planted"}}
    save_choice(
        results,
        Plan(before_race=[Pooling("pooling-cls", "cls")]),
        SimpleNamespace(base=base, out=tmp_path, device="cpu", inputs=SimpleNamespace(task=SimpleNamespace(search=False))),
    )
    saved = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    assert [type(m).__name__ for m in saved][-2:] == ["Pooling", "Normalize"]
    vectors = saved.encode(["a man plays the guitar", "the dog runs"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert "## Chosen by sentune adapt" in (tmp_path / "model" / "README.md").read_text()


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
def test_without_dev_pairs_stsb_dev_selects_and_the_report_says_so(tiny_model_dir, tiny_data_dir, user_files, tmp_path, capsys):
    from conftest import write_tiny_data_dir

    out = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--corpus", str(user_files / "corpus.txt"), "--methods", "poolings"]
    # The tiny data directory's STS-B dev has 24 pairs: too few to select and confirm, refused before any work.
    assert _adapt([*args, "--data", str(tiny_data_dir), "--out", str(out)]) == 2
    assert "--dev STS-B-dev: 24 pairs; adapt needs at least 100" in capsys.readouterr().err and not out.exists()
    larger = write_tiny_data_dir(tmp_path / "data", n=120)
    assert _adapt([*args, "--data", str(larger), "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["dev"]["label"] == "STS-B-dev (no --dev given)" and results["meta"]["test"] is None
    assert len(read_scored_pairs(out / "data" / "dev.tsv").pairs) == 120
    assert "STS-B-dev (no --dev given)" in (out / "results.md").read_text()


@pytest.mark.slow
def test_a_refused_run_leaves_the_finished_one_untouched_and_shared_pairs_are_warned(tiny_model_dir, user_files, tmp_path, capsys, caplog):
    out = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--dev", str(user_files / "dev.tsv"), "--methods", "poolings", "--out", str(out)]
    # The dev file given as --test too: accepted (the user may mean it), with a warning that the test proves nothing.
    assert _adapt([*args, "--corpus", str(user_files / "corpus.txt"), "--test", str(user_files / "dev.tsv")]) == 0
    assert f"100 of the 100 test pairs of {user_files / 'dev.tsv'} are also dev pairs" in caplog.text
    caplog.clear()

    before = tree_state(out)
    other = tmp_path / "other.txt"
    other.write_text("".join(f"another sentence number {i}\n" for i in range(150)))
    assert _adapt([*args, "--corpus", str(other), "--test", str(user_files / "dev.tsv")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert "100 of the 100 test pairs" in caplog.text and "holds an adapt run with other corpus_sha256" in err[0] and len(err) == 1
    assert tree_state(out) == before  # neither its data nor anything else was replaced
    few = tmp_path / "few.txt"
    few.write_text("one sentence\n")
    assert _adapt([*args[:-1], str(tmp_path / "new"), "--corpus", str(few)]) == 2
    assert "few.txt: 1 distinct sentence(s); adapt needs at least 100" in capsys.readouterr().err and not (tmp_path / "new").exists()


def test_racing_stops_a_planted_bad_candidate_after_its_first_round_and_halves_the_rest(tmp_path):
    """After round 1: a candidate far below the unchanged model on the selection pairs stops (racing); of the three
    others, which tie with the unchanged model, at most half go on (successive halving), the best ones; a stopped one
    keeps its best selection cosines and a record that says why."""
    from sentune.adaptation.candidates import Trained
    from sentune.adaptation.race import _eliminate
    from sentune.adaptation.race_rows import digest_of
    from sentune.core.metrics import METRICS

    rng = np.random.default_rng(0)
    gold = rng.normal(size=150)
    unchanged = gold + rng.normal(0, 1.0, 150)
    planted = {
        "bad": gold + rng.normal(0, 4.0, 150),
        "good": gold + rng.normal(0, 0.95, 150),
        "fair": gold + rng.normal(0, 1.0, 150),
        "meh": gold + rng.normal(0, 1.05, 150),
    }
    recipe = SimpleNamespace(name="adapt/x", training=SimpleNamespace(max_steps=80), to_dict=lambda: {"training": {"eval_steps": 8}})
    ctx = SimpleNamespace(
        out=tmp_path,
        metric="spearman",
        base=SimpleNamespace(max_seq_length=64),
        store=CandidateStore(tmp_path, np.arange(150)),
        config=SimpleNamespace(seed=0),
        inputs=SimpleNamespace(dev=SimpleNamespace(unit="pairs")),
        selection_gold=lambda: gold,
        selection_cosines=lambda dev: dev,
        selection_score_of=lambda cosines: METRICS["spearman"].score(gold, cosines),
        untuned=lambda pooling: {"dev": unchanged},
    )
    candidates = {name: Trained(name, f"adapt/{name}") for name in planted}
    entries = []
    for name, cosines in planted.items():
        run = candidates[name].run_folder(ctx)
        (run / "dev_cosines").mkdir(parents=True)
        np.save(run / "dev_cosines" / "step-8.npy", gold + rng.normal(0, 9.0, 150))  # an earlier, worse evaluation
        np.save(run / "dev_cosines" / "step-10.npy", cosines)
        (run / "paused.json").write_text(json.dumps({"step": 10, "training_seconds": 5.0}))
        entries.append(candidates[name].race_entry(recipe, ctx, 30.0 if name == "bad" else 0.0))  # as SED's members
    going = _eliminate(entries, {}, ctx, 1, {e.name: 0.0 for e in entries})
    assert [e.name for e in going] == sorted(["good", "fair", "meh"], key=lambda n: -METRICS["spearman"].score(gold, planted[n]))[:2]
    bad = json.loads((tmp_path / "candidates" / "bad" / "candidate.json").read_text())
    assert bad["stopped"]["reason"].startswith("behind the unchanged model on the 150 selection pairs after round 1") and bad["stopped"]["best_step"] == 10
    race = {"round": 1, "steps": 80, "rows": {"dev": 150, "train": 0}, "unit": "pairs", "rows_digest": digest_of([])}
    assert bad["race"] == {**race, "score": pytest.approx(bad["dev_score"])}  # the race's check: on the dev selection pairs alone
    assert bad["dev_score"] == pytest.approx(METRICS["spearman"].score(gold, planted["bad"])) and bad["selection_only"]
    assert 0 < bad["peak_memory_mib"] <= peak_resident_mib()  # this process's peak when the record was written
    assert bad["seconds"] == 5.0 + 30.0 and bad["member_seconds"] == 30.0  # its training's seconds and what it trained before the race
    np.testing.assert_array_equal(ctx.store.scores("bad")["select"], planted["bad"])
    assert not ctx.store.complete(ctx.store.scores("bad"))  # its selection units' scores only
    halved = next(n for n in ("good", "fair", "meh") if n not in [e.name for e in going])
    assert "successive halving" in json.loads((tmp_path / "candidates" / halved / "candidate.json").read_text())["stopped"]["reason"]
    # a stopped record is finished on the run's inputs: a resumed run (--time's plan among its readers) reads it back
    # instead of taking it for unfinished and producing it again
    assert candidates["bad"].finished(ctx) and candidates[halved].finished(ctx)
    assert candidates["bad"].record("[1/4]", ctx).stopped is not None and (tmp_path / "candidates" / "bad" / "candidate.json").is_file()
    assert not candidates["bad"].finished(SimpleNamespace(**{**vars(ctx), "base": SimpleNamespace(max_seq_length=32)}))  # another reading length: redone


def test_sed_and_wise_build_on_raced_out_candidates_best_checkpoints(tmp_path):
    """A candidate the race stopped is not chosen itself, but its best checkpoint so far is weights SED and wise may
    build on; one whose weights are gone is skipped."""
    from sentune.adaptation.candidates import best, tuned_sources
    from sentune.adaptation.records import BestCheckpoint

    def made(path: Path) -> Path:
        path.mkdir(parents=True)
        (path / "modules.json").write_text("[]")
        return path

    finished = made(tmp_path / "candidates/simcse/run/model")
    checkpoint = made(tmp_path / "candidates/ct/run/checkpoints/checkpoint-16")
    made(tmp_path / "candidates/ct/run/checkpoints/checkpoint-19")  # the round's last step: not its best
    raced_out = Stopped("planted", 19, None)
    records = {
        "simcse": CandidateRecord("simcse", "trained", run="candidates/simcse/run", dev_score=70.0),
        "ct": CandidateRecord("ct", "trained", run="candidates/ct/run", dev_score=72.0, stopped=raced_out, best_checkpoint=BestCheckpoint(16, None)),
        "tsdae": CandidateRecord("tsdae", "trained", run="candidates/tsdae/run", dev_score=75.0, stopped=raced_out, best_checkpoint=BestCheckpoint(8, None)),
        "mirror": CandidateRecord("mirror", "trained", run="candidates/mirror/run", stopped=raced_out),  # stopped before any evaluation
        "whitening": CandidateRecord("whitening", "postprocess", dev_score=90.0),
    }
    ctx = SimpleNamespace(out=tmp_path, records=records)
    assert records["simcse"].weights(tmp_path) == finished and records["ct"].weights(tmp_path) == checkpoint
    assert records["tsdae"].weights(tmp_path) is None  # its checkpoint is gone
    sources = tuned_sources(ctx, ("trained",))
    assert [r.name for r in sources] == ["simcse", "ct"] and best(sources).name == "ct"


@pytest.mark.slow
def test_sentences_longer_than_the_model_reads_are_warned_about(tiny_model_dir, user_files, tmp_path, caplog):
    """Issue 28: a 1 MB line used to be truncated without a word."""
    long = " ".join(["word"] * 200_000)  # 1 MB
    corpus = tmp_path / "long.txt"
    corpus.write_text((user_files / "corpus.txt").read_text() + long + "\n")
    dev = tmp_path / "dev-long.tsv"
    dev.write_text((user_files / "dev.tsv").read_text() + f"{long}\ta short one\t3\n")
    assert _adapt(["--model", str(tiny_model_dir), "--corpus", str(corpus), "--dev", str(dev), "--methods", "poolings", "--out", str(tmp_path / "run")]) == 0
    err = caplog.text
    assert "1 of the 121 corpus sentences are longer than the model's" in err and "'word word word" in err
    assert "1 of the 101 dev pairs have a sentence longer than the model's" in err and f"{dev}:101" in err  # the user's file, the kind it read


def test_every_adapt_candidate_recipe_is_bundled_and_trains_a_registered_method():
    """names.TRAINED (what --methods races), SED, the reference, GenQ, the supervised and the retrieval-native candidates'
    recipes each have a recipe adapt/NAME.yaml of a registered method, and no adapt recipe is left without a candidate."""
    from sentune.adaptation.names import GENQ, QUERY_SIDE, REFERENCE, RETRIEVAL_NATIVE, SED, SUPERVISED_RECIPES
    from sentune.methods.registry import method_names
    from sentune.training.recipe import RECIPE_DIR, load_recipe

    candidates = {*TRAINED, SED, REFERENCE, GENQ, QUERY_SIDE, *SUPERVISED_RECIPES.values(), *RETRIEVAL_NATIVE}
    assert {p.stem for p in (RECIPE_DIR / "adapt").glob("*.yaml")} == candidates
    for name in candidates:
        assert load_recipe(f"adapt/{name}", check=False).method in method_names(), name


@pytest.mark.slow
@pytest.mark.parametrize("method", TRAINED)
def test_every_trained_candidate_runs_in_adapt(method, tiny_model_dir, user_files, tmp_path):
    """Each raced candidate (sentune.adaptation.names.TRAINED: a new one is tested here without editing this file) trains,
    is scored on the selection and confirmation pairs, and gets a record."""
    out = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv")]
    assert _adapt([*args, "--methods", method, "--budget", "4", "--out", str(out)]) == 0
    record = json.loads((out / "results.json").read_text())["candidates"][method]
    assert record["kind"] == "trained" and record["select"] and record["recipe"]["name"].endswith(method)


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
def test_low_memory_trains_every_candidate_with_gradient_checkpointing(tiny_model_dir, user_files, tmp_path, monkeypatch):
    import sentune.adaptation.run

    mapped: list[bool] = []  # the real call would change this test process's allocator: tests/test_memory.py runs it
    monkeypatch.setattr(sentune.adaptation.run, "map_large_allocations", lambda: mapped.append(True))
    out = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv")]
    assert _adapt([*args, "--methods", "simcse", "--budget", "2", "--low-memory", "--out", str(out)]) == 0
    record = json.loads((out / "results.json").read_text())["candidates"]["simcse"]
    assert record["recipe"]["training"]["gradient_checkpointing"] is True
    assert mapped == [True]


def test_a_train_file_of_a_few_pairs_is_refused_before_anything_is_written(tiny_model_dir, user_files, tmp_path, capsys):
    rng = np.random.default_rng(1)
    write_scored_pairs(tmp_path / "train3.tsv", [(_sentence(rng), _sentence(rng), float(score)) for score in (1, 3, 4)])
    out = tmp_path / "out"
    args = ["--model", str(tiny_model_dir), "--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv"), "--out", str(out)]
    assert _adapt([*args, "--train", str(tmp_path / "train3.tsv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--train {tmp_path / 'train3.tsv'}: 3 labelled pairs; the supervised candidates need at least 50" in err
    assert not out.exists()


def _prepared_train(user_files: Path, train_rows: list, tmp_path: Path, caplog) -> tuple[list, str]:
    """What prepare() (no model involved) keeps of a --train file beside user_files' dev pairs (graded 0-5), and what it said."""
    import logging

    from sentune.adaptation.inputs import AdaptConfig, prepare

    write_scored_pairs(tmp_path / "train.tsv", train_rows)
    config = AdaptConfig(corpus=user_files / "corpus.txt", dev=user_files / "dev.tsv", train=tmp_path / "train.tsv")
    with caplog.at_level(logging.WARNING, logger="sentune.adaptation.inputs"):
        prepare(config, tmp_path / "out", None)
    kept = [(p.a, p.b, p.score) for p in read_scored_pairs(tmp_path / "out" / "data" / "train.tsv").pairs]
    return kept, caplog.text


def test_a_train_file_on_another_scale_is_rescaled_onto_the_dev_pairs_and_the_user_told(user_files, tmp_path, caplog):
    rng = np.random.default_rng(2)
    rows = [(_sentence(rng), _sentence(rng), float(rng.uniform(10, 90))) for _ in range(60)] + [("x y", "y z", 10.0), ("a b", "b c", 90.0)]
    kept, said = _prepared_train(user_files, rows, tmp_path, caplog)
    dev = [p.score for p in read_scored_pairs(user_files / "dev.tsv").pairs]
    low, high = min(dev), max(dev)
    expected = [low + (score - 10.0) / 80.0 * (high - low) for _, _, score in rows]  # 10 -> the dev minimum, 90 -> its maximum
    np.testing.assert_allclose([score for _, _, score in kept], expected, rtol=1e-6)
    assert [(a, b) for a, b, _ in kept] == [(a, b) for a, b, _ in rows]
    assert f"--train {tmp_path / 'train.tsv'}: scores from 10 to 90, the dev pairs ({user_files / 'dev.tsv'}) from {low:g} to {high:g}: rescaled" in said


def test_a_train_file_on_the_dev_scale_is_kept_as_it_is(user_files, tmp_path, caplog):
    rng = np.random.default_rng(3)
    rows = [(_sentence(rng), _sentence(rng), float(rng.integers(1, 5))) for _ in range(60)]
    kept, said = _prepared_train(user_files, rows, tmp_path, caplog)
    assert kept == rows and said == ""


def test_0_1_train_labels_beside_graded_dev_pairs_train_cosent_and_the_user_is_told(user_files, tmp_path, caplog):
    rng = np.random.default_rng(4)
    rows = [(_sentence(rng), _sentence(rng), float(i % 2)) for i in range(60)]
    kept, said = _prepared_train(user_files, rows, tmp_path, caplog)
    assert kept == rows and "has 0/1 labels, the dev pairs" in said and "trains CoSENT on them" in said


def _refuse_reading_under(out: Path, monkeypatch) -> list[str]:
    """Every read of a file under what a run writes its inputs into (OUT/data, OUT/inputs, OUT/example: open,
    Path.read_*, np.load) fails the test; returns the paths refused."""
    import builtins
    import io

    refused: list[str] = []
    real_open, real_load = builtins.open, np.load

    def check(file) -> None:
        if isinstance(file, str | os.PathLike) and any(Path(file).resolve().is_relative_to((out / f).resolve()) for f in ("data", "inputs", "example")):
            refused.append(str(file))
            raise AssertionError(f"read back within the run: {file}")

    def guarded_open(file, mode="r", *args, **kwargs):
        if not any(c in mode for c in "wax+"):
            check(file)
        return real_open(file, mode, *args, **kwargs)

    def guarded_load(file, *args, **kwargs):
        check(file)
        return real_load(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)  # pathlib's read_text, read_bytes and open
    monkeypatch.setattr(np, "load", guarded_load)
    return refused


@pytest.mark.slow
@pytest.mark.parametrize("task", ["pairs", "pairs-objects", "search", "search-objects", "example"])
def test_nothing_under_out_data_is_read_back_within_a_run(task, tiny_model_dir, user_files, tmp_path, monkeypatch):
    """OUT/data is the record of what a run used (and OUT/example of an example's files): the run hands its inputs to
    the candidates and their trainings as objects, and reads nothing back from there or from OUT/inputs (a file read
    under any of them fails the run, and this test); from files (the command), from Python objects (sentune.adapt)
    and from an example."""
    out = tmp_path / "run"
    if task == "pairs-objects":
        from sentune.api.adapt import adapt

        corpus = (user_files / "corpus.txt").read_text().splitlines()
        dev, test = ([(p.a, p.b, p.score) for p in read_scored_pairs(user_files / name).pairs] for name in ("dev.tsv", "test.tsv"))
        refused = _refuse_reading_under(out, monkeypatch)
        adapt(str(tiny_model_dir), corpus=corpus, dev=dev, test=test, methods="whitening,simcse,wise", out=out, budget="4")
        monkeypatch.undo()
        assert refused == [] and json.loads((out / "results.json").read_text())["candidates"]["simcse"]["select"] is not None
        return
    if task == "search-objects":
        from test_adapt_retrieval import _toy_beir

        from sentune.api.adapt import adapt
        from sentune.data.beir import read_beir_folder

        dev_set, test_set = (read_beir_folder(folder, split) for folder, split in zip(_toy_beir(tmp_path / "toy"), ("dev", "test"), strict=True))
        documents = [{"_id": d.id, "title": d.title, "text": d.text[len(d.title) :].strip() if d.title else d.text} for d in dev_set.corpus]
        queries = {split: ({q.id: q.text for q in s.queries}, {q.id: q.relevant for q in s.queries}) for split, s in (("dev", dev_set), ("test", test_set))}
        refused = _refuse_reading_under(out, monkeypatch)
        result = adapt(
            str(tiny_model_dir), corpus=documents, dev=queries["dev"][0], dev_qrels=queries["dev"][1], test=queries["test"][0], test_qrels=queries["test"][1],
            methods="whitening,simcse,hybrid", out=out, budget="4",
        )  # fmt: skip
        monkeypatch.undo()
        assert refused == [] and result.results["candidates"]["simcse"]["select"] is not None and (out / "data" / "dev" / "queries.jsonl").is_file()
        return
    if task == "pairs":
        data = ["--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv"), "--test", str(user_files / "test.tsv")]
        methods = "poolings,whitening,simcse,sed,wise"
    elif task == "example":
        from conftest import write_tiny_data_dir

        data_dir = write_tiny_data_dir(tmp_path / "data", n=110)  # 110 dev pairs (SICK trial): enough to split
        data, methods = ["--example", "sick", "--example-train", "--data", str(data_dir)], "whitening,simcse,supervised"
    else:
        from test_adapt_retrieval import _toy_beir

        dev, test = _toy_beir(tmp_path / "toy")
        data, methods = ["--dev", str(dev), "--test", str(test)], "whitening,simcse,hybrid"
    refused = _refuse_reading_under(out, monkeypatch)
    code = _adapt(["--model", str(tiny_model_dir), *data, "--out", str(out), "--methods", methods, "--budget", "4", "--sed-members", "2"])
    monkeypatch.undo()
    assert refused == [] and code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["candidates"]["simcse"]["recipe"]["eval"]["dev"]["source"] == str(out / "data" / ("dev-select" if task == "search" else "dev-select.tsv"))
    if task == "example":  # the example's files, written as its record
        assert (out / "example" / "dev.tsv").is_file() and results["meta"]["test"]["path"] == str(out / "example" / "test.tsv")
    assert (out / "data" / "corpus.txt").is_file()  # written, as the record of the run
