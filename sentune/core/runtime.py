"""How a loaded model's batches are computed: one `Runtime`, given explicitly to whatever encodes with the model (an
Encoder, a search index's queries, the server), never set on the model. A model object stays a plain
sentence-transformers model: `model.encode`, `copy.deepcopy(model)` and an Encoder given no runtime all run PyTorch on
the model's device, and two Encoders of one model with different runtimes do not see each other's.

What a runtime holds:
- `backend` and its `graph`: torch (no graph), or onnx / onnx-int8, whose ONNX Runtime graph computes the token states
  of every batch on the CPU (sentune.core.onnx_runtime.backend_runtime); the model's other modules (pooling, Normalize,
  whitening or flow heads) then run on them as usual.
- `small_batch_graph`: with PyTorch on the CPU, the model's exact fp32 graph for batches of at most SMALL_BATCH_TEXTS
  texts (a server's one-client requests; sentune.core.small_batch_graph). Why: a forward pass over a text or two is
  mostly PyTorch's per-operator overhead, which ONNX Runtime does not pay, while from a few texts on PyTorch's lanes are
  faster (`benchmarks/speed/serve_lanes.py` times the three by batch size).
- `lanes`: with PyTorch on the CPU, a batch cut by length into lanes run side by side (sentune.core.lanes).
- `spread`: the model was placed on `cuda` without a number (--device auto or cuda), so encoding may share its batches
  out to every visible GPU (a numbered GPU, or a model placed by someone else, stays on its own device).

`sentune.core.models.load_model_with_runtime` loads a model and returns its runtime beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sentune.errors import UserError

if TYPE_CHECKING:
    import torch

    from sentune.core.lanes import Lanes

BACKENDS = ("torch", "onnx", "onnx-int8")
SMALL_BATCH_TEXTS = 3  # a batch of at most this many texts takes the small-batch graph (see the module's docstring)


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise UserError(f"--backend {backend!r}: choose one of {', '.join(BACKENDS)}")


def check_on_cpu(backend: str, model: Any) -> None:
    """An ONNX backend runs on ONNX Runtime's CPU provider: one line when `model` is elsewhere."""
    if backend != "torch" and model.device.type != "cpu":
        raise UserError(f"--backend {backend} runs on the CPU (ONNX Runtime's CPU provider); the model is on {model.device}: pass --device cpu")


class Graph(Protocol):
    """A graph that computes a model's token states (sentune.core.onnx_runtime.OnnxRunner, which imports this module)."""

    backend: str  # onnx or onnx-int8
    digest: str  # the graph file's sha256: what the embedding cache keys its vectors by

    def __call__(self, features: dict, all_layers: bool = False) -> dict: ...


@dataclass(frozen=True)
class Runtime:
    """What computes a model's batches (see the module's docstring); `Runtime()` is plain PyTorch on the model's device."""

    backend: str = "torch"
    graph: Graph | None = None  # onnx / onnx-int8: computes every batch's token states
    small_batch_graph: Graph | None = None  # PyTorch on the CPU: the exact graph for a text or two
    lanes: Lanes | None = None  # PyTorch on the CPU: a batch in lanes side by side
    spread: bool = False  # a model on an unnumbered cuda: its batches shared out to every visible GPU

    def __post_init__(self) -> None:
        check_backend(self.backend)
        if (self.backend == "torch") != (self.graph is None):
            raise ValueError(f"a {self.backend} runtime {'needs' if self.graph is None else 'has no'} graph")
        if self.graph is not None and self.graph.backend != self.backend:
            raise ValueError(f"a {self.backend} runtime given a {self.graph.backend} graph")
        if self.graph is not None and (self.small_batch_graph is not None or self.lanes is not None or self.spread):
            raise ValueError("a graph computes every batch on the CPU: no small-batch graph, lanes or GPUs beside it")

    @property
    def small_batches(self) -> str:
        """What computes a batch of a text or two: 'onnx' (the exact graph), or the backend."""
        return "onnx" if self.small_batch_graph is not None else self.backend

    def runner_for(self, texts: int, *, exact_on_cpu: bool) -> Graph | None:
        """The graph that computes the token states of a call encoding `texts` distinct texts, or None for PyTorch.
        `exact_on_cpu`: the call runs on the CPU in fp32, where the small-batch graph gives PyTorch's vectors."""
        if self.graph is not None:
            return self.graph
        if exact_on_cpu and texts <= SMALL_BATCH_TEXTS:
            return self.small_batch_graph
        return None

    def devices(self, model: Any) -> list[torch.device]:
        """Where `model`'s sentences are encoded: its device; for a spread runtime with several GPUs visible and no
        data-parallel launcher, every GPU takes a share."""
        import torch

        from sentune.core.distributed import world_size

        device = model.device
        if not self.spread or device.type != "cuda" or world_size() > 1 or torch.cuda.device_count() < 2:
            return [device]
        return [device] + [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count()) if i != (device.index or 0)]

    def check_model(self, model: Any) -> None:
        """A graph runs on ONNX Runtime's CPU provider: one line when `model` is elsewhere."""
        check_on_cpu(self.backend, model)


PYTORCH = Runtime()
