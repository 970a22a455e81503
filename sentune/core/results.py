"""Results are data: JSON first; Markdown tables are rendered from the JSON."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from sentune.data.catalog import group_tasks


def sts7() -> tuple[str, ...]:
    """The papers' 7 STS tasks: the catalog's `sts` group."""
    return group_tasks("sts")


def umask_mode(directory: bool) -> int:
    """The mode a plain open()/mkdir() would give under the user's umask (tempfile's files are 0600 and its
    folders 0700: results, configs and models must be readable by whoever may read the user's other files)."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, umask_mode(directory=False))
        os.replace(tmp, path)
    except BaseException:  # a full disk, a folder in the way, an interrupt: no temporary file left beside `path`
        Path(tmp).unlink(missing_ok=True)
        raise


def save_results(results: dict, out_dir: Path, command: str | None = None) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    if command:
        results["meta"]["command"] = command
    json_path, md_path = out_dir / "results.json", out_dir / "results.md"
    write_atomic(json_path, json.dumps(results, indent=2))
    write_atomic(md_path, render_markdown(results))
    return json_path, md_path


def display_path(path: str) -> str:
    """A path as a reader of the committed page should see it: relative to the working folder when it is
    close by (../shared/data), never this machine's absolute layout."""
    relative = os.path.relpath(path)
    return relative if relative.count("..") <= 2 else os.path.basename(path)


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def sts_summary_table(runs: dict[str, dict], aggregation: str = "all", metric: str = "spearman") -> str | None:
    """Paper-style table: one row per run, the STS tasks as columns, then the average."""
    summary = sts_summary(runs, aggregation, metric)
    if summary is None:
        return None
    header, rows = summary
    return _table(header, [[row[0]] + [_fmt(v) for v in row[1:]] for row in rows])


def sts_summary(runs: dict[str, dict], aggregation: str = "all", metric: str = "spearman") -> tuple[list[str], list[list]] | None:
    """sts_summary_table's header and rows as values (None where a run lacks a task); None when no run has STS scores."""
    names = [t for t in _task_order(runs) if any("all" in r["tasks"].get(t, {}) for r in runs.values())]
    if not names:
        return None
    averaged = averaged_sts_tasks(names)
    rows: list[list] = []
    for run_name, run in runs.items():
        values = [run["tasks"].get(t, {}).get(aggregation, {}).get(metric) for t in names]
        present = [run["tasks"][t][aggregation][metric] for t in averaged if t in run["tasks"]]
        rows.append([run_name, *values, sum(present) / len(present) if present else None])
    label = "avg (7 STS)" if averaged == list(sts7()) else f"avg ({len(averaged)})"
    return ["run", *names, label], rows


def averaged_sts_tasks(names: list[str]) -> list[str]:
    """The papers' average is over the 7 STS tasks; dev and multilingual sets are shown, not averaged in,
    unless no standard task is present."""
    standard = [t for t in sts7() if t in names]
    return standard or list(names)


def transfer_table(runs: dict[str, dict]) -> str | None:
    names = [t for t in _task_order(runs) if any("acc" in r["tasks"].get(t, {}) for r in runs.values())]
    if not names:
        return None
    rows = []
    for run_name, run in runs.items():
        values = [run["tasks"].get(t, {}).get("acc") for t in names]
        present = [v for v in values if v is not None]
        rows.append([run_name] + [_fmt(v) for v in values] + [_fmt(sum(present) / len(present) if present else None)])
    header = ["run"] + [f"{t} (acc/F1)" if t == "MRPC" else t for t in names] + ["avg"]
    for row, run in zip(rows, runs.values(), strict=True):
        if "MRPC" in names and "f1" in run["tasks"].get("MRPC", {}):
            i = names.index("MRPC") + 1
            row[i] = f"{row[i]} / {_fmt(run['tasks']['MRPC']['f1'])}"
    return _table(header, rows)


