"""One runtime object (sentune.core.runtime): what computes a model's batches is given to each Encoder, never set on the
model; two encoders of one model with different runtimes coexist, and a copy of the model or its own `encode` is plain
sentence-transformers."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
import torch

from sentune.core.encode import Encoder
from sentune.core.lanes import Lanes
from sentune.core.runtime import PYTORCH, Runtime
from tests.conftest import SENTENCES

EXACT = 1e-5
MANY = [f"{text} number {i}" for i, text in enumerate(SENTENCES * 2)]  # enough texts for two lanes


def plain_vectors(model, texts) -> np.ndarray:
    """What sentence-transformers itself gives, float32 rows in order."""
    return np.asarray(model.encode(texts, convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)


def fingerprint(model) -> tuple[set, dict]:
    """The model's own attributes and weights: what an encoder must leave as it found them."""
    return set(vars(model)), {k: v.clone() for k, v in model.state_dict().items()}


def assert_unchanged(model, before: tuple[set, dict]) -> None:
    names, weights = before
    assert set(vars(model)) == names
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())


@pytest.fixture(scope="module")
def runtimes(_tiny_st, tiny_model_dir) -> dict[str, Runtime]:
    """The tiny model's runtimes, made once: its onnx and int8 graphs, and a server's (lanes and the small-batch graph).
    They serve every copy of the model (`tiny_st`: the same weights)."""
    pytest.importorskip("onnxruntime")
    from sentune.core.onnx_runtime import backend_runtime
    from sentune.core.small_batch_graph import with_small_batch_graph

    made = {backend: backend_runtime(_tiny_st, backend, source=str(tiny_model_dir)) for backend in ("onnx", "onnx-int8")}
    made["served"] = with_small_batch_graph(_tiny_st, Runtime(lanes=Lanes(2, 2)), str(tiny_model_dir), required=True)
    return made


def test_two_encoders_of_one_model_with_different_runtimes_coexist(tiny_st, runtimes):
    before = fingerprint(tiny_st)
    int8, served = runtimes["onnx-int8"], runtimes["served"]
    assert int8.graph is not None and served.small_batch_graph is not None and served.lanes is not None
    torch_encoder = Encoder(tiny_st, "model", show_progress=False, runtime=PYTORCH)
    int8_encoder = Encoder(tiny_st, "model", show_progress=False, runtime=int8)
    served_encoder = Encoder(tiny_st, "model", show_progress=False, runtime=served)
    expected = plain_vectors(tiny_st, MANY)

    first = torch_encoder.encode(MANY)
    quantized = int8_encoder.encode(MANY)
    laned, small = served_encoder.encode(MANY), served_encoder.encode(MANY[:2])  # lanes, then the small-batch graph
    again = torch_encoder.encode(MANY)  # after the others ran on the same model object
    np.testing.assert_allclose(first, expected, atol=EXACT)
    np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(laned, expected, atol=EXACT)
    np.testing.assert_allclose(small, expected[:2], atol=EXACT)
    # the int8 graph's own vectors: near PyTorch's, visibly not them, and its own again on a second call
    cosines = (quantized * first).sum(1) / np.linalg.norm(quantized, axis=1) / np.linalg.norm(first, axis=1)
    assert not np.allclose(quantized, first, atol=EXACT) and cosines.min() > 0.9
    np.testing.assert_array_equal(int8_encoder.encode(MANY), quantized)
    # neither changed the model: its own encode, a copy of it and an encoder given no runtime are plain PyTorch
    assert_unchanged(tiny_st, before)
    np.testing.assert_allclose(plain_vectors(tiny_st, MANY), expected, atol=1e-6)
    np.testing.assert_allclose(Encoder(copy.deepcopy(tiny_st), "model", show_progress=False).encode(MANY), first, atol=1e-6)
    np.testing.assert_array_equal(Encoder(tiny_st, "model", show_progress=False).encode(MANY), first)


def test_loading_with_the_onnx_backend_sets_nothing_on_the_model(tiny_model_dir, runtimes):
    from sentune.core.models import load_model, load_model_with_runtime

    plain = load_model(str(tiny_model_dir), device="cpu")
    model, runtime = load_model_with_runtime(str(tiny_model_dir), backend="onnx")
    assert runtime.backend == "onnx" and runtime.graph.path == runtimes["onnx"].graph.path and model.device.type == "cpu"  # the cached graph
    assert set(vars(model)) == set(vars(plain))  # no runner, no marks: a plain SentenceTransformer
    model, runtime = load_model_with_runtime(str(tiny_model_dir), device="cpu")
    assert runtime == Runtime() and set(vars(model)) == set(vars(plain))


