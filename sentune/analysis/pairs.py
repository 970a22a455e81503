"""Qualitative pair tables (the BERT-CF report, Tables 3-6 style): sentence pairs of an STS task with their gold
score and each model's cosine similarity, so a reader sees where training moved a pair and whether it
moved towards the gold.

Pairs are a seeded random sample stratified by gold score (equal numbers from the low, middle and high
third of the scale), so the table shows rises and drops, not just the most common score band."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sentune.core.encode import Encoder
from sentune.core.results import write_atomic
from sentune.data.catalog import load_task, select_tasks


def sample_pairs(task: str, data_dir: Path, count: int, seed: int = 0, *, allow_modified: bool = False) -> list:
    pairs = [p for items in load_task(select_tasks(task)[0], data_dir, allow_modified=allow_modified).values() for p in items]
    if count >= len(pairs):
        return pairs
    scores = np.array([p.score for p in pairs])
    low, high = np.quantile(scores, [1 / 3, 2 / 3])
    bands = [np.flatnonzero(scores <= low), np.flatnonzero((scores > low) & (scores <= high)), np.flatnonzero(scores > high)]
    bands = [b for b in bands if len(b)]
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for i, band in enumerate(bands):
        share = count // len(bands) + (1 if i < count % len(bands) else 0)
        chosen.extend(rng.choice(band, size=min(share, len(band)), replace=False).tolist())
    return [pairs[i] for i in sorted(chosen)]


def encode_pairs(model, pairs: list) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors of a, b, a, b, … (the model's own pipeline) and each pair's cosine."""
    vectors = Encoder(model, "model", show_progress=False).encode([s for p in pairs for s in (p.a, p.b)])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, (vectors[0::2] * vectors[1::2]).sum(1)


def pair_cosines(models: list[tuple[str, object]], task: str, data_dir: Path, *, count: int = 8, seed: int = 0, allow_modified: bool = False) -> dict:
    """{'task', 'models': [labels], 'pairs': [{'a', 'b', 'gold', 'cosine': {label: value}}]}; each model
    encodes with its own pipeline ('model' pooling), as a user of the saved model would."""
    pairs = sample_pairs(task, data_dir, count, seed, allow_modified=allow_modified)
    rows = [{"a": p.a, "b": p.b, "gold": p.score, "cosine": {}} for p in pairs]
    for label, model in models:
        for row, cosine in zip(rows, encode_pairs(model, pairs)[1], strict=True):
            row["cosine"][label] = float(cosine)
    return {"task": task, "seed": seed, "models": [label for label, _ in models], "pairs": rows}


def pairs_markdown(record: dict) -> str:
    labels = record["models"]
    command = f" Command: `{record['command']}`." if record.get("command") else ""
    lines = [
        f"Pairs of {record['task']} (seeded sample, seed {record['seed']}, stratified by gold score); cosine of each model.{command}",
        "",
        "| sentence pair | " + " | ".join(f"cos: {label}" for label in labels) + " | gold |",
        "|" + "---|" * (len(labels) + 2),
    ]
    for row in record["pairs"]:
        pair = f"'{row['a']}'<br>'{row['b']}'".replace("|", "\\|")
        lines.append(f"| {pair} | " + " | ".join(f"{row['cosine'][label]:.3f}" for label in labels) + f" | {row['gold']:.1f} |")
    return "\n".join(lines) + "\n"


def save_pairs(record: dict, out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    write_atomic(out_dir / "pairs.json", json.dumps(record, indent=1))
    write_atomic(out_dir / "pairs.md", pairs_markdown(record))
    return out_dir / "pairs.md"
