"""Resumable runs in named folders: what composed pipelines (sentune.training.pipeline) and `sentune adapt` both stand on.

- `claim`: a folder records the settings it was made for (a JSON file); a folder holding other settings is refused,
  never mixed or silently reused.
- `run_lock` (from sentune.core.locks): an exclusive lock on a run folder, so processes sharing an output folder never
  train one run twice at once.
- `train_run`: train a recipe into its folder unless it is finished, resuming from its checkpoints when it has some;
  with `pause_at_step`, in rounds (racing).
- `train_each`: runs that do not depend on each other (ensemble members, learners), first those no other process holds.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sentune.core.locks import run_lock
from sentune.core.memory import release_unreferenced
from sentune.core.results import write_atomic
from sentune.errors import UserError
from sentune.training.recipe import Recipe

logger = logging.getLogger(__name__)


class RunFolderError(UserError):
    pass


def claim(path: Path, settings: dict, what: str) -> None:
    """Record `settings` in `path` (a JSON file), or check that the one there holds the same; `what` names the folder's
    kind in the refusal ("a stage", "an adapt run")."""
    settings = json.loads(json.dumps(settings))  # as JSON reads it back (tuples → lists)
    if path.is_file():
        held = json.loads(path.read_text())
        changed = sorted(k for k in set(held) | set(settings) if held.get(k) != settings.get(k))
        if changed:
            raise RunFolderError(f"{path.parent} holds {what} with other {', '.join(changed)} ({path}): choose another --out, or remove that folder")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(settings, indent=2))


@dataclass(frozen=True)
class RunState:
    folder: Path
    finished: bool  # results.json and model/ exist
    step: int | None = None  # a paused run: the step it stopped at
    best: dict | None = None  # a paused run: its best step and dev score so far
    training_seconds: float | None = None


def finished_run(folder: Path) -> bool:
    return (folder / "results.json").is_file()


def train_run(
    recipe: Recipe,
    folder: Path,
    *,
    data_dir: Path,
    command: str | None = None,
    wait: bool = True,
    pause_at_step: int | None = None,
    show_progress: bool = True,
    device: str | None = None,
    allow_modified: bool = False,
    data: Any = None,
    dev: Any = None,
) -> RunState | None:
    """Train `recipe` into `folder` unless it is finished; None when `wait` is False and another process holds it.
    `device`: the command's, for a recipe whose training.device is auto; `allow_modified`: --allow-modified-data;
    `data`, `dev`: the training data and dev set as data kinds (sentune.training.trainer.train)."""
    from sentune.training.trainer import train

    with run_lock(folder, wait) as held:
        if not held:
            logger.info("run %s is being trained by another process; later", folder)
            return None
        if finished_run(folder):
            logger.info("run %s done, skipped", folder)
            return RunState(folder, True)
        resume = (folder / "checkpoints").exists()
        result = train(
            recipe,
            folder,
            data_dir=data_dir,
            resume=resume,
            command=command,
            pause_at_step=pause_at_step,
            show_progress=show_progress,
            device=device,
            allow_modified=allow_modified,
            data=data,
            dev=dev,
        )
    release_unreferenced()  # the trainer, its model and optimizer are garbage now: give their memory back before the next run
    if "paused" in result:
        paused = result["paused"]
        return RunState(folder, False, paused["step"], paused["best"], paused["training_seconds"])
    return RunState(folder, True)


def train_each(
    jobs: list[tuple[Recipe, Path]],
    *,
    data_dir: Path,
    command: str | None = None,
    show_progress: bool = True,
    device: str | None = None,
    allow_modified: bool = False,
    data: Any = None,
    dev: Any = None,
) -> None:
    """Runs that do not depend on each other: first every one no other process is training, then wait for the rest
    (`data`, `dev`: every run's, as train_run takes them)."""
    run = partial(train_run, data_dir=data_dir, command=command, show_progress=show_progress, device=device, allow_modified=allow_modified, data=data, dev=dev)
    busy = [job for job in jobs if run(*job, wait=False) is None]
    for recipe, folder in busy:
        run(recipe, folder)
