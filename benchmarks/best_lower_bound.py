"""Seeds 003/004 §5.5: the regression lower bound with the best mean STS-B dev Spearman over its runs.

Usage: python benchmarks/best_lower_bound.py RUN_FOLDER... (kept results of 005-sts runs). Prints the
chosen value on stdout (for the runner script) and the table it was chosen from on stderr."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from sentune.methods.sts_regression import best_lower_bound


def dev_by_bound(folders: list[Path]) -> dict[float, list[float]]:
    scores: dict[float, list[float]] = defaultdict(list)
    for folder in folders:
        path = folder / "results.json"
        if not path.is_file():
            continue
        meta = json.loads(path.read_text())["meta"]
        scores[float(meta["recipe"]["params"]["lower_bound"])].append(meta["best_checkpoint"]["dev_spearman"])
    return dict(sorted(scores.items()))


def choose(means: dict[float, float]) -> float:
    """The bound with the best mean dev Spearman; on a tie the smallest bound. The runner and sed.md both use it."""
    return max(sorted(means), key=lambda lb: means[lb])


def main() -> None:
    scores = dev_by_bound([Path(p) for p in sys.argv[1:]])
    if not scores:
        sys.exit("best_lower_bound: no finished 005-sts runs among the folders given")
    means = {lb: sum(v) / len(v) for lb, v in scores.items()}
    for lb, mean in means.items():
        print(f"lb {lb:.2f}: dev {mean:.2f} over {len(scores[lb])} run(s)", file=sys.stderr)
    print(f"{best_lower_bound(means):g}")


if __name__ == "__main__":
    main()
