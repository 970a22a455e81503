"""benchmarks/results/ann.md from the records benchmarks/speed/ann_bench.py keeps in benchmarks/results/ann/*.json: every
number on the page is read from them (`python benchmarks/speed/ann_bench.py render --out benchmarks/results/ann.md`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def _read(folder: Path, name: str) -> dict:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _ci(score: dict) -> str:
    return f"{score['ndcg@10']:.2f} [{score['ndcg@10_low']:.2f}, {score['ndcg@10_high']:.2f}]"


def _mib(value: float) -> str:
    return f"{value / 1024:.2f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def _commands(records) -> list[str]:
    commands = list(dict.fromkeys(line for r in records for line in r["command"].splitlines()))
    return ["```", *commands, "```", ""]


def scifact_section(folder: Path) -> list[str]:
    record = _read(folder, "scifact").get("scifact")
    if not record:
        return []
    scores, recalls = record["scores"], record["recall@10_vs_exact"]
    exact = {"dense": scores["exact-dense"]["ndcg@10"], "hybrid": scores["exact-hybrid"]["ndcg@10"]}
    rows = []
    for name, score in sorted(scores.items(), key=lambda item: (not item[0].startswith("exact"), "hybrid" in item[0], item[0])):
        system = "hybrid" if "hybrid" in name else "dense"
        delta = "" if name.startswith("exact") else f"{score['ndcg@10'] - exact[system]:+.2f}"
        recall = f"{recalls[name]:.4f}" if name in recalls else ""
        rows.append(f"| {name} | {_ci(score)} | {delta} | {score['recall@100']:.2f} | {recall} | {record['load'].get(name, '')} |")
    built = [
        f"- `{spec}`: {b['kind']} with {', '.join(f'{k} {v}' for k, v in b['settings'].items())}; built in {b['build_seconds']:.1f} s"
        for spec, b in record["ann"].items()
    ]
    return [
        "## SciFact: what the approximate index and the candidate hybrid cost",
        "",
        f"Real vectors (INDEX: `sentune index --model default --corpus ../shared/data/retrieval/scifact/corpus.jsonl --out INDEX --fusion convex:0.5`): the default model (all-MiniLM-L6-v2) over SciFact's 5,183 abstracts; the {next(iter(scores.values()))['n_queries']} "
        "queries with judgements (qrels/train.tsv), searched with `sentune search --run` and scored by benchmarks/runners/score_trec_run.py "
        "(sentune's metrics, 95 % bootstrap interval over the queries). Hybrid: convex, α = 0.5. Recall@10: the share of exact dense "
        f"search's top 10 the approximate dense search returns. Measured {record['date']}.",
        "",
        *_commands([record]),
        "| run | nDCG@10 [95 % CI] | Δ against exact | Recall@100 | ANN recall@10 | load average (1, 5, 15 min) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "The approximate indexes as built:",
        "",
        *built,
        "",
        *(
            [
                f"Exact dense neighbours' cosine gaps on SciFact (as on the synthetic vectors below): 1st → 10th {record['contrast']['gap_1_10']:.4f}, "
                f"10th → 100th {record['contrast']['gap_10_100']:.4f}.",
                "",
            ]
            if "contrast" in record
            else []
        ),
        "`ann-…-hybrid` fuses each system's top `candidates` (default 100; `…-candidatesK` other depths) with the min-max formula of "
        "sentune/search/candidates.py; `exact-hybrid` normalises over all 5,183 documents. The runs ask for the top 100 and a "
        "system's candidates are never fewer than that, so `candidates30` is the default's 100.",
        "",
    ]


def qdrant_section(folder: Path) -> list[str]:
    record = _read(folder, "qdrant").get("scifact")
    if not record:
        return []
    scores, same = record["scores"], record["top10_overlap_with_sentune"]
    reference = {"dense": "exact-dense", "bm25": "exact-bm25", "hybrid": "exact-hybrid"}
    rows = []
    for name, score in sorted(scores.items()):
        kind = next((k for k in reference if k in name), "")
        delta = "" if name.startswith("exact") else f"{score['ndcg@10'] - scores[reference[kind]]['ndcg@10']:+.2f} against {reference[kind]}"
        overlap = f"{same[name]:.4f}" if name in same else ""
        seconds = f"{record['seconds'][name]:.0f}" if name in record["seconds"] else ""
        rows.append(f"| {name} | {_ci(score)} | {delta} | {overlap} | {seconds} | {record['load'].get(name, '')} |")
    return [
        "## Qdrant: the same index in a search engine",
        "",
        f"`sentune export-index INDEX --to qdrant --path DIR` (qdrant-client's local mode: Qdrant's API run in-process; "
        f"export {record['seconds']['export']:.0f} s), then the {record['queries']} queries through Qdrant "
        "(sentune.search.export_qdrant.QdrantSearch; prefetch depth 100 each for the hybrids). Overlap: the share of sentune's "
        "exact top 10 that Qdrant's top 10 holds. Seconds: the whole query set through local mode, one query at a time: local mode "
        "searches in Python, so these say nothing of a Qdrant server's speed. "
        f"Measured {record['date']}.",
        "",
        "What is exported and what the engine reproduces (sentune/search/export_qdrant.py): the dense vectors with cosine distance "
        "(local mode scores every point, as sentune's exact search; a server's HNSW would be approximate); BM25 as sparse vectors of "
        "sentune's own term weights divided by their IDF, under Qdrant's IDF modifier, whose IDF is Lucene's and bm25s's, so Qdrant's "
        "sparse score is sentune's BM25 score (tests/test_engine_export.py checks it to 1e-5); the fusion weight in the collection's "
        "metadata. Qdrant has no convex min-max fusion: `qdrant-hybrid-sentune-fusion` fuses Qdrant's two prefetched candidate lists "
        "with sentune's candidate formula on the client; `-rrf` and `-dbsf` are Qdrant's own fusions (its RRF scores 1 / (k + rank − 1)).",
        "",
        *_commands([record]),
        "| run | nDCG@10 [95 % CI] | Δ | top-10 overlap with sentune | seconds | load average |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _search_cells(s: dict) -> str:
    return (
        f"{_mib(s['loaded_rss_mib'])} / {_mib(s['rss_after_search_mib'])} | {s['recall@10']:.4f} | {s['single']['p50_ms']:.2f} / {s['single']['p99_ms']:.2f} | "
        f"{s['batch100']['p50_ms']:.0f} / {s['batch100']['p99_ms']:.0f} | {s['batch100']['queries_per_s']:.0f}"
    )


def scale_section(folder: Path) -> list[str]:
    kept = _read(folder, "scale")
    if not kept:
        return []
    rows, exact_rows = [], []
    for r in sorted(kept.values(), key=lambda r: (r["size"], r["spec"])):
        if r["spec"] == "exact":
            exact_rows.append(
                f"| {r['size']:,} | {r['single']['p50_ms']:.1f} | {r['single']['p99_ms']:.1f} | {r['single']['n']} | {r['batch100_s'] * 1000:.0f} | "
                f"{r['load_before']} → {r['load_after']} |"
            )
            continue
        b, s = r["build"], r.get("search", {})
        if "error" in b:
            rows.append(f"| {r['size']:,} | {r['spec']} | {b['error']} | | | | | | | | | |")
            continue
        settings = ", ".join(f"{k} {v}" for k, v in b["settings"].items())
        if not s or "error" in s:
            rows.append(
                f"| {r['size']:,} | {r['spec']} ({settings}) | {b['build_s']:.0f} ({b['build_cpu_s']:.0f}) | {_mib(b['peak_rss_mib'])} | {_mib(b['index_mib'])} | {s.get('error', '')} | | | | | | {b['load_before']} |"
            )
            continue
        rows.append(
            f"| {r['size']:,} | {r['spec']} ({settings}) | {b['build_s']:.0f} ({b['build_cpu_s']:.0f}) | {_mib(b['peak_rss_mib'])} | "
            f"{_mib(b['index_mib'])} | {_search_cells(s)} | {b['load_before']} → {b['load_after']} | {s['load_before']} → {s['load_after']} |"
        )
        for setting, swept in r.get("sweep", {}).items():
            if "error" not in swept:
                rows.append(f"| | … searched with {setting} | | | | {_search_cells(swept)} | | {swept['load_before']} → {swept['load_after']} |")
    contrasts = {r["size"]: r["contrast"] for r in kept.values() if "contrast" in r}
    contrast_rows = [f"| {size:,} | {c['gap_1_10']:.4f} | {c['gap_10_100']:.4f} |" for size, c in sorted(contrasts.items())]
    return [
        "## Scale: synthetic vectors",
        "",
        "**Synthetic vectors, not embeddings of text**: 384 dimensions (MiniLM's), 2,000 random unit centres, each vector a centre "
        "plus Gaussian noise of norm about 0.6, normalised (benchmarks/speed/search_speed.py's generator), written in chunks to a "
        "memory-mapped vectors.npy; 500 queries drawn the same way; recall@10 against their exact top 10 (brute force). The "
        "approximate index is built by sentune.search.ann.build_ann in a process of its own (build wall seconds, its CPU seconds "
        "in brackets, its peak resident memory, which counts the pages of vectors.npy it read), then loaded and searched by "
        "AnnIndex.nearest, the path `sentune search` takes, re-scoring included, in another process: its resident memory after "
        "loading the index / after the searches (the pages of vectors.npy the re-scoring read count too), latency one query at a "
        "time (p50 / p99 over the queries answered in 60 s) and a batch of 100 queries (p50 / p99 over 5 batches) and the "
        "batches' queries a second. FAISS used both cores (OpenMP).",
        "",
        *_commands(kept.values()),
        "| vectors | index (settings) | build s (CPU s) | build peak memory | index size | memory loaded / after search | recall@10 | "
        "one query p50 / p99 ms | batch of 100 p50 / p99 ms | queries/s batched | load average, build | load average, search |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "sentune's exact search (sentune.tasks.retrieval.rank over the memory-mapped vectors, as `sentune search --exact`; the "
        "vectors in the page cache after a first query):",
        "",
        "| vectors | one query p50 ms | p99 ms | queries | batch of 100 ms | load average |",
        "|---|---|---|---|---|---|",
        *exact_rows,
        "",
        "How far apart the synthetic queries' exact neighbours are (mean cosine gap between the 1st and the 10th, the 10th and the "
        "100th): each cluster's members are spread by isotropic noise, so the more vectors a cluster holds, the closer its "
        "neighbours' cosines, and the harder for 48-byte codes to order them:",
        "",
        "| vectors | cosine gap 1st → 10th | 10th → 100th |",
        "|---|---|---|",
        *contrast_rows,
        "",
    ]


def libraries_section(folder: Path) -> list[str]:
    kept = _read(folder, "libraries")
    if not kept:
        return []
    rows = [
        f"| {r['size']:,} | {r['library']} | {r['build_s']:.0f} ({r['build_cpu_s']:.0f}) | {r['recall@10']:.4f} | {r['single']['p50_ms']:.2f} / "
        f"{r['single']['p99_ms']:.2f} | {r['batch_queries_per_s']:.0f} | {_mib(r['peak_rss_mib'])} | {r['load_before']} → {r['load_after']} |"
        for r in sorted(kept.values(), key=lambda r: (r["size"], r["library"]))
        if "error" not in r
    ]
    return [
        "## The same HNSW graph in three libraries",
        "",
        "M 32, construction breadth 100, search breadth 128, over the synthetic vectors above held in memory; the library's own "
        "search, without sentune's re-scoring.",
        "",
        *_commands(kept.values()),
        "| vectors | library | build s (CPU s) | recall@10 | one query p50 / p99 ms | queries/s, all 500 at once | peak memory | load average |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _scale(kept: dict, size: int, spec: str) -> dict | None:
    record = kept.get(f"{size}:{spec}")
    return record if record and "error" not in record.get("build", {}) and "error" not in record.get("search", {}) else None


def findings(folder: Path) -> list[str]:
    """The page's summary, every number read from the records."""
    out = []
    scifact = _read(folder, "scifact").get("scifact")
    if scifact:
        sc, rc = scifact["scores"], scifact["recall@10_vs_exact"]
        exact_dense, exact_hybrid = sc["exact-dense"]["ndcg@10"], sc["exact-hybrid"]["ndcg@10"]
        parts = []
        for name in sorted(rc):
            kind = name.removeprefix("ann-").removesuffix("-dense")
            hybrid = sc.get(f"ann-{kind}-hybrid")
            parts.append(
                f"`{kind}`: recall@10 {rc[name]:.3f}, dense nDCG@10 {sc[name]['ndcg@10']:.2f} ({sc[name]['ndcg@10'] - exact_dense:+.2f})"
                + (f", candidate hybrid {hybrid['ndcg@10']:.2f} ({hybrid['ndcg@10'] - exact_hybrid:+.2f})" if hybrid else "")
            )
        deep = sc.get("ann-hnsw-hybrid-candidates1000")
        out.append(
            f"- **SciFact (real vectors)**: exact dense nDCG@10 {exact_dense:.2f}, exact hybrid {exact_hybrid:.2f}; " + "; ".join(parts) + ". "
            "With the HNSW the hybrid's cost is the candidate fusion's, not the ANN's (it finds almost all of exact search's top 10)"
            + (f"; 1,000 candidates a system bring it to {deep['ndcg@10']:.2f}" if deep else "")
            + ". IVF-PQ's loss here comes from the cells it does not probe (nprobe of nlist), not from its codes: re-scoring 4 or 10 "
            "times the documents asked gives the same top 10."
        )
    qdrant = _read(folder, "qdrant").get("scifact")
    if qdrant:
        sc, same = qdrant["scores"], qdrant["top10_overlap_with_sentune"]
        own = scifact["scores"].get("ann-hnsw-hybrid") if scifact else None
        mirror = f" (sentune's own candidate hybrid over the HNSW's candidates: {own['ndcg@10']:.2f})" if own else ""
        hybrids = ", ".join(
            f"{label} {sc[name]['ndcg@10']:.2f} ({sc[name]['ndcg@10'] - sc['exact-hybrid']['ndcg@10']:+.2f})"
            for name, label in (
                ("qdrant-hybrid-sentune-fusion", "sentune's formula on Qdrant's candidates"),
                ("qdrant-hybrid-dbsf", "Qdrant's DBSF"),
                ("qdrant-hybrid-rrf", "Qdrant's RRF (k 60)"),
            )
            if name in sc
        )
        out.append(
            f"- **Qdrant** reproduces sentune's dense ranking and its BM25 scores: top-10 overlap {same['qdrant-dense']:.3f} and {same['qdrant-bm25']:.3f}, "
            f"nDCG@10 {sc['qdrant-dense']['ndcg@10']:.2f} and {sc['qdrant-bm25']['ndcg@10']:.2f} against sentune's {sc['exact-dense']['ndcg@10']:.2f} and "
            f"{sc['exact-bm25']['ndcg@10']:.2f}. Not the convex min-max fusion over every document: against sentune's exact hybrid "
            f"({sc['exact-hybrid']['ndcg@10']:.2f}), {hybrids}{mirror}."
        )
    kept = _read(folder, "scale")
    small_h, small_q = _scale(kept, 100_000, "hnsw"), _scale(kept, 100_000, "ivfpq")
    big_h, big_q = _scale(kept, 1_000_000, "hnsw"), _scale(kept, 1_000_000, "ivfpq")
    huge_q = _scale(kept, 5_000_000, "ivfpq")
    if small_h and big_h:
        growth = big_h["build"]["build_cpu_s"] / small_h["build"]["build_cpu_s"]
        exponent = np.log(growth) / np.log(10)
        per_vector = big_h["build"]["index_mib"] / 1_000_000
        out.append(
            f"- **HNSW at 5M was not built**: from 100k to 1M its build CPU time grew ×{growth:.1f} ({small_h['build']['build_cpu_s']:.0f} → "
            f"{big_h['build']['build_cpu_s']:.0f} CPU s); at that rate 5M would take about {big_h['build']['build_cpu_s'] * 5**exponent / 3600:.1f} CPU hours "
            f"(an extrapolation, not a measurement), and its index, every vector in memory, {per_vector * 5_000_000 / 1024:.1f} GiB "
            f"({per_vector * 2**20:.0f} bytes a vector measured at 1M)."
        )
    if huge_q:
        b, s = huge_q["build"], huge_q["search"]
        swept = [(k, v) for k, v in huge_q.get("sweep", {}).items() if "error" not in v]
        best = max(swept, key=lambda item: item[1]["recall@10"]) if swept else None
        exact = kept.get("5000000:exact")
        out.append(
            f"- **IVF-PQ at 5M** ({', '.join(f'{k} {v}' for k, v in b['settings'].items())}): built in {b['build_s'] / 60:.0f} min "
            f"({b['build_cpu_s'] / 60:.0f} CPU min), index {_mib(b['index_mib'])} on disk and {_mib(s['loaded_rss_mib'])} loaded, the "
            f"{5_000_000 * 384 * 4 / 2**30:.1f} GiB of vectors left in the memory-mapped file; recall@10 {s['recall@10']:.3f}, one query p50 "
            f"{s['single']['p50_ms']:.1f} ms"
            + (f"; with {best[0]} recall@10 {best[1]['recall@10']:.3f}, p50 {best[1]['single']['p50_ms']:.1f} ms" if best else "")
            + (f". Exact search of one query over the 5M vectors: p50 {exact['single']['p50_ms'] / 1000:.1f} s" if exact else "")
            + "."
        )
    if big_h and huge_q:
        from sentune.search.ann import REFINE_BY_SIZE, REFINE_PAST

        steps = ", ".join(f"{refine} up to {below:,} documents" for below, refine in REFINE_BY_SIZE) + f", {REFINE_PAST} past that"
        evidence = [
            f"{size} {key}: {swept['recall@10']:.3f}"
            for size, record, key in (
                (f"{100_000:,}", small_q, "nprobe=64,refine=10"),
                (f"{1_000_000:,}", big_q, "nprobe=64,refine=50"),
                (f"{5_000_000:,}", huge_q, "refine=100"),
            )
            if (swept := (record or {}).get("sweep", {}).get(key)) and "error" not in swept
        ]
        out.append(
            f"- **Which**: `hnsw` while its index fits in memory ({big_h['build']['index_mib'] * 2**20 / 1_000_000:.0f} bytes a vector at 1M, "
            f"recall@10 {big_h['search']['recall@10']:.3f}, p50 {big_h['search']['single']['p50_ms']:.2f} ms there); `ivfpq` past that "
            f"({huge_q['build']['index_mib'] * 2**20 / 5_000_000:.0f} bytes a vector in memory at 5M, the vectors read from disk only for the "
            f"candidates it re-scores). Its `refine` grows with the collection ({steps}; chosen when the index is built, recorded in "
            f"INDEX/ann/ann.json, `--ann ivfpq:refine=N` or `sentune search --ann refine=N` overrides it): the smallest swept refine that "
            f"brought recall@10 near 1 at each size ({'; '.join(evidence)}), where refine {huge_q['build']['settings']['refine']} gave "
            f"{huge_q['search']['recall@10']:.3f} at 5M. Past that `refine` (and `pq`) are raised until recall is where the collection needs it: "
            "how far apart its neighbours are decides, as the synthetic and SciFact rows show."
        )
    if small_q and big_q:
        out.append(
            f"- On the synthetic vectors IVF-PQ's recall falls with size at fixed settings ({small_q['search']['recall@10']:.3f} at 100k, "
            f"{big_q['search']['recall@10']:.3f} at 1M with refine {big_q['build']['settings']['refine']}): their neighbours crowd together (the "
            "cosine-gap table), and 48-byte codes cannot order them; re-scoring more candidates from vectors.npy (`refine`) restores it "
            "(the swept rows). Real embeddings' neighbours are further apart (SciFact's gaps are far wider than the synthetic ones at 1M)."
        )
    libraries = _read(folder, "libraries")
    if libraries:
        text = ", ".join(
            f"{r['library']} {r['build_cpu_s']:.0f} CPU s to build, {r['single']['p50_ms']:.2f} ms a query"
            for r in sorted(libraries.values(), key=lambda r: r["library"])
        )
        out.append(
            f"- **Why FAISS**: the same HNSW graph at 100k (recall@10 1.0 in each): {text}; FAISS also has IVF-PQ, and sentune already uses it for exact search."
        )
    return (["## Findings", "", *out, ""]) if out else []


