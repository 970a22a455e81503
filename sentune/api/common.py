"""What the Python API's functions share: the device as the command line resolves it, a model given as a name, a path or a
SentenceTransformer in memory, and the progress lines sentune's runs still `print` routed to `logging`."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from contextvars import ContextVar
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    Model = str | PathLike[str] | SentenceTransformer
else:
    Model = Any

logger = logging.getLogger("sentune")
PRINTING: ContextVar[bool] = ContextVar("sentune_printing", default=False)  # True within a command (progress_printed)


def resolve(device: str | None) -> str:
    """`device` (auto, cpu, cuda, cuda:N), else $SENTUNE_DEVICE, else auto: CUDA when present (as --device)."""
    from sentune.core.device import DEVICE_ENV, resolve_device

    return resolve_device(device or os.environ.get(DEVICE_ENV), "device")


def model_name(model: Model) -> str | None:
    """The name or path a model was given as; None for one in memory."""
    return os.fspath(model) if isinstance(model, str | PathLike) else None


def load(model: Model, *, device: str | None = None, backend: str = "torch", trust_remote_code: bool = False) -> SentenceTransformer:
    """A model given as a name or path loaded as `sentune` loads it (sentune.core.models.load_model); one in memory as it is."""
    name = model_name(model)
    if name is None:
        return model  # type: ignore[return-value]
    from sentune.core.models import check_model_name, load_model

    check_model_name(name, "model")
    return load_model(name, trust_remote_code=trust_remote_code, device=resolve(device), backend=backend)


def saved_model(model: Model, folder: Path) -> str:
    """The name or path of `model`, or for one in memory the folder it is saved into (a run that loads its model by path)."""
    name = model_name(model)
    if name is not None:
        return name
    folder.mkdir(parents=True, exist_ok=True)
    model.save(str(folder))  # type: ignore[union-attr]
    return str(folder)


class _LogLines(io.TextIOBase):
    """A text stream whose every line becomes a log record (INFO) of `log`."""

    def __init__(self, log: logging.Logger) -> None:
        self.log, self.pending = log, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            if line.strip():
                self.log.info(line)
        return len(text)

    def flush(self) -> None:
        if self.pending.strip():
            self.log.info(self.pending)
        self.pending = ""


@contextmanager
def progress_printed() -> Iterator[None]:
    """Within it the API prints its progress lines on stdout, as the command line shows them (sentune.cli's commands run
    the API inside it), instead of logging them."""
    token = PRINTING.set(True)
    try:
        yield
    finally:
        PRINTING.reset(token)


def tell(log: logging.Logger, line: str) -> None:
    """A progress line: printed within a command (progress_printed), else an INFO record of `log`."""
    if PRINTING.get():
        print(line, flush=True)
    else:
        log.info(line)


@contextmanager
def printed_to_log(log: logging.Logger = logger) -> Iterator[None]:
    """The progress lines a run prints (adapt's candidates, a training's dev evaluations) become INFO records of `log`
    while the API call lasts, so a caller silences them with logging (`logging.getLogger("sentune").setLevel(...)`) and a
    notebook's output keeps only what the call returns. Tracebacks and warnings still go to stderr. Within a command
    (progress_printed) they stay on stdout."""
    if PRINTING.get():
        yield
        return
    stream = _LogLines(log)
    with redirect_stdout(stream):
        try:
            yield
        finally:
            stream.flush()
