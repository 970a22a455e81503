"""The phases of a `sentune adapt` run, declared in the order they run (declared): each a Phase whose
`run(ctx, state)` reads the run's frozen inputs and services (`ctx`, sentune.adaptation.context) and writes the run's
state (`state`, sentune.adaptation.run_state, the one place a run changes), returning the records it produced or read
back. sentune.adaptation.run runs them in turn, saying each one's name and time.

1. prepare: the selection units made ready, --train's evidence drawn, the time plan fitted (every candidate's expected
   time, those that do not fit taken out with their reason);
2. before the race: the unchanged model and the cheap candidates (poolings, post-processors);
3. the race of the label-free training candidates (sentune.adaptation.race);
4. built on the race: the candidates after it up to the first supervised one (SED, ...);
5. the supervised race (sentune.adaptation.candidates.supervised_race), before the first supervised candidate;
6. after the supervised race: the rest (the supervised candidates, wise, the hybrids, ...);
7. with the time left: those left out for want of time, run while the whole of one still fits (the best expected
   gain a second first; a label-free training while its first look fits, racing alone: ended at its best checkpoint
   when the rest no longer fits, as in the race);
8. decide (sentune.adaptation.select, sentune.adaptation.decide), on the selection and confirmation parts;
9. write: OUT/model (and a search run's index), results.json/.md and report.html.

A candidate whose first look no longer fits what is left when its turn comes (beside the first looks held back for
those not begun) is taken out of the run with its reason (the unchanged model is always scored), and those built on it
alone with it; without --time, one whose rest does not fit after its first look stops there
(sentune.adaptation.time_plan.TimePlan.go_on): a raced training ends at its best checkpoint so far and is judged as a
finished one, a supervised race's member is skipped."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sentune.adaptation.names import UNCHANGED
from sentune.adaptation.records import CandidateRecord, load_record
from sentune.adaptation.train_evidence import score_evidence
from sentune.core.progress import say

if TYPE_CHECKING:
    from sentune.adaptation.candidates import Candidate, Plan, Trained
    from sentune.adaptation.context import Context
    from sentune.adaptation.run_state import RunState
    from sentune.adaptation.time_plan import TimePlan

logger = logging.getLogger(__name__)
SUPERVISED_KIND = "supervised"  # sentune.adaptation.candidates.Supervised.kind: its members race in a phase of their own


@dataclass(frozen=True)
class Phase:
    """One step of the run: `run` writes `state` and returns the records it produced or read back."""

    name: str

    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        raise NotImplementedError


@dataclass(frozen=True)
class Prepare(Phase):
    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        from sentune.adaptation.overlong import warn_overlong
        from sentune.adaptation.time_plan import plan_run
        from sentune.adaptation.train_evidence import draw_evidence, say_detectable_gain

        inputs, task, candidates = ctx.inputs, ctx.inputs.task, state.plan
        warn_overlong(inputs, ctx.base)
        leave_out_untrainable(candidates, ctx)
        ctx.prepare_selection()
        say(
            f"sentune adapt: {len(candidates.all)} candidates for {ctx.config.model} on {len(inputs.corpus)} corpus "
            + (f"passages of {len(task.documents)} documents; " if task.search else "sentences; ")
            + f"dev {inputs.dev_label} ({inputs.dev.units} {inputs.dev.unit}, {inputs.dev.metric}: {len(inputs.split.select)} select, "
            f"{len(inputs.split.confirm)} confirm); "
            + (f"test {inputs.test_label} ({inputs.test.units} {inputs.test.unit})" if inputs.test else "no test set"),
        )
        state.evidence = draw_evidence(ctx)  # before any candidate: the supervised ones leave its confirmation pairs out
        say_detectable_gain(ctx)
        state.time_plan = plan_run(candidates, ctx, ctx.run.started)  # without --time, for its default (time_plan.DEFAULT_TIME)
        state.planned = len(candidates.all)
        state.labels |= {c.name: f"[{i}/{state.planned}]" for i, c in enumerate(candidates.before_race, start=1)}
        return {}


@dataclass(frozen=True)
class BeforeRace(Phase):
    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        return run_candidates(list(state.plan.before_race), ctx, state)


@dataclass(frozen=True)
class TrainedRace(Phase):
    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        race_trained(state.plan, ctx)
        return {c.name: state.records[c.name] for c in state.plan.raced}


@dataclass(frozen=True)
class BuiltOnRace(Phase):
    """The candidates after the race up to the first supervised one."""

    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        _label_after_race(state)
        after = state.plan.after_race
        first = next((i for i, c in enumerate(after) if c.kind == SUPERVISED_KIND), len(after))
        return run_candidates(after[:first], ctx, state)


@dataclass(frozen=True)
class SupervisedRace(Phase):
    """The supervised candidates' race, when the run has any: those not yet produced are first checked together
    (members_fit_together: one no longer fitting is left out and does not race), then the members race (or the verdict of an
    earlier process of the run is read back), and each reads the verdict when its turn comes (ctx.supervised_race)."""

    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        from sentune.adaptation.candidates.supervised_race import race_supervised

        _label_after_race(state)
        members = [c for c in state.plan.after_race if c.kind == SUPERVISED_KIND]
        if not members:
            return {}
        members_fit_together(members, state, ctx)
        state.supervised_race = race_supervised(ctx)
        stop_for_time(state.supervised_race, ctx)
        return {}


def members_fit_together(members: list[Candidate], state: RunState, ctx: Context) -> None:
    """The supervised race's members not yet produced start together, as the trained race's do: their first looks,
    expected again with what the run knows now, are added in the plan's order, and those past what is left beside the
    first looks held for the others (not those built on them: wise) are left out. Judged one by one, each held the
    other's first look against itself, and both could be left out with room for one (mrpc's default run)."""
    timing = ctx.time_plan
    waiting = [m for m in members if not m.finished(ctx)]
    if timing is None or not waiting:
        return
    for member in waiting:
        timing.re_expect(member, ctx)
    late = timing.still_fit_together([m.name for m in waiting])
    for member in [m for m in waiting if m.name in late]:
        leave_out(member, state.plan, state.labels[member.name], late[member.name], ctx)


def stop_for_time(race, ctx: Context) -> None:
    """Under the default time, the members the supervised race keeps go on (the best first) only while the rest of
    each, as late as its first look ran (TimePlan.rest), fits (TimePlan.go_on); one that does not stops after its first
    look, as one the race stopped: its record says why, and a resumed run reads it back as it reads back a race's stop
    (the verdict on disk is unchanged)."""
    timing = ctx.time_plan
    if race is None or timing is None:
        return  # no race (a search run on --train): each is judged whole when its turn comes
    timing.begin(list(race.seconds))  # their first looks are spent: at their turn they are not judged again
    going = sorted((n for n in race.seconds if n not in race.stopped), key=lambda n: -race.scores[n])
    late = timing.go_on({name: timing.rest(name, race.seconds[name]) for name in going})
    for name, why in late.items():
        say(f"    race: {name} stops: {why}")
    race.stopped |= late
    timing.stopped |= late


@dataclass(frozen=True)
class AfterRace(Phase):
    """The candidates after the race not yet run (the supervised ones and those built on any candidate)."""

    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        _label_after_race(state)
        return run_candidates([c for c in state.plan.after_race if c.name not in state.records], ctx, state)


@dataclass(frozen=True)
class WithTimeLeft(Phase):
    """The candidates left out for want of time (at planning or at their turn) run while the whole of one still fits
    what is left (TimePlan.bring_back: the best expected gain a second first), each once one it is built on has a
    record. A label-free training left out (the race's members start together, so one may be left out while minutes
    stay unspent at the end) races alone while its first look fits: the race's rules stop it behind the unchanged model, and
    the time plan ends it at its best checkpoint when its rest no longer fits, as it ends a member of the race."""

    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        timing, done, tried = ctx.time_plan, {}, set()
        while timing is not None:
            # each once: one brought back and then left out at its turn (expected dearer there) is not tried again
            ready = {c.name: c for c in state.plan.left_out if c.name not in tried and self._built(c, timing, state)}
            for candidate in ready.values():
                timing.re_expect(candidate, ctx)
            name = timing.bring_back(ready, first_look_enough={n for n, c in ready.items() if c.phase == "raced"})
            if name is None:
                break
            candidate = ready[name]
            tried.add(name)
            say(f"[+] {name}: {timing.brought_back[name]}")
            state.plan.bring_back(candidate)
            state.labels.setdefault(name, "[+]")
            if candidate.phase == "raced":
                race_members([candidate], state.plan, {name: state.labels[name]}, ctx)
                found = ctx.records.get(name)
            else:
                found = run_candidate(candidate, state.plan, state.labels[name], ctx)
            if found is not None:
                done[name] = found
        return done

    @staticmethod
    def _built(candidate: Candidate, timing: TimePlan, state: RunState) -> bool:
        """Whether one it is built on (if any) has a record it can be built on (produced, not skipped)."""
        planned = timing.waiting.get(candidate.name)
        needs = planned.needs if planned is not None else ()
        return not needs or any(n in state.records and not state.records[n].skipped for n in needs)


@dataclass(frozen=True)
class Decide(Phase):
    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        from sentune.adaptation.select import select

        results = select(state.records, state.plan.all, ctx.inputs, ctx.inputs.split, ctx.out, ctx.config, ctx=ctx)
        if state.time_plan is not None:
            results["meta"]["time"] = state.time_plan.summary()
        state.results = results
        return {}


@dataclass(frozen=True)
class Write(Phase):
    def run(self, ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
        from sentune.adaptation.chosen import save_choice
        from sentune.adaptation.report import write_results

        assert state.results is not None, "the run writes what it decided: Decide comes before Write"
        state.results["meta"]["phases"] = dict(state.phases)  # the declared phases and the seconds of each before this one
        save_choice(state.results, state.plan, ctx)
        write_results(state.results, ctx.out, ctx.run.command)
        return {}


def declared() -> tuple[Phase, ...]:
    """The run's phases, in the order they run (the module docstring says what each does)."""
    return (
        Prepare("prepare"),
        BeforeRace("before the race"),
        TrainedRace("the race"),
        BuiltOnRace("built on the race"),
        SupervisedRace("the supervised race"),
        AfterRace("after the supervised race"),
        WithTimeLeft("with the time left"),
        Decide("decide"),
        Write("write"),
    )


