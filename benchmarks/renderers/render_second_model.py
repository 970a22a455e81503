"""Render benchmarks/results/second_model.md (issue 47: every command a user runs, on a second model family,
sentence-transformers/all-mpnet-base-v2) from the kept results of benchmarks/runners/second_model.sh: the untuned
poolings on the 7 STS tasks, the model's own pipeline beside sentence-transformers' encode and the ONNX graphs, encoding
speed, transfer, retrieval, whitening, training every registered method, adapt, index and search. A step that has not
run is listed as not measured, never filled in; every number comes from a kept file."""

from __future__ import annotations

import json
from pathlib import Path

from sentune.analysis.pages import KeptRuns, machine_conditions, markdown_table, render_kept_page, sts7_average
from sentune.core.metrics import ranking_metrics
from sentune.data.catalog import group_tasks

STS7 = group_tasks("sts")
ADAPT = "adapt/second-model-mrpc/results.json"  # beside the kept runs (benchmarks/results/adapt), as adapt_experiments.sh keeps them
SMALL_TRANSFER = "baselines-transfer-fast"  # the default model's transfer run (benchmarks/runners/baselines.sh)
SMALL_ADAPTED = "adapt/scifact/results.json"  # the default model's adapt run on SciFact: its test queries are a set scored below
SMALL_ROWS = {"unchanged": "unchanged", "bm25": "BM25", "hybrid": "hybrid (BM25 + the model, weight chosen by adapt)"}
# Published cosine Spearman ×100 of all-mpnet-base-v2 on MTEB's STS12-16 (each task's test pairs in one correlation,
# as sentune's 'all'), as a model card's comparison table lists them: a check that the model here is the published one.
PUBLISHED = {"STS12": 72.6, "STS13": 83.5, "STS14": 78.0, "STS15": 85.7, "STS16": 80.0}
PUBLISHED_SOURCE = "https://huggingface.co/jinaai/jina-embedding-s-en-v1/commit/219b92e2324e8c2361d13d35ad7feee28c8c0b00 (README: all-minilm-l6-v2, all-mpnet-base-v2 and others on MTEB)"
ENGINES = ("sentune PyTorch fp32", "sentune ONNX fp32", "sentune ONNX int8")  # speed_eval.py's names
TOLERANCE = 0.01  # the issue's bound on the model's own pipeline against sentence-transformers' encode, per task


def spearman(run: dict, task: str) -> str:
    return f"{run['tasks'][task]['all']['spearman']:.2f}" if task in run["tasks"] else "–"


def poolings(kept: KeptRuns) -> list[str]:
    result = kept.get("second-model-sts")
    out = ["## Untuned poolings, 7 STS tasks (Spearman ×100, all pairs of a task in one correlation)", ""]
    if not result:
        return out + ["Not measured yet.", ""]
    rows = [[pooling, *(spearman(run, t) for t in STS7), f"{sts7_average(run):.2f}"] for pooling, run in result["runs"].items()]
    rows.append(["published (MTEB)", *(f"{PUBLISHED[t]:.2f}" if t in PUBLISHED else "–" for t in STS7), "–"])
    return out + [
        "'model' is the model's own pipeline (its modules: mean pooling and Normalize); the others pool its last layers "
        f"as sentune's poolings do. The published row: {PUBLISHED_SOURCE}.",
        "",
        *markdown_table(["pooling", *STS7, "avg (7)"], rows),
        "",
    ]


def pipeline_versus_sentence_transformers(kept: KeptRuns) -> list[str]:
    """Per task: SentenceTransformer.encode's score, and each sentune engine's with its difference from it."""
    result = kept.get("second-model-speed")
    out = ["## The model's own pipeline: sentune beside sentence-transformers' encode, and the ONNX graphs", ""]
    if not result:
        return out + ["Not measured yet.", ""]
    scores = result["scores"]
    naive = scores["naive"]
    rows = [[task, f"{naive[task]:.4f}", *(f"{scores[e][task]:.4f} ({scores[e][task] - naive[task]:+.4f})" for e in ENGINES)] for task in naive]
    worst = {e: max(abs(scores[e][t] - naive[t]) for t in naive) for e in ENGINES}
    within = "within" if worst[ENGINES[0]] <= TOLERANCE else "NOT within"
    return out + [
        f"`{result['meta']['command']}` ({result['meta']['date']}): each task's 'all' Spearman ×100 with "
        "`SentenceTransformer.encode` (its defaults) and through each of sentune's engines, the difference in brackets.",
        "",
        *markdown_table(["task", "sentence-transformers encode", *ENGINES], rows),
        "",
        f"Largest difference from sentence-transformers on one task: {', '.join(f'{e} {worst[e]:.4f}' for e in ENGINES)}; "
        f"sentune's PyTorch pipeline is {within} {TOLERANCE} of it on every task.",
        "",
    ]


