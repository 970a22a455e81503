"""The rows the race of the training candidates reads (sentune.adaptation.race): the selection pairs that judge at the end.

With --train's evidence pairs judging (sentune.adaptation.evidence), a label-free candidate is selected at the end on the dev
selection pairs and the evidence selection pairs, each ranked among their own (the stratified metric of
sentune.tasks.permutation.measure_of). The race reads the same kind of rows, with the same metric, so that a
candidate is not stopped on the 125 dev selection pairs of a 250-pair dev set by noise that the train pairs would have
outweighed: the dev selection pairs, then a seeded sample of at most RACE_TRAIN_PAIRS of the evidence selection pairs.
Its paired bootstrap resamples within each stratum (a resample keeps as many dev and train pairs as the rows hold).

What each racer stands for is unchanged: its best checkpoint so far, chosen as its trainer chooses it (on the dev
selection pairs, which every evaluation scores); the race scores that checkpoint on the train rows once (cached beside
its run, OUT/candidates/NAME/run/race_rows/), so a check costs one encoding of those pairs per racer. Without
evidence that judges the rows are the dev selection pairs alone, as before.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sentune.core.metrics import METRICS
from sentune.tasks.bootstrap import bootstrap_differences, resamples
from sentune.tasks.permutation import measure_of

if TYPE_CHECKING:
    from sentune.adaptation.context import Context
    from sentune.adaptation.records import CandidateRecord

# The race checks each racer after 3 of its 4 rounds (sentune.adaptation.race.RUNGS), encoding these pairs each time: at 500
# (1,000 texts) that is 3,000 texts a racer, about what its 10 evaluations on a dev set of 150 selection pairs encode,
# while the rows grow from 125 dev pairs to 625 and the bootstrap's spread of a difference shrinks by about √5. All 1,375
# evidence selection pairs of a 5,500-pair train set would cost 2.75 times as much for a further √(1500/625) ≈ 1.5.
RACE_TRAIN_PAIRS = 500
RACE_SEED_OFFSET = 11  # the sample of the evidence selection pairs draws apart from the evidence's own draws
FOLDER = "race_rows"  # beside a run: each scored checkpoint's cosines of the train rows


@dataclass(frozen=True)
class RaceRows:
    """What the race compares racers on: the labels, which rows are train pairs (None: dev pairs alone), the unchanged
    model's cosines of them, and the positions (into the evidence pairs) of the train pairs among them."""

    gold: np.ndarray
    unchanged: np.ndarray
    dev: int  # the first `dev` rows are the dev selection pairs (in selection_gold's order)
    train_positions: np.ndarray  # positions into ctx.evidence.indices; empty: dev pairs alone
    train_indices: np.ndarray  # the same pairs as --train indices (what a cached scoring is keyed by)

    @property
    def train(self) -> int:
        return len(self.train_positions)

    @property
    def strata(self) -> np.ndarray | None:
        return None if not self.train else np.concatenate([np.zeros(self.dev), np.ones(self.train)])

    @property
    def digest(self) -> str:
        return digest_of(self.train_indices)

    def counted(self) -> dict[str, int]:
        return {"dev": self.dev, "train": self.train}

    def words(self, unit: str) -> str:
        """The rows as a reason names them."""
        if not self.train:
            return f"the {self.dev} selection {unit}"
        return f"the {self.dev + self.train} selection {unit} ({self.dev} dev + {self.train} train)"

    def dev_only(self) -> RaceRows:
        """The dev selection pairs alone (a round where a racer's checkpoint could not be scored on the train rows)."""
        empty = self.train_positions[:0]
        return RaceRows(self.gold[: self.dev], self.unchanged[: self.dev], self.dev, empty, self.train_indices[:0])

    def draws(self, seed: int) -> np.ndarray:
        """Paired bootstrap resamples: each stratum's rows drawn within it (the dev rows as resamples draws them)."""
        if not self.train:
            return resamples(self.dev, seed=seed)
        train = self.dev + resamples(self.train, seed=seed + RACE_SEED_OFFSET)
        return np.concatenate([resamples(self.dev, seed=seed), train], axis=1)


def score_on(gold: np.ndarray, predicted: np.ndarray, metric: str, strata: np.ndarray | None = None) -> float:
    """`metric` of one system on the rows: within each stratum, pair-weighted (the end's selection score)."""
    if strata is None:
        return float(METRICS[metric].score(gold, predicted))
    return float(measure_of(metric, strata)(gold, np.atleast_2d(predicted))[0])


