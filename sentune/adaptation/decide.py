"""How `sentune adapt` decides, so that its confidence is a statement about the model it saves: select on one part of
the dev pairs, confirm on the other; safety first, then choice.

The promise: what adapt ships is, with 95 % confidence, better than the model the user gave, and for search not worse
than what they would otherwise run (the engine's default fusion of BM25 with that model, `rrf`) by more than
SEARCH_MARGIN. Every choice adapt makes on the user's pairs — each trained candidate's checkpoint (early stopping),
wise's mix, which racing candidates go on — reads only the **selection** part, and so does the order in which the
candidates are tested: best selection score first, those ahead of the unchanged model there (and, for search, within
SEARCH_MARGIN of `rrf` there). On the **confirmation** part, which nothing before has read, each in turn must show
**safety**: a one-sided paired permutation test (sentune.tasks.permutation) that it beats the unchanged model at
p ≤ 0.03 (LEVEL) and, for search, a one-sided non-inferiority test that it is not worse than `rrf` by SEARCH_MARGIN,
at the same level (sentune.tasks.permutation.non_inferiority_test: far easier to show than a second superiority test,
which two fusions two points apart could not pass on 200 queries). Testing stops at the first candidate that fails:
fixed-sequence testing in an order set before the tests (Maurer, Hothorn & Lehmacher 1995; Westfall & Krishen, "Optimally
weighted, fixed sequence and gatekeeper multiple testing procedures", J. Stat. Plan. Inference 2001) keeps the chance of
calling any unsafe candidate safe at LEVEL with no adjustment, and a candidate is safe only when both its tests reject
(an intersection-union test, Berger 1982: each at LEVEL, the pair at LEVEL). Because the confirmation pairs are
independent of everything that set the order, P(a candidate no better than the unchanged model, or worse than `rrf`
by the margin, is declared safe) ≤ 5 % however many candidates, checkpoints and mixes were tried: data splitting (Cox,
"A note on data-splitting for the evaluation of significance levels", Biometrika 1975), the hold-out form of selective
inference. Then **choice**: among the safe candidates, whatever it reads (the promise holds for each of them), the one
with the best expected gain over the unchanged model on all the evidence the run has, the selection gain shrunk toward
the candidates' mean for having been looked at, pooled with the confirmation gain (sentune.adaptation.expected). None
safe: the unchanged model is kept, or for search the stronger of it and `rrf` on every dev query. The old rule (best on
all dev pairs, then a bootstrap on the same pairs) shipped a no-gain candidate in up to 82 % of simulated runs
(benchmarks/results/adapt_calibration.md, which measures this rule too).

The cost is power: the test sees half of the pairs, so the smallest gain it detects is about √2 larger than a single
pre-registered comparison on all of them would detect; the calibration page measures it against dev size.
Other honest designs (a smaller selection part, the parts swapped, all candidates tested at once on every pair by
step-down max-T) are measured against this one in benchmarks/results/adapt_designs.md: max-T is the most powerful
there only because its candidates read no dev pair, which rules out every choice listed above.

With --train (pairs runs), the labelled train pairs a candidate never read are evidence too (sentune.adaptation.evidence): a
seeded sample of them (the evidence pairs, at most EVIDENCE_CAP) is split by the same rule as the dev pairs, its
selection part joining the dev selection part and its confirmation part the dev confirmation part (TrainJudges). On
such a part the metric is the pair-weighted mean of its value on the dev pairs and on the evidence pairs, each ranked
among their own (sentune.tasks.permutation.measure_of, the permutation test swapping within both): a train pair is never
ranked against a dev pair, so the two files' label scales, or any monotone rescaling of one, change nothing. A
label-free candidate (poolings, post-processors, trained, SED, WiSE of a label-free one) is judged on every evidence
pair: nothing it learned read a label. A candidate that trains on --train (the supervised ones) trains on it without the
evidence confirmation pairs (the hold-out of data splitting again, Cox 1975: the model confirmed is the model shipped,
and no label of a confirmation pair reaches any choice), and is cross-fitted over the evidence selection pairs (Stone
1974; sentune.adaptation.crossfit, as adapt does over the dev selection pairs without --train): each of them is scored by a
fold model trained without it, the refit on all its rows is confirmed, tested and shipped, and a WiSE of it is scored
by its fold models at its mix; where the three fold trainings would cost more than those rows add, it trains without
them instead (sentune.adaptation.candidates.supervised's evidence_mode). So every candidate is judged on the same selection
pairs.

**One yardstick.** The gain that orders the candidates is every candidate's selection score minus the unchanged model's on
one set of pairs, the same for all: the dev selection pairs and the evidence selection pairs that every candidate and
the unchanged model have a score of (TrainJudges.common). A candidate judged on fewer (its model gone after --prune,
one built on a model it could not be cross-fitted with) shrinks that set for every candidate rather than being compared
on pairs of its own: gains measured on different pairs are not comparable (a label-free candidate's on 250 dev + 894
train pairs against a supervised one's on the 250 dev pairs alone chose the former by +1.57 against +1.13 on
scripts/main.sh, 1.9 points behind the latter on test). Each candidate tested is then tested on its own confirmation
pairs against the unchanged model's on the same; every choice inside a candidate (checkpoints, races, mixes) still reads the
dev selection pairs only. So the guarantee above stands, with more confirmation pairs; the calibration page measures it
with simulated train sets. Train pairs of another kind of label or another domain than the dev pairs would confirm a
gain the dev pairs do not measure: then the dev pairs alone decide (sentune.adaptation.evidence's checks, measured on
benchmarks/results/adapt_train_shift.md).

Search: the references (decide's `references`). A search user who does not adapt runs the dense model as it is or BM25
fused with it as their engine fuses by default: reciprocal rank fusion with k = 60 (Cormack, Clarke & Büttcher, SIGIR
2009; the k of Elasticsearch's and Azure AI Search's hybrid queries), adapt's `rrf`. Fusing BM25 with a dense model is
ahead of both on nearly every BEIR set in published fusion studies (Bruch, Gai & Ingber, "An analysis of fusion
functions for hybrid retrieval", ACM TOIS 2023), so a candidate that beats the dense model but hands back less than
`rrf` would leave the user worse off than doing nothing: every candidate must also be within SEARCH_MARGIN of `rrf`.
Not BM25 alone: adapt hands back an encoder and its index, and `rrf` keeps BM25's ranking as one of its two votes. When
no candidate is safe, the stronger of the unchanged model and `rrf` on every dev query is kept (where BM25 is weak the
fusion can fall below the dense model: on quora's selection queries `rrf` was 1.09 below it,
benchmarks/results/retrieval.md). The false-choice rate of search runs, simulated on per-query nDCG@10 with the real
decide: benchmarks/results/adapt_search_reference_null.md. Pairs runs have no reference but the unchanged model
(benchmarks/runners/adapt_calibration.py; the shuffled-label nulls, adapt_shuffled_null.py, are real pairs runs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sentune.adaptation.expected import expected_gains, gain_noise, shrink
from sentune.core.metrics import METRICS
from sentune.tasks.permutation import LEVEL, Confirmation, NonInferiority, measure_of, non_inferiority_test, paired_permutation_test

SELECT_FRACTION = 0.5
MIN_DEV_PAIRS = 100  # below it the confirmation half (50 pairs) detects only gains of many points (the calibration page)
# Search: how far below a reference (rrf) a shipped candidate may be, in nDCG@10 points, with the stated confidence. One
# point: a small share of what fusing BM25 adds to a dense model on BEIR (several points, Bruch, Gai & Ingber 2023), as a
# non-inferiority margin is a fraction of the reference's established effect (FDA, "Non-Inferiority Clinical Trials",
# 2016), and below what 200 queries tell apart (the confirmation's smallest confirmed gain, adapt_search_reference_null.md).
SEARCH_MARGIN = 1.0


@dataclass(frozen=True)
class DevSplit:
    select: np.ndarray  # indices into the dev pairs, sorted
    confirm: np.ndarray


def split_dev(gold: np.ndarray, seed: int = 0, fraction: float = SELECT_FRACTION) -> DevSplit:
    """A seeded split of the dev pairs into selection (`fraction` of them) and confirmation parts; 0/1 labels are split
    per class so both parts hold the same share of positives (average precision is sensitive to it)."""
    rng = np.random.default_rng(seed)
    binary = set(np.unique(gold)) <= {0.0, 1.0}
    groups = [np.flatnonzero(gold == label) for label in (0.0, 1.0)] if binary else [np.arange(len(gold))]
    select, confirm = [], []
    for group in groups:
        shuffled = rng.permutation(group)
        cut = int(round(len(shuffled) * fraction))
        select.append(shuffled[:cut])
        confirm.append(shuffled[cut:])
    return DevSplit(np.sort(np.concatenate(select)), np.sort(np.concatenate(confirm)))


def selection_scores(gold: np.ndarray, split: DevSplit, scores: dict[str, np.ndarray], metric: str) -> dict[str, float]:
    """Each system's score on the selection pairs (what every choice of adapt reads)."""
    names = list(scores)
    found = METRICS[metric].rows(gold[split.select], np.stack([scores[n][split.select] for n in names]))
    return {n: float(s) for n, s in zip(names, found, strict=True)}


