"""docs/python.md runs: every ```python block of the page, in order, in one namespace, with the tiny model in place of
the default (the page's `MODEL = "default"` line) and the tiny data directory as $SENTUNE_DATA, in a scratch folder."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[1] / "docs" / "python.md"
MODEL_LINE = 'MODEL = "default"'


def blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


@pytest.mark.slow  # an end-to-end run of every function (about 5-10 s): `pytest --slow`, scripts/test.sh and CI run it
def test_every_code_block_of_the_python_page_runs(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, capsys):
    code = blocks(PAGE.read_text(encoding="utf-8"))
    assert len(code) >= 7 and sum(MODEL_LINE in block for block in code) == 1  # the line the test replaces, once
    monkeypatch.setenv("SENTUNE_DATA", str(tiny_data_dir))
    monkeypatch.chdir(tmp_path)  # the page writes runs/... where it runs
    namespace: dict = {"__name__": "quickstart"}
    progress = logging.getLogger("sentune")
    before = (progress.level, list(progress.handlers))
    try:
        for number, block in enumerate(code, start=1):
            source = block.replace(MODEL_LINE, f"MODEL = {str(tiny_model_dir)!r}")
            exec(compile(source, f"{PAGE}:block {number}", "exec"), namespace)  # noqa: S102 (the page's own code)
    finally:  # the page configures the `sentune` logger: put it back for the tests after this one
        progress.setLevel(before[0])
        progress.handlers[:] = before[1]
    out = capsys.readouterr().out
    # what the blocks printed and kept: the evaluation table, the trained model, the choice, the index's hits, the app
    assert not namespace["table"].empty and set(namespace["table"]["task"]) == {"STS-B"}
    assert namespace["model"].encode(["a man"]).shape == (1, 32)
    assert namespace["result"].choice in out and (tmp_path / "runs" / "adapt-mine" / "model").is_dir()
    assert namespace["found"].index is not None and len(namespace["hits"]["q1"]) == 5
    assert namespace["answer"]["results"][0]["hits"] and len(namespace["vectors"]["data"][0]["embedding"]) == 32
    # the analysis section: the arrays, tables and pages of encode, layerwise, pairs, tsne, compare, report, data check
    assert namespace["embeddings"].shape == (2, 32) and namespace["layers"].to_pandas().shape == (6, 3)
    assert list(namespace["before_after"].to_pandas().columns[-2:]) == ["before", "after"] and len(namespace["figure"].axes) == 2
    assert namespace["pages"].html.is_file() and "| own pooling |" in out and not namespace["check"].ok  # tiny sets: not the official sizes
    # the models section: whiten, ensemble, pipeline, export, export_index
    whitened = namespace["whitened"].encode(["a man"])[0]  # the components with variance on the corpus, normalised
    assert 16 <= len(whitened) <= 32 and abs(float((whitened**2).sum()) - 1) < 1e-4 and namespace["pair"].encode(["a man"]).shape == (1, 32)
    assert namespace["final"].encode(["a man"]).shape == (1, 16) and (tmp_path / "runs" / "pipeline-mine" / "simcse-whiten" / "model").is_dir()
    assert (namespace["exported"].path / "onnx" / "model.onnx").is_file() and set(namespace["scores"].to_pandas()["task"]) == {"STS-B"}
    assert namespace["in_qdrant"].points == 150 and "collection mine" in out
