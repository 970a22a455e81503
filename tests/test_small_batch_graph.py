"""A model PyTorch runs, with its exact ONNX graph for a text or two (sentune.core.small_batch_graph): which batches
take the graph, that they get PyTorch's vectors, that a graph giving other vectors is never used, and what `sentune
serve` says about it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from sentune.core.encode import Encoder  # noqa: E402
from sentune.core.runtime import PYTORCH, SMALL_BATCH_TEXTS  # noqa: E402
from sentune.errors import UserError  # noqa: E402
from tests.conftest import SENTENCES  # noqa: E402


def counted(runtime) -> list[int]:
    """The batch sizes the runtime's small-batch graph is called with, from now on."""
    runner, sizes = runtime.small_batch_graph, []
    original = runner.__call__

    class Counting(type(runner)):  # a subclass: __call__ is looked up on the type
        def __call__(self, features, all_layers=False):
            sizes.append(int(features["input_ids"].shape[0]))
            return original(features, all_layers)

    runner.__class__ = Counting
    return sizes


def test_up_to_small_batch_texts_run_on_the_graph_and_larger_batches_on_pytorch_with_the_same_vectors(tiny_st, tiny_model_dir):
    from sentune.core.small_batch_graph import with_small_batch_graph

    plain = Encoder(tiny_st, "model", show_progress=False)
    runtime = with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=True)
    assert runtime.small_batch_graph is not None and runtime.small_batches == "onnx"
    # its threads sleep after a run: spinning, they took the cores of PyTorch's next (larger) batch
    assert runtime.small_batch_graph.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    sizes = counted(runtime)
    encoder = Encoder(tiny_st, "model", show_progress=False, runtime=runtime)
    for count in range(1, SMALL_BATCH_TEXTS + 1):
        np.testing.assert_allclose(encoder.encode(SENTENCES[:count]), plain.encode(SENTENCES[:count]), atol=1e-5)
    assert sizes == list(range(1, SMALL_BATCH_TEXTS + 1))
    np.testing.assert_allclose(encoder.encode(SENTENCES[: SMALL_BATCH_TEXTS + 1]), plain.encode(SENTENCES[: SMALL_BATCH_TEXTS + 1]), atol=1e-6)
    assert sizes == list(range(1, SMALL_BATCH_TEXTS + 1))  # more texts: PyTorch's pass, the graph not called


def test_a_graph_whose_vectors_differ_from_pytorchs_is_never_attached(tiny_st, tiny_model_dir, monkeypatch, caplog):
    from sentune.core.onnx_runtime import OnnxRunner
    from sentune.core.small_batch_graph import EXACT_GRAPH_BOUND, with_small_batch_graph

    original = OnnxRunner.__call__

    def off(self, features, all_layers=False):  # a graph a little off: about ten times the bound on the pooled vector
        out = original(self, features, all_layers)
        out["token_embeddings"] = out["token_embeddings"] + 20 * EXACT_GRAPH_BOUND * out["token_embeddings"].abs().mean()
        return out

    monkeypatch.setattr(OnnxRunner, "__call__", off)
    assert with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=False) is PYTORCH
    assert "small batches run on PyTorch" in caplog.text
    with pytest.raises(UserError, match="--small-batches onnx: the model's ONNX graph gives vectors"):
        with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=True)


def test_without_onnx_runtime_auto_keeps_pytorch_and_onnx_is_refused(tiny_st, tiny_model_dir, monkeypatch):
    import sentune.core.onnx_session as onnx_session
    from sentune.core.small_batch_graph import with_small_batch_graph

    def missing():
        raise UserError("sentune export and the onnx backends need ONNX Runtime")

    monkeypatch.setattr(onnx_session, "onnxruntime", missing)
    assert with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=False) is PYTORCH
    with pytest.raises(UserError, match="ONNX Runtime"):
        with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=True)


@pytest.mark.parametrize("small_batches", ["auto", "torch"])
def test_serve_answers_a_text_or_two_from_the_graph_unless_told_torch_and_says_which(tiny_model_dir, tiny_st, small_batches):
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    settings = ServeSettings(target=str(tiny_model_dir), index=None, model=str(tiny_model_dir), small_batches=small_batches)
    engine = Engine(settings)
    assert (engine.runtime.small_batch_graph is not None) == (small_batches == "auto") and engine.encoder.runtime is engine.runtime
    from sentence_transformers import SentenceTransformer

    plain = SentenceTransformer(str(tiny_model_dir), device="cpu")  # loaded afresh: the shared fixture's copy may have been used
    assert set(vars(engine.model)) == set(vars(plain))  # the graph is the server's runtime's, nothing set on its model
    sizes = counted(engine.runtime) if small_batches == "auto" else []
    expected = Encoder(tiny_st, "model", show_progress=False).encode(SENTENCES[:2])
    with TestClient(create_app(settings, engine)) as client:
        assert client.get("/health").json()["small_batches"] == ("onnx" if small_batches == "auto" else "torch")
        answer = client.post("/v1/embeddings", json={"input": SENTENCES[:2]}).json()
    np.testing.assert_allclose(np.array([d["embedding"] for d in answer["data"]]), expected, atol=1e-5)
    assert sizes == ([2] if small_batches == "auto" else [])
    Encoder(engine.model, "model", show_progress=False).encode(SENTENCES[:2])  # another encoder of the model: PyTorch's
    assert sizes == ([2] if small_batches == "auto" else [])


