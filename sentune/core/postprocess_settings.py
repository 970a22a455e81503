"""The settings each post-processor takes, by name, importable without torch: `sentune eval --flow-set` and a
pipeline's `--set flow:...` are checked against them before any model code loads (tests/test_flow.py keeps these
names equal to the constructors' parameters, so they cannot drift)."""

from __future__ import annotations

from sentune.errors import UserError

SETTINGS: dict[str, tuple[str, ...]] = {
    "whitening": ("n_components", "normalize", "eps", "device"),
    "flow": (
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
}
SETTINGS["whiten"] = SETTINGS["whitening"]


def postprocessor_settings(kind: str, overrides: list[str], where: str) -> dict:
    """`["learning_rate=1e-3"]` → {"learning_rate": 0.001} for the post-processor `kind`; a name it does not
    take is an error naming `where` (the option) and the names it takes."""
    from sentune.core.options import parse_value

    if kind not in SETTINGS:
        raise UserError(f"unknown post-processor {kind!r}; choose {', '.join(SETTINGS)}")
    accepted = set(SETTINGS[kind])
    settings = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or key not in accepted:
            raise UserError(f"{where} {override}: {kind} takes {', '.join(sorted(accepted))} (as NAME=VALUE)")
        settings[key] = parse_value(value)
    return settings
