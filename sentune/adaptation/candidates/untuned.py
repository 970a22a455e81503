"""The model as it is, and its other untuned poolings: scored from the untuned model's vectors, encoded once a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup
from sentune.adaptation.names import UNCHANGED, UNTUNED_POOLINGS
from sentune.adaptation.records import CandidateRecord

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.time_plan import Costs


@dataclass
class Unchanged(Candidate):
    """The model as it is: its own pipeline, untuned."""

    pooling: str = "model"
    kind: ClassVar[str] = "unchanged"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(UNCHANGED)]

    def describe(self, ctx: Context) -> str:
        return "scoring the untuned model"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        return ctx.untuned(self.pooling), CandidateRecord(self.name, self.kind, detail={"setting": self.pooling})

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        first = self.pooling == "model" and not ctx.untuned_encoded()  # one pass encodes every pooling (search: before the plan)
        return costs.encode(ctx.eval_texts()) if first else 0.0

    def model(self, ctx: Context):
        from sentune.modules.build import with_pooling

        return with_pooling(ctx.base, self.pooling)  # 'model' is the base model itself


@dataclass
class Pooling(Unchanged):
    """Another untuned pooling of the model's layers."""

    kind: ClassVar[str] = "pooling"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(f"pooling-{p}", p) for p in UNTUNED_POOLINGS if p != setup.own] if "poolings" in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return f"scoring the untuned model with {self.pooling} pooling"
