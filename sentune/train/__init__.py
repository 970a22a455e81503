"""Training: recipes (recipe.py), the one loop (trainer.py), composed stages (pipeline.py) and the
full-ensemble model (ensemble.py). Import the module you need; this package imports nothing heavy."""
