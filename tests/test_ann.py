"""The approximate dense index (sentune.search.ann) and the candidate-fused hybrid (sentune.search.candidates): exact
answers where the settings make the ANN exhaustive, recall against exact search on a seeded toy, the hybrid against a
naive implementation of its formula, `sentune index --ann` / `sentune search --ann|--exact` end to end on the tiny
model, and bad options refused in one line before any work."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import tree_state
from test_adapt_retrieval import _toy_beir

from sentune.cli import main
from sentune.errors import UserError
from sentune.search.ann import AnnIndex, auto_nlist, auto_refine, build_ann, check_fits, choose_ann, parse_ann, read_ann_settings
from sentune.search.candidates import Candidates, fuse, lexical_candidates
from sentune.search.folder import IndexFolder
from sentune.search.fusion import Fusion, id_order
from sentune.tasks.retrieval import rank

pytest.importorskip("faiss")

DIM = 32


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    points = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, DIM)) / math.sqrt(DIM)
    return points.astype(np.float32)


@pytest.fixture(scope="module")
def toy_vectors(tmp_path_factory):
    """2,000 seeded documents around 40 centres (not unit length: the ANN must normalise), 50 queries near them, and
    an index folder holding only what the ANN reads (vectors.npy and index.json's digests)."""
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((40, DIM))
    docs, queries = clustered(2000, rng, centres) * 3.0, clustered(50, rng, centres)
    folder = tmp_path_factory.mktemp("ann-toy")
    np.save(folder / "vectors.npy", docs)
    settings = {"corpus_sha256": "c" * 64, "model_digest": "m" * 64}
    ids = [f"doc{i:05d}" for i in range(len(docs))]
    return folder, settings, docs, queries, ids


def exact_top(docs, queries, ids, k):
    return rank(queries, docs, ids, depth=k)


def cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def recall(found: list[list[int]], truth: list[list[int]], k: int) -> float:
    return float(np.mean([len(set(f[:k]) & set(t[:k])) / k for f, t in zip(found, truth, strict=True)]))


@pytest.mark.parametrize(
    ("spec", "floor"),
    [
        ("hnsw:m=16,ef_construction=80,ef_search=64", 0.95),
        ("ivfpq:nlist=16,pq=8,nprobe=4,refine=8", 0.95),
    ],
)
def test_ann_recall_against_exact_search_and_exact_scores(toy_vectors, spec, floor):
    folder, settings, docs, queries, ids = toy_vectors
    build_ann(folder, parse_ann(spec), settings)
    ann = AnnIndex.open(folder, settings)
    assert ann is not None and ann.spec.kind == spec.split(":")[0]
    found = ann.nearest(queries, 10, id_order(ids))
    truth = exact_top(docs, queries, ids, 10)
    assert recall([c.rows.tolist() for c in found], truth, 10) >= floor
    for q, c in zip(queries, found, strict=True):  # each document found carries its exact cosine, best first
        assert len(c.rows) == 10 and np.all(np.diff(c.scores) <= 0)
        np.testing.assert_allclose(c.scores, [cosine(q, docs[d]) for d in c.rows], atol=1e-5)


def test_exhaustive_settings_give_the_exact_ranking(toy_vectors):
    """Every list probed and every document re-scored: the ANN's answer is exact search's, order and ties included."""
    folder, settings, docs, queries, ids = toy_vectors
    build_ann(folder, parse_ann("ivfpq:nlist=16,pq=4,nprobe=16,refine=100"), settings)
    ann = AnnIndex.open(folder, settings)
    truth = exact_top(docs, queries, ids, 20)
    assert_same_ranking([c.rows.tolist() for c in ann.nearest(queries, 20, id_order(ids))], truth, queries, docs)
    build_ann(folder, parse_ann("hnsw:ef_search=2000"), settings)
    ann = AnnIndex.open(folder, settings)
    assert_same_ranking([c.rows.tolist() for c in ann.nearest(queries, 20, id_order(ids))], truth, queries, docs)


def assert_same_ranking(found: list[list[int]], truth: list[list[int]], queries, docs) -> None:
    """The same documents in the same order, except where two documents' cosines differ by float32 noise (a sum taken
    in another order): there, either order; most queries have no such near tie and must match exactly."""
    for q, f, t in zip(queries, found, truth, strict=True):
        assert len(f) == len(t)
        np.testing.assert_allclose([cosine(q, docs[d]) for d in f], [cosine(q, docs[d]) for d in t], atol=1e-6)
    assert sum(f == t for f, t in zip(found, truth, strict=True)) >= 0.9 * len(truth)


def test_a_rebuild_with_only_search_settings_changed_keeps_the_index(toy_vectors):
    folder, settings, *_ = toy_vectors
    first = build_ann(folder, parse_ann("hnsw:m=8,ef_search=32"), settings)
    written = (folder / "ann" / "index.faiss").stat().st_mtime_ns
    second = build_ann(folder, parse_ann("hnsw:m=8,ef_search=300,candidates=50"), settings)
    assert (folder / "ann" / "index.faiss").stat().st_mtime_ns == written and second["build_seconds"] == first["build_seconds"]
    assert AnnIndex.open(folder, settings).spec.settings == {"m": 8, "ef_construction": 100, "ef_search": 300, "candidates": 50}
    build_ann(folder, parse_ann("hnsw:m=12"), settings)  # a build setting: built again
    assert AnnIndex.open(folder, settings).spec.settings["m"] == 12


def test_an_ann_of_other_vectors_is_refused(toy_vectors):
    folder, settings, *_ = toy_vectors
    build_ann(folder, parse_ann("hnsw:m=8"), settings)
    with pytest.raises(UserError, match="built from other vectors"):
        AnnIndex.open(folder, settings | {"corpus_sha256": "x" * 64})


def naive_convex(dense: dict[int, float], lexical: dict[int, float], alpha: float, ids: list[str], depth: int):
    """The candidate fusion's formula written out: min-max within each system's candidates, 0 for a candidate the
    system did not return, α on the dense side; ties by id."""

    def normalised(scores: dict[int, float]) -> dict[int, float]:
        if not scores:
            return {}
        low, high = min(scores.values()), max(scores.values())
        return {d: (s - low) / (high - low) if high > low else 0.0 for d, s in scores.items()}

    nd, nl = normalised(dense), normalised(lexical)
    fused = {d: alpha * nd.get(d, 0.0) + (1 - alpha) * nl.get(d, 0.0) for d in set(dense) | set(lexical)}
    return sorted(fused, key=lambda d: (-fused[d], ids[d]))[:depth], fused


def naive_rrf(dense: list[int], lexical: list[int], k: int, ids: list[str], depth: int):
    fused: dict[int, float] = {}
    for ranking in (dense, lexical):
        for position, d in enumerate(ranking, start=1):
            fused[d] = fused.get(d, 0.0) + 1.0 / (k + position)
    return sorted(fused, key=lambda d: (-fused[d], ids[d]))[:depth], fused


def test_candidate_fused_hybrid_equals_its_formula(toy_vectors):
    folder, settings, docs, queries, ids = toy_vectors
    rng = np.random.default_rng(3)
    # BM25-like scores: most documents share no word with a query (0), a few tied, some unique
    bm25 = np.where(rng.random((len(queries), len(docs))) < 0.05, rng.integers(1, 30, (len(queries), len(docs))) / 3.0, 0.0).astype(np.float32)
    bm25[0] = 0.0  # a query with no BM25 match: the dense side alone ranks it
    build_ann(folder, parse_ann("hnsw:m=16,ef_search=64,candidates=30"), settings)
    ann = AnnIndex.open(folder, settings)
    ties = id_order(ids)
    for fusion in (Fusion("convex", 0.3), Fusion("convex", 1.0), Fusion("rrf")):
        ranked, values = ann.rank("hybrid", queries, lambda rows: bm25[list(rows)], fusion, ties, depth=10)
        dense = ann.nearest(queries, 30, ties)
        for row in range(len(queries)):
            d = {int(r): float(s) for r, s in zip(dense[row].rows, dense[row].scores, strict=True)}
            lexical_order = sorted(np.flatnonzero(bm25[row] > 0), key=lambda x: (-bm25[row, x], ids[x]))[:30]
            w = {int(x): float(bm25[row, x]) for x in lexical_order}
            if fusion.kind == "convex":
                expected, fused = naive_convex(d, w, fusion.alpha, ids, 10)
            else:
                expected, fused = naive_rrf(list(d), [int(x) for x in lexical_order], fusion.k, ids, 10)
            assert ranked[row] == expected, (fusion, row)
            np.testing.assert_allclose(values[row], [fused[x] for x in expected], atol=1e-9)
        assert ranked[0] == [c for c in dense[0].rows.tolist()[:10]] or fusion.kind == "rrf"  # no BM25 match: the dense order


def test_fuse_by_hand():
    """Three documents, numbers worked out on paper: dense candidates 0 (0.9), 1 (0.5); BM25 candidates 1 (4), 2 (2);
    α = 0.5: doc 0 = 0.5·1 + 0.5·0 = 0.5, doc 1 = 0.5·0 + 0.5·1 = 0.5, doc 2 = 0; tie 0/1 by id."""
    ties = id_order(["b", "a", "c"])  # doc 1's id sorts first
    rows, values = fuse(Candidates(np.array([0, 1]), np.array([0.9, 0.5])), Candidates(np.array([1, 2]), np.array([4.0, 2.0])), Fusion("convex", 0.5), ties, 3)
    assert rows == [1, 0, 2] and values == [0.5, 0.5, 0.0]
    only = lexical_candidates(np.array([[0.0, 3.0, 3.0, 1.0]]), id_order(["a", "b", "c", "d"]), 2)[0]
    assert only.rows.tolist() == [1, 2] and only.scores.tolist() == [3.0, 3.0]


def test_refine_grows_with_the_collection_and_is_resolved_at_build_unless_given(toy_vectors):
    assert [auto_refine(n) for n in (5183, 100_000, 100_001, 1_000_000, 1_000_001, 5_000_000)] == [10, 10, 50, 50, 100, 100]
    assert check_fits(parse_ann("ivfpq"), 1_000_000, 384).settings["refine"] == 50
    assert check_fits(parse_ann("ivfpq:refine=10"), 5_000_000, 384).settings["refine"] == 10  # given: kept
    folder, settings, docs, *_ = toy_vectors
    built = build_ann(folder, parse_ann("ivfpq:nlist=16,pq=8"), settings)
    assert built["settings"]["refine"] == auto_refine(len(docs)) and read_ann_settings(folder)["settings"]["refine"] == built["settings"]["refine"]
    ann = AnnIndex.open(folder, settings)
    assert ann.with_search_settings("refine=30").spec.settings["refine"] == 30
    assert ann.with_search_settings("refine=0").spec.settings["refine"] == auto_refine(len(docs))


def test_settings_parsed_and_bad_ones_named():
    spec = parse_ann("IVFPQ:nlist=64,nprobe=8")
    assert spec.kind == "ivfpq" and spec.settings["nlist"] == 64 and spec.settings["pq"] == 48 and spec.settings["refine"] == 0  # 0: by size
    assert parse_ann("hnsw").settings == {"m": 32, "ef_construction": 100, "ef_search": 128, "candidates": 100}
    assert auto_nlist(5183) == 128 and auto_nlist(100_000) == 1024 and auto_nlist(5_000_000) == 8192
    assert check_fits(parse_ann("ivfpq:pq=8"), 100_000, 384).settings["nlist"] == 1024
    for text, message in [
        ("flat", "--ann flat: use hnsw or ivfpq"),
        ("hnsw:m=2", "m takes a whole number from 4 to 128"),
        ("hnsw:nprobe=3", "unknown hnsw setting 'nprobe'"),
        ("ivfpq:nlist=abc", "nlist takes a whole number"),
        ("hnsw:m", "m takes a whole number"),
    ]:
        with pytest.raises(UserError, match=message):
            parse_ann(text)
    with pytest.raises(UserError, match="pq=7 must divide the vectors' dimension 384"):
        check_fits(parse_ann("ivfpq:pq=7"), 100_000, 384)
    with pytest.raises(UserError, match="nlist=64 needs 2,496 documents"):
        check_fits(parse_ann("ivfpq:nlist=64"), 150, 384)


@pytest.mark.slow
def test_index_and_search_with_ann_end_to_end(tiny_model_dir, tmp_path, capsys):
    dev, _ = _toy_beir(tmp_path / "toy")
    index = tmp_path / "index"
    base = ["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--out", str(index), "--quiet", "--fusion", "convex:0.5"]
    assert main(base) == 0
    runs = iter(tmp_path / f"run-{i}.txt" for i in range(100))

    def search(*options: str) -> str:
        run = next(runs)
        assert main(["search", str(index), "--queries", str(dev / "queries.jsonl"), "--top", "10", "--run", str(run), "--quiet", *options]) == 0
        return run.read_text()

    exact_dense, exact_hybrid = search("--system", "dense"), search()
    # an ANN added to the finished index; probing every list and re-scoring every document, dense search is exact
    assert main([*base, "--ann", "ivfpq:nlist=2,pq=8,nprobe=2,refine=100"]) == 0
    current = IndexFolder(index).current()  # the ANN is in a new version of the index (sentune.search.folder)
    assert current is not None and current.path != index
    saved = json.loads(current.ann_settings.read_text())
    assert saved["kind"] == "ivfpq" and saved["source"]["rows"] == 150 and current.ann_index.is_file()
    approximate, exact = _scored(search("--system", "dense")), _scored(exact_dense)
    assert approximate.keys() == exact.keys()
    for qid, row in exact.items():  # the same ranking, each position's exact cosine (a near tie may flip by float noise)
        np.testing.assert_allclose([s for _, s in approximate[qid]], [s for _, s in row], atol=2e-6)
    assert sum([d for d, _ in approximate[q]] == [d for d, _ in exact[q]] for q in exact) >= 0.9 * len(exact)
    assert search("--exact") == exact_hybrid
    # the hybrid by default fuses the candidates: with candidates = every document its result is the formula's
    candidate_hybrid = _rows(search("--ann", "candidates=150"))
    from sentune.search.index import SearchIndex

    opened = SearchIndex.open(index)
    assert opened.ann is not None
    queries = [json.loads(line) for line in (dev / "queries.jsonl").read_text().splitlines()]
    vectors = opened.model().encode([q["text"] for q in queries])
    bm25 = opened.lexical().scores([q["text"] for q in queries])
    docs = np.load(current.vectors)
    ids = opened.documents.every_id()
    for row, q in enumerate(queries[:20]):
        dense = {d: cosine(vectors[row], docs[d]) for d in range(len(docs))}
        lexical = {d: float(bm25[row, d]) for d in range(len(docs)) if bm25[row, d] > 0}
        expected, _ = naive_convex(dense, lexical, 0.5, ids, 10)
        assert candidate_hybrid[q["_id"]] == [ids[d] for d in expected], q["_id"]
    capsys.readouterr()
    assert main(["search", str(index), "--query", queries[0]["text"], "--top", "3", "--quiet", "--ann", "candidates=20"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    # BEIR's same-id rule is the exact search's: asked of the approximate index it is refused, not ignored
    assert main(["search", str(index), "--query", "a", "--exclude-same-id", "--quiet"]) == 2
    assert "--exclude-same-id" in capsys.readouterr().err
    assert main(["search", str(index), "--query", "a", "--exclude-same-id", "--exact", "--quiet"]) == 0


def _scored(run_text: str) -> dict[str, list[tuple[str, float]]]:
    rows: dict[str, list[tuple[str, float]]] = {}
    for line in run_text.splitlines():
        qid, _, doc, _, score, _ = line.split()
        rows.setdefault(qid, []).append((doc, float(score)))
    return rows


def _rows(run_text: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in run_text.splitlines():
        qid, _, doc, *_ = line.split()
        rows.setdefault(qid, []).append(doc)
    return rows


def test_bad_ann_options_are_one_line_before_any_work(tiny_model_dir, tmp_path, capsys):
    dev, _ = _toy_beir(tmp_path / "toy")
    plain = tmp_path / "plain"
    corpus = str(dev / "corpus.jsonl")
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", str(plain), "--quiet"]) == 0
    with_ann = tmp_path / "with-ann"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", str(with_ann), "--quiet", "--ann", "hnsw:m=8"]) == 0
    before = tree_state(tmp_path)
    new = str(tmp_path / "new")
    cases = [
        (["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", new, "--ann", "annoy"], "--ann annoy: use hnsw or ivfpq"),
        (["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", new, "--ann", "hnsw:m=1000"], "m takes a whole number from 4 to 128"),
        (["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", new, "--ann", "ivfpq:pq=5"], "pq=5 must divide the vectors' dimension 32"),
        (["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", new, "--ann", "ivfpq:nlist=16"], "nlist=16 needs 624 documents"),
        (["search", str(plain), "--query", "a man", "--ann"], "has no approximate index"),
        (["search", str(with_ann), "--query", "a man", "--ann", "m=16"], "unknown hnsw setting 'm'"),
        (["search", str(with_ann), "--query", "a man", "--ann", "ef_search=0"], "ef_search takes a whole number from 1"),
        (["search", str(with_ann), "--query", "a man", "--ann", "--system", "bm25"], "--ann: the bm25 system uses no dense index"),
    ]
    for args, message in cases:
        assert main([*args, "--quiet"]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (args, err)
    with pytest.raises(SystemExit) as stopped:  # argparse's own check, one line as every parser error
        main(["search", str(with_ann), "--query", "a man", "--ann", "--exact"])
    assert stopped.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert tree_state(tmp_path) == before
    (with_ann / "ann" / "ann.json").write_text(json.dumps(json.loads((with_ann / "ann" / "ann.json").read_text()) | {"source": {"rows": 3}}))
    assert main(["search", str(with_ann), "--query", "a man", "--quiet"]) == 2
    assert "built from other vectors" in capsys.readouterr().err


def test_choose_ann_without_an_index_folder():
    class Plain:
        system, ann, folder = "dense", None, "somewhere"

    assert choose_ann(Plain(), None, exact=False) is None and choose_ann(Plain(), None, exact=True) is None
