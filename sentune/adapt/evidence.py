"""Labelled train pairs as evidence (pairs runs with --train): which of them judge the candidates, and whether they may.

A labelled pair that a candidate never trained on judges it as well as a dev pair does. adapt takes a seeded sample of
at most EVIDENCE_CAP of the --train pairs, and at most half of them (the evidence pairs), and splits it with the dev
pairs' own rule (sentune.adapt.decide.split_dev) into a selection and a confirmation part, which join the dev pairs'
parts (the design is in sentune.adapt.decide). The cap bounds what every candidate pays for it: each one encodes at most
2·EVIDENCE_CAP more texts, once, when the run's candidates are done (the race and every other choice inside a candidate
read the dev selection pairs only). It is set high because the confirmation's power grows with its pairs (the gain
confirmed 80 % of the time shrinks as the pairs grow: benchmarks/results/adapt_calibration.md), and users' train sets
hold gains smaller than the dev pairs alone can confirm.

Train pairs judge only when they measure what the dev pairs measure. Four checks, before any candidate runs, fall back to
the dev pairs alone when any fails (adapt says so in one line):
- the labels: --train on another scale than the dev pairs (rescaled onto it, sentune.adapt.inputs), 0/1 labels
  against graded dev scores, or label distributions apart by more than LABEL_DISTANCE (the two-sample
  Kolmogorov-Smirnov distance; for 0/1 labels the difference of the positive shares);
- the scores: the unchanged model's score on the evidence pairs and on the dev pairs more than SCORE_POINTS apart, even
  at the nearer end of the gap's bootstrap interval (another domain shows in how well the same model ranks it);
- the texts: a classifier tells evidence pairs from dev pairs by the unchanged model's vectors (domain_auc).
benchmarks/results/adapt_train_shift.md measures the checks on real train and dev sets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from sentune.adapt.decide import DevSplit, split_dev
from sentune.adapt.names import EVIDENCE_CAP
from sentune.core.metrics import METRICS

LABEL_DISTANCE = 0.2
SCORE_POINTS = 10.0
SCORE_RESAMPLES = 300
DOMAIN_AUC = 0.8  # a classifier tells a train pair from a dev pair this well or better: another domain
DOMAIN_PAIRS = 500  # at most this many pairs of each side train and test that classifier
SCALE_MARGIN = 0.25  # of the dev scores' range: train scores beyond it are on another scale
EVIDENCE_SEED_OFFSET = 7  # the evidence sample and its split draw apart from the dev split's draws


@dataclass(frozen=True)
class Evidence:
    """The evidence pairs: `indices` into --train's pairs (sorted), their labels, and the split of their positions
    (select / confirm index `indices`); `shift`: why they do not judge (None: they do)."""

    indices: np.ndarray
    gold: np.ndarray
    split: DevSplit
    shift: str | None = None

    @property
    def digest(self) -> str:
        """What a candidate's scores of the evidence pairs depend on (its cached train-scores.npz names it)."""
        return hashlib.sha256(self.indices.astype(np.int64).tobytes() + self.gold.astype(np.float64).tobytes()).hexdigest()[:16]

    @property
    def judges(self) -> bool:
        return self.shift is None

    @property
    def confirm_train_indices(self) -> set[int]:
        """The train pairs of the confirmation part: no candidate trains on them while the evidence judges."""
        return {int(i) for i in self.indices[self.split.confirm]} if self.judges else set()


def held_out_digest(evidence: Evidence | None) -> str | None:
    """Which train pairs confirm, and so are left out of training on --train (None: none): what a candidate that
    trains on --train, or is built on one that did, depends on."""
    return evidence.digest if evidence is not None and evidence.judges else None


