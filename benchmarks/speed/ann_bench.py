"""The approximate dense index (`sentune index --ann`, sentune.search.ann) at scale, on synthetic vectors, and on SciFact.

    python benchmarks/speed/ann_bench.py scale --run 100000:hnsw --run 100000:ivfpq ... [--work /tmp/ann-bench]
    python benchmarks/speed/ann_bench.py scifact --index /tmp/ann-scifact --run hnsw --run ivfpq
    python benchmarks/speed/ann_bench.py qdrant --index /tmp/ann-scifact
    python benchmarks/speed/ann_bench.py render --out benchmarks/results/ann.md

scale: for each SIZE:SPEC, SIZE synthetic 384-dimensional vectors (the generator of benchmarks/speed/search_speed.py:
2,000 random unit centres, each vector a centre plus Gaussian noise of norm about 0.6, written to a memory-mapped
vectors.npy in chunks, the same seed giving the same first rows at every size), 500 queries drawn the same way, their
exact top 10 found by brute force in blocks. A child process builds the ANN with sentune.search.ann.build_ann (its
build time and peak memory), another loads it and searches with AnnIndex.nearest, the path `sentune search` takes
(load time and memory, recall@10 against the exact top 10, latency one query at a time and in batches). Exact
search's latency (sentune.tasks.retrieval.rank over the memory-mapped vectors) is measured beside it. Every timing
carries the machine's load average (/proc/loadavg) before and after it: the machine is shared.

scifact: `sentune index --ann SPEC` on the SciFact index, then `sentune search --run` for exact and approximate dense
and hybrid search, scored with benchmarks/runners/score_trec_run.py (sentune's own metrics) over the queries with
judgements; recall@10 of the approximate dense top 10 against the exact one.

qdrant: `sentune export-index --to qdrant` into local mode, then the same queries through Qdrant (sentune.search.
export_qdrant.QdrantSearch): dense, BM25, and the hybrid fused by sentune's formula on the client, by Qdrant's RRF and
by its DBSF, scored the same way.

Results are kept in benchmarks/results/ann/*.json (one record per run, replaced when run again); `render` writes the
page from them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "ann"
DIM = 384
CENTRES = 2000
SPREAD = 0.6
CHUNK = 100_000
QUERIES = 500
DEPTH = 10
CONTRAST_DEPTH = 100
SCIFACT = Path(os.environ.get("SENTUNE_DATA", REPO.parent / "shared" / "data")) / "retrieval" / "scifact"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def rss_mib(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike getrusage's ru_maxrss, which Linux carries across exec from the
    parent, it starts anew with the process's own memory)."""
    return rss_mib("VmHWM")


