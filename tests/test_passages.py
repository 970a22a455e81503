"""Long documents as passages (sentune.search.passages): windows cover each document with the stride asked, MaxP's
scores and ranking equal a naive loop over every passage, and an index built with `--passages maxp` searches (dense
and hybrid) as that loop ranks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import WORDS

from sentune.cli import main
from sentune.data.beir import Document, Query, RetrievalSet, write_beir_folder
from sentune.data.text_files import Source

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

HERE = Source("toy", 1)


def naive_maxp(query_vectors, document_vectors, passage_vectors, owners) -> np.ndarray:
    """Each document's highest cosine over its first window and its later windows, one passage at a time."""
    cos = lambda a, b: float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))  # noqa: E731
    out = np.zeros((len(query_vectors), len(document_vectors)))
    for q, query in enumerate(query_vectors):
        for d, document in enumerate(document_vectors):
            best = cos(query, document)
            for p, owner in enumerate(owners):
                if owner == d:
                    best = max(best, cos(query, passage_vectors[p]))
            out[q, d] = best
    return out


def naive_order(scores_row, ids) -> list[str]:
    return [doc for _, doc in sorted(zip(scores_row, ids, strict=True), key=lambda pair: (-pair[0], pair[1]))]


def test_maxp_scores_and_ranks_as_a_naive_loop_over_passages():
    from sentune.search.fusion import id_order, top_by_score
    from sentune.search.passages import PassageVectors

    rng = np.random.default_rng(0)
    documents, queries = rng.normal(size=(12, 6)), rng.normal(size=(5, 6))
    owners = np.array([0, 0, 0, 3, 7, 7, 11])  # documents 0, 3, 7 and 11 have later windows
    passages = rng.normal(size=(len(owners), 6))
    maxp = PassageVectors(documents.astype(np.float32), passages.astype(np.float32), owners)
    scores = maxp.cosines(queries.astype(np.float32))
    expected = naive_maxp(queries, documents, passages, owners)
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    ids = [f"d{i:02d}" for i in range(len(documents))]
    ranked = top_by_score(scores, id_order(ids), len(ids))
    assert [[ids[i] for i in row] for row in ranked] == [naive_order(row, ids) for row in expected]
    first = naive_maxp(queries, documents, passages[:0], owners[:0])  # the first windows alone
    assert (scores >= first - 1e-6).all() and (scores > first + 1e-6).any()


