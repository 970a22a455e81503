"""`sentune index` / `sentune search` (sentune.search.index) on the tiny model: the index equals a direct ranking, a
killed build resumes, bad input is one line and writes nothing, the TREC run file reads back with a tiny reader of
the format, and an adapt run's saved system searches exactly as the run scored it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import tree_state
from test_adapt_retrieval import _toy_beir

from sentune.cli import main
from sentune.data.beir import read_beir_folder

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")


def read_trec_run(path) -> dict[str, list[tuple[str, int, float]]]:
    """A tiny reader of TREC's run format: `qid Q0 docid rank score tag`, six fields a line."""
    runs: dict[str, list[tuple[str, int, float]]] = {}
    for line in path.read_text().splitlines():
        qid, q0, doc, rank, score, tag = line.split()
        assert q0 == "Q0" and tag
        runs.setdefault(qid, []).append((doc, int(rank), float(score)))
    return runs


def ndcg10(ranked: list[str], relevant: dict[str, int]) -> float:
    """nDCG@10 by its formula, written out apart from sentune.tasks.retrieval."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return dcg / ideal


@pytest.fixture
def toy(tmp_path):
    return _toy_beir(tmp_path / "toy")


def test_index_then_search_ranks_as_the_dense_and_bm25_parts_do(tiny_model_dir, toy, tmp_path, capsys):
    dev, _ = toy
    index = tmp_path / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--out", str(index), "--quiet", "--fusion", "convex:0.4"]) == 0
    settings = json.loads((index / "index.json").read_text())
    assert settings["complete"] and settings["system"] == "hybrid" and settings["fusion"] == {"kind": "convex", "alpha": 0.4}
    assert settings["documents"] == 150 and np.load(index / "vectors.npy").shape == (150, settings["dimension"])
    run = tmp_path / "run.txt"
    assert main(["search", str(index), "--queries", str(dev / "queries.jsonl"), "--top", "5", "--run", str(run), "--quiet"]) == 0
    hybrid = read_trec_run(run)
    assert len(hybrid) == 100 and all([r for _, r, _ in rows] == [1, 2, 3, 4, 5] for rows in hybrid.values())
    assert all(rows[i][2] >= rows[i + 1][2] for rows in hybrid.values() for i in range(4))  # best first
    from sentune.search.trec import read_trec_run as sentunes_reader

    shuffled = tmp_path / "shuffled.txt"  # the rank column orders a query's documents, not the file's order
    shuffled.write_text("\n".join(reversed(run.read_text().splitlines())) + "\n")
    assert sentunes_reader(shuffled) == {qid: [doc for doc, _, _ in rows] for qid, rows in hybrid.items()}
    # the dense part alone is the exact cosine ranking of the tiny model's own vectors
    from sentence_transformers import SentenceTransformer

    from sentune.tasks.retrieval import rank

    data = read_beir_folder(dev, "dev")
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    expected = rank(model.encode([q.text for q in data.queries]), model.encode([d.text for d in data.corpus]), [d.id for d in data.corpus], depth=5)
    assert (
        main(["search", str(index), "--queries", str(dev / "queries.jsonl"), "--top", "5", "--run", str(run), "--force", "--system", "dense", "--quiet"]) == 0
    )
    dense = read_trec_run(run)
    same = sum(dense[q.id][0][0] == data.corpus[row[0]].id for q, row in zip(data.queries, expected, strict=True))
    assert same >= 98  # float noise between two encoders may swap a near tie
    # one query printed
    capsys.readouterr()
    query = data.queries[0]
    assert main(["search", str(index), "--query", query.text, "--top", "3", "--system", "bm25", "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    from sentune.search.fusion import id_order, top_by_score
    from sentune.search.lexical import LexicalIndex

    scores = LexicalIndex.build([d.text for d in data.corpus]).scores([query.text])
    top = top_by_score(scores, id_order([d.id for d in data.corpus]), 3)[0]
    assert [line.split()[2] for line in lines] == [data.corpus[i].id for i in top]
    assert [float(line.split()[1]) for line in lines] == pytest.approx([float(scores[0, i]) for i in top], abs=1e-4)


def test_a_killed_build_resumes_and_equals_an_uninterrupted_one(tiny_model_dir, toy, tmp_path, monkeypatch):
    import sentune.search.build as build_module

    dev, _ = toy
    args = ["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--quiet"]
    monkeypatch.setattr(build_module, "CHUNK", 32)
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    real = build_module._write_json
    calls = {"n": 0}

    def dies_after_two_chunks(path, value):
        real(path, value)
        if path.name == "progress.json":
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "_write_json", dies_after_two_chunks)
    with pytest.raises(KeyboardInterrupt):
        main([*args, "--out", str(tmp_path / "killed")])
    assert json.loads((tmp_path / "killed" / "progress.json").read_text())["rows"] == 64
    assert main(["search", str(tmp_path / "killed"), "--query", "a man", "--quiet"]) == 2  # unfinished: refused
    monkeypatch.setattr(build_module, "_write_json", real)
    assert main([*args, "--out", str(tmp_path / "killed")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "killed" / "vectors.npy"), np.load(tmp_path / "whole" / "vectors.npy"), atol=1e-6)


def test_bad_input_is_one_line_and_writes_nothing(tiny_model_dir, tiny_st, toy, tmp_path, capsys):
    dev, _ = toy
    index = tmp_path / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--out", str(index), "--quiet"]) == 0
    no_text = tmp_path / "no-text.jsonl"
    no_text.write_text('{"_id": "a", "text": "a man"}\n{"_id": "b", "title": ""}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    duplicates = tmp_path / "queries.tsv"
    duplicates.write_text("q1\ta man\nq1\tthe dog\n")
    other = tmp_path / "other-model"
    import torch

    with torch.no_grad():
        next(tiny_st[0].auto_model.parameters()).add_(0.5)  # the same architecture, other weights
    tiny_st.save(str(other))
    before = tree_state(tmp_path)
    cases = [
        (["index", "--model", str(tiny_model_dir), "--corpus", str(no_text), "--out", str(tmp_path / "new")], f"{no_text}:2:"),
        (["index", "--model", str(tiny_model_dir), "--corpus", str(empty), "--out", str(tmp_path / "new")], f"{empty}: file is empty"),
        (["index", "--model", str(other), "--corpus", str(dev / "corpus.jsonl"), "--out", str(index)], f"{index / 'index.json'}: built by another model"),
        (["search", str(index), "--queries", str(duplicates)], f"{duplicates}:2: query id 'q1' already used at line 1"),
        (["search", str(tmp_path), "--query", "a man"], "no sentune index"),
        (
            ["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--out", str(tmp_path / "new"), "--fusion", "convex:2"],
            "--fusion convex:2",
        ),
        (["search", str(index), "--query", "a man", "--system", "sparse"], "--system sparse"),
    ]
    for args, message in cases:
        assert main([*args, "--quiet"]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (args, err)
    assert tree_state(tmp_path) == before


@pytest.mark.slow
def test_an_adapt_run_searches_as_it_scored_its_chosen_hybrid(tiny_model_dir, toy, tmp_path, monkeypatch):
    """The toy's queries are words of their documents: BM25 helps, the hybrid is chosen, its weight read only the
    selection queries, and `sentune search OUT --run` gives the test nDCG@10 the run reported. The run again reads every
    candidate back and saves the same index without fitting BM25 again."""
    from sentune.search import lexical_fit

    fit_lexical = lexical_fit.fit_lexical
    fits: list[int] = []

    def fit_once(*args, **kwargs):
        fits.append(len(fits))
        assert len(fits) == 1, "BM25 fitted a second time"
        return fit_lexical(*args, **kwargs)

    monkeypatch.setattr(lexical_fit, "fit_lexical", fit_once)
    dev, test = toy
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "whitening,hybrid"]
    assert main(args) == 0
    assert fits == [0]
    first_index = json.loads((out / "index.json").read_text())
    assert main(args) == 0  # read back: its index's BM25 settings come from the records
    assert fits == [0] and json.loads((out / "index.json").read_text()) == first_index
    results = json.loads((out / "results.json").read_text())
    # changed by the safety rule (issue 80): the hybrid need not beat rrf on the 50 confirmation queries (which they could
    # not show before, so rrf was kept), only beat the unchanged model and be shown within SEARCH_MARGIN of rrf: it ships
    reason = results["choice"]["reason"]
    assert results["choice"]["name"] == "hybrid" and "beats unchanged" in reason and "not worse than rrf by 1 point" in reason, reason
    assert results["choice"]["safety"]["hybrid"]["safe"] and results["choice"]["expected_gain"]["hybrid"] == results["candidates"]["hybrid"]["expected_gain"]
    hybrid = chosen = results["candidates"]["hybrid"]
    from sentune.adaptation.decide import split_dev

    queries = read_beir_folder(out / "data" / "dev", "dev").queries
    split = split_dev(np.zeros(len(queries)))
    assert sorted(hybrid["weight_read_queries"]) == sorted(queries[i].id for i in split.select)
    test_queries = read_beir_folder(test, "test").queries
    assert not set(hybrid["weight_read_queries"]) & ({queries[i].id for i in split.confirm} | {q.id for q in test_queries})
    for name in ("bm25", "bm25-unstemmed", "bm25-fitted", "rrf"):
        assert results["candidates"][name]["kind"] == "baseline" and not results["candidates"][name]["eligible"]
    # BM25's k1, b and title weight were fitted on the selection queries alone, and the hybrid fused that BM25
    fit = results["candidates"]["bm25-fitted"]["lexical_fit"]
    assert fit["read_queries"] == hybrid["weight_read_queries"] and hybrid["lexical_fit"] == fit
    assert hybrid["lexical"] == fit["chosen"] == results["candidates"]["bm25-fitted"]["setting"]
    assert fit["chosen_score"] == max(score for *_, score in fit["grid"]) >= fit["fixed_score"]
    # the pool holds BM25's top documents too
    settings = json.loads((out / "index.json").read_text())
    assert settings["system"] == "hybrid" and settings["fusion"] == chosen["fusion"] and settings["model"] == "model"
    assert settings["lexical"]["label"] == fit["chosen"]  # `sentune search` ranks with the fitted BM25 too
    run = tmp_path / "test.run"
    assert main(["search", str(out), "--queries", str(test / "queries.jsonl"), "--top", "100", "--run", str(run), "--quiet"]) == 0
    ranked = read_trec_run(run)
    mean = 100 * np.mean([ndcg10([doc for doc, _, _ in ranked.get(q.id, [])], q.relevant) for q in test_queries])
    assert mean == pytest.approx(chosen["test"]["score"], abs=1e-6)
    from sentence_transformers import SentenceTransformer

    assert SentenceTransformer(str(out / "model"), device="cpu").encode(["a man"]).shape[0] == 1
    # whitening was fitted on the documents as they are ranked (the untuned pass's vectors): no second encoding
    from sentune.postprocess.whitening import Whitening

    assert not (out / "candidates" / ".corpus-model.npy").exists()
    documents = [d.text for d in read_beir_folder(out / "data" / "dev", "dev").corpus]
    expected = Whitening(device="cpu").fit(SentenceTransformer(str(tiny_model_dir), device="cpu").encode(documents))
    dense = list(SentenceTransformer(str(out / "candidates" / "whitening" / "model"), device="cpu"))[-2]
    np.testing.assert_allclose(dense.linear.weight.detach().numpy().T, expected.kernel_, rtol=1e-3, atol=1e-3)
    # a whitening record that does not say it was fitted on the documents (an older run's) is fitted again
    record = out / "candidates" / "whitening" / "candidate.json"
    older = json.loads(record.read_text())
    assert older.pop("fitted_on") == "documents"
    record.write_text(json.dumps(older))
    assert main(args) == 0
    assert json.loads(record.read_text())["fitted_on"] == "documents"


@pytest.mark.slow
def test_two_torchrun_processes_build_the_one_process_index(tiny_model_dir, toy, tmp_path):
    """torchrun with two gloo processes: each encodes its shard, rank 0 writes the index; equal to a one-process build."""
    import os
    import subprocess
    import sys

    dev, _ = toy
    args = ["index", "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--quiet", "--fusion", "rrf"]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "SENTUNE_DEVICE": "cpu"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "sentune", *args, "--out", str(tmp_path / "two")]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("index: ") == 1  # one process speaks
    one, two = tmp_path / "one", tmp_path / "two"
    # no shard left behind (one process's build also leaves the lock it held: sentune.search.folder)
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir() if p.name != "versions")
    np.testing.assert_allclose(np.load(two / "vectors.npy"), np.load(one / "vectors.npy"), atol=1e-6)
    assert json.loads((two / "index.json").read_text()) == json.loads((one / "index.json").read_text())
    assert (two / "documents.jsonl").read_text() == (one / "documents.jsonl").read_text()


def test_shards_cover_every_row_once():
    from sentune.search.build import shard_bounds

    for total in (0, 1, 7, 150):
        for ranks in (1, 2, 3, 8):
            bounds = [shard_bounds(total, ranks, r) for r in range(ranks)]
            assert bounds[0][0] == 0 and bounds[-1][1] == total and all(bounds[i][1] == bounds[i + 1][0] for i in range(ranks - 1))


def test_index_reads_the_corpus_vectors_that_eval_encoded(tiny_model_dir, tmp_path, monkeypatch):
    """`sentune eval` on a retrieval task caches its corpus's vectors; `sentune index` of that corpus with the same model
    reads them instead of encoding the documents again, and writes the vectors an index built from nothing writes."""
    from test_retrieval import _toy_data_dir

    from sentune.core.encode import Encoder

    data_dir = _toy_data_dir(tmp_path)
    corpus = data_dir / "retrieval" / "scifact" / "corpus.jsonl"
    index = ["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--quiet"]
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "empty-cache"))
    assert main([*index, "--out", str(tmp_path / "from-nothing")]) == 0
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "cache"))
    assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "scifact-train", "--data", str(data_dir), "--out", str(tmp_path / "eval"), "--quiet"]) == 0
    encoded: list[int] = []
    real = Encoder.encode
    monkeypatch.setattr(Encoder, "encode", lambda self, texts, *a, **k: encoded.append(len(texts)) or real(self, texts, *a, **k))
    assert main([*index, "--out", str(tmp_path / "from-cache")]) == 0
    assert encoded == []
    np.testing.assert_allclose(np.load(tmp_path / "from-cache" / "vectors.npy"), np.load(tmp_path / "from-nothing" / "vectors.npy"), atol=1e-5)
    assert main(["search", str(tmp_path / "from-cache"), "--query", "a man", "--quiet"]) == 0


@pytest.mark.slow
def test_the_fusion_adapt_chose_is_saved_in_its_index_and_reads_back_as_a_fusion(tiny_model_dir, tmp_path):
    """adapt's hybrid weight, the α best on its selection queries (its recorded curve; ties: nearer 0.5), is the one
    its index holds, read back as a Fusion. The toy of seed 2 chooses a weight other than 0.5, so no default can pass, and
    confirms the hybrid against the reference it must beat (sentune.adaptation.decide)."""
    from sentune.search.fusion import Fusion
    from sentune.search.index import SearchIndex

    dev, test = _toy_beir(tmp_path / "toy", seed=2)
    out = tmp_path / "run"
    assert main(["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "hybrid"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["choice"]["name"] == "hybrid", results["choice"]["reason"]
    curve = {alpha: score for alpha, score in results["candidates"]["hybrid"]["alpha_curve"]}
    best = max(curve, key=lambda alpha: (round(curve[alpha], 9), -abs(alpha - 0.5)))
    assert best != 0.5 and len(set(curve.values())) > 1  # the weight mattered on these queries
    fusion = SearchIndex.open(out).fusion
    assert isinstance(fusion, Fusion) and fusion == Fusion("convex", best)
    from sentune.adaptation.records import load_record

    assert fusion == load_record(out / "candidates" / "hybrid").fusion  # the record's Fusion object is the one the index holds
