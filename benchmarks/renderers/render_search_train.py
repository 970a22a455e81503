"""Renders benchmarks/results/search_train.md: a search run's labels used fully (`--train`, a BEIR folder of judged
queries), against the same run without them, on the same test queries (benchmarks/runners/scifact_train_split.py).

Reads, from benchmarks/results/search_train/: without-train.json and with-train.json (the runs' results.json),
machine-without-train.txt and machine-with-train.txt (the machine, the versions and each run's wall seconds, as the
device script wrote them) and train_queries.jsonl / test_queries.jsonl (the split).
Usage: python benchmarks/renderers/render_search_train.py [--out PAGE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from render_gpu_adapt import code_line, walls  # each run's wall seconds, and the code's commit, from the device's records

RESULTS = Path(__file__).resolve().parents[1] / "results"
FOLDER = RESULTS / "search_train"
RUNS = ("without-train", "with-train")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def lines_of(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def score(record: dict | None, part: str) -> str:
    found = (record or {}).get(part)
    return f"{found['score']:.2f}" if found else "—"


def versus(record: dict, part: str = "test") -> str:
    found = record[part].get("vs_unchanged")
    if not found:
        return "—"
    gain = found["candidate"] - found["baseline"]
    return f"{gain:+.2f} [{found['difference_low']:+.2f}, {found['difference_high']:+.2f}]"


def summary(runs: dict[str, dict], machines: dict[str, str]) -> list[str]:
    rows = [
        "| run | chosen | its dense side trained on | test nDCG@10 [95 % CI] | test − unchanged [95 % CI] | confirmation p | GPU wall |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, results in runs.items():
        choice = results["choice"]
        record = results["candidates"][choice["name"]]
        dense = results["candidates"].get(record.get("source", ""), record)
        test = record["test"]
        seconds = walls(machines[name])[name][0]
        rows.append(
            f"| {name} | `{choice['name']}` | {dense.get('trained_on', '—')} | {test['score']:.2f} [{test['low']:.2f}, {test['high']:.2f}] | "
            f"{versus(record)} | {choice['confirmation']['p_value']:.3f} | {seconds} s |"
        )
    return rows


def per_candidate(runs: dict[str, dict]) -> list[str]:
    header = " | ".join(f"{name}: selection | {name}: test | {name}: seconds" for name in runs)
    rows = [f"| candidate | {header} |", "|---|" + "---|" * (3 * len(runs))]
    names = list(dict.fromkeys(n for results in runs.values() for n in results["candidates"]))
    for candidate in names:
        cells = []
        for results in runs.values():
            record = results["candidates"].get(candidate)
            shown = record and (record.get("select") or record.get("test"))
            cells += [score(record, "select"), score(record, "test"), f"{record['seconds']:.1f}" if shown else "—"]
        rows.append(f"| `{candidate}` | " + " | ".join(cells) + " |")
    return rows


def render() -> str:
    runs = {name: load(FOLDER / f"{name}.json") for name in RUNS}
    machines = {name: (FOLDER / f"machine-{name}.txt").read_text(encoding="utf-8") for name in RUNS}
    train, test = lines_of(FOLDER / "train_queries.jsonl"), lines_of(FOLDER / "test_queries.jsonl")
    dev = runs["with-train"]["meta"]["dev"]
    lines = [
        "# Search with its labels used fully: `--train` on SciFact",
        "",
        "Rendered by `python benchmarks/renderers/render_search_train.py` from the runs' results.json files in",
        "`benchmarks/results/search_train/`.",
        "",
        "BEIR's SciFact test judgements are not in this project's data, so a user's `--train` folder is simulated: the",
        f"SciFact example's test claims are split in two by a seeded shuffle (`benchmarks/runners/scifact_train_split.py`): {train}",
        f"judged claims are `--train` and the other {test} the test both runs are scored on. The dev folder is the example's",
        f"({dev['queries']} claims: {dev['select_queries']} selection, {dev['confirm_queries']} confirmation). Without `--train`, `supervised`",
        "trains on the selection claims, cross-fitted; with it, on the `--train` claims, and the selection claims then",
        "judge it as they judge every other candidate.",
        "",
        "Commands (from each results.json), one after the other, each alone on one lent GPU:",
        "",
        "```",
        *(f"{runs[name]['command'] if 'command' in runs[name] else runs[name]['meta']['command']}   # {runs[name]['meta']['date']}" for name in RUNS),
        "```",
        "",
        "The machine, as its script recorded it before each run (commit of its copy's git metadata, GPU, cores,",
        "torch / transformers / sentence-transformers versions, CUDA present, start):",
        "",
        *code_line(FOLDER),
        *(line for name in RUNS for line in (f"`machine-{name}.txt`:", "", "```", machines[name].strip(), "```", "")),
        "The first call's split kept two `--train` claims whose text is also a dev claim's; adapt refused the train",
        "folder in one line (exit 2, nothing trained), the split now drops such claims, and the run with `--train` was",
        "made in a second call. The test half is the same in both calls.",
        "",
        *summary(runs, machines),
        "",
        "Every candidate, nDCG@10 ×100 (seconds: the candidate's own, on the GPU):",
        "",
        *per_candidate(runs),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "search_train.md")
    args = parser.parse_args()
    args.out.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    main()
