"""Time and peak memory of `sentune index` over the SciFact corpus (5,183 abstracts) and of `sentune search` for the
scifact example's test queries, each a process of its own under /usr/bin/time -v; and, when the adapt run of the
scifact example is there (benchmarks/runs/adapt-scifact), the nDCG@10 of `sentune search RUN --queries ... --run FILE`
on its test queries against the test score that run reported for its chosen system. Writes
benchmarks/results/index_speed.json, which benchmarks/renderers/render_retrieval.py puts on retrieval.md.

Usage: python benchmarks/speed/index_speed.py [--data DIR] [--runs benchmarks/runs] [--adapt-search-only]
(--adapt-search-only: the check of the adapt run's output again, after a new run, the timings kept as measured)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "benchmarks" / "results" / "index_speed.json"


def portable(command: str) -> str:
    """The command as a user types it: `sentune ...` without the interpreter, the data directory as $SENTUNE_DATA,
    this checkout's files relative to it, and the scratch index and run file as INDEX and RUN."""

    def shown(word: str) -> str:
        if "scifact-index" in word:
            return "INDEX"
        if word.endswith(".run"):
            return "RUN"
        if "/retrieval/" in word:
            return "$SENTUNE_DATA/retrieval/" + word.split("/retrieval/", 1)[1]
        if word.startswith(str(REPO) + "/"):
            return word[len(str(REPO)) + 1 :]
        return word

    words = command.split()
    words = words[words.index("sentune") :] if "sentune" in words else words
    return " ".join(shown(w) for w in words)


def timed(command: list[str]) -> dict:
    """Wall seconds and peak resident memory of one command, read from GNU time's report."""
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    report = done.stderr
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", report)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
    assert wall and rss, report[-2000:]
    parts = [float(p) for p in wall.group(1).split(":")]
    seconds = sum(p * 60 ** (len(parts) - 1 - i) for i, p in enumerate(parts))
    return {"command": portable(" ".join(command)), "wall_seconds": seconds, "peak_resident_kib": int(rss.group(1))}


def run_ndcg(run_file: Path, test: Path) -> tuple[float, int]:
    """Mean nDCG@10 ×100 of a TREC run file over a BEIR test folder's judged queries (sentune's reader and metric code)."""
    from sentune.data.beir import read_beir_folder
    from sentune.search.trec import read_trec_run
    from sentune.tasks.retrieval import per_query_metrics

    queries = read_beir_folder(test, "test").queries
    run = read_trec_run(run_file)
    return 100 * float(per_query_metrics([run.get(q.id, []) for q in queries], queries)["ndcg@10"].mean()), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("SENTUNE_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--runs", default=str(REPO / "benchmarks" / "runs"))
    parser.add_argument("--adapt-search-only", action="store_true", help="check the adapt run's output again; keep the timings in OUT")
    args = parser.parse_args()
    corpus = Path(args.data) / "retrieval" / "scifact" / "corpus.jsonl"
    adapt_run = Path(args.runs) / "adapt-scifact"
    test = adapt_run / "example" / "test"
    sentune = [sys.executable, "-m", "sentune"]
    now = datetime.now(UTC).isoformat(timespec="seconds")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    found: dict = json.loads(OUT.read_text()) if args.adapt_search_only else {"date": now, "cpu_count": os.cpu_count(), "commit": commit}
    if not args.adapt_search_only:
        with tempfile.TemporaryDirectory() as scratch:
            index = Path(scratch) / "scifact-index"
            found["index"] = timed([*sentune, "index", "--model", "default", "--corpus", str(corpus), "--out", str(index), "--quiet", "--fusion", "convex:0.5"])
            found["index"]["documents"] = json.loads((index / "index.json").read_text())["documents"]
            found["index"]["bytes"] = sum(p.stat().st_size for p in index.rglob("*") if p.is_file())
            if test.is_dir():
                run = Path(scratch) / "test.run"
                found["search"] = timed(
                    [*sentune, "search", str(index), "--queries", str(test / "queries.jsonl"), "--top", "100", "--run", str(run), "--quiet"]
                )
                found["search"]["queries"] = sum(1 for _ in (test / "queries.jsonl").open())
    if (adapt_run / "index.json").is_file():
        results = json.loads((adapt_run / "results.json").read_text())
        chosen = results["choice"]["name"]
        with tempfile.TemporaryDirectory() as scratch:
            run = Path(scratch) / "adapt.run"
            command = [*sentune, "search", str(adapt_run.relative_to(REPO)), "--queries", str((test / "queries.jsonl").relative_to(REPO)), "--top", "100"]
            timed([*command, "--run", str(run), "--quiet"])
            score, queries = run_ndcg(run, test)
        found["adapt_search"] = {
            "command": " ".join(command[2:]) + " --run FILE",
            "chosen": chosen,
            "search_ndcg10": score,
            "reported_ndcg10": results["candidates"][chosen]["test"]["score"],
            "queries": queries,
            "date": now,
            "commit": commit,
        }
    OUT.write_text(json.dumps(found, indent=2) + "\n")
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
