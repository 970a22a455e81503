"""How `sentune adapt` decides, so that its confidence is a statement about the model it saves: select on one part of
the dev pairs, confirm on the other.

Every choice adapt makes on the user's pairs — each trained candidate's checkpoint (early stopping), wise's mix, which
racing candidates go on, which candidate is best — reads only the **selection** part. The one candidate this procedure
ends with is then compared with the unchanged model on the **confirmation** part, which nothing before has read, by a
one-sided paired permutation test (sentune.tasks.permutation); it replaces the unchanged model when p ≤ 0.03 (LEVEL). Because
the confirmation pairs are independent of everything that picked the candidate, P(a candidate no better than the
unchanged model is shipped) ≤ 5 % however many candidates, checkpoints and mixes were tried: data splitting (Cox, "A note
on data-splitting for the evaluation of significance levels", Biometrika 1975), the hold-out form of selective
inference. The old rule (best on all dev pairs, then a bootstrap on the same pairs) shipped such a candidate in up to
82 % of simulated runs (benchmarks/results/adapt_calibration.md).

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

**One yardstick.** The gain that picks the best is every candidate's selection score minus the unchanged model's on
one set of pairs, the same for all: the dev selection pairs and the evidence selection pairs that every candidate and
the unchanged model have a score of (TrainJudges.common). A candidate judged on fewer (its model gone after --prune,
one built on a model it could not be cross-fitted with) shrinks that set for every candidate rather than being compared
on pairs of its own: gains measured on different pairs are not comparable (a label-free candidate's on 250 dev + 894
train pairs against a supervised one's on the 250 dev pairs alone chose the former by +1.57 against +1.13 on
scripts/main.sh, 1.9 points behind the latter on test). The best is then confirmed on its own confirmation pairs
against the unchanged model's on the same; every choice inside a candidate (checkpoints, races, mixes) still reads the
dev selection pairs only. So the guarantee above stands, with more confirmation pairs; the calibration page measures it
with simulated train sets. Train pairs of another kind of label or another domain than the dev pairs would confirm a
gain the dev pairs do not measure: then the dev pairs alone decide (sentune.adaptation.evidence's checks, measured on
benchmarks/results/adapt_train_shift.md).

Search: what is kept when no candidate is confirmed (decide's `references`). A search user who does not adapt runs the
dense model as it is or BM25 fused with it as their engine fuses by default: reciprocal rank
fusion with k = 60 (Cormack, Clarke & Büttcher, SIGIR 2009; the k of Elasticsearch's and Azure AI Search's hybrid
queries), adapt's `rrf`. Fusing BM25 with a dense model is ahead of both on nearly every BEIR set in published fusion
studies (Bruch, Gai & Ingber, "An analysis of fusion functions for hybrid retrieval", ACM TOIS 2023), so keeping the dense
model alone, when a candidate misses confirmation against it by a hair, hands back the weaker of the two systems a user
already has. The reference is therefore the stronger of the unchanged model and `rrf` on the selection queries (the
unchanged model on a tie), and every candidate must beat it on the confirmation queries. Not `rrf` alone, fixed in
advance: where BM25 is weak the fusion can fall below the dense model (on quora's selection queries `rrf` was 1.09
below it, benchmarks/results/retrieval.md), and a fixed reference would then be kept in its place. Not BM25 alone: adapt hands back an encoder and its index, and `rrf` keeps
BM25's ranking as one of its two votes. The reference is chosen on the selection queries, as the candidate is, so the
confirmation queries are independent of both and the guarantee above holds against it: P(a candidate no better than
the reference replaces it) ≤ 5 % (simulated on real search runs' per-query scores:
benchmarks/results/adapt_search_reference_null.md). Pairs runs have no reference but the unchanged model, so the calibration
(benchmarks/runners/adapt_calibration.py, adapt_shuffled_null.py: pairs runs) measures the same rule as before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sentune.core.metrics import METRICS
from sentune.tasks.permutation import LEVEL, Confirmation, measure_of, paired_permutation_test

SELECT_FRACTION = 0.5
MIN_DEV_PAIRS = 100  # below it the confirmation half (50 pairs) detects only gains of many points (the calibration page)


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


@dataclass(frozen=True)
class Decision:
    name: str  # the chosen candidate, or the baseline's name
    best: str | None  # the best candidate on the selection pairs, confirmed or not
    selection: dict[str, float]  # every system's selection score (the baseline's on every selection pair)
    confirmation: Confirmation | None  # the best candidate against the baseline on the confirmation pairs
    reason: str
    judged: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # per system: {select, confirm} → {dev, train} pairs
    ahead: dict[str, float] = field(default_factory=dict)  # per candidate: its selection score minus the baseline's on the same pairs
    reference: str | None = None  # search: the reference the candidates were compared with (decide's `references`)


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
) -> Decision:
    """The candidate best on the selection pairs replaces the baseline when the confirmation pairs confirm it (p ≤ LEVEL);
    a candidate no better than the baseline on the selection pairs is not tested. `gold` and the scores cover every dev
    pair; the split says which part each choice reads. `stop_above`: see paired_permutation_test (simulations only).
    `unit`: what the dev set is made of, for the reason's words (pairs, or queries for retrieval). `train`: evidence
    pairs that judge too; every candidate and the baseline are then compared on the same selection pairs (the dev ones
    and the evidence ones all of them have a score of: one yardstick), and the best is confirmed on its own
    confirmation pairs against the baseline on the same.
    `references` (search: systems a user runs without adapt, beside the unchanged model that `baseline` is): the
    strongest of them and the baseline on the selection part (the baseline on a tie) is the baseline instead, which
    the candidates must beat and which is kept when none does (the module's docstring says why)."""
    base_name, base_scores = baseline
    note, standing = "", {base_name: base_scores, **(references or {})}
    if references:
        if train is not None:
            raise ValueError("references are search systems; a search run has no --train evidence pairs")
        strength = selection_scores(gold, split, standing, metric)
        base_name = max(standing, key=strength.__getitem__)  # the first listed (the baseline) on a tie
        base_scores = standing[base_name]
        candidates = {name: scores for name, scores in candidates.items() if name not in standing}
        scored = ", ".join(f"{name} {strength[name]:.2f}" for name in sorted(standing, key=lambda name: -strength[name]))
        note = f"the reference is {base_name}, the strongest on the {len(split.select)} selection {unit} of the systems kept when no candidate is confirmed ({scored}); "
    if train is not None and (base_name not in train.scores or not any(name in train.scores for name in candidates)):
        train = None  # the evidence judges nothing without the baseline's scores of it, or without a candidate's
    shared = None if train is None else train.common((base_name, *candidates), "select")
    judged = {name: _judged(name, split, train, shared) for name in (*standing, base_name, *candidates)}
    if train is None:
        selection = selection_scores(gold, split, {**standing, base_name: base_scores, **candidates}, metric)
    else:  # one set of pairs for all: the dev selection pairs and the evidence selection pairs every system has a score of
        assert shared is not None
        systems = {base_name: base_scores, **candidates}
        strata = np.concatenate([np.zeros(len(split.select)), np.ones(len(shared))]) if len(shared) else None
        part_gold = np.concatenate([gold[split.select], train.gold[shared]])
        stacked = np.stack([np.concatenate([scores[split.select], train.scores[name][shared]]) for name, scores in systems.items()])
        selection = {name: float(found) for name, found in zip(systems, measure_of(metric, strata)(part_gold, stacked), strict=True)}
    ahead = {name: selection[name] - selection[base_name] for name in candidates}
    against = {name: selection[base_name] for name in candidates}

    def outcome(name: str, best: str | None, confirmation: Confirmation | None, reason: str) -> Decision:
        return Decision(name, best, selection, confirmation, note + reason, judged, ahead, base_name if references else None)

    if not candidates:
        return outcome(base_name, None, None, "no candidate to compare")
    best = max(candidates, key=selection.__getitem__)  # the first listed on a tie; every candidate read the same pairs
    words = _count(judged[best]["select"], unit)
    if ahead[best] <= 0:
        return outcome(
            base_name,
            best,
            None,
            f"no candidate scores above {base_name} on the {words.replace(f' {unit}', f' selection {unit}', 1)} (the best, {best}: "
            f"{selection[best]:.2f} vs {against[best]:.2f}): {base_name} is kept",
        )
    gold_confirm, best_confirm, strata = _part(gold, split, candidates[best], "confirm", train, best, best)
    _, base_confirm, _ = _part(gold, split, base_scores, "confirm", train, best, base_name)
    found = paired_permutation_test(gold_confirm, best_confirm, base_confirm, metric, seed=seed, stop_above=stop_above, strata=strata)
    confirm_words = _count(judged[best]["confirm"], unit).replace(f" {unit}", f" confirmation {unit}", 1)
    where = f"on the {confirm_words} no choice read: {found.candidate:.2f} vs {found.baseline:.2f}, p = {found.p_value:.3f}"
    if found.confirmed:
        reason = f"{best} is best on the selection {unit} ({selection[best]:.2f} vs {against[best]:.2f}) and beats {base_name} {where} (≤ {LEVEL:g})"
        return outcome(best, best, found, reason)
    return outcome(
        base_name,
        best,
        found,
        f"the best candidate on the selection {unit}, {best} ({selection[best]:.2f} vs {against[best]:.2f}), is not confirmed {where} "
        f"(> {LEVEL:g}): {base_name} is kept",
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
