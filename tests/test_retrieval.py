"""Retrieval: the BEIR readers' errors, the ranking, the metrics against a naive per-query
implementation, and the whole evaluation against sentence-transformers' InformationRetrievalEvaluator."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from sentune.core.metrics import ranking_metrics
from sentune.data import beir
from sentune.data.beir import Document, Query, read_beir_folder
from sentune.data.readers import DataError, Source
from sentune.tasks import retrieval

HERE = Source("test", 1)

RANKING = [m.name for m in ranking_metrics()]


def write_beir(folder, docs, queries, qrels, *, header=True):
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    rows = (["query-id\tcorpus-id\tscore"] if header else []) + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / "test.tsv").write_text("\r\n".join(rows) + "\r\n")
    return folder


TOY_DOCS = [
    {"_id": "d1", "title": "guitar", "text": "a man plays the guitar"},
    {"_id": "d2", "title": "", "text": "a woman plays the piano"},
    {"_id": "d3", "text": "the dog runs in the park"},
    {"_id": "d4", "title": "market", "text": "stock market price rises"},
    {"_id": "d5", "title": "cat", "text": "a small cat sits on the car"},
]
TOY_QUERIES = [
    {"_id": "q1", "text": "who plays guitar"},
    {"_id": "q2", "text": "dog in the park"},
    {"_id": "q3", "text": "price of the stock"},
    {"_id": "q4", "text": "red car"},
]
TOY_QRELS = [("q1", "d1", 1), ("q2", "d3", 1), ("q2", "d5", 1), ("q3", "d4", 1), ("q4", "d2", 0)]


def test_beir_folder_reads_documents_queries_and_judgements(tmp_path):
    data = read_beir_folder(write_beir(tmp_path, TOY_DOCS, TOY_QUERIES, TOY_QRELS))
    assert [d.text for d in data.corpus][:3] == ["guitar a man plays the guitar", "a woman plays the piano", "the dog runs in the park"]
    # q4 has only a grade-0 judgement: not evaluated, as BEIR and InformationRetrievalEvaluator do
    assert [(q.id, q.relevant) for q in data.queries] == [("q1", {"d1": 1}), ("q2", {"d3": 1, "d5": 1}), ("q3", {"d4": 1})]
    assert data.subset(["q3"]).queries[0].id == "q3"


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        (lambda d, q, r: d.__setitem__(1, "{not json"), "corpus.jsonl:2", "not a JSON object"),
        (lambda d, q, r: d.__setitem__(2, json.dumps({"_id": "d3", "title": "x"})), "corpus.jsonl:3", "no `text` field"),
        (lambda d, q, r: d.__setitem__(3, json.dumps({"_id": "d1", "text": "again"})), "corpus.jsonl:4", "document id 'd1' already used at line 1"),
        (lambda d, q, r: q.__setitem__(2, json.dumps({"_id": "q1", "text": "again"})), "queries.jsonl:3", "query id 'q1' already used at line 1"),
        (lambda d, q, r: r.__setitem__(2, "q9\td1\t1"), "test.tsv:3", "query 'q9' is not in the queries file"),
        (lambda d, q, r: r.__setitem__(2, "q2\td9\t1"), "test.tsv:3", "document 'd9' is not in the corpus"),
        (lambda d, q, r: r.__setitem__(2, "q2\td3\tone"), "test.tsv:3", "score 'one' is not an integer"),
        (lambda d, q, r: r.__setitem__(slice(1, None), ["q1\td1\t0"]), "test.tsv", "no query has a relevant document"),
    ],
)
def test_bad_retrieval_files_name_file_and_line(tmp_path, change, where, message):
    write_beir(tmp_path, TOY_DOCS, TOY_QUERIES, TOY_QRELS)
    files = {name: (tmp_path / name).read_text().splitlines() for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")}
    change(files["corpus.jsonl"], files["queries.jsonl"], files["qrels/test.tsv"])
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as caught:
        read_beir_folder(tmp_path)
    assert where in str(caught.value) and message in str(caught.value), str(caught.value)


def test_queries_from_a_tsv_file(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("q1\twho plays guitar\nq2\tdog\n")
    assert [(q.id, q.text) for q in beir.read_queries(path)] == [("q1", "who plays guitar"), ("q2", "dog")]
    path.write_text("q1 who plays guitar\n")
    with pytest.raises(DataError, match=r"q.tsv:1: malformed row"):
        beir.read_queries(path)


def naive_metrics(ranked: list[str], relevant: dict[str, int]) -> dict[str, float]:
    """The formulas written out for one query, straight from their definitions."""
    dcg = sum(relevant.get(doc, 0) / math.log2(position + 1) for position, doc in enumerate(ranked[:10], start=1))
    ideal = sorted(relevant.values(), reverse=True)
    idcg = sum(g / math.log2(position + 1) for position, g in enumerate(ideal[:10], start=1))
    reciprocal = 0.0
    for position, doc in enumerate(ranked[:10], start=1):
        if doc in relevant:
            reciprocal = 1 / position
            break
    found, precisions = 0, []
    for position, doc in enumerate(ranked[:100], start=1):
        if doc in relevant:
            found += 1
            precisions.append(found / position)
    return {
        "ndcg@10": dcg / idcg,
        "mrr@10": reciprocal,
        "recall@10": len([d for d in ranked[:10] if d in relevant]) / len(relevant),
        "recall@100": len([d for d in ranked[:100] if d in relevant]) / len(relevant),
        "map@100": sum(precisions) / min(100, len(relevant)),
    }


def test_metrics_equal_the_naive_formulas_per_query():
    rng = np.random.default_rng(0)
    ids = [f"d{i}" for i in range(300)]
    queries, rankings = [], []
    for number in range(40):
        relevant = {ids[i]: int(rng.integers(1, 4)) for i in rng.choice(300, size=int(rng.integers(1, 15)), replace=False)}
        queries.append(Query(f"q{number}", "text", HERE, relevant))
        rankings.append([ids[i] for i in rng.permutation(300)[:150]])
    got = retrieval.per_query_metrics(rankings, queries)
    for row, (ranked, query) in enumerate(zip(rankings, queries, strict=True)):
        for name, value in naive_metrics(ranked, query.relevant).items():
            assert got[name][row] == pytest.approx(value, abs=1e-12), (name, row)
    assert set(got) == set(RANKING)


def test_rank_is_an_exact_sort_with_ties_by_id_whatever_the_block(monkeypatch):
    rng = np.random.default_rng(1)
    # coarse values: many exact ties, including at the cut
    docs = rng.integers(-2, 3, size=(230, 4)).astype(np.float32)
    docs[np.all(docs == 0, axis=1)] = 1.0
    queries = rng.normal(size=(7, 4)).astype(np.float32)
    ids = [f"id{(i * 37) % 230:03d}" for i in range(230)]
    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    expected = [np.lexsort((np.array(ids), -(unit @ (q / np.linalg.norm(q))).astype(np.float32)))[:20].tolist() for q in queries]
    for block in (230, 50, 7):
        monkeypatch.setattr(retrieval, "BLOCK", block)
        assert retrieval.rank(queries, docs, ids, depth=20) == expected, block


def test_skip_same_id_drops_the_query_itself():
    vectors = np.eye(3, dtype=np.float32) + 0.1
    ids = ["a", "b", "c"]
    assert retrieval.rank(vectors, vectors, ids, depth=2)[0][0] == 0
    ranked = retrieval.rank(vectors, vectors, ids, depth=2, query_ids=ids, skip_same_id=True)
    assert all(i not in row for i, row in enumerate(ranked)) and all(len(row) == 2 for row in ranked)


def _st_evaluator_ndcg(model, data) -> dict:
    scores = retrieval.reference_evaluator(data.queries, data.corpus)(model)
    return {name: scores[f"cosine_{name}"] for name in RANKING}


def test_equals_information_retrieval_evaluator_on_the_tiny_model(tiny_st, tmp_path):
    rng = np.random.default_rng(2)
    from conftest import WORDS

    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for _ in range(160)]
    docs = [{"_id": f"doc{i}", "title": "", "text": t} for i, t in enumerate(texts)]
    queries = [{"_id": f"q{i}", "text": " ".join(texts[i * 4].split()[:3])} for i in range(30)]
    qrels = [(f"q{i}", f"doc{i * 4}", 1) for i in range(30)] + [(f"q{i}", f"doc{i * 4 + 1}", 1) for i in range(0, 30, 3)]
    data = read_beir_folder(write_beir(tmp_path, docs, queries, qrels))
    expected = _st_evaluator_ndcg(tiny_st, data)
    query_vectors = tiny_st.encode([q.text for q in data.queries], convert_to_numpy=True)
    doc_vectors = tiny_st.encode([d.text for d in data.corpus], convert_to_numpy=True)
    got = retrieval.evaluate_retrieval(data.queries, query_vectors, [d.id for d in data.corpus], doc_vectors)
    assert 0 < got["ndcg@10"] < 100
    for name, value in expected.items():
        assert got[name] / 100 == pytest.approx(value, abs=1e-6), name


def test_documents_carry_title_and_text():
    doc = Document("1", "title body", HERE, "title")
    assert beir.RetrievalSet([Query("q", "x", HERE, {"1": 1})], [doc]).examples()["corpus"][0].text == "title body"


def _toy_data_dir(tmp_path):
    """A data directory whose retrieval/scifact holds a toy BEIR set (loaded as catalogued: conftest)."""
    from conftest import WORDS

    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 40)))) for _ in range(120)]
    docs = [{"_id": str(1000 + i), "title": f"title {WORDS[i % len(WORDS)]}", "text": t} for i, t in enumerate(texts)]
    queries = [{"_id": str(i), "text": " ".join(texts[i * 3].split()[:4])} for i in range(25)]
    qrels = [(str(i), str(1000 + i * 3), 1) for i in range(25)]
    folder = tmp_path / "data" / "retrieval" / "scifact"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\r\n" + "".join(f"{q}\t{d}\t{s}\r\n" for q, d, s in qrels))
    return tmp_path / "data"


def test_catalog_task_scores_like_the_evaluator_and_reads_its_corpus_from_the_cache(tiny_st, tmp_path, monkeypatch):
    from sentune.core.encode import Encoder
    from sentune.data.catalog import load_task, select_tasks
    from sentune.tasks.evaluate import evaluate

    data_dir = _toy_data_dir(tmp_path)
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    (spec,) = select_tasks("retrieval")
    assert spec.name == "scifact-train" and spec.kind == "retrieval"
    encoded: list[int] = []
    real = Encoder.encode_many
    monkeypatch.setattr(Encoder, "encode_many", lambda self, texts: encoded.append(len(texts)) or real(self, texts))
    first = evaluate(tiny_st, [spec], data_dir, show_progress=False)
    second = evaluate(tiny_st, [spec], data_dir, show_progress=False)
    assert encoded == [25, 120, 25]  # queries, corpus; then the queries alone: the corpus came from the cache
    assert all(first["runs"]["model"]["tasks"][spec.name][m] == second["runs"]["model"]["tasks"][spec.name][m] for m in RANKING)
    data = beir.RetrievalSet(**load_task(spec, data_dir))
    expected = _st_evaluator_ndcg(tiny_st, data)
    result = first["runs"]["model"]["tasks"][spec.name]
    for name in RANKING:
        assert result[name] / 100 == pytest.approx(expected[name], abs=1e-6), name
    assert first["runs"]["model"]["summary"]["avg_ndcg@10"] == result["ndcg@10"]
    assert len(list((tmp_path / "cache").glob("embeddings-*.npy"))) == 2  # the vectors and the truncation record
    # another model (one weight changed) must not read this model's vectors
    import torch

    with torch.no_grad():
        next(tiny_st.parameters())[0, 0] += 1.0
    evaluate(tiny_st, [spec], data_dir, show_progress=False)
    assert encoded[-2:] == [25, 120]


def test_eval_command_prints_the_retrieval_table(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from sentune.cli import main

    data_dir = _toy_data_dir(tmp_path)
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "scifact-train", "--data", str(data_dir), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "| run | task | nDCG@10 | MRR@10 | R@10 | R@100 | MAP@100 | queries | documents |" in out
    saved = json.loads((tmp_path / "run" / "results.json").read_text())["runs"]["model"]["tasks"]["scifact-train"]
    assert saved["n_queries"] == 25 and saved["n_documents"] == 120 and f"| {saved['ndcg@10']:.2f} |" in out


def test_a_new_metric_is_one_record(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """A toy ranking metric added to sentune.core.metrics.METRICS alone is computed for every query, saved, and shown
    in the eval table: evaluation, results and tables read the records, never a list of their own."""
    from sentune.cli import main
    from sentune.core.metrics import METRICS, Metric

    def precision_at_5(ranked, relevant):
        return sum(doc in relevant for doc in ranked[:5]) / 5

    monkeypatch.setitem(METRICS, "precision@5", Metric("precision@5", "P@5 ×100", "P@5", per_query=precision_at_5))
    data_dir = _toy_data_dir(tmp_path)
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "scifact-train", "--data", str(data_dir), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "run" / "results.json").read_text())["runs"]["model"]["tasks"]["scifact-train"]
    assert "| MAP@100 | P@5 | queries |" in out and f"| {saved['precision@5']:.2f} |" in out
    assert 0 <= saved["precision@5"] <= 100


SHARED = Path(os.environ.get("SENTUNE_DATA", "/nonexistent")) / "retrieval" / "scifact"


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared SciFact data is not here (SENTUNE_DATA)")
def test_scifact_train_on_the_shared_data_equals_the_evaluator(tiny_st, tmp_path, monkeypatch, checked_data):
    """The real 809 queries and 5,183 abstracts (the tiny model keeps it fast; the default model: benchmarks/speed/retrieval_eval.py)."""
    from sentune.data.catalog import load_task, select_tasks
    from sentune.tasks.evaluate import evaluate

    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    (spec,) = select_tasks("scifact-train")
    data_dir = SHARED.parent.parent
    result = evaluate(tiny_st, [spec], data_dir, show_progress=False)["runs"]["model"]["tasks"][spec.name]
    assert (result["n_queries"], result["n_documents"]) == (809, 5183)
    expected = _st_evaluator_ndcg(tiny_st, beir.RetrievalSet(**load_task(spec, data_dir)))
    for name in RANKING:
        assert result[name] / 100 == pytest.approx(expected[name], abs=1e-6), name


def test_query_level_confirmation_swaps_the_raw_values_and_matches_the_exact_test():
    """nDCG@10 is a mean over queries: the permutation test swaps each query's two values as they are; with 10 queries
    every one of the 2^10 swap patterns can be enumerated, which the sampled p-value must approach."""
    import itertools

    from sentune.core.metrics import METRICS
    from sentune.tasks.bootstrap import paired_bootstrap, resamples
    from sentune.tasks.permutation import paired_permutation_test

    rng = np.random.default_rng(4)
    baseline = rng.uniform(0, 100, size=10)
    candidate = baseline + rng.normal(3, 6, size=10)
    gold = np.zeros(10)
    observed = candidate.mean() - baseline.mean()
    exact = np.mean(
        [np.mean(np.where(s, baseline, candidate) - np.where(s, candidate, baseline)) >= observed - 1e-9 for s in itertools.product([0, 1], repeat=10)]
    )
    found = paired_permutation_test(gold, candidate, baseline, "ndcg@10", count=20000, seed=1)
    assert found.candidate == pytest.approx(candidate.mean()) and found.baseline == pytest.approx(baseline.mean())
    assert found.p_value == pytest.approx(exact, abs=0.01)
    assert METRICS["ndcg@10"].score(gold, candidate) == pytest.approx(candidate.mean())
    comparison = paired_bootstrap(gold, candidate, baseline, "ndcg@10", resamples(10, seed=0))
    assert comparison.difference_low < observed < comparison.difference_high


def test_documents_become_passages_of_whole_sentences():
    from sentune.data.passages import passages, sentences

    assert sentences("First one. Second one? Third (x). e.g. not cut. 4 more") == ["First one.", "Second one?", "Third (x). e.g. not cut.", "4 more"]
    words = lambda n, w: " ".join([w] * (n - 1)) + " end."  # noqa: E731
    document = " ".join([words(30, "A"), words(30, "B"), words(10, "C"), words(200, "D")])
    found = passages([document, document, "Short one."], max_words=64)
    # 30 + 30 words fit; the third sentence starts a new passage; an over-long sentence is alone and cut at 2 x 64 words
    assert [len(p.split()) for p in found] == [60, 10, 128, 2]
    assert found[0].startswith("A A") and found[1].startswith("C") and found[2].startswith("D")  # the repeated document adds nothing


def test_the_faiss_path_ranks_exactly_as_numpy(monkeypatch):
    pytest.importorskip("faiss")
    rng = np.random.default_rng(5)
    docs, queries = rng.normal(size=(3000, 16)).astype(np.float32), rng.normal(size=(40, 16)).astype(np.float32)
    docs[7] = docs[8]  # a tie: ranked by id in both
    ids = [f"doc{(i * 7919) % 3000:05d}" for i in range(3000)]
    monkeypatch.setattr(retrieval, "FAISS_FROM_PAIRS", float("inf"))
    expected = retrieval.rank(queries, docs, ids, depth=100)
    monkeypatch.setattr(retrieval, "FAISS_FROM_PAIRS", 0)
    calls = []
    real = retrieval._rank_faiss
    monkeypatch.setattr(retrieval, "_rank_faiss", lambda *a: calls.append(1) or real(*a))
    assert retrieval.rank(queries, docs, ids, depth=100) == expected and calls == [1]
