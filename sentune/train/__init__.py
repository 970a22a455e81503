"""Training: recipes (recipe.py), the one loop (trainer.py), composed stages (pipeline.py) and the
full-ensemble model (ensemble.py). Import the module you need; this package imports nothing heavy."""

from sentune.core.callable_package import call_through

call_through(__name__, "sentune.api.train", "train")  # `sentune.train(...)` is the Python API even once this package is imported
