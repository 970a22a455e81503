"""What the Python API's functions share: the device as the command line resolves it, a model given as a name, a path or a
SentenceTransformer in memory. (Progress lines are log records: sentune.core.progress.)"""

from __future__ import annotations

import logging
import os
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
