"""The server's application for a user's own FastAPI app: `sentune.serve_app(INDEX_OR_MODEL)` is the app `sentune serve`
runs (sentune.serve.app.create_app, also importable as `sentune.serve.create_app`), /search and /v1/embeddings included,
to mount under a prefix or to serve as it is."""

from __future__ import annotations

import dataclasses
from os import PathLike
from typing import TYPE_CHECKING, Any

from sentune.errors import UserError

if TYPE_CHECKING:
    from fastapi import FastAPI


def serve_app(target: str | PathLike[str], *, device: str | None = None, **settings: Any) -> FastAPI:
    """The FastAPI application `sentune serve TARGET` runs: TARGET an index folder, a search `sentune adapt` run's folder
    or a model (a folder or a name). The model loads when the application starts (its lifespan): mounted in another
    app, run its lifespan from that app's (docs/python.md shows how).

    `settings`: those of sentune.serve.settings.ServeSettings, as `sentune serve`'s options of the same name
    (`api_key`, `system`, `max_batch`, `batch_wait_ms`, `timeout_s`, `model_name`, `backend`, `reranker`, ...). Unlike the command,
    which answers only the loopback names without a key, the application answers any Host: the app it is mounted in
    (or `allowed_hosts=("search.example.com",)`) decides."""
    from sentune.api.common import resolve
    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings, check_libraries, check_numbers, what_to_serve

    check_libraries()
    fields = {f.name for f in dataclasses.fields(ServeSettings)} - {"target", "index", "model", "device"}
    unknown = sorted(set(settings) - fields)
    if unknown:
        raise UserError(f"serve_app: no setting {unknown[0]!r}; the settings are {', '.join(sorted(fields))}")
    index, model = what_to_serve(str(target))
    chosen = ServeSettings(target=str(target), index=index, model=model, device=resolve(device), **settings)
    check_numbers(chosen)
    check_libraries(chosen)
    if chosen.reranker is not None:  # `reranker=` a cross-encoder's folder or hub id: /rerank, and /search reranked
        from sentune.serve.rerank import check_reranker

        chosen = dataclasses.replace(chosen, reranker=check_reranker(str(chosen.reranker)))
    return create_app(chosen)