def speed(kept: KeptRuns) -> list[str]:
    result = kept.get("second-model-speed", optional=True)
    if not result:
        return []
    rate, seconds = result["sentences_per_second"], result["eval_seconds"]
    base = rate["sentence-transformers"]
    rows = [["sentence-transformers encode", f"{base:.1f}", "1.00", f"{seconds['naive']:.0f}"]]
    rows += [[e, f"{rate[e]:.1f}", f"{rate[e] / base:.2f}", f"{seconds[e]:.0f}"] for e in rate if e != "sentence-transformers"]
    return [
        "## Encoding speed",
        "",
        f"{result['encoded_sentences']} of the {result['unique_sentences']} unique sentences of the 7 tasks, {result['threads']} torch threads, median of "
        f"{result['repeats']} run(s); the whole evaluation's seconds beside (benchmarks/results/second_model_speed.md has the page).",
        "",
        *markdown_table(["engine", "sentences/s", "ratio", "7-task evaluation (s)"], rows),
        "",
    ]


def transfer(kept: KeptRuns) -> list[str]:
    """SentEval's transfer tasks (fast preset) for the model's pipeline, beside the default model's (baselines.sh)."""
    from sentune.core.results import transfer_table

    result = kept.get("second-model-transfer")
    if not result:
        return []
    runs = {"all-mpnet-base-v2": result["runs"]["model"]}
    small = kept.get(SMALL_TRANSFER, optional=True)
    if small:
        runs["all-MiniLM-L6-v2 (benchmarks/results/baselines.md)"] = small["runs"]["model"]
    return [
        "## SentEval transfer (`sentune eval --tasks transfer --preset fast`)",
        "",
        "Accuracy ×100 of a logistic regression on the frozen vectors of the model's own pipeline (SentEval's fast preset), "
        "beside the default model's under the same command.",
        "",
        transfer_table(runs) or "",
        "",
    ]


def other_commands(kept: KeptRuns) -> list[str]:
    """One row per command of second_model.sh beyond the evaluation above: what it produced, or not measured yet."""
    rows = []
    retrieval = kept.get("second-model-retrieval")
    if retrieval:
        names = {m.name for m in ranking_metrics()}
        for task, r in retrieval["runs"]["model"]["tasks"].items():
            cells = ", ".join(f"{k} {v:.2f}" for k, v in r.items() if k in names)
            rows.append(["`sentune eval --tasks retrieval`", f"{task} ({r['n_queries']} queries, {r['n_documents']} documents): {cells}"])
    untuned = kept.get("second-model-sts", optional=True)
    base = f" (the untuned model: {sts7_average(untuned['runs']['model']):.2f})" if untuned else ""
    for rel, command in (
        ("second-model-whitened", "`sentune whiten --fit-on nli`, then `sentune eval`"),
        ("second-model-onnx", "`sentune export --quantize int8 --keep-fp32 ffn-output`, then `sentune eval --backend onnx`"),
    ):
        result = kept.get(rel)
        if result:
            rows.append([command, f"7-task average {sts7_average(result['runs']['model']):.2f}{base}"])
    trained = kept.root / "second-model-train" / "pytest.txt"
    if trained.is_file():
        last = [line for line in trained.read_text().splitlines() if line.strip()][-1]
        rows.append(["every registered method, a few steps (`tests/test_registry.py -k second_model_dir`)", last.strip("= ")])
    else:
        kept.missing.append("second-model-train")
    if not rows:
        return []
    return ["## Every other command", "", *markdown_table(["command", "result"], rows), ""]


def interval(r: dict) -> str:
    return f"{r['ndcg@10']:.2f} [{r['ndcg@10_low']:.2f}, {r['ndcg@10_high']:.2f}]"


