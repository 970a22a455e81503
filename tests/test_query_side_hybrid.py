"""`hybrid-query-side` (sentune.adaptation.candidates.query_side_hybrid): BM25 fused with the query-side candidate, its
queries by the query route's vectors and its documents by the unchanged model's, each selection query by the fold
model that never trained on it, the weight chosen on them; its saved index ranks as it was scored."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from sentune.data.beir import Document, Query
from sentune.data.readers import Source

HERE = Source("toy", 1)


def _ndcg10(ranked: list[str], relevant: dict[str, int]) -> float:
    """nDCG@10 ×100 by its formula."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return 100 * dcg / ideal


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _minmax(v: np.ndarray) -> np.ndarray:
    return (v - v.min()) / (v.max() - v.min()) if v.max() > v.min() else np.zeros_like(v)


def _naive_ranking(query_vector, document_vectors, bm25_row, ids: list[str], alpha: float, own: str | None = None, depth: int = 100) -> list[str]:
    """The documents by α · minmax(cosine) + (1 − α) · minmax(BM25), ties by id, the query's own document neither
    ranked nor normalised over."""
    keep = [j for j, doc in enumerate(ids) if doc != own]
    dense = _unit(np.asarray(document_vectors, dtype=np.float64))[keep] @ _unit(np.asarray(query_vector, dtype=np.float64))
    fused = alpha * _minmax(dense) + (1 - alpha) * _minmax(np.asarray(bm25_row, dtype=np.float64)[keep])
    return [ids[keep[j]] for j in sorted(range(len(keep)), key=lambda j: (-fused[j], ids[keep[j]]))][:depth]


def _toy(seed: int = 0):
    """Documents of the conftest words, queries of words of theirs (one with a document's id: its own is left out),
    and random vectors for each: queries' and documents' from different tables (two routes)."""
    from conftest import WORDS

    from sentune.adaptation.text_table import EmbeddingTable, TextRows

    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if w.isalpha()]
    corpus = [Document(f"d{i:02d}", " ".join(rng.choice(words, size=8)), HERE) for i in range(30)]
    queries = [Query(f"q{i}", " ".join(rng.choice(corpus[i].text.split(), size=3)), HERE, {corpus[i].id: 1, corpus[i + 1].id: 2}) for i in range(12)]
    queries[0] = replace(queries[0], id=corpus[5].id)  # a Quora-style query: its own document is the corpus's d05
    table = lambda texts: EmbeddingTable(TextRows(list(texts)), rng.normal(size=(len(texts), 6)).astype(np.float32))  # noqa: E731
    return corpus, queries, table([q.text for q in queries]), table([d.text for d in corpus]), table


def _bm25(corpus):
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from sentune.search.lexical import CollectionRanker, LexicalIndex

    index = LexicalIndex.of_documents(corpus)
    return CollectionRanker(index, [d.id for d in corpus]), index


def test_the_fused_ranker_ranks_by_the_min_max_fusion_of_the_query_routes_cosine_and_bm25():
    """Each query's vector from the query table and each document's from the document table (a hybrid of one table
    would look both up in one), ranked against a subset of the corpus (BM25 with the whole collection's statistics),
    as the naive fusion of the two scores ranks them, a block of queries at a time."""
    from sentune.adaptation.candidates.query_side_hybrid import fused_ranker
    from sentune.search.fusion import Fusion

    corpus, queries, query_vectors, document_vectors, _ = _toy()
    lexical, index = _bm25(corpus)
    subset = corpus[:20]
    ids = [d.id for d in subset]
    for alpha in (0.0, 0.35, 1.0):
        ranked = fused_ranker(query_vectors, document_vectors, lexical, Fusion("convex", alpha))(queries, subset)
        words = index.scores([q.text for q in queries])[:, :20]
        for q, row, bm25 in zip(queries, ranked, words, strict=True):
            expected = _naive_ranking(query_vectors.of([q.text])[0], document_vectors.of(d.text for d in subset), bm25, ids, alpha, own=q.id)
            assert [ids[i] for i in row] == expected, (alpha, q.id)
    assert corpus[5].id not in [ids[i] for i in ranked[0]]  # its own document


