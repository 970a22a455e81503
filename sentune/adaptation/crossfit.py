"""Out-of-fold scores for a candidate trained on the selection part it is chosen on (K-fold cross-fitting: Stone,
"Cross-validatory choice and assessment of statistical predictions", JRSS B 1974; Chernozhukov et al., "Double/debiased
machine learning", Econometrics Journal 2018): the selection rows are dealt into K folds by a seeded permutation;
for each fold a model trained on the other K − 1 scores the fold's rows, so every selection score comes from a model
that never saw that row. The candidate is then refit on the whole selection part for the confirmation and test parts,
which no training read. The recipe is fixed in advance (no checkpoint chosen on the rows it trained on).

Three folds: each fold model trains on two thirds of the rows, and the candidate costs three trainings on two thirds
and the refit (five folds would cost five on four fifths). Fewer rows per fold model make its out-of-fold scores a
little pessimistic for the refit, which trains on them all; the confirmation and test scores are the refit's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

FOLDS = 3


def fold_assignment(rows: int, folds: int, seed: int) -> np.ndarray:
    """Each row's fold: a seeded permutation of the rows dealt round robin (fold sizes differ by at most one)."""
    assignment = np.empty(rows, dtype=np.int64)
    assignment[np.random.default_rng(seed).permutation(rows)] = np.arange(rows) % folds
    return assignment


def out_of_fold(rows: int, folds: int, seed: int, fit: Callable[[int, np.ndarray], Any], predict: Callable[[Any, np.ndarray], np.ndarray]) -> np.ndarray:
    """Every row's prediction by the model fitted without its fold: fit(fold, training rows), predict(model, held rows).
    Each fold's model is dropped once it has predicted: one fold model is held at a time."""
    return out_of_fold_from(rows, folds, seed, fit, predict, {})


def fold_rows(rows: int, folds: int, seed: int, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows) of one fold."""
    assignment = fold_assignment(rows, folds, seed)
    return np.flatnonzero(assignment != fold), np.flatnonzero(assignment == fold)


def out_of_fold_from(
    rows: int, folds: int, seed: int, fit: Callable[[int, np.ndarray], Any], predict: Callable[[Any, np.ndarray], np.ndarray], done: dict[int, np.ndarray]
) -> np.ndarray:
    """out_of_fold, with the predictions of the folds in `done` (fold -> its held-out rows' predictions) already made
    (a fold race trained them first: sentune.adaptation.candidates.supervised)."""
    found = np.full(rows, np.nan)
    for fold in range(folds):
        training, held = fold_rows(rows, folds, seed, fold)
        found[held] = done[fold] if fold in done else predict(fit(fold, training), held)
    return found
