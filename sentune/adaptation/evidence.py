"""Labelled train pairs as evidence (pairs runs with --train): which of them judge the candidates, and whether they may.

A labelled pair that a candidate never trained on judges it as well as a dev pair does. adapt takes a seeded sample of
at most EVIDENCE_CAP of the --train pairs, and at most half of them (the evidence pairs), and splits it with the dev
pairs' own rule (sentune.adaptation.decide.split_dev) into a selection and a confirmation part, which join the dev pairs'
parts (the design is in sentune.adaptation.decide). The cap bounds what every candidate pays for it: each one encodes at most
2·EVIDENCE_CAP more texts, once, when the run's candidates are done (the race and every other choice inside a candidate
read the dev selection pairs only). It is set high because the confirmation's power grows with its pairs (the gain
confirmed 80 % of the time shrinks as the pairs grow: benchmarks/results/adapt_calibration.md), and users' train sets
hold gains smaller than the dev pairs alone can confirm.

Train pairs judge only when they measure what the dev pairs measure. Each candidate's score on the two kinds of pairs
is the pair-weighted mean of its score within each (sentune.adaptation.decide.TrainJudges): a train pair is ranked among
train pairs only, never against a dev pair. Both metrics a pairs run decides on (Spearman, average precision) read only
the order of the labels within the pairs they rank, so the train labels' scale and any monotone rescaling of them (0-1
against 0-5, 0-100, or a dev sample whose scores happen to run from 0.19 to 0.91 against train scores from 0 to 1)
change nothing: no scale, range or label-distribution check refuses them (a difference of label distributions between
two sets of graded labels is indistinguishable from a monotone rescaling; a real difference of pair populations shows
in the texts and in how well the unchanged model ranks them, which the checks below read). Three checks, before any
candidate runs, fall back to the dev pairs alone when any fails, and the run says in one line which check refused them
and what would let them judge:
- the kind of labels: 0/1 train labels against graded dev scores measure whether the model separates two classes, not
  how it orders graded similarity (kind_shift);
- the scores: the unchanged model's score on the evidence pairs and on the dev pairs more than SCORE_POINTS apart, even
  at the nearer end of the gap's bootstrap interval (another domain shows in how well the same model ranks it);
- the texts: a classifier tells evidence pairs from dev pairs by the unchanged model's vectors with a cross-validated
  AUC of DOMAIN_AUC or more (domain_auc).
benchmarks/results/adapt_train_shift.md measures the checks on real train and dev sets, on a dev sample of 250 drawn
from a skewed label distribution whose ends are rare against the remaining 5,499 pairs of the same pool (the case the
range rule this replaces refused), and on crossed sets (their power).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from sentune.adaptation.decide import DevSplit, split_dev
from sentune.adaptation.names import EVIDENCE_CAP
from sentune.core.metrics import METRICS

SCORE_POINTS = 10.0
SCORE_RESAMPLES = 300
# a classifier tells a train pair from a dev pair this well or better: another domain. An effect size, not a significance
# level: the train and dev splits of one data set may differ a little (STS-B's: median AUC 0.60 to 0.66 at 100 to 1,500
# dev pairs), which a test at a level would flag with hundreds of pairs; the classifier reads as many pairs of each side,
# so a train set 20 times the dev set weighs no more. adapt_train_shift.md shows each same-source case's largest AUC.
DOMAIN_AUC = 0.8
DOMAIN_PAIRS = 500  # at most this many pairs of each side train and test that classifier
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


def refusal(check: str, finding: str, fix: str) -> str:
    """Why the train pairs do not judge, as the run says it: the check that refused them, what it found, and what would
    let them judge."""
    return f"the {check} check: {finding}; to let them judge, {fix}"


SAME_SOURCE = "draw --dev and --train from one labelled source (a random part of it as --dev)"


def kind_shift(dev_gold: np.ndarray, train_gold: np.ndarray) -> str | None:
    """Why --train's labels are of another kind than the dev pairs' (None: the same kind): 0/1 labels against graded
    scores. Their scale is never a reason (the module's docstring)."""
    binary_dev, binary_train = set(np.unique(dev_gold)) <= {0.0, 1.0}, set(np.unique(train_gold)) <= {0.0, 1.0}
    if binary_train and not binary_dev:
        return refusal(
            "labels", "they have 0/1 labels, the dev pairs graded scores", "give --train graded scores like the dev pairs' (its 0/1 pairs still train)"
        )
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
        finding = (
            f"the unchanged model scores {gap:+.2f} points on them against the dev pairs ([{low:+.2f}, {high:+.2f}], beyond ±{SCORE_POINTS:g}): another domain"
        )
        return refusal("scores", finding, SAME_SOURCE)
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
        return refusal(
            "texts", f"a classifier tells their texts from the dev pairs' (cross-validated AUC {auc:.2f} ≥ {DOMAIN_AUC:g}): another domain", SAME_SOURCE
        )
    return None
