"""What every kind of adapt candidate is (Candidate) and what decides which a run has (PlanSetup).

A kind is one class, registered in sentune.adaptation.candidates.plan.KINDS (its order is the run order within a phase).
It says what it is in class attributes (`kind`, the row's kind in the results; `phase`; `eligible`: a baseline is
reported, never chosen; `dense`: whether it ranks by its own model's cosine, so a hybrid may fuse it; `tuned`: whether
its weights were trained here) and does
`planned` (which of it a run has), `describe` (the line printed when it starts), `run` (its dev and test scores and
its record) or, for kinds that train, `produce` (the whole record), and `model` (the model it stands for, to save
when chosen). `record` is the one entry point: it reads a finished candidate back (a resumed run) or produces it."""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.records import CandidateRecord, load_record, read_back, record_path, write_record
from sentune.core.progress import say

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.time_plan import Costs
    from sentune.search.fusion import Fusion

PHASES = ("before_race", "raced", "after_race")


@dataclass(frozen=True)
class PlanSetup:
    """What decides which candidates a run has."""

    methods: tuple[str, ...]
    own: str | None  # the untuned pooling the model's own pipeline computes (not tried twice)
    reference: bool = False
    generated_queries: bool = False
    search: bool = False  # a search run (queries ranked against documents), not one on pairs
    labels: bool = True  # --no-labels: the label-free candidates only


@dataclass
class Candidate:
    name: str  # its folder under OUT/candidates and its row in the results
    kind: ClassVar[str] = ""
    phase: ClassVar[str] = "before_race"
    eligible: ClassVar[bool] = True  # baselines are reported, never chosen
    dense: ClassVar[bool] = True  # ranks by its model's cosine alone (False: BM25, or fused with it)
    tuned: ClassVar[bool] = False  # its weights were trained on this run's data (wise may interpolate them)
    # its first look alone leaves a candidate to choose (a raced training ends at its best checkpoint, a fusion is whole):
    # False for one the time stops after its first look with nothing to ship (a supervised race's member is skipped), whose
    # rest the plan reserves against those ranked below it (sentune.adaptation.time_plan.TimePlan.reserved)
    ships_first_look: ClassVar[bool] = True

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        raise NotImplementedError

    def folder(self, ctx: Context) -> Path:
        return ctx.out / "candidates" / self.name

    def describe(self, ctx: Context) -> str:
        raise NotImplementedError

    def depends_on(self, ctx: Context) -> dict:
        """What its record depends on beyond the run's claimed settings (sentune.adaptation.inputs._claim), kept in the
        record: one read back with other values is produced again."""
        return {}

    def finished(self, ctx: Context) -> bool:
        """Whether its folder holds a record of it on this run's inputs (what `record` reads back)."""
        return record_path(self.folder(ctx)).is_file() and self._current(load_record(self.folder(ctx)), ctx)

    def _current(self, found: CandidateRecord, ctx: Context) -> bool:
        return all(found.detail.get(key) == value for key, value in self.depends_on(ctx).items())

    def record(self, label: str, ctx: Context) -> CandidateRecord:
        """Its record: read back when it finished before on the same inputs, else produced now."""
        found = read_back(self, ctx)
        if found is not None and self._current(found, ctx):
            say(f"{label} {self.name}: done before, read back")
            return found
        self.forget_other_inputs(label, ctx, found)
        self.folder(ctx).mkdir(parents=True, exist_ok=True)
        return self.produce(label, ctx)

    def forget_other_inputs(self, label: str, ctx: Context, found: CandidateRecord | None = None) -> None:
        """Its folder goes when it holds a record of other inputs (`found`, else read here), and the user is told which
        inputs changed: a race that trains it before its turn (sentune.adaptation.candidates.supervised_race) clears it
        the way its turn would."""
        found = found if found is not None else read_back(self, ctx)
        if found is None:
            return
        changed = [key for key, value in self.depends_on(ctx).items() if found.detail.get(key) != value]
        say(f"{label} {self.name}: its inputs changed ({', '.join(changed)}): produced again")
        shutil.rmtree(self.folder(ctx))

    def produce(self, label: str, ctx: Context) -> CandidateRecord:
        say(f"{label} {self.name}: {self.describe(ctx)}")
        started = time.perf_counter()
        scores, found = self.run(ctx)
        return write_record(self, scores, found, time.perf_counter() - started, label, ctx)

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        """Its scores of the dev (and test) units, and its record as far as it knows it ({} scores: skipped)."""
        raise NotImplementedError

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """What it is expected to take (sentune.adaptation.time_plan plans --time with it): the texts it encodes and the
        training steps it takes, at the run's measured costs."""
        return 0.0

    def first_look_seconds(self, ctx: Context, costs: Costs) -> float:
        """What its first look is expected to take: the part of it after which the run first compares it (a raced
        training's first round, a supervised candidate's first fold or first rung); a kind that is not raced (a pooling,
        a fusion, nearly free) is all first look."""
        return self.expected_seconds(ctx, costs)

    def whole_seconds(self, ctx: Context, costs: Costs) -> float:
        """What it is expected to take if it goes all the way: a raced kind's expected seconds are the race's average
        share of its steps, and the one the race keeps trains them all."""
        return self.expected_seconds(ctx, costs)

    def scoring_seconds(self, ctx: Context, costs: Costs) -> float:
        """The part of its expected seconds spent scoring it once its training is done: no cap on a training's minutes
        includes it, and a raced training ended at its best checkpoint still pays it (0: a kind that does not train)."""
        return 0.0

    def expected_at_turn(self, ctx: Context, costs: Costs) -> tuple[float, float] | None:
        """Its expected seconds and first look again when its turn comes, for a kind whose cost depends on what the run
        learnt since it planned (sed: how far the race's best candidate trained); None: as planned."""
        return None

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        """The candidates it is built from, any one of which it needs (--time leaves it out without them)."""
        return ()

    def skip(self, reason: str) -> CandidateRecord:
        return CandidateRecord(self.name, self.kind, skipped=reason)

    def model(self, ctx: Context):
        """The model it stands for (its saved folder, or built from the base model)."""
        from sentune.core.models import load_model

        return load_model(str(self.folder(ctx) / "model"), device=ctx.device)

    def fused(self, ctx: Context) -> tuple[Fusion, str] | None:
        """Search: the fusion of BM25 with a dense candidate that ranks for it (sentune.search.index builds that system),
        and that candidate's name; None: its own model's cosine ranks."""
        return None

    def expansion(self, ctx: Context) -> dict | None:
        """Search: what the saved index ranks with beyond its fusion (its settings' `expansion`, sentune.search.expansion:
        a candidate's query feedback, say); None: nothing."""
        return None


