"""What a library promises its Python callers (issue 81, items 12-16): returned objects own what they need, nothing is
written before the inputs are checked, errors name the Python argument, a trained model keeps its base's Normalize, and
the API reference's landing page shows every public function with its signature."""

from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import sentune

WORDS = "a the man woman dog cat plays runs eats guitar piano park food car street ball kid red blue big small".split()


def _sentence(rng) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8))))


def _documents(n: int = 30) -> list[dict]:
    rng = np.random.default_rng(1)
    return [{"_id": f"d{i}", "title": "", "text": ". ".join(_sentence(rng) for _ in range(2))} for i in range(n)]


def test_an_adapt_results_index_keeps_its_temporary_folder_after_the_result_is_collected(tiny_st):
    """`adapt(out=None).index` outlives the result: the temporary folder stays while the Index is referenced (its model,
    saved into the folder, loads at the first search)."""
    from sentune.api.adapt import AdaptResult

    tmp = tempfile.TemporaryDirectory(prefix="sentune-adapt-")
    sentune.Index.build(tiny_st, _documents(), tmp.name)  # a run's folder as adapt leaves it: index.json, model/
    result = AdaptResult(Path(tmp.name), {}, tmp)
    folder = result.out
    index = result.index
    del result, tmp
    gc.collect()
    assert folder.is_dir()
    assert [hit.id for hit in index.search("a man plays the guitar", top_k=3)]  # the model loads from the folder now
    del index
    gc.collect()
    assert not folder.exists()  # and goes once nothing needs it


@pytest.mark.slow  # an adapt search run on the tiny model (~15 s)
def test_adapt_with_no_out_gives_an_index_that_searches_after_the_result_is_gone(tiny_model_dir):
    rng = np.random.default_rng(3)
    docs = [{"_id": f"d{i}", "title": "", "text": ". ".join(_sentence(rng) for _ in range(3))} for i in range(150)]
    queries = {f"q{i}": " ".join(docs[i]["text"].split()[1:4]) for i in range(110)}
    judged = {q: {f"d{q[1:]}": 1} for q in queries}
    result = sentune.adapt(str(tiny_model_dir), corpus=docs, dev=queries, dev_qrels=judged, methods="whitening", out=None)
    index = result.index
    del result
    gc.collect()
    assert len(index.search(queries["q0"], top_k=3)) == 3


def test_an_open_index_at_interpreter_exit_prints_nothing(tiny_st, tmp_path):
    """An index still referenced while the interpreter tears its modules down (held by a module, as a notebook's
    namespace or a library's cache holds it) closes its documents' file without an 'Exception ignored' line."""
    sentune.Index.build(tiny_st, _documents(), tmp_path / "index")
    script = f"import os, sentune; index = sentune.Index.open({str(tmp_path / 'index')!r}, system='bm25'); index.search('a man', top_k=2); os.kept = index"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_trained_model_keeps_its_base_models_normalize(tiny_st, tiny_data_dir, tmp_path):
    """A base ending in Normalize (all-MiniLM-L6-v2) trained under a method's own pooling (SimCSE: cls) gives a model
    that still ends in Normalize: unit vectors, returned and saved."""
    from conftest import tiny_recipe
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    base = SentenceTransformer(modules=[*tiny_st, Normalize()], device="cpu")
    base.save(str(tmp_path / "base"))
    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tmp_path / "base")
    rng = np.random.default_rng(2)
    sentences = list(dict.fromkeys(_sentence(rng) for _ in range(40)))
    trained = sentune.train(recipe, data=sentences, overrides={"training.max_steps": 2}, out=tmp_path / "run", data_dir=tiny_data_dir)
    saved = SentenceTransformer(str(tmp_path / "run" / "model"), device="cpu")
    for model in (trained, saved):
        assert isinstance(list(model)[-1], Normalize)
        np.testing.assert_allclose(np.linalg.norm(model.encode(sentences[:5]), axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(trained.encode(sentences[:3]), saved.encode(sentences[:3]), atol=1e-6)
