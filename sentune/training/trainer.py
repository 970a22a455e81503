"""The one training loop: sentence-transformers' Trainer (it optimises the loss's own parameters too, so
a projection head or a second model inside a loss is trained) plus what every method needs:
dev evaluation every N steps with early stopping and best-checkpoint selection, a NaN guard, a
metrics log, checkpoints that a killed run can resume from, and an atomic final save.

Run folder:
  config.yaml        the resolved recipe (a resumed run must use the same one)
  metrics.jsonl      one JSON line per log / evaluation
  checkpoints/       trainer checkpoints; a COMPLETE file marks one whose save finished
  dev_cosines/       with a user's pairs or queries as dev (eval.dev: pairs:PATH, queries:DIR): each evaluation's
                     cosines (pairs) or per-query nDCG@10 (queries), step-N.npy
  paused.json        a run stopped at `pause_at_step` (train() returns its state; train again to go on)
  model/             the selected model, sentence-transformers format, with a model card
  results.json/.md   the final evaluation of that model
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load_file
from sentence_transformers.evaluation import SentenceEvaluator
from transformers import EarlyStoppingCallback, ProgressCallback, TrainerCallback, set_seed

from sentune.core.cache import cache_dir as default_cache_dir
from sentune.core.device import resolve_device
from sentune.core.distributed import rank, world_size
from sentune.core.models import load_model
from sentune.core.results import save_results, write_atomic
from sentune.data.catalog import select_tasks
from sentune.data.kinds import Kind, RetrievalSet, ScoredPairs
from sentune.data.tables import data_label
from sentune.errors import UserError
from sentune.methods.base import Method, TrainContext
from sentune.methods.registry import get_method
from sentune.modules.build import ends_normalized, normalized, save_atomic, with_pooling
from sentune.tasks.dev import dev_evaluator
from sentune.tasks.evaluate import evaluate
from sentune.tasks.user_pairs import PairsEvaluator
from sentune.training.loop import (
    LOSS_STATE,
    STEP_SCHEDULES,
    TRAINING_TIME,
    FreeMemory,
    PauseAt,
    RunCallback,
    SentuneTrainer,
    TidyProgress,
    TimeBudget,
    early_stopped,
    latest_complete_checkpoint,
    ordered_batch_sampler,
    training_args,
)
from sentune.training.recipe import NO_DEV, NO_TASKS, Recipe, validate_recipe, written
from sentune.training.run_folder import TrainingError, check_run_dir

logger = logging.getLogger(__name__)

PAUSED = "paused.json"


def training_data_digest(columns: dict[str, list], names: tuple[str, ...] | list[str]) -> dict:
    """Rows and sha256 of the training columns in the order the Trainer reads them. The seeded shuffle draws batches by
    index, so the same rows in another order train another model: a repeat of a run that does not reproduce it says
    here whether its data (order included) changed: the `nli` set read file by file instead of split by split moves
    005-nli's losses from the first logged step (sed.md)."""
    import hashlib

    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode())
        digest.update(json.dumps(columns[name], ensure_ascii=False, default=str).encode())
    return {"rows": len(columns[names[0]]) if names else 0, "sha256": digest.hexdigest()}


def method_context(
    recipe: Recipe,
    params,
    data_dir: Path,
    dev_score=None,
    show_progress: bool = True,
    device: str = "cpu",
    allow_modified: bool = False,
    data: Kind | None = None,
) -> TrainContext:
    # Caches are keyed by content (model weights, sentences, settings), so runs may share one folder:
    # Seeds and ablations of one recipe reuse e.g. SG's frozen views instead of recomputing them.
    cache_dir = default_cache_dir()  # SENTUNE_CACHE, or the user's cache folder: never the run folder
    return TrainContext(
        recipe=recipe,
        params=params,
        data_dir=data_dir,
        cache_dir=cache_dir,
        dev_score=dev_score,
        show_progress=show_progress,
        device=device,
        allow_modified=allow_modified,
        data=data,
    )


def training_device(recipe: Recipe, device: str | None = None) -> str:
    """Where a run trains: the recipe's training.device, or when it says auto, the device the command chose (`device`;
    None: CUDA when present). Resolved once per run and passed to everything the run loads."""
    return resolve_device(device if recipe.training.device == "auto" else recipe.training.device, "training.device")


