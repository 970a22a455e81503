"""The one trainer on the tiny model: recipes and overrides, end to end, NaN guard, and resume after a
kill (same final dev score and weights as an uninterrupted run; never a partial model folder)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import kill_when
from safetensors.numpy import load_file

from sentune.training.recipe import RecipeError, load_recipe

RECIPE = """method: sg-opt
model: {model}
train_data: wiki
params: {{temperature: 0.05, head_hidden: 32}}
training: {{batch_size: 8, max_steps: 40, eval_steps: 10, logging_steps: 5, patience: 0, seed: 3, warmup_ratio: 0.1}}
eval: {{dev: STS-B-dev, tasks: STS-B}}
"""


@pytest.fixture
def recipe_file(tmp_path, tiny_model_dir):
    path = tmp_path / "tiny.yaml"
    path.write_text(RECIPE.format(model=tiny_model_dir))
    return path


def test_recipe_overrides_and_errors(recipe_file):
    recipe = load_recipe(str(recipe_file), ["training.learning_rate=3e-5", "params.temperature=0.1", "training.seed=7"])
    assert recipe.training.learning_rate == 3e-5 and recipe.params["temperature"] == 0.1 and recipe.training.seed == 7
    assert recipe.name == "tiny"
    assert load_recipe(str(recipe_file), ["params.temperature=1e-3"]).params["temperature"] == 0.001  # YAML 1.1 would say '1e-3'
    with pytest.raises(RecipeError, match=r"tiny.yaml: params.tag: unknown key; params takes: objective"):
        load_recipe(str(recipe_file), ["params.tag=e5"])
    with pytest.raises(RecipeError, match=r"tiny.yaml: training.lr: unknown key; training takes: batch_size \(int\)"):
        load_recipe(str(recipe_file), ["training.lr=1"])
    with pytest.raises(RecipeError, match="expected key=value"):
        load_recipe(str(recipe_file), ["training.seed"])
    with pytest.raises(RecipeError, match="no such file, nor a bundled recipe"):
        load_recipe("no-such-recipe")
    assert load_recipe("001-sg-opt").training.adam_beta2 == 0.9


def _train(args, cwd, env, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "sentune.cli", "train", *args, "--allow-modified-data"],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


@pytest.fixture
def env(tiny_data_dir):
    return {**os.environ, "SENTUNE_DATA": str(tiny_data_dir), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _weights(run: Path) -> dict:
    return load_file(str(run / "model" / "model.safetensors"))


@pytest.mark.slow
def test_train_end_to_end_and_saved_model_reproduces_evaluation(recipe_file, tmp_path, env):
    from sentence_transformers import SentenceTransformer

    from sentune.data.catalog import select_tasks
    from sentune.tasks.evaluate import evaluate

    run = tmp_path / "run"
    proc = _train([str(recipe_file), "--out", str(run)], tmp_path, env)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    results = json.loads((run / "results.json").read_text())
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [m for m in metrics if "eval_sts-b-dev_spearman" in m]
    assert [m["step"] for m in evals] == [10, 20, 30, 40]
    assert not (run / "checkpoints").exists(), "a finished run drops its checkpoints unless training.keep_checkpoints"
    again = _train([str(recipe_file), "--out", str(run), "--resume"], tmp_path, env)
    assert again.wait(timeout=300) == 2 and "holds a finished run" in again.stderr.read()
    best = max(evals, key=lambda m: m["eval_sts-b-dev_spearman"])
    assert results["meta"]["best_checkpoint"]["step"] == best["step"]
    from sentune.methods.registry import get_method
    from sentune.training.recipe import validate_recipe
    from sentune.training.trainer import method_context, training_data_digest

    recipe = load_recipe(str(recipe_file))  # the rows the run read, in its order
    method = get_method(recipe.method)
    columns = method.data_view(method_context(recipe, validate_recipe(recipe), Path(env["SENTUNE_DATA"])))
    assert results["meta"]["training_data"] == training_data_digest(columns, method.columns)
    model = SentenceTransformer(str(run / "model"), device="cpu")
    again = evaluate(model, select_tasks("STS-B"), Path(env["SENTUNE_DATA"]), show_progress=False)
    assert again["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"] == pytest.approx(results["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"], abs=1e-6)
    card = (run / "model" / "README.md").read_text()
    assert "Trained with sentune" in card and "sg-opt" in card and "Self-Guided" in card


def test_training_data_digest_changes_with_order_content_and_columns():
    from sentune.training.trainer import training_data_digest

    columns = {"premise": ["a", "b", "c"], "hypothesis": ["x", "y", "z"], "label": [0, 1, 2]}
    names = ("premise", "hypothesis", "label")
    digest = training_data_digest(columns, names)
    assert digest["rows"] == 3 and len(digest["sha256"]) == 64
    assert training_data_digest({k: list(v) for k, v in columns.items()}, names) == digest  # a function of the values only
    reordered = {k: [v[0], v[2], v[1]] for k, v in columns.items()}  # the same rows, another order: other batches
    assert training_data_digest(reordered, names)["sha256"] != digest["sha256"]
    assert training_data_digest({**columns, "label": [0, 1, 1]}, names)["sha256"] != digest["sha256"]
    assert training_data_digest(columns, names[:2])["sha256"] != digest["sha256"]
    # a column boundary moved is another data set, not the same bytes
    assert training_data_digest({"a": ["xy"], "b": ["z"]}, ("a", "b")) != training_data_digest({"a": ["x"], "b": ["yz"]}, ("a", "b"))


@pytest.mark.slow
def test_resume_after_kill_matches_uninterrupted_run(recipe_file, tmp_path, env):
    straight = tmp_path / "straight"
    assert _train([str(recipe_file), "--out", str(straight)], tmp_path, env).wait(timeout=300) == 0

    killed = tmp_path / "killed"
    proc = _train([str(recipe_file), "--out", str(killed)], tmp_path, env)
    target = random.Random().choice([10, 20])  # leaves steps to run, even on a loaded machine
    # sometimes mid-step, sometimes mid-save
    kill_when(proc, killed / "checkpoints" / f"checkpoint-{target}" / "COMPLETE", what="training", after=random.uniform(0, 0.5))
    assert not (killed / "model").exists(), "a model folder must only appear once complete"

    resumed = _train([str(recipe_file), "--out", str(killed), "--resume"], tmp_path, env)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    assert not list(killed.glob(".model*")), "no temporary folder may be left behind"
    a, b = json.loads((straight / "results.json").read_text()), json.loads((killed / "results.json").read_text())
    assert a["meta"]["best_checkpoint"] == b["meta"]["best_checkpoint"]
    assert a["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"] == pytest.approx(b["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"], abs=1e-9)
    wa, wb = _weights(straight), _weights(killed)
    assert wa.keys() == wb.keys()
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


@pytest.mark.slow
def test_existing_run_needs_resume_and_nan_stops_with_clear_error(recipe_file, tmp_path, env):
    run = tmp_path / "run"  # τ = 1e-45 passes validation (> 0) but overflows float32 logits: NaN at step 0
    proc = _train([str(recipe_file), "--out", str(run), "params.temperature=1e-45", "training.max_steps=3"], tmp_path, env)
    assert proc.wait(timeout=300) == 2
    assert "the loss is nan at step 0" in proc.stderr.read()
    (run / "checkpoints").mkdir(exist_ok=True)  # as an earlier run leaves it
    proc = _train([str(recipe_file), "--out", str(run)], tmp_path, env)
    assert proc.wait(timeout=300) == 2 and "pass --resume" in proc.stderr.read()


def test_saved_config_from_before_an_option_existed_is_the_same_recipe(recipe_file, tmp_path):
    """A run's config.yaml written by an older sentune lacks newer keys: it must still resume."""
    import yaml

    from sentune.training.recipe import same_recipe

    recipe = load_recipe(str(recipe_file))
    saved = recipe.to_dict()
    del saved["training"]["keep_checkpoints"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved))
    assert same_recipe(path, recipe)
    saved["training"]["learning_rate"] = 1.0
    path.write_text(yaml.safe_dump(saved))
    assert not same_recipe(path, recipe)


