"""Composed stages on the tiny model: ct-sed-flow end to end, each stage's output feeding the next, and a
re-run after an interruption recomputes nothing finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentune.cli import main
from sentune.training.pipeline import parse_stages


def test_stage_names_are_parsed_as_the_paper_names_them():
    assert parse_stages("nli-ct-sed-flow") == ["nli", "ct", "sed", "flow"]
    with pytest.raises(ValueError, match="unknown stage"):
        parse_stages("ct-magic")
    with pytest.raises(ValueError, match="cannot come first"):
        parse_stages("sed-flow")


@pytest.mark.slow
def test_ct_sed_flow_runs_and_resumes_without_recomputing(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch, capsys):
    tiny = ["training.max_steps=2", "training.eval_steps=1", "training.batch_size=8"]
    common = ["--model", str(tiny_model_dir), "--members", "2", "--data", str(tiny_data_dir), "--out", str(tmp_path / "p")]
    for stage in ("ct", "sed-learner"):
        for override in tiny:
            common += ["--set", f"{stage}:{override}"]
    args = ["pipeline", "ct-sed-flow", "--learners", "2", *common]
    import sentune.training.trainer

    trained = []
    real_train = sentune.training.trainer.train
    monkeypatch.setattr(sentune.training.trainer, "train", lambda recipe, folder, **k: (trained.append(Path(folder).name), real_train(recipe, folder, **k))[1])
    assert main(args) == 0
    out = tmp_path / "p"
    record = json.loads((out / "pipeline-ct-sed-flow.json").read_text())
    assert record["stages"] == ["ct", "sed", "flow"] and record["final_model"] == str(out / "ct-sed-flow" / "model")
    # Member 1 has the CT stage's recipe and seed: that run is reused, only member 2 is trained.
    assert trained == ["ct", "member-2", "learner-1", "learner-2"]
    for folder in ("ct", "ct-sed/member-2", "ct-sed/learner-1", "ct-sed/learner-2", "ct-sed/full-ensemble", "ct-sed-flow"):
        assert (out / folder / "results.json").is_file(), folder
    import yaml

    config = yaml.safe_load((out / "ct-sed/learner-2/config.yaml").read_text())
    assert config["params"]["members"] == [str(out / "ct/model"), str(out / "ct-sed/member-2/model")]
    assert config["training"]["seed"] == 2 and config["training"]["max_steps"] == 2
    member = yaml.safe_load((out / "ct-sed/member-2/config.yaml").read_text())
    assert member["training"]["max_steps"] == 2 and member["training"]["seed"] == 2  # the CT stage's overrides carry over
    assert json.loads((out / "ct-sed/members.json").read_text()) == ["ct", "ct-sed/member-2"]
    ensemble = json.loads((out / "ct-sed/full-ensemble/results.json").read_text())
    assert ensemble["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"] == ensemble["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"]  # not NaN
    # The Flow stage records its fit (loss at the start and the end) as `sentune eval --flow` does.
    fit = json.loads((out / "ct-sed-flow/results.json").read_text())["meta"]["stage"]["fit"]
    assert fit["steps"] > 0 and set(fit) >= {"loss_first", "loss_last"}

    # A re-run, and a pipeline sharing the prefix, train nothing already trained.
    trained.clear()
    assert main(args) == 0
    assert main(["pipeline", "ct-flow", *common]) == 0
    assert trained == [] and (out / "ct-flow" / "results.json").is_file()

    # The same folder asked to hold a different stage is refused, naming what differs.
    assert main(["pipeline", "ct-sed", *[a if a != "2" else "3" for a in common]]) == 2
    assert "ct-sed holds a stage with other members (" in capsys.readouterr().err


def test_postprocess_stage_options(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    from sentune.postprocess import postprocessor_settings

    assert postprocessor_settings("flow", ["learning_rate=1e-3", "max_steps=3"], "--set flow:") == {"learning_rate": 1e-3, "max_steps": 3}
    base = ["pipeline", "whiten", "--model", str(tiny_model_dir), "--data", str(tiny_data_dir), "--fit-on", "tasks:STS-B", "--out", str(tmp_path / "p")]
    assert main([*base, "--set", "whiten:n_components=8"]) == 0
    from sentence_transformers import SentenceTransformer

    assert SentenceTransformer(str(tmp_path / "p" / "whiten" / "model"), device="cpu").encode(["a man plays"]).shape == (1, 8)
    assert main([*base[:-1], str(tmp_path / "q"), "--set", "whiten:components=8"]) == 2
    assert "--set whiten: components=8: whiten takes device, eps, n_components, normalize" in capsys.readouterr().err


def test_stage_lock_excludes_a_second_holder(tmp_path):
    from sentune.core.locks import run_lock as stage_lock

    with stage_lock(tmp_path / "stage") as first:
        with stage_lock(tmp_path / "stage", wait=False) as second:
            assert first and not second
    with stage_lock(tmp_path / "stage", wait=False) as again:
        assert again  # released when the holder left


@pytest.mark.slow
def test_two_pipeline_workers_share_the_members(tiny_model_dir, tiny_data_dir, tmp_path):
    """Two processes running the same pipeline on one folder: both finish, every member is trained once."""
    import os
    import subprocess
    import sys

    args = [
        sys.executable,
        "-m",
        "sentune.cli",
        "pipeline",
        "--allow-modified-data",  # the tiny data directory
        "ct-sed",
        "--model",
        str(tiny_model_dir),
        "--members",
        "3",
        "--data",
        str(tiny_data_dir),
        "--out",
        str(tmp_path / "p"),
    ]
    for stage in ("ct", "sed-learner"):
        args += ["--set", f"{stage}:training.max_steps=2", "--set", f"{stage}:training.eval_steps=1", "--set", f"{stage}:training.batch_size=8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    workers = [subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    logs = [w.communicate(timeout=600)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], "\n".join(log[-2000:] for log in logs)
    for member in ("member-2", "member-3"):
        assert (tmp_path / "p" / "ct-sed" / member / "results.json").is_file()
        # one training per member: a second would have appended a second final line to its metrics
        finals = [line for line in (tmp_path / "p" / "ct-sed" / member / "metrics.jsonl").read_text().splitlines() if "train_runtime" in line]
        assert len(finals) == 1
    assert (tmp_path / "p" / "ct-sed" / "learner-1" / "results.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["ct-sed/member-2", "ct-sed/learner-2", "ct-sed-flow"])
def test_a_pipeline_killed_inside_a_stage_resumes_without_recomputing(victim, tiny_model_dir, tiny_data_dir, tmp_path):
    """SIGKILL ct-sed-flow inside one stage (after a training stage's first checkpoint, or while the flow
    fits); the re-run resumes that stage from its checkpoint, leaves every finished stage (and the cached
    ensemble targets) untouched, and finishes the pipeline."""
    import os
    import subprocess
    import sys

    from conftest import kill_when

    out = tmp_path / "p"
    args = [
        sys.executable,
        "-m",
        "sentune.cli",
        "pipeline",
        "--allow-modified-data",  # the tiny data directory
        "ct-sed-flow",
        "--model",
        str(tiny_model_dir),
        "--members",
        "2",
        "--learners",
        "2",
        "--data",
        str(tiny_data_dir),
        "--out",
        str(out),
        "--set",
        "flow:max_steps=400",
        "--set",
        "flow:batch_size=4",
    ]
    for stage in ("ct", "sed-learner"):
        args += ["--set", f"{stage}:training.max_steps=6", "--set", f"{stage}:training.eval_steps=1", "--set", f"{stage}:training.batch_size=8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "SENTUNE_CACHE": str(tmp_path / "cache")}
    training_stage = victim != "ct-sed-flow"
    signal_file = out / victim / ("checkpoints/checkpoint-1/COMPLETE" if training_stage else "stage.json")

    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kill_when(proc, signal_file, what=f"the pipeline (before {victim})", timeout=300)
    assert not (out / victim / "results.json").exists(), "killed too late: the stage had already finished"
    finished = {p.parent: p.stat().st_mtime_ns for p in out.rglob("results.json")}
    cached = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("*.npy")}
    assert finished, "nothing had finished before the kill"

    again = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "ct-sed-flow" / "results.json").is_file()
    for folder, mtime in finished.items():
        assert (folder / "results.json").stat().st_mtime_ns == mtime, f"{folder} was recomputed"
    for path, mtime in cached.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was recomputed"
    for metrics in out.rglob("metrics.jsonl"):  # every training stage trained to its end exactly once
        finals = [line for line in metrics.read_text().splitlines() if "train_runtime" in line]
        assert len(finals) == 1, metrics
    if training_stage:
        assert json.loads((out / victim / "results.json").read_text())["meta"]["resumed_from"].startswith("checkpoint-")


@pytest.mark.slow
def test_members_train_while_another_process_holds_the_stage_before_sed(tiny_model_dir, tiny_data_dir, tmp_path):
    """A worker that finds the stage before `sed` taken trains the other members (they start from that stage's
    input model) instead of waiting; once the stage is free it trains it and reuses it as member 1."""
    import os
    import subprocess
    import sys
    import time

    from sentune.core.locks import run_lock as stage_lock

    out = tmp_path / "p"
    args = [
        sys.executable,
        "-m",
        "sentune.cli",
        "pipeline",
        "--allow-modified-data",  # the tiny data directory
        "ct-sed",
        "--model",
        str(tiny_model_dir),
        "--members",
        "3",
        "--data",
        str(tiny_data_dir),
        "--out",
        str(out),
    ]
    for stage in ("ct", "sed-learner"):
        args += ["--set", f"{stage}:training.max_steps=2", "--set", f"{stage}:training.eval_steps=1", "--set", f"{stage}:training.batch_size=8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    members = [out / "ct-sed" / f"member-{k}" / "results.json" for k in (2, 3)]
    with stage_lock(out / "ct"):  # this test process plays the worker training the CT stage
        worker = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not all(m.is_file() for m in members) and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert all(m.is_file() for m in members), "members 2 and 3 were not trained while the CT stage was held"
        assert not (out / "ct" / "results.json").exists() and worker.poll() is None  # it waits for the stage, not past it
    log = worker.communicate(timeout=600)[1]
    assert worker.returncode == 0, log[-2000:]
    assert (out / "ct" / "results.json").is_file() and not (out / "ct-sed" / "member-1").exists()  # member 1 is the CT run
    assert json.loads((out / "ct-sed" / "members.json").read_text()) == ["ct", "ct-sed/member-2", "ct-sed/member-3"]


@pytest.mark.slow
def test_nli_ct_sed_members_run_every_stage_with_their_seed_and_learners_start_from_the_input(tiny_model_dir, tiny_data_dir, tmp_path):
    """The SED paper §4: each member is fine-tuned on NLI and then tuned with CT, with its own seed (distinct NLI models);
    the learners, like the members, start from the pre-trained input model."""
    import yaml

    common = ["--model", str(tiny_model_dir), "--members", "2", "--data", str(tiny_data_dir), "--out", str(tmp_path / "p")]
    for stage in ("nli", "ct", "sed-learner"):
        common += ["--set", f"{stage}:training.max_steps=2", "--set", f"{stage}:training.eval_steps=1", "--set", f"{stage}:training.batch_size=8"]
    common += ["--set", "nli:training.max_sentences=16"]
    assert main(["pipeline", "nli-ct-sed", *common]) == 0
    out = tmp_path / "p"
    sed = out / "nli-ct-sed"
    assert json.loads((sed / "members.json").read_text()) == ["nli-ct", "nli-ct-sed/member-2/ct"]  # member 1: the pipeline's own runs
    nli_2 = yaml.safe_load((sed / "member-2" / "nli" / "config.yaml").read_text())
    ct_2 = yaml.safe_load((sed / "member-2" / "ct" / "config.yaml").read_text())
    assert nli_2["model"] == str(tiny_model_dir) and nli_2["training"]["seed"] == 2
    assert ct_2["model"] == str(sed / "member-2" / "nli" / "model") and ct_2["training"]["seed"] == 2  # on its own NLI model
    ct_1 = yaml.safe_load((out / "nli-ct" / "config.yaml").read_text())
    assert ct_1["model"] == str(out / "nli" / "model") != ct_2["model"]  # the members' NLI models are distinct
    learner = yaml.safe_load((sed / "learner-1" / "config.yaml").read_text())
    assert learner["model"] == str(tiny_model_dir)  # the learner starts from the pre-trained input, not an NLI model
    assert learner["params"]["members"] == [str(out / "nli-ct" / "model"), str(sed / "member-2" / "ct" / "model")]
    assert [s["stage"] for s in json.loads((sed / "stage.json").read_text())["chain"]] == ["nli", "ct"]
