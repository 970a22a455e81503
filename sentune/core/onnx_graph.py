"""The transformer of a SentenceTransformer as an ONNX graph (`onnx/model.onnx`, the file sentence-transformers'
ONNX backend reads).

Inputs are the tokenizer's own (input_ids, attention_mask and, for BERT-like models, token_type_ids), batch and
sequence dynamic; outputs `last_hidden_state` (what sentence-transformers' ONNX backend reads) and `hidden_states.K`
for every layer K (embeddings = 0), which the multi-layer poolings (first-last, WK, ...) read. ONNX Runtime computes
only the outputs a run asks for, so the extra outputs cost nothing when unused.

torch's TorchScript-based exporter is used (`dynamo=False`): with torch 2.13 the dynamo exporter's graph of
all-MiniLM-L6-v2 gave token states up to 6.0 away from PyTorch's on a padded batch, the TorchScript one 4e-5.
Every export is checked the same way before it is kept (`verify`).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from sentune.errors import UserError

OPSET = 17
MAX_TOKEN_DIFFERENCE = 1e-3  # |ONNX - PyTorch| on any token state of the check batch; a broken export is off by far more
GRAPH_INFO = "export.json"  # beside model.onnx: the weights' digest it was exported from, its inputs and outputs
CHECK_TEXTS = [
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog, and then it runs back into the forest before anyone can see where it went.",
    "Short.",
]


class ExportError(UserError):
    """A model that cannot be exported, or an export that does not reproduce the model."""


def transformer_of(model):
    """The Hugging Face model inside the first module, or an ExportError naming what the first module is."""
    hf = getattr(model[0], "auto_model", None) or getattr(model[0], "model", None)
    if not isinstance(hf, torch.nn.Module) or not hasattr(hf, "config"):
        raise ExportError(f"the model's first module ({type(model[0]).__name__}) is not a Hugging Face transformer: only those export to ONNX")
    return hf


def input_names(model) -> list[str]:
    """The inputs the tokenizer produces that the transformer takes, in a fixed order."""
    produced = set(model.preprocess(["a"]))
    return [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in produced]


def output_names(model) -> list[str]:
    layers = transformer_of(model).config.num_hidden_layers + 1
    return ["last_hidden_state"] + [f"hidden_states.{k}" for k in range(layers)]


class _Graph(torch.nn.Module):
    """The traced function: positional inputs in `names` order -> (last layer, every layer)."""

    def __init__(self, hf, names: list[str]) -> None:
        super().__init__()
        self.hf, self.names = hf, names

    def forward(self, *inputs):
        out = self.hf(**dict(zip(self.names, inputs, strict=True)), output_hidden_states=True, return_dict=True)
        return (out.last_hidden_state, *out.hidden_states)


def export_onnx(model, path: Path, digest: str) -> Path:
    """Write model[0]'s transformer to `path` (with GRAPH_INFO beside it) and verify it against PyTorch."""
    from sentune.core.onnx_session import onnxruntime

    onnxruntime()  # installed, or one line saying how, before a minute of exporting
    hf = transformer_of(model)
    names, outputs = input_names(model), output_names(model)
    features = model.preprocess(CHECK_TEXTS)
    inputs = tuple(features[name].to(hf.device) for name in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in names + outputs}
    path.parent.mkdir(parents=True, exist_ok=True)
    was_training = hf.training
    hf.eval()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings: nothing a user can act on
            torch.onnx.export(
                _Graph(hf, names), inputs, str(path), input_names=names, output_names=outputs, dynamic_axes=axes, opset_version=OPSET, dynamo=False
            )
    finally:
        hf.train(was_training)
    info = {"digest": digest, "inputs": names, "outputs": outputs, "opset": OPSET, "torch": torch.__version__}
    (path.parent / GRAPH_INFO).write_text(json.dumps(info, indent=2) + "\n")
    verify(model, path)
    return path


def verify(model, path: Path) -> float:
    """The largest |ONNX - PyTorch| over every output of a padded check batch; an ExportError beyond MAX_TOKEN_DIFFERENCE."""
    from sentune.core.onnx_session import session

    hf = transformer_of(model)
    features = model.preprocess(CHECK_TEXTS)
    names, outputs = input_names(model), output_names(model)
    with torch.no_grad():
        out = hf(**{n: features[n].to(hf.device) for n in names}, output_hidden_states=True, return_dict=True)
    expected = [out.last_hidden_state, *out.hidden_states]
    got = session(path).run(outputs, {n: features[n].numpy() for n in names})
    mask = features["attention_mask"].numpy().astype(bool)  # padding positions carry no meaning
    difference = max(float(np.abs(g[mask] - e.cpu().numpy()[mask]).max()) for g, e in zip(got, expected, strict=True))
    if not difference <= MAX_TOKEN_DIFFERENCE:
        raise ExportError(f"{path}: the ONNX graph's token states differ from PyTorch's by {difference:.2g} (limit {MAX_TOKEN_DIFFERENCE:g}); not kept")
    return difference
