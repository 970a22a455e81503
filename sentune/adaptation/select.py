"""The choice and the numbers reported with it. The choice is sentune.adaptation.decide's: safety on the confirmation
pairs (better than the unchanged model; for search, not worse than `rrf` by more than SEARCH_MARGIN), then the safe
candidate with the best expected gain on all the dev pairs (sentune.adaptation.expected). Reported beside it, for every
candidate: its score on each part of the dev pairs and on test with a 95 % bootstrap interval and its paired difference
with the unchanged model (descriptions, not decisions: the selection part's are optimistic for the candidates it
chose), and for each candidate tested, its safety tests and expected gain. Test is scored afterwards, for the report,
with its own resamples."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import sentune
from sentune.adaptation.candidates import Candidate
from sentune.adaptation.decide import SEARCH_MARGIN, SELECT_FRACTION, DevSplit, decide
from sentune.adaptation.names import BM25, RRF, RULE, UNCHANGED
from sentune.adaptation.records import CandidateRecord
from sentune.adaptation.store import CandidateStore
from sentune.adaptation.train_evidence import evidence_meta, judges
from sentune.core.metrics import METRICS
from sentune.core.usage import process_usage
from sentune.tasks.bootstrap import RESAMPLES, paired_bootstrap, resamples, score_interval
from sentune.tasks.permutation import LEVEL, PERMUTATIONS

TEST_SEED_OFFSET = 1  # the test resamples differ from the dev ones


def _split_rows(gold: np.ndarray, scores: dict[str, np.ndarray], metric: str, seed: int) -> dict[str, dict]:
    """Per candidate: score, its interval, accuracy at the best threshold (0/1 labels), and the comparison with unchanged."""
    draws = resamples(len(gold), seed=seed)
    rows = {}
    for name, predicted in scores.items():
        low, high = score_interval(gold, predicted, metric, draws)
        row: dict = {"score": METRICS[metric].score(gold, predicted), "low": low, "high": high}
        if METRICS[metric].binary_labels:
            row["accuracy"] = METRICS["accuracy"].score(gold, predicted)
        if name != UNCHANGED:
            row["vs_unchanged"] = asdict(paired_bootstrap(gold, predicted, scores[UNCHANGED], metric, draws))
        if BM25 in scores and name != BM25:  # search: what users would run instead, on the same resamples
            row["vs_bm25"] = asdict(paired_bootstrap(gold, predicted, scores[BM25], metric, draws))
        rows[name] = row
    return rows


def select(records: dict[str, CandidateRecord], candidates: list[Candidate], inputs, split: DevSplit, out: Path, config, ctx=None) -> dict:
    """The decision and every candidate's rows. A candidate the race stopped has its selection cosines only: it is
    reported on the selection pairs and is not eligible (the race already chose against it). Each candidate's entry
    is its record with what its class says it is (`dense`), whether it could be chosen (`eligible`), and its rows;
    an eligible one's also with the pairs that judged it (`judged_on`: dev and --train pairs, sentune.adaptation.decide)
    and its selection score on them beside the unchanged model's gain there (`ahead`). `ctx`: the run's context, whose
    --train evidence pairs judge too (sentune.adaptation.train_evidence); None: the dev pairs alone."""
    store = ctx.store if ctx is not None else CandidateStore(out, split.select)
    loaded = {c.name: store.scores(c.name) for c in candidates if records[c.name].scored}
    scored = {name: s for name, s in loaded.items() if store.complete(s)}
    stopped = {name: s["select"] for name, s in loaded.items() if not store.complete(s)}
    eligible = {c.name: scored[c.name]["dev"] for c in candidates if c.eligible and c.name in scored and c.name != UNCHANGED}
    dev_gold = inputs.dev.gold
    metric = inputs.dev.metric
    train = judges(candidates, ctx, set(eligible)) if ctx is not None else None
    references = {RRF: scored[RRF]["dev"]} if RRF in scored else None  # search runs plan it: sentune.adaptation.decide says why
    decision = decide(
        dev_gold, split, (UNCHANGED, scored[UNCHANGED]["dev"]), eligible, metric, seed=config.seed, unit=inputs.dev.unit, train=train, references=references
    )
    results: dict = {
        "meta": {
            "model": config.model,
            "example": config.example,
            "rule": RULE,
            "corpus": {"path": str(out / "data" / "corpus.txt"), "sentences": len(inputs.corpus)},
            "dev": {
                "label": inputs.dev_label,
                inputs.dev.unit: inputs.dev.units,  # "pairs" or "queries", as `unit` says
                "unit": inputs.dev.unit,
                "metric": metric,
                f"select_{inputs.dev.unit}": len(split.select),
                f"confirm_{inputs.dev.unit}": len(split.confirm),
                "select_fraction": SELECT_FRACTION,
            },
            "train_evidence": None if ctx is None else evidence_meta(ctx.evidence, inputs.task.train),
            "test": {"path": inputs.test_label, inputs.test.unit: inputs.test.units, "unit": inputs.test.unit, "metric": inputs.test.metric}
            if inputs.test
            else None,
            "budget": asdict(config.budget),
            "sed_members": config.sed_members,
            "seed": config.seed,
            "bootstrap": {"resamples": RESAMPLES, "seed": config.seed},
            "confirmation": {"test": "one-sided paired permutation", "permutations": PERMUTATIONS, "level": LEVEL},
            "safety": {
                "order": "fixed sequence by selection score, each candidate at the level",
                "non_inferiority": {"test": "one-sided paired sign-flip of the differences shifted by the margin", "margin": SEARCH_MARGIN, "level": LEVEL}
                if references
                else None,
                "choice": "the best expected gain: the selection gain shrunk toward the candidates' mean, pooled with the confirmation gain",
            },
            "sentune_version": sentune.__version__,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "process": process_usage(),  # this invocation only (a resumed run's earlier ones are not in it)
        },
        "choice": {
            "name": decision.name,
            "reason": decision.reason,
            "best_on_selection": decision.best,
            "reference": decision.reference or UNCHANGED,
            "confirmation": asdict(decision.confirmation) if decision.confirmation else None,
            "safety": {
                name: {
                    "safe": found.safe,
                    "superiority": asdict(found.superiority),
                    "non_inferiority": {reference: asdict(test) for reference, test in found.non_inferiority.items()},
                }
                for name, found in decision.safety.items()
            },
            "expected_gain": decision.expected,
        },
        "candidates": {},
    }
    parts = {"select": split.select, "confirm": split.confirm}
    rows = {part: _split_rows(dev_gold[index], {n: s["dev"][index] for n, s in scored.items()}, metric, config.seed) for part, index in parts.items()}
    if stopped:  # the selection rows of the stopped candidates, on the same resamples as the others'
        cosines = {UNCHANGED: scored[UNCHANGED]["dev"][split.select], **stopped}
        rows["select"] |= {n: r for n, r in _split_rows(dev_gold[split.select], cosines, metric, config.seed).items() if n != UNCHANGED}
    if inputs.test is not None:
        test_gold = inputs.test.gold
        rows["test"] = _split_rows(test_gold, {n: s["test"] for n, s in scored.items()}, inputs.test.metric, config.seed + TEST_SEED_OFFSET)
    for c in candidates:
        record = records[c.name].to_dict()
        record.update({"dense": c.dense, "eligible": c.eligible and c.name not in stopped, "chosen": c.name == decision.name})
        record.update({part: found.get(c.name) for part, found in rows.items()})
        record.setdefault("test", None)
        if c.name in decision.judged:
            record["judged_on"] = decision.judged[c.name]
            record["selection_score"] = decision.selection[c.name]
            if c.name in decision.ahead:
                record["ahead"] = decision.ahead[c.name]
            if c.name in decision.expected:
                record["expected_gain"] = decision.expected[c.name]
        results["candidates"][c.name] = record
    return results
