"""BERT-flow (Li et al. 2020, "On the Sentence Embeddings from Pre-trained Language Models", EMNLP) as a
scikit-learn-style post-processor, with the Glow blocks of the BERT-CF report §4.2 (Kingma & Dhariwal 2018).

The flow g: Z → B maps a standard Gaussian to the embedding space; we learn g⁻¹ as k blocks, each
  ActNorm            u = s ⊙ (x + b)          (data-dependent init: zero mean, unit variance on the first batch)
  invertible 1×1     u = W u                  (W = P·L·(U + diag(sign·exp(log_s))), LU-parametrised; or the
                                                fixed channel reversal of the original code: `permutation="reverse"`)
  additive coupling  v_{1:d} = u_{1:d},  v_{d+1:D} = u_{d+1:D} + NN(u_{1:d}),  d = ⌊D/2⌋
                     NN = Linear→ActNorm→ReLU→Linear→ActNorm→ReLU→Linear (last layer zero-initialised,
                     so the flow starts as ActNorm + W only)
and minimise L_flow = −log p_Z(g⁻¹(f(x))) − log|det ∂g⁻¹(f(x))/∂f(x)| with p_Z = N(0, I), the encoder
frozen. The mapped vector z = g⁻¹(f(x)) is the embedding. Only ActNorm and W contribute to the
log-determinant (additive coupling is volume preserving). Differences from the TF original, on purpose:
the learned LU 1×1 transform (the original ships a fixed reversal; available as an option), one scale
(no multi-scale split), ActNorm log-scales stored directly (the original stores logs/3).

Null directions: embeddings that span fewer than D dimensions (mean pooling of one LayerNorm output with
no Normalize keeps every token on the hyperplane Σ_i (y_i − β_i)/γ_i = 0; a linear head can drop rank too) give the
density no volume in some directions, and the fit turned unstable: on the SED paper's supervised STS model (3 such
directions of its D) flows fitted on the same sentences differed by several points of STS-B Spearman from seed
to seed (benchmarks/results/flow_null_directions.md, with and without this fix), and even the same seed's fit moved
with float rounding in its input (benchmarks/results/flow_input_sensitivity.md). `fit` therefore finds the
directions whose variance is below `null_tolerance` × the largest (covariance eigen-decomposition) and adds fresh
Gaussian noise of standard deviation `null_noise` × √(largest variance) there to each training batch:
dequantisation (Uria et al. 2013; Ho et al. 2019, Flow++) restricted to the directions the data does not use. Data
of full rank is fitted exactly as before; `transform` never adds noise. `null_directions_` says how many were
found. (BERT-CF's jointly trained flow, sentune.modules.live_flow, does not do this.)

Fitted, the flow compiles into sentence-transformers' own Dense modules (`to_modules`), exactly: affine
maps (ActNorm, W) merge into neighbouring Dense layers, and each coupling becomes three Dense layers that
carry the input through the ReLUs as relu(u) − relu(−u) = u. So a model with a flow head loads with plain
`SentenceTransformer(path)`, no custom code.
"""

from __future__ import annotations

import logging
import math
import typing

import numpy as np
import torch
from torch import nn

from sentune.errors import UserError

logger = logging.getLogger(__name__)


