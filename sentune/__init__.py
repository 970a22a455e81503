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
- `sentune.whiten(model, fit_on)`, `sentune.flow(model, fit_on)` (`sentune.fit_postprocessor` for any post-processor),
  `sentune.ensemble(members)`, `sentune.pipeline("ct-sed-flow", model)` → the `SentenceTransformer`, as `sentune whiten`,
  `flow`, `ensemble`, `pipeline`; `sentune.paraphrase(sentences)` → `(sentence, paraphrase)` pairs, as `sentune
  paraphrase`; `sentune.export(model, to)` → `ExportResult` (`sentune.api.export.export`) and
  `sentune.export_index(index, path=...)` → its report, as `sentune export` and `sentune export-index`.

Progress is told through `logging` (the `sentune` logger) and tqdm bars (`show_progress=True`), never printed. Bad input
is a `sentune.errors.UserError` (a ValueError) naming the Python argument (`dev[7]: ...`, `time='30x': ...`), raised
before anything is written; a refused call leaves nothing behind.
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
    "whiten": "sentune.api.postprocess",
    "flow": "sentune.api.postprocess",
    "fit_postprocessor": "sentune.api.postprocess",
    "paraphrase": "sentune.api.models",
    "ensemble": "sentune.api.models",
    "pipeline": "sentune.api.models",
    "export": "sentune.api.export",
    "ExportResult": "sentune.api.export",
    "export_index": "sentune.api.export",
}

# one list: what the package exports is what it resolves
__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'sentune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
