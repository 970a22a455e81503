"""adapt's records describe the data a training received, never by a `PREFIX:PATH` string: the trainer receives objects
(issue 70), and a candidate's recipe (results.json, candidate.json, each run's config.yaml) says what they were: their
kind, their size and the file under OUT/data (or the candidate's folder) that records them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import WORDS

from sentune.cli import main
from sentune.data.catalog import TRAIN_FILES
from sentune.data.user_data import write_corpus, write_scored_pairs
from sentune.tasks.dev_sets import PAIRS_PREFIX, QUERIES_PREFIX

# Every `PREFIX:` a recipe file may name data by (sentune.data.catalog's train_data forms, sentune.tasks.dev_sets' dev
# forms, and the API's `given:`): a record holding one would hold a string to slice apart.
PREFIXES = (*(f"{name}:" for name in TRAIN_FILES), "tasks:", "given:", PAIRS_PREFIX, QUERIES_PREFIX)


def _data_fields(node, where: str = ""):
    """Every (where, value) of a `train_data` or `dev` key anywhere in a record."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("train_data", "dev"):
                yield f"{where}.{key}", value
            yield from _data_fields(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _data_fields(value, f"{where}[{i}]")


def prefixed_data(out: Path) -> list[str]:
    """Each train_data or dev of the run's records that is a prefixed string, named by its file and key."""
    found = []
    for path in [out / "results.json", *out.rglob("candidate.json"), *out.rglob("config.yaml")]:
        record = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
        found += [f"{path.relative_to(out)}{key}: {value}" for key, value in _data_fields(record) if isinstance(value, str) and value.startswith(PREFIXES)]
    return found


def recipes(out: Path) -> dict[str, dict]:
    """Each candidate's recipe in results.json."""
    return {name: c["recipe"] for name, c in json.loads((out / "results.json").read_text())["candidates"].items() if "recipe" in c}


def test_the_check_finds_a_prefixed_string_wherever_a_record_holds_one(tmp_path):
    """prefixed_data, the check below, on records planted with and without a `PREFIX:PATH` string."""
    (tmp_path / "candidates" / "a" / "run").mkdir(parents=True)
    (tmp_path / "results.json").write_text(json.dumps({"candidates": {"a": {"recipe": {"train_data": {"kind": "sentences", "rows": 3}}}}}))
    (tmp_path / "candidates" / "a" / "run" / "config.yaml").write_text(yaml.safe_dump({"train_data": "stsb", "eval": {"dev": "STS-B-dev"}}))
    assert prefixed_data(tmp_path) == []  # a named set and a task are names, not paths to slice
    (tmp_path / "candidates" / "a" / "candidate.json").write_text(json.dumps({"detail": {"recipes": [{"eval": {"dev": "pairs:/x/dev.tsv"}}]}}))
    assert prefixed_data(tmp_path) == [str(Path("candidates/a/candidate.json")) + ".detail.recipes[0].eval.dev: pairs:/x/dev.tsv"]


@pytest.mark.slow
def test_a_pairs_runs_records_describe_the_data_each_training_was_given(tiny_model_dir, tmp_path):
    """A run with a label-free trained candidate (the corpus, the selection pairs as dev) and the supervised one (its
    cross-fitted folds and refit on the selection pairs): no record names data by a prefixed string; each describes
    them, the source being the file that records them."""
    rng = np.random.default_rng(0)
    sentence = lambda: " ".join(rng.choice(WORDS, size=6))  # noqa: E731
    write_corpus(tmp_path / "corpus.txt", [sentence() for _ in range(120)])
    write_scored_pairs(tmp_path / "dev.tsv", [(sentence(), sentence(), float(rng.uniform(0, 5))) for _ in range(100)])
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--corpus", str(tmp_path / "corpus.txt"), "--dev", str(tmp_path / "dev.tsv")]
    assert main([*args, "--methods", "simcse,supervised", "--budget", "2", "--out", str(out)]) == 0
    assert prefixed_data(out) == []
    found = recipes(out)
    select = found["simcse"]["eval"]["dev"]
    assert select == {"kind": "scored-pairs", "rows": select["rows"], "source": str(out / "data" / "dev-select.tsv"), "labels": "scores"}
    assert select["rows"] == len((out / "data" / "dev-select.tsv").read_text().splitlines())
    assert found["simcse"]["train_data"] == {"kind": "sentences", "rows": 120, "source": str(out / "data" / "corpus.txt")}
    refit = found["supervised"]
    assert refit["train_data"] == {
        "kind": "scored-pairs",
        "rows": select["rows"],
        "source": str(out / "candidates" / "supervised" / "train.tsv"),
        "labels": "scores",
    }
    assert refit["eval"]["dev"] == "none"  # fixed in advance: nothing chosen on the rows it trained on


@pytest.mark.slow
def test_a_search_runs_records_describe_the_data_each_training_was_given(tiny_model_dir, tmp_path):
    """The same on queries: the selection queries with their pool as dev, the supervised candidate's tuples with mined
    negatives as its training data."""
    from test_adapt_retrieval import _toy_beir

    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out)]
    assert main([*args, "--methods", "simcse,supervised", "--budget", "2"]) == 0
    assert prefixed_data(out) == []
    found = recipes(out)
    assert found["simcse"]["eval"]["dev"]["kind"] == "retrieval-set" and found["simcse"]["eval"]["dev"]["source"] == str(out / "data" / "dev-select")
    assert found["supervised"]["train_data"]["kind"] == "tuples"
    assert found["supervised"]["train_data"]["source"] == str(out / "candidates" / "supervised" / "train.tsv")


def test_a_run_recorded_with_prefixed_strings_resumes_under_the_recipe_that_describes_the_same_files(tmp_path):
    """A run paused before records described their data (config.yaml: `labelled:PATH`, `pairs:PATH`) is the same recipe
    as today's, which describes the same files: it resumes rather than being refused; other files are another recipe."""
    from dataclasses import replace

    from sentune.data.kinds import ScoredPairs
    from sentune.training.recipe import load_recipe, same_recipe

    train, dev = tmp_path / "train.tsv", tmp_path / "dev-select.tsv"
    write_scored_pairs(train, [("a b", "c d", 1.0), ("e f", "g h", 0.0)])
    write_scored_pairs(dev, [("a b", "e f", 2.0), ("c d", "g h", 4.0)])
    recipe = load_recipe("adapt/cosent", check=False)
    described = replace(recipe, train_data=ScoredPairs.from_file(train).describe(train), eval=replace(recipe.eval, dev=ScoredPairs.from_file(dev).describe()))
    older = tmp_path / "older.yaml"
    older.write_text(yaml.safe_dump({**recipe.to_dict(), "train_data": f"labelled:{train}", "eval": {**recipe.to_dict()["eval"], "dev": f"pairs:{dev}"}}))
    assert same_recipe(older, described)
    older.write_text(
        yaml.safe_dump({**recipe.to_dict(), "train_data": f"labelled:{tmp_path / 'other.tsv'}", "eval": {**recipe.to_dict()["eval"], "dev": f"pairs:{dev}"}})
    )
    assert not same_recipe(older, described)
    older.write_text(yaml.safe_dump({**recipe.to_dict(), "train_data": f"tuples:{train}", "eval": {**recipe.to_dict()["eval"], "dev": f"pairs:{dev}"}}))
    assert not same_recipe(older, described)  # the same file read as another kind: other data
