"""`sentune serve`: an index or a model behind HTTP (FastAPI on uvicorn): search, OpenAI-style embeddings, a health
check and a search page, the model loaded once per process and concurrent requests batched into shared forward passes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

__all__ = ["ServeSettings", "create_app"]  # sentune.serve_app (sentune.api.serve) builds the app from a folder or a model


def __getattr__(name: str) -> Any:  # imported when first asked for: `import sentune.serve` needs no FastAPI
    if name == "create_app":
        from sentune.serve.app import create_app

        return create_app
    if name == "ServeSettings":
        from sentune.serve.settings import ServeSettings

        return ServeSettings
    raise AttributeError(f"module 'sentune.serve' has no attribute {name!r}")