def test_the_weight_is_chosen_on_each_group_of_queries_by_its_own_vectors_against_the_whole_corpus():
    """choose_alpha's curve: at every α, the mean nDCG@10 of every query ranked against the whole corpus by the naive
    fusion with its own group's vectors (a fold's, out of fold); the α chosen is the curve's best."""
    from sentune.adaptation.candidates.query_side_hybrid import choose_alpha
    from sentune.search.fusion import ALPHAS

    corpus, queries, _, document_vectors, table = _toy(3)
    groups = [(queries[:5], table([q.text for q in queries[:5]])), (queries[5:], table([q.text for q in queries[5:]]))]
    lexical, index = _bm25(corpus)
    fusion, curve = choose_alpha(groups, document_vectors, lexical, corpus)
    ids = [d.id for d in corpus]
    assert list(curve) == list(ALPHAS)
    for alpha in ALPHAS:
        values = []
        for group, vectors in groups:
            words = index.scores([q.text for q in group])
            for q, bm25 in zip(group, words, strict=True):
                values.append(
                    _ndcg10(_naive_ranking(vectors.of([q.text])[0], document_vectors.of(d.text for d in corpus), bm25, ids, alpha, own=q.id), q.relevant)
                )
        assert curve[alpha] == pytest.approx(float(np.mean(values)), abs=1e-6), alpha
    best = max(curve.values())
    assert fusion.kind == "convex" and curve[fusion.alpha] == best
    assert fusion.alpha == min((a for a in ALPHAS if round(curve[a], 9) == round(best, 9)), key=lambda a: abs(a - 0.5))


def test_it_is_planned_with_query_side_and_hybrid_on_search_runs_with_labels():
    from sentune.adaptation.candidates import parse_methods, plan

    def names(methods: str | None, **kwargs) -> list[str]:
        return [c.name for c in plan(parse_methods(methods), "mean", reference=False, **kwargs).all]

    assert "hybrid-query-side" in names(None, search=True)
    assert names(None, search=True).index("hybrid-query-side") > names(None, search=True).index("query-side")  # it runs after its source
    assert "hybrid-query-side" in names("query-side,hybrid", search=True)
    assert "hybrid-query-side" not in names("query-side", search=True) and "hybrid-query-side" not in names("hybrid", search=True)
    assert "hybrid-query-side" not in names(None, search=True, labels=False) and "hybrid-query-side" not in names(None)


