"""Hybrid fusion against naive implementations of its formulas (sentune.search.fusion), and stemmed BM25."""

from __future__ import annotations

import numpy as np
import pytest

from sentune.search.fusion import Fusion, hybrid_rank, id_order, minmax, reciprocal_rank, top_by_score


def naive_convex_ranking(dense: list[float], lexical: list[float], ids: list[str], alpha: float) -> list[str]:
    def norm(values):
        low, high = min(values), max(values)
        return [0.0 if high == low else (v - low) / (high - low) for v in values]

    fused = [alpha * d + (1 - alpha) * x for d, x in zip(norm(dense), norm(lexical), strict=True)]
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-fused[i], ids[i]))]


def naive_rrf_ranking(dense: list[float], lexical: list[float], ids: list[str], k: int) -> list[str]:
    def ranks(values, matched):
        order = sorted((i for i in range(len(values)) if matched(values[i])), key=lambda i: (-values[i], ids[i]))
        return {i: r + 1 for r, i in enumerate(order)}

    by_dense, by_lexical = ranks(dense, lambda v: True), ranks(lexical, lambda v: v > 0)
    fused = [sum(1 / (k + r[i]) for r in (by_dense, by_lexical) if i in r) for i in range(len(ids))]
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-fused[i], ids[i]))]


def fused_ids(dense, lexical, ids, fusion, depth=None):
    ties = id_order(ids)
    scores = fusion.fuse(np.array([dense], dtype=np.float32), np.array([lexical], dtype=np.float32), ties)
    return [ids[i] for i in top_by_score(scores, ties, depth or len(ids))[0]]


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.85, 1.0])
@pytest.mark.parametrize("seed", range(5))
def test_convex_fusion_equals_the_naive_formula(alpha, seed):
    rng = np.random.default_rng(seed)
    n = 40
    ids = [f"d{rng.integers(1000)}-{i}" for i in range(n)]
    dense = np.round(rng.uniform(-0.2, 0.9, n), 2).tolist()  # rounded: ties in each system
    lexical = np.where(rng.random(n) < 0.5, 0.0, np.round(rng.uniform(0, 12, n), 1)).tolist()
    assert fused_ids(dense, lexical, ids, Fusion("convex", alpha)) == naive_convex_ranking(dense, lexical, ids, alpha)


@pytest.mark.parametrize("seed", range(5))
def test_rrf_equals_the_naive_formula(seed):
    rng = np.random.default_rng(seed)
    n = 30
    ids = [f"doc{i:02d}" for i in rng.permutation(n)]
    dense = np.round(rng.uniform(0, 1, n), 1).tolist()
    lexical = np.where(rng.random(n) < 0.6, 0.0, rng.uniform(0, 5, n)).tolist()
    assert fused_ids(dense, lexical, ids, Fusion("rrf")) == naive_rrf_ranking(dense, lexical, ids, 60)


def test_a_query_with_no_bm25_match_is_ranked_by_the_dense_scores():
    ids = ["c", "a", "b", "d"]
    dense = [0.1, 0.7, 0.4, 0.7]
    assert fused_ids(dense, [0.0] * 4, ids, Fusion("convex", 0.2)) == ["a", "d", "b", "c"]  # the tie at 0.7 by id
    assert fused_ids(dense, [0.0] * 4, ids, Fusion("rrf")) == ["a", "d", "b", "c"]


def test_constant_scores_normalise_to_zero_and_ties_go_by_id():
    assert minmax(np.array([[3.0, 3.0, 3.0], [1.0, 2.0, 3.0]])).tolist() == [[0.0, 0.0, 0.0], [0.0, 0.5, 1.0]]
    ids = ["z", "m", "a"]
    assert fused_ids([0.5, 0.5, 0.5], [2.0, 2.0, 2.0], ids, Fusion("convex", 0.6)) == ["a", "m", "z"]