def keep(name: str, key: str, record: dict) -> None:
    """Record `record` under `key` in RESULTS/name.json (replacing a record of that key)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    kept[key] = record
    path.write_text(json.dumps(kept, indent=2) + "\n")


# ---- synthetic vectors ----------------------------------------------------------------------------------------------


def centres() -> np.ndarray:
    c = np.random.default_rng(0).standard_normal((CENTRES, DIM), dtype=np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def clustered_chunk(chunk: int, size: int, table: np.ndarray, stream: int = 0) -> np.ndarray:
    """Chunk number `chunk` of a stream: its own seed, so the first rows are the same whatever the total size."""
    rng = np.random.default_rng([stream, chunk])
    block = table[rng.integers(0, len(table), size)] + SPREAD * rng.standard_normal((size, DIM), dtype=np.float32) / np.sqrt(DIM)
    return (block / np.linalg.norm(block, axis=1, keepdims=True)).astype(np.float32)


def synthetic(work: Path, size: int) -> Path:
    """work/N/vectors.npy (N synthetic vectors) with the fake index.json digests the ANN records; written once."""
    folder = work / str(size)
    path = folder / "vectors.npy"
    if not (folder / "done").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        table = centres()
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(size, DIM))
        for number, start in enumerate(range(0, size, CHUNK)):
            out[start : start + CHUNK] = clustered_chunk(number, min(CHUNK, size - start), table)
        out.flush()
        del out
        (folder / "done").write_text("")
    return folder


def queries() -> np.ndarray:
    return clustered_chunk(0, QUERIES, centres(), stream=1)


def exact_top(vectors: np.ndarray, query_vectors: np.ndarray, depth: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """Exact top `depth` rows per query by inner product (unit vectors: cosine) and their scores, brute force in blocks."""
    best_rows = np.zeros((len(query_vectors), 0), dtype=np.int64)
    best_scores = np.zeros((len(query_vectors), 0), dtype=np.float32)
    for start in range(0, len(vectors), 250_000):
        scores = query_vectors @ np.asarray(vectors[start : start + 250_000]).T
        part = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
        rows = np.concatenate([best_rows, part + start], axis=1)
        values = np.concatenate([best_scores, np.take_along_axis(scores, part, axis=1)], axis=1)
        order = np.argsort(-values, axis=1)[:, :depth]
        best_rows, best_scores = np.take_along_axis(rows, order, axis=1), np.take_along_axis(values, order, axis=1)
    return best_rows, best_scores


def truth(folder: Path) -> np.ndarray:
    """The queries' exact top 10 rows (and, kept beside them, the exact top 100's cosines, for contrast())."""
    path = folder / "truth.npy"
    if not path.is_file() or np.load(path).shape[1] != CONTRAST_DEPTH:
        rows, scores = exact_top(np.load(folder / "vectors.npy", mmap_mode="r"), queries(), CONTRAST_DEPTH)
        np.save(path, rows)
        np.save(folder / "truth_scores.npy", scores)
    return np.load(path)[:, :DEPTH]


def contrast(scores: np.ndarray) -> dict:
    """How far apart a query's neighbours are: the mean cosine gap between its 1st and 10th, and 10th and 100th, exact
    neighbours. Small gaps are what compressed codes cannot resolve."""
    return {"gap_1_10": float(np.mean(scores[:, 0] - scores[:, DEPTH - 1])), "gap_10_100": float(np.mean(scores[:, DEPTH - 1] - scores[:, -1]))}


def slug(spec: str) -> str:
    return spec.replace(":", "-").replace(",", "-").replace("=", "")


def child(args: list[str], limit: float) -> dict:
    """Run this script's subcommand in a new process (its own peak memory), at most `limit` seconds."""
    command = [sys.executable, __file__, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, env=os.environ | {"PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {limit:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_one(folder: Path, spec: str) -> dict:
    """(child) build the ANN over folder/vectors.npy: time, peak memory, size on disk."""
    from sentune.search.ann import build_ann, parse_ann

    before, started, cpu = load(), time.perf_counter(), cpu_s()
    record = build_ann(folder, parse_ann(spec), {"corpus_sha256": "synthetic", "model_digest": "synthetic"})
    seconds = time.perf_counter() - started
    return {
        "build_s": seconds,
        "build_cpu_s": cpu_s() - cpu,
        "threads": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count())),
        "peak_rss_mib": peak_mib(),
        "index_mib": record["bytes"] / 2**20,
        "settings": record["settings"],
        "load_before": before,
        "load_after": load(),
    }


def percentiles(times: list[float]) -> dict:
    ms = np.asarray(times) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)), "n": len(ms)}


def search_one(folder: Path, seconds: float, settings: str = "") -> dict:
    """(child) load the ANN and search (with other search settings, when given): load time and memory, recall@10,
    latency one at a time and batched."""
    from sentune.search.ann import AnnIndex, read_ann_settings

    saved = read_ann_settings(folder)
    assert saved is not None
    ann = AnnIndex(folder, saved)
    if settings:
        ann = ann.with_search_settings(settings)
    q, expected = queries(), truth(folder)
    ties = np.arange(saved["source"]["rows"])  # ids in row order: no id sort of millions of strings in the timing
    baseline, before = rss_mib(), load()
    started = time.perf_counter()
    ann.faiss_index()
    loaded_s = time.perf_counter() - started
    loaded_mib = rss_mib() - baseline
    ann.nearest(q[:20], DEPTH, ties)  # warm: the first queries page in what they touch
    single: list[float] = []
    found = []
    deadline = time.perf_counter() + seconds
    for row in range(len(q)):
        started = time.perf_counter()
        found.append(ann.nearest(q[row : row + 1], DEPTH, ties)[0].rows)
        single.append(time.perf_counter() - started)
        if time.perf_counter() > deadline:
            break
    batches: list[float] = []
    for start in range(0, len(q), 100):
        started = time.perf_counter()
        ann.nearest(q[start : start + 100], DEPTH, ties)
        batches.append(time.perf_counter() - started)
    recall = float(np.mean([len(set(f.tolist()) & set(t.tolist())) / DEPTH for f, t in zip(found, expected, strict=False)]))
    return {
        "load_s": loaded_s,
        "loaded_rss_mib": loaded_mib,
        "rss_after_search_mib": rss_mib() - baseline,
        "recall@10": recall,
        "recall_queries": len(found),
        "single": percentiles(single),
        "batch100": percentiles(batches) | {"queries_per_s": 100 * len(batches) / sum(batches)},
        "load_before": before,
        "load_after": load(),
    }


