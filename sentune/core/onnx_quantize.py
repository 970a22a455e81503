"""int8 exports: ONNX Runtime's dynamic quantization of the transformer's weight matrices.

What keeps the quality (`python benchmarks/speed/onnx_int8.py`: all-MiniLM-L6-v2, the cosine of each STS-B dev sentence's
int8 vector to its fp32 vector, with the STS scores and speeds of every choice): ONNX Runtime's default per-tensor
scales give a mean cosine of 0.964 and a minimum of 0.856; one scale per output channel of each weight matrix
(`per_channel`, the default) 0.993 and 0.975. Only MatMuls with a constant weight are quantized (the attention's
activation × activation products and the embeddings' Gather stay fp32). Keeping each layer's feed-forward output
projection in fp32 (`keep_fp32` = ffn-output, whose input is the GELU's long-tailed activations) raises the cosine to
0.996 at some speed. Activations are quantized per batch (dynamic quantization), so a vector moves slightly with the
sentences batched with it.

The instruction set: on CPUs with VNNI (avx512_vnni, avx_vnni) or on arm64, int8 weights × uint8 activations are
exact; on plain AVX2 the u8×s8 instruction can saturate, so weights keep 7 bits (`reduce_range`), as ONNX Runtime
advises. The file is named after it, as sentence-transformers names its exports: onnx/model_qint8_<arch>.onnx.
"""

from __future__ import annotations

import logging
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from sentune.errors import UserError

logger = logging.getLogger(__name__)

KEEP_FP32 = {  # a name -> the MatMul nodes it keeps in fp32 (node names of the graph sentune.core.onnx_graph writes)
    "ffn-output": re.compile(r"/layer\.\d+/output/dense/MatMul$"),
    "first-layer": re.compile(r"/layer\.0/"),
    "last-layer": None,  # resolved per graph: the highest layer index
}


def cpu_arch() -> str:
    """The instruction set the int8 kernels will use here: arm64, avx512_vnni, avx512, avx2 (or avx2 for anything else)."""
    if platform.machine().lower() in ("arm64", "aarch64"):
        return "arm64"
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:  # not Linux: assume the common case
        flags = set()
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        return "avx512_vnni"
    if "avx512f" in flags:
        return "avx512"
    return "avx2"


def int8_name(arch: str | None = None) -> str:
    return f"model_qint8_{arch or cpu_arch()}.onnx"


@dataclass(frozen=True)
class Int8Settings:
    per_channel: bool = True
    keep_fp32: tuple[str, ...] = ()
    reduce_range: bool | None = None  # None: from the instruction set (7-bit weights on plain AVX2 / AVX-512)

    def describe(self) -> str:
        kept = ", ".join(self.keep_fp32) or "nothing"
        return f"{'per-channel' if self.per_channel else 'per-tensor'} weights, {kept} kept in fp32"

    @classmethod
    def parse_keep(cls, text: str | None) -> tuple[str, ...]:
        names = tuple(n.strip() for n in (text or "").split(",") if n.strip() and n.strip() != "none")
        unknown = [n for n in names if n not in KEEP_FP32]
        if unknown:
            raise UserError(f"--keep-fp32 {text!r}: unknown {', '.join(unknown)}; choose from none, {', '.join(KEEP_FP32)}")
        return names


DEFAULT_INT8 = Int8Settings()


def excluded_nodes(path: Path, keep: tuple[str, ...]) -> list[str]:
    """The MatMul nodes of the graph at `path` that `keep` names."""
    import onnx

    names = [node.name for node in onnx.load(str(path), load_external_data=False).graph.node if node.op_type == "MatMul"]
    layers = [int(m.group(1)) for n in names if (m := re.search(r"/layer\.(\d+)/", n))]
    patterns = [KEEP_FP32[k] or re.compile(rf"/layer\.{max(layers, default=0)}/") for k in keep]
    return [n for n in names if any(p.search(n) for p in patterns)]


def quantize_int8(source: Path, target: Path, settings: Int8Settings = DEFAULT_INT8, arch: str | None = None) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    arch = arch or cpu_arch()
    reduce_range = settings.reduce_range if settings.reduce_range is not None else arch in ("avx2", "avx512")
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # its root-logger hint "run pre-processing before quantization" is for CNNs
    try:
        _quantize(quantize_dynamic, QuantType, source, target, settings, reduce_range)
    finally:
        root.setLevel(level)
    return target


def _quantize(quantize_dynamic, QuantType, source: Path, target: Path, settings: Int8Settings, reduce_range: bool) -> None:
    quantize_dynamic(
        str(source),
        str(target),
        op_types_to_quantize=["MatMul"],
        per_channel=settings.per_channel,
        reduce_range=reduce_range,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=excluded_nodes(source, settings.keep_fp32),
        extra_options={"MatMulConstBOnly": True},
    )
