"""The Python API of the commands that make models and files (sentune.whiten, flow, fit_postprocessor, ensemble,
paraphrase, pipeline, export, export_index) on the tiny models: each gives what its command gives on the same input, a
model in memory and plain Python data go in as well as names and files, nothing is printed, and bad input is one line
before any work."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from conftest import SENTENCES
from test_bt import tiny_marian  # noqa: F401 (the fixture: tiny random Marian translation models)

import sentune
from sentune.cli import main
from sentune.errors import UserError


def _encode(model) -> np.ndarray:
    return model.encode(SENTENCES, convert_to_numpy=True)


def _loaded(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)


def test_whiten_gives_the_commands_model_from_a_name_a_list_or_a_file(tiny_model_dir, tiny_st, tiny_data_dir, tmp_path, capsys):
    from sentune.data.catalog import load_sentences

    args = ["whiten", "--model", str(tiny_model_dir), "--pooling", "mean", "--fit-on", "wiki", "--k", "8", "--out", str(tmp_path / "w")]
    assert main([*args, "--data", str(tiny_data_dir), "--quiet"]) == 0
    capsys.readouterr()
    command = _encode(_loaded(tmp_path / "w"))
    assert command.shape == (len(SENTENCES), 8)
    wiki = load_sentences("wiki", tiny_data_dir)
    (tmp_path / "wiki.txt").write_text("\n".join(wiki) + "\n")
    # the set by name, the same sentences as a list (from a model in memory) and as a file (file:PATH): one fit, one model
    for model, fit_on in ((str(tiny_model_dir), "wiki"), (tiny_st, wiki), (tiny_st, f"file:{tmp_path / 'wiki.txt'}")):
        whitened = sentune.whiten(model, fit_on, k=8, pooling="mean", data=tiny_data_dir)
        np.testing.assert_allclose(_encode(whitened), command, rtol=1e-4, atol=1e-5)
    assert capsys.readouterr().out == ""  # nothing printed


@pytest.mark.slow  # a flow trained twice (~3 s)
def test_flow_gives_the_commands_model(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    assert main(["flow", "--model", str(tiny_model_dir), "--fit-on", "wiki", "--out", str(tmp_path / "f"), "--data", str(tiny_data_dir), "--quiet"]) == 0
    capsys.readouterr()
    flowed = sentune.flow(str(tiny_model_dir), "wiki", data=tiny_data_dir, out=tmp_path / "f2")
    np.testing.assert_allclose(_encode(flowed), _encode(_loaded(tmp_path / "f")), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_encode(_loaded(tmp_path / "f2")), _encode(flowed), rtol=1e-4, atol=1e-5)  # `out` saves what it returns
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m, d: sentune.fit_postprocessor(m, "centring", "wiki", data=d), "unknown post-processor 'centring'"),
        (lambda m, d: sentune.whiten(m, "wiki", settings={"components": 8}, data=d), "settings components: whiten takes device, eps, n_components, normalize"),
        (lambda m, d: sentune.whiten(m, "wikipedia", data=d), "unknown sentence set 'wikipedia'"),
        (lambda m, d: sentune.whiten(m, "pairs:x.tsv", data=d), "holds pairs, not sentences"),
        (lambda m, d: sentune.whiten(m, ["a man", 3], data=d), r"fit_on\[1\]"),
        (lambda m, d: sentune.ensemble([]), "at least one"),
        (lambda m, d: sentune.ensemble([m], pooling="sideways"), "sideways"),
        (lambda m, d: sentune.paraphrase(["a man"], beams=0), "beams 0: at least 1"),
        (lambda m, d: sentune.pipeline("ct-bogus", m, data=d), "unknown stage"),
        (lambda m, d: sentune.pipeline("whiten", m, overrides={"whiten": ["components=8"]}, data=d), "whiten takes device"),
        (lambda m, d: sentune.export(m, "o", quantize="int4"), "quantize=int4"),  # the Python argument, not the option
        (lambda m, d: sentune.export(m, "o", keep_fp32="ffn-output"), "applies to quantize int8"),
        (lambda m, d: sentune.export_index("i", path="q", url="http://localhost:6333"), "one of path"),
        (lambda m, d: sentune.export_index("i", "elastic", path="q"), "to=elastic"),
    ],
)
def test_bad_input_is_one_line_before_any_work(call, message, tiny_st, tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=message) as caught:
        call(tiny_st, tiny_data_dir)
    assert "\n" not in str(caught.value) and list(tmp_path.iterdir()) == []  # nothing written


def test_ensemble_of_names_and_models_in_memory_is_the_commands(tiny_model_dir, _tiny_st, tiny_st, tmp_path, capsys):
    member = tiny_st
    with torch.no_grad():
        generator = torch.Generator().manual_seed(1)
        for parameter in member[0].model.encoder.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    member.save(str(tmp_path / "member"))
    assert main(["ensemble", "--member", str(tiny_model_dir), "--member", str(tmp_path / "member"), "--out", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    command = _encode(_loaded(tmp_path / "cli"))
    made = sentune.ensemble([str(tiny_model_dir), member], out=tmp_path / "api")  # a name and a model in memory
    np.testing.assert_allclose(_encode(made), command, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_encode(_loaded(tmp_path / "api")), command, rtol=1e-5, atol=1e-6)
    naive = np.mean([_encode(_tiny_st), _encode(member)], axis=0)  # the mean of the two models' embeddings, written out
    np.testing.assert_allclose(command, naive, rtol=1e-5, atol=1e-6)
    assert "a model given in memory" in (tmp_path / "api" / "README.md").read_text() and capsys.readouterr().out == ""


@pytest.mark.slow  # two translation models loaded four times (~4 s)
def test_paraphrase_gives_the_commands_pairs(tiny_marian, tmp_path, capsys):  # noqa: F811 (the fixture imported above)
    from sentune.data.readers import read_paraphrase_pairs

    source = tmp_path / "in.txt"
    source.write_text("a man plays the guitar\n\nthe dog runs in the park\n")  # a blank line is skipped, as the check said
    options = ["--forward", str(tiny_marian), "--backward", str(tiny_marian), "--beams", "2", "--quiet"]
    assert main(["paraphrase", str(source), str(tmp_path / "cli.tsv"), *options]) == 0
    command = read_paraphrase_pairs(tmp_path / "cli.tsv")
    capsys.readouterr()
    for sentences in (source, ["a man plays the guitar", "the dog runs in the park"]):
        pairs = sentune.paraphrase(sentences, str(tiny_marian), str(tiny_marian), beams=2, out=tmp_path / "api.tsv")
        assert pairs == command and read_paraphrase_pairs(tmp_path / "api.tsv") == command
    assert [a for a, _ in command] == ["a man plays the guitar", "the dog runs in the park"] and capsys.readouterr().out == ""


@pytest.mark.slow  # two pipelines, each evaluating its stage on the STS tasks (~4 s)
def test_pipeline_gives_the_commands_final_model(tiny_model_dir, tiny_st, tiny_data_dir, tmp_path, capsys):
    args = ["pipeline", "whiten", "--model", str(tiny_model_dir), "--data", str(tiny_data_dir), "--fit-on", "tasks:STS-B", "--out", str(tmp_path / "cli")]
    assert main([*args, "--set", "whiten:n_components=8"]) == 0
    capsys.readouterr()
    command = _encode(_loaded(tmp_path / "cli" / "whiten" / "model"))
    final = sentune.pipeline(["whiten"], tiny_st, fit_on="tasks:STS-B", overrides={"whiten": {"n_components": 8}}, data=tiny_data_dir, out=tmp_path / "api")
    np.testing.assert_allclose(_encode(final), command, rtol=1e-4, atol=1e-5)
    record = json.loads((tmp_path / "api" / "pipeline-whiten.json").read_text())
    assert record["final_model"] == str(tmp_path / "api" / "whiten" / "model") and record["model"] == str(tmp_path / "api" / "input-model")
    assert capsys.readouterr().out == ""


@pytest.mark.slow  # two ONNX exports, each checked against PyTorch (~5 s)
def test_export_gives_the_commands_folder_and_check(tiny_model_dir, tiny_st, tmp_path, capsys):
    from sentune.data.user_data import write_scored_pairs

    rng = np.random.default_rng(0)
    rows = [(SENTENCES[i % len(SENTENCES)], SENTENCES[(i * 3 + 1) % len(SENTENCES)], float(rng.uniform(0, 5))) for i in range(40)]
    write_scored_pairs(tmp_path / "pairs.tsv", rows)
    assert main(["export", str(tiny_model_dir), "--to", str(tmp_path / "cli"), "--check", str(tmp_path / "pairs.tsv")]) == 0
    capsys.readouterr()
    command = json.loads((tmp_path / "cli" / "onnx" / "export_check.json").read_text())
    result = sentune.export(tiny_st, tmp_path / "api", check=rows)  # the model in memory, the pairs as tuples
    assert result.path == tmp_path / "api" and (result.path / "onnx" / "model.onnx").is_file() and result.report is not None
    given = result.report.as_dict()
    assert given["metric"] == command["metric"] and [r["backend"] for r in given["rows"]] == [r["backend"] for r in command["rows"]]
    for mine, theirs in zip(given["rows"], command["rows"], strict=True):
        assert mine["metric"] == pytest.approx(theirs["metric"], abs=1e-3) and mine["cosine_mean"] == pytest.approx(theirs["cosine_mean"], abs=1e-5)
    np.testing.assert_allclose(_encode(_loaded(tmp_path / "api")), _encode(_loaded(tmp_path / "cli")), rtol=1e-5, atol=1e-6)
    assert capsys.readouterr().out == ""


@pytest.mark.slow  # an index built and exported twice (~5 s)
def test_export_index_writes_what_the_command_writes(tiny_model_dir, tmp_path, capsys):
    pytest.importorskip("qdrant_client")
    pytest.importorskip("bm25s")
    from sentune.search.export_qdrant import connect

    documents = [{"_id": f"d{i}", "title": "", "text": sentence} for i, sentence in enumerate(SENTENCES * 3)]
    index = sentune.Index.build(str(tiny_model_dir), documents, tmp_path / "index", fusion="convex:0.4")
    assert main(["export-index", str(tmp_path / "index"), "--to", "qdrant", "--path", str(tmp_path / "cli"), "--collection", "toy", "--quiet"]) == 0
    line = capsys.readouterr().out.strip()
    report = sentune.export_index(index, path=tmp_path / "api", collection="toy")
    untimed = lambda text: re.sub(r" in [0-9.]+ s\b", " in … s", text)  # noqa: E731  # the report's timings differ run to run
    assert untimed(line.replace(str(tmp_path / "cli"), str(tmp_path / "api"))) == untimed(str(report))
    assert report.points == len(documents) and report.dimension == 32 and capsys.readouterr().out == ""
    stored = []
    for folder in ("cli", "api"):
        client = connect(path=str(tmp_path / folder))
        points, _ = client.scroll("toy", limit=100, with_vectors=True)
        stored.append(sorted((p.id, p.payload["doc_id"], tuple(np.round(p.vector["dense"], 5))) for p in points))
        client.close()
    assert stored[0] == stored[1] and len(stored[0]) == len(documents)
