"""The files `sentune encode` writes: .npy (the array), or .jsonl (each sentence beside its vector)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sentune.errors import UserError

SUFFIXES = (".npy", ".jsonl")


def check_embeddings_path(path: Path) -> None:
    """Refuse a file name whose format sentune does not write, before any model loads."""
    if path.suffix not in SUFFIXES:
        raise UserError(f"output {path}: use a .npy or .jsonl file name")


def write_embeddings(path: Path, sentences: Sequence[str], vectors: np.ndarray) -> Path:
    check_embeddings_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npy":
        np.save(path, vectors)
    else:
        with path.open("w", encoding="utf-8") as handle:
            for sentence, vector in zip(sentences, vectors, strict=True):
                handle.write(json.dumps({"text": sentence, "embedding": [round(float(x), 7) for x in vector]}) + "\n")
    return path
