"""--train's evidence pairs in a pairs run (what they are and the checks: sentune.adaptation.evidence; how they judge:
sentune.adaptation.decide): drawn and checked before any candidate runs, so that the supervised candidates leave their
confirmation part out of training; each eligible candidate's scores of them computed once its run is done (kept in
the candidate store, sentune.adaptation.store); and the judges the decision reads: a supervised candidate's scores of the
evidence selection pairs are its fold models' (cross-fitted, sentune.adaptation.candidates.supervised.cross_fit_evidence),
a wise of it its fold models' at its mix, and every candidate is masked where the model that scored a pair trained on
it (none is left so once cross-fitted: every candidate is judged on every evidence pair)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sentune.adaptation.decide import TrainJudges, detectable_gain
from sentune.adaptation.evidence import Evidence, domain_shift, sample_evidence, score_shift
from sentune.adaptation.names import UNCHANGED
from sentune.adaptation.records import CandidateRecord
from sentune.adaptation.store import EVIDENCE_FILE, UNTUNED_EVIDENCE_FILE
from sentune.adaptation.untuned_evidence import PAIR_VECTORS, evidence_scorer, pair_vectors, untuned_scores
from sentune.core.progress import say

if TYPE_CHECKING:
    from sentune.adaptation.candidates import Candidate
    from sentune.adaptation.context import Context

SCORES_FILE, UNTUNED_FILE = EVIDENCE_FILE, UNTUNED_EVIDENCE_FILE  # the candidate store's files (sentune.adaptation.store)


def draw_evidence(ctx: Context) -> Evidence | None:
    """The run's evidence pairs and whether they judge (None: no --train, or a search run), said in one line."""
    task = ctx.inputs.task
    if task.search or task.train is None:
        return None
    gold = task.train.gold
    indices, split = sample_evidence(gold, ctx.config.seed)
    evidence = Evidence(indices, gold[indices], split)
    shift = ctx.inputs.train_shift  # the kind of labels (sentune.adaptation.evidence.kind_shift), checked when --train was read
    if shift is None:
        untuned = untuned_scores(ctx, evidence)
        shift = score_shift(ctx.metric, ctx.inputs.dev.gold, ctx.untuned("model")["dev"], evidence.gold, untuned["model"])
    if shift is None:
        rows = ctx.untuned_vectors()[: 2 * ctx.inputs.dev.units]  # the dev pairs' sentences come first (PairScorer.sentences)
        shift = domain_shift(pair_vectors(rows), untuned_scores(ctx, evidence)[PAIR_VECTORS], ctx.config.seed)
    evidence = Evidence(indices, evidence.gold, split, shift)
    if shift is None:
        say(
            f"--train: {len(indices)} of its {len(gold)} pairs judge the candidates that never trained on them too ({len(split.select)} select, "
            f"{len(split.confirm)} confirm; the supervised candidates train without those {len(split.confirm)})",
        )
    else:
        say(f"--train: its pairs only train, the dev pairs alone select and confirm: {shift}")
    return evidence


def confirmation_pairs(ctx: Context) -> tuple[int, int]:
    """The dev and train pairs that confirm a candidate judged on every evidence pair."""
    evidence = ctx.evidence
    return len(ctx.inputs.split.confirm), len(evidence.split.confirm) if evidence is not None and evidence.judges else 0


def say_detectable_gain(ctx: Context) -> None:
    """The gain the confirmation is 80 % sure to find, by the pairs that confirm (the calibration's table is by dev
    pairs, half of which confirm: a run with C confirmation pairs reads it at 2·C)."""
    dev, train = confirmation_pairs(ctx)
    gain = detectable_gain(ctx.metric, 2 * (dev + train) if train else ctx.inputs.dev.units)
    if gain is None:
        return
    pairs = f"{ctx.inputs.dev.units} dev pairs" + (f" and {len(ctx.evidence.indices)} train pairs ({dev} + {train} confirm)" if train and ctx.evidence else "")
    say(
        f"with {pairs}, a candidate about {gain:.1f} points better than the model is confirmed 80 % of the time "
        "(benchmarks/results/adapt_calibration.md); smaller gains will usually keep the model as it is",
    )