def evidence_size(train_pairs: int, cap: int = EVIDENCE_CAP) -> int:
    """How many train pairs are evidence: at most `cap`, and at most half of them, so that the confirmation part the
    supervised candidates leave out of their training is at most a quarter of --train."""
    return min(cap, train_pairs // 2)


def sample_evidence(train_gold: np.ndarray, seed: int, cap: int = EVIDENCE_CAP) -> tuple[np.ndarray, DevSplit]:
    """A seeded sample of evidence_size train pairs, and its split by split_dev."""
    rng = np.random.default_rng([seed, EVIDENCE_SEED_OFFSET])
    indices = np.sort(rng.choice(len(train_gold), size=evidence_size(len(train_gold), cap), replace=False))
    return indices, split_dev(train_gold[indices], seed=seed + EVIDENCE_SEED_OFFSET)


def label_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov distance: the largest gap between the two empirical distribution functions."""
    from scipy.stats import ks_2samp

    return float(ks_2samp(a, b).statistic)


def scale_shift(dev_gold: np.ndarray, train_gold: np.ndarray) -> str | None:
    """Why --train's labels (as written) are on another scale than the dev pairs' (None: the same scale): 0/1 labels
    against graded scores, or scores beyond the dev scores' range by more than SCALE_MARGIN of it (a dev sample may
    miss the ends of its own scale)."""
    binary_dev, binary_train = set(np.unique(dev_gold)) <= {0.0, 1.0}, set(np.unique(train_gold)) <= {0.0, 1.0}
    if binary_train and not binary_dev:
        return "they have 0/1 labels, the dev pairs graded scores"
    margin = SCALE_MARGIN * (dev_gold.max() - dev_gold.min())
    if not binary_train and (train_gold.min() < dev_gold.min() - margin or train_gold.max() > dev_gold.max() + margin):
        return (
            f"their scores run from {train_gold.min():g} to {train_gold.max():g}, the dev pairs' from {dev_gold.min():g} to {dev_gold.max():g}: another scale"
        )
    return None


def label_shift(dev_gold: np.ndarray, train_gold: np.ndarray) -> str | None:
    """Why the train labels (on the dev scale) are not distributed as the dev labels are (None: they are)."""
    distance = label_distance(dev_gold, train_gold)
    if distance > LABEL_DISTANCE:
        return f"their labels are distributed otherwise than the dev pairs' (Kolmogorov-Smirnov distance {distance:.2f} > {LABEL_DISTANCE:g})"
    return None


def score_gap(metric: str, dev_gold: np.ndarray, dev_scores: np.ndarray, evidence_gold: np.ndarray, evidence_scores: np.ndarray, seed: int = 0):
    """The unchanged model's score on the evidence pairs minus its score on the dev pairs, and the 95 % percentile
    interval of that gap over SCORE_RESAMPLES independent resamples of each side."""
    from sentune.tasks.bootstrap import resamples

    measure = METRICS[metric]
    gap = measure.score(evidence_gold, evidence_scores) - measure.score(dev_gold, dev_scores)
    dev_draws, train_draws = resamples(len(dev_gold), SCORE_RESAMPLES, seed), resamples(len(evidence_gold), SCORE_RESAMPLES, seed + 1)
    gaps = measure.rows(evidence_gold[train_draws], evidence_scores[train_draws]) - measure.rows(dev_gold[dev_draws], dev_scores[dev_draws])
    return float(gap), float(np.percentile(gaps, 2.5)), float(np.percentile(gaps, 97.5))


def score_shift(metric: str, dev_gold: np.ndarray, dev_scores: np.ndarray, evidence_gold: np.ndarray, evidence_scores: np.ndarray, seed: int = 0) -> str | None:
    """Why the evidence pairs are another domain by the unchanged model's scores of them (None: they are not): the gap
    is more than SCORE_POINTS even at its 95 % interval's nearer end (a few dozen pairs can be that far apart by chance)."""
    gap, low, high = score_gap(metric, dev_gold, dev_scores, evidence_gold, evidence_scores, seed)
    if low > SCORE_POINTS or high < -SCORE_POINTS:
        return (
            f"the unchanged model scores {gap:+.2f} points on them against the dev pairs ([{low:+.2f}, {high:+.2f}], beyond ±{SCORE_POINTS:g}: another domain)"
        )
    return None


def domain_auc(dev_vectors: np.ndarray, train_vectors: np.ndarray, seed: int = 0) -> float:
    """How well a linear classifier tells train pairs from dev pairs by the unchanged model's vectors of them (each pair
    its two sentences' mean vector): the cross-validated area under its ROC curve, 0.5 when they are alike. A classifier
    two-sample test (Lopez-Paz and Oquab, "Revisiting classifier two-sample tests", ICLR 2017), read as an effect size:
    with hundreds of pairs even a slight difference of genre is significant, and only a large one should cost the
    train pairs their say. At most DOMAIN_PAIRS pairs of each side, as many of each."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    rng = np.random.default_rng(seed)
    size = min(DOMAIN_PAIRS, len(dev_vectors), len(train_vectors))
    dev = dev_vectors[rng.choice(len(dev_vectors), size, replace=False)]
    train = train_vectors[rng.choice(len(train_vectors), size, replace=False)]
    x, y = np.concatenate([dev, train]), np.concatenate([np.zeros(size), np.ones(size)])
    return float(cross_val_score(LogisticRegression(max_iter=1000), x, y, cv=5, scoring="roc_auc").mean())


def domain_shift(dev_vectors: np.ndarray, train_vectors: np.ndarray, seed: int = 0) -> str | None:
    """Why the train pairs' texts are another domain than the dev pairs' (None: they are not)."""
    auc = domain_auc(dev_vectors, train_vectors, seed)
    if auc >= DOMAIN_AUC:
        return f"a classifier tells their texts from the dev pairs' (cross-validated AUC {auc:.2f} ≥ {DOMAIN_AUC:g}): another domain"
    return None
