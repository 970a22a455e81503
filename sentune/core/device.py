"""Where models run: `--device auto|cpu|cuda|cuda:N` (auto: CUDA when present). A command resolves its device once
(sentune.cli) and passes it down as an argument to everything that loads a model or fits on tensors (members,
pipelines' stages, caches' encoders, post-processors); nothing reads or writes the environment for it but the command
line, which takes SENTUNE_DEVICE as the default of `--device`. Under torchrun each process runs the command line itself
and takes its own GPU (LOCAL_RANK)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sentune.errors import UserError

if TYPE_CHECKING:
    import torch

DEVICE_ENV = "SENTUNE_DEVICE"
PRECISIONS = ("fp32", "bf16", "fp16")


def check_device(option: str | None = None, where: str = "--device") -> str:
    """The device an option names, its spelling checked (auto, cpu, cuda or cuda:N), not yet resolved: no torch."""
    value = (option or "auto").strip().lower()
    if value != "auto" and not re.fullmatch(r"cpu|cuda(:\d+)?", value):
        raise UserError(f"{where} {value}: expected auto, cpu, cuda or cuda:N")
    return value


def resolve_device(option: str | None = None, where: str = "--device") -> str:
    """The device an option names, checked; torch is imported only to ask about CUDA, so a misspelt option or a plain
    'cpu' answers before it loads."""
    value = check_device(option, where)
    if value == "cpu":
        return value
    import torch

    if value == "auto":
        value = "cuda" if torch.cuda.is_available() else "cpu"
    if value.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(
                f"{where} {value}: no CUDA device here (torch {torch.__version__}, built for {'CUDA ' + str(torch.version.cuda) if torch.version.cuda else 'CPU only'})"
            )
        if value == "cuda" and "LOCAL_RANK" in os.environ:
            value = f"cuda:{int(os.environ['LOCAL_RANK'])}"  # data parallel: one GPU per process
        index = int(value.split(":")[1]) if ":" in value else 0
        if index >= torch.cuda.device_count():
            raise UserError(f"{where} {value}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return value


def check_precision(precision: str, device: str, where: str) -> None:
    if precision not in PRECISIONS:
        raise UserError(f"{where} {precision}: expected one of {', '.join(PRECISIONS)}")
    if precision == "fp16" and not device.startswith("cuda"):
        raise UserError(f"{where} fp16: needs a CUDA device (use bf16 on the CPU)")


@contextmanager
def full_precision(*tensors: torch.Tensor) -> Iterator[tuple[torch.Tensor, ...]]:
    """The tensors in float32 (at least) with autocast off on their device: losses, similarities and log-determinants
    are computed in full precision even when training runs in bf16 / fp16 (training.precision). Without
    autocast and with float32 inputs this changes nothing."""
    import torch

    device_type = tensors[0].device.type if tensors else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):
        yield tuple(t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors)