def test_a_time_cap_is_not_part_of_the_recipe(recipe_file, tmp_path):
    """adapt --time resumes a killed training with the minutes left then: the cap differs, the run is the same."""
    import yaml

    from sentune.training.recipe import same_recipe

    recipe = load_recipe(str(recipe_file))
    saved = recipe.to_dict()
    saved["training"]["max_minutes"] = 13.9
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(saved))
    assert same_recipe(path, recipe)
    saved["training"]["epochs"] = (recipe.training.epochs or 1) + 1
    path.write_text(yaml.safe_dump(saved))
    assert not same_recipe(path, recipe)


def test_max_sentences_is_a_fixed_random_subset_in_file_order(tiny_data_dir):
    from conftest import method_context

    from sentune.data.catalog import load_sentences
    from sentune.methods.base import training_sentences

    everything = load_sentences("wiki", tiny_data_dir)
    recipe = load_recipe("005-ct", ["training.max_sentences=5"])
    picked = training_sentences(method_context("ct", data_dir=tiny_data_dir, training=recipe.training, train_data=recipe.train_data))
    assert len(picked) == 5 and set(picked) <= set(everything)
    assert picked == sorted(picked, key=everything.index)  # file order kept
    assert picked != everything[:5]  # not simply the head (the tiny corpus has more than 5 sentences)
    reseeded = load_recipe("005-ct", ["training.max_sentences=5", "training.seed=9"])
    assert training_sentences(method_context("ct", data_dir=tiny_data_dir, training=reseeded.training, train_data=reseeded.train_data)) == picked