@dataclass
class WithRun(Candidate):
    """A candidate that is a training run (OUT/candidates/NAME/run, sentune.training.runs)."""

    def run_folder(self, ctx: Context) -> Path:
        return self.folder(ctx) / "run"

    def scoring_seconds(self, ctx: Context, costs: Costs) -> float:
        return costs.encode(ctx.eval_texts())  # its model encodes every dev and test text (and the documents of a search)

    def depends_on(self, ctx: Context) -> dict:
        # the tokens its model reads, the unchanged model's (sentune.training.trainer.Setup.reads): a record scored at its
        # training rows' length instead is produced again
        return {"reads_tokens": ctx.base.max_seq_length}

    def model(self, ctx: Context):
        from sentune.core.models import load_model

        return load_model(str(self.run_folder(ctx) / "model"), device=ctx.device)

    def race_entry(self, recipe, ctx: Context, member_seconds: float = 0.0):
        """It as a racer of sentune.adaptation.race (`recipe`: its whole budget; `member_seconds`: what it trained before)."""
        from sentune.adaptation.race import Entry

        return Entry(self.name, self.kind, recipe, self.run_folder(ctx), self.folder(ctx), member_seconds, self.depends_on(ctx))


def tuned_sources(ctx: Context, kinds: tuple[str, ...]) -> list[CandidateRecord]:
    """Records of `kinds` with a selection score and weights to build on, finished or raced out."""
    return [r for r in ctx.records.values() if r.kind in kinds and r.scored and r.weights(ctx.out)]


def best(records: list[CandidateRecord]) -> CandidateRecord:
    """The record with the best selection score (the first of a tie); each has one."""
    return max(records, key=lambda r: r.dev_score if r.dev_score is not None else -math.inf)
