"""Post-processors behind one plug-in point. A post-processor follows scikit-learn (`__init__` stores
settings, `fit(X)` returns self with learned state in `name_`, `transform(X)`) and turns itself into
sentence-transformers modules (`to_modules()`), so the saved model carries it. Evaluation (`--whiten`,
`--flow`), saving (`sentune whiten|flow`, pipelines) and the CLI all go through `POSTPROCESSORS`, which is built from
the registry in sentune.core.postprocess_settings: a new post-processor is one file and one line there."""

from __future__ import annotations

import importlib
from typing import Any

from sentune.core.postprocess_settings import REGISTRY, postprocessor_settings
from sentune.errors import UserError
from sentune.postprocess.base import PostProcessor
from sentune.postprocess.flow import Flow
from sentune.postprocess.whitening import Whitening


def _load(target: str) -> type[Any]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def get_postprocessor(kind: str) -> type[Any]:
    if kind not in REGISTRY:
        raise UserError(f"unknown post-processor {kind!r}; choose {', '.join(REGISTRY)}")
    return _load(REGISTRY[kind][0])


POSTPROCESSORS: dict[str, type[Any]] = {name: get_postprocessor(name) for name in REGISTRY}


__all__ = ["POSTPROCESSORS", "Flow", "PostProcessor", "Whitening", "get_postprocessor", "postprocessor_settings"]
