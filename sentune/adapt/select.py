"""The choice and the numbers reported with it: every candidate's dev and test score with its 95 % interval, and its
paired comparison with the unchanged model. Only the dev pairs reach `choose`; test is scored afterwards, for the
report, with its own resamples."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import sentune
from sentune.adapt.candidates import UNCHANGED, Candidate
from sentune.tasks.bootstrap import METRICS, choose, paired_bootstrap, resamples, score_interval

TEST_SEED_OFFSET = 1  # the test resamples differ from the dev ones


def _split_rows(gold: np.ndarray, scores: dict[str, np.ndarray], metric: str, seed: int, compared: dict | None = None) -> dict[str, dict]:
    """Per candidate: score, its interval, accuracy at the best threshold (0/1 labels), and the comparison with unchanged
    (`compared`: comparisons already made on the same resamples, i.e. the choice's on dev, reused)."""
    draws = resamples(len(gold), seed=seed)
    measure = METRICS[metric]
    rows = {}
    for name, predicted in scores.items():
        low, high = score_interval(gold, predicted, measure, draws)
        row: dict = {"score": measure(gold, predicted), "low": low, "high": high}
        if metric == "average_precision":
            row["accuracy"] = METRICS["accuracy"](gold, predicted)
        if name != UNCHANGED:
            found = (compared or {}).get(name) or paired_bootstrap(gold, predicted, scores[UNCHANGED], measure, draws)
            row["vs_unchanged"] = asdict(found)
        rows[name] = row
    return rows


def select(records: dict[str, dict], candidates: list[Candidate], inputs, out: Path, config) -> dict:
    scored = {c.name: dict(np.load(out / "candidates" / c.name / "scores.npz")) for c in candidates if "dev_score" in records[c.name]}
    eligible = [c.name for c in candidates if c.eligible and c.name in scored and c.name != UNCHANGED]
    dev_gold = np.array([p.score for p in inputs.dev.pairs])
    metric = inputs.dev.metric
    choice = choose(dev_gold, (UNCHANGED, scored[UNCHANGED]["dev"]), [(n, scored[n]["dev"]) for n in eligible], METRICS[metric], seed=config.bootstrap_seed)
    results: dict = {
        "meta": {
            "model": config.model,
            "example": config.example,
            "corpus": {"path": str(out / "data" / "corpus.txt"), "sentences": len(inputs.corpus)},
            "dev": {"label": inputs.dev_label, "pairs": len(inputs.dev.pairs), "metric": metric},
            "test": {"path": str(config.test), "pairs": len(inputs.test.pairs), "metric": inputs.test.metric} if inputs.test else None,
            "budget": asdict(config.budget),
            "sed_members": config.sed_members,
            "bootstrap": {"resamples": 1000, "seed": config.bootstrap_seed, "confidence": 0.95},
            "sentune_version": sentune.__version__,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        "choice": {"name": choice.name, "reason": choice.reason},
        "candidates": {},
    }
    dev_rows = _split_rows(dev_gold, {n: s["dev"] for n, s in scored.items()}, metric, config.bootstrap_seed, choice.comparisons)
    test_rows = {}
    if inputs.test is not None:
        test_gold = np.array([p.score for p in inputs.test.pairs])
        test_rows = _split_rows(test_gold, {n: s["test"] for n, s in scored.items()}, inputs.test.metric, config.bootstrap_seed + TEST_SEED_OFFSET)
    for c in candidates:
        record = dict(records[c.name])
        record.update({"eligible": c.eligible, "chosen": c.name == choice.name, "dev": dev_rows.get(c.name), "test": test_rows.get(c.name)})
        results["candidates"][c.name] = record
    return results
