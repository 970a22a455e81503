"""Assemble a results page (benchmarks/results/*.md) from run folders: each run's own Markdown (which
carries its exact command and date) and the layer-wise scores. Nothing here is typed by hand."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from sentune.core.results import render_markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--title", required=True)
    parser.add_argument("--figure", action="append", default=[], help="image path relative to the output file")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    parts = [
        f"# {args.title}",
        "",
        f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}` from the run folders below;",
        "each section names the command that produced it.",
        "",
    ]
    for figure in args.figure:
        parts += [f"![{Path(figure).stem}]({figure})", ""]
    for folder in map(Path, args.runs):
        if (folder / "results.json").is_file():
            text = render_markdown(json.loads((folder / "results.json").read_text(encoding="utf-8")))
            parts += [text.replace("\n# ", "\n## ").replace("\n## ", "\n### ").replace("# Evaluation", "## Evaluation", 1), ""]
        if (folder / "layerwise.json").is_file():
            result = json.loads((folder / "layerwise.json").read_text(encoding="utf-8"))
            meta = result["meta"]
            parts += [
                f"## Layer-wise {meta['task']} Spearman ×100, `{meta['model']}` ({meta['date']})",
                "",
                "Command:",
                "",
                "```",
                meta.get("command", ""),
                "```",
                "",
                "| hidden state | cls | mean | max |",
                "|---|---|---|---|",
            ]
            parts += [f"| {k} | " + " | ".join(f"{result['scores'][t][i]:.2f}" for t in ("cls", "mean", "max")) + " |" for i, k in enumerate(result["layers"])]
            parts += ["", "Hidden state 0 is the embedding layer, k the output of block k.", ""]
    Path(args.out).write_text("\n".join(parts), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
