"""The unchanged model's scores of --train's evidence pairs (sentune.adaptation.train_evidence), under its own pipeline and each
untuned pooling, and each pair's vector (the domain check): encoded once, before any candidate runs, and kept in the
candidate store. A module of its own because the race (sentune.adaptation.race_rows) reads them too, and train_evidence
depends on the candidates, which depend on the race."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sentune.adaptation.evidence import Evidence
from sentune.adaptation.names import UNTUNED_POOLINGS

if TYPE_CHECKING:
    from sentune.adaptation.context import Context
    from sentune.tasks.user_pairs import PairScorer

PAIR_VECTORS = ".pair_vectors"  # beside the untuned poolings' scores: the model's vector of each evidence pair (the domain check)


def pair_vectors(rows: np.ndarray) -> np.ndarray:
    """Each pair's vector, from its two sentences' rows (PairScorer.sentences' order): their mean."""
    return (rows[0::2] + rows[1::2]) / 2


def evidence_scorer(ctx: Context, evidence: Evidence) -> PairScorer:
    """A scorer of the evidence pairs (the run's scoring settings: Context._scoring)."""
    from sentune.data.user_data import ScoredPairs
    from sentune.tasks.user_pairs import PairScorer

    train = ctx.inputs.task.train
    assert isinstance(train, ScoredPairs)  # pairs runs only
    return ctx._scoring(PairScorer({"train": ScoredPairs([train.pairs[i] for i in evidence.indices], train.kind, train.path)}, ctx.config.show_progress))


def untuned_scores(ctx: Context, evidence: Evidence) -> dict[str, np.ndarray]:
    """The untuned model's scores of the evidence pairs under its own pipeline and each untuned pooling, encoded once."""
    found = ctx.store.evidence_scores(None, evidence.digest)
    if found is not None:
        return found
    scorer = evidence_scorer(ctx, evidence)
    vectors = scorer.encode(ctx.base, ["model", *UNTUNED_POOLINGS], "scoring the train evidence pairs (untuned)")
    scores = {name: scorer.of_vectors(v)["train"] for name, v in vectors.items()} | {PAIR_VECTORS: pair_vectors(vectors["model"])}
    ctx.store.save_evidence_scores(None, evidence.digest, scores)
    return scores
