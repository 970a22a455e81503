"""Post-processors behind one plug-in point. A post-processor follows scikit-learn (`__init__` stores
settings, `fit(X)` returns self with learned state in `name_`, `transform(X)`) and turns itself into
sentence-transformers modules (`to_modules()`), so the saved model carries it. Evaluation (`--whiten`,
`--flow`), saving (`sentune whiten|flow`, pipelines) and the CLI all go through `POSTPROCESSORS`:
a new post-processor is one file and one line there."""

from __future__ import annotations

from typing import Any

from sentune.errors import UserError
from sentune.postprocess.base import PostProcessor
from sentune.postprocess.flow import Flow
from sentune.postprocess.whitening import Whitening

POSTPROCESSORS: dict[str, type[Any]] = {"whitening": Whitening, "whiten": Whitening, "flow": Flow}


def get_postprocessor(kind: str) -> type[Any]:
    if kind not in POSTPROCESSORS:
        raise UserError(f"unknown post-processor {kind!r}; choose {', '.join(POSTPROCESSORS)}")
    return POSTPROCESSORS[kind]


def postprocessor_settings(kind: str, overrides: list[str], where: str) -> dict:
    """`["learning_rate=1e-3"]` → {"learning_rate": 0.001} for the post-processor `kind`; a name it does not
    take is an error naming `where` (the option) and the names it takes."""
    import inspect

    from sentune.core.options import parse_value

    accepted = set(inspect.signature(get_postprocessor(kind)).parameters)
    settings = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or key not in accepted:
            raise UserError(f"{where} {override}: {kind} takes {', '.join(sorted(accepted))} (as NAME=VALUE)")
        settings[key] = parse_value(value)
    return settings


__all__ = ["POSTPROCESSORS", "Flow", "PostProcessor", "Whitening", "get_postprocessor", "postprocessor_settings"]