def differences(gold: np.ndarray, candidate: np.ndarray, rival: np.ndarray, metric: str, draws: np.ndarray, strata: np.ndarray | None = None) -> np.ndarray:
    """score(candidate) − score(rival) on each resample (`draws`: RaceRows.draws's, within each stratum)."""
    if strata is None:
        return bootstrap_differences(gold, candidate, rival, metric, draws)
    rows = METRICS[metric].rows
    total = np.zeros(len(draws))
    for label in np.unique(strata):
        columns = draws[:, np.flatnonzero(strata == label)]
        total += columns.shape[1] * (rows(gold[columns], candidate[columns]) - rows(gold[columns], rival[columns]))
    return total / len(gold)


def digest_of(train_indices: np.ndarray) -> str:
    """What a race's verdicts depend on beyond the dev selection pairs: the --train pairs among its rows."""
    return hashlib.sha256(np.asarray(train_indices, dtype=np.int64).tobytes()).hexdigest()[:16]


def raced_elsewhere(record: CandidateRecord, ctx: Context) -> bool:
    """A record of a candidate the race stopped on other rows than this run's (a run resumed with --train, say): it
    is raced again, from its run's paused checkpoint. Records written before the race read train pairs were stopped on
    the dev selection pairs alone."""
    if record.stopped is None:
        return False
    digest = record.race.rows_digest if record.race is not None and record.race.rows_digest is not None else digest_of(np.zeros(0))
    return digest != digest_of(_sample(ctx)[1])


def race_train_pairs(ctx: Context) -> int:
    """How many evidence selection pairs the race reads (0: the evidence does not judge, or there is none)."""
    evidence = getattr(ctx, "evidence", None)
    return 0 if evidence is None or not evidence.judges else min(RACE_TRAIN_PAIRS, len(evidence.split.select))


def race_rows(ctx: Context) -> RaceRows:
    """The run's race rows (the module's docstring): the sample is seeded, and per class for 0/1 labels as the dev split
    is (average precision reads the share of positives)."""
    dev_gold = ctx.selection_gold()
    unchanged = ctx.selection_cosines(ctx.untuned("model")["dev"])
    select, indices = _sample(ctx)
    if not len(select):
        return RaceRows(dev_gold, unchanged, len(dev_gold), select, indices)
    from sentune.adaptation.untuned_evidence import untuned_scores

    gold = np.concatenate([dev_gold, ctx.evidence.gold[select]])
    untuned = untuned_scores(ctx, ctx.evidence)["model"][select]  # encoded once, before any candidate ran (draw_evidence)
    return RaceRows(gold, np.concatenate([unchanged, untuned]), len(dev_gold), select, indices)


def _sample(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The evidence selection pairs the race reads: their positions in the evidence pairs and their --train indices."""
    from sentune.adaptation.decide import split_dev

    wanted = race_train_pairs(ctx)
    if not wanted:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    evidence = ctx.evidence
    select = evidence.split.select
    if wanted < len(select):
        select = select[split_dev(evidence.gold[select], seed=ctx.config.seed + RACE_SEED_OFFSET, fraction=wanted / len(select)).select]
    return select, evidence.indices[select]


def train_cosines(rows: RaceRows, weights: Path | None, ctx: Context) -> np.ndarray | None:
    """The cosines of the race's train rows under the model saved at `weights` (a run's model/ or one of its
    checkpoints/checkpoint-N), cached beside its run; None when there are no train rows or no such weights."""
    if not rows.train:
        return np.zeros(0)
    if weights is None or not (weights / "modules.json").is_file():
        return None
    run = weights.parent if weights.name == "model" else weights.parent.parent
    cache = run / FOLDER / f"{weights.name}.npz"
    if cache.is_file():
        found = np.load(cache)
        if str(found["digest"]) == rows.digest:
            return found["cosines"]
    from sentune.core.models import load_model
    from sentune.data.user_data import ScoredPairs
    from sentune.tasks.user_pairs import PairScorer

    train = ctx.inputs.task.train
    assert isinstance(train, ScoredPairs)  # evidence pairs: pairs runs only
    pairs = ScoredPairs([train.pairs[int(i)] for i in rows.train_indices], train.kind, train.path)
    model = load_model(str(weights), device=ctx.device)
    model.max_seq_length = ctx.base.max_seq_length  # read as far as the model it started from, as its evaluations do
    scorer = ctx._scoring(PairScorer({"race": pairs}, ctx.config.show_progress))
    cosines = scorer.of_model(model, f"race: {run.parent.name} on {rows.train} train pairs")["race"]
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(str(cache), digest=np.array(rows.digest), cosines=cosines)
    return cosines