def exact_one(folder: Path, seconds: float) -> dict:
    """(child) sentune's exact search over the memory-mapped vectors: one query at a time (bounded) and 100 at once."""
    from sentune.tasks.retrieval import rank

    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    ids = [f"{i:09d}" for i in range(len(vectors))]
    q, before = queries(), load()
    rank(q[:1], vectors, ids, depth=DEPTH)  # warm the page cache
    single: list[float] = []
    deadline = time.perf_counter() + seconds
    for row in range(20):
        started = time.perf_counter()
        rank(q[row : row + 1], vectors, ids, depth=DEPTH)
        single.append(time.perf_counter() - started)
        if time.perf_counter() > deadline:
            break
    started = time.perf_counter()
    rank(q[:100], vectors, ids, depth=DEPTH)
    batch = time.perf_counter() - started
    return {"single": percentiles(single), "batch100_s": batch, "load_before": before, "load_after": load()}


def library_one(folder: Path, library: str) -> dict:
    """(child) the same HNSW graph (M 32, construction breadth 100, search breadth 128) built and searched by another
    library over the same unit vectors, held in memory as each library needs: FAISS, hnswlib or usearch."""
    vectors = np.asarray(np.load(folder / "vectors.npy", mmap_mode="r"))
    q, expected, before = queries(), truth(folder), load()
    started, cpu = time.perf_counter(), cpu_s()
    if library == "faiss":
        import faiss

        index = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 100
        index.add(vectors)
        index.hnsw.efSearch = 128
        search = lambda block: index.search(block, DEPTH)[1]  # noqa: E731
    elif library == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=DIM)
        index.init_index(max_elements=len(vectors), M=32, ef_construction=100, random_seed=0)
        index.add_items(vectors, np.arange(len(vectors)))
        index.set_ef(128)
        search = lambda block: index.knn_query(block, k=DEPTH)[0]  # noqa: E731
    else:
        from usearch.index import Index

        index = Index(ndim=DIM, metric="ip", dtype="f32", connectivity=32, expansion_add=100, expansion_search=128)
        index.add(np.arange(len(vectors)), vectors)
        search = lambda block: np.atleast_2d(index.search(block, DEPTH).keys)  # noqa: E731
    build_s, build_cpu = time.perf_counter() - started, cpu_s() - cpu
    search(q[:20])
    single, found = [], []
    for row in range(len(q)):
        started = time.perf_counter()
        found.append(search(q[row : row + 1])[0])
        single.append(time.perf_counter() - started)
    started = time.perf_counter()
    search(q)
    batch_s = time.perf_counter() - started
    recall = float(np.mean([len(set(np.asarray(f).tolist()) & set(t.tolist())) / DEPTH for f, t in zip(found, expected, strict=True)]))
    return {
        "library": library,
        "build_s": build_s,
        "build_cpu_s": build_cpu,
        "recall@10": recall,
        "single": percentiles(single),
        "batch_queries_per_s": len(q) / batch_s,
        "peak_rss_mib": peak_mib(),
        "load_before": before,
        "load_after": load(),
    }


def cmd_libraries(args) -> None:
    folder = synthetic(Path(args.work), args.size)
    truth(folder)
    for library in args.library:
        record = child(["library-one", str(folder), library], args.limit) | {"size": args.size, "date": now(), "command": "python " + shlex.join(sys.argv)}
        keep("libraries", f"{args.size}:{library}", record)
        print(json.dumps(record), flush=True)


