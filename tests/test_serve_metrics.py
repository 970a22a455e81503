"""GET /metrics of `sentune serve` (sentune.serve.metrics), read with prometheus-client's own parser and checked against
what the test sent and what the engine computed, counted here by hand."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_serve_admission import Served, TimedEngine

httpx = pytest.importorskip("httpx")
pytest.importorskip("prometheus_client")


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a /metrics page."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = httpx.get(f"{url}/metrics", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(answer.text) for s in family.samples}


def test_metrics_count_requests_by_route_and_status_their_latency_and_the_batches():
    engine = TimedEngine(per_text=0.01)
    with Served(engine, max_batch=4) as served:
        sent = [["a"], ["b", "c"], ["d", "e", "f"], ["g"] * 5]  # the last is split: 4 + 1
        spent = 0.0
        for texts in sent:
            began = time.perf_counter()
            assert served.embed(texts).status_code == 200
            spent += time.perf_counter() - began
        assert httpx.post(f"{served.url}/v1/embeddings", json={"input": []}, timeout=10).status_code == 400
        assert httpx.get(f"{served.url}/nowhere", timeout=10).status_code == 404
        samples = scrape(served.url)

    def value(name: str, **labels) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("sentune_requests_total", route="/v1/embeddings", status="200") == len(sent)
    assert value("sentune_requests_total", route="/v1/embeddings", status="400") == 1
    assert value("sentune_requests_total", route="other", status="404") == 1
    assert value("sentune_request_duration_seconds_count", route="/v1/embeddings", status="200") == len(sent)
    served_seconds = value("sentune_request_duration_seconds_sum", route="/v1/embeddings", status="200")
    assert 0.01 * sum(map(len, sent)) <= served_seconds <= spent  # the engine's time at least; never more than the client saw
    assert value("sentune_request_duration_seconds_bucket", route="/v1/embeddings", status="200", le="+Inf") == len(sent)
    # the batches, as the engine saw them
    assert value("sentune_batch_size_count", batcher="embeddings") == len(engine.batches) == 5
    assert value("sentune_batch_size_sum", batcher="embeddings") == sum(map(len, engine.batches)) == 11
    assert value("sentune_batch_size_bucket", batcher="embeddings", le="4.0") == 5
    assert value("sentune_batch_size_bucket", batcher="embeddings", le="2.0") == sum(len(b) <= 2 for b in engine.batches)
    assert value("sentune_queue_depth", batcher="embeddings") == 0 == value("sentune_queue_depth", batcher="search")


@pytest.mark.slow  # seconds of waiting: in the slow selection, so plain `pytest -q` stays short
def test_the_queue_depth_is_the_texts_waiting():
    engine = TimedEngine(per_text=0.6)
    with Served(engine, max_batch=1) as served, ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(served.embed, ["x", "y"]), pool.submit(served.embed, "z")]  # 1 running, 2 waiting
        time.sleep(0.3)
        samples = scrape(served.url)
        assert all(f.result().status_code == 200 for f in futures)
    assert samples[("sentune_queue_depth", (("batcher", "embeddings"),))] == 2
    assert samples[("sentune_requests_in_flight", ())] == 3  # the two, and the scrape itself
