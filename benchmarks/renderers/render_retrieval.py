"""Render benchmarks/results/retrieval.md from the kept results of `EXAMPLES="scifact quora" bash
benchmarks/runners/adapt_experiments.sh` (benchmarks/results/adapt/NAME/results.json): `sentune adapt` on documents and queries
(issue 23), every candidate's nDCG@10 on the selection, confirmation and test queries with its interval, the choice,
the minutes, BM25 and sentence-transformers' SimCSE beside them. A domain whose run has not finished is listed as
missing, never filled in."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from render_adapt import KEPT, domain_section, minutes, test_versus  # noqa: E402  (benchmarks/renderers/render_adapt.py)

from sentune.adapt.examples import example_names
from sentune.adapt.names import BM25, REFERENCE, UNCHANGED
from sentune.tasks.permutation import ALPHA


def summary_row(name: str, results: dict) -> list[str]:
    c = results["candidates"]
    chosen, confirmation = results["choice"]["name"], results["choice"].get("confirmation")
    test = lambda n: f"{c[n]['test']['score']:.2f}" if n in c and c[n].get("test") else "—"  # noqa: E731
    spent = minutes(results, reference=False) - (c[BM25]["seconds"] / 60 if BM25 in c else 0.0)
    return [
        name,
        test(UNCHANGED),
        f"`{chosen}`",
        test(chosen),
        test_versus(results),
        f"{confirmation['p_value']:.3f} ({results['choice']['best_on_selection']})" if confirmation else "—",
        test(BM25),
        test(REFERENCE),
        f"{spent:.0f}",
    ]


def render() -> str:
    names = example_names(retrieval=True)
    found = {n: json.loads((KEPT / n / "results.json").read_text()) for n in names if (KEPT / n / "results.json").is_file()}
    lines = [
        "# `sentune adapt` for search: two retrieval domains (issue 23)",
        "",
        f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}` from benchmarks/results/adapt/NAME/results.json; the runs: "
        '`EXAMPLES="scifact quora" bash benchmarks/runners/adapt_experiments.sh` (each domain\'s exact command and date below).',
        "",
        "Default model (all-MiniLM-L6-v2), default budget, 2 CPU cores. nDCG@10 ×100 per query; the selection queries rank a pool "
        "(their relevant documents and the unchanged model's top 30), the confirmation and test queries the whole corpus; the "
        f"chosen candidate replaces the unchanged model only when a one-sided paired permutation test over the confirmation queries "
        f"gives p ≤ {ALPHA:g}. BM25 (bm25s) and `st-simcse` (sentence-transformers' SimCSE recipe) are reported, never chosen; "
        "candidate minutes leave both out.",
        "",
        "## Summary (test queries)",
        "",
        "| domain | unchanged | chosen | chosen's score | chosen − unchanged [95 % CI] | confirmation p (best on selection) | BM25 | ST SimCSE | candidate minutes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(summary_row(n, r)) + " |" for n, r in found.items()]
    missing = [n for n in names if n not in found]
    if missing:
        lines += ["", f'Not yet measured: {", ".join(missing)} (run `EXAMPLES="{" ".join(missing)}" bash benchmarks/runners/adapt_experiments.sh`).']
    for name, results in found.items():
        lines += domain_section(name, results, name)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the page here (default: print it)")
    args = parser.parse_args()
    page = render() + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(page)
        print(f"wrote {args.out}")
    else:
        print(page)


if __name__ == "__main__":
    main()