def _label_after_race(state: RunState) -> None:
    """Each candidate after the race its "[i/n]", numbered after those before it and the race's, once (the first
    phase after the race)."""
    plan = state.plan
    if not any(c.name in state.labels for c in plan.after_race):
        first = len(plan.before_race) + len(plan.raced) + 1
        state.labels |= {c.name: f"[{first + i}/{state.planned}]" for i, c in enumerate(plan.after_race)}


def run_candidates(candidates: list[Candidate], ctx: Context, state: RunState) -> dict[str, CandidateRecord]:
    """Each candidate's record in turn, those left out (--time) skipped; the records produced or read back."""
    done: dict[str, CandidateRecord] = {}
    for candidate in candidates:
        if candidate in getattr(state.plan, candidate.phase):  # not left out (--time) by an earlier phase
            found = run_candidate(candidate, state.plan, state.labels[candidate.name], ctx)
            if found is not None:
                done[candidate.name] = found
    return done


def left_out_late(candidate: Candidate, candidates: Plan, label: str, ctx: Context) -> bool:
    """A candidate not yet produced whose first look no longer fits what is left, under --time or the default time,
    is taken out of the run with its reason (True); the unchanged model is always scored. It and every candidate whose
    first look is held back against it are expected again first, with what the run knows now (re_expect)."""
    timing = ctx.time_plan
    if timing is None or candidate.name == UNCHANGED or candidate.finished(ctx):
        return False
    for waiting in candidates.all:  # it and those held back against it, each as the run now expects it
        timing.re_expect(waiting, ctx)
    reason = timing.still_fits(candidate.name)
    if reason is not None:
        leave_out(candidate, candidates, label, reason, ctx)
    return reason is not None


