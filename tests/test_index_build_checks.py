"""`sentune index` and `sentune.Index.build` check the document ids and the output folder once each, before the model
loads (sentune.api.index.IndexBuild.check); the build that follows reads what that check found."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import WORDS

import sentune
import sentune.core.models
import sentune.search.options
import sentune.search.stored
from sentune.cli import main
from sentune.errors import UserError


@pytest.fixture
def events(monkeypatch) -> list[str]:
    """What a build did, in order: each check of the document ids or of the folder, and each model load."""
    seen: list[str] = []

    def counted(name, real):
        def call(*args, **kwargs):
            seen.append(name)
            return real(*args, **kwargs)

        return call

    check_out = counted("folder", sentune.search.stored.check_out)
    monkeypatch.setattr(sentune.search.stored, "check_out", check_out)  # what check_resume calls
    monkeypatch.setattr(sentune.search.options, "check_document_ids", counted("ids", sentune.search.options.check_document_ids))
    monkeypatch.setattr(sentune.core.models, "load_model_with_runtime", counted("model", sentune.core.models.load_model_with_runtime))  # load_model too
    return seen


def _corpus(tmp_path, n: int = 30):
    rng = np.random.default_rng(0)
    docs = [{"_id": f"d{i}", "title": "", "text": " ".join(rng.choice(WORDS, size=8))} for i in range(n)]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path, docs


def test_sentune_index_checks_the_ids_and_the_folder_once_before_the_model_loads(tiny_model_dir, tmp_path, events):
    corpus, _ = _corpus(tmp_path)
    args = ["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(tmp_path / "index"), "--quiet"]
    assert main(args) == 0
    assert events == ["ids", "folder", "model"]
    events.clear()
    assert main(args) == 0  # the finished index, kept: its folder checked (every file against index.json) once again
    assert events == ["ids", "folder", "model"]


def test_index_build_checks_the_ids_and_the_folder_once_before_the_model_loads(tiny_model_dir, tmp_path, events):
    _, docs = _corpus(tmp_path)
    index = sentune.Index.build(str(tiny_model_dir), docs, tmp_path / "index")
    assert events == ["ids", "folder", "model"] and len(index) == len(docs)
    events.clear()
    with pytest.raises(UserError, match="a folder that is not empty"):  # refused before the model loads
        sentune.Index.build(str(tiny_model_dir), docs, tmp_path)
    assert events == ["ids", "folder"]
