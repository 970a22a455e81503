"""benchmarks/lib.sh's bookkeeping of kept results (the files the result pages are rendered from): a pipeline's
stages are kept once and a repeat never overwrites them; a run measured the old way is set aside once. Runs the shell
functions on temporary folders; no model, no data."""

from __future__ import annotations

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
    (root / rel / "config.yaml").write_text(text)


def test_keep_tree_keeps_new_stages_and_leaves_kept_ones_as_they_were(tmp_path):
    src = tmp_path / "runs" / "sed"
    stage(src, "ct", "retrained")
    stage(src, "ct-flow", "new fit")
    stage(src, "ct-sed/member-2", "member")
    stage(src, "ct/model/inner", "a model's own folder is not a stage")
    stage(tmp_path / "kept" / "sed", "ct", "kept")
    lib(f'keep_tree "{src}" sed', tmp_path)
    kept = tmp_path / "kept" / "sed"
    assert (kept / "ct" / "results.json").read_text() == "kept"
    assert (kept / "ct" / "config.yaml").read_text() == "kept"
    assert (kept / "ct-flow" / "results.json").read_text() == "new fit"
    assert (kept / "ct-sed" / "member-2" / "results.json").read_text() == "member"
    assert not (kept / "ct" / "model").exists()


def test_set_aside_moves_an_old_run_once(tmp_path):
    stage(tmp_path / "kept", "sed/flow", "old fit")
    lib("set_aside sed/flow -before-25", tmp_path)
    assert (tmp_path / "kept" / "sed" / "flow-before-25" / "results.json").read_text() == "old fit"
    assert not (tmp_path / "kept" / "sed" / "flow").exists()
    stage(tmp_path / "kept", "sed/flow", "new fit")
    lib("set_aside sed/flow -before-25", tmp_path)  # the repeat is measured: a second call moves nothing
    assert (tmp_path / "kept" / "sed" / "flow" / "results.json").read_text() == "new fit"
    assert (tmp_path / "kept" / "sed" / "flow-before-25" / "results.json").read_text() == "old fit"
