"""benchmarks/lib.sh's bookkeeping of kept results (the files the result pages are rendered from): a pipeline's
stage trained again keeps its kept results when it reproduces them and is set aside beside the repeat when not; a run
measured the old way is set aside once. Runs the shell functions on temporary folders; no model, no data."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "benchmarks" / "lib.sh"


def lib(script: str, tmp_path: Path) -> None:
    """Source lib.sh without its environment set-up, point its kept and runs folders into tmp_path, run script."""
    prelude = f'. "{LIB}"; kept="{tmp_path}/kept"; runs="{tmp_path}/runs"; '
    subprocess.run(["bash", "-c", "set -euo pipefail; " + prelude + script], check=True, env={"SENTUNE_NO_SETUP": "1", "PATH": "/usr/bin:/bin"})


def stage(root: Path, rel: str, text: str) -> None:
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / rel / "results.json").write_text(text)


def scored(root: Path, rel: str, score: float, tag: str) -> None:
    """A stage folder whose results.json has a 7-task average and says which run wrote it, with its training log."""
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / rel / "results.json").write_text(json.dumps({"runs": {"model": {"summary": {"avg_all_spearman": score}}}, "tag": tag}))
    (root / rel / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": score}) + "\n")


def tag(folder: Path) -> str:
    return json.loads((folder / "results.json").read_text())["tag"]


def test_keep_tree_keeps_reproduced_stages_and_sets_aside_those_a_repeat_moved(tmp_path):
    src, kept = tmp_path / "runs" / "sed", tmp_path / "kept" / "sed"
    scored(src, "ct", 78.9048, "retrained")
    scored(kept, "ct", 78.9043, "kept")  # reproduced to rounding: the kept run stays
    scored(src, "nli", 73.44, "retrained")
    scored(kept, "nli", 72.48, "kept")  # the repeat moved: the kept run goes beside it
    scored(src, "ct-flow", 76.88, "new fit")
    scored(src, "ct-sed/member-2", 78.0, "member")
    stage(src, "ct/model/inner", "a model's own folder is not a stage")
    lib(f'keep_tree "{src}" sed', tmp_path)
    assert tag(kept / "ct") == "kept"
    assert tag(kept / "nli") == "retrained"
    assert tag(kept / "nli-before-25") == "kept"
    assert tag(kept / "ct-flow") == "new fit"
    assert tag(kept / "ct-sed" / "member-2") == "member"
    assert not (kept / "ct" / "model").exists()
    # only the results the pages read are kept; a training log only beside a set-aside twin (sed.md compares the two)
    assert (kept / "nli" / "metrics.jsonl").is_file() and (kept / "nli-before-25" / "metrics.jsonl").is_file()
    assert not (kept / "ct-flow" / "metrics.jsonl").exists() and not (kept / "ct-flow" / "config.yaml").exists()
    # a third training that moves again: the earlier run is set aside only once, the kept one stays
    scored(src, "nli", 74.0, "third")
    lib(f'keep_tree "{src}" sed', tmp_path)
    assert tag(kept / "nli") == "retrained"
    assert tag(kept / "nli-before-25") == "kept"


def test_set_aside_moves_an_old_run_once(tmp_path):
    stage(tmp_path / "kept", "sed/flow", "old fit")
    lib("set_aside sed/flow -before-25", tmp_path)
    assert (tmp_path / "kept" / "sed" / "flow-before-25" / "results.json").read_text() == "old fit"
    assert not (tmp_path / "kept" / "sed" / "flow").exists()
    stage(tmp_path / "kept", "sed/flow", "new fit")
    lib("set_aside sed/flow -before-25", tmp_path)  # the repeat is measured: a second call moves nothing
    assert (tmp_path / "kept" / "sed" / "flow" / "results.json").read_text() == "new fit"
    assert (tmp_path / "kept" / "sed" / "flow-before-25" / "results.json").read_text() == "old fit"


def test_model_for_trains_a_missing_model_only_while_a_step_that_reads_it_has_no_result(tmp_path):
    # `sentune` stands in for training: it records its call and leaves a finished run (results and model)
    fake = 'sentune() { echo "$*" >> "$runs/calls"; local out; out=$(echo "$*" | sed "s/.*--out \\([^ ]*\\).*/\\1/"); mkdir -p "$out/model"; echo "{}" > "$out/results.json"; }; '
    kept, runs = tmp_path / "kept", tmp_path / "runs"
    stage(kept, "a3", "kept run")  # its results are kept; its model is not here (a fresh checkout)
    stage(kept, "a3-mlp", "{}")
    (runs / ".locks").mkdir(parents=True)
    lib(fake + f'model_for "{kept}/a3-mlp {kept}/a3-standard" a3 001-sg-opt train_data=nli', tmp_path)
    assert "train 001-sg-opt train_data=nli --out" in (runs / "calls").read_text()  # a3-standard still reads the model
    assert (kept / "a3" / "results.json").read_text() == "kept run"  # the kept results are left as they were
    (runs / "calls").unlink()
    stage(kept, "a3-standard", "{}")
    (runs / "a3" / "model").rename(runs / "a3" / "gone")
    lib(fake + f'model_for "{kept}/a3-mlp {kept}/a3-standard" a3 001-sg-opt train_data=nli', tmp_path)
    assert not (runs / "calls").exists()  # every reader kept: nothing trained