def build_training(
    recipe: Recipe,
    data_dir: Path,
    *,
    device: str,
    dev_score=None,
    show_progress: bool = True,
    allow_modified: bool = False,
    data: Kind | None = None,
    dev_data: ScoredPairs | RetrievalSet | None = None,
):
    """(method, model, training columns, loss, the method's context, the tokens the model read before the recipe's
    max_seq_length was set, whether the base model's pipeline ends in Normalize) for a recipe, as every run starts: the model on `device` with
    the method's pooling and the recipe's max_seq_length, the method's view of the training data (`data`, a data kind
    of sentune.data.kinds; None: the recipe's train_data) and its loss. The one place this is set up (training, and
    benchmarks/speed/gpu_bench.py's step timings). `dev_data`: the dev set given as its kind (the recipe's eval.dev is
    then not read)."""
    params = validate_recipe(recipe, data=data, dev=dev_data)
    method = get_method(recipe.method)
    base = load_model(recipe.model, device=device)
    model = with_pooling(base, recipe.pooling or method.pooling)
    reason = method.cannot_train(model, params)
    if reason:
        raise UserError(f"method {method.name}: {reason}; model {recipe.model}")
    reads = model.max_seq_length  # what it reads once trained (Setup.reads)
    if recipe.training.max_seq_length:
        model.max_seq_length = recipe.training.max_seq_length
    ctx = method_context(recipe, params, data_dir, dev_score, show_progress, device, allow_modified, data)  # the caches and dev evaluation run there too
    columns = method.data_view(ctx)
    return method, model, columns, method.build_loss(model, columns, ctx), ctx, reads, ends_normalized(base)


@dataclass
class Setup:
    """What a run trains, set up the same way whether it keeps checkpoints or not (_set_up)."""

    method: Method
    model: Any
    columns: dict
    loss: torch.nn.Module
    ctx: TrainContext
    dataset: Any  # the datasets.Dataset of the method's columns
    evaluator: Any  # the dev evaluation while training; None without one
    learning_rates: dict[str, float]
    device: str
    allow_modified: bool  # catalogued tasks may differ from the catalog (--allow-modified-data)
    # The tokens the trained model reads: the loaded model's max_seq_length. The recipe's max_seq_length truncates the
    # training rows only (a cost: SimCSE trains on 32 tokens); the model handed back, scored, saved and evaluated on dev
    # reads as far as the model it started from, so that a run trained at 128 tokens does not rank documents by
    # their first 128.
    reads: int | None = None
    # Whether the base model's pipeline ends in Normalize (all-MiniLM-L6-v2): a method's pooling trains the raw vector
    # (CT's dot product needs it), and the model a run saves normalises again as its base did (_finalized).
    base_normalizes: bool = False


def _set_up(
    recipe: Recipe, data_dir: Path, run_dir: Path, *, device: str | None, show_progress: bool, allow_modified: bool = False, data=None, dev_data=None
) -> Setup:
    params = validate_recipe(recipe, data=data, dev=dev_data)
    set_seed(recipe.training.seed)
    dev_set = written(recipe.eval.dev, "eval.dev") if dev_data is None else dev_data  # a dev set given as its kind is read from no file
    dev = None if dev_set == NO_DEV else dev_evaluator(dev_set, data_dir, allow_modified=allow_modified)
    if isinstance(dev, PairsEvaluator):
        dev.record = run_dir / "dev_cosines"
    device = training_device(recipe, device)
    dev_score = dev.score if dev else None
    method, model, columns, loss, ctx, reads, base_normalizes = build_training(
        recipe, data_dir, device=device, dev_score=dev_score, show_progress=show_progress, allow_modified=allow_modified, data=data, dev_data=dev_data
    )
    from datasets import Dataset

    dataset = Dataset.from_dict({name: columns[name] for name in method.columns})
    if len(dataset) < 2:  # one row: no in-batch negatives, a zero loss at every step that looks like training
        given = recipe.train_data if data is None else f"(the {data.name} given)"
        raise TrainingError(f"train_data {given}: {len(dataset)} training row(s); training needs at least 2")
    evaluator = method.evaluator(loss, ctx, "dev") if method.evaluator else dev
    if evaluator is not None and reads != model.max_seq_length:
        evaluator = AtReadingLength(evaluator, reads)
    learning_rates = method.learning_rates(params) if method.learning_rates else {}
    return Setup(method, model, columns, loss, ctx, dataset, evaluator, learning_rates, device, allow_modified, reads, base_normalizes)


