"""SentEval's supervised relatedness (STS-B / SICK-R "finetune" variant; senteval/tools/relatedness.py).

Features [|u−v|, u⊙v]; the score is encoded as a distribution over 5 classes (Tai et al. 2015:
y ∈ [1, 5] puts weight ⌊y⌋+1−y on class ⌊y⌋ and y−⌊y⌋ on class ⌊y⌋+1); a linear layer with softmax is
trained with summed MSE against it (Adam, batch 64) in chunks of 50 epochs, keeping the chunk with the
best dev Pearson and stopping after 3 chunks without improvement; the prediction is the expected class.
STS-B scores (0-5) are mapped linearly onto [1, 5] first; correlations do not change under that map.
These numbers use a trained regressor and are not comparable with cosine STS.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from sentune.tasks.sts import correlation, correlations
from sentune.tasks.transfer import pair_features

CLASSES = 5


def tai_encode(scores: np.ndarray) -> np.ndarray:
    """Scores in [1, 5] -> (n, 5) soft labels."""
    out = np.zeros((len(scores), CLASSES), dtype=np.float32)
    low = np.clip(np.floor(scores).astype(int), 1, CLASSES)
    frac = scores - low
    rows = np.arange(len(scores))
    out[rows, low - 1] = 1 - frac
    upper = low < CLASSES
    out[rows[upper], low[upper]] = frac[upper]
    return out


def to_one_five(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    return 1 + 4 * (scores - low) / (high - low)


def fit_regressor(train: tuple, dev: tuple, *, seed: int = 1111, chunk_epochs: int = 50, patience: int = 3, max_epochs: int = 1000):
    (xtr, ytr), (xdv, ydv) = train, dev
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(xtr.shape[1], CLASSES), torch.nn.Softmax(dim=-1))
    optimiser = torch.optim.Adam(model.parameters())
    x, y = torch.from_numpy(xtr).float(), torch.from_numpy(tai_encode(ytr))
    xd = torch.from_numpy(xdv).float()
    r = torch.arange(1, CLASSES + 1, dtype=torch.float32)
    best, best_state, bad, epochs = -100.0, None, 0, 0  # dev Pearson ×100
    while epochs < max_epochs and bad < patience:
        for _ in range(chunk_epochs):
            for idx in torch.randperm(len(x), generator=generator).split(64):
                optimiser.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx], reduction="sum")
                loss.backward()
                optimiser.step()
        epochs += chunk_epochs
        with torch.no_grad():
            score = correlation("pearson", ydv, (model(xd) @ r).numpy())
        if score > best:
            best, best_state, bad = score, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
    if best_state is not None:  # None only when no chunk ran (max_epochs < chunk_epochs)
        model.load_state_dict(best_state)
    return model, best


def evaluate_relatedness(examples: dict[str, list], embed, *, score_range: tuple[float, float], seed: int = 1111) -> dict:
    def xy(split):
        items = examples[split]
        x = pair_features(embed([p.a for p in items]), embed([p.b for p in items]))
        return x, to_one_five(np.array([p.score for p in items]), *score_range)

    model, dev_pearson = fit_regressor(xy("train"), xy("dev"), seed=seed)
    xte, yte = xy("test")
    with torch.no_grad():
        predicted = (model(torch.from_numpy(xte).float()) @ torch.arange(1, CLASSES + 1, dtype=torch.float32)).numpy()
    return {**correlations(predicted, yte), "dev_pearson": dev_pearson, "n_test": int(len(yte))}
