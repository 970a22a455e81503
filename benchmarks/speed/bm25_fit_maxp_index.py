"""`sentune index` and `sentune search` against benchmarks/speed/bm25_fit_maxp.py: an index of the example's corpus
built with the settings that run chose on the selection queries (BM25 fitted, MaxP passages, the hybrid's weight) from
the vectors that run kept (`--vectors`), searched for the test queries by each system; the test nDCG@10 of each
search beside the score that run computed. Writes benchmarks/results/bm25_fit_maxp-NAME-index.json.

Usage: python benchmarks/speed/bm25_fit_maxp_index.py --vectors DIR [--example scifact] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", default="scifact")
    parser.add_argument("--data", default=os.environ.get("SENTUNE_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--vectors", required=True, help="the folder bm25_fit_maxp.py --vectors kept the encoded vectors in")
    args = parser.parse_args()

    from sentune.adaptation.examples import write_example
    from sentune.core.models import load_model
    from sentune.data.beir import read_beir_folder
    from sentune.search.build import BuildPlan, build_index
    from sentune.search.fusion import Fusion
    from sentune.search.index import SearchIndex
    from sentune.search.lexical import LexicalSettings
    from sentune.tasks.retrieval import HEADLINE, per_query_metrics

    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    found = json.loads((REPO / "benchmarks" / "results" / f"bm25_fit_maxp-{args.example}.json").read_text())
    maxp = found["maxp_chosen_on_selection"]
    dense_key = "dense maxp" if maxp else "dense first"
    hybrid_key = f"hybrid: {dense_key} + bm25 fitted"
    fit = found["bm25_fit"]
    if "settings" in fit:
        fitted = LexicalSettings(**fit["settings"])
    else:  # a record written before it kept the settings: the grid's first point of the chosen score, the fit's rule
        k1, b, weight, _ = next(point for point in fit["grid"] if point[3] == fit["chosen_score"])
        fitted = LexicalSettings(k1=k1, b=b, title_weight=weight)
    if fitted.label != fit["chosen"]:
        raise SystemExit("the results file holds no fitted settings that match its label: run bm25_fit_maxp.py again")
    folder = Path(args.vectors)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        files = write_example(args.example, Path(args.data), Path(scratch) / "example")
        dev, test = read_beir_folder(files.dev, "dev"), read_beir_folder(files.test, "test")
        out = Path(scratch) / "index"
        plan = BuildPlan("hybrid", Fusion("convex", found["hybrid_weights"][hybrid_key]), fitted, "maxp" if maxp else "first", found["stride"])
        later = np.load(folder / f"{args.example}-later windows (stride {found['stride']}).npy") if maxp else None
        vectors = np.load(folder / f"{args.example}-documents (first window).npy")
        build_index(load_model("default", device="cpu"), "default", dev.corpus, out, plan, vectors=vectors, passage_vectors=later)
        for system, key in (("dense", dense_key), ("hybrid", hybrid_key), ("bm25", "bm25 fitted")):
            clock = time.perf_counter()
            hits = SearchIndex.open(out, system).search(test.queries, 100)
            seconds = time.perf_counter() - clock
            score = 100 * float(per_query_metrics([[h.doc_id for h in row] for row in hits], test.queries)[HEADLINE].mean())
            rows.append({"system": system, "as": key, "search_ndcg10": score, "benchmark_ndcg10": found["ndcg@10"][key]["test"], "seconds": seconds})
        index_settings = json.loads((out / "index.json").read_text())
    result = {
        "command": f"python benchmarks/speed/bm25_fit_maxp_index.py --example {args.example} --vectors DIR",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "sentune": commit,
        "index": {"passages": index_settings["passages"], "lexical": index_settings["lexical"]["label"], "fusion": index_settings["fusion"]},
        "test_queries": len(test.queries),
        "systems": rows,
    }
    (REPO / "benchmarks" / "results" / f"bm25_fit_maxp-{args.example}-index.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