def train(
    recipe: Recipe,
    run_dir: Path,
    *,
    data_dir: Path,
    resume: bool = False,
    command: str | None = None,
    callbacks: list[TrainerCallback] | None = None,
    pause_at_step: int | None = None,
    show_progress: bool = True,
    device: str | None = None,
    allow_modified: bool = False,
    data: Kind | None = None,
    dev: ScoredPairs | RetrievalSet | None = None,
) -> dict:
    """Train `recipe` into `run_dir`; returns the final evaluation results. The recipe is validated and the
    folder checked before anything is written. `callbacks`: more transformers TrainerCallbacks (e.g. a step timer).
    `pause_at_step`: stop there with a checkpoint and return {"paused": {"step", "best", "training_seconds"}} instead,
    unless the run ends first (its last step, early stopping, training.max_minutes); train again with resume to go on.
    `show_progress`: the training bar (False for --quiet). `device`: the command's device, used when the recipe's
    training.device is auto (sentune.training.trainer.training_device). `allow_modified`: catalogued tasks (dev, training
    sets, the final evaluation) may differ from the catalog (--allow-modified-data). `data`: the training data as a data
    kind (sentune.data.kinds), instead of reading the recipe's train_data (which then describes them: Kind.describe);
    `dev`: likewise the dev set, as scored pairs or queries, instead of the recipe's eval.dev."""
    run_dir = Path(run_dir)
    validate_recipe(recipe, data=data, dev=dev)
    check_run_dir(run_dir, recipe, resume)
    run_dir.mkdir(parents=True, exist_ok=True)
    if rank() == 0:
        write_atomic(run_dir / "config.yaml", yaml.safe_dump(recipe.to_dict(), sort_keys=False))
    setup = _set_up(recipe, data_dir, run_dir, device=device, show_progress=show_progress, allow_modified=allow_modified, data=data, dev_data=dev)
    checkpoint = latest_complete_checkpoint(run_dir / "checkpoints") if resume else None
    pause = PauseAt(pause_at_step)
    trainer, best = _fit(recipe, setup, run_dir, checkpoint, [pause, *(callbacks or [])], show_progress)
    if rank() != 0:  # data parallel: the first process selects, evaluates and saves; the others are done
        return {}
    if pause.paused and not early_stopped(trainer) and not trainer.stopped_by_time:
        state = {"step": trainer.state.global_step, "best": best, "training_seconds": trainer.training_seconds}
        write_atomic(run_dir / PAUSED, json.dumps(state))
        return {"paused": state}
    (run_dir / PAUSED).unlink(missing_ok=True)
    results = _save_run(recipe, setup, _finalized(setup), best, trainer.training_seconds, run_dir, data_dir, command, checkpoint)
    if not recipe.training.keep_checkpoints:  # a finished run resumes nothing; each checkpoint is optimizer + weights
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return results


@dataclass
class TrainedModel:
    """A run trained by train_in_memory: the model as training left it (finalized), its last step and dev score,
    and its training time."""

    model: Any
    best: dict
    training_seconds: float


def train_in_memory(
    recipe: Recipe,
    run_dir: Path | None = None,
    *,
    data_dir: Path,
    show_progress: bool = True,
    device: str | None = None,
    command: str | None = None,
    allow_modified: bool = False,
    data: Kind | None = None,
    dev: ScoredPairs | RetrievalSet | None = None,
) -> TrainedModel:
    """Train `recipe` through the same loop as train(), without checkpoints, and return the model. For runs that
    nothing resumes (a killed one is trained again from its start): a model only its caller reads (sentune adapt's
    cross-fitted folds, each scored on its held-out fold) pays for no save and no load. `run_dir`: the run is also
    saved there as train() saves a finished one (config.yaml, metrics.jsonl, model/, results.json); None: nothing is
    written. One process; the recipe keeps its last step (choosing a best checkpoint needs the checkpoints). `data`,
    `dev`: as train()'s."""
    if recipe.training.checkpoint != "last" or recipe.training.patience > 0:
        raise ValueError(f"{recipe.name}: training without checkpoints keeps the last step (training.checkpoint: last, patience: 0)")
    validate_recipe(recipe, data=data, dev=dev)
    with tempfile.TemporaryDirectory(prefix="sentune-run-") as scratch:
        folder = Path(scratch) if run_dir is None else Path(run_dir)
        if run_dir is not None:
            check_run_dir(folder, recipe, resume=False)
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / "config.yaml", yaml.safe_dump(recipe.to_dict(), sort_keys=False))
        setup = _set_up(recipe, data_dir, folder, device=device, show_progress=show_progress, allow_modified=allow_modified, data=data, dev_data=dev)
        trainer, best = _fit(recipe, setup, folder, None, [], show_progress, checkpoints=False)
        finalized = _finalized(setup, keep_normalize=False)
        if run_dir is not None:
            _save_run(recipe, setup, finalized, best, trainer.training_seconds, folder, data_dir, command, None)
        shutil.rmtree(folder / "checkpoints", ignore_errors=True)  # made empty by the Trainer
    return TrainedModel(finalized[0], best, trainer.training_seconds)