class ActNorm(nn.Module):
    initialized: torch.Tensor  # a buffer: set from the first batch (data-dependent init)

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))
        self.log_scale = nn.Parameter(torch.zeros(dim))
        self.register_buffer("initialized", torch.tensor(False))

    @torch.no_grad()
    def initialize(self, x: torch.Tensor) -> None:
        mean = x.mean(0)
        std = (x - mean).pow(2).mean(0).sqrt()  # centred second moment, as BERT-flow
        self.bias.copy_(-mean)
        self.log_scale.copy_(torch.log(1.0 / (std + 1e-6)))
        self.initialized.fill_(True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.initialized:
            self.initialize(x)
        return (x + self.bias) * self.log_scale.exp(), self.log_scale.sum().expand(len(x))

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * (-self.log_scale).exp() - self.bias

    def affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(A, c) with forward(x) = x Aᵀ + c."""
        s = self.log_scale.exp()
        return torch.diag(s), self.bias * s


class InvertibleLinear(nn.Module):
    fixed: torch.Tensor  # buffers (mypy cannot see register_buffer)
    p: torch.Tensor
    sign_s: torch.Tensor
    lower_mask: torch.Tensor

    """The '1×1 convolution' on a vector: u ↦ W u, LU-parametrised (learned) or a fixed reversal."""

    def __init__(self, dim: int, permutation: str = "lu", seed: int = 0) -> None:
        super().__init__()
        if permutation not in ("lu", "reverse"):
            raise ValueError(f"permutation must be 'lu' or 'reverse', got {permutation!r}")
        self.permutation = permutation
        if permutation == "reverse":
            self.register_buffer("fixed", torch.eye(dim).flip(0))
            return
        generator = torch.Generator().manual_seed(seed)
        q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
        p, lower, upper = torch.linalg.lu(q)
        s = upper.diagonal()
        self.register_buffer("p", p.float())
        self.register_buffer("sign_s", s.sign().float())
        self.register_buffer("lower_mask", torch.tril(torch.ones(dim, dim), -1))
        self.lower = nn.Parameter(lower.float())
        self.upper = nn.Parameter(torch.triu(upper, 1).float())
        self.log_s = nn.Parameter(s.abs().log().float())

    def weight(self) -> torch.Tensor:
        if self.permutation == "reverse":
            return self.fixed
        eye = torch.eye(len(self.log_s), device=self.log_s.device)
        lower = self.lower * self.lower_mask + eye
        upper = self.upper * self.lower_mask.T + torch.diag(self.sign_s * self.log_s.exp())
        return self.p @ lower @ upper

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = x.new_zeros(()) if self.permutation == "reverse" else self.log_s.sum()
        return x @ self.weight().T, logdet.expand(len(x))

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y @ torch.linalg.inv(self.weight()).T

    def affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.weight()
        return w, torch.zeros(len(w), device=w.device)


class CouplingNet(nn.Module):
    """NN of the additive coupling: Linear→ActNorm→ReLU→Linear→ActNorm→ReLU→Linear(zero-init)."""

    def __init__(self, dim_in: int, dim_out: int, hidden: int) -> None:
        super().__init__()
        self.l1, self.n1 = nn.Linear(dim_in, hidden), ActNorm(hidden)
        self.l2, self.n2 = nn.Linear(hidden, hidden), ActNorm(hidden)
        self.l3 = nn.Linear(hidden, dim_out)
        nn.init.zeros_(self.l3.weight)
        nn.init.zeros_(self.l3.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.n1(self.l1(x))[0])
        h = torch.relu(self.n2(self.l2(h))[0])
        return self.l3(h)

    def folded(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The three affine layers with the ActNorms folded in: [(W1, b1), (W2, b2), (W3, b3)]."""
        out = []
        for linear, norm in ((self.l1, self.n1), (self.l2, self.n2)):
            s = norm.log_scale.exp()
            out.append((linear.weight * s[:, None], (linear.bias + norm.bias) * s))
        out.append((self.l3.weight, self.l3.bias))
        return out


class AdditiveCoupling(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.split = dim // 2
        self.net = CouplingNet(self.split, dim - self.split, hidden)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x1, x2 = x[:, : self.split], x[:, self.split :]
        return torch.cat([x1, x2 + self.net(x1)], dim=1), x.new_zeros(len(x))

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        y1, y2 = y[:, : self.split], y[:, self.split :]
        return torch.cat([y1, y2 - self.net(y1)], dim=1)


class GlowFlow(nn.Module):
    """g⁻¹ as k blocks of ActNorm → invertible linear → additive coupling. forward: x ↦ (z, log|det|)."""

    def __init__(self, dim: int, n_blocks: int = 3, hidden: int = 32, permutation: str = "lu", seed: int = 0) -> None:
        super().__init__()
        self.dim = dim
        layers: list[nn.Module] = []
        for k in range(n_blocks):
            layers += [ActNorm(dim), InvertibleLinear(dim, permutation, seed + k), AdditiveCoupling(dim, hidden)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = x.new_zeros(len(x))
        for layer in self.layers:
            x, step = layer(x)
            logdet = logdet + step
        return x, logdet

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        for layer in reversed(self.layers):
            z = typing.cast(ActNorm | InvertibleLinear | AdditiveCoupling, layer).inverse(z)
        return z

    def nll(self, x: torch.Tensor) -> torch.Tensor:
        """L_flow per example: −log N(z; 0, I) − log|det ∂z/∂x|."""
        z, logdet = self(x)
        log_pz = -0.5 * z.pow(2).sum(1) - 0.5 * self.dim * math.log(2 * math.pi)
        return -(log_pz + logdet)


def compile_to_dense(flow: GlowFlow) -> list:
    """sentence-transformers Dense modules computing flow(x)[0] exactly (see module docstring)."""
    from sentence_transformers.models import Dense

    dim = flow.dim
    dense: list = []
    matrix = torch.eye(dim, dtype=torch.float64)  # pending affine map u = x Mᵀ + c
    offset = torch.zeros(dim, dtype=torch.float64)

    def emit(weight, bias, activation):
        weight, bias = weight.float(), bias.float()
        dense.append(
            Dense(weight.shape[1], weight.shape[0], bias=True, activation_function=activation, init_weight=weight.contiguous(), init_bias=bias.contiguous())
        )

    with torch.no_grad():
        for layer in flow.layers:
            if isinstance(layer, (ActNorm, InvertibleLinear)):
                a, c = (t.detach().cpu().double() for t in layer.affine())  # compiled on the CPU, wherever the flow was fitted
                matrix, offset = a @ matrix, a @ offset + c
                continue
            assert isinstance(layer, AdditiveCoupling)
            (w1, b1), (w2, b2), (w3, b3) = ((w.detach().cpu().double(), b.detach().cpu().double()) for w, b in layer.net.folded())
            d, hidden = layer.split, w1.shape[0]
            # Layer a: [h1; u; −u] with ReLU, where u = pending affine of the input.
            first = torch.cat([w1 @ matrix[:d], matrix, -matrix])
            first_bias = torch.cat([w1 @ offset[:d] + b1, offset, -offset])
            emit(first, first_bias, nn.ReLU())
            # Layer b: h2 = relu(W2 h1 + b2); relu(u) and relu(−u) pass through unchanged (they are ≥ 0).
            carry = torch.zeros(hidden + 2 * dim, hidden + 2 * dim, dtype=torch.float64)
            carry[:hidden, :hidden] = w2
            carry[hidden:, hidden:] = torch.eye(2 * dim, dtype=torch.float64)
            emit(carry, torch.cat([b2, torch.zeros(2 * dim, dtype=torch.float64)]), nn.ReLU())
            # Layer c (kept pending so later affine maps merge into it): v = relu(u) − relu(−u) + [0; W3 h2 + b3].
            matrix = torch.zeros(dim, hidden + 2 * dim, dtype=torch.float64)
            matrix[:, hidden : hidden + dim] = torch.eye(dim, dtype=torch.float64)
            matrix[:, hidden + dim :] = -torch.eye(dim, dtype=torch.float64)
            matrix[d:, :hidden] = w3
            offset = torch.cat([torch.zeros(d, dtype=torch.float64), b3])
        emit(matrix, offset, nn.Identity())
    return dense


def null_directions(x: torch.Tensor, tolerance: float) -> tuple[torch.Tensor, float]:
    """(orthonormal basis (D, k) of the directions in which x's variance is below tolerance × its largest, √largest
    variance), from the covariance's eigen-decomposition in float64 on the CPU (D×D: cheap next to the fit)."""
    centred = x.detach().cpu().double()
    centred = centred - centred.mean(0)
    values, vectors = torch.linalg.eigh(centred.T @ centred / max(len(centred) - 1, 1))
    largest = float(values[-1].clamp(min=0))
    null = values < tolerance * largest
    return vectors[:, null].float(), math.sqrt(largest)


class Flow:
    """fit / transform post-processor around GlowFlow. Hyper-parameters default to the BERT-CF report §5.3:
    batch 16, AdamW lr 3e-4, weight decay 0.01, 3 blocks; gradient clipping 1.0; fp32."""

    def __init__(
        self,
        n_blocks: int = 3,
        hidden: int = 32,
        permutation: str = "lu",
        learning_rate: float = 3e-4,
        weight_decay: float = 0.01,
        batch_size: int = 16,
        epochs: int = 1,
        max_steps: int | None = None,
        clip: float = 1.0,
        seed: int = 0,
        show_progress: bool = False,
        device: str | None = None,
        null_tolerance: float = 1e-6,
        null_noise: float = 1e-2,
    ) -> None:
        self.n_blocks, self.hidden, self.permutation = n_blocks, hidden, permutation
        self.learning_rate, self.weight_decay, self.batch_size = learning_rate, weight_decay, batch_size
        self.epochs, self.max_steps, self.clip, self.seed, self.show_progress = epochs, max_steps, clip, seed, show_progress
        self.device = device  # where it fits (a command passes its --device); None: CUDA when present
        self.null_tolerance, self.null_noise = null_tolerance, null_noise

    def fit(self, x: np.ndarray) -> Flow:
        from tqdm.auto import tqdm

        from sentune.core.device import resolve_device

        device = torch.device(resolve_device(self.device, "flow device"))
        data = torch.as_tensor(np.asarray(x), dtype=torch.float32)
        if data.ndim != 2 or len(data) < 2:
            raise UserError(f"the flow needs a 2-d array of at least two embeddings, got shape {tuple(data.shape)}")
        bad = torch.nonzero(~torch.isfinite(data))
        if len(bad):
            row, column = (int(i) for i in bad[0])
            raise FloatingPointError(f"the flow's input has {data[row, column].item()} at row {row}, column {column} ({len(bad)} such values)")
        null_basis, noise_std = null_directions(data, self.null_tolerance)
        self.null_directions_ = null_basis.shape[1]
        if self.null_directions_ and self.null_noise > 0:
            logger.warning(
                "the flow's %d embeddings span %d of %d dimensions; fitting with noise (std %.2g) in the other %d (see sentune.postprocess.flow)",
                len(data),
                data.shape[1] - self.null_directions_,
                data.shape[1],
                self.null_noise * noise_std,
                self.null_directions_,
            )
        data, null_basis = data.to(device), null_basis.to(device)
        torch.manual_seed(self.seed)
        generator = torch.Generator().manual_seed(self.seed)  # the CPU's: the same batches on every device
        noise_generator = torch.Generator().manual_seed(self.seed + 1)  # its own stream: full-rank fits draw nothing
        self.flow_ = GlowFlow(data.shape[1], self.n_blocks, self.hidden, self.permutation, self.seed).to(device)
        optimiser = torch.optim.AdamW(self.flow_.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay)
        steps_per_epoch = math.ceil(len(data) / self.batch_size)
        total = self.max_steps or steps_per_epoch * self.epochs
        losses: list[torch.Tensor] = []  # read back every CHECK_EVERY steps: a per-step .item() would stall a GPU
        step = 0
        with tqdm(total=total, desc="flow", disable=not self.show_progress) as bar:
            while step < total:
                for batch in torch.randperm(len(data), generator=generator).split(self.batch_size):
                    inputs = data[batch.to(device)]
                    if self.null_directions_ and self.null_noise > 0:
                        noise = torch.randn(len(batch), self.null_directions_, generator=noise_generator) * (self.null_noise * noise_std)
                        inputs = inputs + noise.to(device) @ null_basis.T
                    loss = self.flow_.nll(inputs).mean()
                    optimiser.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.flow_.parameters(), self.clip)
                    optimiser.step()
                    losses.append(loss.detach())
                    step += 1
                    bar.update(1)
                    if step % self.CHECK_EVERY == 0 or step >= total:
                        self._check_finite(losses, step)
                    if step >= total:
                        break
        self.history_ = torch.stack(losses).cpu().tolist()
        self.flow_.eval()
        return self

    CHECK_EVERY = 50

    def _check_finite(self, losses: list[torch.Tensor], step: int) -> None:
        recent = torch.stack(losses[-self.CHECK_EVERY :]).cpu()
        bad = torch.nonzero(~torch.isfinite(recent)).flatten()
        if len(bad):
            first = step - len(recent) + int(bad[0])  # 0-based, as the steps count
            raise FloatingPointError(f"flow loss is {recent[bad[0]].item()} at step {first}; try a lower learning_rate")

    def _check_fitted(self) -> None:
        if not hasattr(self, "flow_"):
            raise RuntimeError("Flow is not fitted yet: call fit(embeddings) first")

    @torch.no_grad()
    def transform(self, x: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self.flow_(self._on_flow_device(x))[0].cpu().numpy()

    @torch.no_grad()
    def inverse_transform(self, z: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self.flow_.inverse(self._on_flow_device(z)).cpu().numpy()

    def _on_flow_device(self, x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x), dtype=torch.float32).to(next(self.flow_.parameters()).device)

    def fit_transform(self, x: np.ndarray) -> np.ndarray:
        return self.fit(x).transform(x)

    def to_modules(self) -> list:
        self._check_fitted()
        return compile_to_dense(self.flow_)
