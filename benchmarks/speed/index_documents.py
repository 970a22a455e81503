"""What an opened search index costs a process in resident memory, and one query's latency, at a size where its
documents matter: a synthetic collection (random words from a made-up vocabulary, random vectors: the cost of
opening and ranking, not the ranking's quality), built once with sentune.search.index.build_index.

    python benchmarks/speed/index_documents.py build --out INDEX --documents 1000000
    python benchmarks/speed/index_documents.py measure --index INDEX --label after
    PYTHONPATH=OLD python benchmarks/speed/index_documents.py measure --index INDEX --label before   # OLD: another checkout

`measure` opens the index (SearchIndex.open, as `sentune search` does) in this process and records the resident
memory it added (VmRSS, and RssAnon: the process's own heap, not pages of mapped files), then searches one query at a
time with each system, exact (the first query loads the model and BM25; the median of the next ones is kept). Run it
with another checkout of sentune first on PYTHONPATH to measure that code on the same index (the label says which).
The record is kept in benchmarks/results/ann/documents.json with the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from ann_bench import REPO, keep, load, now, rss_mib

VOCABULARY = 30_000
WORDS = (6, 14)  # words a document holds, at least and at most
DIM = 384
CHUNK = 100_000


def vocabulary(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return sorted({"".join(rng.choice(letters, size=rng.integers(4, 10))) for _ in range(VOCABULARY)})


def word_weights(count: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1)  # Zipf's law, as words in text
    return weights / weights.sum()


def queries(seed: int, count: int) -> list[str]:
    words = vocabulary(seed)
    rng = np.random.default_rng(seed + 1)
    return [" ".join(rng.choice(words, size=3, p=word_weights(len(words)))) for _ in range(count)]


def cmd_build(args) -> None:
    from sentune.data.beir import Document
    from sentune.data.text_files import Source
    from sentune.search.build import BuildPlan, build_index
    from sentune.search.fusion import Fusion

    out = Path(args.out)
    rng = np.random.default_rng(args.seed)
    words = np.array(vocabulary(args.seed))
    weights = word_weights(len(words))
    order = rng.permutation(args.documents)  # ids not in index order, so the id tie-break is a real permutation
    documents = []
    for start in range(0, args.documents, CHUNK):
        size = min(CHUNK, args.documents - start)
        lengths = rng.integers(WORDS[0], WORDS[1] + 1, size=size)
        drawn = rng.choice(len(words), size=int(lengths.sum()), p=weights)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        texts = (" ".join(words[drawn[bounds[i] : bounds[i + 1]]]) for i in range(size))
        documents += [Document(f"d{order[start + i]:08d}", text, Source("synthetic", start + i + 1)) for i, text in enumerate(texts)]
    staging = out.with_name(out.name + ".vectors.npy")
    vectors = np.lib.format.open_memmap(staging, mode="w+", dtype=np.float32, shape=(args.documents, DIM))
    for start in range(0, args.documents, CHUNK):
        vectors[start : start + CHUNK] = rng.standard_normal((min(CHUNK, args.documents - start), DIM), dtype=np.float32)
    vectors.flush()
    started = time.perf_counter()
    plan = BuildPlan("hybrid", Fusion("convex", 0.5))
    build_index(None, "default", documents, out, plan, model_digest="synthetic", vectors=vectors, show_progress=True)
    del vectors
    staging.unlink()
    print(f"{out}: {args.documents:,} documents in {time.perf_counter() - started:.0f} s")


def recorded_command(package: str, index: str) -> str:
    """The command as the page shows it: the index folder as INDEX, and OLD for another checkout of sentune put first
    on PYTHONPATH (the page says which commit)."""
    other = Path(package).resolve().parents[1] != REPO
    return (
        ("PYTHONPATH=OLD " if other else "")
        + "python "
        + shlex.join(["benchmarks/speed/index_documents.py", *(("INDEX" if a == index else a) for a in sys.argv[1:])])
    )


def cmd_measure(args) -> None:
    import sentune
    from sentune.search.index import SearchIndex

    folder = Path(args.index)
    had_offsets = (folder / "documents.offsets.npy").is_file()
    before = {"VmRSS": rss_mib(), "RssAnon": rss_mib("RssAnon")}
    conditions = {"open": load()}
    started = time.perf_counter()
    index = SearchIndex.open(folder, "hybrid")
    open_s = time.perf_counter() - started
    opened = {field: rss_mib(field) - value for field, value in before.items()}
    latency: dict[str, dict] = {}
    texts = queries(0, args.queries + 1)
    from sentune.data.beir import Query
    from sentune.data.text_files import Source

    for system in ("bm25", "dense", "hybrid"):
        view = copy.copy(index)
        view.system = system
        conditions[system] = load()
        times = []
        for number, text in enumerate(texts):
            started = time.perf_counter()
            hits = view.search([Query(f"q{number}", text, Source("bench", number + 1))], 10)
            times.append(time.perf_counter() - started)
            assert len(hits[0]) == 10
        latency[system] = {"first_s": round(times[0], 3), "median_ms": round(1000 * statistics.median(times[1:]), 1), "queries": len(times) - 1}
        conditions[system] += " → " + load()
    record = {
        "label": args.label,
        "sentune": "this checkout" if Path(sentune.__file__).resolve().parents[1] == REPO else "OLD",
        "documents": index.settings["documents"],
        "offsets_file_before_open": had_offsets,
        "open_s": round(open_s, 2),
        "opened_rss_mib": {k: round(v, 1) for k, v in opened.items()},
        "rss_after_queries_mib": round(rss_mib(), 1),  # with the pages of the mapped files the queries read
        "anon_after_queries_mib": round(rss_mib("RssAnon"), 1),  # the process's own heap: the model, BM25's work, no file
        "latency": latency,
        "load": conditions,
        "date": now(),
        "command": recorded_command(sentune.__file__, args.index),
    }
    keep("documents", f"{record['documents']}:{args.label}", record)
    print(json.dumps(record, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build")
    build.add_argument("--out", required=True)
    build.add_argument("--documents", type=int, default=1_000_000)
    build.add_argument("--seed", type=int, default=0)
    measure = sub.add_parser("measure")
    measure.add_argument("--index", required=True)
    measure.add_argument("--label", required=True, help="which code is measured, e.g. before / after")
    measure.add_argument("--queries", type=int, default=5, help="queries timed after the first, per system")
    args = parser.parse_args()
    {"build": cmd_build, "measure": cmd_measure}[args.command](args)


if __name__ == "__main__":
    main()