@pytest.mark.slow
def test_user_pairs_select_last_checkpoint_and_time_budget(tiny_model_dir, tiny_data_dir, tmp_path):
    """eval.dev: pairs:PATH selects on a user's pairs (0/1 labels: average precision), training.checkpoint=last keeps the
    last step, training.max_minutes stops early and evaluates the step it stopped at; eval.tasks: none skips the final
    evaluation."""
    from conftest import tiny_recipe

    from sentune.data.user_data import read_scored_pairs
    from sentune.tasks.user_pairs import PairsEvaluator
    from sentune.training.trainer import train

    pairs = tmp_path / "dev.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{y}\n" for a, b, y in [("a man plays", "a man plays the guitar", 1), ("the dog runs", "stock market price", 0)] * 6))
    assert read_scored_pairs(pairs).metric == "average_precision"
    recipe_path = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 6, "eval_steps": 2, "checkpoint": "last"})
    recipe = load_recipe(str(recipe_path), [f"eval.dev=pairs:{pairs}", "eval.tasks=none"])
    results = train(recipe, tmp_path / "last", data_dir=tiny_data_dir)
    best = results["meta"]["best_checkpoint"]
    assert best["step"] == 6 and best["dev_metric"] == "average_precision" and "dev_spearman" not in best
    from sentence_transformers import SentenceTransformer

    saved = SentenceTransformer(str(tmp_path / "last" / "model"), device="cpu")
    assert best["dev_score"] == pytest.approx(PairsEvaluator(pairs).score(saved), abs=1e-6)  # the kept model is the last one
    assert results["runs"]["model"]["tasks"] == {}
    logged = [json.loads(line) for line in (tmp_path / "last" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "eval_dev_average_precision" in m] == [2, 4, 6]

    timed = load_recipe(str(recipe_path), [f"eval.dev=pairs:{pairs}", "eval.tasks=none", "training.max_minutes=1e-6", "training.checkpoint=best"])
    results = train(timed, tmp_path / "timed", data_dir=tiny_data_dir)
    logged = [json.loads(line) for line in (tmp_path / "timed" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged if "eval_dev_average_precision" in m] == [1]  # stopped after one step, which was evaluated
    assert results["meta"]["best_checkpoint"]["step"] == 1 and results["meta"]["training_seconds"] > 0

    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t1\nc\td\n")
    with pytest.raises(RecipeError, match=r"bad.tsv:2: malformed row"):
        load_recipe(str(recipe_path), [f"eval.dev=pairs:{bad}"])


def test_a_recipe_without_a_dev_task_trains_its_steps_and_keeps_the_last_unevaluated(tiny_model_dir, tiny_data_dir, tmp_path):
    """eval.dev: none (adapt's supervised recipes, fixed in advance): no evaluation while training, the last step kept
    and said so; a method that chooses on the dev task after training (CT's tower) is refused before any work."""
    from conftest import tiny_recipe

    from sentune.training.trainer import train

    recipe_path = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 4, "eval_steps": 2, "checkpoint": "last", "patience": 0})
    results = train(load_recipe(str(recipe_path), ["eval.dev=none", "eval.tasks=none"]), tmp_path / "run", data_dir=tiny_data_dir)
    assert results["meta"]["best_checkpoint"] == {"step": 4, "dev_score": None, "dev_metric": None}
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert logged and not any(key.startswith("eval_") for m in logged for key in m)
    assert "- last checkpoint: step 4, no dev evaluation" in (tmp_path / "run" / "model" / "README.md").read_text()
    ct = tiny_recipe(tmp_path / "ct.yaml", "ct", tiny_model_dir, training={"max_steps": 4, "checkpoint": "last", "patience": 0})
    with pytest.raises(RecipeError, match=r"eval.dev: none: method 'ct' makes a choice on the dev task after training"):
        load_recipe(str(ct), ["eval.dev=none"])