def relatedness_table(runs: dict[str, dict]) -> str | None:
    names = [t for t in _task_order(runs) if any("dev_pearson" in r["tasks"].get(t, {}) for r in runs.values())]
    if not names:
        return None
    rows = [[n] + [f"{_fmt(r['tasks'][t]['pearson'])} / {_fmt(r['tasks'][t]['spearman'])}" for t in names] for n, r in runs.items()]
    return _table(["run"] + [f"{t} (Pearson / Spearman)" for t in names], rows)


def retrieval_table(runs: dict[str, dict]) -> str | None:
    """One row per (run, retrieval task): every metric ×100 and the counts."""
    from sentune.core.metrics import ranking_metrics  # SciPy and scikit-learn load with it: not for a command that only writes results

    names = [t for t in _task_order(runs) if any(r["tasks"].get(t, {}).get("main") == "ndcg@10" for r in runs.values())]
    if not names:
        return None
    rows = []
    for run_name, run in runs.items():
        for task in names:
            result = run["tasks"].get(task)
            if result:
                rows.append([run_name, task] + [_fmt(result[m.name]) for m in ranking_metrics()] + [str(result["n_queries"]), str(result["n_documents"])])
    return _table(["run", "task", *(m.short for m in ranking_metrics()), "queries", "documents"], rows)


def _task_order(runs: dict[str, dict]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs.values():
        for name in run["tasks"]:
            seen.setdefault(name, None)
    return list(seen)


def render_markdown(results: dict) -> str:
    meta, runs = results["meta"], results["runs"]
    parts = [f"# Evaluation of `{meta.get('model')}`", ""]
    if meta.get("command"):
        parts += ["Command:", "", "```", meta["command"], "```", ""]
    parts += [
        f"Date: {meta['date']} · sentune {meta['sentune_version']} · data `{display_path(meta['data_dir'])}` · "
        f"{meta['n_unique_sentences']} unique of {meta['n_sentences']} sentences encoded in {meta['encode_seconds']:.1f} s"
        + (f" · {meta['n_truncated']} truncated at {meta['max_seq_length']} tokens" if meta.get("n_truncated") else "")
        + (f" · precision {meta['precision']}" if meta.get("precision", "fp32") != "fp32" else ""),
        "",
    ]
    for aggregation, title in (
        ("all", "'all' (concatenated subsets; headline)"),
        ("wmean", "'wmean' (size-weighted mean of subsets)"),
        ("mean", "'mean' (plain mean of subsets)"),
    ):
        table = sts_summary_table(runs, aggregation)
        if table:
            parts += [f"## STS Spearman ×100, {title}", "", table, ""]
    table = sts_summary_table(runs, "all", "pearson")
    if table:
        parts += ["## STS Pearson ×100, 'all'", "", table, ""]
    table = transfer_table(runs)
    if table:
        parts += [f"## SentEval transfer accuracy (preset `{meta.get('transfer_preset')}`)", "", table, ""]
    table = retrieval_table(runs)
    if table:
        parts += ["## Retrieval ×100 (cosine, exact search; nDCG@10 is the headline)", "", table, ""]
    table = relatedness_table(runs)
    if table:
        parts += ["## Supervised relatedness (SentEval regressor; not comparable with cosine STS)", "", table, ""]
    au = {n: r["alignment_uniformity"] for n, r in runs.items() if "alignment_uniformity" in r}
    if au:
        rows = [[n, f"{v['alignment']:.3f}", f"{v['uniformity']:.3f}", v["pairs"]] for n, v in au.items()]
        parts += ["## Alignment and uniformity (lower is better)", "", _table(["run", "alignment", "uniformity", "pairs"], rows), ""]
    subset_parts: list[str] = []
    for run_name, run in runs.items():
        rows = []
        for task, result in run["tasks"].items():
            for subset, r in result.get("subsets", {}).items():
                if len(result["subsets"]) > 1:
                    rows.append([task, subset, str(r["n"]), _fmt(r["spearman"]), _fmt(r["pearson"])])
        if rows:
            subset_parts += [f"### {run_name}", "", _table(["task", "subset", "pairs", "Spearman", "Pearson"], rows), ""]
    if subset_parts:
        parts += ["## Per-subset Spearman ×100", "", *subset_parts]
    return "\n".join(parts)
