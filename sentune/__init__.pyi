"""The types of sentune's Python API (its docstring: sentune/__init__.py)."""

# The types of the names sentune/__init__.py imports when first used: type checkers read this file instead of it, and the
# import graph of tests/test_architecture.py reads only the .py files, where the package root imports no module.

from sentune.api.adapt import AdaptResult as AdaptResult
from sentune.api.adapt import adapt as adapt
from sentune.api.analysis import Comparison as Comparison
from sentune.api.analysis import LayerwiseResult as LayerwiseResult
from sentune.api.analysis import PairTable as PairTable
from sentune.api.analysis import Report as Report
from sentune.api.analysis import TsneResult as TsneResult
from sentune.api.analysis import compare as compare
from sentune.api.analysis import layerwise as layerwise
from sentune.api.analysis import pairs as pairs
from sentune.api.analysis import report as report
from sentune.api.analysis import tsne as tsne
from sentune.api.data import CacheEntry as CacheEntry
from sentune.api.data import DataCheck as DataCheck
from sentune.api.data import cache_entries as cache_entries
from sentune.api.data import cache_folder as cache_folder
from sentune.api.data import check_data as check_data
from sentune.api.data import clear_cache as clear_cache
from sentune.api.data import download_data as download_data
from sentune.api.encode import encode as encode
from sentune.api.evaluate import EvalResults as EvalResults
from sentune.api.evaluate import evaluate as evaluate
from sentune.api.export import ExportResult as ExportResult
from sentune.api.export import export as export
from sentune.api.export import export_index as export_index
from sentune.api.index import Hit as Hit
from sentune.api.index import Index as Index
from sentune.api.models import ensemble as ensemble
from sentune.api.models import paraphrase as paraphrase
from sentune.api.models import pipeline as pipeline
from sentune.api.postprocess import fit_postprocessor as fit_postprocessor
from sentune.api.postprocess import flow as flow
from sentune.api.postprocess import whiten as whiten
from sentune.api.serve import serve_app as serve_app
from sentune.api.train import train as train

__version__: str
__all__ = [
    "AdaptResult",
    "CacheEntry",
    "Comparison",
    "DataCheck",
    "EvalResults",
    "ExportResult",
    "Hit",
    "Index",
    "LayerwiseResult",
    "PairTable",
    "Report",
    "TsneResult",
    "adapt",
    "cache_entries",
    "cache_folder",
    "check_data",
    "clear_cache",
    "compare",
    "download_data",
    "encode",
    "ensemble",
    "evaluate",
    "export",
    "export_index",
    "fit_postprocessor",
    "flow",
    "layerwise",
    "pairs",
    "paraphrase",
    "pipeline",
    "report",
    "serve_app",
    "train",
    "tsne",
    "whiten",
    "__version__",
]
