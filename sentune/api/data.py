"""The data directory and the caches from Python, as `sentune data check`, `sentune data download`, `sentune cache list`
and `sentune cache clear` (each command parses its options, calls the function here, and prints what it returns)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from sentune.errors import UserError, names_python_arguments


@dataclass
class DataCheck:
    """What `check_data` found: `ok` when every check passed; `lines`, one a check (`ok   STS12 3108 examples`,
    `FAIL STS13 ...`), the report `sentune data check` prints (`str()`)."""

    folder: Path
    ok: bool
    lines: list[str]

    @property
    def failures(self) -> list[str]:
        """The lines of the checks that failed."""
        return [line for line in self.lines if line.startswith("FAIL")]

    def __str__(self) -> str:
        return "\n".join(self.lines)


def check_data(folder: str | PathLike[str] | None = None, *, checksums: bool = True) -> DataCheck:
    """Check a data directory (default: the one every function reads: $SENTUNE_DATA, else the downloaded default
    folder), as `sentune data check`: every catalogued task and sentence set readable, example counts against the
    official sizes, and (`checksums`) the sha256 of every file its SHA256SUMS lists."""
    from sentune.data.catalog import resolve_data_dir
    from sentune.data.check import check_data_dir

    path = Path(folder) if folder is not None else resolve_data_dir(None)
    if not path.is_dir():
        raise UserError(f"{path}: no such folder (`sentune data download {path}` fetches the canonical sets into it)")
    text, ok = check_data_dir(path, verify_checksums=checksums)
    return DataCheck(path, ok, text.splitlines())


@names_python_arguments()
def download_data(
    folder: str | PathLike[str] | None = None, *, only: str | Sequence[str] | None = None, mirror: str | None = None, show_progress: bool = False
) -> Path:
    """Fetch the canonical SentEval/STS sources and convert them into `folder` (default: the folder every function reads
    when neither `data=` nor $SENTUNE_DATA is given), as `sentune data download`; returns the folder.

    Args:
        only: source names (`senteval`, `wiki`, `snli`, `xnli`, `qqp`, `sts2017`, `sts2017-gold`, ...), a list or
            comma-separated; default: all.
        mirror: a base URL replacing the canonical hosts (a mirror, a test server).
    """
    from sentune.data.catalog import default_data_dir
    from sentune.data.download import download_all

    names = [n.strip() for n in only.split(",") if n.strip()] if isinstance(only, str) else list(only) if only is not None else None
    path = Path(os.fspath(folder)) if folder is not None else default_data_dir()
    download_all(path, base_urls=[mirror] if mirror else None, only=names, show_progress=show_progress)
    return path


@dataclass(frozen=True)
class CacheEntry:
    """One entry of sentune's cache folder (`cache_folder()`: $SENTUNE_CACHE, else ~/.cache/sentune): an array (SG's
    views, SED's targets, a corpus's embeddings) or a model's ONNX export."""

    path: Path
    bytes: int
    age_days: float


def cache_folder() -> Path:
    """sentune's cache folder: $SENTUNE_CACHE, else $XDG_CACHE_HOME/sentune (~/.cache/sentune)."""
    from sentune.core.cache import cache_dir

    return cache_dir()


def cache_entries() -> list[CacheEntry]:
    """Every entry of the cache folder, largest first, as `sentune cache list`."""
    from sentune.core.cache import cache_entries as entries

    return [CacheEntry(path, size, age) for path, size, age in entries()]


def clear_cache(older_than_days: float = 0.0) -> list[Path]:
    """Remove the cache's entries not written for `older_than_days` days (all by default), as `sentune cache clear`;
    returns what was removed."""
    from sentune.core.cache import clear_cache as clear

    if older_than_days < 0:
        raise UserError(f"older_than_days {older_than_days}: a number of days, 0 or more")
    return clear(older_than_days)
