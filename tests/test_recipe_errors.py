"""Bad recipes fail before any work: exit 2, one line naming the key (the allowed keys or the expected type),
no run folder, no model loaded."""

from __future__ import annotations

import pytest

from sentune.cli import main

CASES = [
    (["params.nonexistent=3"], "params.nonexistent: unknown key; params takes: objective"),
    (["training.seed=abc"], "training.seed: expected an integer, got 'abc'"),
    (["training.batch_size=abc"], "training.batch_size: expected an integer, got 'abc'"),
    (["training.batch_size=-1"], "training.batch_size: expected a number >= 1, got -1"),
    (["method=sg-op"], "method: unknown method 'sg-op'; choose bt, bt-sg-opt, cosent, ct"),
    (["pooling=wk"], "pooling: 'wk' (SBERT-WK) is an evaluation-only pooling"),
    (["pooling=nope"], "unknown pooling 'nope'"),
    (["params.temperature=0"], "params.temperature: expected a number > 0, got 0"),
    (["params.objective=opt4"], "params.objective: expected one of 'base', 'opt1', 'opt2', 'opt3', got 'opt4'"),
    (["params.layers=[1,x]"], "params.layers: expected list of int | null"),
    (["training.lr=1"], "training.lr: unknown key; training takes: batch_size (int)"),
    (["eval.dev=STS-X"], "unknown task or group 'STS-X'"),
    (["train_data=nope"], "unknown sentence set 'nope'"),
    (["training.keep_checkpoints=maybe"], "training.keep_checkpoints: expected true or false, got 'maybe'"),
    (["training.max_steps=0"], "training.max_steps: 0 would train nothing: give the steps (>= 1), or -1 to train `epochs` passes"),
    (["training.max_steps=-2"], "training.max_steps: expected a number >= -1, got -2"),
    (["eval.dev=none"], "eval.dev: none needs training.checkpoint: last and training.patience: 0"),
]


@pytest.mark.parametrize(("overrides", "message"), CASES, ids=[c[0][0] for c in CASES])
def test_bad_recipe_fails_before_any_work(overrides, message, tmp_path, tiny_data_dir, capsys, monkeypatch):
    import sentune.core.models

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded for a recipe that cannot run")

    monkeypatch.setattr(sentune.core.models, "load_model_with_runtime", no_model)
    out = tmp_path / "run"
    code = main(["train", "001-sg-opt", *overrides, "--out", str(out), "--data", str(tiny_data_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("sentune: error: ") and message in err, err
    assert not out.exists(), "no run folder for a recipe that cannot run"


def test_pooling_a_method_cannot_train(tmp_path, tiny_data_dir, capsys):
    code = main(["train", "002-bert-cf", "pooling=model", "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)])
    err = capsys.readouterr().err
    assert code == 2 and "method 'flow-joint' trains mean, cls, max, first-last, not 'model'" in err
    assert not (tmp_path / "run").exists()


def test_method_that_needs_pairs_says_so(tmp_path, tiny_data_dir, capsys):
    recipe = tmp_path / "bt.yaml"
    recipe.write_text("method: bt\ntrain_data: stsb\n")
    assert main(["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)]) == 2
    assert "method 'bt' needs train_data: pairs:PATH" in capsys.readouterr().err


def test_debug_shows_the_traceback_and_bugs_keep_theirs(tmp_path, tiny_data_dir, monkeypatch):
    from sentune.training.recipe import RecipeError

    with pytest.raises(RecipeError):
        main(["--debug", "train", "001-sg-opt", "training.seed=abc", "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)])
    import sentune.data.catalog

    def bug(*args, **kwargs):
        raise KeyError("a bug, not a user error")

    monkeypatch.setattr(sentune.data.catalog, "resolve_data_dir", bug)
    with pytest.raises(KeyError):  # anything unexpected keeps its traceback
        main(["train", "001-sg-opt", "--out", str(tmp_path / "run2"), "--data", str(tiny_data_dir)])


@pytest.mark.slow
def test_quiet_training_shows_no_bar_and_one_row_is_refused(tiny_model_dir, tiny_data_dir, tmp_path, capfd):
    """Issue 28: --quiet hides the training bar (the dev evaluations are still printed); a training set of one row
    (no in-batch negatives: a zero loss every step) is refused in one line."""
    from conftest import tiny_recipe

    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, tasks="none", training={"max_steps": 2, "eval_steps": 1})
    assert main(["train", str(recipe), "--out", str(tmp_path / "quiet"), "--data", str(tiny_data_dir), "--quiet"]) == 0
    quiet = capfd.readouterr()
    assert "training (steps)" not in quiet.err and "it/s" not in quiet.err
    assert main(["train", str(recipe), "--out", str(tmp_path / "loud"), "--data", str(tiny_data_dir)]) == 0
    assert "training (steps)" in capfd.readouterr().err  # the same run without --quiet shows it: the check can fail

    one = tmp_path / "one.txt"
    one.write_text("a single sentence\n")
    assert main(["train", str(recipe), f"train_data=file:{one}", "--out", str(tmp_path / "one"), "--data", str(tiny_data_dir)]) == 2
    assert capfd.readouterr().err.strip().endswith(f"train_data file:{one}: 1 training row(s); training needs at least 2")