def cmd_scale(args) -> None:
    work = Path(args.work)
    for run in args.run:
        size_text, _, spec = run.partition(":")
        size = int(size_text)
        started = time.perf_counter()
        folder = synthetic(work, size)
        generated = time.perf_counter() - started
        truth(folder)
        print(f"{size:,} vectors ready ({generated:.0f} s), load {load()}", flush=True)
        kept = None
        if spec == "exact":
            record = child(["exact-one", str(folder), str(args.search_seconds)], args.limit)
        else:
            target = work / f"{size}-{slug(spec)}"
            target.mkdir(exist_ok=True)
            if not (target / "vectors.npy").exists():
                (target / "vectors.npy").symlink_to(folder / "vectors.npy")
                (target / "truth.npy").symlink_to(folder / "truth.npy")
            kept = json.loads((RESULTS / "scale.json").read_text()).get(f"{size}:{spec}") if (RESULTS / "scale.json").is_file() else None
            if args.sweep_only and kept and (target / "ann" / "ann.json").is_file():  # more search settings on the index built before
                record = {k: kept[k] for k in ("build", "search", "sweep") if k in kept}
            else:
                shutil.rmtree(target / "ann", ignore_errors=True)  # built anew: an ANN kept from a run before would be reused
                record = {"build": child(["build-one", str(target), spec], args.limit)}
                if "error" not in record["build"]:
                    record["search"] = child(["search-one", str(target), str(args.search_seconds)], args.limit)
            if "error" not in record["build"]:
                from sentune.search.ann import KINDS

                own = [s for s in args.sweep if all(item.split("=")[0] in KINDS[spec.split(":")[0]] for item in s.split(","))]  # this kind's settings
                record["sweep"] = record.get("sweep", {}) | {s: child(["search-one", str(target), str(args.search_seconds), s], args.limit) for s in own}
        command = "python " + shlex.join(sys.argv)
        if args.sweep_only and kept and kept.get("command") != command:
            command = kept["command"] + "\n" + command  # the build's command and the one that added search settings
        record |= {"size": size, "spec": spec, "contrast": contrast(np.load(folder / "truth_scores.npy")), "date": now(), "command": command}
        keep("scale", f"{size}:{spec}", record)
        print(json.dumps(record), flush=True)


# ---- SciFact -------------------------------------------------------------------------------------------------------


def sentune(*argv: str) -> float:
    """Run a sentune command in this process; its seconds."""
    from sentune.cli import main

    started = time.perf_counter()
    if main(list(argv)) != 0:
        raise SystemExit(f"failed: sentune {shlex.join(argv)}")
    return time.perf_counter() - started


def score(runs: list[Path], out: Path) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks" / "runners"))
    import score_trec_run

    score_trec_run.main(
        [
            *map(str, runs),
            "--corpus",
            str(SCIFACT / "corpus.jsonl"),
            "--queries",
            str(SCIFACT / "queries.jsonl"),
            "--qrels",
            str(SCIFACT / "qrels" / "train.tsv"),
            "--name",
            "scifact-train",
            "--out",
            str(out),
        ]
    )
    return json.loads((out / "results.json").read_text())["sets"]["scifact-train"]


def top10(path: Path) -> dict[str, list[str]]:
    from sentune.search.trec import read_trec_run

    return {q: docs[:DEPTH] for q, docs in read_trec_run(path).items()}


def run_contrast(path: Path) -> dict:
    """contrast() of a run file's scores (each query's top 100 exact cosines)."""
    scores: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        qid, _, _, _, score, _ = line.split()
        scores.setdefault(qid, []).append(float(score))
    return contrast(np.array([row[:CONTRAST_DEPTH] for row in scores.values() if len(row) >= CONTRAST_DEPTH]))


def overlap(found: dict[str, list[str]], exact: dict[str, list[str]]) -> float:
    return float(np.mean([len(set(found.get(q, [])) & set(docs)) / len(docs) for q, docs in exact.items() if docs]))