@pytest.mark.slow
def test_adapt_fuses_query_side_out_of_fold_and_its_index_searches_as_it_was_scored(tiny_model_dir, tmp_path, monkeypatch):
    """`--methods query-side,hybrid`: hybrid-query-side's selection scores are the naive fusion of BM25 (fitted, the
    whole collection's statistics) and the cosine of each query by the fold model that never trained on it (the
    fold's vectors kept in the store are that model's) with the unchanged model's document vectors, over the pool; its
    confirmation and test scores the refit's over the whole corpus; its α the best of its curve, each value of which is
    the naive fusion's mean over the selection queries (out of fold, whole corpus). Chosen, the run's index is a hybrid
    of the Router model and the unchanged model's document vectors at that α, and Index.open(OUT).search ranks the test
    queries as the candidate scored them."""
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from sentence_transformers import SentenceTransformer
    from test_adapt_retrieval import _toy_beir

    import sentune.adaptation.select as select_module
    from sentune.adaptation.candidates.query_side import QuerySide
    from sentune.adaptation.crossfit import FOLDS, fold_rows
    from sentune.api.index import Index
    from sentune.cli import main
    from sentune.data.beir import read_beir_folder
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    trained: list[tuple[str, set[str], object]] = []  # (folder, the query ids it trained on, the model)
    original_train, original_decide = QuerySide.train, select_module.decide

    def train(self, queries, where, documents, ctx, recipes=None):
        model = original_train(self, queries, where, documents, ctx, recipes)
        trained.append((where.name, {q.id for q in queries}, copy.deepcopy(model)))
        return model

    def decide(*args, **kwargs):  # chosen, so that the run saves its index
        return replace(original_decide(*args, **kwargs), name="hybrid-query-side")

    monkeypatch.setattr(QuerySide, "train", train)
    monkeypatch.setattr(select_module, "decide", decide)
    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "query-side,hybrid"]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    record, source = results["candidates"]["hybrid-query-side"], results["candidates"]["query-side"]
    assert results["choice"]["name"] == "hybrid-query-side"
    alpha = record["fusion"]["alpha"]
    assert record["source"] == "query-side" and record["fusion"] == {"kind": "convex", "alpha": alpha} and record["weight_from"] == "out of fold"
    assert record["dev_indices_trained_on"] == source["dev_indices_trained_on"] and len(record["fold_dev_indices_trained_on"]) == FOLDS
    assert not (out / "candidates" / "query-side" / ".documents-float16.npy").exists()  # the trainings' matrix: removed
    data = read_beir_folder(out / "data" / "dev", "dev")
    queries, corpus, tests = data.queries, data.corpus, read_beir_folder(out / "data" / "test", "test").queries
    pool = read_beir_folder(out / "data" / "dev-select", "select")
    ids, pool_ids = [d.id for d in corpus], [d.id for d in pool.corpus]
    fitted = LexicalSettings(**results["candidates"]["hybrid"]["lexical_fit"]["settings"])
    assert record["lexical"] == fitted.label
    bm25 = LexicalIndex.of_documents(corpus, fitted)
    base = SentenceTransformer(str(tiny_model_dir), device="cpu")
    documents = base.encode([d.text for d in corpus])  # the unchanged model's: the document route
    by_id = dict(zip(ids, documents, strict=True))
    refit = next(model for folder, _, model in trained if folder == "query-side")
    found = np.load(out / "candidates" / "hybrid-query-side" / "scores.npz")
    select = sorted(source["dev_indices_trained_on"])
    units = pool.queries  # the selection queries, split.select's order
    assert [q.id for q in units] == [queries[i].id for i in select] and record["weight_read_queries"] != []
    curve = {a: [] for a in (0.0, alpha, 1.0)}
    for fold in range(FOLDS):
        held = fold_rows(len(units), FOLDS, 0, fold)[1]
        held_ids = {units[i].id for i in held}
        models = [model for folder, seen, model in trained if folder == f"fold-{fold}"]
        assert len(models) == 1 and not held_ids & next(seen for folder, seen, _ in trained if folder == f"fold-{fold}")
        vectors = models[0].encode([units[i].text for i in held])
        np.testing.assert_allclose(np.load(out / "candidates" / "query-side" / f"fold-{fold}" / "held_vectors.npy"), vectors, atol=1e-5)
        assert not np.allclose(vectors, refit.encode([units[i].text for i in held]), atol=1e-4)  # not the refit's
        for row, i in enumerate(held):
            q, words = units[i], bm25.scores([units[i].text])[0]
            ranked = _naive_ranking(vectors[row], [by_id[d] for d in pool_ids], words[[ids.index(d) for d in pool_ids]], pool_ids, alpha, own=q.id)
            assert found["dev"][select[i]] == pytest.approx(_ndcg10(ranked, q.relevant), abs=1e-6), (fold, q.id)
            for a in curve:
                curve[a].append(_ndcg10(_naive_ranking(vectors[row], documents, words, ids, a, own=q.id), q.relevant))
    recorded = dict((a, s) for a, s in record["alpha_curve"])
    for a, values in curve.items():  # the weight's curve: the selection queries out of fold, each against the whole corpus
        assert recorded[a] == pytest.approx(float(np.mean(values)), abs=1e-6), a
    assert recorded[alpha] == max(recorded.values())
    confirm = sorted(set(range(len(queries))) - set(select))
    for i in confirm:  # the confirmation queries: the refit against the whole corpus
        ranked = _naive_ranking(refit.encode([queries[i].text])[0], documents, bm25.scores([queries[i].text])[0], ids, alpha, own=queries[i].id)
        assert found["dev"][i] == pytest.approx(_ndcg10(ranked, queries[i].relevant), abs=1e-6), queries[i].id
    expected = []
    for j, q in enumerate(tests):
        expected.append(_naive_ranking(refit.encode([q.text])[0], documents, bm25.scores([q.text])[0], ids, alpha, depth=10))
        assert found["test"][j] == pytest.approx(_ndcg10(expected[-1], q.relevant), abs=1e-6), q.id
    # the run's index: a hybrid at that α over the unchanged model's vectors, its queries by the Router's query route
    settings = json.loads((out / "index.json").read_text())
    assert settings["system"] == "hybrid" and settings["fusion"] == {"kind": "convex", "alpha": alpha}
    np.testing.assert_allclose(np.load(out / "vectors.npy"), documents, atol=1e-5)
    hits = Index.open(out).search([q.text for q in tests], top_k=10)
    assert [[h.id for h in row] for row in hits] == expected
    # `sentune search OUT` and `sentune serve OUT` rank the same way (one query a request: a server's small batches)
    queries_file, run = tmp_path / "queries.tsv", tmp_path / "run.trec"
    queries_file.write_text("".join(f"{q.id}\t{q.text}\n" for q in tests))
    assert main(["search", str(out), "--queries", str(queries_file), "--run", str(run), "--quiet"]) == 0
    lines = [line.split() for line in run.read_text().splitlines()]
    assert [[line[2] for line in lines if line[0] == q.id] for q in tests] == expected
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    settings = ServeSettings(target=str(out), index=str(out), model=None)
    with TestClient(create_app(settings, Engine(settings))) as client:
        for q, ranked in zip(tests, expected, strict=True):
            answer = client.post("/search", json={"query": q.text, "top_k": 10}).json()
            assert answer["system"] == "hybrid" and [h["id"] for h in answer["results"][0]["hits"]] == ranked, q.id


