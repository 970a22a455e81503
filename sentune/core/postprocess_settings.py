"""The registry of post-processors, importable without torch: each name's class (by import path, loaded by
sentune.postprocess.POSTPROCESSORS) and the settings its constructor takes, so `sentune eval --flow-set` and a
pipeline's `--set flow:...` are checked before any model code loads (tests/test_flow.py keeps the settings equal to
the constructors' parameters, so they cannot drift). A new post-processor is its module and one line here."""

from __future__ import annotations

from sentune.errors import UserError

WHITENING = ("sentune.postprocess.whitening:Whitening", ("n_components", "normalize", "eps", "device"))
REGISTRY: dict[str, tuple[str, tuple[str, ...]]] = {  # name -> (module:class, the settings its constructor takes)
    "whitening": WHITENING,
    "whiten": WHITENING,
    "flow": (
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
    ),
}


def postprocessor_settings(kind: str, overrides: list[str], where: str) -> dict:
    """`["learning_rate=1e-3"]` → {"learning_rate": 0.001} for the post-processor `kind`; a name it does not
    take is an error naming `where` (the option) and the names it takes."""
    from sentune.core.options import parse_value

    if kind not in REGISTRY:
        raise UserError(f"unknown post-processor {kind!r}; choose {', '.join(REGISTRY)}")
    accepted = set(REGISTRY[kind][1])
    settings = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or key not in accepted:
            raise UserError(f"{where} {override}: {kind} takes {', '.join(sorted(accepted))} (as NAME=VALUE)")
        settings[key] = parse_value(value)
    return settings
