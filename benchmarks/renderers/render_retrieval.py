"""Render benchmarks/results/retrieval.md from the kept results of `EXAMPLES="scifact quora" bash
benchmarks/runners/adapt_experiments.sh` (benchmarks/results/adapt/NAME/results.json): `sentune adapt` on documents and queries
(issues 23, 45), every candidate's nDCG@10 on the selection, confirmation and test queries with its interval, the choice,
the minutes, what search users would run instead beside them (BM25 stemmed and unstemmed, reciprocal rank fusion,
sentence-transformers' SimCSE when run), the hybrid's weight curve, the index's time and memory
(benchmarks/speed/index_speed.py: benchmarks/results/index_speed.json), BM25 fitted to the domain and MaxP against
the fixed BM25 and the first window (benchmarks/speed/bm25_fit_maxp.py: benchmarks/results/bm25_fit_maxp-NAME.json),
and the memory of each domain run again with
--low-memory (LOW_MEMORY=1, benchmarks/results/adapt/NAME-low-memory). A domain whose run has not finished is listed as
missing, never filled in."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from render_adapt import KEPT, LABEL_FREE, domain_section, supervised_cell, test_versus  # noqa: E402  (benchmarks/renderers/render_adapt.py)

from sentune.adaptation.examples import example_names
from sentune.adaptation.names import BM25, BM25_FITTED, BM25_UNSTEMMED, HYBRID, QUERY_SIDE, REFERENCE, RRF, SEARCH_OPT_IN, SUPERVISED, TRAINED, UNCHANGED
from sentune.analysis.pages import machine_conditions
from sentune.tasks.permutation import LEVEL


def candidate_minutes(results: dict) -> float:
    """The candidates' minutes without the baselines (BM25, RRF, st-simcse: reported, never chosen)."""
    return sum(c["seconds"] for c in results["candidates"].values() if c["kind"] != "baseline") / 60


def _difference(row: dict | None, key: str) -> str:
    if not row or key not in row:
        return "—"
    v = row[key]
    return f"{v['candidate'] - v['baseline']:+.2f} [{v['difference_low']:+.2f}, {v['difference_high']:+.2f}]"


def summary_row(name: str, results: dict, label_free: dict | None = None) -> list[str]:
    """`label_free`: the same domain's run before the supervised candidates (its choice's test score, its minutes)."""
    c = results["candidates"]
    earlier = label_free["choice"]["name"] if label_free else None
    chosen, confirmation = results["choice"]["name"], results["choice"].get("confirmation")
    test = lambda n: f"{c[n]['test']['score']:.2f}" if n in c and c[n].get("test") else "—"  # noqa: E731
    return [
        name,
        test(UNCHANGED),
        test(BM25),
        test(BM25_UNSTEMMED),
        test(RRF),
        test(HYBRID),
        f"`{chosen}`",
        test(chosen),
        test_versus(results),
        _difference(c[chosen].get("test"), "vs_bm25"),
        f"{confirmation['p_value']:.3f} ({results['choice']['best_on_selection']})" if confirmation else "—",
        supervised_cell(results),
        test(REFERENCE),
        f"{candidate_minutes(results):.0f}",
        f"`{earlier}` {label_free['candidates'][earlier]['test']['score']:.2f}" if earlier else "—",
        f"{candidate_minutes(label_free):.0f}" if label_free else "—",
    ]


def hybrid_lines(name: str, results: dict) -> list[str]:
    """The weight the hybrid chose and its curve on the selection queries (each ranked against the whole corpus)."""
    lines = []
    for cname, c in results["candidates"].items():
        if c["kind"] != "hybrid" or not c.get("alpha_curve"):
            continue
        curve = ", ".join(f"{a:g}: {v:.2f}" for a, v in c["alpha_curve"])
        lines += [
            f"- {name}, `{cname}` (BM25 + `{c['source']}`): {c['setting']}; nDCG@10 of the {len(c['weight_read_queries'])} selection queries, "
            f"whole corpus, by α (1 = the dense model alone, 0 = BM25 alone): {curve}.",
        ]
    return lines


INDEX_SPEED = KEPT.parent / "index_speed.json"


FIT_AND_PASSAGES = KEPT.parent / "bm25_fit_maxp-{name}.json"  # benchmarks/speed/bm25_fit_maxp.py
SYSTEMS = {
    "bm25 fixed": "BM25, fixed (k1 1.5, b 0.75, title once)",
    "bm25 fitted": "BM25, fitted on the selection queries",
    "dense first": "unchanged model, first window",
    "dense maxp": "unchanged model, MaxP",
}


