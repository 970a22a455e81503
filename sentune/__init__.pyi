"""The types of sentune's Python API (its docstring: sentune/__init__.py)."""

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