def _last_step_score(trainer, evaluator, model, primary: str | None) -> float | None:
    """The dev score of the weights the last step left: the one logged at that step when the run evaluated there (a
    search run's dev evaluation encodes the selection pool: minutes), else evaluated now; None without a dev task."""
    if evaluator is None:
        return None
    key = f"eval_{primary}"
    logged = [entry[key] for entry in trainer.state.log_history if key in entry and entry.get("step") == trainer.state.global_step]
    return logged[-1] if logged else evaluator(model)[primary]


def _finalized(setup: Setup, keep_normalize: bool = True) -> tuple[Any, dict | None]:
    """The model to keep, reading as far as the model it started from (Setup.reads), and what the method's finalize
    says it did (e.g. compile a flow head, keep CT's better tower, choose SED's pooling). `keep_normalize`: a base
    model that ends in Normalize gives a model that does (the same cosines; unit vectors, as a vector database ranking
    by dot product expects). sentune adapt's candidates, trained in memory, keep the raw vector they are scored on;
    the chosen one gets it back when it is saved."""
    model, note = (setup.model, None) if setup.method.finalize is None else setup.method.finalize(setup.model, setup.loss, setup.ctx)
    if keep_normalize and setup.base_normalizes:
        model = normalized(model)
    model.max_seq_length = setup.reads
    return model, note


class AtReadingLength(SentenceEvaluator):
    """A dev evaluator scoring the model at the length it will read once trained (Setup.reads), not at the length
    its training rows are cut to; every other attribute is the evaluator's (a SentenceEvaluator, so that the Trainer
    takes it as one)."""

    def __init__(self, evaluator, tokens: int | None) -> None:  # no super().__init__: its attributes are the evaluator's
        self.evaluator, self.tokens = evaluator, tokens

    def __getattr__(self, name: str):
        if name in ("evaluator", "tokens"):  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.evaluator, name)

    def __call__(self, model, *args, **kwargs):
        training = model.max_seq_length
        model.max_seq_length = self.tokens
        try:
            return self.evaluator(model, *args, **kwargs)
        finally:
            model.max_seq_length = training


def _save_run(
    recipe: Recipe, setup: Setup, finalized: tuple[Any, dict | None], best: dict, seconds: float, run_dir: Path, data_dir: Path, command, checkpoint
) -> dict:
    """Evaluate the kept model on the recipe's tasks and save it and its results into `run_dir` (results.json last)."""
    model, note = finalized
    method = setup.method
    tasks = [] if recipe.eval.tasks == NO_TASKS else select_tasks(recipe.eval.tasks)
    results = evaluate(
        model, tasks, data_dir, preset=recipe.eval.preset, show_progress=False, model_name=str(run_dir / "model"), allow_modified=setup.allow_modified
    )
    results["meta"].update(
        {
            "recipe": recipe.to_dict(),
            "best_checkpoint": best,
            "resumed_from": checkpoint.name if checkpoint else None,
            "training_seconds": seconds,  # summed over resumes
            "training_device": setup.device,
            "training_precision": recipe.training.precision,
            "processes": world_size(),
            "training_data": training_data_digest(setup.columns, method.columns),
        }
    )
    if note:
        results["meta"]["finalize"] = note
    if method.evaluator:  # the method's own metrics of the selected model, dev and test
        results["meta"]["method_metrics"] = {split: method.evaluator(setup.loss, setup.ctx, split)(model) for split in ("dev", "test")}
    # The model first: results.json marks a finished run (pipelines and runners skip on it), so it must
    # never exist without its model.
    _save_model(model, run_dir / "model", recipe, method, results, best)
    save_results(results, run_dir, command)
    return results


def batch_sampler_of(method: Method, default: Any) -> Any:
    """The Trainer's batch sampler for this method: in dataset order, without a text twice, or `default`."""
    if method.ordered_batches:
        return ordered_batch_sampler
    if method.distinct_batches:
        from sentence_transformers.training_args import BatchSamplers

        return BatchSamplers.NO_DUPLICATES
    return default