def leave_out(candidate: Candidate, candidates: Plan, label: str, reason: str, ctx: Context) -> None:
    assert ctx.time_plan is not None
    say(f"{label} {candidate.name}: left out: {reason}")
    ctx.time_plan.leave_out(candidate.name, reason)
    candidates.leave_out(candidate)
    # those built on it alone go with it: planned as costing nothing more (unchanged-maxp reads hybrid's windows), they
    # would otherwise pay what left it out
    timing = ctx.time_plan
    for follower in [c for c in candidates.all if c.name in timing.kept and c.name not in timing.begun]:
        needs = timing.kept[follower.name].needs
        if needs and all(n in timing.left_out for n in needs):
            leave_out(follower, candidates, "   ", f"built on {' or '.join(needs)}, left out", ctx)


def run_candidate(candidate: Candidate, candidates: Plan, label: str, ctx: Context) -> CandidateRecord | None:
    """Its record (read back or produced), kept in the run's records; skipped (None) when its first look no longer
    fits the time left (left_out_late), and charged as far as it went once done."""
    if left_out_late(candidate, candidates, label, ctx):
        return None
    timing = ctx.time_plan
    if timing is not None:
        timing.current = candidate.name
        timing.begin(candidate.name)
    record = candidate.record(label, ctx)
    ctx.records[candidate.name] = record
    evidence_seconds = score_evidence(candidate, record, ctx)
    if timing is not None:
        timing.finished(candidate.name, record.seconds + evidence_seconds, how_far(candidate.name, record, timing))
    return record


