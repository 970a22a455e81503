"""Every bundled recipe names a registered method with known parameters, and every registered method
trains for a few steps on the tiny model through the one trainer."""

from __future__ import annotations

import inspect
import json

import pytest

from sentune.methods import METHODS, get_method
from sentune.train.recipe import RECIPE_DIR, load_recipe

get_method("sg")  # loads the built-in methods
RECIPES = sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))
TRAINABLE_ON_SENTENCES = ["sg", "sg-opt", "simcse", "mirror", "mirror-char", "flow-joint", "st-mnrl", "st-ct"]


@pytest.mark.parametrize("name", RECIPES)
def test_bundled_recipe_is_valid(name):
    recipe = load_recipe(name)
    method = get_method(recipe.method)
    accepted = set(inspect.signature(method.build_loss).parameters)
    loss_class_params = set()
    for cls in _loss_classes(method):
        loss_class_params |= set(inspect.signature(cls.__init__).parameters)
    unknown = set(recipe.params) - accepted - loss_class_params
    assert not unknown, f"{name}: parameters {unknown} are not accepted by {recipe.method}"


def _loss_classes(method):
    module = inspect.getmodule(method.build_loss)
    return [obj for _, obj in inspect.getmembers(module, inspect.isclass) if obj.__module__.startswith("sentune") and hasattr(obj, "forward")]


def test_every_method_is_covered_by_a_training_test():
    covered = set(TRAINABLE_ON_SENTENCES) | {"bt", "bt-sg-opt", "multitask", "ct", "nli", "sts-regression", "sed"}  # their own test files
    assert set(METHODS) <= covered, f"methods without a training test: {set(METHODS) - covered}"


@pytest.mark.parametrize("method", ["sg", "st-mnrl", "st-ct"])
def test_methods_not_trained_elsewhere(method, tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import train_tiny

    params = {"head_hidden": 16} if method == "sg" else {}
    run = train_tiny(tmp_path, method, tiny_model_dir, tiny_data_dir, params=params, training={"batch_size": 16})
    assert "STS-B" in json.loads((run / "results.json").read_text())["runs"]["model"]["tasks"]