def test_alpha_one_is_the_dense_ranking_and_zero_the_lexical_one():
    rng = np.random.default_rng(7)
    ids = [f"d{i}" for i in range(25)]
    dense, lexical = rng.normal(size=25).tolist(), rng.uniform(0, 9, 25).tolist()
    by = lambda values: [ids[i] for i in sorted(range(25), key=lambda i: (-values[i], ids[i]))]  # noqa: E731
    assert fused_ids(dense, lexical, ids, Fusion("convex", 1.0)) == by(dense)
    assert fused_ids(dense, lexical, ids, Fusion("convex", 0.0)) == by(lexical)


def test_top_by_score_keeps_every_tie_at_the_cut_and_excludes_the_own_document():
    scores = np.array([[0.5, 0.9, 0.5, 0.5, 0.1]])
    ties = id_order(["e", "d", "c", "b", "a"])
    assert top_by_score(scores, ties, 2) == [[1, 3]]  # of the three tied at 0.5, 'b' (index 3) comes first by id
    assert top_by_score(scores, ties, 2, exclude=[1]) == [[3, 2]]


def test_reciprocal_rank_gives_nothing_to_unmatched_documents():
    out = reciprocal_rank(np.array([[2.0, 0.0, 1.0]]), id_order(["a", "b", "c"]), 60, matched=np.array([[True, False, True]]))
    assert out.tolist() == [[1 / 61, 0.0, 1 / 62]]


def test_hybrid_rank_leaves_the_query_own_document_out_of_ranking_and_normalisation():
    ids = ["q1", "x", "y"]
    docs = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    lexical = np.array([[9.0, 1.0, 3.0]], dtype=np.float32)
    ranked = hybrid_rank(query, docs, lambda rows: lexical[rows], ids, Fusion("convex", 0.5), depth=10, query_ids=["q1"])
    # without q1: dense x 0.8, y 0.0 -> 1, 0; lexical x 1, y 3 -> 0, 1: a tie at 0.5, broken by id
    assert ranked == [[1, 2]]
    ranked = hybrid_rank(query, docs, lambda rows: lexical[rows], ids, Fusion("convex", 0.6), depth=10, query_ids=["q1"])
    assert ranked == [[1, 2]]
    ranked = hybrid_rank(query, docs, lambda rows: lexical[rows], ids, Fusion("convex", 0.4), depth=10, query_ids=["q1"])
    assert ranked == [[2, 1]]


def test_stemmed_bm25_matches_word_forms_and_one_tokenisation_serves_both_sides(tmp_path):
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    texts = ["the dogs were running in parks", "a guitar and a piano", "stock market prices rise"]
    stemmed = LexicalIndex.build(texts)
    plain = LexicalIndex.build(texts, LexicalSettings(stemmer=None))
    assert stemmed.scores(["dog run"])[0].argmax() == 0 and stemmed.scores(["dog run"])[0, 0] > 0
    assert not plain.scores(["dog run"]).any()  # 'dogs' and 'running' are other words unstemmed
    assert not stemmed.scores(["the and of"]).any()  # stop words only: no match, every score 0
    stemmed.save(tmp_path / "bm25")
    assert np.array_equal(LexicalIndex.load(tmp_path / "bm25").scores(["piano prices"]), stemmed.scores(["piano prices"]))


def test_cosines_a_block_of_documents_at_a_time_equal_the_whole_product(monkeypatch):
    """The documents are normalised a block at a time (a memory-mapped index is never copied whole); the cosines are
    the naive formula's, across block edges, and a memory-mapped matrix stays read-only and unchanged."""
    import sentune.tasks.retrieval as retrieval
    from sentune.search.passages import cosines

    rng = np.random.default_rng(4)
    queries, docs = rng.normal(size=(5, 8)).astype(np.float32), rng.normal(size=(23, 8)).astype(np.float32)
    docs[7] = 0.0  # a zero vector: cosine 0, not NaN
    naive = np.array([[q @ d / (np.linalg.norm(q) * max(np.linalg.norm(d), 1e-12)) for d in docs] for q in queries])
    monkeypatch.setattr(retrieval, "BLOCK", 4)
    before = docs.copy()
    found = cosines(queries, docs)
    assert found.shape == (5, 23) and found.dtype == np.float32
    assert found == pytest.approx(naive, abs=1e-6)
    assert np.array_equal(docs, before)
