"""`sentune adapt --time 30m`: the candidates a run has time for, planned before the first of them and kept to after.

What a candidate costs is expected from what the run measures before it plans: the seconds the model takes to encode
one of the user's texts (probe_text_seconds), times the texts the candidate encodes and the training steps it takes,
a step weighing as many texts as sentune/adaptation/step_costs.json says its recipe's does (measured by
benchmarks/speed/step_costs.py). Each kind says what it encodes and trains (its `expected_seconds`).

What a candidate is expected to gain: its mean selection gain over the unchanged model in the runs kept under
benchmarks/results/adapt (sentune/adaptation/expected_gain.json, written by benchmarks/runners/adapt_priors.py), for pairs or
for search; a candidate those runs never had, or never saw gain, counts as gaining nothing.

The plan (fit) buys first looks: a candidate that can be looked at early and cheaply (a raced training its first
round, a supervised candidate its first fold or first rung, `sed` its members and its learner's first round; a fusion
or a pooling, nearly free, all of it at once) is kept when its first look fits, not only when all of it does. The best
expected gain a second of first look first, the cheapest first among equals, each taken while its first look fits in
what is left; one built on a candidate left out is left out too. The unchanged model is always kept.

While the run goes, the clock says what is left (what a candidate spent is charged as the run measured it: a race that
stops most candidates at round one does not cost their full shares), and the first looks of the kept candidates not
started yet are held back from it: a candidate starts when its next step (its first look, scaled by how far the
candidates so far took longer than expected) fits in what is left beside those and beside the rest of those the plan
ranks above it and expects to gain more (reserved: the phases run in the order their needs set, not by value); a
cheap follow-up (a candidate built on others that is all first look, at most CHEAP_FOLLOW_UP of the limit: `wise` after
`supervised`) keeps the minutes planned for it, judged on them unscaled. Under --time a training is capped at its share of the minutes left (the
trainer's minute limit); what is left after the first looks goes to those the evidence keeps (each race's rules, then
its successive halving: the best first).

A run without --time is planned the same way for DEFAULT_TIME: a user who gives no time expects the run to end within
the half hour a first try takes, not hours later because a candidate's cost grew with the data. It caps no training's
minutes (minutes_cap: its steps are its recipe's, and a killed run resumes them); instead, after a round of a race, a
candidate goes on only while the rest of it (measured where the run has measured it: a raced training's seconds a step)
fits in what is left (go_on), the best first; so it keeps spending while a candidate is left and its next step fits,
and how far one trains can depend on the machine's speed. What it leaves out, at planning or later, is named with its
expected minutes and the --time that would include it (time_to_include, still_fits, go_on).

The plan is made before the run knows what its candidates really cost; those that took less than expected (a hybrid
with no source better than the unchanged model, a race that stopped most at round one) leave minutes unspent. So once
every kept candidate is done, those left out run while the whole of one, scaled as still_fits scales it, fits in what
is left (bring_back, the best expected gain a second first; the phase sentune.adaptation.phases.WithTimeLeft), under
--time as without it."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sentune.adaptation.budget import AdaptError
from sentune.core.progress import say

STEP_COSTS = Path(__file__).parent / "step_costs.json"
EXPECTED_GAIN = Path(__file__).parent / "expected_gain.json"
PROBE_TEXTS = 128  # texts the model encodes to measure one's cost: a few seconds on 2 CPU cores
PROBE_PASSES = 2  # passes over them: the fastest is the measure
UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
DEFAULT_TIME = 30 * 60.0  # seconds a run without --time is planned for
# a follow-up built on others (wise, a fusion) that costs at most this share of the limit keeps its planned minutes when
# its turn comes: it is minutes of encoding, not a training that may run over, and skipping it saves too little to matter
CHEAP_FOLLOW_UP = 0.1


def parse_time(text: str | None) -> float | None:
    """`--time 30m` (also 90s, 1.5h) in seconds; None when not given. Checked before anything heavy loads."""
    if text is None:
        return None
    value = text.strip().lower()
    unit = next((u for u in sorted(UNITS, key=len, reverse=True) if value.endswith(u)), None)
    try:
        seconds = float(value[: -len(unit)] if unit else value) * UNITS[unit or "m"]
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or math.isinf(seconds):
        raise AdaptError(f"--time {text!r}: expected a duration such as 30m, 90s or 1.5h (a number alone is minutes)")
    return seconds


def probe_text_seconds(model, texts: Sequence[str], passes: int = PROBE_PASSES) -> float:
    """Seconds the model takes to encode one text, measured on up to PROBE_TEXTS of `texts` (the first call of a model
    pays its warm-up on a few texts first, outside the measure): the fastest of `passes` passes over them, as timeit
    takes the least of its repeats. One pass measured quora's documents at 8.7 and at 20.0 ms a text an hour apart on
    the same idle machine, and the plan kept or left out supervised with it; a pass slowed by a first full-size batch
    or a moment's other work says little of the run's minutes, and what the run then spends corrects the rest (the
    lateness scale)."""
    from sentune.core.encode import Encoder

    sample = list(dict.fromkeys(texts))[:PROBE_TEXTS]
    encoder = Encoder(model, "model", show_progress=False)
    encoder.encode(sample[:4])
    timed = []
    for _ in range(max(1, passes)):
        started = time.perf_counter()
        encoder.encode(sample)
        timed.append(time.perf_counter() - started)
    return min(timed) / max(1, len(sample))


@dataclass(frozen=True)
class Costs:
    """The run's measured text cost and what a training step of each recipe weighs in texts."""

    text_seconds: float
    per_batch_text: dict[str, float]  # recipe name (adapt/NAME without the folder) -> a step's cost per text of its batch
    raced: int = 1  # how many training candidates race: what each is expected to train depends on it (race_share)
    # recipe name -> texts a step costs per (row of its batch, document of the corpus): a loss over every document
    per_row_document: dict[str, float] = field(default_factory=dict)

    @classmethod
    def measured(cls, text_seconds: float, path: Path = STEP_COSTS) -> Costs:
        recipes = json.loads(path.read_text())["recipes"]
        per_document = {name: float(r["per_row_document"]) for name, r in recipes.items() if "per_row_document" in r}
        return cls(text_seconds, {name: float(r["per_batch_text"]) for name, r in recipes.items()}, per_row_document=per_document)

    def partition(self, recipe, steps: int, documents: int) -> float:
        """Seconds of `steps` steps' scoring of every one of `documents` (0 for a recipe whose loss reads a batch only)."""
        weight = self.per_row_document.get(recipe.name.split("/")[-1], 0.0)
        return steps * recipe.training.batch_size * documents * weight * self.text_seconds

    def encode(self, texts: int) -> float:
        return texts * self.text_seconds

    def steps(self, recipe, steps: int) -> float:
        """Seconds of `steps` steps of a recipe (an unknown one weighs as the heaviest known, per text of its batch)."""
        name = recipe.name.split("/")[-1]
        weight = self.per_batch_text.get(name, max(self.per_batch_text.values(), default=3.0))
        return steps * weight * recipe.training.batch_size * self.text_seconds