def test_a_search_index_encodes_its_queries_with_the_runtime_it_is_given(tiny_model_dir, runtimes, tmp_path):
    from sentune.cli import main
    from sentune.data.beir import Query
    from sentune.data.text_files import Source
    from sentune.search.index import SearchIndex

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in enumerate(MANY)))
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(tmp_path / "index"), "--quiet"]) == 0
    index = SearchIndex.open(tmp_path / "index", "dense", device="cpu")
    query = [Query("q", SENTENCES[0], Source("test", 1))]
    plain = index.search(query, 3)
    runtime = dataclasses.replace(runtimes["served"], small_batch_graph=copy.copy(runtimes["served"].small_batch_graph))  # counted below
    called = []
    graph = runtime.small_batch_graph
    original = graph.__call__

    class Counting(type(graph)):
        def __call__(self, features, all_layers=False):
            called.append(int(features["input_ids"].shape[0]))
            return original(features, all_layers)

    graph.__class__ = Counting
    index.runtime = runtime
    given = index.search(query, 3)
    assert called == [1] and [h.doc_id for h in given[0]] == [h.doc_id for h in plain[0]]
    assert [h.score for h in given[0]] == pytest.approx([h.score for h in plain[0]], abs=EXACT)


def test_the_embedding_cache_key_is_pytorchs_for_lanes_and_the_small_batch_graph_and_the_graphs_own_for_a_backend(tiny_st, runtimes):
    """A PyTorch runtime keys vectors as an encoder given no runtime does (the documented key: the model's digest, the
    settings and the texts), so what was cached is found; a backend's graph gives other vectors and another key."""
    import hashlib

    from sentune.core.embedding_cache import _texts_key, cached_only, encode_cached, model_digest

    texts = [f"cached text {i}" for i in range(7)]
    digest = hashlib.sha256(model_digest(tiny_st).encode())
    digest.update(json.dumps({"poolings": ["model"], "precision": "fp32", "max_seq_length": tiny_st.max_seq_length}, sort_keys=True).encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    assert _texts_key(Encoder(tiny_st, "model"), texts) == digest.hexdigest()[:24]

    stored, _ = encode_cached(Encoder(tiny_st, "model", show_progress=False), texts)
    served = runtimes["served"]
    for runtime in (PYTORCH, Runtime(lanes=Lanes(2, 2)), served, dataclasses.replace(served, lanes=None)):
        found = cached_only(Encoder(tiny_st, "model", runtime=runtime), texts)
        assert found is not None and np.array_equal(found["model"], stored["model"])
    for backend in ("onnx", "onnx-int8"):
        assert cached_only(Encoder(tiny_st, "model", runtime=runtimes[backend]), texts) is None


def test_a_runtime_refuses_what_cannot_hold_together(tiny_st, runtimes):
    from sentune.errors import UserError

    onnx = runtimes["onnx"]
    with pytest.raises(UserError, match="choose one of torch, onnx, onnx-int8"):
        Runtime("tensorrt")
    with pytest.raises(ValueError, match="needs graph"):
        Runtime("onnx")
    with pytest.raises(ValueError, match="no small-batch graph, lanes or GPUs"):
        dataclasses.replace(onnx, lanes=Lanes(2, 2))
    tiny_st.to("meta")  # a model moved off the CPU after its graph was made: one line, not ONNX Runtime's error
    with pytest.raises(UserError, match="--backend onnx runs on the CPU"):
        Encoder(tiny_st, "model", runtime=onnx)


def test_evaluate_and_encode_score_the_backend_they_are_given(tiny_model_dir, tiny_data_dir, tiny_st, runtimes):
    """The runtime reaches the tasks' encoder: `backend="onnx-int8"` scores the int8 graph's vectors, not PyTorch's."""
    import sentune

    scores = {
        backend: sentune.evaluate(str(tiny_model_dir), "STS-B-dev", data=tiny_data_dir, backend=backend, device="cpu").runs["model"]["tasks"]["STS-B-dev"]
        for backend in ("torch", "onnx-int8")
    }
    assert scores["torch"] != scores["onnx-int8"]
    expected = Encoder(tiny_st, "model", show_progress=False, runtime=runtimes["onnx-int8"]).encode(SENTENCES)
    np.testing.assert_array_equal(sentune.encode(str(tiny_model_dir), SENTENCES, backend="onnx-int8", device="cpu"), expected)
    np.testing.assert_allclose(sentune.encode(tiny_st, SENTENCES, backend="onnx-int8"), expected, atol=1e-6)  # a model in memory too


def test_an_index_build_encodes_its_documents_with_the_runtime_its_model_was_loaded_with(tiny_model_dir, tmp_path, monkeypatch, encoder_runtimes):
    """sentune index / Index.build: the documents' encoder is given the runtime load_model_with_runtime returned
    beside the model (on an unnumbered cuda: every GPU shares the documents), not a plain PyTorch one."""
    import sentune
    import sentune.api.common
    from sentune.core.runtime import Runtime

    loaded = sentune.api.common.load_with_runtime
    marked = Runtime(spread=True)  # on the CPU it changes nothing: only its identity is checked
    monkeypatch.setattr(sentune.api.common, "load_with_runtime", lambda *a, **k: (loaded(*a, **k)[0], marked))
    import sentune.api.index

    monkeypatch.setattr(sentune.api.index, "load_with_runtime", sentune.api.common.load_with_runtime)
    given = encoder_runtimes
    documents = [{"id": f"d{i}", "text": text} for i, text in enumerate(MANY)]
    sentune.Index.build(str(tiny_model_dir), documents, out=tmp_path / "index")
    assert marked in given  # the documents' encoder
