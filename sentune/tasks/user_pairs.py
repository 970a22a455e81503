"""Scoring a model on a user's own scored pairs (`eval.dev: pairs:PATH`, `sentune adapt --dev/--test`).

The pairs file is `s1<TAB>s2<TAB>label` (sentune.data.user_data); the labels choose the metric: Spearman ×100 of the
cosines for graded scores, average precision ×100 for 0/1 labels (sentune.tasks.bootstrap). The model is scored with
its own pipeline ('model' pooling), as `SentenceTransformer(path).encode` would use it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from sentence_transformers.evaluation import SentenceEvaluator

from sentune.core.encode import Encoder
from sentune.core.metrics import METRICS
from sentune.data.user_data import ScoredPairs, read_scored_pairs
from sentune.tasks.sts import cosine_scores


class Scorer:
    """What adapt scores a model with: `sentences` (every text of the named splits, in the order of_vectors reads them)
    and `of_vectors` (the split's values from those texts' vectors) come from the subclass; encoding is shared."""

    show_progress: bool = False
    splits: dict  # the named sets it scores (e.g. dev, test)
    backend: str = "torch"  # onnx: models are scored through their ONNX graph (sentune adapt --backend)
    spread: bool = False  # PyTorch on an unnumbered cuda: every visible GPU takes a share (sentune.core.runtime)

    def sentences(self, splits: list[str] | None = None) -> list[str]:
        raise NotImplementedError

    def of_vectors(self, vectors: np.ndarray, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def encode(self, model, poolings: list[str], desc: str, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        from sentune.core.onnx_runtime import backend_runtime

        runtime = backend_runtime(model, self.backend)  # onnx: the graph of these very weights (exported into the cache once)
        if self.spread and runtime.backend == "torch":
            runtime = replace(runtime, spread=True)
        return Encoder(model, poolings, show_progress=self.show_progress, desc=desc, runtime=runtime).encode_many(self.sentences(splits))

    def of_model(self, model, desc: str = "encoding", splits: list[str] | None = None) -> dict[str, np.ndarray]:
        return self.of_vectors(self.encode(model, ["model"], desc, splits)["model"], splits)


class PairScorer(Scorer):
    """The cosine of every pair of one or more named pair sets (e.g. dev and test), each distinct sentence encoded once:
    under a model's own pipeline, under several poolings in one forward pass, or from vectors already computed. The
    one way sentune scores a user's pairs (the trainer's dev evaluations and every `sentune adapt` candidate)."""

    def __init__(self, splits: dict[str, ScoredPairs], show_progress: bool = False) -> None:
        self.splits, self.show_progress = splits, show_progress

    def sentences(self, splits: list[str] | None = None) -> list[str]:
        """Both sentences of every pair of the splits, pair by pair (the order of_vectors reads back)."""
        return [s for split in splits or list(self.splits) for p in self.splits[split].pairs for s in (p.a, p.b)]

    def of_vectors(self, vectors: np.ndarray, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        out, start = {}, 0
        for split in splits or list(self.splits):
            rows = vectors[start : start + 2 * len(self.splits[split].pairs)]
            out[split] = cosine_scores(rows[0::2], rows[1::2])
            start += len(rows)
        return out


class PairsEvaluator(SentenceEvaluator):
    """A sentence-transformers evaluator on a user's pairs (the Trainer calls it every eval_steps); also a plain scorer."""

    def __init__(self, pairs: str | Path | ScoredPairs, name: str = "dev") -> None:
        super().__init__()
        self.record: Path | None = None  # set: every training evaluation's cosines go to record/step-N.npy (racing reads them)
        self.pairs = pairs if isinstance(pairs, ScoredPairs) else read_scored_pairs(pairs)  # read (and checked) once, not every N steps
        self.gold = np.array([p.score for p in self.pairs.pairs])
        self.name = name
        self.metric = self.pairs.metric
        self.primary_metric = f"{name}_{self.metric}"
        self.title = f"{Path(self.pairs.path).name} {self.metric.replace('_', ' ')}"

    def __call__(self, model, output_path=None, epoch=-1, steps=-1) -> dict[str, float]:
        similarities = self.similarities(model)
        if self.record is not None and steps >= 0:
            self.record.mkdir(parents=True, exist_ok=True)
            np.save(self.record / f"step-{steps}.npy", similarities)
        return {self.primary_metric: METRICS[self.metric].score(self.gold, similarities)}

    def similarities(self, model) -> np.ndarray:
        return PairScorer({self.name: self.pairs}).of_model(model)[self.name]

    def score(self, model) -> float:
        return METRICS[self.metric].score(self.gold, self.similarities(model))
