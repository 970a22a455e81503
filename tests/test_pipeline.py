"""Composed stages on the tiny model: ct-sed-flow end to end, each stage's output feeding the next, and a
re-run after an interruption recomputes nothing finished."""

from __future__ import annotations

import json

import pytest

from sentune.cli import main
from sentune.pipeline import parse_stages


def test_stage_names_are_parsed_as_the_paper_names_them():
    assert parse_stages("nli-ct-sed-flow") == ["nli", "ct", "sed", "flow"]
    with pytest.raises(ValueError, match="unknown stage"):
        parse_stages("ct-magic")
    with pytest.raises(ValueError, match="cannot come first"):
        parse_stages("sed-flow")


def test_ct_sed_flow_runs_and_resumes_without_recomputing(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    tiny = ["training.max_steps=2", "training.eval_steps=1", "training.batch_size=8"]
    args = ["pipeline", "ct-sed-flow", "--model", str(tiny_model_dir), "--members", "2", "--data", str(tiny_data_dir), "--out", str(tmp_path / "p")]
    for stage in ("ct", "sed", "sed-learner"):
        for override in tiny:
            args += ["--set", f"{stage}:{override}"]
    assert main(args) == 0
    out = tmp_path / "p"
    assert json.loads((out / "pipeline.json").read_text())["stages"] == ["ct", "sed", "flow"]
    for folder in ("1-ct", "2-sed/member-1", "2-sed/member-2", "2-sed/learner", "3-flow"):
        assert (out / folder / "results.json").is_file(), folder
    import yaml

    config = yaml.safe_load((out / "2-sed/learner/config.yaml").read_text())
    assert config["params"]["members"] == [str(out / "2-sed/member-1/model"), str(out / "2-sed/member-2/model")]
    assert (out / "2-sed/full-ensemble/ensemble.json").is_file()
    assert (out / "final-model.txt").read_text().strip() == str(out / "3-flow" / "model")

    import sentune.train

    monkeypatch.setattr(sentune.train, "train", lambda *a, **k: (_ for _ in ()).throw(AssertionError("a finished stage was retrained")))
    assert main(args) == 0
