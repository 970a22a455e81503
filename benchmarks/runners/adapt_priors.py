"""What each adapt candidate gained, on average, in the runs kept on benchmarks/results/adapt.md and retrieval.md: its
selection score minus the unchanged model's, per candidate name, over the domains' runs (pairs and search apart). Writes
sentune/adaptation/expected_gain.json, the expected gains `sentune adapt --time` plans with (sentune.adaptation.time_plan).

    python benchmarks/runners/adapt_priors.py

Only the selection part: what a run itself would have seen when choosing; a candidate skipped or raced out before it
had a selection score counts in the runs where it had one. A gain below zero is kept as measured (the planner reads
it as no gain)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEPT = REPO / "benchmarks" / "results" / "adapt"
RUNS = ("sick", "sick-train", "mrpc", "mrpc-train", "qqp", "stsb", "stsb-train", "scifact", "quora")  # the pages' current runs
OUT = REPO / "sentune" / "adaptation" / "expected_gain.json"


def main() -> None:
    gains: dict[str, dict[str, list[float]]] = {"pairs": defaultdict(list), "search": defaultdict(list)}
    used = []
    for run in RUNS:
        path = KEPT / run / "results.json"
        if not path.is_file():
            continue
        results = json.loads(path.read_text())
        kind = "search" if results["meta"]["dev"].get("unit") == "queries" else "pairs"
        candidates = results["candidates"]
        base = candidates["unchanged"]["select"]["score"]
        for name, c in candidates.items():
            if name != "unchanged" and c.get("select"):
                gains[kind][name].append(c["select"]["score"] - base)
        used.append(str(path.relative_to(REPO)))
    record = {
        "about": "mean selection gain over the unchanged model (metric points) per candidate, over the kept runs; "
        "sentune.adaptation.time_plan reads a gain below zero as none",
        "runs": used,
        "command": "python benchmarks/runners/adapt_priors.py",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **{kind: {name: round(sum(v) / len(v), 3) for name, v in sorted(found.items())} for kind, found in gains.items()},
        "runs_per_candidate": {kind: {name: len(v) for name, v in sorted(found.items())} for kind, found in gains.items()},
    }
    OUT.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: record[k] for k in ("pairs", "search")}, indent=2))


if __name__ == "__main__":
    main()