def fit_and_passages_lines(name: str) -> list[str]:
    """The section of benchmarks/speed/bm25_fit_maxp.py's results for one example (none when it has not run)."""
    path = Path(str(FIT_AND_PASSAGES).format(name=name))
    if not path.is_file():
        return []
    found = json.loads(path.read_text())
    fit, q, ndcg = found["bm25_fit"], found["queries"], found["ndcg@10"]
    chosen = f"hybrid: dense {'maxp' if found['maxp_chosen_on_selection'] else 'first'} + bm25 fitted"
    lines = [
        "",
        f"## BM25 fitted to the domain, long documents as passages: {name}",
        "",
        f"Measured {found['started']} to {found['finished']} (sentune {found['sentune']}, {found['torch_threads']} torch threads, 2 CPU cores) by "
        f"`{found['command']}`. The example's queries split as `sentune adapt --example {name}` splits them "
        f"({q['selection']} selection, {q['confirmation']} confirmation, {q['test']} test), every query ranked against the whole corpus of "
        f"{found['documents']:,} documents (the adapt runs above rank the selection queries against a pool, so their selection scores may differ). "
        "Every choice read the selection "
        "queries alone: BM25's settings, MaxP or the first window, each hybrid's weight (α on the dense scores, from 0, 0.05, ..., 1). nDCG@10 ×100:",
        "",
        "| system | selection | confirmation | test |",
        "|---|---|---|---|",
    ]
    for key, values in ndcg.items():
        label = SYSTEMS.get(key) or f"{key} (α = {found['hybrid_weights'][key]:g})"
        lines.append(f"| {label} | {values['selection']:.2f} | {values['confirmation']:.2f} | {values['test']:.2f} |")
    grid = fit["grid"]
    lines += [
        "",
        f"BM25's fit: {fit['chosen']} (selection {fit['chosen_score']:.2f}, the fixed settings {fit['fixed_score']:.2f}), from "
        f"{len(grid)} grid points (k1 {', '.join(f'{v:g}' for v in sorted({g[0] for g in grid}))}; b {', '.join(f'{v:g}' for v in sorted({g[1] for g in grid}))}; "
        f"title counted {', '.join(str(v) for v in sorted({g[2] for g in grid}))} times) over the {fit['read_queries']} selection queries.",
        "",
        f"Passages: windows of {found['window']} tokens (the model's max_seq_length less its special tokens) every {found['stride']}; "
        f"{found['longer_than_the_model_reads']:,} of the {found['documents']:,} documents are longer than the model reads, and make "
        f"{found['later_windows']:,} later windows. The selection queries {'favour MaxP' if found['maxp_chosen_on_selection'] else 'favour the first window'}, "
        f"so adapt's `hybrid` fuses `{chosen}` (test {ndcg[chosen]['test']:.2f}), where the first window with the fixed BM25 "
        f"(`hybrid: dense first + bm25 fixed`) gives {ndcg['hybrid: dense first + bm25 fixed']['test']:.2f}.",
        "",
        "Test differences (paired bootstrap over the test queries, 95 % interval): "
        + "; ".join(f"{k}: {v[0]:+.2f} [{v[1]:+.2f}, {v[2]:+.2f}]" for k, v in found["test_differences"].items())
        + ".",
        "",
        "Costs: "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in found["seconds"].items())
        + f"; peak resident memory of the process {found['peak_resident_mib']:.0f} MiB "
        f"(model, every vector, both BM25 indexes). `uptime` at the start: `{found['uptime_before']}`; at the end: `{found['uptime_after']}`.",
    ]
    lines += [line for text in machine_conditions(path.with_name(f"bm25_fit_maxp-{name}_conditions.md")) for line in ("", text)]
    checked = path.with_name(f"bm25_fit_maxp-{name}-index.json")
    if checked.is_file():
        index = json.loads(checked.read_text())
        searched = "; ".join(f"`--system {r['system']}` {r['search_ndcg10']:.4f} (`{r['as']}` above: {r['benchmark_ndcg10']:.4f})" for r in index["systems"])
        lines += [
            "",
            f"`sentune search` ranks the same way ({index['date']}, sentune {index['sentune']}, `{index['command']}`): an index built from the vectors "
            f"above with the settings chosen on the selection queries ({index['index']['lexical']}; passages {index['index']['passages']}; "
            f"fusion {index['index']['fusion']}), its test nDCG@10 over the {index['test_queries']} test queries: {searched}.",
        ]
    return lines


