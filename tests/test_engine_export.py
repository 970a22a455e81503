"""`sentune export-index --to qdrant` (sentune.search.export_qdrant) with Qdrant's real client in local mode, which
speaks the server's API: the round trip returns exact search's dense top k and sentune's BM25 scores, the hybrid fused
on the client equals the candidate formula written out, Qdrant's RRF is its own formula, and bad options are one line
before anything is written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import free_port, tree_state
from test_adapt_retrieval import _toy_beir
from test_ann import cosine, naive_convex

from sentune.cli import main
from sentune.errors import UserError

pytest.importorskip("qdrant_client")
pytest.importorskip("bm25s")


@pytest.fixture(scope="module")
def exported(tiny_model_dir, tmp_path_factory):
    """The toy's hybrid index (convex, α = 0.4), exported to a local-mode folder by the command; its queries' vectors."""
    root = tmp_path_factory.mktemp("engine")
    dev, _ = _toy_beir(root / "toy")
    index = root / "index"
    corpus = str(dev / "corpus.jsonl")
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", corpus, "--out", str(index), "--quiet", "--fusion", "convex:0.4"]) == 0
    assert main(["export-index", str(index), "--to", "qdrant", "--path", str(root / "qdrant"), "--collection", "toy", "--quiet"]) == 0
    from sentune.search.index import SearchIndex

    opened = SearchIndex.open(index)
    queries = [json.loads(line) for line in (dev / "queries.jsonl").read_text().splitlines()][:30]
    vectors = opened.model().encode([q["text"] for q in queries])
    return root, opened, queries, vectors


@pytest.fixture(scope="module")
def engine(exported):
    from sentune.search.export_qdrant import QdrantSearch, connect

    root = exported[0]
    client = connect(path=str(root / "qdrant"))
    yield QdrantSearch(client, "toy")
    client.close()


def test_the_collection_holds_every_document_and_the_fusion(exported, engine):
    _, index, *_ = exported
    info = engine.client.get_collection("toy")
    assert info.points_count == len(index.documents) == 150
    assert info.config.metadata["sentune"]["fusion"] == {"kind": "convex", "alpha": 0.4} and engine.fusion.alpha == 0.4
    point = engine.client.retrieve("toy", [7], with_payload=True, with_vectors=True)[0]
    doc_id, text = index.documents.read([7])[0]
    assert point.payload == {"doc_id": doc_id, "text": text} and doc_id == index.documents.every_id()[7]
    stored = np.asarray(point.vector["dense"])
    original = np.load(index.folder / "vectors.npy")[7]
    assert cosine(stored, original) > 1 - 1e-6  # the document's vector (a server stores it normalised, local mode as given)


def test_dense_top_k_is_exact_search(exported, engine):
    _, index, queries, vectors = exported
    from sentune.tasks.retrieval import rank

    docs = np.load(index.folder / "vectors.npy")
    ids = index.documents.every_id()
    expected = rank(vectors, docs, ids, depth=10)
    found = engine.search(vectors, [q["text"] for q in queries], top=10, system="dense")
    for q, row, hits in zip(vectors, expected, found, strict=True):
        np.testing.assert_allclose([s for _, s in hits], [cosine(q, docs[d]) for d in row], atol=1e-5)
    assert sum([d for d, _ in hits] == [ids[d] for d in row] for row, hits in zip(expected, found, strict=True)) >= 0.9 * len(found)


def test_bm25_scores_are_sentunes(exported, engine):
    _, index, queries, vectors = exported
    texts = [q["text"] for q in queries]
    scores = index.lexical().scores(texts)
    found = engine.search(vectors, texts, top=10, system="bm25")
    position = {d: i for i, d in enumerate(index.documents.every_id())}
    assert sum(not hits for hits in found) < len(found) / 2
    for row, hits in enumerate(found):
        assert len(hits) == min(10, int((scores[row] > 0).sum())), texts[row]  # a query of stop words alone matches nothing
        np.testing.assert_allclose([s for _, s in hits], [scores[row, position[d]] for d, _ in hits], rtol=1e-5)  # each its BM25 score
        np.testing.assert_allclose([s for _, s in hits], np.sort(scores[row])[::-1][: len(hits)], rtol=1e-5)  # and they are the top


def test_hybrid_fused_on_the_client_is_the_candidate_formula(exported, engine):
    _, index, queries, vectors = exported
    texts = [q["text"] for q in queries]
    docs = np.load(index.folder / "vectors.npy")
    bm25 = index.lexical().scores(texts)
    found = engine.search(vectors, texts, top=10, system="hybrid", engine_fusion="sentune", candidates=40)
    ids = index.documents.every_id()
    for row, hits in enumerate(found):
        cosines = {d: cosine(vectors[row], docs[d]) for d in range(len(docs))}
        dense = dict(sorted(cosines.items(), key=lambda item: (-item[1], ids[item[0]]))[:40])
        matched = sorted(np.flatnonzero(bm25[row] > 0), key=lambda d: (-bm25[row, d], ids[d]))[:40]
        expected, fused = naive_convex(dense, {int(d): float(bm25[row, d]) for d in matched}, 0.4, ids, 10)
        assert [d for d, _ in hits] == [ids[d] for d in expected], row
        np.testing.assert_allclose([s for _, s in hits], [fused[d] for d in expected], atol=1e-5)


def test_qdrants_rrf_is_its_own_formula(exported, engine):
    """Qdrant's RRF scores a document 1 / (k + rank − 1) per list (rank from 1), one less than Cormack's k + rank."""
    _, index, queries, vectors = exported
    texts = [q["text"] for q in queries]
    found = engine.search(vectors, texts, top=10, system="hybrid", engine_fusion="rrf", candidates=40)
    dense = engine.search(vectors, texts, top=40, system="dense")
    lexical = engine.search(vectors, texts, top=40, system="bm25")
    for hits, d, w in zip(found, dense, lexical, strict=True):
        fused: dict[str, float] = {}
        for ranking in (d, w):
            for rank, (doc, _) in enumerate(ranking, start=1):
                fused[doc] = fused.get(doc, 0.0) + 1.0 / (60 + rank - 1)
        np.testing.assert_allclose([s for _, s in hits], sorted(fused.values(), reverse=True)[:10], atol=1e-9)
        assert all(abs(fused[doc] - s) < 1e-9 for doc, s in hits)


def test_dbsf_answers(exported, engine):
    _, _, queries, vectors = exported
    found = engine.search(vectors[:5], [q["text"] for q in queries[:5]], top=10, system="hybrid", engine_fusion="dbsf")
    assert all(len(h) == 10 and all(h[i][1] >= h[i + 1][1] for i in range(9)) for h in found)


def test_bad_options_are_one_line_and_write_nothing(exported, tmp_path, capsys):
    root, index, *_ = exported
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    storage, second = root / "qdrant", tmp_path / "second"
    assert main(["export-index", str(index.folder), "--to", "qdrant", "--path", str(second), "--collection", "toy", "--quiet"]) == 0
    before, stored = tree_state(tmp_path), tree_state(storage)
    base = ["export-index", str(index.folder), "--to", "qdrant"]
    cases = [
        ([*base, "--path", str(tmp_path / "q"), "--api-key", "k"], "--api-key applies to --url"),
        ([*base, "--path", str(tmp_path / "q"), "--collection", "a/b"], "--collection 'a/b': use letters"),
        ([*base, "--path", str(tmp_path / "q"), "--batch", "0"], "--batch 0: at least 1"),
        ([*base, "--path", str(a_file)], "a file, not a folder"),
        ([*base, "--path", str(other)], "holds no Qdrant local storage"),
        ([*base, "--path", str(second), "--collection", "toy"], "--collection toy: exists already"),
        ([*base, "--path", str(storage), "--collection", "new"], "already accessed by another instance"),  # the engine fixture holds it
        ([*base, "--url", "localhost:6333"], "--url localhost:6333: a Qdrant server's address"),
        ([*base, "--url", f"http://127.0.0.1:{free_port()}"], "cannot open Qdrant"),
        (["export-index", str(tmp_path), "--to", "qdrant", "--path", str(tmp_path / "q")], "no sentune index"),
    ]
    for args, message in cases:
        assert main([*args, "--quiet"]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (args, err)
    for args in ([*base, "--path", "p", "--url", "http://x"], [*base, "--to", "elastic", "--path", "p"]):
        with pytest.raises(SystemExit) as stopped:
            main(args)
        assert stopped.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    assert tree_state(tmp_path) == before and tree_state(storage) == stored


def test_replace_and_memory_mode(exported):
    _, index, *_ = exported
    from sentune.search.export_qdrant import connect, export_index

    client = connect(memory=True)
    first = export_index(index, client, "again")
    assert first.points == 150 and first.collisions == 0 and first.dimension == 32
    with pytest.raises(UserError, match="exists already"):
        export_index(index, client, "again")
    assert export_index(index, client, "again", replace=True, batch=7).points == client.count("again").count == 150
