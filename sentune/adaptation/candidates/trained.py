"""Candidates that train without labels, and those built on their weights: the bundled recipes raced against each
other (sentune.adaptation.race), SED over seeds of the best of them, WiSE-FT's interpolation of the best tuned weights with
the unchanged model's (sentune.adaptation.wise), and sentence-transformers' own SimCSE recipe, reported beside them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup, WithRun, best, tuned_sources
from sentune.adaptation.names import GENQ, REFERENCE, SED, TRAINED, WISE
from sentune.adaptation.records import CandidateRecord, finish_trained, load_record, standing, trained_record, write_record
from sentune.core.progress import say

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.time_plan import Costs


@dataclass
class Trained(WithRun):
    """A bundled recipe trained on the corpus (sentune/recipes/adapt/NAME.yaml), raced against the others
    (sentune.adaptation.run trains the raced ones together; their records are written by the race)."""

    recipe_name: str = ""
    kind: ClassVar[str] = "trained"
    phase: ClassVar[str] = "raced"
    tuned: ClassVar[bool] = True

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        found: list[Candidate] = [cls(m, f"adapt/{m}") for m in TRAINED if m in setup.methods]
        if setup.generated_queries:  # GenQ trains on the user's generated queries (--queries-from)
            found.append(cls(GENQ, f"adapt/{GENQ}"))
        return found

    def describe(self, ctx: Context) -> str:
        return f"training ({ctx.budget_text()}; early stop on the selection pairs)"

    def _current(self, found: CandidateRecord, ctx: Context) -> bool:
        from sentune.adaptation.race_rows import raced_elsewhere

        return super()._current(found, ctx) and not raced_elsewhere(found, ctx)  # stopped on other rows: raced again

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """Its share of the race (sentune.adaptation.time_plan.race_share: the steps racing and halving leave it, on
        average), its evaluations on the selection units within them, the race's checks of it on the train pairs it
        reads (race_checks), and its scoring."""
        from sentune.adaptation.time_plan import race_share

        return self._seconds(ctx, costs, race_share(costs.raced))

    def whole_seconds(self, ctx: Context, costs: Costs) -> float:
        """All of its steps (the racer the race keeps to the end), the race's checks of it and its scoring."""
        return self._seconds(ctx, costs, 1.0)

    def _seconds(self, ctx: Context, costs: Costs, share: float) -> float:
        from sentune.adaptation.context import EVALUATIONS

        recipe = ctx.recipe(self.recipe_name)
        training = costs.steps(recipe, recipe.training.max_steps) + EVALUATIONS * costs.encode(ctx.selection_texts())
        return share * training + race_checks(ctx, costs) + self.scoring_seconds(ctx, costs)

    def first_look_seconds(self, ctx: Context, costs: Costs) -> float:
        """The race's first round: the first rung of its steps with its evaluations in them, its evaluation at the pause
        and the race's check of it on the train pairs (it is scored only once it finishes)."""
        from sentune.adaptation.context import EVALUATIONS
        from sentune.adaptation.race import RUNGS

        recipe = ctx.recipe(self.recipe_name)
        training = costs.steps(recipe, recipe.training.max_steps) + EVALUATIONS * costs.encode(ctx.selection_texts())
        first = RUNGS[0] * training + costs.encode(ctx.selection_texts()) + race_checks(ctx, costs) / (len(RUNGS) - 1)
        return min(first, self.expected_seconds(ctx, costs))

    def finish(self, label: str, ctx: Context) -> dict[str, np.ndarray]:
        return finish_trained(self, label, ctx)


def race_checks(ctx: Context, costs: Costs) -> float:
    """The seconds of the race's checks of one racer on the evidence train pairs it reads (sentune.adaptation.race_rows):
    its best checkpoint encoded once after each round but the last (an upper bound: most racers stop or finish
    sooner, and a checkpoint already scored is read back)."""
    from sentune.adaptation.race import RUNGS
    from sentune.adaptation.race_rows import race_train_pairs

    return (len(RUNGS) - 1) * costs.encode(2 * race_train_pairs(ctx))


