"""sentune: make any BERT-like encoder a better sentence encoder, and measure it honestly.

The Python API (docs/python.md), each name imported when first used, so `import sentune` stays cheap:

- `sentune.evaluate(model, tasks=..., pooling=...)` → `EvalResults` (`.to_pandas()`), as `sentune eval`;
- `sentune.train(recipe, data=..., overrides=..., out=...)` → the trained `SentenceTransformer`, as `sentune train`
  (`sentune.api.train.train`);
- `sentune.adapt(model, corpus=..., dev=..., ...)` → `AdaptResult` (`.model`, `.choice`, `.reason`, `.candidates`,
  `.index`, `.save(path)`), as `sentune adapt` (`sentune.api.adapt.adapt`);
- `sentune.Index.build(model, corpus, fusion=..., ann=...)`, `sentune.Index.open(path)`, `index.search(query, top_k=...)`
  → `Hit`s, as `sentune index` and `sentune search`;
- `sentune.serve_app(index_or_model)` → the FastAPI application of `sentune serve`, to mount in one's own app.
- `sentune.encode(model, texts, pooling=...)` → an array, as `sentune encode`; `sentune.layerwise(model, task)`,
  `sentune.tsne(models)`, `sentune.pairs(models)` → results with `.save(out)` (and `.to_pandas()`, `.figure()`), as
  `sentune layerwise`, `tsne`, `pairs`; `sentune.compare(run_folders)` → a table, `sentune.report(run_folders, out)` → the
  pages written (`sentune.api.analysis`);
- `sentune.check_data(folder)`, `sentune.download_data(folder)`, `sentune.cache_entries()`, `sentune.clear_cache()`, as
  `sentune data check|download` and `sentune cache list|clear` (`sentune.api.data`).

Progress is told through `logging` (the `sentune` logger) and tqdm bars (`show_progress=True`), never printed.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it (their types: __init__.pyi, which type checkers read instead of this file)
_API = {
    "evaluate": "sentune.api.evaluate",
    "EvalResults": "sentune.api.evaluate",
    "train": "sentune.api.train",
    "adapt": "sentune.api.adapt",
    "AdaptResult": "sentune.api.adapt",
    "Index": "sentune.api.index",
    "Hit": "sentune.api.index",
    "serve_app": "sentune.api.serve",
    "encode": "sentune.api.encode",
    "layerwise": "sentune.api.analysis",
    "LayerwiseResult": "sentune.api.analysis",
    "tsne": "sentune.api.analysis",
    "TsneResult": "sentune.api.analysis",
    "pairs": "sentune.api.analysis",
    "PairTable": "sentune.api.analysis",
    "compare": "sentune.api.analysis",
    "Comparison": "sentune.api.analysis",
    "report": "sentune.api.analysis",
    "Report": "sentune.api.analysis",
    "check_data": "sentune.api.data",
    "DataCheck": "sentune.api.data",
    "download_data": "sentune.api.data",
    "cache_folder": "sentune.api.data",
    "cache_entries": "sentune.api.data",
    "CacheEntry": "sentune.api.data",
    "clear_cache": "sentune.api.data",
}

# `adapt` and `train` are left out: they are also the packages sentune.adapt and sentune.train, each callable as the API's
# function (sentune.api.common.call_through); their reference is sentune.api.adapt and sentune.api.train.
__all__ = [
    "AdaptResult",
    "CacheEntry",
    "Comparison",
    "DataCheck",
    "EvalResults",
    "Hit",
    "Index",
    "LayerwiseResult",
    "PairTable",
    "Report",
    "TsneResult",
    "cache_entries",
    "cache_folder",
    "check_data",
    "clear_cache",
    "compare",
    "download_data",
    "encode",
    "evaluate",
    "layerwise",
    "pairs",
    "report",
    "serve_app",
    "tsne",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'sentune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
