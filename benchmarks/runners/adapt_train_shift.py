"""How adapt tells train pairs of another distribution from train pairs of the dev pairs' own (sentune.adapt.evidence):
its three checks (scale, label distribution, the unchanged model's score) on real train and dev sets, the same domain
and crossed, at several dev sizes. Writes benchmarks/results/adapt_train_shift.md.

Each case: a train set (an example's --example-train pairs, optionally rescaled) against a dev set (an example's dev
pairs). The unchanged model's cosines of every dev pair and of EVIDENCE_CAP train pairs are computed once; then for each
dev size, `--draws` seeded runs draw that many dev pairs and the evidence sample (sentune.adapt.evidence.sample_evidence
with the run's seed) and apply the checks as adapt does. A case of the same distribution should be flagged rarely
(flagged: the train pairs are wasted); a crossed one nearly always (not flagged: they would judge).

    python benchmarks/runners/adapt_train_shift.py --out benchmarks/results/adapt_train_shift.md
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from sentune.adapt.evidence import (
    DOMAIN_AUC,
    EVIDENCE_CAP,
    LABEL_DISTANCE,
    SCALE_MARGIN,
    SCORE_POINTS,
    domain_auc,
    label_distance,
    label_shift,
    sample_evidence,
    scale_shift,
    score_shift,
)
from sentune.adapt.examples import write_example
from sentune.analysis.pages import command_line
from sentune.core.metrics import METRICS
from sentune.data.catalog import resolve_data_dir
from sentune.data.user_data import read_scored_pairs

# (train example, its label factor, dev example, what the case is)
CASES = (
    ("sick", 1.0, "sick", "same domain"),
    ("stsb", 1.0, "stsb", "same domain"),
    ("mrpc", 1.0, "mrpc", "same domain"),
    ("sick", 1.0, "stsb", "another domain"),
    ("stsb", 1.0, "sick", "another domain"),
    ("mrpc", 1.0, "qqp", "another domain"),
    ("stsb", 20.0, "stsb", "same domain, train scores 0-100"),
)
DEV_SIZES = (100, 250, None)  # None: every dev pair of the example


def encoded(model, pairs) -> tuple[np.ndarray, np.ndarray]:
    """The model's cosine of each pair and each pair's vector (as adapt computes them, sentune.adapt.train_evidence)."""
    from sentune.adapt.train_evidence import pair_vectors
    from sentune.tasks.user_pairs import PairScorer

    scorer = PairScorer({"x": pairs})
    rows = scorer.encode(model, ["model"], "encoding")["model"]
    return scorer.of_vectors(rows)["x"], pair_vectors(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/adapt_train_shift.md")
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    parser.add_argument("--work", default="benchmarks/runs/adapt-train-shift", help="where the examples' files are written")
    args = parser.parse_args()
    args.load_at_start = os.getloadavg()[0]  # before this script adds its own work
    started = time.perf_counter()
    from sentune.core.models import load_model
    from sentune.data.user_data import ScoredPairs

    model = load_model("default", device="cpu")
    data = resolve_data_dir(args.data)
    files = {name: write_example(name, data, Path(args.work) / name) for name in {c[0] for c in CASES} | {c[2] for c in CASES}}
    dev = {name: read_scored_pairs(f.dev) for name, f in files.items()}
    dev_cos, dev_vec = {}, {}
    for name, pairs in dev.items():
        dev_cos[name], dev_vec[name] = encoded(model, pairs)
    train_cos, train_gold, train_vec = {}, {}, {}
    for name in {c[0] for c in CASES}:
        assert files[name].train is not None
        pairs = read_scored_pairs(files[name].train)
        gold = np.array([p.score for p in pairs.pairs])
        keep, _ = sample_evidence(gold, seed=0, cap=min(len(gold), 3 * EVIDENCE_CAP))  # a pool the runs' samples draw from
        train_gold[name] = gold[keep]
        train_cos[name], train_vec[name] = encoded(model, ScoredPairs([pairs.pairs[i] for i in keep], pairs.kind, "pool"))
    rows = []
    for train, factor, dev_name, what in CASES:
        dev_gold = np.array([p.score for p in dev[dev_name].pairs])
        metric = dev[dev_name].metric
        for size in DEV_SIZES:
            n = len(dev_gold) if size is None else min(size, len(dev_gold))
            flags = {"scale": 0, "labels": 0, "score": 0, "domain": 0, "any": 0}
            distances, gaps, aucs = [], [], []
            for draw in range(args.draws):
                rng = np.random.default_rng([draw, n])
                d = rng.choice(len(dev_gold), size=n, replace=False)
                e, _ = sample_evidence(train_gold[train], seed=draw)
                t_gold = train_gold[train][e] * factor
                scale = scale_shift(dev_gold[d], t_gold)
                labels = None if scale else label_shift(dev_gold[d], t_gold)
                score = None if scale or labels else score_shift(metric, dev_gold[d], dev_cos[dev_name][d], t_gold, train_cos[train][e])
                auc = domain_auc(dev_vec[dev_name][d], train_vec[train][e], seed=draw)
                domain = None if scale or labels or score or auc < DOMAIN_AUC else "another domain"
                found_any = scale or labels or score or domain
                for key, found in (("scale", scale), ("labels", labels), ("score", score), ("domain", domain), ("any", found_any)):
                    flags[key] += found is not None
                aucs.append(auc)
                distances.append(label_distance(dev_gold[d], t_gold))
                gaps.append(METRICS[metric].score(t_gold, train_cos[train][e]) - METRICS[metric].score(dev_gold[d], dev_cos[dev_name][d]))
            rows.append(
                (
                    train + (f" ×{factor:g}" if factor != 1 else ""),
                    dev_name,
                    what,
                    n,
                    flags,
                    float(np.median(distances)),
                    float(np.median(gaps)),
                    float(np.median(aucs)),
                )
            )
            print(rows[-1], flush=True)
    write_page(args, rows, time.perf_counter() - started)


def write_page(args, rows: list, seconds: float) -> None:
    lines = [
        "# Train pairs of another distribution: how `sentune adapt` detects them",
        "",
        f"Measured {datetime.now(UTC).date()} ({seconds / 60:.1f} min on {os.cpu_count()} CPU cores; 1-minute load average "
        f"{args.load_at_start:.2f} before it started, {os.getloadavg()[0]:.2f} at the end, its own work included) by:",
        "",
        "```",
        command_line(),
        "```",
        "",
        "With `--train`, adapt judges candidates on the train pairs too (`sentune/adapt/evidence.py`), unless one of its checks",
        "says they measure something else than the dev pairs; then it confirms on the dev pairs alone. The checks, in order:",
        f"the scale (train scores beyond the dev range by more than {SCALE_MARGIN:g} of it, or 0/1 train labels against graded dev",
        f"scores), the label distributions (Kolmogorov-Smirnov distance > {LABEL_DISTANCE:g}), the unchanged model's score on the",
        f"train evidence and on the dev pairs (more than {SCORE_POINTS:g} points apart at the nearer end of the gap's 95 % bootstrap",
        "interval), the texts (a logistic regression on the",
        f"unchanged model's pair vectors tells train from dev pairs with cross-validated AUC ≥ {DOMAIN_AUC:g}; each check counts only",
        "where the ones before it passed). Model all-MiniLM-L6-v2; the evidence is a sample of",
        f"{EVIDENCE_CAP} train pairs; each row is {args.draws} seeded draws of the dev pairs (of that size) and of the evidence.",
        "",
        "| train | dev | case | dev pairs | flagged (any check) | by scale | by labels | by score | by texts | median label distance | "
        "median score gap (train − dev) | median text AUC |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for train, dev, what, n, flags, distance, gap, auc in rows:
        rate = {k: f"{100 * v / args.draws:.0f} %" for k, v in flags.items()}
        lines.append(
            f"| {train} | {dev} | {what} | {n} | **{rate['any']}** | {rate['scale']} | {rate['labels']} | {rate['score']} | {rate['domain']} | "
            f"{distance:.2f} | {gap:+.2f} | {auc:.2f} |"
        )
    lines += [
        "",
        "Flagged on a same-domain row: the train pairs are left out of the confirmation when they could have judged (power",
        "lost, never a false choice). Not flagged on a crossed row: they judge although they measure something else.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
