"""Post-processors behind one plug-in point. A post-processor follows scikit-learn (`__init__` stores
settings, `fit(X)` returns self with learned state in `name_`, `transform(X)`) and turns itself into
sentence-transformers modules (`to_modules()`), so the saved model carries it. Evaluation (`--whiten`,
`--flow`), saving (`sentune whiten|flow`, pipelines) and the CLI all go through `POSTPROCESSORS`:
a new post-processor is one file and one line there."""

from __future__ import annotations

from typing import Any

from sentune.core.postprocess_settings import postprocessor_settings
from sentune.errors import UserError
from sentune.postprocess.base import PostProcessor
from sentune.postprocess.flow import Flow
from sentune.postprocess.whitening import Whitening

POSTPROCESSORS: dict[str, type[Any]] = {"whitening": Whitening, "whiten": Whitening, "flow": Flow}


def get_postprocessor(kind: str) -> type[Any]:
    if kind not in POSTPROCESSORS:
        raise UserError(f"unknown post-processor {kind!r}; choose {', '.join(POSTPROCESSORS)}")
    return POSTPROCESSORS[kind]


__all__ = ["POSTPROCESSORS", "Flow", "PostProcessor", "Whitening", "get_postprocessor", "postprocessor_settings"]
