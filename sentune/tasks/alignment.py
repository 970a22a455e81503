"""Alignment and uniformity (Wang & Isola, ICML 2020), as the BERT-CF report §6.3 uses them (after Gao et al. 2021).

On L2-normalised embeddings f:
  alignment  = mean over positive pairs (x, y) of ‖f(x) − f(y)‖²
  uniformity = log mean over pairs of distinct sentences (x, y) of exp(−2‖f(x) − f(y)‖²)
Lower is better for both. Uniformity is computed exactly over all pairs, in chunks.
"""

from __future__ import annotations

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def alignment(a: np.ndarray, b: np.ndarray, power: float = 2.0) -> float:
    """E‖f(x) − f(y)‖^power over the positive pairs (Wang & Isola's α, 2)."""
    return float((np.linalg.norm(_unit(a) - _unit(b), axis=1) ** power).mean())


def uniformity(x: np.ndarray, t: float = 2.0, chunk: int = 2048) -> float:
    """log E_{i<j} exp(−t‖f(x_i) − f(x_j)‖²) over all distinct pairs of rows."""
    u = _unit(x)
    n = len(u)
    if n < 2:
        raise ValueError("uniformity needs at least two embeddings")
    total = 0.0
    for start in range(0, n, chunk):
        block = u[start : start + chunk]
        sq = np.clip(2 - 2 * block @ u.T, 0, None)  # ‖a−b‖² of unit vectors
        rows = np.arange(start, start + len(block))[:, None]
        upper = np.arange(n)[None, :] > rows  # each unordered pair once
        total += np.exp(-t * sq)[upper].sum()
    return float(np.log(total / (n * (n - 1) / 2)))


def alignment_uniformity(a: np.ndarray, b: np.ndarray, everything: np.ndarray) -> dict[str, float]:
    return {"alignment": alignment(a, b), "uniformity": uniformity(everything)}