def search(kept: KeptRuns) -> list[str]:
    """`sentune search`'s run files on SciFact, scored over the judged queries and over the adapt example's test
    queries, beside what `sentune adapt` measured there for the default model (all-MiniLM-L6-v2)."""
    result = kept.get("second-model-search")
    if not result:
        return []
    sets = result["sets"]
    names = list(sets)
    header = ["system", *(f"{name}: nDCG@10 [95 % CI] ({next(iter(sets[name].values()))['n_queries']} queries)" for name in names), f"{names[0]}: R@100"]
    rows = [
        [f"all-mpnet-base-v2, `--system {system}`", *(interval(sets[name][system]) for name in names), f"{r['recall@100']:.2f}"]
        for system, r in sets[names[0]].items()
    ]
    small = kept.root.parent / SMALL_ADAPTED
    example = next((name for name in names if name.endswith("example test")), None)
    if example and small.is_file():
        candidates = json.loads(small.read_text())["candidates"]
        for name, label in SMALL_ROWS.items():
            test = candidates[name]["test"]
            cells = ["–"] * len(names)
            cells[names.index(example)] = f"{test['score']:.2f} [{test['low']:.2f}, {test['high']:.2f}]"
            chosen = " (chosen)" if candidates[name].get("chosen") else ""
            rows.append([f"all-MiniLM-L6-v2, `sentune adapt --example scifact`: {label}{chosen}", *cells, "–"])
    evaluated = kept.get("second-model-retrieval", optional=True)
    dense = sets[names[0]].get("dense")
    check = []
    if evaluated and dense and names[0] in evaluated["runs"]["model"]["tasks"]:
        score = evaluated["runs"]["model"]["tasks"][names[0]]["ndcg@10"]
        same = "equal" if f"{score:.2f}" == f"{dense['ndcg@10']:.2f}" else "NOT equal"
        check = [
            f"`sentune eval --tasks retrieval` scored {names[0]} at nDCG@10 {score:.2f}; the dense run file {dense['ndcg@10']:.2f} ({same} to two decimals).",
            "",
        ]
    return [
        "## Search on SciFact: `sentune index`, then `sentune search --run`, each run file scored",
        "",
        "The runner's index step: `sentune index --model benchmarks/runs/second-model/model --corpus $SENTUNE_DATA/retrieval/scifact/corpus.jsonl "
        "--out benchmarks/runs/second-model/index --fusion convex:0.5 --quiet`, then for each SYSTEM of dense, bm25 and hybrid `sentune search "
        "benchmarks/runs/second-model/index --system SYSTEM --queries $SENTUNE_DATA/retrieval/scifact/queries.jsonl --top 100 "
        "--run benchmarks/runs/second-model/search/SYSTEM.tsv --quiet`, then",
        "",
        f"`{result['meta']['command']}` ({result['meta']['date']}): each ranking of one index (the hybrid "
        "convex, 0.5 on min-max normalised cosine and BM25 scores), the top 100 of the whole corpus for every query; intervals: "
        "bootstrap over the queries. The adapt example's test queries are a subset of the queries searched; the rows of "
        "all-MiniLM-L6-v2 are its adapt run's test scores on the same queries (benchmarks/results/retrieval.md).",
        "",
        *markdown_table(header, rows),
        "",
        *check,
    ]


def adapt(kept: KeptRuns) -> list[str]:
    from sentune.adaptation.report import candidate_table

    out = ["## `sentune adapt` on the mrpc example", ""]
    path = kept.root.parent / ADAPT
    if not path.is_file():
        kept.missing.append("adapt/second-model-mrpc")
        return out + ["Not measured yet.", ""]
    results = json.loads(path.read_text())
    meta = results["meta"]
    return out + [
        f"`{meta['command']}` ({meta['date']}).",
        "",
        f"**Choice: `{results['choice']['name']}`** — {results['choice']['reason']}.",
        "",
        candidate_table(results),
        "",
    ]


CONDITIONS = "second_model_conditions.md"  # beside the page, written by whoever ran the steps: which ran alone, which side by side


def sections(kept: KeptRuns, out: Path) -> list[str]:
    conditions = [line for text in machine_conditions(kept.root.parent / CONDITIONS) for line in (text, "")]
    return (
        conditions
        + poolings(kept)
        + pipeline_versus_sentence_transformers(kept)
        + speed(kept)
        + transfer(kept)
        + other_commands(kept)
        + search(kept)
        + adapt(kept)
    )


def main() -> None:
    render_kept_page(
        __doc__,
        "benchmarks/results/second_model.md",
        "A second model family: sentence-transformers/all-mpnet-base-v2 (MPNet, 12 layers, d 768, no token type ids)",
        "benchmarks/runners/second_model.sh",
        sections,
        "benchmarks/runners/second_model.sh",
        lambda kept: ", the model assembled from PyPI by `bash ../shared/tools/second-model.sh`.",
    )


if __name__ == "__main__":
    main()
