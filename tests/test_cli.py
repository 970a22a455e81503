"""The command line end to end on the tiny model and a tiny SentEval-layout data directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_plot, tree_state

from sentune.cli import main


@pytest.mark.slow
def test_eval_writes_json_and_markdown(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--pooling",
            "cls,mean",
            "--tasks",
            "sts,dev",
            "--data",
            str(tiny_data_dir),
            "--out",
            str(out),
            "--whiten",
            "target:8",
            "--flow",
            "per-task:1",
            "--quiet",
        ]
    )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["runs"]) == {"cls", "mean", "cls+whiten(target,8)", "mean+whiten(target,8)", "cls+flow(per-task,seed=1)", "mean+flow(per-task,seed=1)"}
    sts12 = results["runs"]["cls"]["tasks"]["STS12"]
    assert set(sts12) >= {"all", "mean", "wmean", "subsets"} and len(sts12["subsets"]) == 5
    md = (out / "results.md").read_text()
    assert "| cls |" in md and "'wmean'" in md and "sentune eval --model" in md
    assert "STS12" in capsys.readouterr().out


def test_eval_never_replaces_results_silently(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    """Issue 28: a used --out is refused (exit 2, one line, nothing changed) unless --overwrite; a folder another process
    is writing is refused at once; a failed eval leaves no folder behind."""
    from sentune.core.locks import run_lock

    out = tmp_path / "run"
    args = ["eval", "--model", str(tiny_model_dir), "--pooling", "mean", "--tasks", "STS-B-dev", "--data", str(tiny_data_dir), "--quiet", "--out", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    before = tree_state(out)
    assert main([*args[:4], "cls", *args[5:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sentune: error: --out {out} already holds results ({out / 'results.json'}): choose another folder, or pass --overwrite to replace them"]
    assert tree_state(out) == before

    busy = tmp_path / "busy"
    with run_lock(busy) as held:  # another sentune run writing there
        assert held and main([*args[:-1], str(busy)]) == 2
    assert f"--out {busy} is being written by another sentune run" in capsys.readouterr().err
    assert not (busy / "results.json").exists()

    assert main([*args[:4], "cls", *args[5:], "--overwrite"]) == 0
    assert set(json.loads((out / "results.json").read_text())["runs"]) == {"cls"}

    failed = tmp_path / "failed"
    assert main([*args[:6], "STS99", *args[7:-1], str(failed)]) == 2
    assert "unknown task or group 'STS99'" in capsys.readouterr().err and not failed.exists()


@pytest.mark.slow
def test_eval_transfer_and_alignment(tiny_model_dir, tiny_data_dir, tmp_path):
    out = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_model_dir),
                "--pooling",
                "mean",
                "--tasks",
                "transfer,relatedness,multilingual",
                "--data",
                str(tiny_data_dir),
                "--out",
                str(out),
                "--alignment-pairs",
                "qqp",
                "--quiet",
            ]
        )
        == 0
    )
    run = json.loads((out / "results.json").read_text())["runs"]["mean"]
    assert {"MR", "SST5", "TREC", "MRPC", "SICK-E", "STS-B-reg", "STS17-es-es", "STS17-en-en"} <= set(run["tasks"])
    assert run["tasks"]["STS17-en-en"]["n"] == 12  # 6 track5.en-en rows in each of STS-B's dev and test files
    assert "f1" in run["tasks"]["MRPC"] and run["tasks"]["MR"]["preset"] == "fast"
    # the values themselves: tests/test_transfer.py (known answers); here they must be reported, and finite
    assert {"alignment", "uniformity"} <= set(run["alignment_uniformity"]) and np.isfinite(
        [run["alignment_uniformity"][k] for k in ("alignment", "uniformity")]
    ).all()


def test_clear_errors_for_missing_data_and_unknown_task(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SENTUNE_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "no-default"))  # no downloaded default folder either
    assert main(["eval", "--model", str(tiny_model_dir)]) == 2
    assert "no data directory given" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_model_dir), "--data", str(tmp_path), "--tasks", "STS99"]) == 2
    assert "unknown task or group 'STS99'" in capsys.readouterr().err
    assert main(["eval", "--model", str(tiny_model_dir), "--data", str(tmp_path), "--tasks", "STS12"]) == 2
    assert "STS.input.MSRpar.txt: file not found" in capsys.readouterr().err


def test_encode_npy_and_jsonl(tiny_model_dir, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("a man plays\nthe dog runs\na man plays\n")
    assert main(["encode", "--model", str(tiny_model_dir), "--pooling", "cls", str(text), str(tmp_path / "out.npy"), "--quiet"]) == 0
    vectors = np.load(tmp_path / "out.npy")
    assert vectors.shape == (3, 32) and np.array_equal(vectors[0], vectors[2])
    assert main(["encode", "--model", str(tiny_model_dir), str(text), str(tmp_path / "out.jsonl"), "--quiet"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == ["a man plays", "the dog runs", "a man plays"] and len(rows[0]["embedding"]) == 32


def test_data_check_counts_and_checksums(tiny_data_dir, tmp_path, capsys):
    assert main(["data", "check", str(tiny_data_dir)]) == 1  # tiny sets are not the official sizes
    out = capsys.readouterr().out
    assert "FAIL STS12" in out and "official size is 3108" in out and "no SHA256SUMS file" in out
    good = tmp_path / "d"
    (good / "x").mkdir(parents=True)
    (good / "x" / "a.txt").write_text("hello\n")
    import hashlib

    (good / "SHA256SUMS").write_text(f"{hashlib.sha256(b'hello' + bytes([10])).hexdigest()}  x/a.txt\n{'0' * 64}  x/missing.txt\n")
    from sentune.data.check import checksum_report

    lines, ok = checksum_report(good)
    assert not ok and any("x/missing.txt: missing" in line for line in lines)


def test_whiten_command_saves_loadable_model(tiny_model_dir, tiny_data_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "w"
    assert (
        main(
            [
                "whiten",
                "--model",
                str(tiny_model_dir),
                "--pooling",
                "first-last",
                "--fit-on",
                "wiki",
                "--k",
                "8",
                "--data",
                str(tiny_data_dir),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert SentenceTransformer(str(out), device="cpu").encode(["a man"]).shape == (1, 8)
    flow_out = tmp_path / "f"
    assert (
        main(["flow", "--model", str(tiny_model_dir), "--pooling", "mean", "--fit-on", "wiki", "--data", str(tiny_data_dir), "--out", str(flow_out), "--quiet"])
        == 0
    )
    assert SentenceTransformer(str(flow_out), device="cpu").encode(["a man"]).shape == (1, 32)


@pytest.mark.slow
def test_layerwise_writes_scores_and_plot(tiny_model_dir, tiny_data_dir, tmp_path):
    assert main(["layerwise", "--model", str(tiny_model_dir), "--data", str(tiny_data_dir), "--out", str(tmp_path), "--quiet"]) == 0
    result = json.loads((tmp_path / "layerwise.json").read_text())
    assert result["layers"] == list(range(6)) and all(len(v) == 6 for v in result["scores"].values())
    assert_plot(tmp_path / "layerwise.png")


@pytest.mark.slow
def test_report_renders_tables_and_plots(tiny_model_dir, tiny_data_dir, tmp_path):
    run = tmp_path / "run"
    assert (
        main(["eval", "--model", str(tiny_model_dir), "--pooling", "cls,mean", "--tasks", "sts", "--data", str(tiny_data_dir), "--out", str(run), "--quiet"])
        == 0
    )
    assert main(["layerwise", "--model", str(tiny_model_dir), "--data", str(tiny_data_dir), "--out", str(run), "--quiet"]) == 0
    report = tmp_path / "report"
    assert main(["report", str(run), "--out", str(report)]) == 0
    md = (report / "report.md").read_text()
    page = (report / "report.html").read_text()
    assert "![STS average per run](sts_average.png)" in md and "| layer | cls | mean | max |" in md
    assert "<table>" in page and '<img alt="layer-wise Spearman" src="layerwise.png">' in page
    assert_plot(report / "sts_average.png")
    assert_plot(report / "layerwise.png")
    assert main(["report", str(tmp_path / "nothing"), "--out", str(report)]) == 2


def test_seed_table_groups_runs_that_differ_only_in_seed(tmp_path):
    from sentune.analysis.report import seed_table

    def run(name, seed, score, lr=5e-5):
        folder = tmp_path / name
        folder.mkdir()
        recipe = {"name": "r", "method": "sg-opt", "training": {"seed": seed, "learning_rate": lr}}
        tasks = {t: {"all": {"spearman": score}} for t in ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")}
        (folder / "results.json").write_text(json.dumps({"meta": {"recipe": recipe}, "runs": {"model": {"tasks": tasks}}}))
        return folder

    table = seed_table([run("a", 1, 70.0), run("b", 2, 74.0), run("c", 1, 60.0, lr=1e-5)])
    rows = table.splitlines()[2:]
    assert len(rows) == 2
    assert rows[0].startswith("| r | 1,2 | 72.00 ± 2.83") and "**72.00 ± 2.83**" in rows[0]  # std of (70, 74), ddof 1
    assert "**60.00 ± 0.00**" in rows[1]


@pytest.mark.slow
def test_tsne_figure_panels(tiny_model_dir, tiny_data_dir, tmp_path):
    from sentune.analysis.figures import extreme_pairs

    positives, negatives = extreme_pairs("STS-B-dev", tiny_data_dir, count=5)
    assert min(p.score for p in positives) >= max(p.score for p in negatives)
    assert (
        main(["tsne", "--model", str(tiny_model_dir), "--model", str(tiny_model_dir), "--pairs", "5", "--data", str(tiny_data_dir), "--out", str(tmp_path)])
        == 0
    )
    record = json.loads((tmp_path / "tsne.json").read_text())
    assert len(record["panels"]) == 2 and all(len(points) == 20 for points in record["panels"].values())  # 10 pairs, 2 sentences each
    assert_plot(tmp_path / "tsne.png")
    assert (
        main(
            [
                "tsne",
                "--model",
                str(tiny_model_dir),
                "--label",
                "before",
                "--model",
                str(tiny_model_dir),
                "--label",
                "after",
                "--pairs",
                "5",
                "--data",
                str(tiny_data_dir),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert list(json.loads((tmp_path / "tsne.json").read_text())["panels"]) == ["before", "after"]


def test_pairs_table_cosines_and_stratified_sample(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    from sentence_transformers import SentenceTransformer

    from sentune.analysis.pairs import sample_pairs

    sample = sample_pairs("STS-B-dev", tiny_data_dir, count=6, seed=3)
    assert len(sample) == 6 and len({(p.a, p.b) for p in sample}) == 6
    assert min(p.score for p in sample) < 5 / 3 and max(p.score for p in sample) > 10 / 3  # low and high bands both present
    assert [p.a for p in sample] == [p.a for p in sample_pairs("STS-B-dev", tiny_data_dir, count=6, seed=3)]  # seeded

    out = tmp_path / "pairs"
    assert (
        main(
            [
                "pairs",
                "--model",
                str(tiny_model_dir),
                "--model",
                str(tiny_model_dir),
                "--label",
                "before",
                "--label",
                "after",
                "--task",
                "STS-B-dev",
                "--pairs",
                "6",
                "--seed",
                "3",
                "--data",
                str(tiny_data_dir),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads((out / "pairs.json").read_text())
    reference = SentenceTransformer(str(tiny_model_dir), device="cpu")
    for row in record["pairs"]:
        a, b = reference.encode([row["a"], row["b"]])
        expected = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
        assert row["cosine"]["before"] == pytest.approx(expected, abs=1e-5)
        assert row["cosine"]["after"] == row["cosine"]["before"]
    markdown = (out / "pairs.md").read_text()
    assert "| cos: before | cos: after | gold |" in markdown and markdown.count("<br>") == 6
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    assert "cos: before" in (tmp_path / "report" / "report.md").read_text()
    assert main(["pairs", "--model", str(tiny_model_dir), "--label", "a", "--label", "b", "--data", str(tiny_data_dir), "--out", str(out)]) == 2
    assert "--label given 2 times for 1 --model options: give one label per model or none" in capsys.readouterr().err


def test_flow_settings_reach_the_flow(tiny_model_dir, tiny_data_dir, tmp_path, capsys, monkeypatch):
    import functools

    import sentune.postprocess.flow as flow_module

    seen = []
    original = flow_module.Flow.__init__

    @functools.wraps(original)  # keeps the signature the option check reads
    def spy(self, *args, **kwargs):
        seen.append(kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(flow_module.Flow, "__init__", spy)
    out = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                "--model",
                str(tiny_model_dir),
                "--pooling",
                "mean",
                "--tasks",
                "STS-B",
                "--data",
                str(tiny_data_dir),
                "--out",
                str(out),
                "--flow",
                "tasks:STS12:2",
                "--flow-set",
                "learning_rate=1e-3",
                "--flow-set",
                "max_steps=2",
                "--quiet",
            ]
        )
        == 0
    )
    assert {"seed": 2, "learning_rate": 1e-3, "max_steps": 2}.items() <= seen[-1].items()
    assert "mean+flow(tasks:STS12,seed=2,learning_rate=0.001,max_steps=2)" in json.loads((out / "results.json").read_text())["runs"]
    assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "STS-B", "--data", str(tiny_data_dir), "--flow", "target", "--flow-set", "lr=1"]) == 2
    assert "--flow-set lr=1: flow takes" in capsys.readouterr().err


def test_uniformity_covers_every_pair_and_alignment_the_positives(tiny_model_dir, tiny_data_dir):
    """The BERT-CF report §6.3: alignment over the positive pairs P, uniformity over D = P ∪ N (every sentence of every pair)."""
    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.data.catalog import load_examples, select_tasks
    from sentune.tasks.alignment import alignment, uniformity
    from sentune.tasks.evaluate import evaluate

    model = load_model(str(tiny_model_dir))
    found = evaluate(model, select_tasks("STS-B"), tiny_data_dir, alignment_pairs="qqp", show_progress=False)["runs"]["model"]["alignment_uniformity"]
    pairs = load_examples("qqp-dev", tiny_data_dir) + load_examples("qqp-test", tiny_data_dir)
    positive = [p for p in pairs if p.label == 1]
    assert 0 < len(positive) < len(pairs)  # the toy set has both kinds, so P and P ∪ N differ
    encoder = Encoder(model, "model", show_progress=False)
    everything = encoder.encode(list(dict.fromkeys(s for p in pairs for s in (p.a, p.b))))
    assert found["uniformity"] == pytest.approx(uniformity(everything), abs=1e-6)
    assert found["alignment"] == pytest.approx(alignment(encoder.encode([p.a for p in positive]), encoder.encode([p.b for p in positive])), abs=1e-6)
    only_positive = encoder.encode(list(dict.fromkeys(s for p in positive for s in (p.a, p.b))))
    assert abs(uniformity(only_positive) - found["uniformity"]) > 1e-6  # the old definition gives another number
    assert (found["positive_pairs"], found["uniformity_sentences"]) == (len(positive), len(everything))  # what each covered, recorded


@pytest.mark.slow  # seconds: plain `pytest -q` stays short; scripts/test.sh runs it
def test_eval_transfer_with_senteval_s_mlp(tiny_model_dir, tiny_data_dir, tmp_path):
    out = tmp_path / "mlp"
    args = ["eval", "--model", str(tiny_model_dir), "--pooling", "mean", "--tasks", "MR,TREC", "--preset", "fast-mlp"]
    assert main([*args, "--data", str(tiny_data_dir), "--out", str(out), "--quiet"]) == 0
    tasks = json.loads((out / "results.json").read_text())["runs"]["mean"]["tasks"]
    assert {tasks[t]["classifier"] for t in ("MR", "TREC")} == {"mlp"} and tasks["TREC"]["l2"] in (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


def test_a_postprocessor_fitted_on_one_set_is_fitted_once_and_its_fit_recorded(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    from sentune.postprocess import flow as flow_module

    fits = []
    original = flow_module.Flow.fit
    monkeypatch.setattr(flow_module.Flow, "fit", lambda self, x: fits.append(len(x)) or original(self, x))
    args = ["eval", "--model", str(tiny_model_dir), "--pooling", "mean", "--tasks", "STS12,STS-B,SICK-R", "--data", str(tiny_data_dir), "--quiet"]
    assert main([*args, "--flow", "target", "--flow-set", "max_steps=20", "--out", str(tmp_path / "target")]) == 0
    assert len(fits) == 1  # not once per task: the three tasks share one fit
    run = json.loads((tmp_path / "target" / "results.json").read_text())["runs"]["mean+flow(target,max_steps=20)"]
    assert run["fit"]["sentences"] == fits[0] and run["fit"]["steps"] == 20
    assert run["fit"]["loss_first"] != run["fit"]["loss_last"] and run["fit"]["loss_window"] == 2
    fits.clear()
    assert main([*args, "--flow", "per-task", "--flow-set", "max_steps=20", "--out", str(tmp_path / "per-task")]) == 0
    tasks = json.loads((tmp_path / "per-task" / "results.json").read_text())["runs"]["mean+flow(per-task,max_steps=20)"]["tasks"]
    assert len(fits) == 3 and [tasks[t]["fit"]["sentences"] for t in ("STS12", "STS-B", "SICK-R")] == fits


def test_the_command_reference_is_generated_from_the_command_records():
    """docs/commands.md is what sentune.cli.reference generates now: regenerate it after changing an option."""
    from sentune.cli.reference import command_reference

    assert (Path(__file__).parents[1] / "docs" / "commands.md").read_text(encoding="utf-8") == command_reference()


def test_a_new_command_is_one_record(monkeypatch, capsys):
    """A command record added to the list is parsed, run, given the shared option groups it asks for, and documented."""
    import sentune.cli.app
    from sentune.cli.base import Command
    from sentune.cli.reference import command_reference

    def options(p):
        p.add_argument("--times", type=int, default=1, help="how often to greet")

    def greet(args):
        print("hello " * args.times + args.device)
        return 0

    toy = Command("greet", "say hello", options, greet, runs_models=True)
    monkeypatch.setattr(sentune.cli.app, "COMMANDS", (*sentune.cli.app.COMMANDS, toy))
    assert main(["greet", "--times", "2", "--device", "cpu"]) == 0
    assert capsys.readouterr().out == "hello hello cpu\n"
    reference = command_reference()
    assert "## `sentune greet`" in reference and "| `--times TIMES` |  | `1` | how often to greet |" in reference and "`greet`." in reference


def test_a_library_that_sets_its_own_log_level_stays_quiet_without_verbose():
    """bm25s sets its logger to DEBUG when imported, after sentune configured the output: its records still stay out
    of stderr without -v, and sentune's own INFO lines still show."""
    import subprocess
    import sys

    code = (
        "import logging; from sentune.cli.base import configure_output; configure_output(False); "
        "lib = logging.getLogger('bm25s'); lib.setLevel(logging.DEBUG); lib.debug('library debug'); lib.info('library info'); "
        "logging.getLogger('sentune.x').info('own info')"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    assert "library" not in quiet and "INFO sentune.x: own info" in quiet
    # a later command in the same process, with -v, gets the libraries' INFO lines: the floor is the latest command's
    later = code.replace("configure_output(False)", "configure_output(False); configure_output(True)")
    loud = subprocess.run([sys.executable, "-c", later], capture_output=True, text=True, check=True).stderr
    assert "library info" in loud and "library debug" not in loud
