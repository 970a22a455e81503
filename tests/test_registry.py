"""Every bundled recipe names a registered method with known parameters, and every registered method
trains for a few steps on the tiny model through the one trainer."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sentune.methods.registry import REGISTRY, get_method, method_names
from sentune.train.recipe import RECIPE_DIR, load_recipe

RECIPES = sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))
TRAINABLE_ON_SENTENCES = ["sg", "sg-opt", "simcse", "mirror", "mirror-char", "flow-joint", "st-mnrl", "st-ct"]


@pytest.mark.parametrize("name", RECIPES)
def test_bundled_recipe_is_valid(name):
    overrides = ["params.members=[a,b]"] if name == "005-sed" else []  # the pipeline fills SED's members
    recipe = load_recipe(name, overrides)
    method = get_method(recipe.method)
    assert set(recipe.params) <= {f.name for f in dataclasses.fields(method.params)}


@pytest.mark.parametrize("name", method_names())
def test_every_method_declares_typed_documented_params(name):
    method = get_method(name)
    assert method.name == name and dataclasses.is_dataclass(method.params)
    for field in dataclasses.fields(method.params):
        assert field.metadata.get("help"), f"{name}: params.{field.name} has no one-line meaning"
    method.resolve_params({"members": ["m"]} if name == "sed" else {})  # the defaults are valid


def test_every_method_is_covered_by_a_training_test():
    # their own test files (mnrl-pairs: GenQ in tests/test_adapt_retrieval.py)
    covered = set(TRAINABLE_ON_SENTENCES) | {"bt", "bt-sg-opt", "multitask", "ct", "nli", "sts-regression", "sed", "tsdae", "mnrl-pairs"}
    assert set(REGISTRY) <= covered, f"methods without a training test: {set(REGISTRY) - covered}"


@pytest.mark.parametrize("method", ["sg", "st-mnrl", "st-ct"])
def test_methods_not_trained_elsewhere(method, tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import train_tiny

    params = {"head_hidden": 16} if method == "sg" else {}
    run = train_tiny(tmp_path, method, tiny_model_dir, tiny_data_dir, params=params, training={"batch_size": 16})
    assert "STS-B" in json.loads((run / "results.json").read_text())["runs"]["model"]["tasks"]
