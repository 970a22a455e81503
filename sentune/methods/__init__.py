"""Method registry: a method is a loss (one file, formula and citation in its docstring) plus how its
training data is shaped and which pooling the trained model uses. The one trainer (sentune.train.trainer) does
the rest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class Method:
    name: str
    build_loss: Callable[..., torch.nn.Module]  # (model, train_sentences, cache_dir, **params) -> loss
    pooling: str  # the sentence embedding the trained model outputs (saved with the model)
    columns: tuple[str, ...]  # dataset columns the loss reads, in order ("label" = per-row integer)
    defaults: dict[str, Any] = field(default_factory=dict)
    citation: str = ""
    # After training, from the selected checkpoint: (model, loss, data_dir) -> the model to save. Methods
    # that train a head inside the model (a flow) compile it here; CT keeps the better of its two copies.
    finalize: Callable[[Any, Any, Any], Any] | None = None
    # Batches in dataset order (rows already shuffled in blocks, e.g. CT's 1 positive + 7 negatives).
    ordered_batches: bool = False
    # Methods with their own data shape: (recipe, data_dir) -> dataset columns.
    make_columns: Callable[[Any, Any], dict] | None = None
    # Methods selected on their own dev metric: (loss, data_dir, split) -> a sentence-transformers evaluator.
    make_evaluator: Callable[[Any, Any, str], Any] | None = None


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    if method.name in METHODS:
        raise ValueError(f"method {method.name!r} registered twice")
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    _load_builtin_methods()
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose {', '.join(sorted(METHODS))}")
    return METHODS[name]


def _load_builtin_methods() -> None:
    # Imported here, not at package import: importing sentune stays free of side effects.
    from sentune.methods import bert_cf, bt, ct, mirror, mnrl, multitask, nli, sed, sg, sts_regression  # noqa: F401
