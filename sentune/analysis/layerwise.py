"""Kim et al. 2021, Figure 1: STS Spearman of every hidden state under CLS, mean and max token pooling."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import sentune
from sentune.core.encode import Encoder
from sentune.core.plots import save_figure
from sentune.core.results import write_atomic
from sentune.data.catalog import TaskSpec, load_task
from sentune.errors import UserError
from sentune.tasks.sts import evaluate_sts

TOKEN_POOLINGS = ("cls", "mean", "max")


def layerwise_scores(model, task: TaskSpec, data_dir: Path, *, show_progress: bool = True, model_name: str | None = None, allow_modified: bool = False) -> dict:
    if task.kind != "sts":
        raise UserError(f"layer-wise scores need an STS task, {task.name} is {task.kind}")
    examples = load_task(task, data_dir, allow_modified=allow_modified)
    num_layers = model[0].model.config.num_hidden_layers + 1
    poolings = [f"layer{k}-{tok}" for k in range(num_layers) for tok in TOKEN_POOLINGS]
    pairs = [p for items in examples.values() for p in items]
    sentences = [p.a for p in pairs] + [p.b for p in pairs]
    vectors = Encoder(model, poolings, show_progress=show_progress, desc="encoding every layer").encode_many(sentences)
    n = len(pairs)
    scores: dict[str, list[float]] = {tok: [] for tok in TOKEN_POOLINGS}
    gold = np.array([p.score for p in pairs])
    for k in range(num_layers):
        for tok in TOKEN_POOLINGS:
            v = vectors[f"layer{k}-{tok}"]
            scores[tok].append(evaluate_sts({"all": (v[:n], v[n:], gold)})["all"]["spearman"])
    return {
        "meta": {
            "model": model_name,
            "task": task.name,
            "metric": "Spearman x100 (cosine)",
            "layers": "0 = embedding layer, k = output of block k",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "sentune_version": sentune.__version__,
        },
        "layers": list(range(num_layers)),
        "scores": scores,
    }


def save_layerwise(result: dict, out_dir: Path) -> Path:
    path = Path(out_dir) / "layerwise.json"
    write_atomic(path, json.dumps(result, indent=2))
    return path


def plot_layerwise(results: list[dict], path: Path) -> Path:
    return save_figure(layerwise_figure(results), path)


def layerwise_figure(results: list[dict]) -> Any:
    """A panel per result: each token pooling's score by layer (a matplotlib Figure, not yet saved)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False, sharey=True)
    for ax, result in zip(axes[0], results, strict=True):
        for tok, marker in zip(TOKEN_POOLINGS, "o^s", strict=True):
            ax.plot(result["layers"], result["scores"][tok], marker=marker, label=tok)
        ax.set_title(f"{result['meta'].get('label') or result['meta']['model']} — {result['meta']['task']}", fontsize=9)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks(result["layers"])
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Spearman ×100")
    axes[0][0].legend()
    return fig
