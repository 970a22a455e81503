"""Post-processors: fit on embeddings, transform embeddings, and become a module of the saved model."""

import inspect

from sentune.postprocess.flow import Flow
from sentune.postprocess.whitening import Whitening

POSTPROCESSORS = {"whitening": Whitening, "whiten": Whitening, "flow": Flow}


def postprocessor_settings(kind: str, overrides: list[str], where: str) -> dict:
    """`["learning_rate=1e-3"]` → {"learning_rate": 0.001} for the post-processor `kind`; a name it does not
    take is a ValueError naming `where` (the option) and the names it takes."""
    from sentune.train.recipe import parse_value

    accepted = set(inspect.signature(POSTPROCESSORS[kind]).parameters)
    settings = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or key not in accepted:
            raise ValueError(f"{where} {override}: {kind} takes {', '.join(sorted(accepted))} (as NAME=VALUE)")
        settings[key] = parse_value(value)
    return settings


__all__ = ["POSTPROCESSORS", "Flow", "Whitening", "postprocessor_settings"]