@pytest.mark.slow
def test_paused_rounds_train_the_same_weights_as_one_run_and_record_each_evaluations_cosines(tiny_model_dir, tiny_data_dir, tmp_path):
    """train(pause_at_step=…) stops with a checkpoint and a paused state; training again with resume goes on. Rounds
    4 + 4 steps end with the weights of one 8-step run (the schedule and data order are the planned ones), and a user's
    dev pairs leave each evaluation's cosines in dev_cosines/ (racing reads them)."""
    from conftest import tiny_recipe

    from sentune.tasks.user_pairs import PairsEvaluator
    from sentune.training.trainer import PAUSED, train

    pairs = tmp_path / "dev.tsv"
    pairs.write_text(
        "".join(f"{a}\t{b}\t{y}\n" for a, b, y in [("a man plays", "a man plays the guitar", 4.0), ("the dog runs", "stock market price", 0.5)] * 6)
    )
    recipe_path = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 8, "eval_steps": 2, "checkpoint": "last"})
    recipe = load_recipe(str(recipe_path), [f"eval.dev=pairs:{pairs}", "eval.tasks=none"])
    train(recipe, tmp_path / "straight", data_dir=tiny_data_dir)

    rounds = tmp_path / "rounds"
    first = train(recipe, rounds, data_dir=tiny_data_dir, pause_at_step=4)
    assert first["paused"]["step"] == 4 and (rounds / PAUSED).is_file() and not (rounds / "model").exists()
    assert sorted(p.name for p in (rounds / "dev_cosines").iterdir()) == ["step-2.npy", "step-4.npy"]
    second = train(recipe, rounds, data_dir=tiny_data_dir, resume=True, pause_at_step=12)  # beyond the last step: the run ends
    assert "paused" not in second and second["meta"]["best_checkpoint"]["step"] == 8 and not (rounds / PAUSED).exists()
    wa, wb = _weights(tmp_path / "straight"), _weights(rounds)
    for name in wa:
        np.testing.assert_allclose(wa[name], wb[name], atol=1e-6, err_msg=name)
    recorded = np.load(rounds / "dev_cosines" / "step-8.npy")
    from sentence_transformers import SentenceTransformer

    np.testing.assert_allclose(recorded, PairsEvaluator(pairs).similarities(SentenceTransformer(str(rounds / "model"), device="cpu")), atol=1e-5)


