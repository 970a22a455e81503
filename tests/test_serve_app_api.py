"""sentune.serve_app for a Python user: it serves the `sentune.Index` or the SentenceTransformer one holds (not only
paths), works mounted in one's own FastAPI app without the sub-app's lifespan (it starts on the first request), and
its errors name the Python arguments, where `sentune serve`'s name its options (one set of checks for both)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

from test_serve_load_reload import build_index  # noqa: E402

import sentune  # noqa: E402
from sentune.errors import UserError  # noqa: E402


@pytest.fixture(scope="module")
def index_folder(_tiny_st, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-app")
    _tiny_st.save(str(root / "model"))
    return build_index(root / "model", root / "index", "a", ["guitar", "dog", "market", "river"])


def test_serve_app_serves_an_index_object(index_folder):
    from fastapi.testclient import TestClient

    index = sentune.Index.open(index_folder, system="bm25")
    with TestClient(sentune.serve_app(index, system="bm25")) as client:
        answer = client.post("/search", json={"query": "dog", "top_k": 1})
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"][0]["hits"][0]["id"] == index.search("dog", top_k=1)[0].id == "a1"


def test_serve_app_serves_a_model_object_as_it_is(_tiny_st):
    from fastapi.testclient import TestClient

    model = _tiny_st
    before = set(vars(model))
    with TestClient(sentune.serve_app(model, model_name="mine")) as client:
        answer = client.post("/v1/embeddings", json={"input": ["a man plays the guitar", "a dog"]})
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "mine"
        vectors = np.array([row["embedding"] for row in answer.json()["data"]])
        np.testing.assert_allclose(vectors, model.encode(["a man plays the guitar", "a dog"]), atol=1e-5)
        assert client.post("/search", json={"query": "a"}).status_code == 404  # a model: embeddings only
    assert set(vars(model)) == before  # nothing set on the caller's object (lanes, a small-batch graph)


def test_serve_app_mounted_without_its_lifespan_starts_on_its_first_request(index_folder):
    """The issue's case: mounted in a user's app whose lifespan does not run the sub-app's, every request failed with
    a starlette AttributeError 57 frames deep."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    users = FastAPI()
    users.mount("/search-api", sentune.serve_app(index_folder))
    with TestClient(users) as client:
        health = client.get("/search-api/health")
        assert health.status_code == 200 and health.json()["index"]["documents"] == 4, health.text
        answer = client.post("/search-api/search", json={"query": "market", "top_k": 1, "system": "bm25"})
        assert answer.status_code == 200 and answer.json()["results"][0]["hits"][0]["id"] == "a2", answer.text


def test_the_same_checks_name_the_python_argument_or_the_option(index_folder, capsys):
    from sentune.cli import main

    cases = [({"max_batch": 0}, "max_batch=0: at least 1", ["--max-batch", "0"], "--max-batch 0: at least 1")]
    cases += [({"max_body_bytes": 10}, "max_body_bytes=10: at least 1024", ["--max-body-mb", "0.00001"], "--max-body-mb 1e-05: at least 0.001")]
    cases += [({"timeout_s": 0.0}, "timeout_s=0.0: more than 0", ["--timeout-s", "0"], "--timeout-s 0: more than 0")]
    for given, python, options, cli in cases:
        with pytest.raises(UserError) as refused:
            sentune.serve_app(index_folder, **given)
        assert str(refused.value).startswith(python), str(refused.value)
        capsys.readouterr()
        assert main(["serve", str(index_folder), *options]) == 2
        err = capsys.readouterr().err
        assert cli in err and python.split(":")[0] not in err, err
    with pytest.raises(UserError, match="^index_or_model .*nowhere: no such folder"):
        sentune.serve_app(index_folder.parent / "nowhere")
    with pytest.raises(UserError, match="^device='tpu'|^device tpu"):
        sentune.serve_app(index_folder, device="tpu")
    with pytest.raises(UserError, match="index_or_model: a dict"):
        sentune.serve_app({"not": "served"})
    settings = json.loads((index_folder / "index.json").read_text())
    assert settings["model"]  # the index names its model: what serve_app(index) serves with


def test_no_route_reads_the_apps_state():
    """The routes (the reranker's too) are given the Service they answer from: app.state is only written, once, for
    whoever holds the app, so two apps in one process never read each other's."""
    import re
    from pathlib import Path

    import sentune.serve

    reads = []
    for path in Path(sentune.serve.__file__).parent.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"\bapp\.state\.\w+\b(?!\s*=[^=])", code) or "getattr(app.state" in code or "request.app.state" in code:
                reads.append(f"{path.name}:{number}: {line.strip()}")
    assert reads == []