def test_windows_cover_each_document_stride_apart(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    from sentune.search.passages import later_windows, window_tokens

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    tokenizer = model.tokenizer
    assert window_tokens(model) == model.max_seq_length - 2  # [CLS] and [SEP]
    words = list(WORDS)
    texts = [" ".join(words[:5]), " ".join((words * 3)[:25]), " ".join((words * 3)[:26])]
    owners_of = {}
    found, owners = later_windows(tokenizer, texts, window=10, stride=5)
    for row, text in enumerate(texts):
        tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
        windows = [found[i] for i in np.flatnonzero(owners == row)]
        owners_of[row] = len(windows)
        # window k starts at token 5k: its tokens are the document's, and the last one reaches its end
        expected = [tokens[start : start + 10] for start in range(5, len(tokens), 5) if start - 5 + 10 < len(tokens)]
        assert [tokenizer(w, add_special_tokens=False)["input_ids"] for w in windows] == expected
        assert not windows or tokenizer(windows[-1], add_special_tokens=False)["input_ids"][-1] == tokens[-1]
    assert owners_of[0] == 0 and list(owners) == sorted(owners)  # a document inside one window has no later window
    with pytest.raises(ValueError):
        later_windows(tokenizer, texts, window=10, stride=11)


def _long_toy(folder):
    """Documents longer than the tiny model's window (62 tokens), each query words from late in its document."""
    rng = np.random.default_rng(1)
    docs = [Document(f"d{i:02d}", " ".join(rng.choice(WORDS, size=int(rng.integers(20, 150)))), HERE) for i in range(30)]
    queries = [Query(f"q{i}", " ".join(docs[i].text.split()[-6:-2]), HERE, {f"d{i:02d}": 1}) for i in range(20)]
    return write_beir_folder(folder, RetrievalSet(queries, docs), "test"), docs, queries


def test_an_index_of_passages_searches_as_the_naive_loop_ranks(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    from sentune.search.fusion import Fusion, minmax
    from sentune.search.lexical import LexicalIndex
    from sentune.search.passages import later_windows

    folder, docs, queries = _long_toy(tmp_path / "toy")
    index = tmp_path / "index"
    args = ["index", "--model", str(tiny_model_dir), "--corpus", str(folder / "corpus.jsonl"), "--out", str(index), "--quiet"]
    assert main([*args, "--passages", "maxp", "--passage-stride", "20", "--fusion", "convex:0.6"]) == 0
    settings = json.loads((index / "index.json").read_text())
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    texts, owners = later_windows(model.tokenizer, [d.text for d in docs], 62, 20)
    assert settings["passages"] == {"kind": "maxp", "window": 62, "stride": 20, "count": len(texts)} and len(texts) > len(docs)
    expected = naive_maxp(model.encode([q.text for q in queries]), model.encode([d.text for d in docs]), model.encode(texts), owners)
    ids = [d.id for d in docs]
    for system in ("dense", "hybrid"):
        run = tmp_path / f"{system}.run"
        assert main(["search", str(index), "--queries", str(folder / "queries.jsonl"), "--top", "30", "--system", system, "--run", str(run), "--quiet"]) == 0
        found: dict[str, list[str]] = {}
        for line in run.read_text().splitlines():
            qid, _, doc, *_ = line.split()
            found.setdefault(qid, []).append(doc)
        fused = expected
        if system == "hybrid":
            bm25 = LexicalIndex.build([d.text for d in docs]).scores([q.text for q in queries])
            fused = Fusion("convex", 0.6).fuse(expected, bm25, np.arange(len(docs)))
            assert np.allclose(fused, 0.6 * minmax(expected) + 0.4 * minmax(bm25))
        for q, row in zip(queries, fused, strict=True):
            assert found[q.id] == naive_order(row, ids), (system, q.id)
    # the later windows change the dense ranking of the toy's queries (their words are late in the documents)
    first = naive_maxp(model.encode([q.text for q in queries]), model.encode([d.text for d in docs]), np.zeros((0, 1)), [])
    assert any(naive_order(a, ids) != naive_order(b, ids) for a, b in zip(first, expected, strict=True))


def test_passage_options_are_checked_before_the_model_loads(tiny_model_dir, tmp_path, capsys):
    folder, _, _ = _long_toy(tmp_path / "toy")
    base = ["index", "--model", str(tiny_model_dir), "--corpus", str(folder / "corpus.jsonl"), "--out", str(tmp_path / "index"), "--quiet"]
    cases = [
        (["--passage-stride", "8"], "--passage-stride 8"),
        (["--passages", "maxp", "--passage-stride", "0"], "--passage-stride 0"),
        (["--passages", "maxp", "--passage-stride", "63"], "--passage-stride 63"),
        (["--passages", "maxp", "--ann", "hnsw"], "--ann"),
        (["--bm25-b", "1.5"], "--bm25-b 1.5"),
        (["--bm25-k1", "-1"], "--bm25-k1 -1"),
        (["--bm25-title-weight", "0"], "--bm25-title-weight 0"),
    ]
    for extra, message in cases:
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    assert not (tmp_path / "index").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "chosen"), [(9, "first"), (3, "maxp")])  # toys on which each side wins (the tiny model is random)
def test_an_adapt_run_chooses_passages_on_its_selection_queries_and_searches_as_it_scored(tiny_model_dir, tmp_path, seed, chosen):
    """Documents longer than the tiny model reads, queries from their ends: the hybrid's choice between MaxP and the
    first window reads the selection queries alone, and `sentune search OUT` ranks the test queries as the run scored
    its chosen system, passages included when it chose MaxP."""
    from test_search import ndcg10, read_trec_run

    from sentune.adaptation.decide import split_dev
    from sentune.data.beir import read_beir_folder

    rng = np.random.default_rng(seed)
    docs = [Document(f"d{i:03d}", " ".join(rng.choice(WORDS, size=int(rng.integers(20, 150)))) + ".", HERE) for i in range(150)]
    queries = [Query(f"q{i}", " ".join(docs[i].text.rstrip(".").split()[-5:-1]), HERE, {f"d{i:03d}": 1}) for i in range(120)]
    dev = write_beir_folder(tmp_path / "dev", RetrievalSet(queries[:100], docs), "dev")
    test = write_beir_folder(tmp_path / "test", RetrievalSet(queries[100:], docs), "test")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "hybrid"]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    hybrid, maxp = results["candidates"]["hybrid"], results["candidates"]["unchanged-maxp"]
    choice = hybrid["passages"]
    split = split_dev(np.zeros(100))
    dev_queries = read_beir_folder(out / "data" / "dev", "dev").queries
    assert choice["read_queries"] == [dev_queries[i].id for i in split.select] == hybrid["weight_read_queries"]
    assert choice["chosen"] == ("maxp" if round(choice["maxp_score"], 9) > round(choice["first_score"], 9) else "first") and choice["count"] > 0
    assert maxp["kind"] == "baseline" and not maxp["eligible"] and maxp["passages"] == choice
    assert choice["chosen"] == chosen and results["choice"]["name"] == "hybrid", results["choice"]["reason"]
    settings = json.loads((out / "index.json").read_text())
    assert settings["passages"] == (None if chosen == "first" else {k: choice[k] for k in ("kind", "window", "stride", "count")})
    run = tmp_path / "test.run"
    assert main(["search", str(out), "--queries", str(test / "queries.jsonl"), "--top", "100", "--run", str(run), "--quiet"]) == 0
    ranked = read_trec_run(run)
    mean = 100 * np.mean([ndcg10([doc for doc, _, _ in ranked.get(q.id, [])], q.relevant) for q in queries[100:]])
    assert mean == pytest.approx(hybrid["test"]["score"], abs=1e-6)


def test_an_index_of_passages_is_not_exported_to_qdrant(tiny_model_dir, tmp_path, capsys):
    pytest.importorskip("qdrant_client")
    folder, _, _ = _long_toy(tmp_path / "toy")
    index = tmp_path / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(folder / "corpus.jsonl"), "--out", str(index), "--quiet", "--passages", "maxp"]) == 0
    capsys.readouterr()
    assert main(["export-index", str(index), "--to", "qdrant", "--path", str(tmp_path / "qdrant"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--passages maxp" in err[0] and not (tmp_path / "qdrant").exists()
