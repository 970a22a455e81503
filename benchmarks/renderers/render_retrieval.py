"""Render benchmarks/results/retrieval.md from the kept results of `EXAMPLES="scifact quora" bash
benchmarks/runners/adapt_experiments.sh` (benchmarks/results/adapt/NAME/results.json): `sentune adapt` on documents and queries
(issue 23), every candidate's nDCG@10 on the selection, confirmation and test queries with its interval, the choice,
the minutes, BM25 and sentence-transformers' SimCSE beside them, and the memory of each domain run again with
--low-memory (LOW_MEMORY=1, benchmarks/results/adapt/NAME-low-memory). A domain whose run has not finished is listed as
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


def candidate_minutes(results: dict) -> float:
    """The candidates' minutes without the references (BM25 and st-simcse are reported, never chosen)."""
    return minutes(results, reference=False) - (results["candidates"][BM25]["seconds"] / 60 if BM25 in results["candidates"] else 0.0)


def summary_row(name: str, results: dict) -> list[str]:
    c = results["candidates"]
    chosen, confirmation = results["choice"]["name"], results["choice"].get("confirmation")
    test = lambda n: f"{c[n]['test']['score']:.2f}" if n in c and c[n].get("test") else "—"  # noqa: E731
    spent = candidate_minutes(results)
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


def _peak(results: dict) -> str:
    usage = results["meta"].get("process", {})  # the last invocation's: a resumed run's earlier parts are not in it
    return f"{usage['peak_resident_mib'] / 1024:.2f}" if "peak_resident_mib" in usage else "—"


def _test_scores(results: dict) -> dict[str, float]:
    return {n: c["test"]["score"] for n, c in results["candidates"].items() if c.get("test") and n not in (REFERENCE, BM25)}


def low_memory_section(found: dict[str, dict]) -> list[str]:
    """Each domain run again with --low-memory and no --reference (LOW_MEMORY=1 in the runner): its peak resident
    memory, its minutes, and whether it scored its candidates as the run without --low-memory did (gradient
    checkpointing recomputes the same activations, so it should: the largest difference is printed, not assumed)."""
    variants = {n: json.loads((KEPT / f"{n}-low-memory" / "results.json").read_text()) for n in found if (KEPT / f"{n}-low-memory" / "results.json").is_file()}
    if not variants:
        return []
    lines = [
        "",
        "## Memory: the same domains with `--low-memory`",
        "",
        'Run by `LOW_MEMORY=1 EXAMPLES="NAME" bash benchmarks/runners/adapt_experiments.sh` (each command and date below): every '
        "candidate trained with gradient checkpointing, and no `--reference` (sentence-transformers' recipe trains at batch 64 × "
        "256 tokens; `python benchmarks/speed/training_memory.py` measures it alone, with and without checkpointing). Peak resident memory is the "
        "whole process's (`ru_maxrss`) in its last invocation; the evaluation alone: benchmarks/results/retrieval_eval.md.",
        "",
        "| domain | run | peak resident memory (GiB) | candidate minutes | chosen | chosen's test score | test scores against the `--reference` run |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, low in variants.items():
        full = found[name]
        before, after = _test_scores(full), _test_scores(low)
        shared = sorted(set(before) & set(after))
        gap = max((abs(before[n] - after[n]) for n in shared), default=float("nan"))
        for label, results, versus in (
            ("the run above (`--reference`)", full, "—"),
            ("`--low-memory`", low, f"{len(shared)} candidates scored by both; largest difference {gap:.2f}"),
        ):
            chosen = results["choice"]["name"]
            lines.append(
                f"| {name} | {label} | {_peak(results)} | {candidate_minutes(results):.0f} | `{chosen}` | {results['candidates'][chosen]['test']['score']:.2f} | {versus} |"
            )
    for name, low in variants.items():
        lines += [
            "",
            f"{name} with `--low-memory` ({low['meta']['date']}): `{low['meta'].get('command', '?')}`; every candidate: "
            f"[adapt/{name}-low-memory/results.md](adapt/{name}-low-memory/results.md).",
        ]
        lines += peaks_by_candidate(low)
        conditions = KEPT / f"{name}-low-memory" / "conditions.md"
        if conditions.is_file():
            lines += ["", f"Machine conditions (as recorded by the person who ran it): {conditions.read_text().strip()}"]
    return lines


def peaks_by_candidate(results: dict) -> list[str]:
    """The process's peak so far as each candidate's record was written (runs from 0563acb on): ordered by that peak,
    which only grows, it places the run's peak between two records."""
    peaks = {n: c["peak_memory_mib"] for n, c in results["candidates"].items() if c.get("peak_memory_mib") is not None}
    if not peaks:
        return []
    ordered = sorted(peaks.items(), key=lambda item: item[1])
    listed = ", ".join(f"{n} {mib / 1024:.2f}" for n, mib in ordered)
    return ["", f"Peak resident memory so far (GiB) when each candidate's record was written, lowest first: {listed}."]


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
    lines += low_memory_section(found)
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