def documents_section(folder: Path) -> list[str]:
    kept = _read(folder, "documents")
    if not kept:
        return []
    rows = []
    for r in kept.values():
        latency = " | ".join(f"{r['latency'][s]['median_ms']:.0f}" for s in ("bm25", "dense", "hybrid"))
        rss = r["opened_rss_mib"]
        anon = f"{r['anon_after_queries_mib']:.0f}" if "anon_after_queries_mib" in r else "—"
        rows.append(
            f"| {r['documents']:,} | {r['label']} | {'yes' if r['offsets_file_before_open'] else 'no'} | {r['open_s']:.2f} | "
            f"{rss['VmRSS']:.1f} / {rss['RssAnon']:.1f} | {latency} | {r['rss_after_queries_mib']:.0f} / {anon} | {r['date']} | "
            f"{r['load']['open']} → {r['load']['hybrid'].split(' → ')[-1]} |"
        )
    return [
        "## Documents past memory: what opening an index costs a process",
        "",
        "**Synthetic documents, not text**: 6 to 14 words drawn (Zipf) from 30,000 made-up ones, random 384-dimensional vectors, "
        "built once (`index_documents.py build`, sentune.search.index.build_index) by the code before the documents moved to their file "
        "(OLD: `git archive 66a3c7d sentune | tar -x -C OLD`), which wrote no documents.offsets.npy / documents.order.npy. Each row is one process (`index_documents.py measure`): SearchIndex.open as `sentune search` opens the "
        "index (the resident memory it added: VmRSS / RssAnon, the process's own heap), then one query at a time with each system, "
        "exact search, the median of 5 after a first one that loads the model and BM25. `before`: the code that read every id and "
        "text into lists (and sorted every id for the tie-break on each query), run from an export of that commit on PYTHONPATH; "
        "`after-first-open`: this code on the same index, whose first open scanned documents.jsonl and wrote the two arrays; `after`: "
        "the next process, which maps them; `after-cosine-blocks`: an index of the same size built by this code (which writes the "
        "arrays when it builds: `python benchmarks/speed/index_documents.py build --out INDEX --documents 1000000`), searched by the "
        "code whose exact hybrid computes the cosines a block of documents at a time instead of normalising a copy of every vector "
        "for each query. After the queries: VmRSS (with the pages of the mapped vectors and BM25 files the queries read) / "
        "RssAnon (the process's own heap; not recorded for the first three rows). The machine was shared with other work (the load average before "
        "and after each row).",
        "",
        *_commands(
            [
                {
                    "command": f"PYTHONPATH=OLD python benchmarks/speed/index_documents.py build --out INDEX --documents {next(iter(kept.values()))['documents']}"
                },
                *kept.values(),
            ]
        ),
        "| documents | code | arrays on disk before open | open s | memory added by open MiB (VmRSS / RssAnon) | one query ms: bm25 | dense | hybrid "
        "| after the queries MiB (VmRSS / RssAnon) | date | load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def render_page(folder: Path, out: str | None, machine: str, notes: list[str] | None = None) -> None:
    import faiss

    lines = [
        "# Approximate dense search (`sentune index --ann`) and a search engine (`sentune export-index --to qdrant`)",
        "",
        f"Measured on {machine} (shared with other work: each timing carries the load average of the moment), faiss {faiss.__version__}. "
        "Rendered from benchmarks/results/ann/*.json by `python benchmarks/speed/ann_bench.py render --out benchmarks/results/ann.md`.",
        "",
        *(notes or []),
        *findings(folder),
        *scifact_section(folder),
        *qdrant_section(folder),
        *scale_section(folder),
        *documents_section(folder),
        *libraries_section(folder),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
