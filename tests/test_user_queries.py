"""Scoring a model on a user's queries (issue 23): per-query nDCG@10 as adapt's unit, the selection pool, the BEIR
folder round trip, and the trainer's dev evaluation on queries."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import WORDS

from sentune.data.beir import Document, Query, RetrievalSet, read_beir_folder, write_beir_folder
from sentune.data.readers import Source
from sentune.tasks import retrieval
from sentune.tasks.user_queries import QueriesEvaluator, QueryScorer, RankedQueries, selection_pool

HERE = Source("test", 1)


def toy_set(seed: int = 0, n_docs: int = 80, n_queries: int = 20) -> RetrievalSet:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 20)))) for _ in range(n_docs)]
    corpus = [Document(f"d{i}", f"{WORDS[i % 9]} {t}" if i % 3 else t, HERE, WORDS[i % 9] if i % 3 else "") for i, t in enumerate(texts)]
    queries = [
        Query(f"q{i}", " ".join(texts[i * 2].split()[:3]), HERE, {f"d{i * 2}": 1, **({f"d{i * 2 + 1}": 2} if i % 4 == 0 else {})}) for i in range(n_queries)
    ]
    return RetrievalSet(queries, corpus)


def test_query_scorer_gives_each_query_its_ndcg(tiny_st):
    data = toy_set()
    values = QueryScorer.whole({"dev": data}).of_model(tiny_st)["dev"]
    query_vectors = tiny_st.encode([q.text for q in data.queries])
    doc_vectors = tiny_st.encode([d.text for d in data.corpus])
    expected = retrieval.query_scores(query_vectors, doc_vectors, data.queries, [d.id for d in data.corpus])["ndcg@10"]
    np.testing.assert_allclose(values, 100 * expected, atol=1e-9)
    assert values.mean() == pytest.approx(retrieval.evaluate_retrieval(data.queries, query_vectors, [d.id for d in data.corpus], doc_vectors)["ndcg@10"])


def test_parts_of_a_split_rank_against_their_own_corpus(tiny_st):
    data = toy_set()
    pool = RetrievalSet(data.queries[:8], [d for d in data.corpus if int(d.id[1:]) < 30])
    rest = RetrievalSet(data.queries[8:], data.corpus)
    positions_pool, positions_rest = np.array([1, 3, 5, 7, 9, 11, 13, 15]), np.setdiff1d(np.arange(20), [1, 3, 5, 7, 9, 11, 13, 15])
    scorer = QueryScorer({"dev": [RankedQueries(pool, positions_pool), RankedQueries(rest, positions_rest)]})
    assert scorer.size("dev") == 20
    values = scorer.of_model(tiny_st)["dev"]
    alone = QueryScorer.whole({"pool": pool, "rest": rest}).of_model(tiny_st)
    np.testing.assert_allclose(values[positions_pool], alone["pool"], atol=1e-9)
    np.testing.assert_allclose(values[positions_rest], alone["rest"], atol=1e-9)
    # every text once: 20 queries (some identical to each other are fine) and 80 documents at most
    assert len(scorer.sentences()) == len(set(scorer.sentences())) <= 100


def test_selection_pool_holds_the_relevant_and_the_unchanged_models_top(tiny_st):
    data = toy_set()
    query_vectors = tiny_st.encode([q.text for q in data.queries])
    doc_vectors = tiny_st.encode([d.text for d in data.corpus])
    pool = selection_pool(data, query_vectors, doc_vectors, depth=5)
    ids = [d.id for d in pool.corpus]
    assert all(doc in ids for q in data.queries for doc in q.relevant)
    top = retrieval.rank(query_vectors, doc_vectors, [d.id for d in data.corpus], depth=5)
    assert {data.corpus[i].id for row in top for i in row} <= set(ids)
    assert ids == [d.id for d in data.corpus if d.id in set(ids)]  # corpus order
    assert len(ids) < len(data.corpus)


def test_a_beir_folder_written_reads_back(tmp_path):
    data = toy_set()
    back = read_beir_folder(write_beir_folder(tmp_path / "set", data, "select"), "select")
    assert [(d.id, d.title, d.text) for d in back.corpus] == [(d.id, d.title, d.text) for d in data.corpus]
    assert [(q.id, q.text, q.relevant) for q in back.queries] == [(q.id, q.text, q.relevant) for q in data.queries]


def test_training_evaluates_and_records_on_queries(tiny_model_dir, tmp_path):
    """A recipe with eval.dev: queries:DIR trains, evaluates nDCG@10 every eval_steps and records per-query values."""
    from sentune.training.recipe import load_recipe
    from sentune.training.runs import train_run

    data = toy_set()
    folder = write_beir_folder(tmp_path / "dev-select", data, "select")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(d.text + "\n" for d in data.corpus))
    recipe = load_recipe(
        "002-simcse",
        [
            f"model={tiny_model_dir}",
            f"train_data=file:{corpus}",
            f"eval.dev=queries:{folder}",
            "eval.tasks=none",
            "training.max_steps=4",
            "training.eval_steps=2",
            "training.batch_size=8",
        ],
    )
    run = tmp_path / "run"
    train_run(recipe, run, data_dir=tmp_path, show_progress=False)
    recorded = sorted((run / "dev_cosines").glob("step-*.npy"))
    assert [p.name for p in recorded] == ["step-2.npy", "step-4.npy"]
    values = np.load(recorded[-1])
    assert values.shape == (20,) and 0 <= values.min() and values.max() <= 100
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    scored = [line for line in lines if any("ndcg@10" in key for key in line)]
    assert scored, lines[-3:]
    assert QueriesEvaluator(folder).metric == "ndcg@10"


def test_bm25_ranks_by_shared_words_and_never_returns_the_query_itself():
    pytest.importorskip("bm25s")
    from sentune.search.lexical import CollectionRanker, LexicalIndex

    corpus = [Document("a", "the dog runs in the park", HERE), Document("b", "a guitar and a piano", HERE), Document("c", "stock market price rises", HERE)]
    queries = [Query("q1", "guitar", HERE, {"b": 1}), Query("c", "market price", HERE, {"a": 1})]
    bm25_rank = CollectionRanker(LexicalIndex.build([d.text for d in corpus]), [d.id for d in corpus], depth=2)
    ranked = bm25_rank(queries, corpus)
    assert ranked[0][0] == 1  # the one document with the word
    assert 2 not in ranked[1] and len(ranked[1]) == 2  # query 'c' is document 'c': never a result
    values = QueryScorer.whole({"x": RetrievalSet(queries, corpus)}).of_ranker(bm25_rank)["x"]
    assert values[0] == pytest.approx(100.0)