def test_gradient_checkpointing_is_on_while_training_and_changes_no_weight(tiny_model_dir, tiny_data_dir, tmp_path):
    """training.gradient_checkpointing recomputes activations in the backward pass (dropout's masks replayed): the same
    weights as without it; a run may switch it on when resumed (it is not part of the recipe's identity)."""
    from conftest import tiny_recipe
    from transformers import TrainerCallback

    from sentune.training.recipe import same_recipe
    from sentune.training.trainer import train

    seen: list[bool] = []

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            seen.append(model[0].auto_model.is_gradient_checkpointing)

    path = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 3, "eval_steps": 3, "device": "cpu"})
    weights = {}
    for on in (False, True):
        recipe = load_recipe(str(path), ["eval.tasks=none", f"training.gradient_checkpointing={str(on).lower()}"])
        train(recipe, tmp_path / f"run-{on}", data_dir=tiny_data_dir, callbacks=[Watch()])
        weights[on] = load_file(str(tmp_path / f"run-{on}" / "model" / "model.safetensors"))
    assert seen == [False] * 3 + [True] * 3
    assert weights[False].keys() == weights[True].keys()
    assert all(np.allclose(weights[False][k], weights[True][k], atol=1e-6) for k in weights[False])
    assert same_recipe(tmp_path / "run-False" / "config.yaml", load_recipe(str(path), ["eval.tasks=none", "training.gradient_checkpointing=true"]))


def test_adamw_updates_all_parameters_at_once_and_trains_the_weights_its_one_at_a_time_loop_trains(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    """`adamw_torch` runs PyTorch's multi-tensor (foreach) AdamW, faster on the CPU than its default one-parameter loop
    there, and the weights after training are the loop's, bit for bit (two parameter groups: with and without decay)."""
    import torch
    from conftest import tiny_recipe
    from sentence_transformers import SentenceTransformerTrainer

    from sentune.training.trainer import SentuneTrainer, train_in_memory

    settings = {"max_steps": 6, "eval_steps": 6, "checkpoint": "last", "patience": 0, "weight_decay": 0.01, "learning_rate": 1e-3}
    recipe = load_recipe(str(tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training=settings)), ["eval.dev=none", "eval.tasks=none"])
    chosen = []
    ours = SentuneTrainer.get_optimizer_cls_and_kwargs

    def spy(self, args, model=None):
        found = ours(self, args, model)
        chosen.append(found[1].get("foreach"))
        return found

    monkeypatch.setattr(SentuneTrainer, "get_optimizer_cls_and_kwargs", spy)
    together = train_in_memory(recipe, data_dir=tiny_data_dir, show_progress=False).model.state_dict()
    monkeypatch.setattr(SentuneTrainer, "get_optimizer_cls_and_kwargs", SentenceTransformerTrainer.get_optimizer_cls_and_kwargs)
    one_by_one = train_in_memory(recipe, data_dir=tiny_data_dir, show_progress=False).model.state_dict()
    assert chosen == [True]
    assert together.keys() == one_by_one.keys() and all(torch.equal(together[k], one_by_one[k]) for k in together)


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
def test_a_paused_run_resumes_with_its_early_stopping_count(tiny_model_dir, tiny_data_dir, tmp_path):
    """Early stopping counts the evaluations without a new best across rounds: a run paused (on its evaluation grid)
    and resumed, as racing does, stops at the step where the same run trained in one go stops, not `patience`
    evaluations later. The dev score is made to fall at each evaluation, so the first evaluation stays the best."""
    from conftest import tiny_recipe
    from transformers import TrainerCallback

    from sentune.training.trainer import train

    class Falling(TrainerCallback):  # runs before the early-stopping callback, which reads the same metrics
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            metrics[args.metric_for_best_model] = -float(state.global_step)

    recipe_path = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 12, "eval_steps": 2, "patience": 2, "checkpoint": "best"})
    recipe = load_recipe(str(recipe_path), ["eval.tasks=none"])
    straight = train(recipe, tmp_path / "straight", data_dir=tiny_data_dir, callbacks=[Falling()])
    train(recipe, tmp_path / "rounds", data_dir=tiny_data_dir, callbacks=[Falling()], pause_at_step=4)
    rounds = train(recipe, tmp_path / "rounds", data_dir=tiny_data_dir, callbacks=[Falling()], resume=True, pause_at_step=8)

    def evaluated(run: Path) -> list[int]:
        return [m["step"] for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if any(k.startswith("eval_") for k in m)]

    assert evaluated(tmp_path / "straight") == [2, 4, 6]  # the best at step 2, then two evaluations without a new one
    assert evaluated(tmp_path / "rounds") == [2, 4, 6]
    assert "paused" not in rounds and rounds["meta"]["best_checkpoint"]["step"] == straight["meta"]["best_checkpoint"]["step"] == 2