def expected_gains(search: bool, path: Path = EXPECTED_GAIN) -> dict[str, float]:
    """Each candidate's mean selection gain in the kept runs (a loss stays negative: among the candidates a gaining one
    is built on, the one that lost least is brought along)."""
    found = json.loads(path.read_text())
    return {name: float(gain) for name, gain in found["search" if search else "pairs"].items()}


@dataclass
class Planned:
    name: str
    seconds: float  # expected
    gain: float  # expected, in the metric's points (below zero: expected to lose; planned as gaining nothing)
    needs: tuple[str, ...] = ()  # candidates it is built on (any one of them kept suffices)
    first: float | None = None  # expected seconds of its first look (None: it has none cheaper than all of it)
    # expected seconds if it goes all the way (None: `seconds`): a raced one's `seconds` are its expected share, the
    # average over the race's members, while the one that goes on trains all of its steps
    whole: float | None = None
    ships_first_look: bool = True  # False: stopped after its first look it leaves nothing to choose (its rest is reserved)
    # expected seconds of its scoring once its training ends (part of `seconds`): a capped training leaves room for it,
    # and a raced one ended at its best checkpoint pays it too
    finish: float = 0.0

    @property
    def look(self) -> float:
        """What its first look is expected to take (all of it, for a candidate that has no cheaper one)."""
        return self.seconds if self.first is None else min(self.first, self.seconds)

    @property
    def end(self) -> float:
        """What it is expected to take if it goes all the way (at least its expected seconds)."""
        return self.seconds if self.whole is None else max(self.whole, self.seconds)

    def charged(self, reached: float) -> float:
        """What it was expected to take to `reached` of the way from its first look (0) to its end (1): a raced one
        that went all the way is charged all of its training, not the race's average share of it."""
        return self.look + min(max(reached, 0.0), 1.0) * (self.end - self.look)