def _candidate_scores(candidate: Candidate, ctx: Context, evidence: Evidence) -> np.ndarray | None:
    """The candidate's scores of every evidence pair (cached in its folder for these evidence pairs); None when its
    model is gone (--prune in an earlier run of the folder): the dev pairs alone judge it."""
    from sentune.adaptation.candidates.base import WithRun
    from sentune.adaptation.candidates.untuned import Unchanged

    found = ctx.store.evidence_scores(candidate.name, evidence.digest)
    if found is not None:
        return found["scores"]
    if isinstance(candidate, Unchanged):  # the untuned poolings: from the vectors encoded before the candidates ran
        scores = untuned_scores(ctx, evidence)[candidate.pooling]
    elif not ((candidate.run_folder(ctx) if isinstance(candidate, WithRun) else candidate.folder(ctx)) / "model").is_dir():
        return None
    else:
        scores = evidence_scorer(ctx, evidence).of_model(candidate.model(ctx), f"{candidate.name}: scoring the train evidence pairs")["train"]
    ctx.store.save_evidence_scores(candidate.name, evidence.digest, {"scores": scores})
    return scores


def score_evidence(candidate: Candidate, record: CandidateRecord, ctx: Context) -> float:
    """Score an eligible candidate's evidence pairs as soon as it is done (kept in the store for the decision): the
    seconds it took (0: cached already, not eligible, stopped, or no evidence judging). Done then, not in the decision,
    so that its encode is charged to the candidate it belongs to (every candidate's expected scoring counts it,
    Context.eval_texts) and the time the run has left says so before the next candidate starts."""
    import time

    evidence = ctx.evidence
    if evidence is None or not evidence.judges or not candidate.eligible or not record.scored or record.stopped is not None:
        return 0.0
    started = time.perf_counter()
    _candidate_scores(candidate, ctx, evidence)
    return time.perf_counter() - started


def trained_train_indices(name: str, records: dict[str, CandidateRecord]) -> set[int]:
    """The --train pairs the candidate, or any model it is built on, trained on."""
    found: set[int] = set()
    seen: set[str] = set()
    while name in records and name not in seen:
        seen.add(name)
        record = records[name]
        found |= set(record.train_indices_trained_on or [])
        name = record.source or ""
    return found


def out_of_fold(name: str, ctx: Context, evidence: Evidence) -> tuple[np.ndarray, np.ndarray] | None:
    """The --train indices of the evidence pairs `name` was scored on out of fold, and those scores: a cross-fitted
    supervised candidate's, or a wise of one's at its mix (the store keeps its source's fold models' scores at every
    mix); None when it has none."""
    record = ctx.records.get(name)
    if record is None:
        return None
    mix, source = 1.0, name
    if record.kind == "wise" and record.source is not None and record.mix is not None:
        mix, source = record.mix, record.source
    kept = ctx.store.out_of_fold_train(source, evidence.digest)
    if kept is None or round(mix, 6) not in kept[1]:
        return None
    return kept[0], kept[1][round(mix, 6)]


def judges(candidates: list[Candidate], ctx: Context, eligible: set[str]) -> TrainJudges | None:
    """The evidence pairs as the decision reads them: the unchanged model's scores and each eligible candidate's (its
    fold models' where it was cross-fitted, out_of_fold), NaN on the pairs the model that scored it (or a model it is
    built on) trained on. None when they do not judge."""
    evidence = ctx.evidence
    if evidence is None or not evidence.judges:
        return None
    scores: dict[str, np.ndarray] = {}
    for candidate in candidates:
        if candidate.name != UNCHANGED and candidate.name not in eligible:
            continue
        scored = _candidate_scores(candidate, ctx, evidence)
        if scored is None:
            continue
        found = scored.astype(float).copy()
        trained = trained_train_indices(candidate.name, ctx.records)
        folded = out_of_fold(candidate.name, ctx, evidence)
        if folded is not None:  # scored by a fold model that never trained on them: they judge it
            positions = np.searchsorted(evidence.indices, folded[0])
            assert np.array_equal(evidence.indices[positions], folded[0])
            found[positions] = folded[1]
            trained -= {int(i) for i in folded[0]}
        found[np.isin(evidence.indices, np.fromiter(trained, dtype=np.int64, count=len(trained)))] = np.nan
        scores[candidate.name] = found
    return TrainJudges(evidence.gold, evidence.split, scores)


def evidence_meta(evidence: Evidence | None, train) -> dict | None:
    """What results.json says of the evidence pairs drawn from `train` (--train's pairs; None without --train)."""
    if evidence is None or train is None:
        return None
    return {
        "train_pairs": train.units,
        "evidence_pairs": len(evidence.indices),
        "select_pairs": len(evidence.split.select),
        "confirm_pairs": len(evidence.split.confirm),
        "judges": evidence.judges,
        "shift": evidence.shift,
    }