@dataclass(frozen=True)
class TrainJudges:
    """--train's evidence pairs (sentune.adaptation.evidence): their labels, their split into selection and confirmation
    parts, and the scores of the systems they may judge: the baseline's, and each candidate's, NaN on the evidence pairs
    it (or a model it is built on) trained on. A candidate without scores here is judged on the dev pairs alone."""

    gold: np.ndarray
    split: DevSplit
    scores: dict[str, np.ndarray]

    def judging(self, name: str, part: str) -> np.ndarray:
        """The evidence positions of `part` (select or confirm) that judge `name`: those it has a score of."""
        index = getattr(self.split, part)
        return index[np.isfinite(self.scores[name][index])] if name in self.scores else index[:0]

    def common(self, names, part: str) -> np.ndarray:
        """The evidence positions of `part` that judge every one of `names`: the one yardstick (the module's docstring)."""
        index = getattr(self.split, part)
        for name in names:
            index = np.intersect1d(index, self.judging(name, part))
        return index


def _judged(name: str, split: DevSplit, train: TrainJudges | None, shared: np.ndarray | None = None) -> dict[str, dict[str, int]]:
    """The dev and train pairs of each part that judge `name`: on the selection part the ones shared by every system
    (`shared`), on the confirmation part its own."""
    if train is None:
        return {part: {"dev": len(getattr(split, part)), "train": 0} for part in ("select", "confirm")}
    select = train.judging(name, "select") if shared is None else shared
    return {"select": {"dev": len(split.select), "train": len(select)}, "confirm": {"dev": len(split.confirm), "train": len(train.judging(name, "confirm"))}}


