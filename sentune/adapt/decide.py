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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sentune.core.metrics import METRICS
from sentune.tasks.permutation import LEVEL, Confirmation, paired_permutation_test

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
class Decision:
    name: str  # the chosen candidate, or the baseline's name
    best: str | None  # the best candidate on the selection pairs, confirmed or not
    selection: dict[str, float]  # every system's selection score
    confirmation: Confirmation | None  # the best candidate against the baseline on the confirmation pairs
    reason: str


def decide(
    gold: np.ndarray,
    split: DevSplit,
    baseline: tuple[str, np.ndarray],
    candidates: dict[str, np.ndarray],
    metric: str,
    seed: int = 0,
    stop_above: float | None = None,
    unit: str = "pairs",
) -> Decision:
    """The candidate best on the selection pairs replaces the baseline when the confirmation pairs confirm it (p ≤ LEVEL);
    a candidate no better than the baseline on the selection pairs is not tested. `gold` and the scores cover every dev
    pair; the split says which part each choice reads. `stop_above`: see paired_permutation_test (simulations only).
    `unit`: what the dev set is made of, for the reason's words (pairs, or queries for retrieval)."""
    base_name, base_scores = baseline
    selection = selection_scores(gold, split, {base_name: base_scores, **candidates}, metric)
    if not candidates:
        return Decision(base_name, None, selection, None, "no candidate to compare")
    best = max(candidates, key=lambda name: selection[name])  # the first listed on a tie
    ahead = selection[best] - selection[base_name]
    if ahead <= 0:
        return Decision(
            base_name,
            best,
            selection,
            None,
            f"no candidate scores above {base_name} on the {len(split.select)} selection {unit} (the best, {best}: "
            f"{selection[best]:.2f} vs {selection[base_name]:.2f}): {base_name} is kept",
        )
    found = paired_permutation_test(gold[split.confirm], candidates[best][split.confirm], base_scores[split.confirm], metric, seed=seed, stop_above=stop_above)
    where = f"on the {found.pairs} confirmation {unit} no choice read: {found.candidate:.2f} vs {found.baseline:.2f}, p = {found.p_value:.3f}"
    if found.confirmed:
        return Decision(
            best,
            best,
            selection,
            found,
            f"{best} is best on the selection {unit} ({selection[best]:.2f} vs {selection[base_name]:.2f}) and beats {base_name} {where} (≤ {LEVEL:g})",
        )
    return Decision(
        base_name,
        best,
        selection,
        found,
        f"the best candidate on the selection {unit}, {best} ({selection[best]:.2f} vs {selection[base_name]:.2f}), is not confirmed {where} "
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
