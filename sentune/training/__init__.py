"""Training: recipes (recipe.py), the one loop (trainer.py), composed stages (pipeline.py) and the
full-ensemble model (ensemble.py). The Python API's function is sentune.api.train.train; import the module you need, this
package imports nothing heavy."""
