"""Post-processors behind one plug-in point. A post-processor follows scikit-learn (`__init__` stores settings,
`fit(X)` returns self with learned state in `name_`, `transform(X)`) and turns itself into sentence-transformers
modules (`to_modules()`), so the saved model carries it.

`POSTPROCESSORS` is the registry: a new post-processor is its module and one `Postprocessor` record here. Everything
else reads it: `sentune eval --WORD SET[:N]` and `--WORD-set`, the `sentune WORD` command, a pipeline's WORD stage
and its `--set WORD:...`, and `sentune adapt`'s post-processed candidates (by `name`). This module imports no model
code: the CLI builds its options and checks settings from it before torch loads; a class loads when it is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sentune.errors import UserError


@dataclass(frozen=True)
class Option:
    """A flag of the `sentune WORD` command that sets one constructor setting."""

    flag: str  # "--k"
    setting: str  # the constructor parameter it sets
    default: Any = None
    help: str | None = None
    type: Callable[[str], Any] = int


@dataclass(frozen=True)
class Postprocessor:
    name: str  # adapt's `--methods` name and its candidate's name
    word: str  # the command (`sentune whiten`), the eval option (`--whiten`), the pipeline stage and the runs' label
    target: str  # "module:Class"
    settings: tuple[str, ...]  # the constructor's parameters, so a NAME=VALUE is checked before torch loads
    about: str  # what help texts call it
    number: str  # the setting that N of `--WORD SET:N` sets
    number_metavar: str  # N in the eval option's help
    number_label: str  # N in a run's label: "{}" gives whiten(nli,256), "seed={}" gives flow(wiki,seed=2)
    options: tuple[Option, ...] = ()  # the `sentune WORD` command's own flags

    def load(self) -> type[Any]:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


POSTPROCESSORS: dict[str, Postprocessor] = {
    p.name: p
    for p in (
        Postprocessor(
            "whitening",
            "whiten",
            "sentune.postprocess.whitening:Whitening",
            ("n_components", "normalize", "eps", "device"),
            "whitening",
            number="n_components",
            number_metavar="k",
            number_label="{}",
            options=(Option("--k", "n_components", None, "components to keep (default: all with non-zero variance)"),),
        ),
        Postprocessor(
            "flow",
            "flow",
            "sentune.postprocess.flow:Flow",
            (
                "n_blocks",
                "hidden",
                "permutation",
                "learning_rate",
                "weight_decay",
                "batch_size",
                "epochs",
                "max_steps",
                "clip",
                "seed",
                "show_progress",
                "device",
                "null_tolerance",
                "null_noise",
            ),
            "a BERT-flow (Glow)",
            number="seed",
            number_metavar="seed",
            number_label="seed={}",
            options=(Option("--blocks", "n_blocks", 3), Option("--epochs", "epochs", 1), Option("--seed", "seed", 0)),
        ),
    )
}


def postprocessor(kind: str) -> Postprocessor:
    """The record of `kind`, by its name or its word ("whitening" or "whiten")."""
    for record in POSTPROCESSORS.values():
        if kind in (record.name, record.word):
            return record
    raise UserError(f"unknown post-processor {kind!r}; choose {', '.join(POSTPROCESSORS)}")


def get_postprocessor(kind: str) -> type[Any]:
    """The class of `kind` (its name or its word)."""
    return postprocessor(kind).load()


def postprocessor_settings(kind: str, overrides: list[str], where: str) -> dict:
    """`["learning_rate=1e-3"]` → {"learning_rate": 0.001} for the post-processor `kind`; a name it does not
    take is an error naming `where` (the option) and the names it takes."""
    from sentune.core.options import parse_value

    accepted = set(postprocessor(kind).settings)
    settings = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or key not in accepted:
            raise UserError(f"{where} {override}: {kind} takes {', '.join(sorted(accepted))} (as NAME=VALUE)")
        settings[key] = parse_value(value)
    return settings


__all__ = ["POSTPROCESSORS", "Option", "Postprocessor", "get_postprocessor", "postprocessor", "postprocessor_settings"]
