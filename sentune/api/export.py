"""`sentune.export` and `sentune.export_index`: a model folder with its ONNX graphs checked against PyTorch, and a search
index written into Qdrant, from Python, as `sentune export` and `sentune export-index` (each command parses its options
and calls these)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sentune.api import given
from sentune.api.common import Model, model_name
from sentune.errors import UserError, names_python_arguments

if TYPE_CHECKING:
    from sentune.api.index import Index
    from sentune.model_export.check import CheckReport
    from sentune.search.export_qdrant import ExportReport

API_KEY_ENV = "QDRANT_API_KEY"  # the variable Qdrant's own tools read


@dataclass
class ExportResult:
    """An export: the model folder written (`path`: loads with `SentenceTransformer(path, backend="onnx")`, or
    `sentune ... --backend onnx --model PATH`) and the check of its graphs against PyTorch (`report`; None when
    unchecked), whose table `str()` gives."""

    path: Path
    report: CheckReport | None

    def __str__(self) -> str:
        return self.report.markdown() if self.report is not None else f"{self.path}: not checked"


@names_python_arguments()
def export(
    model: Model,
    to: str | Path,
    *,
    quantize: str | None = None,
    check: given.Given = None,
    data: str | Path | None = None,
    max_loss: float | None = None,
    force: bool = False,
    keep_fp32: str | None = None,
    trust_remote_code: bool = False,
) -> ExportResult:
    """Write `model` into the folder `to` with its ONNX graphs (`onnx/model.onnx`; with `quantize="int8"` also the int8
    graph), each checked against PyTorch, as `sentune export` (docs/serving.md). An int8 graph that loses more than
    `max_loss` points on the check is refused (nothing written) unless `force`.

    Args:
        model: a name (`"default"`), a folder, or a `SentenceTransformer` in memory.
        to: a new folder, or the model's own folder (onnx/ is added to it).
        check: what the graphs are checked on: a catalogued task (`"STS-B-dev"`, the default when a data directory is
            found), a pairs file (a Path), or `(text1, text2, score)` rows (a list, a DataFrame, a Dataset, ScoredPairs).
        max_loss: the points of the check's metric an int8 graph may lose (default 0.5).
        keep_fp32: int8: parts left unquantized, comma-separated: `ffn-output`, `first-layer`, `last-layer`.
    """
    if quantize not in (None, "int8"):
        raise UserError(f"--quantize {quantize}: int8 (or None)")
    if max_loss is not None and not max_loss >= 0:
        raise UserError(f"--max-loss {max_loss}: a number of points, 0 or more")
    if keep_fp32 and not quantize:
        raise UserError("--keep-fp32 applies to --quantize int8")
    if check is not None and not isinstance(check, str):
        from sentune.data.user_data import ScoredPairs

        check = os.fspath(check) if isinstance(check, os.PathLike) else given.as_kind(ScoredPairs, check, "check")
    from sentune.model_export.check import DEFAULT_MAX_LOSS
    from sentune.model_export.command import ExportOptions, export_model

    options = ExportOptions(
        model=model_name(model) or model,
        to=Path(to),
        quantize=quantize,
        check=check,
        data=os.fspath(data) if data is not None else None,
        max_loss=DEFAULT_MAX_LOSS if max_loss is None else max_loss,
        force=force,
        keep_fp32=keep_fp32,
        trust_remote_code=trust_remote_code,
    )
    return ExportResult(Path(to), export_model(options))


@names_python_arguments()
def export_index(
    index: str | Path | Index,
    to: str = "qdrant",
    *,
    path: str | Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
    collection: str | None = None,
    replace: bool = False,
    batch: int = 256,
    show_progress: bool = False,
) -> ExportReport:
    """Write a search index (its dense vectors, BM25 as sparse vectors, ids, texts and fusion weight) into Qdrant, as
    `sentune export-index` (docs/adapt.md): its local mode in the folder `path`, or the server at `url`.

    Args:
        index: an index folder (`sentune index`, a search `sentune adapt` run) or a `sentune.Index`.
        to: the engine: `"qdrant"`.
        api_key: the server's key (default: $QDRANT_API_KEY when `url` is given).
        collection: the collection's name (default: the index folder's name).
        replace: replace a collection of that name (otherwise refused).
        batch: documents a request.

    Returns the report (the collection, its points, dimension and BM25 terms; `str()` is the command's line).
    """
    if to != "qdrant":
        raise UserError(f"--to {to}: qdrant")
    if (path is None) == (url is None):
        raise UserError("give one of --path (Qdrant's local mode) and --url (a Qdrant server)")
    from sentune.search.export_qdrant import export_command

    folder = Path(index) if isinstance(index, str | os.PathLike) else index.path
    return export_command(
        folder,
        path=os.fspath(path) if path is not None else None,
        url=url,
        api_key=api_key or (os.environ.get(API_KEY_ENV) if url else None),
        collection=collection,
        replace=replace,
        batch=batch,
        quiet=not show_progress,
    )