def cmd_scifact(args) -> None:
    index, runs = Path(args.index), Path(args.work) / "scifact-runs"
    shutil.rmtree(runs, ignore_errors=True)  # only this command's runs are scored
    runs.mkdir(parents=True, exist_ok=True)
    queries_file = str(SCIFACT / "queries.jsonl")
    search = ["search", str(index), "--queries", queries_file, "--top", "100", "--quiet"]
    seconds: dict[str, float] = {}
    conditions: dict[str, str] = {}
    built: dict[str, dict] = {}
    for name, extra in (("exact-dense", ["--system", "dense", "--exact"]), ("exact-hybrid", ["--exact"])):
        (runs / f"{name}.run").unlink(missing_ok=True)
        conditions[name] = load()
        seconds[name] = sentune(*search, *extra, "--run", str(runs / f"{name}.run"))
    for spec in args.run:
        conditions[f"build {spec}"] = load()
        settings = json.loads((index / "index.json").read_text())
        fusion = settings["fusion"]
        fusion_text = f"convex:{fusion['alpha']}" if fusion and fusion["kind"] == "convex" else ("rrf" if fusion else "none")
        seconds[f"build {spec}"] = sentune(
            "index", "--model", args.model, "--corpus", str(SCIFACT / "corpus.jsonl"), "--out", str(index), "--fusion", fusion_text, "--ann", spec, "--quiet"
        )
        built[spec] = json.loads((index / "ann" / "ann.json").read_text())
        for system, setting in [("dense", ""), ("hybrid", ""), *(("hybrid", f"candidates={k}") for k in args.candidates)]:
            name = f"ann-{slug(spec)}-{system}" + (f"-{slug(setting)}" if setting else "")
            (runs / f"{name}.run").unlink(missing_ok=True)
            conditions[name] = load()
            seconds[name] = sentune(*search, "--system", system, "--ann", setting, "--run", str(runs / f"{name}.run"))
    scored = score(sorted(runs.glob("*.run")), Path(args.work) / "scifact-scores")
    exact = top10(runs / "exact-dense.run")
    recalls = {path.stem: overlap(top10(path), exact) for path in runs.glob("ann-*-dense.run")}
    record = {
        "scores": {k: {m: v[m] for m in ("ndcg@10", "ndcg@10_low", "ndcg@10_high", "recall@100", "n_queries")} for k, v in scored.items()},
        "recall@10_vs_exact": recalls,
        "contrast": run_contrast(runs / "exact-dense.run"),
        "seconds": seconds,
        "load": conditions,
        "ann": built,
        "date": now(),
        "command": "python " + shlex.join(sys.argv),
    }
    keep("scifact", "scifact", record)
    print(json.dumps(record, indent=2))


