"""Output folders that two processes never write at once, and finished results that are never replaced silently.

- `run_lock`: an exclusive lock on a folder (util `flock` on FOLDER/.lock); the OS drops it when the process dies, so a
  killed run leaves no stale lock.
- `exclusive_output`: what a command that writes results.json into `--out` holds while it runs (`sentune eval`): an
  occupied folder (a finished results.json) is refused unless the user asked to replace it, and a folder another
  process is writing is refused at once, naming the lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from sentune.errors import UserError

LOCK_NAME = ".lock"


@contextmanager
def run_lock(folder: Path, wait: bool = True):
    """Yields True holding the folder's lock; False at once when `wait` is False and another process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_NAME, os.O_CREAT | os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _refuse_finished(folder: Path, option: str) -> None:
    if (folder / "results.json").is_file():
        raise UserError(f"{option} {folder} already holds results ({folder / 'results.json'}): choose another folder, or pass --overwrite to replace them")


@contextmanager
def exclusive_output(folder: Path, overwrite: bool = False, option: str = "--out"):
    """Hold `folder` for one command's results. Refused (UserError, nothing on disk changed) when it holds a finished
    results.json and `overwrite` is False, or when another process holds it. A folder this call created is removed
    again when the command fails, so a failed run leaves no empty folder behind."""
    folder = Path(folder)
    if not overwrite:
        _refuse_finished(folder, option)
    created = not folder.exists()
    with run_lock(folder, wait=False) as held:
        if not held:
            raise UserError(f"{option} {folder} is being written by another sentune run (it holds {folder / LOCK_NAME}): wait for it, or choose another folder")
        try:
            if not overwrite:  # another run may have finished between the first look and the lock
                _refuse_finished(folder, option)
            yield folder
        except BaseException:
            if created and {p.name for p in folder.iterdir()} <= {LOCK_NAME}:
                shutil.rmtree(folder, ignore_errors=True)
            raise
