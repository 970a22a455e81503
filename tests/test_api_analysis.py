"""The Python API of the analysis and data commands (sentune.encode, layerwise, tsne, pairs, compare, report, check_data,
download_data, cache_entries, clear_cache) on the tiny model and data: each gives what its command writes or prints, from
a path or a model in memory, writes nothing itself (report aside: its pages are its product), and prints nothing."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest
from test_download import fake_hosts  # noqa: F401  # the loopback HTTP server with the sources' files

import sentune
from sentune.cli import main
from sentune.errors import UserError


def test_encode_gives_the_array_sentune_encode_writes(tiny_model_dir, tiny_st, tmp_path, capsys, caplog):
    texts = ["a man plays", "", "the dog runs", "a man plays"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    assert main(["encode", "--model", str(tiny_model_dir), "--pooling", "cls", str(tmp_path / "in.txt"), str(tmp_path / "cls.npy"), "--quiet"]) == 0
    assert main(["encode", "--model", str(tiny_model_dir), str(tmp_path / "in.txt"), str(tmp_path / "own.jsonl"), "--quiet"]) == 0
    capsys.readouterr()
    written = os.listdir(tmp_path)
    cls = sentune.encode(str(tiny_model_dir), texts, "cls")
    assert cls.dtype == np.float32 and cls.shape == (4, 32) and np.array_equal(cls, np.load(tmp_path / "cls.npy"))
    own = sentune.encode(tiny_st, texts)  # in memory, the model's own pooling: the model's own encode
    rows = [json.loads(line) for line in (tmp_path / "own.jsonl").read_text().splitlines()]
    assert np.allclose(own, [row["embedding"] for row in rows], atol=1e-6)
    assert np.allclose(own, tiny_st.encode(texts), atol=1e-5)
    with caplog.at_level(logging.WARNING, logger="sentune"):
        long = sentune.encode(tiny_st, ["a man", " ".join(["the dog runs"] * 40)], source="texts.txt")
    assert long.shape == (2, 32) and "1 texts longer than 64 tokens were truncated: texts.txt:2" in caplog.text
    assert capsys.readouterr().out == "" and os.listdir(tmp_path) == written  # nothing printed, nothing written
    with pytest.raises(UserError, match="a list of strings, not one string"):
        sentune.encode(tiny_st, "a man")
    with pytest.raises(UserError, match=r"texts\[1\]: a int"):
        sentune.encode(tiny_st, ["a man", 3])  # type: ignore[list-item]


def test_layerwise_gives_the_scores_sentune_layerwise_writes(tiny_model_dir, tiny_st, tiny_data_dir, tmp_path, capsys):
    assert main(["layerwise", "--model", str(tiny_model_dir), "--data", str(tiny_data_dir), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    command = json.loads((tmp_path / "cli" / "layerwise.json").read_text())
    capsys.readouterr()
    result = sentune.layerwise(tiny_st, "STS-B", data=tiny_data_dir)
    assert result.layers == command["layers"] == list(range(6))
    for pooling in ("cls", "mean", "max"):
        assert result.scores[pooling] == pytest.approx(command["scores"][pooling], abs=1e-9, nan_ok=True)  # layer 0's CLS: one vector
    frame = result.to_pandas()
    assert frame.shape == (6, 3) and frame.loc[2, "mean"] == result.scores["mean"][2] and not np.isnan(frame.loc[2, "mean"])
    assert len(result.figure().axes) == 1 and capsys.readouterr().out == "" and not (tmp_path / "api").exists()
    json_path, png = result.save(tmp_path / "api", command="sentune layerwise ...")
    assert json.loads(json_path.read_text())["meta"]["command"] == "sentune layerwise ..." and png.is_file()
    assert "command" not in result.raw["meta"]  # saving with a command leaves the result as it was
    with pytest.raises(UserError, match="unknown task or group 'STS99'"):
        sentune.layerwise(tiny_st, "STS99", data=tiny_data_dir)


BOTH = ["--label", "before", "--label", "after"]


def test_tsne_gives_the_points_sentune_tsne_writes(tiny_model_dir, tiny_st, tiny_data_dir, tmp_path, capsys):
    assert (
        main(["tsne", "--model", str(tiny_model_dir), "--label", "before", "--data", str(tiny_data_dir), "--pairs", "5", "--out", str(tmp_path / "tsne")]) == 0
    )
    capsys.readouterr()
    points = sentune.tsne(tiny_st, labels=["before"], pairs=5, data=tiny_data_dir)  # the same model, in memory
    command = json.loads((tmp_path / "tsne" / "tsne.json").read_text())
    assert list(points.panels) == ["before"] and points.panels["before"].shape == (20, 2)  # 10 pairs, 2 sentences each
    assert np.allclose(points.panels["before"], command["panels"]["before"], atol=1e-4)
    assert points.raw["positives"] == command["positives"] and points.raw["negatives"] == command["negatives"]
    assert len(points.figure().axes) == 1
    assert capsys.readouterr().out == "" and os.listdir(tmp_path) == ["tsne"]
    with pytest.raises(UserError, match="labels: 1 given for 2 models"):
        sentune.tsne([tiny_st, tiny_st], labels=["x"], data=tiny_data_dir)


def test_pairs_gives_the_rows_sentune_pairs_writes(tiny_model_dir, tiny_st, tiny_data_dir, tmp_path, capsys):
    models = ["--model", str(tiny_model_dir), "--model", str(tiny_model_dir), *BOTH, "--data", str(tiny_data_dir)]
    assert main(["pairs", *models, "--task", "STS-B-dev", "--pairs", "6", "--seed", "3", "--out", str(tmp_path / "pairs")]) == 0
    capsys.readouterr()
    table = sentune.pairs([str(tiny_model_dir), tiny_st], labels=["before", "after"], task="STS-B-dev", count=6, seed=3, data=tiny_data_dir)
    command = json.loads((tmp_path / "pairs" / "pairs.json").read_text())
    assert [(r["a"], r["b"], r["gold"]) for r in table.rows] == [(r["a"], r["b"], r["gold"]) for r in command["pairs"]]
    for mine, theirs in zip(table.rows, command["pairs"], strict=True):
        assert mine["cosine"] == pytest.approx(theirs["cosine"], abs=1e-6)
        a, b = tiny_st.encode([mine["a"], mine["b"]])  # naive: the cosine of the model's own embeddings
        assert mine["cosine"]["after"] == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), abs=1e-5)
    frame = table.to_pandas()
    assert list(frame.columns) == ["a", "b", "gold", "before", "after"] and len(frame) == 6
    page = (tmp_path / "pairs" / "pairs.md").read_text().splitlines()
    assert str(table).splitlines()[1:] == page[1:] and page[0].startswith(str(table).splitlines()[0])  # the command adds its line
    assert capsys.readouterr().out == "" and os.listdir(tmp_path) == ["pairs"]
    single = sentune.pairs(tiny_st, task="STS-B-dev", count=2, data=tiny_data_dir)
    assert single.raw["models"] == ["model 1"]  # one model in memory, no label: named by its place


def _results(folder, runs: dict[str, dict[str, float]]):
    """A results folder as `sentune eval --out` leaves it, with the given Spearman ('all') per run and task."""
    folder.mkdir(parents=True)
    tasks = {run: {"tasks": {t: {"all": {"spearman": v}, "wmean": {"spearman": v}} for t, v in scores.items()}, "summary": {}} for run, scores in runs.items()}
    meta = {"model": "m", "date": "2026-11-28T00:00:00+00:00", "sentune_version": "0", "command": "sentune eval"}
    (folder / "results.json").write_text(json.dumps({"meta": meta, "runs": tasks}))
    return folder


def test_compare_is_the_table_sentune_compare_prints(tmp_path, capsys):
    a = _results(tmp_path / "a", {"model": {"STS12": 60.0, "STS13": 70.0}, "cls": {"STS12": 50.0, "STS13": 52.0}})
    b = _results(tmp_path / "b", {"model": {"STS12": 64.0}})
    assert main(["compare", f"mine={a}#cls", str(b)]) == 0
    printed = capsys.readouterr().out
    table = sentune.compare({"mine": (a, "cls"), f"{b}#model": b})
    assert str(table) + "\n" == printed
    frame = table.to_pandas()
    assert list(frame.index) == ["mine", f"{b}#model"] and list(frame.columns) == ["STS12", "STS13", "avg (2)"]
    assert frame.loc["mine", "avg (2)"] == (50.0 + 52.0) / 2 and np.isnan(frame.loc[f"{b}#model", "STS13"])
    assert frame.loc[f"{b}#model", "avg (2)"] == 64.0  # the average of the tasks the run has
    assert list(sentune.compare([a, (a, "cls")]).runs) == [f"{a}#model", f"{a}#cls"]
    assert list(sentune.compare(str(b)).runs) == [f"{b}#model"]  # one folder
    with pytest.raises(UserError, match="has no run 'mean'; it has model, cls"):
        sentune.compare([(a, "mean")])
    with pytest.raises(UserError, match=f"no results.json in {tmp_path}"):
        sentune.compare([tmp_path])


def test_report_writes_the_pages_sentune_report_writes(tmp_path, capsys):
    run = _results(tmp_path / "run", {"model": {"STS12": 60.0, "STS13": 70.0}})
    assert main(["report", str(run), "--out", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    pages = sentune.report([run], tmp_path / "api")
    assert pages.markdown == tmp_path / "api" / "report.md" and pages.html.is_file()
    assert pages.markdown.read_text() == (tmp_path / "cli" / "report.md").read_text()
    assert capsys.readouterr().out == ""
    (tmp_path / "empty").mkdir()
    for bad, message in ((tmp_path / "none", "no such run folder"), (tmp_path / "empty", "no results.json, layerwise.json or pairs.json")):
        with pytest.raises(UserError, match=message):
            sentune.report([run, bad], tmp_path / "refused")
    assert not (tmp_path / "refused").exists()


def test_check_data_is_the_report_sentune_data_check_prints(tiny_data_dir, tmp_path, capsys):
    assert main(["data", "check", str(tiny_data_dir)]) == 1
    printed = capsys.readouterr().out
    check = sentune.check_data(tiny_data_dir)
    assert str(check) + "\n" == printed and not check.ok
    assert check.failures and all(line.startswith("FAIL") for line in check.failures)
    assert "FAIL STS-B        24 examples, official size is 1379" in check.failures
    assert "no SHA256SUMS file: checksums not verified" not in str(sentune.check_data(tiny_data_dir, checksums=False))
    with pytest.raises(UserError, match="no such folder"):
        sentune.check_data(tmp_path / "nope")


def test_download_data_fills_the_folder_as_sentune_data_download(fake_hosts, tmp_path):  # noqa: F811
    assert main(["data", "download", str(tmp_path / "cli"), "--mirror", fake_hosts, "--only", "wiki", "--quiet"]) == 0
    assert sentune.download_data(tmp_path / "api", only=["wiki"], mirror=fake_hosts) == tmp_path / "api"
    wiki = "corpora/wiki/wiki_sentences.txt"
    assert (tmp_path / "api" / wiki).read_bytes() == (tmp_path / "cli" / wiki).read_bytes()
    with pytest.raises(UserError, match="^only=bogus: no such source"):
        sentune.download_data(tmp_path / "refused", only="wiki,bogus")
    assert not (tmp_path / "refused").exists()


def test_cache_entries_and_clear_cache_are_sentune_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path))
    np.save(tmp_path / "small.npy", np.zeros(10))
    np.save(tmp_path / "big.npy", np.zeros(1000))
    old = tmp_path / "old.npy"
    np.save(old, np.zeros(100))
    os.utime(old, (0, 0))  # written in 1970
    entries = sentune.cache_entries()
    assert [e.path.name for e in entries] == ["big.npy", "old.npy", "small.npy"] and sentune.cache_folder() == tmp_path
    assert entries[0].bytes == (tmp_path / "big.npy").stat().st_size and entries[1].age_days > 365 * 50
    assert main(["cache", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[-1] for line in listed[1:]] == [e.path.name for e in entries]
    assert sentune.clear_cache(older_than_days=365) == [old] and not old.exists()
    assert main(["cache", "clear"]) == 0 and "removed 2 cache entries" in capsys.readouterr().out
    assert sentune.cache_entries() == []
    with pytest.raises(UserError, match="older_than_days -1"):
        sentune.clear_cache(-1)