@dataclass
class TimePlan:
    limit: float  # seconds
    started: float = field(default_factory=time.monotonic)  # when the run started (what --time counts from)
    kept: dict[str, Planned] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)  # name -> why
    spent: float = 0.0  # seconds the finished candidates took, as the run measured them
    expected_spent: float = 0.0  # what they were expected to take for as far as they went
    done: set[str] = field(default_factory=set)
    begun: set[str] = field(default_factory=set)  # started, finished or not: their first look is no longer held back
    current: str | None = None  # the candidate running now
    given: bool = True  # the limit is --time's (False: DEFAULT_TIME's, a run without --time)
    including: dict[str, int] = field(default_factory=dict)  # left out at planning -> the --time minutes that keep it
    stopped: dict[str, str] = field(default_factory=dict)  # stopped after a first look for want of time (go_on) -> why
    reached: dict[str, float] = field(default_factory=dict)  # of those, a training ended at its best: how far it went (0-1)
    costs: Costs | None = None  # the run's measured costs the plan was made with (re_expect expects with them again)
    waiting: dict[str, Planned] = field(default_factory=dict)  # left out (at planning or at its turn) -> as it was planned
    brought_back: dict[str, str] = field(default_factory=dict)  # of those, run with the time left at the end -> why

    @property
    def source(self) -> str:
        """What the limit is, as the reasons name it."""
        return "--time" if self.given else f"the default --time {self.limit / 60:g}m"

    def fit(self, candidates: list[Planned], already: float = 0.0) -> None:
        """Keep the best gain a second of first look first (cheapest among equals) while their first looks fit in the
        limit less `already` (what the run spent, or is sure to spend, before them). One built on others none of which
        is kept yet is weighed with the way to them it would bring along (the one expected to gain most, then the
        cheapest); without room for the first looks of all of it, it is left out."""
        room = self.limit - already
        by_name = {c.name: c for c in candidates}
        waiting = list(candidates)
        while waiting:
            bundles = {c.name: self._bundle(c, by_name) for c in waiting}
            for c in [c for c in waiting if bundles[c.name] is None]:
                self.left_out[c.name] = f"built on {' or '.join(c.needs)}, all left out"
                self.waiting[c.name] = c
                waiting.remove(c)
            if not waiting:
                break
            cost = {c.name: sum(b.look for b in bundles[c.name] or []) for c in waiting}
            c = min(waiting, key=lambda c: (-(max(c.gain, 0.0) / max(cost[c.name], 1e-9)), cost[c.name]))
            waiting.remove(c)
            bundle = bundles[c.name] or []
            if cost[c.name] <= room:
                self.kept.update((b.name, b) for b in bundle)
                room -= cost[c.name]
                waiting = [w for w in waiting if w.name not in self.kept]
            else:
                along = [b.name for b in bundle if b is not c]
                with_needs = f" with {', '.join(along)}, which it is built on" if along else ""
                what = f"its first look expected {minutes(c.look)} (all of it {minutes(c.seconds)})" if c.look < c.seconds else f"expected {minutes(c.look)}"
                if along:
                    what += f", {minutes(cost[c.name])}{with_needs}"
                self.left_out[c.name] = f"{what}; {minutes(max(room, 0.0))} of {self.source} left for it"
                self.waiting[c.name] = c

    def _bundle(self, c: Planned, by_name: dict[str, Planned]) -> list[Planned] | None:
        """`c` and the chain of candidates it is built on that are not kept yet, the one expected to gain most (then the
        cheapest first look) at each step (None: none is possible)."""
        if not c.needs or any(n in self.kept for n in c.needs):
            return [c]
        ways = [self._bundle(by_name[n], by_name) for n in c.needs if n in by_name and n not in self.left_out]
        found = [w for w in ways if w is not None]
        return [*min(found, key=lambda w: (-w[-1].gain, sum(b.look for b in w))), c] if found else None

    def re_expect(self, candidate: Any, ctx: Any) -> None:
        """A kept candidate not begun, expected again with what the run knows now (its kind's expected_at_turn: sed once
        the race's best step is known, hybrid-best once its source is), at its turn and at the turn of each candidate
        before it, so that it is judged, and held back against the others, at its real cost."""
        held = self.kept if candidate.name in self.kept else self.waiting
        c = held.get(candidate.name)
        if c is None or self.costs is None or candidate.name in self.begun:
            return
        now = candidate.expected_at_turn(ctx, self.costs)
        if now is not None:
            seconds, look = now
            held[candidate.name] = replace(c, seconds=seconds, first=look, whole=None)

    def leave_out(self, name: str, why: str) -> None:
        """Take a kept candidate out at its turn (it did not fit what is left), with why; bring_back may run it still."""
        if name in self.kept:
            self.waiting[name] = self.kept.pop(name)
        self.left_out[name] = why

    def bring_back(self, ready: Collection[str], first_look_enough: Collection[str] = ()) -> str | None:
        """Once every kept candidate is done, the one of those left out (`ready`: the caller's, each one it is built on
        has a record) to run with the time left, or None: all of it, scaled by how late the run is (a cheap follow-up's
        unscaled), must fit in what is left, or its first look and its scoring for those in `first_look_enough` (a raced
        training: the time plan ends it at its best checkpoint when its rest does not fit, and scores it); the best
        expected gain a second first, the cheapest among equals, as the plan ranks. Planned for the limit before the run knew its real costs, the plan
        leaves out what the minutes the others did not take would have paid for (quora's default run: query-side left out
        at planning, the run over with half of its half hour unspent)."""
        room = self.left() - self.held_back()
        fits = {}
        for name in (n for n in self.waiting if n in ready and n not in self.done):
            c = self.waiting[name]
            whole = min(c.look + c.finish, c.end) if name in first_look_enough else c.end
            expected = whole if self._cheap_follow_up(c) else whole * self.scale()
            if expected <= room:
                fits[name] = expected
        if not fits:
            return None
        name = min(fits, key=lambda n: (-(max(self.waiting[n].gain, 0.0) / max(fits[n], 1e-9)), fits[n]))
        self.kept[name] = self.waiting.pop(name)
        self.brought_back[name] = (
            f"left out ({self.left_out.pop(name)}), run with the time left: expected {minutes(fits[name])}, {minutes(max(room, 0.0))} left"
        )
        self.including.pop(name, None)
        return name

    def left(self) -> float:
        return self.limit - (time.monotonic() - self.started)

    def scale(self) -> float:
        """How far the finished candidates took longer than expected (at least 1: a fast start promises nothing)."""
        return max(1.0, self.spent / self.expected_spent) if self.expected_spent > 1.0 else 1.0

    def held_back(self, besides: Collection[str] = ()) -> float:
        """The first looks of the kept candidates not begun yet (but `besides`): what no other may spend."""
        return sum(c.look for n, c in self.kept.items() if n not in self.done and n not in self.begun and n not in besides)

    def reserved(self, name: str, besides: Collection[str] = ()) -> float:
        """Beyond the first looks held back, the rest of each kept candidate not begun (but `besides`) that ranks above
        `name` (kept before it by the plan, the best expected gain a second first, and expected to gain more) and whose
        first look alone leaves nothing to choose (a supervised race's member: stopped after its first fold, it is
        skipped). Reserved in the plan's order, each whose rest fits in what is left beside the held-back first looks
        and those reserved before it (one that cannot go all the way anyway would stop after its first look: nothing is
        kept for it), so that one expected to gain less does not spend the minutes the better one needs to go all the
        way: the phases run in the order their needs set (the label-free race before the supervised candidates), not in
        the order of their value, and on a slow machine the race's first round took the supervised race's minutes
        (stsb's default run shipped the unchanged model)."""
        order = list(self.kept)
        if name not in self.kept:
            return 0.0
        gain = max(self.kept[name].gain, 0.0)
        total = 0.0
        for above in order[: order.index(name)]:
            c = self.kept[above]
            if c.ships_first_look or above in self.done or above in self.begun or above in besides or max(c.gain, 0.0) <= gain:
                continue
            # beside the first looks held, but its own followers' (as still_fits holds none of them against it): held
            # against its rest, wise's would leave supervised nothing reserved, and the race would take its minutes
            room = max(self.left() - self.held_back({*besides, *self.with_followers(above)}), 0.0)
            rest = max(c.end - c.look, 0.0)
            if total + rest <= room:
                total += rest
        return total

    def with_followers(self, name: str, among: Collection[str] = ()) -> set[str]:
        """`name` and the kept candidates built on it: their first looks are not held back against `name` itself. Held
        against it, a follow-up could block the one it is best built on and then not fit itself (wise after supervised,
        left out together with a minute unspent); if `name` does not run, they are held again for the others. Not a
        follower that can still be built on a kept one not done that the plan ranks above `name` (`among`: those judged
        together with it, its fellow racers, do not count): it runs after that one anyway, so its first look stays held,
        or `name`, ranked lower, spends the minutes the follower then takes from the better one's rest (qqp's default
        run: sed started on wise's minutes, and supervised, ranked above both, could not go on)."""
        order = list(self.kept)
        rank = order.index(name) if name in self.kept else len(order)
        together = {name, *among}

        def follows(c: Planned) -> bool:
            others = [m for m in c.needs if m in self.kept and m not in self.done and m not in together]
            return name in c.needs and not any(order.index(m) < rank for m in others)

        return {name} | {n for n, c in self.kept.items() if follows(c)}

    def follow_up(self, name: str) -> bool:
        """A cheap follow-up: built on others, all first look, at most CHEAP_FOLLOW_UP of the limit (it keeps its
        planned minutes: judged on them unscaled, and under the default time once one it is built on has run)."""
        c = self.kept.get(name)
        return c is not None and self._cheap_follow_up(c)

    def _cheap_follow_up(self, c: Planned) -> bool:
        return bool(c.needs) and c.look >= c.seconds and c.seconds <= CHEAP_FOLLOW_UP * self.limit

    def still_fits(self, name: str) -> str | None:
        """None when the candidate may start now, else why it is skipped: its first look, scaled by how late the run
        is (a cheap follow-up's unscaled), must fit in what is left beside the first looks held back for the others.
        One that had its first look already (a supervised race's member going on) is not judged again: under --time
        its training is capped at its share, and without it go_on judged its rest."""
        c = self.kept.get(name)
        if c is None or name in self.begun:
            return None
        if self.follow_up(name):
            if not self.given and any(n in self.done for n in c.needs):
                return None  # its minutes were planned with what it is built on; the default time is a plan, not a cap
            expected = c.look
        else:
            expected = c.look * self.scale()
        mine = self.with_followers(name)
        kept_for = self.reserved(name, mine)
        room = self.left() - self.held_back(mine) - kept_for
        if expected > room:
            return (
                f"{self.source}: expected {minutes(expected)} now, {minutes(max(room, 0.0))} left{self._beside(mine)}{self._for_above(kept_for)}"
                f"{self._would(expected + kept_for, mine)}"
            )
        return None

    @staticmethod
    def _for_above(kept_for: float) -> str:
        return f" and {minutes(kept_for)} kept for the rest of those ranked above it" if kept_for > 0 else ""

    def _would(self, expected: float, names: Collection[str]) -> str:
        """Under the default time, the --time that would have let `expected` more seconds start now ('' under --time,
        whose user chose the limit)."""
        if self.given:
            return ""
        needed = math.ceil((time.monotonic() - self.started + expected + self.held_back(names)) / 60)
        return f"; --time {needed}m would include it"

    def _beside(self, names: Collection[str]) -> str:
        held = self.held_back(names)
        return f" beside {minutes(held)} held for the others' first looks" if held > 0 else ""

    def still_fit_together(self, names: list[str]) -> dict[str, str]:
        """Of candidates that run side by side (the race's members), those that no longer fit, each with why: their
        first looks, scaled as still_fits scales them, are added in the plan's order (the best expected gain a second
        first), and those past what is left beside the others' held-back first looks do not start. Names the plan did
        not keep are not judged."""
        # those built on them (sed on the race's winner) are not held against them: held, they could keep every member
        # from starting and then have nothing to be built on
        followers = set().union(*(self.with_followers(n, names) for n in names)) if names else set()
        left, taken, late = max(self.left() - self.held_back(followers), 0.0), 0.0, {}
        for name in (n for n in self.kept if n in names):
            expected = self.kept[name].look * self.scale()
            kept_for = self.reserved(name, followers)  # the rest of those ranked above it (its fellow members are begun)
            if taken + expected > left - kept_for:
                would = self._would(taken + expected + kept_for, names)
                late[name] = (
                    f"{self.source}: expected {minutes(expected)} now, {minutes(max(left - kept_for - taken, 0.0))} left beside the race's others"
                    f"{self._for_above(kept_for)}{would}"
                )
            else:
                taken += expected
        return late

    def begin(self, names: str | list[str]) -> None:
        """The candidates start: their first looks are theirs now, no longer held back from the others."""
        self.begun |= {names} if isinstance(names, str) else set(names)

    def go_on(self, rests: dict[str, float], scored: Collection[str] = ()) -> dict[str, str]:
        """After their first looks, which of the candidates (best on the evidence first) do not go on under the
        default time, each with why and the --time that would let it: the rest of each (`rests`: its seconds, as
        measured where the run measured them), added best first, past what is left beside the first looks held back
        for those not begun and the scoring of those in `scored` (raced trainings: ended here or at their end, each is
        scored, and its rest counts its training only). Under --time each training is capped at its share instead
        (minutes_cap), and here only stopped when nothing is left beside those: going on would take the time of a
        candidate not yet looked at, or of their own scoring."""
        held = self.held_back(list(rests))
        scoring = sum(self.kept[n].finish for n in scored if n in rests and n in self.kept) * self.scale()
        if self.given:
            room = self.left() - held - scoring
            if room > 0:
                return {}
            why = f"--time: {minutes(max(self.left(), 0.0))} left, {minutes(held)} of it held for the first looks of those not begun"
            return dict.fromkeys(rests, why + (f" and {minutes(scoring)} for their scoring" if scoring > 0 else ""))
        spent = time.monotonic() - self.started
        left, taken, stopped = max(self.left() - held - scoring, 0.0), 0.0, {}
        for name, rest in rests.items():
            kept_for = self.reserved(name, list(rests))
            if taken + rest > left - kept_for:
                needed = math.ceil((spent + taken + rest + held + scoring + kept_for) / 60)
                stopped[name] = (
                    f"{self.source}: the rest of it expected {minutes(rest)}, {minutes(max(left - kept_for - taken, 0.0))} left"
                    f"{self._for_above(kept_for)}; --time {needed}m would let it go on"
                )
            else:
                taken += rest
        return stopped

    def rest(self, name: str, look_took: float | None = None) -> float:
        """The expected seconds of a candidate after its first look to its end (a raced one going on trains all of its
        steps, not the race's average share of them), scaled as still_fits scales them, or, when `look_took` (its first
        look as the run measured it) says it ran later still, by how late its own look was: the rest is more of the
        same work (a supervised candidate's other folds after its first), and a plan made from the probe's text cost
        can under-expect a training on another machine by more than the candidates before it show."""
        c = self.kept.get(name)
        if c is None:
            return 0.0
        scale = self.scale()
        if look_took is not None and c.look > 1.0:
            scale = max(scale, look_took / c.look)
        return (c.end - c.look) * scale

    def finished(self, name: str, seconds: float, reached: float = 1.0) -> None:
        """The candidate is done, having spent `seconds` (as the run measured them) and gone `reached` of the way from
        its first look to its end (0: stopped at its first look): the lateness scale compares what it spent with what
        that much of it was expected to take."""
        self.done.add(name)
        self.begun.add(name)
        self.current = None
        c = self.kept.get(name)
        if c is not None and c.seconds > 0 and seconds > 0:  # one skipped before it spent anything says nothing of lateness
            self.spent += seconds
            self.expected_spent += c.charged(reached)

    def allowance(self, name: str) -> float:
        """Seconds the candidate may take: its expected share of what is left among the kept candidates not yet done
        (all of it for the last), never the first looks held back for those not begun but its own followers."""
        waiting = [c.seconds for n, c in self.kept.items() if n not in self.done]
        share = self.kept[name].seconds / sum(waiting) if name in self.kept and sum(waiting) > 0 else 1.0
        # never the first looks still held for those not begun, but for those that can only follow this one
        beside = self.left() - self.held_back(self.with_followers(name))
        return max(min(self.left() * min(1.0, share), beside), 0.0)

    def minutes_cap(self) -> float | None:
        """The minutes a training may take now: the running candidate's allowance less its scoring after the training
        (at least a few seconds). None under the default time: its plan leaves candidates out, skips those that no
        longer fit and stops those whose rest does not (go_on), but caps no training's minutes, so that its trainings'
        steps are their recipes' and a killed run resumes them with the recipes it saved."""
        if not self.given:
            return None
        seconds = self.allowance(self.current) if self.current else self.left()
        if self.current in self.kept:  # its scoring comes after its training, within its allowance
            seconds -= self.kept[self.current].finish * self.scale()
        return max(seconds, 5.0) / 60

    def summary(self) -> dict:
        return {
            "limit_s": self.limit,
            "default": not self.given,
            "kept": {
                n: {"expected_s": round(c.seconds, 1), "expected_gain": round(c.gain, 3), **({"first_look_s": round(c.look, 1)} if c.look < c.seconds else {})}
                for n, c in self.kept.items()
            },
            "left_out": dict(self.left_out),
            "time_to_include_min": dict(self.including),
            **({"brought_back": dict(self.brought_back)} if self.brought_back else {}),
            **({"stopped": dict(self.stopped)} if self.stopped else {}),
        }


