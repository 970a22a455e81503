"""Scoring a model on a user's own scored pairs (`eval.dev: pairs:PATH`, `sentune adapt --dev/--test`).

The pairs file is `s1<TAB>s2<TAB>label` (sentune.data.user_data); the labels choose the metric: Spearman ×100 of the
cosines for graded scores, average precision ×100 for 0/1 labels (sentune.tasks.bootstrap). The model is scored with
its own pipeline ('model' pooling), as `SentenceTransformer(path).encode` would use it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sentence_transformers.evaluation import SentenceEvaluator

from sentune.core.encode import Encoder
from sentune.data.user_data import ScoredPairs, read_scored_pairs
from sentune.tasks.bootstrap import METRICS
from sentune.tasks.sts import cosine_scores

PAIRS_PREFIX = "pairs:"


def pair_similarities(model, pairs: ScoredPairs, *, show_progress: bool = False, desc: str = "encoding pairs") -> np.ndarray:
    """Cosine of each pair's two sentences under the model's own pipeline (each distinct sentence encoded once)."""
    vectors = Encoder(model, "model", show_progress=show_progress, desc=desc).encode([s for p in pairs.pairs for s in (p.a, p.b)])
    return cosine_scores(vectors[0::2], vectors[1::2])


class PairsEvaluator(SentenceEvaluator):
    """A sentence-transformers evaluator on a user's pairs (the Trainer calls it every eval_steps); also a plain scorer."""

    def __init__(self, path: str | Path, name: str = "dev") -> None:
        super().__init__()
        self.record: Path | None = None  # set: every training evaluation's cosines go to record/step-N.npy (racing reads them)
        self.pairs = read_scored_pairs(path)  # read (and checked) once, not every N steps
        self.gold = np.array([p.score for p in self.pairs.pairs])
        self.name = name
        self.metric = self.pairs.metric
        self.primary_metric = f"{name}_{self.metric}"
        self.title = f"{Path(path).name} {self.metric.replace('_', ' ')}"

    def __call__(self, model, output_path=None, epoch=-1, steps=-1) -> dict[str, float]:
        similarities = self.similarities(model)
        if self.record is not None and steps >= 0:
            self.record.mkdir(parents=True, exist_ok=True)
            np.save(self.record / f"step-{steps}.npy", similarities)
        return {self.primary_metric: METRICS[self.metric](self.gold, similarities)}

    def similarities(self, model) -> np.ndarray:
        return pair_similarities(model, self.pairs)

    def score(self, model) -> float:
        return METRICS[self.metric](self.gold, self.similarities(model))
