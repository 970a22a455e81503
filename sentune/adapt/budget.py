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
        """`500` (steps), `10m` (minutes), `500,10m` (both), `epoch` or nothing (one pass over the corpus)."""
        budget = cls()
        for part in (p.strip() for p in (text or "epoch").split(",")):
            try:
                if part == "epoch":
                    continue
                if part.endswith(("m", "min")):
                    budget.minutes = float(part.rstrip("min"))
                    if not budget.minutes > 0:
                        raise ValueError
                else:
                    budget.steps = int(part)
                    if budget.steps < 1:
                        raise ValueError
            except ValueError:
                raise AdaptError(f"--budget {text!r}: expected STEPS, MINUTESm, both (500,10m) or epoch") from None
        return budget
