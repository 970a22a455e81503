"""`sentune export MODEL --to DIR [--quantize int8] [--check PAIRS|TASK]`: the model folder with its ONNX graphs.

DIR gets the model as `save()` writes it (loads with `SentenceTransformer(DIR)`), plus `onnx/model.onnx`,
`onnx/export.json` (the weights' digest, inputs, outputs) and with --quantize int8 `onnx/model_qint8_<arch>.onnx`,
the layout sentence-transformers' `backend="onnx"` reads. The check's table goes to `onnx/export_check.json` and to the
model card. Everything is written into a scratch folder first: a refused int8 export or a failed check leaves DIR
as it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentune.core.onnx_graph import export_onnx
from sentune.core.onnx_quantize import Int8Settings, int8_name, quantize_int8
from sentune.errors import UserError
from sentune.model_export.check import DEFAULT_MAX_LOSS, CheckReport, CheckSet, run_check

MIN_COSINE = 0.98  # int8 of all-MiniLM-L6-v2 with per-channel weights: 0.993 (benchmarks/results/onnx_int8.md)
DEFAULT_CHECK = "STS-B-dev"  # when the data directory is there and no --check is given


@dataclass
class ExportOptions:
    model: Any  # a name or folder, or a SentenceTransformer in memory (sentune.api.export)
    to: Path
    quantize: str | None = None  # None or "int8"
    check: Any = None  # a pairs file or a catalog task; ScoredPairs from sentune.api.export
    data: str | None = None
    max_loss: float = DEFAULT_MAX_LOSS
    force: bool = False
    keep_fp32: str | None = None
    trust_remote_code: bool = False


def resolve_check(options: ExportOptions) -> CheckSet | None:
    """The check set: --check, else STS-B dev when a data directory is found; int8 without any needs --force."""
    if options.check is not None and not isinstance(options.check, str):  # scored pairs given as objects (sentune.api.export)
        return CheckSet.of_scored(options.check, "the given pairs")
    if options.check:
        return CheckSet.parse(options.check, options.data)
    from sentune.data.catalog import resolve_data_dir

    try:
        resolve_data_dir(options.data)
    except UserError:
        if options.quantize and not options.force:
            raise UserError("--quantize int8 changes the vectors: give --check PAIRS|TASK to measure by how much (or --force to export unchecked)") from None
        return None
    return CheckSet.parse(DEFAULT_CHECK, options.data)


def check_target(options: ExportOptions, model_folder: Path | None) -> None:
    target = options.to
    if target.exists() and not target.is_dir():
        raise UserError(f"--to {target}: a file, not a folder")
    own = model_folder is not None and target.resolve() == model_folder.resolve()
    if target.is_dir() and any(target.iterdir()) and not own:
        raise UserError(f"--to {target}: the folder exists and is not empty; choose a new folder (or the model's own folder to add onnx/ to it)")


def export_model(options: ExportOptions) -> CheckReport | None:
    from sentune.core.embedding_cache import model_digest
    from sentune.core.models import check_model_name, load_model
    from sentune.modules.build import save_atomic

    named = isinstance(options.model, str)
    resolved = Path(check_model_name(options.model)) if named else None
    check_target(options, resolved if resolved is not None and resolved.is_dir() else None)
    settings = Int8Settings(keep_fp32=Int8Settings.parse_keep(options.keep_fp32))
    check = resolve_check(options)
    model = load_model(options.model, trust_remote_code=options.trust_remote_code, device="cpu") if named else options.model
    digest = model_digest(model)
    report: list[CheckReport] = []

    def add_graphs(folder: Path) -> str:
        graphs = {"onnx": export_onnx(model, folder / "onnx" / "model.onnx", digest)}
        if options.quantize == "int8":
            graphs["onnx-int8"] = quantize_int8(graphs["onnx"], folder / "onnx" / int8_name(), settings)
        card = f"\n\n## ONNX export (sentune export)\n\nGraphs: {', '.join(f'`{p.relative_to(folder)}`' for p in graphs.values())}"
        if options.quantize == "int8":
            card += f" (int8: {settings.describe()})"
        card += ". The pooling and any head run after the graph, in PyTorch.\n"
        if check is None:
            return card + "\nNot checked (no --check and no data directory).\n"
        result = run_check(model, check, graphs, folder, options.max_loss)
        report.append(result)
        (folder / "onnx" / "export_check.json").write_text(json.dumps(result.as_dict(), indent=2) + "\n")
        refuse(result, options)
        return card + "\n" + result.markdown() + "\n"

    save_atomic(model, options.to, finish=add_graphs)
    return report[0] if report else None


def refuse(report: CheckReport, options: ExportOptions) -> None:
    """An int8 graph that loses more than max_loss points of the check's metric, or whose vectors are no longer the
    model's (mean cosine to PyTorch below MIN_COSINE, whatever the metric says: a small check set can rise by chance),
    is an error unless --force."""
    for row in report.rows:
        if row.backend != "onnx-int8" or options.force:
            continue
        loss = -row.change
        if loss > report.max_loss:
            problem = f"int8 loses {loss:.2f} points of {report.metric} on {report.check} (limit --max-loss {report.max_loss:g})"
        elif row.cosine_mean < MIN_COSINE:
            problem = f"int8 vectors have a mean cosine of {row.cosine_mean:.4f} to PyTorch's on {report.check} (at least {MIN_COSINE} expected)"
        else:
            continue
        raise UserError(f"{problem}: nothing written; try --keep-fp32 ffn-output, or --force")
