"""POST /admin/reload of `sentune serve`: the server started on a folder (here a symlink, switched as an operator
publishes a rebuilt index) serves the new index without a restart; a folder that does not load is refused with its
reason while the previous index goes on serving; the route needs the key like every route that reads data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

from sentune.cli import main  # noqa: E402

KEY = "reload-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def build_index(model: Path, folder: Path, prefix: str, words: list[str]) -> Path:
    corpus = folder.with_suffix(".jsonl")
    corpus.write_text("".join(json.dumps({"_id": f"{prefix}{i}", "title": "", "text": f"{w} {w} and more about {w}"}) + "\n" for i, w in enumerate(words)))
    assert main(["index", "--model", str(model), "--corpus", str(corpus), "--out", str(folder), "--quiet"]) == 0
    return folder


def publish(link: Path, target: Path) -> None:
    """Point `link` at `target` in one step (a new symlink renamed over the old one)."""
    fresh = link.with_name(link.name + ".new")
    fresh.symlink_to(target)
    os.replace(fresh, link)


def test_a_rebuilt_index_is_swapped_in_without_a_restart(_tiny_st, tmp_path):
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    first = build_index(model, tmp_path / "first", "a", ["guitar", "dog", "market", "river"])
    second = build_index(model, tmp_path / "second", "b", ["guitar", "piano", "violin"])
    live = tmp_path / "live"
    live.symlink_to(first)
    settings = ServeSettings(target=str(live), index=str(live), model=None, api_key=KEY)

    def hits(client) -> list[str]:
        answer = client.post("/search", json={"query": "guitar", "top_k": 3, "system": "bm25"}, headers=AUTH)
        assert answer.status_code == 200, answer.text
        return [hit["id"] for hit in answer.json()["results"][0]["hits"]]

    with TestClient(create_app(settings)) as client:
        assert hits(client)[0] == "a0"
        publish(live, second)
        assert hits(client)[0] == "a0"  # nothing changes until asked
        assert client.post("/admin/reload", json={}).status_code == 401
        swapped = client.post("/admin/reload", json={}, headers=AUTH)
        assert swapped.status_code == 200 and swapped.json()["index"]["documents"] == 3, swapped.text
        assert hits(client)[0] == "b0" and client.get("/health").json()["index"]["documents"] == 3
        broken = tmp_path / "broken"
        broken.mkdir()
        publish(live, broken)
        refused = client.post("/admin/reload", json={}, headers=AUTH)
        assert refused.status_code == 409 and "still served" in refused.json()["error"]["message"]
        assert hits(client)[0] == "b0"  # the previous index goes on serving


def test_a_server_of_a_model_has_no_index_to_reload(_tiny_st, tmp_path):
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    settings = ServeSettings(target=str(model), index=None, model=str(model))
    with TestClient(create_app(settings)) as client:
        refused = client.post("/admin/reload", json={})
        assert refused.status_code == 400 and "no index to reload" in refused.json()["error"]["message"]


@pytest.mark.slow  # a server process of its own
def test_sighup_reloads_a_single_process_server(_tiny_st, tmp_path):
    """`sentune serve` in one process: SIGHUP swaps in the rebuilt index (uvicorn alone would end the process)."""
    import signal
    import time

    import httpx
    from conftest import free_port
    from test_serve import start_server, stop_server

    model = tmp_path / "model"
    _tiny_st.save(str(model))
    live = tmp_path / "live"
    live.symlink_to(build_index(model, tmp_path / "first", "a", ["guitar", "dog"]))
    second = build_index(model, tmp_path / "second", "b", ["guitar", "piano", "violin"])
    port = free_port()
    proc = start_server([str(live), "--quiet"], port)
    try:
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/health", timeout=10).json()["index"]["documents"] == 2
        publish(live, second)
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 60
        while httpx.get(f"{url}/health", timeout=10).json()["index"]["documents"] != 3:
            assert time.time() < deadline and proc.poll() is None, "not reloaded"
            time.sleep(0.2)
        answer = httpx.post(f"{url}/search", json={"query": "guitar", "top_k": 1, "system": "bm25"}, timeout=10)
        assert answer.json()["results"][0]["hits"][0]["id"] == "b0"
    finally:
        stop_server(proc)