def fitted(limit: float, first: Planned, items: list[Planned], already: float, *, given: bool = True, started: float | None = None) -> TimePlan:
    """The plan for `limit` seconds: `first` (the unchanged model) always kept, then `items` fitted in what is left once
    `already` (seconds spent before planning) and `first` are counted."""
    plan = TimePlan(limit, given=given) if started is None else TimePlan(limit, started=started, given=given)
    plan.kept[first.name] = first
    plan.fit(items, already=already + first.seconds)
    return plan


def time_to_include(plan: TimePlan, first: Planned, items: list[Planned], already: float) -> dict[str, int]:
    """Of the candidates `plan` left out, the least whole minutes of --time whose plan keeps each, tried minute by
    minute (the plan is greedy: a longer limit may keep a dearer candidate first and leave a cheaper one out, so no
    halving); one that no limit keeps (built on candidates left out for another reason) is not named."""
    top = math.ceil((already + first.seconds + sum(i.look for i in items)) / 60) + 1  # room for every first look
    found: dict[str, int] = {}
    for limit in range(max(1, math.floor(plan.limit / 60) + 1), top + 1):
        kept = fitted(limit * 60.0, first, items, already).kept
        found |= {name: limit for name in plan.left_out if name in kept and name not in found}
        if len(found) == len(plan.left_out):
            break
    return found


