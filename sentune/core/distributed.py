"""Data parallel helpers for in-batch contrastive losses.

Under torch.distributed (torchrun, accelerate launch) each process holds a shard of the batch. A loss that
takes its negatives from the batch gathers every process's vectors so that the negatives are the global
batch, and its positives sit at `offset() + i` of the gathered rows. `gather` keeps the gradient exact:
its backward sums, over the processes, the gradient each one's loss sends to a row, and returns to each
process the part for its own rows. With the mean-reduced per-process losses and DDP's averaging of
parameter gradients, a step of W processes with b/W rows each then equals (up to float rounding) one
process with b rows — which tests/test_distributed.py checks. Without an initialised process group (or
with one process) both are the identity.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world_size() -> int:
    """Processes of this run: the process group's, or the launcher's (torchrun sets WORLD_SIZE) before it exists."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def _gathering() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, local: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(local) for _ in range(world_size())]
        dist.all_gather(parts, local.contiguous())
        ctx.rows = local.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad)  # every process's loss may depend on every row
        start = rank() * ctx.rows
        return grad[start : start + ctx.rows]


def gather(local: torch.Tensor, enabled: bool = True) -> torch.Tensor:
    """(W·b, ...) rows of every process in rank order, differentiable; `local` when not distributed.
    Every process must pass the same number of rows (the trainer drops the last uneven batch)."""
    if not enabled or not _gathering():
        return local
    return _GatherRows.apply(local)


def offset(local_rows: int, enabled: bool = True) -> int:
    """Where this process's rows start in the gathered tensor."""
    return rank() * local_rows if enabled and _gathering() else 0


def own_columns(rows: int, columns: int, start: int, device: torch.device) -> torch.Tensor:
    """(rows, columns) bool: True at (i, start + i), where local row i meets its own gathered column."""
    own = torch.zeros(rows, columns, dtype=torch.bool, device=device)
    own[torch.arange(rows, device=device), start + torch.arange(rows, device=device)] = True
    return own
