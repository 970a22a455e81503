"""How adapt tells train pairs that measure something else from train pairs of the dev pairs' own source
(sentune.adaptation.evidence): its checks (the kind of labels, the unchanged model's score, the texts) on real train and dev
sets, the same source and crossed, at several dev sizes. Writes benchmarks/results/adapt_train_shift.md.

Each case: a train set (an example's --example-train pairs, optionally rescaled) against a dev set (an example's dev
pairs); or, for a pool case, a dev sample and the train pairs left over, both drawn from one example's train pairs,
their labels mapped onto 0-1 by a skewed, monotone map whose ends few pairs reach (the public relatedness set of issue
72: 250 dev pairs whose scores happen to run from 0.19 to 0.91, 5,500 train pairs from 0 to 1). The unchanged model's
cosines and pair vectors of every pair are computed once; then for each dev size, `--draws` seeded runs draw that many
dev pairs and the evidence sample (sentune.adaptation.evidence.sample_evidence with the run's seed) and apply the checks as
adapt does. A case of one source should be flagged rarely (flagged: the train pairs are wasted); a crossed one nearly
always (not flagged: they would judge). The range rule the checks replaced (train scores beyond the dev range by more
than 0.25 of it: another scale) is shown beside them.

    nice -n 10 python benchmarks/runners/adapt_train_shift.py --draws 20 --out benchmarks/results/adapt_train_shift.md
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from scipy.stats import beta, ks_2samp

from sentune.adaptation.evidence import DOMAIN_AUC, EVIDENCE_CAP, SCORE_POINTS, domain_auc, kind_shift, sample_evidence, score_shift
from sentune.adaptation.examples import write_example
from sentune.analysis.pages import command_line
from sentune.core.metrics import METRICS
from sentune.data.catalog import resolve_data_dir
from sentune.data.user_data import read_scored_pairs

# (train example, its label factor, dev example, what the case is); dev "pool": drawn from the train example's pairs
CASES = (
    ("sick", 1.0, "sick", "same source"),
    ("stsb", 1.0, "stsb", "same source"),
    ("mrpc", 1.0, "mrpc", "same source"),
    ("stsb", 1.0, "pool", "one pool, skewed 0-1 labels, rare ends"),
    ("sick", 1.0, "pool", "one pool, skewed 0-1 labels, rare ends"),
    ("sick", 1.0, "stsb", "another domain"),
    ("stsb", 1.0, "sick", "another domain"),
    ("mrpc", 1.0, "qqp", "another domain"),
    ("stsb", 20.0, "stsb", "same source, train scores 0-100"),
)
DEV_SIZES = (100, 250, None)  # None: every dev pair of the example
POOL_SIZES = (100, 250)
SCALE_MARGIN = 0.25  # the replaced range rule's margin, for the comparison column
RARE_ENDS = 0.0025  # of a pool's pairs: the lowest and the highest this share score exactly 0 and 1


def range_rule(dev_gold: np.ndarray, train_gold: np.ndarray) -> bool:
    """The rule the checks replaced: train scores beyond the dev scores' range by more than SCALE_MARGIN of it."""
    margin = SCALE_MARGIN * (dev_gold.max() - dev_gold.min())
    return bool(train_gold.min() < dev_gold.min() - margin or train_gold.max() > dev_gold.max() + margin)


def skewed(gold: np.ndarray, seed: int = 0) -> np.ndarray:
    """A monotone map of the labels (ties in a seeded order) onto 0-1, shaped as Beta(5, 2): most pairs fairly similar,
    few near either end, and the lowest and highest RARE_ENDS of them exactly at 0 and 1."""
    order = np.lexsort((np.random.default_rng(seed).random(len(gold)), gold))
    quantile = np.empty(len(gold))
    quantile[order] = (np.arange(len(gold)) + 0.5) / len(gold)
    mapped = beta.ppf(quantile, 5, 2)
    mapped[quantile < RARE_ENDS], mapped[quantile > 1 - RARE_ENDS] = 0.0, 1.0
    return mapped


