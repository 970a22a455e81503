"""ONNX export and the onnx backends (sentune.export) on the tiny model: the graphs reproduce PyTorch, heads and
multi-layer poolings included; int8 is checked and refused past its limit; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from sentune.cli import main  # noqa: E402
from sentune.core.encode import Encoder  # noqa: E402
from sentune.core.models import load_model, load_model_with_runtime  # noqa: E402
from sentune.core.onnx_runtime import backend_runtime  # noqa: E402
from tests.conftest import SENTENCES, tree_state  # noqa: E402

EXACT = 1e-5  # the bound for fp32 graphs


def _vectors(model, pooling: str = "model", runtime=None) -> np.ndarray:
    return Encoder(model, pooling, show_progress=False, runtime=runtime).encode(SENTENCES)


def _on(name: str, backend: str, pooling: str = "model") -> np.ndarray:
    """The vectors of the model at `name` loaded with `backend`'s runtime."""
    model, runtime = load_model_with_runtime(name, backend=backend)
    return _vectors(model, pooling, runtime)


def _graph(name: str, backend: str):
    return load_model_with_runtime(name, backend=backend)[1].graph


@pytest.fixture(scope="module")
def exported(tiny_model_dir, tiny_data_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "m"
    assert main(["export", str(tiny_model_dir), "--to", str(out), "--quantize", "int8", "--check", "STS-B-dev", "--data", str(tiny_data_dir)]) == 0
    return out


def test_export_writes_the_sentence_transformers_layout_with_its_check(exported):
    from sentence_transformers import SentenceTransformer

    assert (exported / "onnx" / "model.onnx").is_file() and len(list((exported / "onnx").glob("model_qint8_*.onnx"))) == 1
    info = json.loads((exported / "onnx" / "export.json").read_text())
    assert info["inputs"][:2] == ["input_ids", "attention_mask"] and info["outputs"][0] == "last_hidden_state" and len(info["outputs"]) == 1 + 6
    check = json.loads((exported / "onnx" / "export_check.json").read_text())
    assert [r["backend"] for r in check["rows"]] == ["torch", "onnx", "onnx-int8"] and check["check"] == "STS-B-dev"
    fp32 = check["rows"][1]
    assert fp32["cosine_min"] > 1 - EXACT and abs(fp32["change"]) < 1e-3
    assert "## ONNX export (sentune export)" in (exported / "README.md").read_text()
    assert SentenceTransformer(str(exported), device="cpu").encode(["a man"]).shape == (1, 32)  # still a plain model folder


@pytest.mark.parametrize("pooling", ["model", "cls", "mean", "first-last", "layer2-mean"])
def test_onnx_vectors_equal_pytorch(exported, pooling):
    torch_vectors = _vectors(load_model(str(exported)), pooling)
    model, runtime = load_model_with_runtime(str(exported), backend="onnx")
    assert runtime.backend == "onnx" and runtime.graph.path == exported / "onnx" / "model.onnx"  # the folder's own graph
    np.testing.assert_allclose(_vectors(model, pooling, runtime), torch_vectors, atol=EXACT)


def test_int8_backend_runs_its_graph_and_moves_the_vectors_a_little(exported):
    fp32 = _on(str(exported), "onnx")
    model, runtime = load_model_with_runtime(str(exported), backend="onnx-int8")
    assert runtime.graph.path.name.startswith("model_qint8_")
    int8 = _vectors(model, runtime=runtime)
    cosines = (int8 * fp32).sum(1) / np.linalg.norm(int8, axis=1) / np.linalg.norm(fp32, axis=1)
    assert not np.allclose(int8, fp32, atol=EXACT) and cosines.min() > 0.9


@pytest.mark.slow
@pytest.mark.parametrize("head", ["whiten", "flow"])
def test_models_with_whitening_or_flow_heads_export_exactly(head, tiny_model_dir, tiny_data_dir, tmp_path):
    model_dir = tmp_path / head
    options = ["--k", "8"] if head == "whiten" else []
    args = [head, "--model", str(tiny_model_dir), "--pooling", "mean", "--fit-on", "wiki", *options, "--data", str(tiny_data_dir), "--out", str(model_dir)]
    assert main([*args, "--quiet"]) == 0
    out = tmp_path / f"{head}-onnx"
    assert main(["export", str(model_dir), "--to", str(out), "--check", "STS-B-dev", "--data", str(tiny_data_dir)]) == 0
    torch_vectors = _vectors(load_model(str(model_dir)))
    np.testing.assert_allclose(_on(str(out), "onnx"), torch_vectors, atol=EXACT)


def test_a_model_without_a_graph_is_exported_once_into_the_cache(tiny_model_dir, monkeypatch, tmp_path):
    from sentune.core.cache import cache_entries, clear_cache

    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    model, runtime = load_model_with_runtime(str(tiny_model_dir), backend="onnx")
    graph = runtime.graph.path
    assert graph.parent.parent == tmp_path / "cache" and graph.name == "model.onnx"
    np.testing.assert_allclose(_vectors(model, runtime=runtime), _vectors(load_model(str(tiny_model_dir))), atol=EXACT)
    stamp = graph.stat().st_mtime_ns
    assert _graph(str(tiny_model_dir), "onnx").path == graph and graph.stat().st_mtime_ns == stamp  # read back, not redone
    assert [p for p, _, _ in cache_entries()] == [graph.parent]
    assert clear_cache() == [graph.parent] and not graph.parent.exists()


def test_the_same_graph_file_reuses_its_runner_and_a_rewritten_one_does_not(exported):
    import os

    first = _graph(str(exported), "onnx")
    again = backend_runtime(load_model(str(exported)), "onnx", source=str(exported)).graph
    assert again is first  # scoring dev then test: one session, one digest of the file
    graph = exported / "onnx" / "model.onnx"
    stamp = graph.stat()
    os.utime(graph, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000))  # the file rewritten in place
    try:
        assert _graph(str(exported), "onnx") is not first
    finally:
        os.utime(graph, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


def test_a_graph_of_other_weights_is_not_used(exported, tmp_path, caplog):
    """A folder whose weights changed after the export: its onnx/ is stale, the vectors must still be the weights'."""
    import torch

    folder = tmp_path / "changed"
    model = load_model(str(exported))
    with torch.no_grad():
        model[0].auto_model.encoder.layer[0].output.dense.weight.mul_(1.5)
    model.save(str(folder))
    (folder / "onnx").mkdir()
    for name in ("model.onnx", "export.json"):
        (folder / "onnx" / name).write_bytes((exported / "onnx" / name).read_bytes())
    onnx_model, runtime = load_model_with_runtime(str(folder), backend="onnx")
    assert runtime.graph.path.parent != folder / "onnx" and "exported from other weights" in caplog.text
    np.testing.assert_allclose(_vectors(onnx_model, runtime=runtime), _vectors(load_model(str(folder))), atol=EXACT)


def test_corpus_embedding_cache_keys_differ_by_backend(exported):
    from sentune.core.embedding_cache import _texts_key

    keys = {}
    for backend in ("torch", "onnx", "onnx-int8"):
        model, runtime = load_model_with_runtime(str(exported), backend=backend)
        keys[backend] = _texts_key(Encoder(model, "model", runtime=runtime), SENTENCES)
    assert len(set(keys.values())) == 3


def test_adapt_scorer_scores_through_the_graph_and_detaches_it(exported):
    from sentune.data.user_data import read_scored_pairs
    from sentune.tasks.user_pairs import PairScorer

    rows = [("a man plays the guitar", "a woman is playing the piano", 1.0), ("the dog runs in the park", "two kids eat food", 0.0)] * 3
    path = exported.parent / "pairs.tsv"
    path.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))
    scored = read_scored_pairs(path)
    model = load_model(str(exported))
    attributes = set(vars(model))
    torch_scores = PairScorer({"dev": scored}).of_model(model)["dev"]
    scorer = PairScorer({"dev": scored})
    scorer.backend = "onnx"
    np.testing.assert_allclose(scorer.of_model(model)["dev"], torch_scores, atol=EXACT)
    assert set(vars(model)) == attributes  # nothing attached travels on with the model (copies, training)


