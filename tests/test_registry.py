"""Every bundled recipe names a registered method with known parameters, and every registered method
trains for a few steps on the tiny model through the one trainer."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sentune.methods.registry import REGISTRY, get_method, method_names
from sentune.training.recipe import RECIPE_DIR, load_recipe

RECIPES = sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", RECIPES)
def test_bundled_recipe_is_valid(name):
    overrides = ["params.members=[a,b]"] if name == "005-sed" else []  # the pipeline fills SED's members
    recipe = load_recipe(name, overrides)
    resolved = get_method(recipe.method).resolve_params(recipe.params)
    for key, value in recipe.params.items():  # every value the recipe sets reaches the method as written
        assert getattr(resolved, key) == (tuple(value) if isinstance(value, list) and isinstance(getattr(resolved, key), tuple) else value), key
    with pytest.raises(ValueError, match="no_such_parameter"):
        load_recipe(name, [*overrides, "params.no_such_parameter=1"])


@pytest.mark.parametrize("name", method_names())
def test_every_method_declares_typed_documented_params(name):
    method = get_method(name)
    assert method.name == name and dataclasses.is_dataclass(method.params)
    for field in dataclasses.fields(method.params):
        assert field.metadata.get("help"), f"{name}: params.{field.name} has no one-line meaning"
    method.resolve_params({"members": ["m"]} if name == "sed" else {})  # the defaults are valid


def test_every_registered_method_has_a_tiny_training_setup(monkeypatch):
    """A method registered without a training set-up fails here (shown with a temporary registry entry)."""
    from method_setups import methods_without_setup

    assert methods_without_setup() == []
    monkeypatch.setitem(REGISTRY, "demo-unregistered-in-tests", REGISTRY["simcse"])
    assert methods_without_setup() == ["demo-unregistered-in-tests"]


# BERT; MPNet and RoBERTa-style (no token type ids); a real second family when SENTUNE_SECOND_MODEL names one (else
# skipped). So that plain `pytest -q` stays short, the slow selection (scripts/test.sh, CI) trains every method on RoBERTa
# and on MPNet, and every method on BERT; plain `pytest -q` trains on BERT one method of each way a method reads its data
# (dropout views, augmented views, the hidden layers, two towers, a denoising decoder, back-translation, a flow head,
# scored pairs, labelled triples, a teacher's margins, several tasks, an ensemble's teacher, judged queries) and on
# MPNet the one that contrasts dropout views. A method not named here trains on BERT in the slow selection.
FAMILIES = ("tiny_model_dir", "tiny_mpnet_dir", "tiny_roberta_dir", "second_model_dir")
BERT_IN_DEFAULT = ("simcse", "mirror-char", "sg-opt", "ct", "tsdae", "bt", "flow-joint", "cosent", "nli", "margin-mse", "multitask", "sed", "query-side")
MPNET_IN_DEFAULT = ("simcse",)


def method_families() -> list:
    slow = pytest.mark.slow
    default = {"tiny_model_dir": BERT_IN_DEFAULT, "tiny_mpnet_dir": MPNET_IN_DEFAULT, "second_model_dir": method_names()}
    return [
        (method, family) if method in default.get(family, ()) else pytest.param(method, family, marks=slow) for family in FAMILIES for method in method_names()
    ]


def test_the_default_selection_names_registered_methods():
    """BERT_IN_DEFAULT and MPNET_IN_DEFAULT name methods that exist: a renamed method cannot drop out of both."""
    assert set(BERT_IN_DEFAULT) | set(MPNET_IN_DEFAULT) <= set(method_names())


@pytest.mark.parametrize(("method", "family"), method_families())
def test_every_registered_method_trains_on_the_tiny_model(method, family, tiny_data_dir, tmp_path, request, capsys):
    import numpy as np
    from conftest import tiny_recipe, train_tiny
    from method_setups import tiny_training_args
    from sentence_transformers import SentenceTransformer

    from sentune.cli import main
    from sentune.methods.registry import get_method

    model = request.getfixturevalue(family)
    args = tiny_training_args(method, tmp_path, model)
    registered = get_method(method)
    reason = registered.cannot_train(SentenceTransformer(str(model), device="cpu"), registered.resolve_params(args.get("params")))
    if reason:  # a method that cannot train a family says so in one line, before any training
        recipe = tiny_recipe(tmp_path / "r.yaml", method, model, **args)
        assert main(["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)]) == 2
        assert capsys.readouterr().err.strip() == f"sentune: error: method {method}: {reason}; model {model}"
        return
    if "data" in args:  # given as Python data
        from method_setups import train_given

        run = train_given(tmp_path, method, model, tiny_data_dir, **args)
    else:
        run = train_tiny(tmp_path, method, model, tiny_data_dir, **args)
    results = json.loads((run / "results.json").read_text())
    assert results["meta"]["recipe"]["method"] == method
    assert np.isfinite(results["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"])
    assert SentenceTransformer(str(run / "model"), device="cpu").encode(["a man plays the guitar"]).shape[0] == 1


def test_search_supervised_batches_never_hold_a_text_twice():
    """mnrl-hard-negatives (adapt's supervised search candidate) trains a query once a pass, so the default sampler puts
    a query's rows of two passes into one batch, where the copy's document is one of the query's negatives; its
    sampler is sentence-transformers' NO_DUPLICATES, which does not."""
    import torch
    from datasets import Dataset
    from sentence_transformers.sampler import DefaultBatchSampler, NoDuplicatesBatchSampler
    from sentence_transformers.training_args import BatchSamplers
    from torch.utils.data import RandomSampler

    from sentune.training.loop import ordered_batch_sampler
    from sentune.training.trainer import batch_sampler_of

    assert batch_sampler_of(get_method("mnrl-hard-negatives"), "default") == BatchSamplers.NO_DUPLICATES
    assert batch_sampler_of(get_method("ct"), "default") is ordered_batch_sampler
    assert batch_sampler_of(get_method("cosent"), "default") == "default"
    passes = 4  # a row per query per pass, each with another of its documents (sentune.adaptation.hard_negatives)
    rows = [(f"query {q}", f"document {q}-{p}", f"negative {q}-{p}-a", f"negative {q}-{p}-b") for p in range(passes) for q in range(24)]
    columns = ("anchor", "positive", "negative_1", "negative_2")
    dataset = Dataset.from_dict({c: [r[i] for r in rows] for i, c in enumerate(columns)})

    def repeated_queries(batches) -> int:
        return sum(len(batch) - len({rows[i][0] for i in batch}) for batch in batches)

    distinct = NoDuplicatesBatchSampler(dataset, batch_size=8, drop_last=False, valid_label_columns=[], generator=torch.Generator().manual_seed(0))
    assert sum(len(b) for b in distinct) == len(rows) and repeated_queries(distinct) == 0
    default = DefaultBatchSampler(RandomSampler(dataset, generator=torch.Generator().manual_seed(0)), batch_size=8, drop_last=False)
    assert repeated_queries(default) > 0  # what the default sampler does with these rows
