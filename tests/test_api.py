"""The Python API (sentune.evaluate, train, adapt, Index, serve_app) on the tiny model: each gives what its command
gives on the same data, plain Python data go in without files, bad rows are one line naming their position, and progress
reaches logging, not stdout."""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import api_sentence as _sentence

import sentune
from sentune.cli import main
from sentune.data.user_data import write_scored_pairs
from sentune.errors import UserError


def test_import_sentune_is_cheap_and_names_the_api():
    """`import sentune` imports no torch, pandas or sentence-transformers; each API name resolves when first asked for."""
    code = "import sys, sentune; print(sorted(m for m in ('torch', 'pandas', 'sentence_transformers', 'numpy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    assert {"evaluate", "train", "adapt", "Index", "AdaptResult", "EvalResults", "Hit", "serve_app"} <= set(dir(sentune))
    importlib.import_module("sentune.adaptation.run")  # the engines' packages have names of their own: no API name changes
    importlib.import_module("sentune.training.trainer")
    importlib.import_module("sentune.model_export.check")
    for name, first in (("adapt", "model"), ("train", "recipe"), ("export", "model")):
        function = getattr(sentune, name)
        assert inspect.isfunction(function) and function.__module__ == f"sentune.api.{name}", name
        assert next(iter(inspect.signature(function).parameters)) == first, name
    assert {"adapt", "train", "export"} <= set(sentune.__all__)
    assert all(getattr(sentune, name) is not None for name in sentune.__all__)  # every exported name resolves


def test_evaluate_gives_the_commands_scores_as_a_dataframe(tiny_model_dir, tiny_st, tiny_data_dir, tmp_path, capsys):
    assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "STS12,STS-B", "--pooling", "model,cls", "--data", str(tiny_data_dir)]
                + ["--quiet", "--out", str(tmp_path / "cli")]) == 0  # fmt: skip
    command = json.loads((tmp_path / "cli" / "results.json").read_text())["runs"]
    capsys.readouterr()
    for model in (str(tiny_model_dir), tiny_st):  # a path, and the same model in memory
        results = sentune.evaluate(model, tasks=["STS12", "STS-B"], pooling=["model", "cls"], data=tiny_data_dir)
        frame = results.to_dataframe()
        assert set(frame["run"]) == set(command) == {"model", "cls"} and set(frame["task"]) == {"STS12", "STS-B"}
        for row in frame.itertuples():
            value = command[row.run]["tasks"][row.task]
            value = value["subsets"][row.subset] if isinstance(row.subset, str) else value
            for key in row.metric.split("."):
                value = value[key]
            assert row.score == pytest.approx(value, abs=1e-9), (row.run, row.task, row.metric)
        assert len(frame) == sum(1 for run in command.values() for task in run["tasks"].values() for _ in _leaves(task))
    assert capsys.readouterr().out == ""  # nothing printed
    with pytest.raises(UserError, match="postprocess bogus"):
        sentune.evaluate(tiny_st, tasks="STS12", data=tiny_data_dir, postprocess={"bogus": "target"})