@dataclass
class Ensemble(WithRun):
    """SED: seeds 2..N of the best trained candidate (seed 1 is its own run) distilled into one learner."""

    kind: ClassVar[str] = "sed"
    phase: ClassVar[str] = "after_race"
    tuned: ClassVar[bool] = True

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(SED)] if SED in setup.methods else []

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """Seeds 2..N of a trained candidate, each for the steps the race is expected to leave one (once it is over: as
        many as the best of them needed), every member's encoding of the corpus (the learner's targets), the learner
        raced alone with its evaluations, and its scoring."""
        if not ctx.plan.raced:
            return 0.0
        members, learner = self._parts(ctx, costs)
        return members + learner + race_checks(ctx, costs) + self.scoring_seconds(ctx, costs)

    def first_look_seconds(self, ctx: Context, costs: Costs) -> float:
        """Its members, their targets, and its learner's first round of the race with the race's check of it; the rest
        is the learner's later rounds and its scoring. A member trains as many steps as the race's best candidate
        needed to reach its best checkpoint (produce): before the race that is known only to be at least its first
        round, so the first look counts the members to the race's first rung, and at its turn (expected_at_turn) the
        members' real steps are counted."""
        from sentune.adaptation.race import RUNGS

        members, learner = self._parts(ctx, costs, first=True)
        return min(members + RUNGS[0] * learner + race_checks(ctx, costs) / (len(RUNGS) - 1), self.expected_seconds(ctx, costs))

    def expected_at_turn(self, ctx: Context, costs: Costs) -> tuple[float, float] | None:
        """Once the race is over its members' steps are known (the best trained candidate's best step): its expected
        seconds and first look again, with them."""
        if not tuned_sources(ctx, (Trained.kind,)):
            return None
        return self.expected_seconds(ctx, costs), self.first_look_seconds(ctx, costs)

    def _parts(self, ctx: Context, costs: Costs, *, first: bool = False) -> tuple[float, float]:
        """The seconds of its members with their targets, and of its learner's training with its evaluations; the
        members, before the race is over, at the share of their steps the race is expected to leave one (`first`: its
        first rung), since which candidate wins and where its best checkpoint lies are not known yet."""
        from sentune.adaptation.context import EVALUATIONS
        from sentune.adaptation.race import RUNGS
        from sentune.adaptation.time_plan import race_share
        from sentune.training.recipe import load_recipe

        trained = tuned_sources(ctx, (Trained.kind,))
        if trained:
            source = best(trained)
            member = costs.steps(self.member_recipe(ctx, source.name, self.member_steps(source), 2), self.member_steps(source))
        else:
            sources = [ctx.recipe(c.recipe_name) for c in ctx.plan.raced]
            if not sources:
                return 0.0, 0.0
            share = RUNGS[0] if first else race_share(costs.raced)
            member = sum(costs.steps(r, r.training.max_steps) * share for r in sources) / len(sources)
        learner = load_recipe("adapt/sed", check=False)  # its members are known once the race is over
        steps = ctx.config.budget.steps or -(-len(ctx.inputs.corpus) // learner.training.batch_size)  # ctx.recipe's default
        training = costs.steps(learner, steps) + EVALUATIONS * costs.encode(ctx.selection_texts())
        targets = ctx.config.sed_members * costs.encode(len(ctx.inputs.corpus))  # every member encodes the corpus once
        return (ctx.config.sed_members - 1) * member + targets, training

    @staticmethod
    def member_steps(source: CandidateRecord) -> int:
        """A member's steps: as many as `source` needed to reach its best checkpoint (at least one evaluation's)."""
        return max(source.best_step or 1, source.detail["recipe"]["training"]["eval_steps"])

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        return tuple(c.name for c in others if isinstance(c, Trained))

    def describe(self, ctx: Context) -> str:
        return f"distilling {ctx.config.sed_members} seeds of the best trained candidate ({ctx.budget_text()})"

    def _current(self, found: CandidateRecord, ctx: Context) -> bool:
        from sentune.adaptation.race_rows import raced_elsewhere

        return super()._current(found, ctx) and not raced_elsewhere(found, ctx)

    def record(self, label: str, ctx: Context) -> CandidateRecord:
        """Its record, read back or produced; a learner the race stopped on other rows than this run's (a run resumed
        with --train) races again from its paused checkpoint, its members' runs kept (they do not depend on the race)."""
        from sentune.adaptation.race_rows import raced_elsewhere
        from sentune.adaptation.records import read_back, record_path

        found = read_back(self, ctx)
        if found is not None and super()._current(found, ctx) and raced_elsewhere(found, ctx):
            say(f"{label} {self.name}: stopped by the race on other selection rows: raced again")
            record_path(self.folder(ctx)).unlink()
        return super().record(label, ctx)

    @staticmethod
    def member_recipe(ctx: Context, source: str, steps: int, seed: int):
        """Seed `seed` of `source`'s recipe for `steps` steps, its last step kept: the steps were chosen on the
        selection part already (the source's best checkpoint), so a member is not chosen again among its own
        checkpoints; it is evaluated only at its end."""
        from dataclasses import replace

        recipe = ctx.recipe(f"adapt/{source}", steps=steps, seed=seed)
        return replace(recipe, training=replace(recipe.training, eval_steps=steps, patience=0, checkpoint="last"))

    def produce(self, label: str, ctx: Context) -> CandidateRecord:
        """Seeds 2..N of the best trained candidate on the selection pairs (finished, or raced out: its best checkpoint
        is seed 1), each trained for as many steps as that candidate needed to reach its best checkpoint and kept at its
        last step; then the learner, raced alone against the unchanged model and that candidate."""

        from sentune.adaptation.race import race
        from sentune.training.runs import train_each

        trained = tuned_sources(ctx, (Trained.kind,))
        if not trained:
            return write_record(self, {}, self.skip("no trained candidate with weights left to take an ensemble from (--prune removes them)"), 0.0, label, ctx)
        source = best(trained)  # finished or raced out: its best checkpoint is seed 1
        steps = self.member_steps(source)
        say(f"{label} {self.name}: {self.describe(ctx)}: seeds 1..{ctx.config.sed_members} of {source.name} ({steps} steps each)")
        started = time.perf_counter()
        jobs = [(self.member_recipe(ctx, source.name, steps, seed), self.folder(ctx) / f"member-{seed}") for seed in range(2, ctx.config.sed_members + 1)]
        data, dev = ctx.training_data(jobs[0][0]) if jobs else None, ctx.training_dev_data()
        train_each(jobs, data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress, data=data, dev=dev)
        members = [str(source.weights(ctx.out)), *(str(folder / "model") for _, folder in jobs)]
        member_seconds = time.perf_counter() - started
        recipe = ctx.recipe("adapt/sed", members=members)
        rivals = {source.name: (ctx.store.scores(source.name)["select"], source.weights(ctx.out))}  # its weights: scored on the race's train pairs
        race([self.race_entry(recipe, ctx, member_seconds)], ctx, lambda e: finish_trained(self, label, ctx, source.name, member_seconds), rivals=rivals)
        return self._charged_all(load_record(self.folder(ctx)), time.perf_counter() - started, ctx)

    def _charged_all(self, record: CandidateRecord, spent: float, ctx: Context) -> CandidateRecord:
        """Its record with all the seconds it took: the members' targets and the learner's pooling choice run outside
        the trainings' clocks its record counts (mrpc: 6.9 min counted of 14.0), and the time plan charges what it
        took."""
        import json

        from sentune.adaptation.records import record_path
        from sentune.core.results import write_atomic

        if spent > record.seconds:
            record.seconds = spent
            write_atomic(record_path(self.folder(ctx)), json.dumps(record.to_dict(), indent=2))
        return record


@dataclass
class Wise(Candidate):
    """WiSE-FT: the best tuned candidate's weights (finished or raced out) interpolated with the unchanged model's, the
    mix chosen on the selection units. A model trained on the selection part would choose its own mix on the rows it
    learned: only those trained on --train (or on no labels) qualify."""

    kind: ClassVar[str] = "wise"
    phase: ClassVar[str] = "after_race"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(WISE)] if WISE in setup.methods else []

    def depends_on(self, ctx: Context) -> dict:
        from sentune.adaptation.evidence import held_out_digest

        source = self.tuned_end(ctx)
        return {
            "train_sha256": ctx.inputs.train_sha256,  # a supervised model trained on --train may be its tuned end
            "train_held_out": held_out_digest(ctx.evidence),
            # its tuned end as it stands: a record mixed from another one (or from one produced again since) is redone
            "tuned_end": standing(source),
        }

    @staticmethod
    def tuned_end(ctx: Context) -> CandidateRecord | None:
        """The tuned candidate it interpolates: the best on the selection units of those with weights that did not
        learn them (finished or raced out); None when there is none."""
        tuned = [r for r in ctx.records.values() if ctx.candidate(r.name).tuned and r.scored and r.weights(ctx.out) and not r.read_selection]
        return best(tuned) if tuned else None

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        from sentune.adaptation.wise import MIXES

        return len(MIXES) * costs.encode(ctx.selection_texts()) + costs.encode(ctx.eval_texts())

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        """Tuned candidates that did not learn the selection part (a supervised one does without --train)."""
        given = ctx.inputs.task.train_units() is not None
        return tuple(c.name for c in others if c.tuned and (given or c.kind != "supervised"))

    def describe(self, ctx: Context) -> str:
        return "interpolating the best tuned candidate's weights (finished or raced out) with the unchanged model's (WiSE-FT), the mix chosen on the selection pairs"

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        import copy

        from sentune.adaptation.wise import MIXES, NotInterpolable, best_mix, interpolate
        from sentune.core.memory import release_freed_memory, release_unreferenced
        from sentune.core.models import load_model
        from sentune.modules.build import save_atomic

        source = self.tuned_end(ctx)
        if source is None:
            return {}, self.skip("no tuned candidate with weights left to interpolate with (--prune removes them)")
        model = load_model(str(source.weights(ctx.out)), device=ctx.device)
        selection = ctx.selection_scorer()  # the mix is chosen on the selection pairs: only those are encoded for the search
        curve: dict[float, float] = {}
        mixed = copy.deepcopy(model)  # every mix is written into this one copy (sentune.adaptation.wise.interpolate)
        try:
            for mix in MIXES:
                cosines = selection.of_model(interpolate(ctx.base, model, mix, into=mixed), f"{WISE}: mix {mix}")["select"]
                curve[mix] = ctx.selection_score_of(cosines)
                release_freed_memory()  # the encoder's batches of this mix
        except NotInterpolable as error:
            return {}, self.skip(f"cannot interpolate with {source.name}: {error}")
        mix = best_mix(curve)
        say(f"    {WISE}: {1 - mix:g}·unchanged + {mix:g}·{source.name} (selection {curve[mix]:.2f}; {source.name} {source.dev_score:.2f})")
        chosen = interpolate(ctx.base, model, mix, into=mixed)
        del model  # the tuned end: only the mixed copy is scored and saved from here
        release_unreferenced()
        save_atomic(chosen, self.folder(ctx) / "model")
        detail = {"curve": [[a, s] for a, s in curve.items()] + [[1.0, source.dev_score]]}
        return ctx.scorer.of_model(chosen, f"{WISE}: scoring the pairs"), CandidateRecord(self.name, self.kind, source=source.name, mix=mix, detail=detail)


