"""A reload and a damaged index cannot hurt a request: searches in flight when the index is swapped are answered by the
index they were checked against (none got the new index's KeyError); a reload to an index of another model or
dimension is refused (409) while the old one answers as before; a damaged document line fails the one request that
reaches it, not the requests batched beside it. The model thread is held (a task on its one thread) so that the
requests are in flight, batched together, when the test acts."""

from __future__ import annotations

import copy
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

from test_serve_load_reload import build_index, publish  # noqa: E402

from sentune.cli import main  # noqa: E402

WORDS = ["guitar", "dog", "market", "river", "piano", "violin", "car", "street", "park", "ball", "food", "news", "price", "kid", "girl", "boy", "cat", "woman"]


def held_model_thread(client):
    """Holds the app's one model thread until the returned event is set: the batches wait behind it."""
    gate = threading.Event()
    client.app.state.service.state.executor.submit(gate.wait, 60)
    return gate


def until(condition, seconds: float = 30.0) -> None:
    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "the condition did not hold in time"
        time.sleep(0.01)


def test_searches_in_flight_during_a_reload_are_answered_by_the_index_they_were_checked_against(_tiny_st, tmp_path):
    """The issue's case: 40 hybrid searches in flight, the served folder switched to an index without a hybrid and
    reloaded: before, the batches ran on the new index (KeyError 'hybrid', 500); now all 40 are answered by the old
    index, and the next hybrid search is refused by the new one (400)."""
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    corpus = tmp_path / "first.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"a{i}", "title": "", "text": f"{w} {w} and more about {w}"}) + "\n" for i, w in enumerate(WORDS[:6])))
    first = tmp_path / "first"
    assert main(["index", "--model", str(model), "--corpus", str(corpus), "--out", str(first), "--quiet", "--fusion", "convex:0.5"]) == 0
    second = build_index(model, tmp_path / "second", "b", WORDS[:3])  # no fusion: no hybrid
    live = tmp_path / "live"
    live.symlink_to(first)
    settings = ServeSettings(target=str(live), index=str(live), model=None, max_queue=100)
    with TestClient(create_app(settings)) as client, ThreadPoolExecutor(40) as pool:
        gate = held_model_thread(client)
        searches = [pool.submit(client.post, "/search", json={"query": WORDS[i % 6], "top_k": 2, "system": "hybrid"}) for i in range(40)]
        until(lambda: client.app.state.service.state.search.pending == 40)  # all 40 checked against the hybrid index, waiting
        publish(live, second)
        reloaded = client.post("/admin/reload", json={})
        assert reloaded.status_code == 200 and reloaded.json()["index"]["systems"] == ["dense", "bm25"], reloaded.text
        gate.set()
        answers = [s.result() for s in searches]
        assert [a.status_code for a in answers] == [200] * 40, [a.text for a in answers if a.status_code != 200][:2]
        assert all(hit["id"].startswith("a") for a in answers for hit in a.json()["results"][0]["hits"])  # the old index's documents
        later = client.post("/search", json={"query": "guitar", "system": "hybrid"})
        assert later.status_code == 400 and "no fusion weight" in later.json()["error"]["message"]
        assert client.post("/search", json={"query": "guitar", "system": "bm25"}).json()["results"][0]["hits"][0]["id"] == "b0"