def race_share(raced: int) -> float:
    """The share of its planned steps a raced candidate trains on average when no rule stops it early: all to the first
    rung, then at most half of those still running to each next (sentune.adaptation.race's successive halving)."""
    from sentune.adaptation.race import RUNGS

    if raced <= 0:
        return 0.0
    running, total, previous = raced, 0.0, 0.0
    for index, rung in enumerate(RUNGS):
        total += running * (rung - previous)
        previous = rung
        if index < len(RUNGS) - 1 and running > 1:
            running = math.ceil(running / 2)
    return total / raced


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def plan_run(candidates: Any, ctx: Any, started: float) -> TimePlan:
    """--time (or, without it, DEFAULT_TIME): the run's text cost measured, every candidate's seconds and gain expected,
    the plan fitted, and the candidates left out taken out of the run, each with its reason and the --time that would
    keep it, before the first of them starts (sentune.adaptation.time_plan)."""
    given = ctx.config.time_limit is not None
    limit = ctx.config.time_limit if ctx.config.time_limit is not None else DEFAULT_TIME
    # search: the documents, which its default candidates encode and train on (at up to the model's length), not the
    # corpus's passages of at most 64 words (on SciFact a document cost 2.3 times a passage)
    task = ctx.inputs.task
    costs = Costs.measured(probe_text_seconds(ctx.base, [d.text for d in task.documents] if task.search else ctx.inputs.corpus))
    gains = expected_gains(ctx.inputs.task.search)
    unchanged = candidates.all[0]  # the unchanged model: always scored
    raced = {c.name for c in candidates.raced}
    done = {c.name for c in candidates.all if c.finished(ctx)}  # a resumed run reads them back: they cost nothing
    assumed = len(raced)
    while True:  # a race of fewer trains each longer: planned again for as many as the last plan kept, until it keeps them all
        costs = replace(costs, raced=max(assumed, 1))
        expected = {c.name: 0.0 if c.name in done else c.expected_seconds(ctx, costs) for c in candidates.all}
        looks = {c.name: 0.0 if c.name in done else c.first_look_seconds(ctx, costs) for c in candidates.all}
        wholes = {c.name: 0.0 if c.name in done else c.whole_seconds(ctx, costs) for c in candidates.all}
        first = Planned(unchanged.name, expected[unchanged.name], 0.0)
        items = [
            Planned(
                c.name,
                expected[c.name],
                gains.get(c.name, 0.0),
                c.builds_on(candidates.all, ctx),
                looks[c.name],
                wholes[c.name],
                c.ships_first_look,
                finish=0.0 if c.name in done else c.scoring_seconds(ctx, costs),
            )
            for c in candidates.all[1:]
        ]
        already = time.monotonic() - started
        timing = fitted(limit, first, items, already, given=given, started=started)
        kept = len(raced & set(timing.kept))
        if kept >= assumed:
            break
        assumed = kept
    timing.including = time_to_include(timing, first, items, already)
    timing.costs = costs
    for candidate in list(candidates.all):
        if candidate.name in timing.left_out:
            candidates.leave_out(candidate)
    total, looks_total = sum(c.seconds for c in timing.kept.values()), sum(c.look for c in timing.kept.values())
    say(
        (f"--time {minutes(timing.limit)}" if given else f"no --time: planned for {minutes(timing.limit)} (--time raises it)")
        + f": a text costs {costs.text_seconds * 1000:.1f} ms to encode here; {len(timing.kept)} candidates planned "
        f"(their first looks expected {minutes(looks_total)}, all of them {minutes(total)}, after the {minutes(time.monotonic() - started)} spent so far; "
        "the rest goes to those the evidence keeps)"
        + "".join(
            f"\n    left out: {name}: {why}" + (f"; --time {timing.including[name]}m would include it" if name in timing.including else "")
            for name, why in timing.left_out.items()
        ),
    )
    return timing
