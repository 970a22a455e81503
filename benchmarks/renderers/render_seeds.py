"""Mean ± std over seeds for training runs (results.json of `sentune train`), grouped by recipe and
overrides; writes a Markdown section with each run's exact command. Nothing is typed by hand."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from sentune.analysis.report import seed_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--title", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runs = [Path(r) for r in args.runs if (Path(r) / "results.json").is_file()]
    missing = [r for r in args.runs if Path(r) not in runs]
    parts = [
        f"## {args.title}",
        "",
        f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}`.",
        "Spearman ×100, 'all' aggregation, cosine; mean ± sample std over seeds.",
        "",
        seed_table(runs),
        "",
        "Runs:",
        "",
    ]
    for run in runs:
        meta = json.loads((run / "results.json").read_text())["meta"]
        best = meta.get("best_checkpoint", {})
        parts.append(f"- `{meta.get('command')}` ({meta['date']}; best step {best.get('step')}, dev {best.get('dev_spearman', float('nan')):.2f})")
    if missing:
        parts += ["", f"Not finished (no results.json): {', '.join(missing)}"]
    Path(args.out).write_text("\n".join(parts) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