def _part(
    gold: np.ndarray, split: DevSplit, scores: np.ndarray, part: str, train: TrainJudges | None, judged: str, name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The labels and `name`'s scores of `part` (select or confirm) of the dev pairs, and of the evidence pairs that
    judge the candidate `judged` (a candidate and the baseline are compared on the same pairs); and which of them are
    evidence pairs (the strata the metric is measured within: None, dev pairs alone)."""
    index = getattr(split, part)
    if train is None:
        return gold[index], scores[index], None
    extra = train.judging(judged, part)
    if not len(extra):
        return gold[index], scores[index], None
    strata = np.concatenate([np.zeros(len(index)), np.ones(len(extra))])
    return np.concatenate([gold[index], train.gold[extra]]), np.concatenate([scores[index], train.scores[name][extra]]), strata


def _count(judged: dict[str, int], unit: str) -> str:
    return f"{judged['dev']} {unit}" if not judged["train"] else f"{judged['dev'] + judged['train']} {unit} ({judged['dev']} dev + {judged['train']} train)"


@dataclass(frozen=True)
class Safety:
    """What a candidate must show on the confirmation part to be shipped: that it beats the unchanged model
    (`superiority`) and, for search, that it is not worse than each reference by more than SEARCH_MARGIN
    (`non_inferiority`, by reference)."""

    superiority: Confirmation
    non_inferiority: dict[str, NonInferiority] = field(default_factory=dict)

    @property
    def safe(self) -> bool:
        return self.superiority.confirmed and all(test.safe for test in self.non_inferiority.values())


@dataclass(frozen=True)
class Decision:
    name: str  # the chosen candidate, or the system kept (the unchanged model, or for search the strongest reference)
    best: str | None  # the best candidate on the selection pairs (the first tested), shipped or not
    selection: dict[str, float]  # every system's selection score (the baseline's on every selection pair)
    confirmation: Confirmation | None  # the chosen candidate against the unchanged model; none chosen: the first tested's
    reason: str
    judged: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # per system: {select, confirm} → {dev, train} pairs
    ahead: dict[str, float] = field(default_factory=dict)  # per candidate: its selection score minus the unchanged model's on the same pairs
    reference: str | None = None  # search: the strongest reference on every dev query (kept when no candidate is safe)
    safety: dict[str, Safety] = field(default_factory=dict)  # per tested candidate, in the order tested
    expected: dict[str, float] = field(default_factory=dict)  # per safe candidate: its expected gain (sentune.adaptation.expected)


def _selection_part(gold, split, train, shared, systems: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The labels, the systems' stacked scores and the strata of the selection part all systems are judged on."""
    if train is None or shared is None or not len(shared):
        return gold[split.select], np.stack([scores[split.select] for scores in systems.values()]), None
    strata = np.concatenate([np.zeros(len(split.select)), np.ones(len(shared))])
    part_gold = np.concatenate([gold[split.select], train.gold[shared]])
    stacked = np.stack([np.concatenate([scores[split.select], train.scores[name][shared]]) for name, scores in systems.items()])
    return part_gold, stacked, strata


def decide(
    gold: np.ndarray,
    split: DevSplit,
    baseline: tuple[str, np.ndarray],
    candidates: dict[str, np.ndarray],
    metric: str,
    seed: int = 0,
    stop_above: float | None = None,
    unit: str = "pairs",
    train: TrainJudges | None = None,
    references: dict[str, np.ndarray] | None = None,
    margin: float = SEARCH_MARGIN,
) -> Decision:
    """Safety, then choice (the module's docstring). The candidates ahead of the unchanged model on the selection pairs
    (and, for search, within `margin` of every reference there) are tested on the confirmation pairs in the order of
    their selection scores, best first, each for superiority over `baseline` (p ≤ LEVEL) and non-inferiority to every
    reference (p ≤ LEVEL), until one fails (fixed-sequence testing); of the safe ones, the one with the best expected
    gain (sentune.adaptation.expected) is shipped. None safe: the baseline is kept, or for search the strongest of it and
    the references on every dev query (the baseline on a tie). `gold` and the scores cover every dev pair.
    `stop_above`: see paired_permutation_test (simulations only). `unit`: pairs, or queries for retrieval. `train`:
    evidence pairs that judge too (every candidate and the baseline compared on the same selection pairs: one yardstick;
    each tested on its own confirmation pairs). `references` (search: systems a user runs without adapt): what no
    candidate may be worse than by more than `margin` points."""
    base_name, base_scores = baseline
    references = dict(references or {})
    if references:
        if train is not None:
            raise ValueError("references are search systems; a search run has no --train evidence pairs")
        if not METRICS[metric].mean_of_items:
            raise ValueError(f"references need a metric that is a mean of per-query values (got {metric})")
        candidates = {name: scores for name, scores in candidates.items() if name not in references and name != base_name}
    standing = {base_name: base_scores, **references}
    if train is not None and (base_name not in train.scores or not any(name in train.scores for name in candidates)):
        train = None  # the evidence judges nothing without the baseline's scores of it, or without a candidate's
    shared = None if train is None else train.common((base_name, *candidates), "select")
    judged = {name: _judged(name, split, train, shared) for name in (*standing, *candidates)}
    systems = {**standing, **candidates} if train is None else {base_name: base_scores, **candidates}
    part_gold, stacked, strata = _selection_part(gold, split, train, shared, systems)
    selection = {name: float(found) for name, found in zip(systems, measure_of(metric, strata)(part_gold, stacked), strict=True)}
    ahead = {name: selection[name] - selection[base_name] for name in candidates}
    kept, note = base_name, ""
    if references:
        every = np.concatenate([split.select, split.confirm])
        strength = {name: float(np.mean(scores[every])) for name, scores in standing.items()}
        kept = max(standing, key=strength.__getitem__)  # the first listed (the baseline) on a tie
        scored = ", ".join(f"{name} {strength[name]:.2f}" for name in sorted(standing, key=lambda name: -strength[name]))
        note = f" (the strongest on the {len(every)} dev {unit} of the systems a user runs without adapt: {scored})"

    def outcome(name: str, best: str | None, confirmation: Confirmation | None, reason: str, safety=None, expected=None) -> Decision:
        return Decision(name, best, selection, confirmation, reason, judged, ahead, kept if references else None, safety or {}, expected or {})

    if not candidates:
        return outcome(kept, None, None, f"no candidate to compare: {kept} is kept{note}")
    order = sorted(candidates, key=lambda name: -selection[name])  # the first listed on a tie; every candidate read the same pairs
    best = order[0]
    testable = [n for n in order if ahead[n] > 0 and all(selection[n] >= selection[r] - margin for r in references)]
    if not testable:
        words = _count(judged[best]["select"], unit).replace(f" {unit}", f" selection {unit}", 1)
        within = f" and within {margin:g} of {', '.join(references)}" if references else ""
        return outcome(
            kept,
            best,
            None,
            f"no candidate scores above {base_name}{within} on the {words} (the best, {best}: {selection[best]:.2f} vs {selection[base_name]:.2f}): {kept} is kept{note}",
        )
    safety: dict[str, Safety] = {}
    for name in testable:  # fixed-sequence: each at LEVEL, in an order the confirmation part did not set, until one fails
        gold_confirm, confirm_scores, confirm_strata = _part(gold, split, candidates[name], "confirm", train, name, name)
        _, base_confirm, _ = _part(gold, split, base_scores, "confirm", train, name, base_name)
        superiority = paired_permutation_test(gold_confirm, confirm_scores, base_confirm, metric, seed=seed, stop_above=stop_above, strata=confirm_strata)
        tests = (
            {
                reference: non_inferiority_test(confirm_scores, scores[split.confirm], margin, seed=seed, stop_above=stop_above)
                for reference, scores in references.items()
            }
            if superiority.confirmed
            else {}
        )
        safety[name] = Safety(superiority, tests)
        if not safety[name].safe:
            break
    safe = [name for name, found in safety.items() if found.safe]
    first = safety[testable[0]]
    if not safe:
        return outcome(
            kept, best, first.superiority, _unsafe(testable[0], first, selection, base_name, unit, judged, margin) + f": {kept} is kept{note}", safety
        )
    noise = gain_noise(metric, part_gold, stacked[[list(systems).index(name) for name in candidates]], stacked[list(systems).index(base_name)], strata, seed)
    shrunk = {name: float(gain) for name, gain in zip(candidates, shrink(np.array([ahead[name] for name in candidates]), noise), strict=True)}
    counts = {name: (sum(judged[name]["select"].values()), sum(judged[name]["confirm"].values())) for name in safe}
    expected = {
        name: float(gain)
        for name, gain in zip(
            safe,
            expected_gains(
                np.array([shrunk[n] for n in safe]),
                np.array([safety[n].superiority.difference for n in safe]),
                np.array([counts[n][0] for n in safe]),
                np.array([counts[n][1] for n in safe]),
            ),
            strict=True,
        )
    }
    chosen = max(safe, key=expected.__getitem__)  # the first tested on a tie
    found = safety[chosen].superiority
    confirm_words = _count(judged[chosen]["confirm"], unit).replace(f" {unit}", f" confirmation {unit}", 1)
    reason = f"{chosen} is safe: it beats {base_name} on the {confirm_words} no choice read ({found.candidate:.2f} vs {found.baseline:.2f}, p = {found.p_value:.3f} ≤ {LEVEL:g})"
    for reference, test in safety[chosen].non_inferiority.items():
        reason += f" and is not worse than {reference} by {margin:g} point ({test.candidate:.2f} vs {test.reference:.2f}, p = {test.p_value:.3f} ≤ {LEVEL:g})"
    others = f"of the {len(safe)} safe candidates ({', '.join(safe)}) it" if len(safe) > 1 else "it"
    reason += (
        f"; {others} has the best expected gain over {base_name}, {expected[chosen]:+.2f} (selection {ahead[chosen]:+.2f} shrunk to "
        f"{shrunk[chosen]:+.2f}, confirmation {found.difference:+.2f})"
    )
    return outcome(chosen, best, found, reason, safety, expected)


def _unsafe(name: str, found: Safety, selection: dict[str, float], base_name: str, unit: str, judged, margin: float) -> str:
    """Why the first candidate tested is not safe (the fixed sequence stops there)."""
    test = found.superiority
    words = _count(judged[name]["confirm"], unit).replace(f" {unit}", f" confirmation {unit}", 1)
    head = f"the best candidate on the selection {unit}, {name} ({selection[name]:.2f} vs {selection[base_name]:.2f}), is not safe"
    if not test.confirmed:
        return f"{head}: it does not beat {base_name} on the {words} no choice read ({test.candidate:.2f} vs {test.baseline:.2f}, p = {test.p_value:.3f} > {LEVEL:g})"
    failed = [(reference, t) for reference, t in found.non_inferiority.items() if not t.safe]
    reference, t = failed[0]
    return (
        f"{head}: it beats {base_name} (p = {test.p_value:.3f}) but is not shown within {margin:g} point of {reference} on the {words} "
        f"({t.candidate:.2f} vs {t.reference:.2f}, p = {t.p_value:.3f} > {LEVEL:g})"
    )


DETECTABLE = Path(__file__).parent / "detectable_gain.json"  # written by benchmarks/runners/adapt_calibration.py


def detectable_gain(metric: str, pairs: int) -> float | None:
    """The gain (points) the rule confirms 80 % of the time with `pairs` dev pairs, from the calibration benchmark's
    simulation: linear in log(pairs) between its dev sizes, the nearest size's beyond them. None when not known, or when
    even the largest simulated gain is confirmed less often (the table's null)."""
    if not DETECTABLE.is_file():
        return None
    table = {int(n): g for n, g in json.loads(DETECTABLE.read_text())["gains"].get(metric, {}).items()}
    if not table:
        return None
    sizes = sorted(table)
    lower = max([n for n in sizes if n <= pairs] or [sizes[0]])
    upper = min([n for n in sizes if n >= pairs] or [sizes[-1]])
    if table[lower] is None or table[upper] is None:
        return None
    if upper == lower:
        return table[lower]
    weight = (math.log(pairs) - math.log(lower)) / (math.log(upper) - math.log(lower))
    return table[lower] + weight * (table[upper] - table[lower])
