"""The README's worked examples, run: a new method is one file plus one registry line, a new task is one
entry in the catalog YAML; nothing else changes and both go through the one trainer and evaluator."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from sentune.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_a_new_method_is_one_file_and_one_registry_line(tmp_path, tiny_model_dir, tiny_data_dir, monkeypatch):
    from conftest import train_tiny

    from sentune.methods import registry

    shutil.copy(DOCS / "example_method.py", tmp_path / "simcse_sym.py")  # the file (here outside the package)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.REGISTRY, "simcse-sym", "simcse_sym:METHOD")  # the registry line
    run = train_tiny(tmp_path, "simcse-sym", tiny_model_dir, tiny_data_dir, params={"temperature": 0.1})
    results = json.loads((run / "results.json").read_text())
    assert results["meta"]["recipe"]["method"] == "simcse-sym" and "STS-B" in results["runs"]["model"]["tasks"]
    assert main(["train", str(tmp_path / "simcse-sym.yaml"), "params.tau=1", "--out", str(tmp_path / "bad")]) == 2  # its params are checked
    sys.modules.pop("simcse_sym", None)


def test_a_new_task_is_one_catalog_entry(tmp_path, tiny_model_dir, tiny_data_dir, monkeypatch):
    import sentune.data.catalog as catalog

    data = tmp_path / "data"
    shutil.copytree(tiny_data_dir, data)
    (data / "mine").mkdir()
    import numpy as np
    from conftest import _sentence

    rng = np.random.default_rng(0)
    rows = [f"g\tf\t2024\t{i}\t{i % 6}\t{_sentence(rng)}\t{_sentence(rng)}" for i in range(12)]
    (data / "mine" / "pairs.csv").write_text("\n".join(rows) + "\n")
    entries = yaml.safe_load(catalog.TASKS_FILE.read_text())
    entries.append({"name": "MY-STS", "kind": "sts", "format": "stsb", "groups": ["mine"], "expected_examples": 12, "files": {"test": "mine/pairs.csv"}})
    tasks_file = tmp_path / "tasks.yaml"
    tasks_file.write_text(yaml.safe_dump(entries))
    monkeypatch.setattr(catalog, "TASKS_FILE", tasks_file)
    catalog.load_catalog.cache_clear()
    try:
        out = tmp_path / "eval"
        assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "mine", "--data", str(data), "--out", str(out), "--quiet"]) == 0
        result = json.loads((out / "results.json").read_text())["runs"]["model"]["tasks"]["MY-STS"]
        # the new task is scored as every STS task: the Spearman of the model's cosines against the gold scores
        from scipy.stats import spearmanr
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(tiny_model_dir), device="cpu")
        a, b = (model.encode([r.split("\t")[col] for r in rows]) for col in (5, 6))
        cosines = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        expected = 100 * spearmanr(cosines, [float(r.split("\t")[4]) for r in rows])[0]
        assert result["n"] == 12 and result["all"]["spearman"] == pytest.approx(expected, abs=1e-3)
    finally:
        catalog.load_catalog.cache_clear()
