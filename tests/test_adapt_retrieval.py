"""`sentune adapt` on a retrieval set with the tiny model: documents and queries in BEIR's layout, nDCG@10 on
queries, the selection queries ranked against their pool, and the unchanged model kept when nothing helps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import WORDS, tree_state

from sentune.cli import main
from sentune.data.beir import Document, Query, RetrievalSet, read_beir_folder, write_beir_folder
from sentune.data.readers import Source

HERE = Source("toy", 1)


def _toy_beir(folder, seed=0, n_docs=150, n_queries=120):
    """Random documents of several sentences; each query a few words of its relevant document, so nothing a label-free
    method learns can be known to help."""
    rng = np.random.default_rng(seed)
    sentence = lambda: " ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)))).capitalize() + "."  # noqa: E731
    docs = [Document(f"d{i}", " ".join(sentence() for _ in range(4)), HERE) for i in range(n_docs)]
    queries = [Query(f"q{i}", " ".join(docs[i].text.split()[1:4]), HERE, {f"d{i}": 1}) for i in range(n_queries)]
    write_beir_folder(folder, RetrievalSet(queries[:100], docs), "dev")
    test = write_beir_folder(folder.parent / f"{folder.name}-test", RetrievalSet(queries[100:], docs), "test")
    return folder, test


@pytest.mark.slow
def test_adapt_on_queries_keeps_the_unchanged_model_when_nothing_helps(tiny_model_dir, tmp_path):
    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out)]
    assert main([*args, "--methods", "poolings,whitening,simcse,wise", "--budget", "4"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["dev"]["metric"] == "ndcg@10" and results["meta"]["dev"]["unit"] == "queries"
    assert results["meta"]["dev"]["queries"] == 100 and results["meta"]["test"]["queries"] == 20
    assert "pairs" not in results["meta"]["dev"] and "pairs" not in results["meta"]["test"]  # a search run counts queries
    assert 0 < results["meta"]["process"]["cpu_seconds"] and results["meta"]["process"]["wall_seconds"] > 0  # the minutes' context
    assert results["choice"]["name"] == "unchanged", results["choice"]["reason"]
    # training chose its checkpoints on the selection queries against their pool, and recorded per-query values
    assert results["candidates"]["simcse"]["recipe"]["eval"]["dev"] == {
        "kind": "retrieval-set",
        "queries": 50,
        "documents": 150,
        "source": str(out / "data" / "dev-select"),
    }
    pool = read_beir_folder(out / "data" / "dev-select", "select")
    assert len(pool.queries) == results["meta"]["dev"]["select_queries"] == 50
    assert {d for q in pool.queries for d in q.relevant} <= {d.id for d in pool.corpus}
    recorded = sorted((out / "candidates" / "simcse" / "run" / "dev_cosines").glob("step-*.npy"))
    assert recorded and np.load(recorded[0]).shape == (50,)
    # the untuned model's scores are each query's nDCG@10 x 100; their mean is the selection score
    scores = np.load(out / "candidates" / "unchanged" / "scores.npz")
    assert scores["dev"].shape == (100,) and scores["test"].shape == (20,) and 0 <= scores["dev"].min() <= scores["dev"].max() <= 100
    # ... and they are the model's own ranking: the pool's queries against the pool, the others against the whole corpus
    from sentence_transformers import SentenceTransformer

    from sentune.adaptation.decide import split_dev
    from sentune.tasks.user_queries import QueryScorer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    data, split = read_beir_folder(out / "data" / "dev", "dev"), split_dev(np.zeros(100))
    confirm = RetrievalSet([data.queries[i] for i in split.confirm], data.corpus)
    fresh = QueryScorer.whole({"pool": pool, "confirm": confirm, "test": read_beir_folder(out / "data" / "test", "test")}).of_model(model)
    np.testing.assert_allclose(scores["dev"][split.select], fresh["pool"], atol=1e-6)
    np.testing.assert_allclose(scores["dev"][split.confirm], fresh["confirm"], atol=1e-6)
    np.testing.assert_allclose(scores["test"], fresh["test"], atol=1e-6)
    # the training methods read passages of the documents
    passages = (out / "data" / "corpus.txt").read_text().splitlines()
    assert 150 <= len(passages) and all(len(p.split()) <= 64 for p in passages)
    # a second run with the same settings reads everything back
    before = tree_state(out / "candidates")
    assert main([*args, "--methods", "poolings,whitening,simcse,wise", "--budget", "4"]) == 0
    assert tree_state(out / "candidates") == before


def test_bad_retrieval_inputs_are_one_line_and_write_nothing(tiny_model_dir, tmp_path, capsys):
    dev, _ = _toy_beir(tmp_path / "toy")
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\ta man\nq1\tthe dog\n")
    qrels = dev / "qrels" / "dev.tsv"
    out = ["--model", str(tiny_model_dir), "--out", str(tmp_path / "run"), "--quiet"]
    before = tree_state(tmp_path)
    cases = [
        (["--dev", str(queries), "--dev-qrels", str(qrels), "--corpus", str(dev / "corpus.jsonl")], f"{queries}:2: query id 'q1' already used at line 1"),
        (["--dev", str(dev / "queries.jsonl"), "--corpus", str(dev / "corpus.jsonl")], "a queries file needs its judgements: --dev-qrels FILE"),
        (["--dev", str(dev / "queries.jsonl"), "--dev-qrels", str(qrels), "--corpus", str(qrels)], f"{qrels}:1: not a JSON object"),
        (["--dev", str(tmp_path / "toy-test")], "no qrels/dev.tsv (it has test.tsv)"),
    ]
    for extra, message in cases:
        assert main(["adapt", *out, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert tree_state(tmp_path) == before


def test_retrieval_examples_write_beir_folders_from_the_catalog(tiny_data_dir, tmp_path):
    from sentune.adaptation.examples import write_example

    scifact = write_example("scifact", tiny_data_dir, tmp_path / "scifact")
    dev, test = read_beir_folder(scifact.dev, "dev"), read_beir_folder(scifact.test, "test")
    assert scifact.corpus == scifact.dev / "corpus.jsonl" and len(dev.corpus) == 24
    assert len(dev.queries) == 12  # 400 asked, at most half of the 24 tiny train queries
    # the tiny data holds BEIR's test judgements: they test; the train claims dev left train, none a dev or test text
    assert len(test.queries) == 24 and all(q.id.startswith("test") for q in test.queries)
    train = read_beir_folder(scifact.train, "train").queries
    assert not {q.id for q in dev.queries} & {q.id for q in train} and not {q.text for q in train} & {q.text for q in dev.queries + test.queries}
    quora = write_example("quora", tiny_data_dir, tmp_path / "quora")
    dev, test = read_beir_folder(quora.dev, "dev"), read_beir_folder(quora.test, "test")
    texts = {d.id: d.text for d in dev.corpus}
    assert dev.queries and test.queries and not {q.text for q in dev.queries} & {q.text for q in test.queries}
    assert all(texts[q.id] == q.text for q in dev.queries + test.queries)  # a query is a document of the corpus, as in BEIR
    assert all(q.id not in q.relevant for q in dev.queries)


@pytest.mark.slow
def test_generated_queries_train_the_genq_candidate(tiny_model_dir, tmp_path, capsys):
    """--queries-from: (query, passage) pairs a query generator wrote; GenQ trains MultipleNegativesRankingLoss on them."""
    dev, test = _toy_beir(tmp_path / "toy")
    docs = read_beir_folder(dev, "dev").corpus
    generated = tmp_path / "generated.tsv"
    generated.write_text("".join(f"{' '.join(d.text.split()[5:9])}\t{d.text}\n" for d in docs[:80]))
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out)]
    assert main([*args, "--methods", "whitening", "--budget", "4", "--queries-from", str(generated), "--reference"]) == 0
    results = json.loads((out / "results.json").read_text())
    bm25 = results["candidates"]["bm25"]  # --reference on a retrieval run: BM25 and ST's SimCSE beside the candidates
    assert bm25["kind"] == "baseline" and not bm25["eligible"] and not bm25["chosen"] and bm25["test"]["score"] > 0
    assert "st-simcse" in results["candidates"]
    genq = results["candidates"]["genq"]
    assert genq["kind"] == "trained" and genq["recipe"]["method"] == "mnrl-pairs"
    # what it trained on and was evaluated on, described, with the records of them under OUT/data (never read back)
    assert genq["recipe"]["train_data"] == {"kind": "pairs", "rows": 80, "source": str(out / "data" / "queries-from.tsv")}
    dev = genq["recipe"]["eval"]["dev"]
    assert dev["kind"] == "retrieval-set" and dev["source"] == str(out / "data" / "dev-select") and dev["queries"] > 0 and dev["documents"] > 0
    assert len((out / "data" / "queries-from.tsv").read_text().splitlines()) == 80
    # generated queries for a pairs run are refused before any work
    capsys.readouterr()
    pairs_dev = tmp_path / "dev.tsv"
    pairs_dev.write_text("".join(f"a man {i}\ta guy {i}\t{i % 5}\n" for i in range(120)))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i}\n" for i in range(150)))
    refused = [
        "adapt",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(corpus),
        "--dev",
        str(pairs_dev),
        "--queries-from",
        str(generated),
        "--out",
        str(tmp_path / "r"),
    ]
    assert main(refused) == 2 and "--queries-from: generated queries train a retrieval candidate" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