def encoded(model, pairs) -> tuple[np.ndarray, np.ndarray]:
    """The model's cosine of each pair and each pair's vector (as adapt computes them, sentune.adaptation.train_evidence)."""
    from sentune.adaptation.untuned_evidence import pair_vectors
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

    model = load_model("default", device="cpu")
    data = resolve_data_dir(args.data)
    names = {c[0] for c in CASES} | {c[2] for c in CASES if c[2] != "pool"}
    files = {name: write_example(name, data, Path(args.work) / name) for name in names}
    dev = {name: read_scored_pairs(f.dev) for name, f in files.items() if name in {c[2] for c in CASES}}
    dev_cos, dev_vec = {}, {}
    for name, pairs in dev.items():
        dev_cos[name], dev_vec[name] = encoded(model, pairs)
    train_cos, train_gold, train_vec = {}, {}, {}
    for name in {c[0] for c in CASES}:
        assert files[name].train is not None
        pairs = read_scored_pairs(files[name].train)
        train_gold[name] = np.array([p.score for p in pairs.pairs])
        train_cos[name], train_vec[name] = encoded(model, pairs)
    rows = []
    for train, factor, dev_name, what in CASES:
        pool = dev_name == "pool"
        labels = skewed(train_gold[train]) if pool else train_gold[train] * factor
        metric = dev["stsb" if pool else dev_name].metric
        for size in POOL_SIZES if pool else DEV_SIZES:
            n = size or len(dev[dev_name].pairs)
            flags = {"labels": 0, "score": 0, "domain": 0, "any": 0, "range": 0}
            distances, gaps, aucs = [], [], []
            for draw in range(args.draws):
                rng = np.random.default_rng([draw, n])
                if pool:  # a dev sample and the pairs left over as --train, all of one pool
                    d = rng.choice(len(labels), size=n, replace=False)
                    rest = np.setdiff1d(np.arange(len(labels)), d)
                    d_gold, d_cos, d_vec = labels[d], train_cos[train][d], train_vec[train][d]
                else:
                    d = rng.choice(len(dev_cos[dev_name]), size=min(n, len(dev_cos[dev_name])), replace=False)
                    rest = np.arange(len(labels))
                    d_gold, d_cos, d_vec = np.array([p.score for p in dev[dev_name].pairs])[d], dev_cos[dev_name][d], dev_vec[dev_name][d]
                e, _ = sample_evidence(labels[rest], seed=draw)
                e = rest[e]
                t_gold = labels[e]
                kind = kind_shift(d_gold, t_gold)
                score = None if kind else score_shift(metric, d_gold, d_cos, t_gold, train_cos[train][e])
                auc = domain_auc(d_vec, train_vec[train][e], seed=draw)
                domain = None if kind or score or auc < DOMAIN_AUC else "another domain"
                found_any = kind or score or domain
                for key, found in (("labels", kind), ("score", score), ("domain", domain), ("any", found_any)):
                    flags[key] += found is not None
                flags["range"] += range_rule(d_gold, t_gold)
                aucs.append(auc)
                distances.append(float(ks_2samp(d_gold, t_gold).statistic))
                gaps.append(METRICS[metric].score(t_gold, train_cos[train][e]) - METRICS[metric].score(d_gold, d_cos))
            name = train + (f" ×{factor:g}" if factor != 1 else "")
            rows.append(
                (name, f"{train} (pool)" if pool else dev_name, what, n, len(rest), flags, *(float(np.median(v)) for v in (distances, gaps, aucs)), max(aucs))
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
        "With `--train`, adapt judges candidates on the train pairs too (`sentune/adaptation/evidence.py`), each kind of pair ranked",
        "among its own, so the labels' scale never matters; one of its checks may say they measure something else than the dev",
        "pairs, and then it confirms on the dev pairs alone. The checks, in order: the kind of labels (0/1 train labels against",
        f"graded dev scores), the unchanged model's score on the train evidence and on the dev pairs (more than {SCORE_POINTS:g} points",
        "apart at the nearer end of the gap's 95 % bootstrap interval), the texts (a logistic regression on the unchanged model's",
        f"pair vectors tells train from dev pairs with cross-validated AUC ≥ {DOMAIN_AUC:g}); each counts only where the ones before",
        "it passed. Model all-MiniLM-L6-v2; the evidence is a sample of at most",
        f"{EVIDENCE_CAP} train pairs and at most half of them; each row is {args.draws} seeded draws of the dev pairs (of that size) and",
        "of the evidence. A pool row draws the dev pairs from the train example's pairs and gives adapt the rest as --train, its",
        "labels mapped onto 0-1 by a skewed monotone map whose ends few pairs reach (Beta(5, 2)-shaped; the lowest and highest",
        f"{100 * RARE_ENDS:g} % at exactly 0 and 1). `range rule`: how often the rule these checks replaced (train scores beyond the",
        f"dev range by more than {SCALE_MARGIN:g} of it: another scale) refused the same draws. The label distance (Kolmogorov-Smirnov)",
        "is shown, not used: for a rank metric two sets of graded labels are a monotone rescaling apart.",
        "",
        "| train | dev | case | dev pairs | train pairs | flagged (any check) | by labels | by score | by texts | range rule (replaced) | "
        "median label distance | median score gap (train − dev) | median text AUC | largest text AUC |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for train, dev, what, n, train_pairs, flags, distance, gap, auc, largest in rows:
        rate = {k: f"{100 * v / args.draws:.0f} %" for k, v in flags.items()}
        lines.append(
            f"| {train} | {dev} | {what} | {n} | {train_pairs} | **{rate['any']}** | {rate['labels']} | {rate['score']} | {rate['domain']} | "
            f"{rate['range']} | {distance:.2f} | {gap:+.2f} | {auc:.2f} | {largest:.2f} |"
        )
    lines += [
        "",
        "Flagged on a row of one source: the train pairs are left out of the confirmation when they could have judged (power",
        "lost, never a false choice). Not flagged on a crossed row: they judge although they measure something else.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
