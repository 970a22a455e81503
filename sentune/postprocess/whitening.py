"""BERT-whitening (Su et al. 2021, "Whitening Sentence Representations for Better Semantics and Faster
Retrieval", arXiv:2103.15316) as a scikit-learn-style post-processor.

fit(X):  μ = mean(X);  Σ = cov(X) (unbiased, dimensions as variables);  Σ = U S Uᵀ (SVD);
         W = U S^{-1/2}, first k columns.
transform(x) = normalise((x − μ) W[:, :k]).
The reference divides by √S with no floor. Components whose eigenvalue is below `eps`·max(S) carry no
variance (a LayerNorm output lies in a hyperplane; fewer sentences than dimensions) and 1/√S would blow
them up: with the default k (all) they are left out, and a k larger than the numerical rank is an error
naming the fix, never a silent inf.
"""

from __future__ import annotations

import logging

import numpy as np

from sentune.errors import UserError

logger = logging.getLogger(__name__)


def mean_and_covariance(x: np.ndarray, device: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """μ and the unbiased covariance in float64, as np.cov; on a GPU the N×D×D product takes milliseconds where two
    CPU cores take about a minute for a million sentences."""
    import torch

    from sentune.core.device import resolve_device

    where = resolve_device(device, "whitening device")
    if where == "cpu":
        return x.mean(axis=0), np.cov(x.T)
    t = torch.as_tensor(x, dtype=torch.float64, device=where)
    mean = t.mean(0)
    centred = t - mean
    return mean.cpu().numpy(), (centred.T @ centred / (len(t) - 1)).cpu().numpy()


class Whitening:
    def __init__(self, n_components: int | None = None, normalize: bool = True, eps: float = 1e-10, device: str | None = None) -> None:
        self.n_components = n_components
        self.normalize = normalize
        self.eps = eps
        self.device = device  # where the covariance is summed (None: CUDA when present); the SVD is NumPy's

    def fit(self, x: np.ndarray) -> Whitening:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or len(x) < 2:
            raise UserError(f"whitening needs a 2-d array of at least two embeddings, got shape {x.shape}")
        if self.n_components is not None and not 0 < self.n_components <= x.shape[1]:
            raise UserError(f"n_components={self.n_components} must be between 1 and the embedding size {x.shape[1]}")
        self.mean_, covariance = mean_and_covariance(x, self.device)
        u, s, _ = np.linalg.svd(covariance)
        rank = int((s > self.eps * s[0]).sum())
        k = self.n_components or rank
        if k > rank:
            raise UserError(
                f"covariance of {len(x)} embeddings has only {rank} non-zero components, fewer than the {k} asked for; "
                "fit on more sentences than dimensions or keep fewer components"
            )
        if k < x.shape[1] and self.n_components is None:
            # A LayerNorm output lies in a hyperplane (its centring removes one direction; zero gains remove
            # more): those directions have no variance, and 1/sqrt(0) would blow them up.
            logger.info("whitening keeps the %d of %d components with non-zero variance", k, x.shape[1])
        self.singular_values_ = s
        self.kernel_ = u[:, :k] / np.sqrt(s[:k])
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "kernel_"):
            raise RuntimeError("Whitening is not fitted yet: call fit(embeddings) first")

    def transform(self, x: np.ndarray) -> np.ndarray:
        self._check_fitted()
        y = (np.asarray(x, dtype=np.float64) - self.mean_) @ self.kernel_
        if self.normalize:
            y = y / np.clip(np.linalg.norm(y, axis=1, keepdims=True), 1e-8, None)
        return y.astype(np.float32)

    def fit_transform(self, x: np.ndarray) -> np.ndarray:
        return self.fit(x).transform(x)

    def to_modules(self) -> list:
        """Built-in modules: Dense computes x·W − μ·W = (x − μ)·W, then Normalize (when normalising)."""
        import torch
        from sentence_transformers.models import Dense, Normalize

        self._check_fitted()
        kernel = torch.from_numpy(self.kernel_).float()
        bias = -(torch.from_numpy(self.mean_).float() @ kernel)
        dense = Dense(kernel.shape[0], kernel.shape[1], bias=True, activation_function=torch.nn.Identity(), init_weight=kernel.T.contiguous(), init_bias=bias)
        return [dense, Normalize()] if self.normalize else [dense]