def test_verify_rejects_a_graph_of_another_model(exported, tiny_model_dir):
    import torch

    from sentune.core.onnx_graph import ExportError, verify

    model = load_model(str(tiny_model_dir))
    with torch.no_grad():
        weight = model[0].auto_model.embeddings.word_embeddings.weight
        weight.add_(0.5 * torch.randn_like(weight))  # not a constant: the embeddings' LayerNorm would remove that
    with pytest.raises(ExportError, match="differ from PyTorch's"):
        verify(model, exported / "onnx" / "model.onnx")


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
def test_an_int8_graph_that_is_not_the_model_is_refused_and_nothing_is_written(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, capsys):
    """The refusal end to end: an int8 graph of other weights stands in for a broken quantization. (Its metric may
    rise on the tiny check set by chance; the cosine to PyTorch refuses it anyway.)"""
    import torch

    from sentune.core.onnx_graph import export_onnx
    from sentune.model_export import command

    other = load_model(str(tiny_model_dir))
    with torch.no_grad():
        for parameter in other[0].auto_model.parameters():
            parameter.copy_(torch.randn_like(parameter))
    monkeypatch.setattr(command, "quantize_int8", lambda source, target, settings: export_onnx(other, target, "other"))
    out = tmp_path / "lossy"
    args = ["export", str(tiny_model_dir), "--to", str(out), "--quantize", "int8", "--check", "STS-B-dev", "--data", str(tiny_data_dir), "--max-loss", "0"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "int8 vectors have a mean cosine of" in err and "nothing written" in err
    assert not out.exists() and not list(tmp_path.glob(".lossy*"))
    assert main([*args, "--force"]) == 0 and (out / "onnx" / "export_check.json").is_file()


def test_refusal_rule_reads_the_int8_row_only():
    from sentune.errors import UserError
    from sentune.model_export.check import CheckReport, CheckRow
    from sentune.model_export.command import ExportOptions, refuse

    report = CheckReport("pairs.tsv", "spearman", 0.5, [CheckRow("torch", None, 80.0), CheckRow("onnx", "a", 79.0, change=-1.0)])
    refuse(report, ExportOptions("m", Path("x")))  # an fp32 change is not int8's to refuse
    report.rows.append(CheckRow("onnx-int8", "b", 79.4, change=-0.6))
    with pytest.raises(UserError, match="int8 loses 0.60 points"):
        refuse(report, ExportOptions("m", Path("x")))
    refuse(report, ExportOptions("m", Path("x"), force=True))
    report.rows[-1].change = -0.5
    refuse(report, ExportOptions("m", Path("x")))  # at the limit: kept
    report.rows[-1].change, report.rows[-1].cosine_mean = +2.0, 0.9
    with pytest.raises(UserError, match="mean cosine of 0.9000"):
        refuse(report, ExportOptions("m", Path("x")))  # a gain by chance does not make other vectors the model's


@pytest.mark.parametrize(
    "args, expected",
    [
        (["export", "/no/such/model", "--to", "{tmp}/o"], "no such folder"),
        (["export", "{empty}", "--to", "{tmp}/o"], "no model weights"),
        (["export", "{model}", "--to", "{tmp}"], "exists and is not empty"),
        (["export", "{model}", "--to", "{tmp}/o", "--check", "nonsense"], "neither a pairs file nor a task"),
        (["export", "{model}", "--to", "{tmp}/o", "--quantize", "int8", "--keep-fp32", "attention"], "unknown attention"),
        (["export", "{model}", "--to", "{tmp}/o", "--keep-fp32", "ffn-output"], "applies to --quantize int8"),
        (["export", "{model}", "--to", "{tmp}/o", "--max-loss", "-1"], "--max-loss -1"),
        (["eval", "--model", "{model}", "--backend", "onnx", "--precision", "bf16", "--tasks", "STS-B"], "is for --backend torch"),
    ],
)
def test_bad_export_input_is_one_line(args, expected, tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    (tmp_path / "keep.txt").write_text("x")
    filled = [a.format(tmp=tmp_path, model=tiny_model_dir, empty=empty) for a in args]
    before = tree_state(tmp_path)
    assert main([*filled, "--data", str(tiny_data_dir)] if filled[0] == "eval" else filled) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err
    assert tree_state(tmp_path) == before


def test_int8_without_any_check_needs_force(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SENTUNE_DATA", raising=False)
    monkeypatch.setattr("sentune.data.catalog.default_data_dir", lambda: tmp_path / "none")
    assert main(["export", str(tiny_model_dir), "--to", str(tmp_path / "o"), "--quantize", "int8"]) == 2
    assert "give --check" in capsys.readouterr().err
    assert main(["export", str(tiny_model_dir), "--to", str(tmp_path / "o"), "--quantize", "int8", "--force"]) == 0
    assert "Not checked" in (tmp_path / "o" / "README.md").read_text()


def test_backend_runtime_refuses_a_gpu_model_and_unknown_backends(tiny_st):
    from sentune.errors import UserError

    with pytest.raises(UserError, match="choose one of torch, onnx, onnx-int8"):
        backend_runtime(tiny_st, "tensorrt")
    with pytest.raises(UserError, match="choose one of torch, onnx, onnx-int8"):
        load_model_with_runtime("no-such-folder-either", backend="tensorrt")  # before anything loads
    tiny_st.to("meta")
    with pytest.raises(UserError, match="runs on the CPU"):
        backend_runtime(tiny_st, "onnx")


# the longest default test (an export of a second family): MPNet and RoBERTa (no token type ids) in the slow selection
# (scripts/test.sh, CI), so plain `pytest -q` stays short; BERT's export is checked exactly in the default selection
@pytest.mark.slow
@pytest.mark.parametrize("family", ["tiny_mpnet_dir", "tiny_roberta_dir"])
def test_families_without_token_type_ids_export_exactly(family, request, tmp_path):
    """MPNet (relative position attention) and a RoBERTa-style model: the graph takes no token type ids and reproduces
    PyTorch for the model's own pooling and a multi-layer one; the int8 graph runs."""
    source = request.getfixturevalue(family)
    out = tmp_path / "m"
    assert main(["export", str(source), "--to", str(out), "--quantize", "int8", "--force"]) == 0
    info = json.loads((out / "onnx" / "export.json").read_text())
    assert info["inputs"] == ["input_ids", "attention_mask"] and len(info["outputs"]) == 1 + 4  # the last layer, then the embeddings and 3 layers
    for pooling in ("model", "first-last"):
        np.testing.assert_allclose(_on(str(out), "onnx", pooling), _vectors(load_model(str(out)), pooling), atol=EXACT, err_msg=pooling)
    assert np.isfinite(_on(str(out), "onnx-int8")).all()
