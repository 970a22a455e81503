"""The server's application for a user's own FastAPI app: `sentune.serve_app(index_or_model)` is the app `sentune serve`
runs (sentune.serve.app.create_app, also importable as `sentune.serve.create_app`), /search and /v1/embeddings included,
to mount under a prefix or to serve as it is.

`checked_settings` is the one place the server's settings are checked, for `sentune serve` (sentune.cli.serve,
which spells them as options) and for Python callers (as keyword arguments)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.errors import UserError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from sentune.serve.settings import ServeSettings


def checked_settings(
    target: str,
    *,
    device: str | None = None,
    spell: Callable[[str, object], str] | None = None,
    then: Callable[[ServeSettings], None] | None = None,
    held: bool = False,
    **values: Any,
) -> ServeSettings:
    """ServeSettings for serving `target` (an index folder, an adapt run's folder, a model's folder or name), each
    checked before anything heavy loads: the numbers, the libraries, what the target is, the reranker, and last the
    device (it imports torch). An error names a setting as `spell` does (default: the Python argument, `max_batch=0`;
    the command passes its options' spelling). `then`: the caller's own checks, after the numbers and before anything
    is looked up (the command's address and port). `held`: `target` is only a name, the model is the caller's object."""
    from sentune.core.device import DEVICE_ENV, resolve_device
    from sentune.serve.settings import ServeSettings, argument, check_libraries, check_numbers, what_to_serve

    spell = spell or argument
    python = spell is argument
    check_libraries(spell=spell)
    fields = {f.name for f in dataclasses.fields(ServeSettings)} - {"target", "index", "model", "device"}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise UserError(f"serve_app: no setting {unknown[0]!r}; the settings are {', '.join(sorted(fields))}")
    chosen = ServeSettings(target=target, index=None, model=None, **values)
    check_numbers(chosen, spell)
    if then is not None:
        then(chosen)
    check_libraries(chosen, spell)
    index: str | None
    model: str | None
    if held:
        if chosen.backend != "torch":
            raise UserError(f"{spell('backend', chosen.backend)}: a model in memory is served with torch; give its folder to serve an exported graph")
        index, model = None, target
    else:
        index, model = what_to_serve(target, chosen.system, "index_or_model" if python else "INDEX_OR_MODEL")
    if chosen.index_model is not None:
        if index is None:
            raise UserError(f"{spell('index_model', chosen.index_model)}: only with an index; {target} is a model, served as it is")
        from sentune.core.models import check_model_name

        given = str(chosen.index_model)
        try:
            found = check_model_name(given, "--model")
        except UserError as exc:  # its messages name the option as `where NAME`
            raise type(exc)(str(exc).replace(f"--model {given}", spell("index_model", given), 1)) from None
        chosen = dataclasses.replace(chosen, index_model=str(Path(found).resolve()) if Path(found).is_dir() else found)  # workers start elsewhere
    if chosen.reranker is not None:  # a cross-encoder's folder or hub id: /rerank, and /search reranked
        from sentune.serve.rerank import check_reranker

        try:
            reranker = check_reranker(str(chosen.reranker))
        except UserError as exc:  # its messages name the option
            raise UserError(str(exc).replace("--reranker", "reranker=", 1) if python else str(exc)) from None
        chosen = dataclasses.replace(chosen, reranker=reranker)
    where = "device" if python else "--device"
    resolved = resolve_device(device or os.environ.get(DEVICE_ENV), where)  # imports torch, after every other check
    chosen = dataclasses.replace(chosen, index=index, model=model, device=resolved)
    check_numbers(chosen, spell)  # again: some choices hold on the CPU only (small_batches onnx)
    return chosen


def serve_app(index_or_model: Any, *, device: str | None = None, **settings: Any) -> FastAPI:
    """The FastAPI application `sentune serve` runs: `index_or_model` an index folder, a search `sentune adapt` run's
    folder, a model (a folder or a name), a `sentune.Index` (served with the model it was opened with, `index_model=`), or a
    SentenceTransformer you hold (served as it is, with torch; `model_name=` names it in /v1/embeddings answers). The model loads when the application starts (its
    lifespan); mounted in an app that does not run it, on its first request (docs/python.md shows both).

    `settings`: those of sentune.serve.settings.ServeSettings, as `sentune serve`'s options of the same name
    (`api_key`, `system`, `max_batch`, `batch_wait_ms`, `timeout_s`, `model_name`, `backend`, `reranker`, ...). Unlike the command,
    which answers only the loopback names without a key, the application answers any Host: the app it is mounted in
    (or `allowed_hosts=("search.example.com",)`) decides."""
    from sentune.api.index import Index
    from sentune.serve.app import create_app

    if isinstance(index_or_model, Index):
        given = index_or_model.given_model  # the model it was opened with, unless it ranks with the one it names
        if isinstance(given, str | PathLike) and "index_model" not in settings:
            settings = settings | {"index_model": os.fspath(given)}
        chosen = checked_settings(os.fspath(index_or_model.path), device=device or index_or_model.device, **settings)
        app = create_app(chosen)
        app.state.index = index_or_model  # the Index (and a temporary folder it owns) lives as long as the app
        return app
    if isinstance(index_or_model, str | PathLike):
        return create_app(checked_settings(os.fspath(index_or_model), device=device, **settings))
    from sentence_transformers import SentenceTransformer

    if not isinstance(index_or_model, SentenceTransformer):
        raise UserError(f"index_or_model: a {type(index_or_model).__name__}; give a folder or a model's name, a sentune.Index or a SentenceTransformer")
    name = settings.get("model_name") or held_model_name(index_or_model)
    # served where it is, unless `device` says otherwise: the caller's object is moved only when asked
    chosen = checked_settings(name, device=device or str(index_or_model.device), held=True, **settings)
    if device is not None:
        index_or_model.to(chosen.device)
    return create_app(chosen, model=index_or_model)


def held_model_name(model: Any) -> str:
    """What a model in memory is called in /v1/embeddings answers without `model_name=`: the name or folder it was
    loaded from (its first module's), else "model"."""
    first = model[0] if len(model) else None
    source = getattr(getattr(getattr(first, "auto_model", None), "config", None), "_name_or_path", None) or "model"
    return os.path.basename(os.path.normpath(source)) if os.path.isdir(source) else source
