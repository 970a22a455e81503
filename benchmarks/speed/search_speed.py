"""When does an approximate index beat sentune's exact search? (issue 23)

For each corpus size: 384-dimensional unit vectors drawn around 2,000 cluster centres (embeddings are clustered, which
is what an index exploits), 1,000 queries near them; the top 100 of each query found by
- sentune's exact search in NumPy (sentune.tasks.retrieval.rank with FAISS switched off: blocks of documents, matrix
  products, ties by id),
- FAISS IndexFlatIP (exact, for reference), and
- FAISS HNSW (M = 32, efConstruction = 200, efSearch = 256), its build time counted: an evaluation builds it once,
with HNSW's recall of the exact top 100 and top 10. An evaluation searches once per model, so the index pays off only
where its build plus search is faster than the exact search: retrieval.EXACT_LIMIT is set from this page.

Usage: python benchmarks/speed/search_speed.py [--sizes 10000,100000,300000,1000000] [--queries 1000] [--out FILE.md]
Needs faiss-cpu (`pip install faiss-cpu`, or sentune's `search` extra).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from datetime import UTC, datetime

import numpy as np

from sentune.analysis.pages import command_block, emit
from sentune.tasks import retrieval

DIM = 384


def clustered(n: int, centres: np.ndarray, rng: np.random.Generator, spread: float = 0.6) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        size = min(100_000, n - start)
        block = centres[rng.integers(0, len(centres), size)] + spread * rng.standard_normal((size, DIM), dtype=np.float32) / np.sqrt(DIM)
        out[start : start + size] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def recall(found: list[list[int]], truth: list[list[int]], k: int) -> float:
    return float(np.mean([len(set(f[:k]) & set(t[:k])) / k for f, t in zip(found, truth, strict=True)]))


def main() -> None:
    import faiss

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,300000,1000000")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--out")
    args = parser.parse_args()
    retrieval.FAISS_FROM_PAIRS = math.inf  # the NumPy path, whatever the size
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((2000, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    queries = clustered(args.queries, centres, rng)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        docs = clustered(size, centres, rng)
        ids = [f"{i:09d}" for i in range(size)]
        started = time.perf_counter()
        exact = retrieval.rank(queries, docs, ids, depth=100)
        exact_s = time.perf_counter() - started
        started = time.perf_counter()
        flat = faiss.IndexFlatIP(DIM)
        flat.add(docs)
        _, flat_found = flat.search(queries, 100)
        flat_s = time.perf_counter() - started
        started = time.perf_counter()
        hnsw = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = 200
        hnsw.add(docs)
        build_s = time.perf_counter() - started
        hnsw.hnsw.efSearch = 256
        started = time.perf_counter()
        _, hnsw_found = hnsw.search(queries, 100)
        search_s = time.perf_counter() - started
        flat_recall = recall(flat_found.tolist(), exact, 100)
        rows.append(
            f"| {size:,} | {exact_s:.2f} | {flat_s:.2f} ({flat_recall:.4f}) | {build_s:.1f} | {search_s:.2f} | {build_s + search_s:.1f} | "
            f"{recall(hnsw_found.tolist(), exact, 100):.4f} | {recall(hnsw_found.tolist(), exact, 10):.4f} |"
        )
        print(rows[-1], flush=True)
        del docs, flat, hnsw
    lines = [
        "# Exact search against an approximate index (issue 23)",
        "",
        f"Measured {datetime.now(UTC).date()} on {platform.machine()}, {os.cpu_count()} CPU cores, faiss {faiss.__version__}; "
        f"{args.queries:,} queries, top 100, {DIM} dimensions, clustered unit vectors.",
        "",
        *command_block(),
        "| documents | sentune exact, NumPy (s) | FAISS flat, exact (s) (its recall of sentune's top 100) | HNSW build (s) | HNSW search (s) | HNSW build + search (s) | HNSW recall@100 | HNSW recall@10 |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
