"""`sentune export`: ONNX graphs for CPU serving."""

from __future__ import annotations

import argparse
from pathlib import Path

from sentune.cli.base import Command


def cmd_export(args: argparse.Namespace) -> int:
    from sentune.api.export import export

    result = export(
        args.model,
        Path(args.to),
        quantize=args.quantize,
        check=args.check,
        data=args.data,
        max_loss=args.max_loss,
        force=args.force,
        keep_fp32=args.keep_fp32,
        trust_remote_code=args.trust_remote_code,
    )
    if result.report is not None:
        print(result.report.markdown())
    print(f"wrote {args.to} (onnx/ inside; SentenceTransformer({args.to!r}) or sentune ... --backend onnx --model {args.to})")
    return 0


def export_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="'default' (all-MiniLM-L6-v2), a hub id or a local path")
    p.add_argument("--to", required=True, help="the new model folder (or the model's own folder, to add onnx/ to it)")
    p.add_argument("--quantize", choices=["int8"], help="also write onnx/model_qint8_<arch>.onnx (ONNX Runtime dynamic quantization)")
    p.add_argument(
        "--keep-fp32",
        help="int8: parts left unquantized, comma-separated: ffn-output, first-layer, last-layer (default: none; see benchmarks/results/onnx_int8.md)",
    )
    p.add_argument("--check", help="pairs file (s1<TAB>s2<TAB>label) or a catalog task the graphs are checked on (default: STS-B-dev when data is found)")
    p.add_argument("--max-loss", type=float, default=None, help="points of the check's metric an int8 graph may lose (default 0.5)")
    p.add_argument("--force", action="store_true", help="write an int8 graph that loses more than --max-loss, or one that cannot be checked")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA), for --check TASK")
    p.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model (off by default)")


EXPORT = Command(
    "export", "write a model folder with ONNX graphs (fp32, --quantize int8) for fast CPU serving, checked against PyTorch", export_options, cmd_export
)

COMMANDS = (EXPORT,)
