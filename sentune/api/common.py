"""What the Python API's functions share: the device as the command line resolves it, a model given as a name, a path or a
SentenceTransformer in memory. (Progress lines are log records: sentune.core.progress.)"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.errors import UserError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from sentune.core.runtime import Runtime

    Model = str | PathLike[str] | SentenceTransformer
else:
    Model = Any

logger = logging.getLogger("sentune")


def resolve(device: str | None) -> str:
    """`device` (auto, cpu, cuda, cuda:N), else $SENTUNE_DEVICE, else auto: CUDA when present (as --device)."""
    from sentune.core.device import DEVICE_ENV, resolve_device

    return resolve_device(device or os.environ.get(DEVICE_ENV), "device")


def model_name(model: Model) -> str | None:
    """The name or path a model was given as; None for one in memory."""
    return os.fspath(model) if isinstance(model, str | PathLike) else None


def load(model: Model, *, device: str | None = None, trust_remote_code: bool = False) -> SentenceTransformer:
    """A model given as a name or path loaded as `sentune` loads it (sentune.core.models.load_model); one in memory as it is."""
    return load_with_runtime(model, device=device, trust_remote_code=trust_remote_code)[0]


def load_with_runtime(
    model: Model, *, device: str | None = None, backend: str = "torch", trust_remote_code: bool = False
) -> tuple[SentenceTransformer, Runtime]:
    """(model, Runtime) as `load` loads it, with what computes its batches on `backend` (sentune.core.runtime): a model
    in memory runs as it is placed, or on its ONNX graph (`backend` onnx / onnx-int8, for a model on the CPU)."""
    name = model_name(model)
    if name is None:
        from sentune.core.onnx_runtime import backend_runtime

        return model, backend_runtime(model, backend)  # type: ignore[return-value]
    from sentune.core.models import check_model_name, load_model_with_runtime

    check_model_name(name, "model")
    return load_model_with_runtime(name, trust_remote_code=trust_remote_code, device=resolve(device), backend=backend)


def saved_model(model: Model, folder: Path) -> str:
    """The name or path of `model`, or for one in memory the folder it is saved into (a run that loads its model by path)."""
    name = model_name(model)
    if name is not None:
        return name
    folder.mkdir(parents=True, exist_ok=True)
    model.save(str(folder))  # type: ignore[union-attr]
    return str(folder)


def check_folder(folder: Path, option: str) -> None:
    """`folder` is one, or can be made: not a file, nor under one. `option` names it: `--out`, or `out=` (Python)."""
    for above in (folder, *folder.parents):
        if above.exists():
            if not above.is_dir():
                where = "a file" if above == folder else f"under {above}, a file"
                raise UserError(f"{option}{'' if option.endswith('=') else ' '}{folder}: {where}; give a folder")
            return


def check_out(folder: Path, markers: Collection[str], what: str, own: Collection[str] = ()) -> None:
    """`--out` can take a run: a new folder, an empty one, or one holding a run of this kind (one of its `markers` files) to go
    on with; never a file (nor a folder under one), nor a folder of other files, which the run would mix its own with.
    `own`: the names a run of this kind writes before its marker (a model given in memory, ...). Checked before
    anything is written."""
    check_folder(folder, "--out")
    if folder.is_dir() and not any((folder / marker).is_file() for marker in markers):
        others = sorted(p.name for p in folder.iterdir() if p.name not in own)
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise UserError(f"--out {folder}: holds {shown}, not {what}; give a new or empty folder (or {what}'s, to go on with it)")


def check_models(*models: Model) -> None:
    """Each model given by name resolves (a folder, the hub cache, the hub), before anything is written."""
    from sentune.core.models import check_model_name

    for model in models:
        name = model_name(model)
        if name is not None:
            check_model_name(name, "--model")


@contextmanager
def refused_leaves_nothing(folder: Path, cleanup: Callable[[], None] | None = None, before_work: Collection[str] | None = None) -> Iterator[None]:
    """On a UserError, remove what was written into a folder that was new or empty (`cleanup`: a temporary folder's
    own removal instead): a refused call leaves nothing behind. `before_work`: the names written before the work
    starts; a folder holding anything else (a run that failed part-way: its metrics, its checkpoints) is kept."""
    fresh = not folder.exists() or not any(folder.iterdir())
    try:
        yield
    except UserError:
        if cleanup is not None:
            cleanup()
        elif fresh and (before_work is None or not folder.is_dir() or all(p.name in before_work for p in folder.iterdir())):
            shutil.rmtree(folder, ignore_errors=True)
        raise
