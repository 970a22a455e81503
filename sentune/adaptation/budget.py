"""`sentune adapt --budget`, parsed without importing any model code (the CLI checks it before anything heavy loads)."""

from __future__ import annotations

from dataclasses import dataclass

from sentune.errors import UserError


class AdaptError(UserError):
    pass


@dataclass
class Budget:
    """Per candidate: at most `steps` optimiser steps (None: one pass over the corpus) and `minutes` of training."""

    steps: int | None = None
    minutes: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Budget:
        """`500` (steps), `10m` (minutes), `500,10m` (both), `epoch` or nothing (one pass over the corpus), `epoch,10m`.
        Each at most once: two step counts, two time limits, or steps beside `epoch` are refused, not one of them kept."""
        budget = cls()
        given: dict[str, str] = {}  # kind (steps, minutes) -> the part that gave it
        for part in (p.strip() for p in (text or "epoch").split(",")):
            try:
                if part == "epoch":
                    kind = "steps"
                elif part.endswith(("m", "min")):
                    kind, budget.minutes = "minutes", float(part.rstrip("min"))
                    if not budget.minutes > 0:
                        raise ValueError
                else:
                    kind, budget.steps = "steps", int(part)
                    if budget.steps < 1:
                        raise ValueError
            except ValueError:
                raise AdaptError(f"--budget {text!r}: expected STEPS, MINUTESm, both (500,10m) or epoch") from None
            if kind in given:
                what = "step counts (a number, or epoch: one pass over the corpus)" if kind == "steps" else "time limits"
                raise AdaptError(f"--budget {text!r}: two {what}, {given[kind]} and {part}; give one of each at most (e.g. 500,10m)")
            given[kind] = part
        return budget