def index_lines() -> list[str]:
    if not INDEX_SPEED.is_file():
        return ["", "## `sentune index` and `sentune search`", "", "Not yet measured: `python benchmarks/speed/index_speed.py`."]
    found = json.loads(INDEX_SPEED.read_text())
    index, lines = found["index"], ["", "## `sentune index` and `sentune search`", ""]
    lines += [
        f"Measured {found['date']} (sentune {found['commit']}, {found['cpu_count']} CPU cores) by `python benchmarks/speed/index_speed.py`: each "
        "command a process of its own under `/usr/bin/time -v` (wall time and peak resident memory, model loading included).",
        "",
        "| command | what | wall (s) | peak resident memory (MiB) |",
        "|---|---|---|---|",
        f"| `{index['command']}` | {index['documents']:,} abstracts: vectors, BM25, {index['bytes'] / 2**20:.1f} MiB on disk | "
        f"{index['wall_seconds']:.1f} | {index['peak_resident_kib'] / 1024:.0f} |",
    ]
    if "search" in found:
        search = found["search"]
        lines.append(
            f"| `{search['command']}` | {search['queries']} queries, top 100, TREC run file | {search['wall_seconds']:.1f} | {search['peak_resident_kib'] / 1024:.0f} |"
        )
    lines += [line for text in machine_conditions(INDEX_SPEED.with_name("index_speed_conditions.md")) for line in ("", text)]
    if "adapt_search" in found:
        a = found["adapt_search"]
        lines += [
            "",
            f"`sentune search` on the scifact adapt run's output ranks as the run scored its chosen system (`{a['chosen']}`"
            + (f"; checked {a['date']}, sentune {a['commit']}" if "date" in a else "")
            + "): "
            f"`{a['command']}`, then nDCG@10 of the run file over the {a['queries']} test queries: {a['search_ndcg10']:.4f}; the run's "
            f"reported test score: {a['reported_ndcg10']:.4f}.",
        ]
    return lines


def _peak(results: dict) -> str:
    usage = results["meta"].get("process", {})  # the last invocation's: a resumed run's earlier parts are not in it
    return f"{usage['peak_resident_mib'] / 1024:.2f}" if "peak_resident_mib" in usage else "—"


def _test_scores(results: dict) -> dict[str, float]:
    return {n: c["test"]["score"] for n, c in results["candidates"].items() if c.get("test") and c["kind"] != "baseline"}


