"""Pseudo-relevance feedback (sentune.search.prf): Rocchio and RM3 against their formulas written out apart, on seeded
toys and toys whose answer is known by hand; the `prf` adapt candidate scored, saved as an index that ranks as it was
scored, reopened and served."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from sentune.search.fusion import id_order
from sentune.search.prf import Feedback, rm3_scores, rocchio

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")


def naive_rocchio(queries, docs, k, alpha, beta):
    out = []
    for q in queries:
        qu = q / math.sqrt(sum(x * x for x in q))
        units = [d / math.sqrt(sum(x * x for x in d)) for d in docs]
        top = sorted(range(len(docs)), key=lambda i: -float(qu @ units[i]))[:k]
        moved = alpha * qu + beta * sum(units[i] for i in top) / k
        out.append(moved / math.sqrt(sum(x * x for x in moved)))
    return np.array(out)


def test_rocchio_is_its_formula_on_a_seeded_toy():
    rng = np.random.default_rng(3)
    queries, docs = rng.normal(size=(7, 5)), rng.normal(size=(40, 5))
    feedback = Feedback(rocchio_docs=4, alpha=0.8, beta=0.6)
    found = rocchio(queries, docs, id_order([f"d{i:02d}" for i in range(40)]), feedback)
    np.testing.assert_allclose(found, naive_rocchio(queries, docs, 4, 0.8, 0.6), rtol=1e-10)


def test_rocchio_moves_the_query_toward_its_first_document():
    """Known by hand: C is nearer the query than B (0.8 against 0.6); moved 4 parts toward A, its first document,
    the query is nearer B (0.719 against 0.695)."""
    docs = np.array([[1.0, 0.2], [0.6, 0.8], [0.8, -0.6]])  # A, B, C
    query = np.array([[1.0, 0.0]])
    moved = rocchio(query, docs, id_order(["a", "b", "c"]), Feedback(rocchio_docs=1, alpha=1.0, beta=4.0))[0]
    units = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    assert units[2] @ query[0] > units[1] @ query[0]
    assert moved @ units[1] == pytest.approx(0.719, abs=1e-3) and moved @ units[2] == pytest.approx(0.695, abs=1e-3)


def naive_bm25(word, doc, docs, k1, b):
    """Lucene's BM25 of one word in one document (tokens), the collection `docs`."""
    df = sum(word in d for d in docs)
    if not df or word not in doc:
        return 0.0
    mean = sum(len(d) for d in docs) / len(docs)
    tf = doc.count(word)
    return math.log(1 + (len(docs) - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * len(doc) / mean))


def naive_rm3(query, docs, fb_docs, fb_terms, lam, k1=1.5, b=0.75):
    """RM3 by its formula: feedback from the first documents by BM25 (score > 0), P(Q|D) their scores normalised,
    P(w|R) ∝ Σ P(Q|D) tf(w, D) / |D| cut to its best words, mixed with the query's own words."""
    first = [sum(naive_bm25(w, d, docs, k1, b) for w in query) for d in docs]
    top = [i for i in sorted(range(len(docs)), key=lambda i: (-first[i], i))[:fb_docs] if first[i] > 0]
    total = sum(first[i] for i in top)
    model: dict[str, float] = {}
    for i in top:
        for w in set(docs[i]):
            model[w] = model.get(w, 0.0) + first[i] / total * docs[i].count(w) / len(docs[i])
    kept = sorted(model, key=lambda w: -model[w])[:fb_terms]
    weights = {w: lam * c / len(query) for w, c in Counter(query).items()}
    for w in kept:
        weights[w] = weights.get(w, 0.0) + (1 - lam) * model[w] / sum(model[v] for v in kept)
    return [sum(weight * naive_bm25(w, d, docs, k1, b) for w, weight in weights.items()) for d in docs]


WORDS = "apple fruit sweet red basket car engine road wheel orchard juice tree".split()


def test_rm3_is_its_formula_on_a_seeded_toy():
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(30)]
    settings = LexicalSettings(stemmer=None)
    lexical = LexicalIndex.build(texts, settings)
    tokens = lexical.tokens(texts)
    queries = ["apple juice", "car road road", "orchard"]
    feedback = Feedback(rm3_docs=5, rm3_terms=4, rm3_original=0.4)
    found = rm3_scores(lexical, queries, lambda rows: [texts[i] for i in rows], id_order([f"d{i:02d}" for i in range(30)]), feedback)
    for row, query in enumerate(lexical.tokens(queries)):
        np.testing.assert_allclose(found[row], naive_rm3(query, tokens, 5, 4, 0.4), rtol=1e-5, atol=1e-6)


def test_rm3_finds_a_document_without_the_query_word_and_with_its_weight_one_is_bm25():
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    texts = ["apple fruit sweet", "apple fruit red", "fruit basket", "car engine"]
    lexical = LexicalIndex.build(texts, LexicalSettings(stemmer=None))
    ties = id_order(["d0", "d1", "d2", "d3"])

    def read(rows):
        return [texts[i] for i in rows]

    plain = lexical.scores(["apple"])[0]
    assert plain[2] == plain[3] == 0  # BM25 alone: the basket of fruit is no match
    expanded = rm3_scores(lexical, ["apple"], read, ties, Feedback(rm3_docs=2, rm3_terms=3, rm3_original=0.5))[0]
    assert expanded[2] > 0 == expanded[3] and min(expanded[0], expanded[1]) > expanded[2]  # "fruit" came from the feedback
    unexpanded = rm3_scores(lexical, ["apple"], read, ties, Feedback(rm3_docs=2, rm3_terms=3, rm3_original=1.0))[0]
    np.testing.assert_allclose(unexpanded, plain, rtol=1e-6)