def other_models(tiny_st, folder: Path) -> tuple[Path, Path]:
    """(the tiny model with other weights, the same dimension; the tiny model with a Dense layer to 8 dimensions)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Dense

    other = copy.deepcopy(tiny_st)
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.add_(0.05)
    other.save(str(folder / "other-weights"))
    smaller = SentenceTransformer(modules=[copy.deepcopy(tiny_st[0]), copy.deepcopy(tiny_st[1]), Dense(32, 8)], device="cpu")
    smaller.save(str(folder / "eight-dimensions"))
    return folder / "other-weights", folder / "eight-dimensions"


def test_a_reload_to_another_model_or_dimension_is_refused_and_the_old_index_goes_on(_tiny_st, tmp_path):
    """The issue's case: /v1/embeddings switched from 384- to 32-dimensional vectors under the same model name after a
    reload. Now an index of another model (its weights, under the same --model-name) or of another dimension is
    refused with 409, and the old index goes on answering, its vectors of its dimension."""
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    other, smaller = other_models(_tiny_st, tmp_path)
    live = tmp_path / "live"
    live.symlink_to(build_index(model, tmp_path / "first", "a", WORDS[:4]))
    settings = ServeSettings(target=str(live), index=str(live), model=None, model_name="served")
    with TestClient(create_app(settings)) as client:
        before = client.post("/v1/embeddings", json={"input": "a dog"}).json()
        assert len(before["data"][0]["embedding"]) == 32
        for name, source, words in (("other", other, "weights"), ("smaller", smaller, "8-dimensional")):
            publish(live, build_index(source, tmp_path / name, "z", WORDS[:5]))
            refused = client.post("/admin/reload", json={})
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert error["code"] == "reload_refused" and words in error["message"] and "still served" in error["message"], error
            answer = client.post("/v1/embeddings", json={"input": "a dog"}).json()
            assert answer["model"] == "served" and answer["data"][0]["embedding"] == before["data"][0]["embedding"]
            assert client.get("/health").json()["index"]["documents"] == 4


def test_a_reload_to_the_same_weights_under_another_served_name_is_refused(_tiny_st, tmp_path):
    """Without --model-name a server names its model by the index's model folder: a rebuild from the same weights in a
    folder of another name would answer /v1/embeddings under another name mid-service, so it is refused (409) too."""
    import shutil

    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    renamed = tmp_path / "same-weights"
    shutil.copytree(model, renamed)
    live = tmp_path / "live"
    live.symlink_to(build_index(model, tmp_path / "first", "a", WORDS[:4]))
    settings = ServeSettings(target=str(live), index=str(live), model=None, model_name=None)
    with TestClient(create_app(settings)) as client:
        before = client.post("/v1/embeddings", json={"input": "a dog"}).json()
        publish(live, build_index(renamed, tmp_path / "renamed", "z", WORDS[:5]))
        refused = client.post("/admin/reload", json={})
        assert refused.status_code == 409, refused.text
        message = refused.json()["error"]["message"]
        assert "would be served as 'same-weights', not 'model'" in message and "--model-name" in message, message
        answer = client.post("/v1/embeddings", json={"input": "a dog"}).json()
        assert answer["model"] == before["model"] == "model"
        assert client.get("/health").json()["index"]["documents"] == 4


def test_a_damaged_document_fails_only_the_request_that_reaches_it(_tiny_st, tmp_path):
    """The issue's case: a bad line in documents.jsonl, 18 searches batched together, one of them reaching it: before,
    the whole batch got 500; now only that one does and the 17 beside it are answered."""
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    index = build_index(model, tmp_path / "index", "d", WORDS)
    lines = (index / "documents.jsonl").read_bytes().split(b"\n")
    bad = next(i for i, line in enumerate(lines) if b'"d0"' in line)
    lines[bad] = b"#" * len(lines[bad])  # the same length: the offsets still find every other line
    (index / "documents.jsonl").write_bytes(b"\n".join(lines))
    settings = ServeSettings(target=str(index), index=str(index), model=None, batch_wait_ms=0)

    def search(word: str):
        return client.post("/search", json={"query": word, "top_k": 1, "system": "bm25"})

    with TestClient(create_app(settings), raise_server_exceptions=False) as client, ThreadPoolExecutor(19) as pool:
        gate = held_model_thread(client)
        first = pool.submit(search, WORDS[-1])  # the batch the thread runs first, alone
        until(lambda: client.app.state.service.state.search.pending == 1)
        searches = {word: pool.submit(search, word) for word in WORDS}  # "guitar" reaches d0, the damaged line
        until(lambda: client.app.state.service.state.search.pending == 19)
        gate.set()
        assert first.result().status_code == 200
        answers = {word: future.result() for word, future in searches.items()}
        assert answers.pop("guitar").status_code == 500
        assert {word: a.status_code for word, a in answers.items()} == dict.fromkeys(answers, 200)
        assert all(a.json()["results"][0]["hits"][0]["id"] == f"d{WORDS.index(w)}" for w, a in answers.items())
        assert client.app.state.service.state.search.requests == 19


@pytest.mark.slow  # a server process of its own
def test_a_live_server_reloaded_under_a_stream_of_searches_fails_none(_tiny_st, tmp_path):
    """`sentune serve` on a symlink, 4 clients searching for the hybrid without pause while the folder is switched to
    an index without one and reloaded: every search is answered by one index or refused by the other (400), none 500."""
    import httpx
    from conftest import free_port
    from test_serve import start_server, stop_server

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    corpus = tmp_path / "first.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"a{i}", "title": "", "text": f"{w} and more about {w}"}) + "\n" for i, w in enumerate(WORDS)))
    first = tmp_path / "first"
    assert main(["index", "--model", str(model), "--corpus", str(corpus), "--out", str(first), "--quiet", "--fusion", "convex:0.5"]) == 0
    second = build_index(model, tmp_path / "second", "b", WORDS[:3])
    live = tmp_path / "live"
    live.symlink_to(first)
    port = free_port()
    proc = start_server([str(live), "--quiet", "--max-queue", "200"], port)
    url = f"http://127.0.0.1:{port}"
    stop = threading.Event()

    def client(number: int) -> list[int]:
        codes = []
        with httpx.Client(timeout=30) as session:
            while not stop.is_set():
                answer = session.post(f"{url}/search", json={"query": WORDS[number], "top_k": 3, "system": "hybrid"})
                codes.append(answer.status_code)
        return codes

    try:
        with ThreadPoolExecutor(4) as pool:
            clients = [pool.submit(client, i) for i in range(4)]
            time.sleep(1.0)
            publish(live, second)
            reloaded = httpx.post(f"{url}/admin/reload", json={}, timeout=60)
            time.sleep(1.0)
            stop.set()
            codes = [code for c in clients for code in c.result()]
        assert reloaded.status_code == 200, reloaded.text
        assert set(codes) <= {200, 400} and codes.count(200) > 4 and codes[-1] == 400, sorted(set(codes))
    finally:
        stop.set()
        stop_server(proc)