@dataclass
class Reference(WithRun):
    """sentence-transformers' own SimCSE recipe with its own defaults (one epoch, the last checkpoint): the user's usual
    alternative, reported beside the candidates and never chosen."""

    recipe_name: str = f"adapt/{REFERENCE}"
    kind: ClassVar[str] = "baseline"
    phase: ClassVar[str] = "after_race"
    eligible: ClassVar[bool] = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(REFERENCE)] if setup.reference else []

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        recipe = ctx.recipe(self.recipe_name, reference=True)
        epoch = -(-len(ctx.inputs.corpus) // recipe.training.batch_size)
        return costs.steps(recipe, epoch) + self.scoring_seconds(ctx, costs)

    def describe(self, ctx: Context) -> str:
        return "training sentence-transformers' SimCSE recipe (reported, never chosen)"

    def produce(self, label: str, ctx: Context) -> CandidateRecord:
        from sentune.training.runs import train_run

        say(f"{label} {self.name}: {self.describe(ctx)}")
        data_dir, recipe = ctx.data_dir or Path("."), ctx.recipe(self.recipe_name, reference=True)
        data, dev = ctx.training_data(recipe), ctx.training_dev_data()
        train_run(recipe, self.run_folder(ctx), data_dir=data_dir, show_progress=ctx.config.show_progress, data=data, dev=dev)
        return trained_record(self, self.run_folder(ctx), label, ctx)
