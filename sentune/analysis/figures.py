"""Figures of Kim et al. 2021 that are not tables: Figure 5 (t-SNE of positive and negative STS-B dev pairs,
before and after training). Figure 1 (layer-wise) lives in sentune.layerwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sentune.analysis.pairs import encode_pairs
from sentune.core.plots import save_figure
from sentune.core.results import write_atomic
from sentune.data.catalog import load_task, select_tasks


def extreme_pairs(task: str, data_dir: Path, count: int = 20, *, allow_modified: bool = False) -> tuple[list, list]:
    """The `count` highest-scored (positive) and lowest-scored (negative) pairs, file order among ties:
    on STS-B dev these are pairs scored exactly 5 and exactly 0, as in the paper."""
    pairs = [p for items in load_task(select_tasks(task)[0], data_dir, allow_modified=allow_modified).values() for p in items]
    order = sorted(range(len(pairs)), key=lambda i: (-pairs[i].score, i))
    positives = [pairs[i] for i in order[:count]]
    negatives = [pairs[i] for i in sorted(range(len(pairs)), key=lambda i: (pairs[i].score, i))[:count]]
    return positives, negatives


def tsne_points(
    models: list[tuple[str, object]], data_dir: Path, *, task: str = "STS-B-dev", count: int = 20, seed: int = 0, allow_modified: bool = False
) -> dict:
    """t-SNE of both sentences of each pair, one panel per model (a repeated label gets ` #i`): {'task', 'positives',
    'negatives' (their gold scores), 'panels' ({label: [[x, y], ...]}, sentences a, b, a, b, ...: positives first),
    'cosines' ({label: each pair's cosine})} (tsne.json)."""
    from sklearn.manifold import TSNE

    labels = [label if [seen for seen, _ in models[:i]].count(label) == 0 else f"{label} #{i + 1}" for i, (label, _) in enumerate(models)]
    positives, negatives = extreme_pairs(task, data_dir, count, allow_modified=allow_modified)
    pairs = positives + negatives
    panels: dict[str, list] = {}
    cosines: dict[str, list] = {}
    for label, (_, model) in zip(labels, models, strict=True):
        vectors, cosine = encode_pairs(model, pairs)
        panels[label] = TSNE(n_components=2, perplexity=min(30, len(vectors) - 1), random_state=seed, init="pca").fit_transform(vectors).tolist()
        cosines[label] = cosine.tolist()
    return {"task": task, "positives": [p.score for p in positives], "negatives": [p.score for p in negatives], "panels": panels, "cosines": cosines}


def tsne_plot(record: dict) -> Any:
    """The figure of a `tsne_points` record: one panel per model, a line joining each pair's two sentences, positives
    blue, negatives red, each panel's mean cosine of both in its title (a matplotlib Figure, not yet saved)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = record["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5), squeeze=False)
    positives = len(record["positives"])
    for ax, (label, points) in zip(axes[0], panels.items(), strict=True):
        cosines = np.asarray(record["cosines"][label])
        for i in range(len(points) // 2):
            colour = "tab:blue" if i < positives else "tab:red"
            a, b = points[2 * i], points[2 * i + 1]
            ax.plot([a[0], b[0]], [a[1], b[1]], color=colour, alpha=0.6, linewidth=1)
            ax.scatter([a[0], b[0]], [a[1], b[1]], color=colour, s=12)
        ax.set_title(f"{label}\nmean cos: positive {cosines[:positives].mean():.2f}, negative {cosines[positives:].mean():.2f}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


def save_tsne(record: dict, out_dir: Path) -> Path:
    """tsne.png and, beside it, its coordinates (tsne.json); returns the PNG's path."""
    path = save_figure(tsne_plot(record), Path(out_dir) / "tsne.png")
    write_atomic(Path(out_dir) / "tsne.json", json.dumps(record))
    return path
