"""Whether a folder may take a run of a recipe (no finished run, the same recipe to resume), and the error training
raises. Apart from the trainer and sentune.training.runs, which both use it, because it needs no torch: `sentune train`
answers a wrong --out before torch loads."""

from __future__ import annotations

from pathlib import Path

from sentune.errors import UserError
from sentune.training.recipe import Recipe, same_recipe


class TrainingError(UserError):
    """Training cannot go on (non-finite loss, mismatched resume); the message says why and what to try."""


def check_run_dir(run_dir: Path, recipe: Recipe, resume: bool) -> None:
    """Refuse a folder holding a finished run, another recipe's run, or a run to resume without --resume."""
    config_path = run_dir / "config.yaml"
    if (run_dir / "results.json").exists():
        raise TrainingError(f"{run_dir} holds a finished run (results.json): choose another --out, or pass --overwrite to train it again")
    if resume and config_path.exists() and not same_recipe(config_path, recipe):
        raise TrainingError(f"{config_path} differs from this recipe: resume with the same recipe and overrides")
    if not resume and (run_dir / "checkpoints").exists():
        raise TrainingError(f"{run_dir} already holds a run: pass --resume to continue it, or choose another --out")