def low_memory_section(found: dict[str, dict]) -> list[str]:
    """Each domain run again with --low-memory and no --reference (LOW_MEMORY=1 in the runner): its peak resident
    memory, its minutes, and whether it scored its candidates as the run without --low-memory did (gradient
    checkpointing recomputes the same activations, so it should: the largest difference is printed, not assumed)."""
    variants = {n: json.loads((KEPT / f"{n}-low-memory" / "results.json").read_text()) for n in found if (KEPT / f"{n}-low-memory" / "results.json").is_file()}
    if not variants:
        return []
    lines = [
        "",
        "## Memory: the same domains with `--low-memory`",
        "",
        'Run by `LOW_MEMORY=1 EXAMPLES="NAME" bash benchmarks/runners/adapt_experiments.sh` (each command and date below): every '
        "candidate trained with gradient checkpointing, and no `--reference` (sentence-transformers' recipe trains at batch 64 × "
        "256 tokens; `python benchmarks/speed/training_memory.py` measures it alone, with and without checkpointing). Peak resident memory is the "
        "whole process's (`ru_maxrss`) in its last invocation; the evaluation alone: benchmarks/results/retrieval_eval.md.",
        "",
        "| domain | run | peak resident memory (GiB) | candidate minutes | chosen | chosen's test score | test scores against the run above |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, low in variants.items():
        full = found[name]
        before, after = _test_scores(full), _test_scores(low)
        shared = sorted(set(before) & set(after))
        gap = max((abs(before[n] - after[n]) for n in shared), default=float("nan"))
        for label, results, versus in (
            ("the run above", full, "—"),
            ("`--low-memory`", low, f"{len(shared)} candidates scored by both; largest difference {gap:.2f}"),
        ):
            chosen = results["choice"]["name"]
            lines.append(
                f"| {name} | {label} | {_peak(results)} | {candidate_minutes(results):.0f} | `{chosen}` | {results['candidates'][chosen]['test']['score']:.2f} | {versus} |"
            )
    for name, low in variants.items():
        lines += [
            "",
            f"{name} with `--low-memory` ({low['meta']['date']}): `{low['meta'].get('command', '?')}`; every candidate: "
            f"[adapt/{name}-low-memory/results.md](adapt/{name}-low-memory/results.md).",
        ]
        lines += peaks_by_candidate(low)
        lines += [line for text in machine_conditions(KEPT / f"{name}-low-memory" / "conditions.md") for line in ("", text)]
    return lines


def peaks_by_candidate(results: dict) -> list[str]:
    """The process's peak so far as each candidate's record was written (runs from 0563acb on): ordered by that peak,
    which only grows, it places the run's peak between two records."""
    peaks = {n: c["peak_memory_mib"] for n, c in results["candidates"].items() if c.get("peak_memory_mib") is not None}
    if not peaks:
        return []
    ordered = sorted(peaks.items(), key=lambda item: item[1])
    listed = ", ".join(f"{n} {mib / 1024:.2f}" for n, mib in ordered)
    return ["", f"Peak resident memory so far (GiB) when each candidate's record was written, lowest first: {listed}."]


RETRIEVAL_NATIVE_KEPT = KEPT / "retrieval-native"  # runs of the retrieval-native candidates beside the hybrid (NAME/results.json)


def retrieval_native_section(names: list[str]) -> list[str]:
    """The candidates trained on pseudo-queries from the documents (sentune.adaptation.candidates.retrieval_native), each
    domain's runs kept under benchmarks/results/adapt/retrieval-native/NAME (and NAME-VARIANT: a later run of some of
    them): what each trained on and what it cost, then the domain's table as the runs above print theirs."""
    kept = sorted(p for p in RETRIEVAL_NATIVE_KEPT.glob("*/results.json") if any(p.parent.name == n or p.parent.name.startswith(f"{n}-") for n in names))
    found = {p.parent.name: json.loads(p.read_text()) for p in kept}
    if not found:
        return []
    lines = [
        "",
        "## Retrieval-native candidates: pseudo-queries from the documents",
        "",
        "`ict` (Inverse Cloze Task) and `crop` (independent cropping) train MultipleNegativesRankingLoss on pseudo-queries built from the "
        "documents (sentune/adaptation/pseudo_queries.py states the rule), each with BM25's and the unchanged model's best-ranked other document as "
        "hard negatives; `hybrid-distill` trains MarginMSE on ICT pseudo-queries with `hybrid`'s fused score as the teacher, against their passage "
        "(the document without the query sentence, standing in for its document when the teacher scores the corpus) or, in the runs before that, "
        "against their whole document (the teacher column says which). Each is one training of the recipe's steps (sentune/recipes/adapt/NAME.yaml), no evaluation while it trains, then scored, "
        "chosen and confirmed as every candidate. Minutes: the whole candidate (building and mining its pseudo-queries, training, encoding every "
        "dev and test text); training: the trainer's own. Tokens read: how much of each text the trained model reads when it is scored; the runs "
        "before sentune 6978d56 scored it at its training rows' length (128 tokens: a SciFact abstract by its first 128, where the unchanged "
        "model reads 256), those since at the unchanged model's.",
        "",
        "| domain | candidate | pseudo-queries (documents) | steps × batch | tokens read | training minutes | minutes | teacher |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, results in found.items():
        for cname, c in results["candidates"].items():
            if c["kind"] != "retrieval-native" or c.get("skipped"):
                continue
            training = c["recipe"]["training"]
            lines.append(
                f"| {name} | `{cname}` | {c['pseudo_queries']:,} ({c['pseudo_query_documents']:,}) | {training['max_steps']} × {training['batch_size']} | "
                f"{c.get('reads_tokens', training['max_seq_length'])} | {c['training_seconds'] / 60:.1f} | {c['seconds'] / 60:.1f} | {c.get('teacher', '—')}"
                + (f"; margins × {c['teacher_scale']:.3f} (teacher_scale)" if "teacher_scale" in c else "")
                + ("" if "teacher" not in c else f"; taught on the {'passage' if c.get('teacher_positive') == 'passage' else 'whole document'}")
                + " |"
            )
    for name, results in found.items():
        lines += domain_section(f"{name}: retrieval-native candidates", results, f"retrieval-native/{name}")
    return lines + gpu_scale_section()


def gpu_scale_section() -> list[str]:
    """The retrieval-native candidates trained for --budget's thousand steps on a GPU: the records a run wrote before
    its time limit (a run stopped early has no test scores; its conditions.md says where it stopped), kept under
    benchmarks/results/adapt/retrieval-native/gpu/NAME: candidates/CANDIDATE.json, machine.txt, gpu_usage.csv."""
    lines = []
    for folder in sorted(p for p in (RETRIEVAL_NATIVE_KEPT / "gpu").glob("*") if (p / "candidates").is_dir()):
        records = {p.stem: json.loads(p.read_text()) for p in sorted((folder / "candidates").glob("*.json"))}
        base = records.get(UNCHANGED)
        if base is None:
            continue
        busy = [
            float(row.split(",")[2].strip(" %\n")) for row in (folder / "gpu_usage.csv").read_text().splitlines() if int(row.split(",")[1].split()[0]) > 1000
        ]
        lines += [
            "",
            f"### {folder.name}: at GPL's scale on a GPU (benchmarks/results/adapt/retrieval-native/gpu/{folder.name}: conditions.md has the command)",
            "",
            f"{(folder / 'machine.txt').read_text().splitlines()[1]}; the run ended at its time limit, so the candidates below have a selection score and no "
            f"confirmation or test score. While a model was on the GPU, nvidia-smi read it busy {sum(busy) / len(busy):.0f} % of the time on average "
            f"({len(busy)} readings).",
            "",
            "| candidate | pseudo-queries (documents) | steps × batch | training minutes | minutes | selection nDCG@10 | − unchanged |",
            "|---|---|---|---|---|---|---|",
            f"| `{UNCHANGED}` | — | — | — | — | {base['dev_score']:.2f} | — |",
        ]
        for name, c in records.items():
            if c["kind"] != "retrieval-native":
                continue
            training = c["recipe"]["training"]
            lines.append(
                f"| `{name}` | {c['pseudo_queries']:,} ({c['pseudo_query_documents']:,}) | {training['max_steps']} × {training['batch_size']} | "
                f"{c['training_seconds'] / 60:.1f} | {c['seconds'] / 60:.1f} | {c['dev_score']:.2f} | {c['dev_score'] - base['dev_score']:+.2f} |"
            )
    return lines


SEARCH_CANDIDATES_KEPT = KEPT / "search-candidates"  # benchmarks/runners/search_candidates.sh: NAME-one-model, NAME-two-models
FROM_WHAT_THE_USER_HAS = (UNCHANGED, BM25_FITTED, RRF, HYBRID, "prf", "multi-dense")


def search_candidates_section(names: list[str]) -> list[str]:
    """Issue 72's search candidates from what a user has, as `bash benchmarks/runners/search_candidates.sh` runs them
    (each example twice in one folder: the default model alone, then with a second model, which adds `multi-dense`):
    their scores and minutes beside the hybrid's, then each run's table."""
    found = {
        f"{name}-{tag}": json.loads((SEARCH_CANDIDATES_KEPT / f"{name}-{tag}" / "results.json").read_text())
        for name in names
        for tag in ("one-model", "two-models")
        if (SEARCH_CANDIDATES_KEPT / f"{name}-{tag}" / "results.json").is_file()
    }
    if not found:
        return []
    lines = [
        "",
        "## Search candidates from what the user has: pseudo-relevance feedback and several dense models",
        "",
        "`prf` moves each dense query toward its first results (Rocchio) and expands BM25's query with terms of its first "
        "results (RM3), then fuses the two as the hybrid does; `multi-dense` fuses BM25 with every model given to `--model` "
        "(here the default model and all-mpnet-base-v2 from ../shared/tools/second-model.sh). Neither trains; each is "
        "certified on the selection queries and confirmed as every candidate, and saved in the index `sentune serve` serves. "
        'Run by `EXAMPLES="NAME" bash benchmarks/runners/search_candidates.sh` (`--methods hybrid`, then the same folder '
        "with `--model default,MPNET`, which reads the first run's candidates back). nDCG@10 ×100; minutes: the candidate's own.",
        "",
        "| run | candidate | selection | confirmation | test | minutes |",
        "|---|---|---|---|---|---|",
    ]
    for run, results in found.items():
        for cname in FROM_WHAT_THE_USER_HAS:
            c = results["candidates"].get(cname)
            if c is None:
                continue
            if c.get("skipped"):
                lines.append(f"| {run} | `{cname}` | skipped: {c['skipped']} | | | |")
                continue
            score = lambda key: f"{c[key]['score']:.2f}" if c.get(key) else "—"  # noqa: E731, B023
            chosen = " (**chosen**)" if results["choice"]["name"] == cname else ""
            lines.append(f"| {run} | `{cname}`{chosen} | {score('select')} | {score('confirm')} | {score('test')} | {(c.get('seconds') or 0) / 60:.1f} |")
    for run, results in found.items():
        lines += domain_section(f"{run}: search candidates from what the user has", results, f"search-candidates/{run}")
    return lines


SENTENCE_PAIR_KEPT = KEPT / "sentence-pair-trainings"  # search runs with the sentence-pair trainings named (NAME/results.json)


def sentence_pair_section(names: list[str]) -> list[str]:
    """A search run's defaults leave out the sentence-pair trainings (sentune.adaptation.names.SEARCH_OPT_IN); the runs kept
    under benchmarks/results/adapt/sentence-pair-trainings/NAME named them: the evidence for leaving them out."""
    lines = []
    for name in names:
        path = SENTENCE_PAIR_KEPT / name / "results.json"
        if path.is_file():
            lines += domain_section(
                f"{name} with the sentence-pair trainings (asked for by name)", json.loads(path.read_text()), f"sentence-pair-trainings/{name}"
            )
    if not lines:
        return []
    intro = (
        f"A search run without `--methods` leaves out {', '.join(dict.fromkeys((*TRAINED, *SEARCH_OPT_IN)))} "
        "(sentune.adaptation.names: SEARCH_OPT_IN, and tsdae, which every run leaves out): in the run "
        "below, which named the sentence-pair trainings, each was behind the unchanged model on the selection queries at the "
        "race's first round."
    )
    return ["", "## Sentence-pair trainings on search", "", intro, *lines]


SIDES = {  # the candidates that train on the judgements, by what they tune, and the fusions of each with BM25
    QUERY_SIDE: "the query encoder only, against the index's document vectors",
    f"hybrid-{QUERY_SIDE}": "BM25 fused with it",
    SUPERVISED: "both sides (the documents encoded again for every fold and the refit)",
    f"hybrid-{SUPERVISED}": "BM25 fused with it",
}


def query_side_section(found: dict[str, dict]) -> list[str]:
    """Issue 80 item 3: the search candidate that trains the query side only beside the two-sided fine-tune, each
    domain's run with the time they both need (its --time in its command): minutes, selection, confirmation, test."""
    runs = {n: r for n, r in found.items() if all(r["candidates"].get(k, {}).get("test") for k in (QUERY_SIDE, SUPERVISED))}
    if not runs:
        return [
            "",
            "## Query-side training against the two-sided fine-tune",
            "",
            f"Not yet measured: no kept run has both `{QUERY_SIDE}` and `{SUPERVISED}` with a test score.",
        ]
    lines = [
        "",
        "## Query-side training against the two-sided fine-tune",
        "",
        f"`{QUERY_SIDE}` fine-tunes the query encoder alone on the judged queries against the document vectors the run already holds "
        "(every document a negative), so a fold costs its queries' encodes, never the corpus's, and the index is not rebuilt; "
        f"`{SUPERVISED}` tunes both sides. Both are cross-fitted on the selection queries and refit on all of them. From each domain's run "
        "below (its command and date in its results.json); minutes as the run measured them, nDCG@10 ×100 and the interval of the "
        "difference from the unchanged model on the same queries.",
    ]
    for name, results in runs.items():
        c, meta = results["candidates"], results["meta"]
        lines += [
            "",
            f"{name}: `{meta.get('command')}`, {meta.get('date')}; chose `{results['choice']['name']}`.",
            "",
            "| domain | candidate | tunes | minutes | selection | confirmation − unchanged [95 % CI] | test | test − unchanged [95 % CI] |",
            "|---|---|---|---:|---:|---|---:|---|",
        ]
        for cname, tunes in SIDES.items():
            row = c.get(cname)
            if not row or not row.get("test"):
                continue
            select = row.get("select") or {}
            lines.append(
                f"| {name} | `{cname}` | {tunes} | {row['seconds'] / 60:.1f} | {select.get('score', float('nan')):.2f} | "
                f"{_difference(row.get('confirm'), 'vs_unchanged')} | {row['test']['score']:.2f} | {_difference(row['test'], 'vs_unchanged')} |"
            )
    return lines


def render() -> str:
    names = example_names(retrieval=True)
    found = {n: json.loads((KEPT / n / "results.json").read_text()) for n in names if (KEPT / n / "results.json").is_file()}
    lines = [
        "# `sentune adapt` for search: two retrieval domains (issues 23, 45)",
        "",
        f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}` from benchmarks/results/adapt/NAME/results.json; the runs: "
        "`bash benchmarks/runners/adapt_experiments.sh` with the settings of each domain's exact command below.",
        "",
        "Default model (all-MiniLM-L6-v2), default budget, 2 CPU cores. nDCG@10 ×100 per query; the selection queries rank a pool "
        "(their relevant documents and the top 30 of the unchanged model and of BM25), the confirmation and test queries the whole corpus; the "
        f"chosen candidate replaces the unchanged model only when a one-sided paired permutation test over the confirmation queries "
        f"gives p ≤ {LEVEL:g}. `hybrid` is BM25 (stemmed, k1, b and the title weight fitted on the selection queries) and the unchanged model (a "
        "document by its best passage or its first window, whichever the selection queries favour) fused by a convex combination of "
        "min-max normalised scores, its weight chosen on the selection queries; `bm25` (fixed settings), `bm25-fitted`, `unchanged-maxp`, "
        "`bm25-unstemmed` (BM25 without the stemmer: what stemming adds), `rrf` "
        "(reciprocal rank fusion of BM25 and the unchanged model, k = 60) and `st-simcse` (sentence-transformers' SimCSE recipe, with "
        "--reference) are reported, never chosen; candidate minutes leave them out. Differences: paired bootstrap over the test queries, 95 % interval.",
        "",
        "## Summary (test queries)",
        "",
        "| domain | unchanged | BM25 | BM25 unstemmed | RRF | hybrid | chosen | chosen's score | chosen − unchanged [95 % CI] | chosen − BM25 [95 % CI] "
        "| confirmation p (best on selection) | supervised: selection / test | ST SimCSE | candidate minutes | label-free run: chosen, test | its minutes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    earlier = {n: json.loads((LABEL_FREE / n / "results.json").read_text()) for n in found if (LABEL_FREE / n / "results.json").is_file()}
    lines += ["| " + " | ".join(summary_row(n, r, earlier.get(n))) + " |" for n, r in found.items()]
    folds = {n: r["candidates"][SUPERVISED]["folds"] for n, r in found.items() if r["candidates"].get(SUPERVISED, {}).get("folds")}
    lines += [
        "",
        "`supervised` fine-tunes the unchanged model on the selection queries' judgements (MultipleNegativesRankingLoss on a query, "
        "a judged-relevant document, and BM25's and the unchanged model's best-ranked unjudged documents as hard negatives; "
        "sentune.adaptation.candidates.SupervisedSearch), `supervised-stacked` the best "
        "label-free trained candidate; their selection score is out of fold (K-fold cross-fitting on the selection queries"
        + "".join(f", {n}: K = {k}" for n, k in folds.items())
        + ", then refit on all of them). The label-free run is the same domain's run before the supervised candidates existed "
        "(benchmarks/results/adapt/label-free/NAME/results.json, its command in it).",
    ]
    lines += query_side_section(found)
    missing = [n for n in names if n not in found]
    if missing:
        lines += ["", f'Not yet measured: {", ".join(missing)} (run `EXAMPLES="{" ".join(missing)}" bash benchmarks/runners/adapt_experiments.sh`).']
    curves = [line for n, r in found.items() for line in hybrid_lines(n, r)]
    if curves:
        lines += ["", "The hybrid's weight, chosen on the selection queries alone:", "", *curves]
    lines += index_lines()
    lines += [line for name in names for line in fit_and_passages_lines(name)]
    lines += low_memory_section(found)
    for name, results in found.items():
        lines += domain_section(name, results, name)
    lines += search_candidates_section(names)
    lines += retrieval_native_section(names)
    lines += sentence_pair_section(names)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the page here (default: print it)")
    args = parser.parse_args()
    page = render() + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(page)
        print(f"wrote {args.out}")
    else:
        print(page)


if __name__ == "__main__":
    main()