def _leaves(value):
    """The numbers of a task's results, counts and timings left out (a naive walk, as the DataFrame should hold them)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key not in ("n", "seconds"):
                yield from _leaves(inner)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value


def test_index_ranks_as_sentune_search_from_dicts_strings_and_files(tiny_model_dir, tiny_st, tmp_path, capsys):
    rng = np.random.default_rng(1)
    docs = [{"_id": f"d{i}", "title": "a title" if i % 3 == 0 else "", "text": _sentence(rng)} for i in range(40)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = {"q1": "a man plays the guitar", "q2": "the dog runs in the park"}
    (tmp_path / "queries.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in queries.items()))
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(tmp_path / "cli"), "--fusion", "rrf", "--quiet"]) == 0
    for system in ("hybrid", "bm25"):
        run = tmp_path / f"{system}.run"
        assert main(["search", str(tmp_path / "cli"), "--queries", str(tmp_path / "queries.tsv"), "--top", "5", "--system", system, "--run", str(run)]) == 0
        expected = [line.split() for line in run.read_text().splitlines()]
        for index in (sentune.Index.build(tiny_st, docs, fusion="rrf"), sentune.Index.open(tmp_path / "cli")):
            hits = index.search(queries, top_k=5, system=system)
            got = [[q, "Q0", h.id, str(h.rank), f"{h.score:.6f}"] for q in queries for h in hits[q]]
            assert got == [line[:5] for line in expected], system
            assert all(h.text == next(d["title"] + " " + d["text"] for d in docs if d["_id"] == h.id).strip() for h in hits["q1"])
    index = sentune.Index.build(str(tiny_model_dir), [d["text"] for d in docs], tmp_path / "strings")
    one = index.search("a man plays the guitar", top_k=3)
    assert [h.rank for h in one] == [1, 2, 3] and all(h.text == docs[int(h.id)]["text"] for h in one)
    assert index.search(["a man plays the guitar"], top_k=3) == [one] and sentune.Index.open(tmp_path / "strings").search("a man plays the guitar", 3) == one
    written = index.write_run(queries, tmp_path / "api.run", top_k=2)
    assert [line.split()[2] for line in written.read_text().splitlines()[:2]] == [h.id for h in one[:2]]
    in_memory = sentune.Index.build(tiny_st, docs, tmp_path / "kept")  # the model in memory is saved beside the index
    assert sentune.Index.open(tmp_path / "kept").search(queries, top_k=4) == in_memory.search(queries, top_k=4)
    with pytest.raises(UserError, match="top_k 0"):
        index.search("x", top_k=0)
    with pytest.raises(UserError, match=r"corpus\[1\]: id 'a' already given at corpus\[0\]"):
        sentune.Index.build(tiny_st, [{"_id": "a", "text": "x"}, {"_id": "a", "text": "y"}])


def test_index_build_refuses_an_id_a_run_cannot_hold_and_an_exact_search_leaves_the_ann_for_the_next(tiny_st, tmp_path, caplog):
    with pytest.raises(UserError, match="document id 'a b'"):  # as `sentune index`: before the model loads, not at every run
        sentune.Index.build(tiny_st, [{"_id": "a b", "text": "x"}], tmp_path / "spaced")
    pytest.importorskip("faiss")
    rng = np.random.default_rng(2)
    index = sentune.Index.build(tiny_st, [_sentence(rng) for _ in range(60)], tmp_path / "ann", ann="hnsw:m=8")
    assert index.uses_ann() and not index.uses_ann(exact=True)
    exact = index.search("a man plays the guitar", top_k=5, exact=True)
    assert index.uses_ann()  # the exact search before did not take the approximate index away
    assert [h.id for h in exact] == [h.id for h in sentune.Index.open(tmp_path / "ann").search("a man plays the guitar", 5, exact=True)]
    with caplog.at_level("WARNING", logger="sentune"):  # as `sentune index --ann ivfpq` says it on stderr
        sentune.Index.build(tiny_st, [_sentence(rng) for _ in range(300)], tmp_path / "ivfpq", ann="ivfpq:pq=8")
    assert any(r.getMessage().startswith("ann ivfpq: 300 documents train at most") for r in caplog.records), caplog.text


@pytest.mark.slow  # an adapt run, about 2 s
def test_adapt_from_lists_gives_a_result_object_and_logs_instead_of_printing(tiny_model_dir, pairs_data, tmp_path, capsys, caplog):
    corpus, dev = pairs_data
    with caplog.at_level(logging.INFO, logger="sentune"):
        result = sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, methods=["whitening"], device="cpu")
    assert capsys.readouterr().out == "" and "] whitening" in caplog.text  # progress went to logging
    frame = result.candidates
    assert (
        list(frame.index) == list(result.results["candidates"])
        and frame.index[0] == "unchanged"
        and frame["chosen"].sum() == 1
        and frame.loc[result.choice, "chosen"]
    )
    assert frame.loc["whitening", "select"] == pytest.approx(result.results["candidates"]["whitening"]["select"]["score"])
    assert result.reason == result.results["choice"]["reason"] and result.choice in result.reason
    assert result.model.encode(["a man"]).shape == (1, 32) and result.index is None
    assert "<table" in result._repr_html_() and result.choice in result._repr_html_()
    saved = result.save(tmp_path / "kept")
    assert (saved / "model").is_dir() and json.loads((saved / "results.json").read_text())["choice"]["name"] == result.choice
    folder = result.out
    del result  # a run made in a temporary folder keeps it while its result lives
    import gc

    gc.collect()
    assert not folder.exists()


def test_bad_rows_name_their_position_and_a_refused_run_writes_nothing(tiny_model_dir, pairs_data, tmp_path):
    corpus, dev = pairs_data
    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"^dev\[3\]: expected \(sentence1, sentence2, score\), got 2 fields"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev[:3] + [("only one text", 1.0)] + dev[4:], out=out)
    with pytest.raises(UserError, match="needs at least 100"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev[:10], out=out)
    with pytest.raises(UserError, match=r"^dev\[0\]: score 'high' is not a number"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=[("a", "b", "high")], out=out)
    assert not out.exists()


def test_train_takes_python_data_and_returns_the_trained_model(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    """Sentences as a list train as the same sentences in a file; scored dev pairs given as rows choose the checkpoint."""
    from conftest import tiny_recipe

    from sentune.data.user_data import write_corpus

    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir)
    rng = np.random.default_rng(2)
    sentences = list(dict.fromkeys(_sentence(rng) for _ in range(40)))
    dev = [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 5))) for _ in range(20)]
    model = sentune.train(recipe, data=sentences, overrides={"training.max_steps": 2}, out=tmp_path / "api", dev=dev, data_dir=tiny_data_dir)
    assert capsys.readouterr().out == ""
    config = (tmp_path / "api" / "config.yaml").read_text()
    described = yaml.safe_load(config)  # what was given, described: no string names it
    assert described["train_data"] == {"kind": "sentences", "rows": len(sentences)} and described["training"]["max_steps"] == 2
    assert described["eval"]["dev"] == {"kind": "scored-pairs", "rows": len(dev), "source": "dev", "labels": "scores"}
    assert sorted(p.name for p in (tmp_path / "api").iterdir() if p.name in ("inputs", "data")) == []  # nothing written to read back
    write_corpus(tmp_path / "train.txt", sentences)
    write_scored_pairs(tmp_path / "dev.tsv", dev)
    saved = sentune.train(
        recipe, data=tmp_path / "train.txt", overrides=["training.max_steps=2"], dev=tmp_path / "dev.tsv", out=tmp_path / "b", data_dir=tiny_data_dir
    )
    np.testing.assert_allclose(model.encode(sentences[:4]), saved.encode(sentences[:4]), atol=1e-6)  # the same run, seeded
    with pytest.raises(UserError, match=r"data\[0\]: positive must be a string, got int"):
        sentune.train(recipe, data=[("a", 1)], out=tmp_path / "c", data_dir=tiny_data_dir)


def test_serve_app_takes_the_commands_settings_by_name(tmp_path):
    with pytest.raises(UserError, match="serve_app: no setting 'max_batches'"):
        sentune.serve_app(tmp_path, max_batches=4)


def test_progress_lines_print_on_stdout_only_within_a_command(capsys, caplog):
    """A command shows progress lines as plain lines on stdout, and only there; outside one they are log records a
    caller shows or silences (sentune.core.progress)."""
    from sentune.core.progress import say, shown_on_stdout

    with caplog.at_level(logging.INFO, logger="sentune"):
        with shown_on_stdout():
            say("inside a command")
        say("from Python")
    assert capsys.readouterr().out == "inside a command\n"
    assert "from Python" in caplog.text and "inside a command" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="sentune"):
        say("silenced")
    assert "silenced" not in caplog.text and capsys.readouterr().out == ""


def test_the_type_stub_names_the_same_api_as_the_package_from_the_same_modules():
    """sentune/__init__.pyi repeats the lazily imported names for type checkers (they read it instead of __init__.py):
    it must import each public name from the module sentune._API says and list the same __all__, else a name added or
    moved in one is missing or mistyped in the other."""
    import ast

    import sentune

    stub = ast.parse((Path(sentune.__file__).parent / "__init__.pyi").read_text())
    imported = {alias.name: node.module for node in stub.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    listed = next(node.value for node in stub.body if isinstance(node, ast.Assign) and node.targets[0].id == "__all__")  # type: ignore[attr-defined]
    assert imported == sentune._API
    assert ast.literal_eval(listed) == sentune.__all__