def how_far(name: str, record: CandidateRecord, timing: TimePlan) -> float:
    """How far from its first look (0) to its end (1) a candidate went: one a race stopped as far as the round that
    did (sed's learner races alone), one the default time ended at its best checkpoint as far as it trained, one
    skipped after its first round (a supervised race's member) no further."""
    from sentune.adaptation.race import reached

    if name in timing.reached:
        return timing.reached[name]
    if record.stopped is not None:
        return reached(record.race.round) if record.race is not None else 0.0
    return 0.0 if record.skipped and record.seconds else 1.0


def leave_out_untrainable(candidates: Plan, ctx: Context) -> None:
    """A training method that cannot train this model's family (TSDAE without a causal-LM class, say) is left out,
    with the reason, rather than stopping the run when its turn comes."""
    from sentune.methods.registry import get_method
    from sentune.training.recipe import load_recipe

    for candidate in list(candidates.raced):
        recipe = load_recipe(candidate.recipe_name, check=False)
        method = get_method(recipe.method)
        reason = method.cannot_train(ctx.base, method.resolve_params(recipe.params))
        if reason:
            candidates.raced.remove(candidate)
            logger.warning("%s is left out: %s", candidate.name, reason)


def race_trained(candidates: Plan, ctx: Context) -> None:
    """The label-free training candidates trained side by side in rounds (sentune.adaptation.race), their records kept
    in the run's; under --time those that no longer fit together do not start, and each trains at most its share."""
    first = len(candidates.before_race) + 1
    race_members(list(candidates.raced), candidates, {c.name: f"[{first + i}/{len(candidates.all)}]" for i, c in enumerate(candidates.raced)}, ctx)


def race_members(members: list[Trained], candidates: Plan, labels: dict[str, str], ctx: Context) -> None:
    """Race `members` (the plan's label-free trainings, or one brought back with the time left), each labelled by
    `labels`, their records kept in the run's."""
    from sentune.adaptation.race import RUNGS, race
    from sentune.adaptation.race_engine import CONFIDENCE

    if ctx.time_plan is not None:  # the members train side by side: those that no longer fit together do not start
        late = ctx.time_plan.still_fit_together([c.name for c in members if not c.finished(ctx)])
        for candidate in [c for c in members if c.name in late]:
            leave_out(candidate, candidates, labels[candidate.name], late[candidate.name], ctx)
    raced = [c for c in members if c in candidates.raced]
    if not raced:
        return
    if ctx.time_plan is not None:
        ctx.time_plan.begin([c.name for c in raced])
    entries = []
    for candidate in raced:
        candidate.folder(ctx).mkdir(parents=True, exist_ok=True)
        recipe = ctx.recipe(candidate.recipe_name)
        if ctx.time_plan is not None and ctx.time_plan.given:  # each its share of what is left, not all of it (the default caps none)
            allowance = max(ctx.time_plan.allowance(candidate.name), 5.0) / 60
            minutes = min(allowance, recipe.training.max_minutes or allowance)
            recipe = replace(recipe, training=replace(recipe.training, max_minutes=minutes))
        say(f"{labels[candidate.name]} {candidate.name}: {candidate.describe(ctx)}: {recipe.training.max_steps} steps")
        entries.append(candidate.race_entry(recipe, ctx))
    who, halving = (f"{len(entries)} training candidates", ", and at most half go on") if len(entries) > 1 else (f"{entries[0].name} alone", "")
    say(
        f"race: {who} in rounds to {', '.join(f'{f:g}' for f in RUNGS)} of their steps; after each, one behind the "
        f"unchanged model or the leader on the selection pairs with {CONFIDENCE:.0%} confidence stops{halving}",
    )
    by_name = {c.name: c for c in raced}
    race(entries, ctx, lambda entry: by_name[entry.name].finish(labels[entry.name], ctx))
    for candidate in raced:
        record = ctx.records[candidate.name] = load_record(candidate.folder(ctx))
        evidence_seconds = score_evidence(candidate, record, ctx)
        if ctx.time_plan is not None:  # what it spent, against what as much of it as it trained was expected to take
            ctx.time_plan.finished(candidate.name, record.seconds + evidence_seconds, how_far(candidate.name, record, ctx.time_plan))