@pytest.mark.slow
def test_with_train_it_fuses_the_one_model_trained_on_train_for_every_query(tiny_model_dir, tmp_path, monkeypatch):
    """`--train`: query-side trains once, on --train's queries; hybrid-query-side ranks every dev query (the selection
    ones included) by that model fused with BM25, and its weight reads the selection queries by it."""
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from sentence_transformers import SentenceTransformer
    from test_adapt_retrieval import _toy_beir

    from sentune.adaptation.candidates.query_side import QuerySide
    from sentune.cli import main
    from sentune.data.beir import RetrievalSet, read_beir_folder, write_beir_folder
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    dev, test = _toy_beir(tmp_path / "toy", n_docs=180, n_queries=120)
    corpus = read_beir_folder(dev, "dev").corpus
    train_queries = [Query(f"t{i}", " ".join(corpus[i].text.split()[2:5]), HERE, {corpus[i].id: 1}) for i in range(120, 180)]
    train = write_beir_folder(tmp_path / "train", RetrievalSet(train_queries, corpus), "train")
    shipped = {}
    original_ship = QuerySide.ship

    def ship(self, query_model, ctx):
        shipped["query"] = copy.deepcopy(query_model)
        return original_ship(self, query_model, ctx)

    monkeypatch.setattr(QuerySide, "ship", ship)
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out)]
    assert main([*args, "--methods", "query-side,hybrid", "--train", str(train)]) == 0
    results = json.loads((out / "results.json").read_text())["candidates"]
    record = results["hybrid-query-side"]
    assert results["query-side"]["trained_on"] == "--train" and record["trained_on"] == "--train" and record["weight_from"] == "train"
    alpha = record["fusion"]["alpha"]
    data = read_beir_folder(out / "data" / "dev", "dev")
    pool = read_beir_folder(out / "data" / "dev-select", "select")
    ids, pool_ids = [d.id for d in data.corpus], [d.id for d in pool.corpus]
    bm25 = LexicalIndex.of_documents(data.corpus, LexicalSettings(**results["hybrid"]["lexical_fit"]["settings"]))
    documents = dict(zip(ids, SentenceTransformer(str(tiny_model_dir), device="cpu").encode([d.text for d in data.corpus]), strict=True))
    found = np.load(out / "candidates" / "hybrid-query-side" / "scores.npz")["dev"]
    selected = {q.id for q in pool.queries}
    assert record["weight_read_queries"] == [q.id for q in pool.queries]
    for i, q in enumerate(data.queries):  # the selection queries against the pool, the others against the whole corpus, all by the one model
        ranked_ids = pool_ids if q.id in selected else ids
        words = bm25.scores([q.text])[0][[ids.index(d) for d in ranked_ids]]
        vector = shipped["query"].encode([q.text])[0]
        ranked = _naive_ranking(vector, [documents[d] for d in ranked_ids], words, ranked_ids, alpha, own=q.id)
        assert found[i] == pytest.approx(_ndcg10(ranked, q.relevant), abs=1e-6), q.id