def test_sentune_serve_refuses_an_unknown_small_batches_choice_in_one_line_before_the_model_loads(capsys):
    from sentune.cli import main
    from sentune.serve.settings import ServeSettings, check_numbers

    with pytest.raises(SystemExit) as stopped:
        main(["serve", "some-model", "--small-batches", "fast"])
    assert stopped.value.code == 2 and "--small-batches" in capsys.readouterr().err
    with pytest.raises(UserError, match="--small-batches fast: choose auto, onnx, torch"):
        check_numbers(ServeSettings(target="m", index=None, model="m", small_batches="fast"))


def test_a_model_whose_own_pooling_reads_several_layers_gets_them_from_the_graph(tiny_st):
    from sentune.core.small_batch_graph import with_small_batch_graph
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "first-last")  # WeightedLayerPooling over the first and last layers, then mean
    plain = Encoder(model, "model", show_progress=False).encode(SENTENCES[:3])
    runtime = with_small_batch_graph(model, PYTORCH, None, required=True)
    sizes = counted(runtime)
    np.testing.assert_allclose(Encoder(model, "model", show_progress=False, runtime=runtime).encode(SENTENCES[:3]), plain, atol=1e-5)
    assert sizes == [3]


def test_a_graph_that_cannot_be_made_leaves_pytorch_under_auto_and_is_refused_under_onnx(tiny_st, tiny_model_dir, monkeypatch, caplog):
    import sentune.core.onnx_runtime as onnx_runtime
    from sentune.core.small_batch_graph import with_small_batch_graph

    def broken(*args, **kwargs):
        raise PermissionError("cache folder not writable")

    monkeypatch.setattr(onnx_runtime, "graph_for", broken)
    assert with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=False) is PYTORCH
    assert "could not be made or run (cache folder not writable)" in caplog.text
    with pytest.raises(UserError, match="--small-batches onnx: the model's ONNX graph could not be made or run"):
        with_small_batch_graph(tiny_st, PYTORCH, str(tiny_model_dir), required=True)


def test_small_batches_onnx_is_refused_where_it_cannot_hold_and_without_onnx_runtime(monkeypatch):
    import importlib.util

    from sentune.serve.settings import ServeSettings, check_libraries, check_numbers, wants_small_batch_graph

    asked = ServeSettings(target="m", index=None, model="m", small_batches="onnx")
    for where in ({"backend": "onnx-int8"}, {"device": "cuda"}):
        with pytest.raises(UserError, match="--small-batches onnx: for --backend torch on the CPU"):
            check_numbers(dataclasses.replace(asked, **where))
    assert not wants_small_batch_graph(dataclasses.replace(asked, small_batches="auto", device="cuda"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(UserError, match="--small-batches onnx needs ONNX Runtime"):
        check_libraries(asked)
    assert not wants_small_batch_graph(dataclasses.replace(asked, small_batches="auto"))


def test_prepare_graph_exports_the_small_batch_graph_once_and_each_worker_reads_it_back(tiny_model_dir, tmp_path, monkeypatch):
    """`sentune serve --workers N` exports the graph in the parent (prepare_graph) so that the workers do not each
    export it: a worker's engine then attaches the cached graph without exporting."""
    import sentune.core.onnx_graph as onnx_graph
    from sentune.core.cache import CACHE_ENV
    from sentune.serve.engine import Engine, prepare_graph
    from sentune.serve.settings import ServeSettings

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    settings = ServeSettings(target=str(tiny_model_dir), index=None, model=str(tiny_model_dir))
    prepare_graph(dataclasses.replace(settings, small_batches="torch"))
    assert not list((tmp_path / "cache").glob("onnx-*/model.onnx"))  # small batches on PyTorch: nothing to export
    prepare_graph(settings)
    assert len(list((tmp_path / "cache").glob("onnx-*/model.onnx"))) == 1

    def exported_again(*args, **kwargs):
        raise AssertionError("a worker exported the graph prepare_graph had made")

    monkeypatch.setattr(onnx_graph, "export_onnx", exported_again)
    assert Engine(settings).runtime.small_batches == "onnx"
