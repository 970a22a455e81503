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

Progress is told through `logging` (the `sentune` logger) and tqdm bars (`show_progress=True`), never printed.
"""

# The types of the names sentune/__init__.py imports when first used: type checkers read this file instead of it, and the
# import graph of tests/test_architecture.py reads only the .py files, where the package root imports no module.

from sentune.api.adapt import AdaptResult as AdaptResult
from sentune.api.adapt import adapt as adapt
from sentune.api.evaluate import EvalResults as EvalResults
from sentune.api.evaluate import evaluate as evaluate
from sentune.api.index import Hit as Hit
from sentune.api.index import Index as Index
from sentune.api.serve import serve_app as serve_app
from sentune.api.train import train as train

__version__: str
__all__ = ["AdaptResult", "EvalResults", "Hit", "Index", "evaluate", "serve_app", "__version__"]