def test_the_trained_model_reads_as_far_as_the_model_it_started_from(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    """training.max_seq_length cuts the training rows only: the model saved, returned and evaluated on dev (while
    training too) reads as many tokens as the model loaded for it, so that a search candidate trained on 128 tokens
    does not rank documents by their first 128."""
    from conftest import tiny_recipe
    from sentence_transformers import SentenceTransformer

    from sentune.training.trainer import AtReadingLength, train, train_in_memory

    reads = SentenceTransformer(str(tiny_model_dir), device="cpu").max_seq_length
    assert reads > 6
    recipe_path = tiny_recipe(
        tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 2, "eval_steps": 1, "checkpoint": "last", "max_seq_length": 6}
    )
    recipe = load_recipe(str(recipe_path), ["eval.tasks=none"])
    seen: list[int] = []

    class Spy(AtReadingLength):  # records the length each dev evaluation encodes at
        def __call__(self, model, *args, **kwargs):
            result = super().__call__(model, *args, **kwargs)
            seen.append(self.evaluator.last_length)
            return result

    class Measured:
        primary_metric = "spearman"

        def __call__(self, model, *args, **kwargs):
            self.last_length = model.max_seq_length
            return {"spearman": 0.5}

    monkeypatch.setattr("sentune.training.trainer.AtReadingLength", lambda evaluator, tokens: Spy(Measured(), tokens))
    train(recipe, tmp_path / "run", data_dir=tiny_data_dir)
    monkeypatch.undo()
    assert seen == [reads, reads]  # steps 1 and 2, at the reading length; the last step's score is the one logged there, not a third evaluation
    assert SentenceTransformer(str(tmp_path / "run" / "model"), device="cpu").max_seq_length == reads
    kept = train_in_memory(load_recipe(str(recipe_path), ["eval.tasks=none", "eval.dev=none"]), data_dir=tiny_data_dir, show_progress=False)
    assert kept.model.max_seq_length == reads

    class Short:  # the wrapper gives back the training length after each call, and passes every other attribute on
        primary_metric, title = "spearman", "STS-B dev"

        def __call__(self, model, *args, **kwargs):
            return {"spearman": float(model.max_seq_length)}

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model.max_seq_length = 6
    wrapped = AtReadingLength(Short(), reads)
    assert wrapped(model) == {"spearman": float(reads)} and model.max_seq_length == 6
    assert wrapped.primary_metric == "spearman" and wrapped.title == "STS-B dev"


@pytest.mark.parametrize("strategy, evaluates", [("no", False), ("steps", True)])
def test_a_stop_for_time_or_a_pause_asks_for_an_evaluation_only_when_the_run_has_a_dev_set(strategy, evaluates):
    """adapt's supervised candidate trains without a dev set (eval_strategy "no"): a training.max_minutes stop or a
    race's pause that asked for an evaluation made the Trainer raise 'Evaluation requires specifying an eval_dataset'."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from sentune.training.loop import PauseAt, TimeBudget

    args = TrainingArguments(output_dir="unused", eval_strategy=strategy, eval_steps=10, report_to=[])
    state = TrainerState()
    state.global_step, state.max_steps = 5, 100
    for callback in (TimeBudget(minutes=0.0), PauseAt(step=5)):
        control = TrainerControl()
        callback.on_step_end(args, state, control)
        assert control.should_training_stop and control.should_save and control.should_evaluate is evaluates