def test_saved_feedback_reads_back_and_anything_else_is_refused():
    feedback = Feedback(rocchio_docs=5, beta=0.25)
    assert Feedback.from_dict(json.loads(json.dumps(feedback.to_dict()))) == feedback
    for bad in ({"kind": "prf"}, {**feedback.to_dict(), "rm3_docs": 0}, {**feedback.to_dict(), "rm3_original": 2}, {**feedback.to_dict(), "kind": "x"}, None):
        with pytest.raises(ValueError):
            Feedback.from_dict(bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_an_adapt_run_scores_prf_and_its_saved_index_searches_and_serves_as_scored(tiny_model_dir, tmp_path, monkeypatch):
    """`prf` runs with the hybrid; made the choice (whatever the toy's confirmation says), the saved index holds its
    feedback and `sentune search` ranks the test queries to the test score the run recorded; reopened it ranks the
    same, and `sentune serve` answers /search with the same documents."""
    from sentune.data.beir import read_beir_folder

    out, test = run_choosing("prf", str(tiny_model_dir), tmp_path, monkeypatch)
    results = json.loads((out / "results.json").read_text())
    prf = results["candidates"]["prf"]
    queries = read_beir_folder(out / "data" / "dev", "dev").queries
    from sentune.adaptation.decide import split_dev

    split = split_dev(np.zeros(len(queries)))
    assert sorted(prf["weight_read_queries"]) == sorted(queries[i].id for i in split.select)  # its weight read the selection alone
    settings = json.loads((out / "index.json").read_text())
    assert settings["expansion"] == Feedback().to_dict() and settings["fusion"] == prf["fusion"]
    first = searches_and_serves_as_scored(out, test, prf["test"]["score"], tmp_path, monkeypatch)
    from sentune.search.index import SearchIndex

    plain = SearchIndex.open(out)
    plain.settings = {k: v for k, v in plain.settings.items() if k != "expansion"}
    assert first != [[h.doc_id for h in hits] for hits in plain.search(read_beir_folder(test, "test").queries, top=10)]  # the feedback ranks


def run_choosing(name: str, model: str, tmp_path, monkeypatch):
    """An adapt run on the toy (`--methods hybrid`) whose choice is made `name` whatever its confirmation says (what is
    tested is how the chosen system is saved); its folder and the test set's."""
    from test_adapt_retrieval import _toy_beir

    from sentune.adaptation import select as adapt_select
    from sentune.cli import main

    real_select = adapt_select.select

    def choose(*args, **kwargs):
        results = real_select(*args, **kwargs)
        results["choice"]["name"] = name
        return results

    monkeypatch.setattr(adapt_select, "select", choose)  # sentune.adaptation.phases imports it when it runs
    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    assert main(["adapt", "--quiet", "--model", model, "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "hybrid"]) == 0
    return out, test


def searches_and_serves_as_scored(out, test, score, tmp_path, monkeypatch) -> list[list[str]]:
    """`sentune search OUT` ranks the test queries to the test score the run recorded, the index reopened ranks the
    same (and so in blocks of 7 queries), and `sentune serve OUT` answers /search with its documents; the test
    queries' top 10 ids."""
    from test_search import ndcg10, read_trec_run

    from sentune.cli import main
    from sentune.data.beir import read_beir_folder
    from sentune.search.index import SearchIndex

    run = tmp_path / "test.run"
    assert main(["search", str(out), "--queries", str(test / "queries.jsonl"), "--top", "100", "--run", str(run), "--quiet"]) == 0
    ranked = read_trec_run(run)
    test_queries = read_beir_folder(test, "test").queries
    mean = 100 * np.mean([ndcg10([doc for doc, _, _ in ranked.get(q.id, [])], q.relevant) for q in test_queries])
    assert mean == pytest.approx(score, abs=1e-6)
    first = [[h.doc_id for h in hits] for hits in SearchIndex.open(out).search(test_queries, top=10)]
    assert first == [[h.doc_id for h in hits] for hits in SearchIndex.open(out).search(test_queries, top=10)]
    from sentune.search import fusion

    with monkeypatch.context() as patched:
        patched.setattr(fusion, "QUERY_BLOCK", 7)
        assert first == [[h.doc_id for h in hits] for hits in SearchIndex.open(out).search(test_queries, top=10)]

    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    served = ServeSettings(target=str(out), index=str(out), model=None)
    with TestClient(create_app(served, Engine(served))) as client:
        answer = client.post("/search", json={"queries": [q.text for q in test_queries[:3]], "top_k": 10}).json()
    assert answer["system"] == "hybrid" and [[h["id"] for h in r["hits"]] for r in answer["results"]] == first[:3]
    return first