def _fit(recipe: Recipe, setup: Setup, run_dir: Path, checkpoint: Path | None, extra: list[TrainerCallback], show_progress: bool, checkpoints: bool = True):
    """The Trainer run, from `checkpoint` when resuming; leaves the best checkpoint's weights in the model
    and the loss (`checkpoints` False: none is saved, and the last step's are left). Returns the trainer and the best
    step with its dev score."""
    model, loss, evaluator = setup.model, setup.loss, setup.evaluator
    if checkpoint is not None:
        logger.info("resuming %s from %s", run_dir, checkpoint.name)
        if (checkpoint / LOSS_STATE).exists():  # the loss's own parameters (heads), not the model's: strict=False
            loss.load_state_dict(load_file(str(checkpoint / LOSS_STATE)), strict=False)
    spent = json.loads((checkpoint / TRAINING_TIME).read_text())["seconds"] if checkpoint and (checkpoint / TRAINING_TIME).is_file() else 0.0
    clock = TimeBudget(recipe.training.max_minutes, spent, save=checkpoints)
    callbacks: list[TrainerCallback] = [RunCallback(run_dir, loss, clock), clock, FreeMemory(), *extra]
    if recipe.training.patience > 0:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=recipe.training.patience))
    primary = evaluator.primary_metric if evaluator else None  # None: eval.dev none, nothing evaluated while training
    args = training_args(recipe, run_dir / "checkpoints", primary, setup.device, checkpoints)
    if setup.learning_rates:  # parameters (by name pattern) with a rate of their own, e.g. a flow beside its encoder
        args.learning_rate_mapping = dict(setup.learning_rates)
    args.batch_sampler = batch_sampler_of(setup.method, args.batch_sampler)
    # Widget examples are for the hub's inference widget; sentune's cards do not use them, and computing
    # them shows an anonymous progress bar.
    model.model_card_data.set_widget_examples = lambda dataset: None
    trainer = SentuneTrainer(model=model, args=args, train_dataset=setup.dataset, loss=loss, evaluator=evaluator, callbacks=callbacks)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(TidyProgress(primary, getattr(evaluator, "title", primary), show_progress))
    trainer.step_schedule = STEP_SCHEDULES.get(recipe.training.scheduler)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    trainer.check_finite_loss()
    # load_best_model_at_end has put the best checkpoint's weights into the model; the loss's own state
    # (heads, CT's second tower) comes from the same checkpoint.
    metric = getattr(evaluator, "metric", primary)
    step: int | None = trainer.state.best_global_step
    score = trainer.state.best_metric
    if recipe.training.checkpoint == "last":  # the last step's weights, scored as they are kept (if there is a dev task)
        step, score = trainer.state.global_step, _last_step_score(trainer, evaluator, model, primary)
    best = {"step": step, "dev_score": score, "dev_metric": metric}
    if metric == "spearman":  # the key results pages and runners read
        best["dev_spearman"] = score
    trainer.training_seconds = clock.seconds()
    trainer.stopped_by_time = clock.budget is not None and trainer.training_seconds >= clock.budget
    if recipe.training.checkpoint == "last":
        return trainer, best
    if trainer.state.best_model_checkpoint and (Path(trainer.state.best_model_checkpoint) / LOSS_STATE).exists():
        loss.load_state_dict(load_file(str(Path(trainer.state.best_model_checkpoint) / LOSS_STATE)), strict=False)
    return trainer, best


def _save_model(model, out: Path, recipe: Recipe, method: Method, results: dict, best: dict) -> None:
    summary = results["runs"]["model"]["summary"]
    card = "\n".join(
        [
            "",
            "## Trained with sentune",
            "",
            f"- method: `{recipe.method}` ({recipe.pooling or method.pooling} pooling); recipe `{recipe.name}`",
            f"- {'selected' if recipe.training.checkpoint == 'best' else 'last'} checkpoint: step {best['step']}, "
            + (f"{data_label(recipe.eval.dev)} {best['dev_metric']} {best['dev_score']:.2f}" if best["dev_score"] is not None else "no dev evaluation"),
            f"- STS average ('all' Spearman ×100): {summary.get('avg_all_spearman', float('nan')):.2f}",
            f"- trained on {results['meta']['training_device']} ({results['meta']['processes']} process(es)), precision {recipe.training.precision}",
            "",
            "```yaml",
            yaml.safe_dump(recipe.to_dict(), sort_keys=False).strip(),
            "```",
            "",
            "Citation:",
            "",
            "```bibtex",
            method.citation,
            "```",
            "",
        ]
    )
    save_atomic(model, out, readme_extra=card)
