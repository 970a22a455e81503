"""SentEval transfer tasks on the CPU: logistic regression (or SentEval's MLP) on frozen embeddings.

Protocols follow SentEval (senteval/tools/validation.py) with its scikit-learn path:
  nested-cv     MR, CR, SUBJ, MPQA: outer stratified k-fold; inside each outer train fold an inner
                stratified k-fold picks the L2 strength; test accuracy averaged over outer folds
  split         SST2, SST5, SICK-E: the L2 strength picked on dev, the classifier fitted on train
  cv-then-test  TREC, MRPC: k-fold CV on train picks the strength, refit on all train, then test
Pair tasks (MRPC, SICK-E) use SentEval's features [|u−v|, u⊙v]. The grid is SentEval's scikit-learn
grid C ∈ {2^-2, …, 2^3}; seed 1111. Presets: `standard` (k = 10, SentEval's "comparable to the
literature" setting) and `fast` (k = 5, its prototyping setting). Results name the preset.

`standard-mlp` / `fast-mlp` swap the classifier for SentEval's MLP (Kim et al. 2021 Table 4: "an MLP with one hidden layer of
50 units"): SentEval's `classifier = {nhid: 50}` is Linear → Sigmoid → Linear trained with Adam, batch 64, stopped
after 5 validations (each after 4 passes over the data) without a better score, its L2 strength chosen from 10^-5 … 10^-1; here scikit-learn's
MLPClassifier with those settings (logistic activation, 10 % of the training fold held out for the early stop).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from sklearn.neural_network import MLPClassifier

from sentune.errors import UserError

logger = logging.getLogger(__name__)

C_GRID = tuple(2.0**t for t in range(-2, 4))
L2_GRID = tuple(10.0**t for t in range(-5, 0))  # SentEval's PyTorch classifiers: weight decay 1e-5 … 1e-1
MLP_HIDDEN = 50


@dataclass(frozen=True)
class TransferPreset:
    name: str
    kfold: int
    seed: int = 1111
    max_iter: int = 1000
    classifier: str = "logreg"  # or "mlp": SentEval's one-hidden-layer MLP

    @property
    def grid_key(self) -> str:
        """The results' name for the chosen value: C (logistic regression) or l2 (the MLP's weight decay)."""
        return "C" if self.classifier == "logreg" else "l2"

    @property
    def grid(self) -> tuple[float, ...]:
        """The regularisation values tried: logistic regression's C, or the MLP's L2 strength."""
        return C_GRID if self.classifier == "logreg" else L2_GRID


PRESETS = {
    "standard": TransferPreset("standard", 10),
    "fast": TransferPreset("fast", 5),
    "standard-mlp": TransferPreset("standard-mlp", 10, classifier="mlp"),
    "fast-mlp": TransferPreset("fast-mlp", 5, classifier="mlp"),
}


def _mlp(strength: float, preset: TransferPreset) -> MLPClassifier:
    return MLPClassifier(
        hidden_layer_sizes=(MLP_HIDDEN,),
        activation="logistic",
        solver="adam",
        alpha=strength,
        batch_size=64,
        early_stopping=True,
        validation_fraction=0.1,
        n_iter_no_change=20,  # SentEval: validation every epoch_size = 4 passes, stop after tenacity = 5 without a better one
        max_iter=200,
        random_state=preset.seed,
    )


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.concatenate([np.abs(u - v), u * v], axis=1)


def _fit(x: np.ndarray, y: np.ndarray, c: float, preset: TransferPreset) -> LogisticRegression | MLPClassifier:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if preset.classifier == "mlp":
            return _mlp(c, preset).fit(x, y)
        return LogisticRegression(C=c, random_state=preset.seed, max_iter=preset.max_iter).fit(x, y)


def _path_scores(xtr: np.ndarray, ytr: np.ndarray, xte: np.ndarray, yte: np.ndarray, preset: TransferPreset) -> np.ndarray:
    """Accuracy on (xte, yte) for every C of the grid, fitting along the grid with warm starts: each fit
    starts from the previous optimum, so the grid costs little more than one fit. The problem is strictly
    convex, so the optimum (to the solver's tolerance) does not depend on where the solver starts. The MLP's problem is
    not convex: each of its values is fitted from scratch."""
    if preset.classifier == "mlp":
        return np.array([_fit(xtr, ytr, strength, preset).score(xte, yte) for strength in preset.grid])
    model = LogisticRegression(random_state=preset.seed, max_iter=preset.max_iter, warm_start=True)
    scores = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for c in C_GRID:
            scores.append(model.set_params(C=c).fit(xtr, ytr).score(xte, yte))
    return np.array(scores)


def _best_c_by_cv(x: np.ndarray, y: np.ndarray, preset: TransferPreset) -> tuple[float, float]:
    folds = StratifiedKFold(n_splits=preset.kfold, shuffle=True, random_state=preset.seed)
    mean = np.mean([_path_scores(x[tr], y[tr], x[te], y[te], preset) for tr, te in folds.split(x, y)], axis=0)
    best = int(np.argmax(mean))  # ties: first (smallest C), as SentEval's argmax
    return preset.grid[best], float(mean[best])


def nested_cv(x: np.ndarray, y: np.ndarray, preset: TransferPreset) -> dict:
    outer = StratifiedKFold(n_splits=preset.kfold, shuffle=True, random_state=preset.seed)
    dev_scores, test_scores = [], []
    for train, test in outer.split(x, y):
        c, dev = _best_c_by_cv(x[train], y[train], preset)
        dev_scores.append(dev)
        test_scores.append(_fit(x[train], y[train], c, preset).score(x[test], y[test]))
    return {"acc": 100 * float(np.mean(test_scores)), "devacc": 100 * float(np.mean(dev_scores)), "n": int(len(y))}


def split_protocol(train: tuple, dev: tuple, test: tuple, preset: TransferPreset) -> dict:
    (xtr, ytr), (xdv, ydv), (xte, yte) = train, dev, test
    dev_scores = _path_scores(xtr, ytr, xdv, ydv, preset)
    dev_acc, c = float(dev_scores.max()), preset.grid[int(np.argmax(dev_scores))]
    model = _fit(xtr, ytr, c, preset)
    return {"acc": 100 * model.score(xte, yte), "devacc": 100 * dev_acc, preset.grid_key: c, "n_train": len(ytr), "n_test": len(yte)}


def cv_then_test(train: tuple, test: tuple, preset: TransferPreset, *, f1: bool = False) -> dict:
    (xtr, ytr), (xte, yte) = train, test
    c, dev_acc = _best_c_by_cv(xtr, ytr, preset)
    model = _fit(xtr, ytr, c, preset)
    out = {"acc": 100 * model.score(xte, yte), "devacc": 100 * dev_acc, preset.grid_key: c, "n_train": len(ytr), "n_test": len(yte)}
    if f1:
        out["f1"] = 100 * float(f1_score(yte, model.predict(xte)))
    return out


def encode_labels(labels: list) -> np.ndarray:
    """Labels to integers in first-seen-sorted order (strings such as SICK-E's become 0..k-1)."""
    classes = sorted(set(labels), key=str)
    index = {label: i for i, label in enumerate(classes)}
    return np.array([index[label] for label in labels], dtype=np.int64)


def evaluate_transfer(spec, examples: dict[str, list], embed, preset: TransferPreset) -> dict:
    """Run one task. `embed(list_of_str) -> (n, d)` looks up the already computed embeddings."""
    is_pair = spec.kind == "pair-classification"
    all_labels = encode_labels([ex.label for items in examples.values() for ex in items])
    offsets, start = {}, 0
    for split, items in examples.items():
        offsets[split] = all_labels[start : start + len(items)]
        start += len(items)

    def xy(split: str) -> tuple[np.ndarray, np.ndarray]:
        items = examples[split]
        if is_pair:
            x = pair_features(embed([ex.a for ex in items]), embed([ex.b for ex in items]))
        else:
            x = embed([ex.text for ex in items])
        return x, offsets[split]

    if spec.protocol in ("nested-cv", "cv-then-test"):
        labels = offsets["all" if spec.protocol == "nested-cv" else "train"]
        smallest = int(np.bincount(labels).min())
        if smallest < preset.kfold:
            raise UserError(f"task {spec.name}: a class has only {smallest} examples, fewer than the {preset.kfold} folds of preset {preset.name!r}")
    if spec.protocol == "nested-cv":
        result = nested_cv(*xy("all"), preset)
    elif spec.protocol == "split":
        result = split_protocol(xy("train"), xy("dev"), xy("test"), preset)
    elif spec.protocol == "cv-then-test":
        result = cv_then_test(xy("train"), xy("test"), preset, f1=spec.name == "MRPC")
    else:
        raise ValueError(f"task {spec.name}: unknown protocol {spec.protocol!r}")
    return {**result, "protocol": spec.protocol, "preset": preset.name, "kfold": preset.kfold, "classifier": preset.classifier}
