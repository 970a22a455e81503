"""`sentune report RUN_DIR... --out DIR`: one Markdown and one HTML page with every run's tables and plots.

A run folder holds results.json (from `sentune eval`) and/or layerwise.json (from `sentune layerwise`).
The page is rendered from that JSON only, so it can always be rebuilt.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from sentune.analysis.layerwise import plot_layerwise
from sentune.analysis.pairs import pairs_markdown
from sentune.core.plots import save_figure
from sentune.core.results import relatedness_table, sts7, sts_summary_table, transfer_table, write_atomic


def _load(folder: Path) -> tuple[dict | None, dict | None]:
    results = folder / "results.json"
    layers = folder / "layerwise.json"
    if not results.is_file() and not layers.is_file() and not (folder / "pairs.json").is_file():
        raise FileNotFoundError(f"{folder}: no results.json, layerwise.json or pairs.json (run `sentune eval --out {folder}` first)")
    return (json.loads(results.read_text()) if results.is_file() else None, json.loads(layers.read_text()) if layers.is_file() else None)


def _sts_average_plot(entries: list[tuple[str, dict]], path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Only runs averaged over the 7 standard STS tasks are comparable on one axis.
    bars = [
        (f"{label} · {run}", r["summary"]["avg_all_spearman"])
        for label, res in entries
        for run, r in res["runs"].items()
        if "avg_all_spearman" in r["summary"] and tuple(r["summary"].get("sts_tasks", ())) == sts7()
    ]
    if not bars:
        return None
    bars.sort(key=lambda b: b[1])
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(bars) + 1.2))
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color="#4c72b0")
    for y, (_, value) in enumerate(bars):
        ax.text(value, y, f" {value:.2f}", va="center", fontsize=8)
    ax.set_xlabel("average of the 7 STS tasks, Spearman ×100 ('all')")
    ax.set_xlim(min(0, min(b[1] for b in bars)), max(b[1] for b in bars) * 1.12)
    return save_figure(fig, path)


def build_report(folders: list[Path], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    entries, layerwise, pair_tables = [], [], []
    for folder in folders:
        results, layers = _load(folder)
        if (folder / "pairs.json").is_file():
            pair_tables.append(pairs_markdown(json.loads((folder / "pairs.json").read_text())))
        if results:
            entries.append((folder.name, results))
        if layers:
            layers["meta"]["label"] = layers["meta"].get("label") or folder.name
            layerwise.append(layers)

    parts = ["# sentune report", ""]
    plot = _sts_average_plot(entries, out / "sts_average.png")
    if plot:
        parts += ["## STS average per run", "", f"![STS average per run]({plot.name})", ""]
    if layerwise:
        png = plot_layerwise(layerwise, out / "layerwise.png")
        parts += ["## Layer-wise STS (Kim et al. 2021, Figure 1)", "", f"![layer-wise Spearman]({png.name})", ""]
        for result in layerwise:
            rows = "\n".join(
                f"| {k} | " + " | ".join(f"{result['scores'][t][i]:.2f}" for t in ("cls", "mean", "max")) + " |" for i, k in enumerate(result["layers"])
            )
            parts += [f"### {result['meta']['label']} — {result['meta']['task']}", "", "| layer | cls | mean | max |", "|---|---|---|---|", rows, ""]
    if pair_tables:
        parts += ["## Sentence pairs, cosine per model (the BERT-CF report, Tables 3-6 style)", ""]
        for pair_table in pair_tables:
            parts += [pair_table, ""]
    for label, results in entries:
        meta = results["meta"]
        parts += [f"## {label}: `{meta.get('model')}`", "", f"{meta['date']} · sentune {meta['sentune_version']}", ""]
        if meta.get("command"):
            parts += ["```", meta["command"], "```", ""]
        for title, table in (
            ("STS Spearman ×100, 'all'", sts_summary_table(results["runs"], "all")),
            ("STS Spearman ×100, 'wmean'", sts_summary_table(results["runs"], "wmean")),
            (f"SentEval transfer (preset `{meta.get('transfer_preset')}`)", transfer_table(results["runs"])),
            ("Supervised relatedness (regressor)", relatedness_table(results["runs"])),
        ):
            if table:
                parts += [f"### {title}", "", table, ""]
    markdown = "\n".join(parts)
    md_path, html_path = out / "report.md", out / "report.html"
    write_atomic(md_path, markdown)
    write_atomic(html_path, markdown_to_html(markdown))
    return md_path, html_path


def markdown_to_html(markdown: str) -> str:
    """The small Markdown subset our reports use: headings, tables, code blocks, images, paragraphs."""
    body, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = lines.index("```", i + 1) if "```" in lines[i + 1 :] else len(lines)
            body.append("<pre>" + html.escape("\n".join(lines[i + 1 : j])) + "</pre>")
            i = j + 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.fullmatch(r"\|[-|: ]+\|", lines[i]):
                    rows.append([html.escape(c.strip()) for c in lines[i].strip("|").split("|")])
                i += 1
            head = "".join(f"<th>{c}</th>" for c in rows[0])
            rest = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows[1:])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rest}</tbody></table>")
            continue
        heading = re.match(r"(#{1,4}) (.*)", line)
        image = re.fullmatch(r"!\[(.*)\]\((.*)\)", line)
        if heading:
            level = len(heading.group(1))
            body.append(f"<h{level}>{html.escape(heading.group(2))}</h{level}>")
        elif image:
            body.append(f'<img alt="{html.escape(image.group(1))}" src="{html.escape(image.group(2))}">')
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
        i += 1
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}pre{background:#f5f5f5;padding:.5em;overflow-x:auto}img{max-width:100%}"
    )
    return f"<!doctype html><html><head><meta charset='utf-8'><title>sentune report</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n"


def seed_table(run_dirs: list[Path], tasks: tuple[str, ...] | None = None) -> str:
    """Mean ± std over runs that differ only in their seed, one row per recipe+overrides ('all' Spearman)."""
    import numpy as np

    tasks = tasks or sts7()

    groups: dict[str, list[dict]] = {}
    for folder in run_dirs:
        results = json.loads((Path(folder) / "results.json").read_text())
        recipe = dict(results["meta"].get("recipe") or {})
        training = dict(recipe.get("training") or {})
        training.pop("seed", None)
        key = json.dumps({**recipe, "training": training}, sort_keys=True)
        groups.setdefault(key, []).append(results)
    header = "| method | seeds | " + " | ".join(tasks) + " | avg |"
    lines = [header, "|" + "---|" * (len(tasks) + 3)]
    for key, members in groups.items():
        recipe = json.loads(key)
        scores = np.array([[m["runs"]["model"]["tasks"][t]["all"]["spearman"] for t in tasks] for m in members])
        averages = scores.mean(axis=1)
        cells = [f"{scores[:, i].mean():.2f} ± {scores[:, i].std(ddof=1) if len(members) > 1 else 0:.2f}" for i in range(len(tasks))]
        avg = f"**{averages.mean():.2f} ± {averages.std(ddof=1) if len(members) > 1 else 0:.2f}**"
        seeds = ",".join(str(m["meta"]["recipe"]["training"]["seed"]) for m in members)
        lines.append(f"| {recipe.get('name') or recipe.get('method')} | {seeds} | " + " | ".join(cells) + f" | {avg} |")
    return "\n".join(lines)
