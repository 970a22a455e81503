"""`sentune.adapt` called from Python gives what `sentune adapt` gives on the same data: with lists and with a
`datasets.Dataset`, the same records, choice and scores as the command on the files (tiny model); and a search run
from Python dicts gives an index that ranks as `sentune search` on the run's folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import sentune
from sentune.cli import main
from sentune.data.user_data import write_corpus, write_scored_pairs

WORDS = "a the man woman dog cat plays runs eats guitar piano park food car street ball kid red blue big small".split()
METHODS = "poolings,whitening"


def _sentence(rng) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8))))


def _records(out: Path) -> dict[str, dict]:
    """Every candidate's record, with the run's folder written as OUT and its timings left out."""
    found = {}
    for path in sorted((out / "candidates").glob("*/candidate.json")):
        text = path.read_text().replace(str(out), "OUT")
        found[path.parent.name] = {k: v for k, v in json.loads(text).items() if k not in ("seconds", "peak_memory_mib")}  # measurements of the process
    return found


def _scores(out: Path) -> dict[str, dict[str, np.ndarray]]:
    return {p.parent.name: dict(np.load(p)) for p in sorted((out / "candidates").glob("*/scores.npz"))}


@pytest.mark.slow
def test_adapt_from_lists_and_a_dataset_matches_the_command_on_files(tiny_model_dir, tmp_path):
    from datasets import Dataset

    rng = np.random.default_rng(0)
    corpus = [_sentence(rng) for _ in range(120)]
    dev = [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 5))) for _ in range(100)]
    test = [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 5))) for _ in range(40)]
    write_corpus(tmp_path / "corpus.txt", corpus)
    write_scored_pairs(tmp_path / "dev.tsv", dev)
    write_scored_pairs(tmp_path / "test.tsv", test)
    files = ["--corpus", str(tmp_path / "corpus.txt"), "--dev", str(tmp_path / "dev.tsv"), "--test", str(tmp_path / "test.tsv")]
    assert main(["adapt", "--quiet", "--model", str(tiny_model_dir), *files, "--methods", METHODS, "--out", str(tmp_path / "cli")]) == 0

    def table(rows):
        return Dataset.from_dict({"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "score": [r[2] for r in rows]})

    runs = {
        "lists": sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, test=test, methods=METHODS, out=tmp_path / "lists"),
        "dataset": sentune.adapt(
            str(tiny_model_dir),
            corpus=Dataset.from_dict({"text": corpus}),
            dev=table(dev),
            test=table(test),
            methods=METHODS.split(","),
            out=tmp_path / "dataset",
        ),
    }
    command = json.loads((tmp_path / "cli" / "results.json").read_text())
    for name, result in runs.items():
        assert result.choice == command["choice"]["name"] and result.reason == command["choice"]["reason"], name
        assert _records(result.out) == _records(tmp_path / "cli"), name
        assert list(result.candidates.index) == list(command["candidates"]), name
        for candidate, scores in _scores(tmp_path / "cli").items():
            for split, values in scores.items():
                np.testing.assert_array_equal(_scores(result.out)[candidate][split], values, err_msg=f"{name} {candidate} {split}")
        for part in ("select", "confirm", "test"):
            assert [c[part]["score"] for c in result.results["candidates"].values()] == [c[part]["score"] for c in command["candidates"].values()]
        for data in ("corpus.txt", "dev.tsv", "dev-select.tsv", "test.tsv"):  # the record of what was used: the same bytes
            assert (result.out / "data" / data).read_bytes() == (tmp_path / "cli" / "data" / data).read_bytes(), (name, data)
        settings = json.loads((result.out / "adapt.json").read_text())
        assert settings == json.loads((tmp_path / "cli" / "adapt.json").read_text()), name  # the same data digests: a resume would read it back


@pytest.mark.slow
def test_a_search_run_from_dicts_matches_the_command_on_beir_folders_and_its_index_ranks_as_sentune_search(tiny_model_dir, tmp_path):
    from sentune.data.beir import RetrievalSet, write_beir_folder

    rng = np.random.default_rng(3)
    docs = [{"_id": f"d{i}", "title": "a title" if i % 4 == 0 else "", "text": ". ".join(_sentence(rng) for _ in range(3))} for i in range(150)]
    queries = {f"q{i}": " ".join(docs[i]["text"].split()[1:4]) for i in range(150)}
    qrels = {q: {f"d{q[1:]}": 1} for q in queries}
    dev, train = dict(list(queries.items())[:100]), dict(list(queries.items())[100:])
    dev_qrels, train_qrels = ({q: qrels[q] for q in split} for split in (dev, train))
    write_beir_folder(tmp_path / "dev", RetrievalSet.from_parts(docs, dev, dev_qrels), "dev")
    write_beir_folder(tmp_path / "train", RetrievalSet.from_parts(docs, train, train_qrels), "train")
    cli = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(tmp_path / "dev"), "--train", str(tmp_path / "train")]
    assert main([*cli, "--methods", "whitening", "--out", str(tmp_path / "cli")]) == 0
    result = sentune.adapt(
        str(tiny_model_dir), corpus=docs, dev=dev, dev_qrels=dev_qrels, train=(train, train_qrels), methods="whitening", out=tmp_path / "run"
    )
    command = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert result.results["meta"]["dev"]["metric"] == "ndcg@10" and result.choice == command["choice"]["name"]
    assert _records(result.out) == _records(tmp_path / "cli")
    for candidate, scores in _scores(tmp_path / "cli").items():
        for split, values in scores.items():
            np.testing.assert_array_equal(_scores(result.out)[candidate][split], values, err_msg=f"{candidate} {split}")
    assert (result.out / "data" / "train" / "qrels" / "train.tsv").read_bytes() == (tmp_path / "cli" / "data" / "train" / "qrels" / "train.tsv").read_bytes()
    hits = result.index.search({"q0": queries["q0"]}, top_k=5)["q0"]
    run = tmp_path / "search.run"
    (tmp_path / "q.tsv").write_text(f"q0\t{queries['q0']}\n")
    assert main(["search", str(result.out), "--queries", str(tmp_path / "q.tsv"), "--top", "5", "--run", str(run)]) == 0
    assert [line.split()[2] for line in run.read_text().splitlines()] == [h.id for h in hits]