def cmd_qdrant(args) -> None:
    """Export the SciFact index to Qdrant's local mode and search it as sentune does."""
    from sentune.data.beir import read_queries
    from sentune.search.export_qdrant import QdrantSearch, connect
    from sentune.search.index import Hit, SearchIndex
    from sentune.search.trec import write_trec_run

    index, work = Path(args.index), Path(args.work)
    storage, runs = work / "qdrant", work / "qdrant-runs"
    shutil.rmtree(storage, ignore_errors=True)
    runs.mkdir(parents=True, exist_ok=True)
    conditions = {"export": load()}
    export_s = sentune("export-index", str(index), "--to", "qdrant", "--path", str(storage), "--collection", "scifact", "--quiet")
    queries = read_queries(str(SCIFACT / "queries.jsonl"))
    opened = SearchIndex.open(index)
    vectors = opened.model().encode([q.text for q in queries], batch_size=64)
    client = connect(path=str(storage))
    engine = QdrantSearch(client, "scifact")
    seconds: dict[str, float] = {"export": export_s}
    for name, system, fusion in (
        ("qdrant-dense", "dense", "sentune"),
        ("qdrant-bm25", "bm25", "sentune"),
        ("qdrant-hybrid-sentune-fusion", "hybrid", "sentune"),
        ("qdrant-hybrid-rrf", "hybrid", "rrf"),
        ("qdrant-hybrid-dbsf", "hybrid", "dbsf"),
    ):
        conditions[name] = load()
        started = time.perf_counter()
        found = engine.search(vectors, [q.text for q in queries], top=100, system=system, engine_fusion=fusion, candidates=100)
        seconds[name] = time.perf_counter() - started
        write_trec_run(runs / f"{name}.run", queries, [[Hit(doc, score, "") for doc, score in row] for row in found])
    client.close()
    for name, extra in (("exact-dense", ["--system", "dense", "--exact"]), ("exact-bm25", ["--system", "bm25"]), ("exact-hybrid", ["--exact"])):
        if not (runs / f"{name}.run").is_file():
            sentune("search", str(index), "--queries", str(SCIFACT / "queries.jsonl"), "--top", "100", "--quiet", *extra, "--run", str(runs / f"{name}.run"))
    scored = score(sorted(runs.glob("*.run")), work / "qdrant-scores")
    same = {
        name: overlap(top10(runs / f"{name}.run"), top10(runs / f"exact-{kind}.run"))
        for name, kind in (("qdrant-dense", "dense"), ("qdrant-bm25", "bm25"), ("qdrant-hybrid-sentune-fusion", "hybrid"))
    }
    record = {
        "scores": {k: {m: v[m] for m in ("ndcg@10", "ndcg@10_low", "ndcg@10_high", "n_queries")} for k, v in scored.items()},
        "top10_overlap_with_sentune": same,
        "seconds": seconds,
        "queries": len(queries),
        "load": conditions,
        "date": now(),
        "command": "python " + shlex.join(sys.argv),
    }
    keep("qdrant", "scifact", record)
    print(json.dumps(record, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    scale = sub.add_parser("scale")
    scale.add_argument("--run", action="append", required=True, help="SIZE:SPEC (an --ann value) or SIZE:exact")
    scale.add_argument("--work", default="/tmp/ann-bench")
    scale.add_argument("--limit", type=float, default=3600, help="seconds a build or search process may take")
    scale.add_argument("--search-seconds", type=float, default=60, help="time for the one-at-a-time queries")
    scale.add_argument("--sweep", action="append", default=[], help="also search each built index with these search settings (nprobe=64,refine=10)")
    scale.add_argument("--sweep-only", action="store_true", help="an index built by a run before: only search it with the --sweep settings")
    scifact = sub.add_parser("scifact")
    scifact.add_argument("--index", required=True)
    scifact.add_argument("--run", action="append", required=True, help="an --ann value")
    scifact.add_argument("--model", default="default")
    scifact.add_argument("--candidates", type=lambda text: [int(k) for k in text.split(",")], default=[], help="also the hybrid with these candidate depths")
    scifact.add_argument("--work", default="/tmp/ann-bench")
    qdrant = sub.add_parser("qdrant")
    qdrant.add_argument("--index", required=True)
    qdrant.add_argument("--work", default="/tmp/ann-bench")
    libraries = sub.add_parser("libraries")
    libraries.add_argument("--size", type=int, default=100_000)
    libraries.add_argument("--library", action="append", required=True, help="faiss, hnswlib or usearch")
    libraries.add_argument("--work", default="/tmp/ann-bench")
    libraries.add_argument("--limit", type=float, default=3600)
    render = sub.add_parser("render")
    render.add_argument("--out")
    for name in ("build-one", "search-one", "exact-one", "library-one"):
        one = sub.add_parser(name)
        one.add_argument("folder", type=Path)
        one.add_argument("extra")
        one.add_argument("settings", nargs="?", default="")
    args = parser.parse_args()
    if args.command == "build-one":
        print(json.dumps(build_one(args.folder, args.extra)))
    elif args.command == "search-one":
        print(json.dumps(search_one(args.folder, float(args.extra), args.settings)))
    elif args.command == "exact-one":
        print(json.dumps(exact_one(args.folder, float(args.extra))))
    elif args.command == "library-one":
        print(json.dumps(library_one(args.folder, args.extra)))
    elif args.command == "libraries":
        cmd_libraries(args)
    elif args.command == "scale":
        cmd_scale(args)
    elif args.command == "scifact":
        cmd_scifact(args)
    elif args.command == "qdrant":
        cmd_qdrant(args)
    else:
        from ann_page import render_page  # benchmarks/speed/ann_page.py

        render_page(RESULTS, args.out, f"{platform.machine()}, {os.cpu_count()} CPU cores")


if __name__ == "__main__":
    main()
