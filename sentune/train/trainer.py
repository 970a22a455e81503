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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load_file, save_file
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.evaluation import SentenceEvaluator
from tqdm.auto import tqdm
from transformers import EarlyStoppingCallback, ProgressCallback, TrainerCallback, set_seed
from transformers.training_args import OptimizerNames

from sentune.core.cache import cache_dir as default_cache_dir
from sentune.core.device import resolve_device
from sentune.core.distributed import rank, world_size
from sentune.core.memory import release_freed_memory
from sentune.core.models import load_model
from sentune.core.results import save_results, write_atomic
from sentune.data.catalog import select_tasks
from sentune.data.kinds import Kind, RetrievalSet, ScoredPairs
from sentune.errors import UserError
from sentune.methods.base import Method, TrainContext
from sentune.methods.registry import get_method
from sentune.modules.build import save_atomic, with_pooling
from sentune.tasks.dev import dev_evaluator
from sentune.tasks.evaluate import evaluate
from sentune.tasks.user_pairs import PairsEvaluator
from sentune.train.recipe import NO_DEV, NO_TASKS, Recipe, validate_recipe
from sentune.train.run_folder import TrainingError, check_run_dir

logger = logging.getLogger(__name__)

COMPLETE = "COMPLETE"
LOSS_STATE = "loss_state.safetensors"
TRAINING_TIME = "training_seconds.json"  # in each checkpoint: training time so far, for training.max_minutes across resumes


STEP_SCHEDULES = {
    # Contrastive Tension's stepped rate (FreddeFrallan/Contrastive-Tension): the base rate for 500 steps,
    # then 0.8, 0.6, 0.4 of it, and 0.2 from step 2000 on (1e-5 → 8e-6 → 6e-6 → 4e-6 → 2e-6).
    "ct-steps": lambda step: (1.0, 0.8, 0.6, 0.4, 0.2)[min(step // 500, 4)],
}


class SentuneTrainer(SentenceTransformerTrainer):
    step_schedule: Callable[[int], float] | None = None  # a STEP_SCHEDULES entry, or None for the transformers scheduler named in the args
    training_seconds: float = 0.0  # the time spent training, summed over resumes (training.max_minutes counts it)
    stopped_by_time: bool = False  # training.max_minutes ended the run

    def _load_from_checkpoint(self, checkpoint_path: str, model=None) -> None:
        """sentence-transformers' own version loads the checkpoint on its default device (CUDA when present) only to
        copy its weights into the model: a run asked to train on the CPU would allocate on a GPU. Here it loads where
        the model is; the rest is the library's (its module classes, its trust_remote_code)."""
        from sentence_transformers.base.modules import Module
        from sentence_transformers.util import fullname

        model = getattr(self.model, "_orig_mod", self.model) if model is None else model
        classes = {fullname(module): type(module) for module in model.modules() if isinstance(module, Module)}
        loaded = model.__class__._load_with_module_classes(checkpoint_path, classes, trust_remote_code=model.trust_remote_code, device=str(model.device))
        model.load_state_dict(loaded.state_dict())

    def get_optimizer_cls_and_kwargs(self, args, model=None):  # type: ignore[override]  # an instance method, as in sentence-transformers
        """sentence-transformers' choice, with AdamW (`adamw_torch`) told to update the parameters as one list (foreach):
        PyTorch's default on CPU tensors is its loop over one parameter at a time, which does the same arithmetic in the
        same order (tests/test_train.py: the same weights) at about 1.5 times the cost (docs/timings.md). On a GPU
        foreach is PyTorch's default already."""
        optimizer_cls, kwargs = super().get_optimizer_cls_and_kwargs(args, model)
        if args.optim == OptimizerNames.ADAMW_TORCH and not {"fused", "foreach"} & set(kwargs):
            kwargs = {**kwargs, "foreach": True}
        return optimizer_cls, kwargs

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.step_schedule is None:
            return super().create_scheduler(num_training_steps, optimizer)
        if self.lr_scheduler is None:
            optimizer = optimizer or self.optimizer
            assert optimizer is not None  # the Trainer creates the optimizer before the scheduler
            self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.step_schedule)
        return self.lr_scheduler

    _unchecked_loss: tuple[torch.Tensor, int] | None = None  # on a GPU: the last step's loss, checked one step late

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss = out[0] if isinstance(out, tuple) else out
        assert isinstance(loss, torch.Tensor)
        if not model.training:
            return out
        # Reading a GPU loss waits for its step to finish, which empties the queue of kernels: the NaN guard reads the
        # previous step's loss instead (done by now), so the GPU never idles; on the CPU reading is free.
        previous, self._unchecked_loss = self._unchecked_loss, (loss.detach(), self.state.global_step)
        if loss.device.type == "cpu":
            self.check_finite_loss()
        elif previous is not None:
            self._check_finite(*previous)
        return out

    def check_finite_loss(self) -> None:
        """Check the loss not yet checked (the last step's); training calls it at the end too."""
        if self._unchecked_loss is not None:
            pending, self._unchecked_loss = self._unchecked_loss, None
            self._check_finite(*pending)

    @staticmethod
    def _check_finite(loss: torch.Tensor, step: int) -> None:
        if not torch.isfinite(loss):
            raise TrainingError(f"the loss is {loss.item()} at step {step}: training stopped. Try a lower training.learning_rate or a higher temperature.")


def loss_state(loss: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Trainable parameters the loss owns beyond the model (projection heads, classifiers)."""
    return {name: p.detach().contiguous() for name, p in loss.named_parameters() if p.requires_grad and not name.startswith("model.")}


ESTIMATE_AFTER_STEPS = 5


class TidyProgress(ProgressCallback):
    """The Trainer's progress bar, with one readable line per evaluation instead of a raw dict per log
    (every logged value stays in metrics.jsonl). With `show_bar` False (--quiet) the bar is a disabled one: the
    evaluation lines and the expected time are still written."""

    def __init__(self, dev_metric: str | None, dev_title: str | None, show_bar: bool = True) -> None:
        super().__init__()
        self.key, self.title, self.show_bar = f"eval_{dev_metric}" if dev_metric else None, dev_title, show_bar
        self.best: tuple[float, int] | None = None
        self.clock: tuple[int, float] | None = None  # (first step, when it ended): for the expected time

    def on_step_end(self, args, state, control, **kwargs):
        super().on_step_end(args, state, control, **kwargs)
        if not state.is_world_process_zero or self.training_bar is None:
            return
        if self.clock is None:  # the first step pays for warm-up: time the next ones
            self.clock = (state.global_step, time.perf_counter())
        elif state.global_step == self.clock[0] + ESTIMATE_AFTER_STEPS:
            per_step = (time.perf_counter() - self.clock[1]) / ESTIMATE_AFTER_STEPS
            left = state.max_steps - state.global_step
            self.training_bar.write(
                f"expected: {per_step:.2f} s a step, so about {per_step * left / 60:.1f} min for the {left} steps left "
                + ("(plus the dev evaluations; early stopping may end sooner)" if self.key else "(no dev evaluation)")
            )

    def on_train_begin(self, args, state, control, **kwargs):
        if self.show_bar:
            super().on_train_begin(args, state, control, **kwargs)
        else:
            self.training_bar = tqdm(total=state.max_steps, disable=True) if state.is_world_process_zero else None  # type: ignore[assignment]  # ProgressCallback declares None
            self.current_step = 0
        if self.training_bar is not None:
            self.training_bar.set_description("training (steps)")
        if state.best_metric is not None:  # a resumed run: its best so far
            self.best = (state.best_metric, state.best_global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.training_bar is None or not logs or self.key not in logs:
            return
        score = logs[self.key]
        if self.best is None or score > self.best[0]:
            self.best = (score, state.global_step)
        self.training_bar.write(f"step {state.global_step}: {self.title} {score:.2f} (best {self.best[0]:.2f} at step {self.best[1]})")


class TimeBudget(TrainerCallback):
    """training.max_minutes: stop once the training time (this process's plus what the resumed checkpoint had used)
    reaches the budget, and evaluate and save that step so it can be selected (`save` False: a run without checkpoints,
    which keeps its last step)."""

    def __init__(self, minutes: float | None, seconds_before: float = 0.0, save: bool = True) -> None:
        self.budget = None if minutes is None else minutes * 60
        self.before, self.started = seconds_before, time.perf_counter()
        self.save = save

    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.started

    def on_step_end(self, args, state, control, **kwargs):
        if self.budget is not None and self.seconds() >= self.budget and not control.should_training_stop:
            control.should_training_stop = control.should_evaluate = True
            control.should_save = self.save
            logger.info("training.max_minutes: %.1f min used, training stops at step %d", self.seconds() / 60, state.global_step)


class PauseAt(TrainerCallback):
    """Stop at `step` (evaluating and saving it) without ending the run: a later train() resumes from that checkpoint
    with the same recipe, so the learning-rate schedule and the data order are those of an uninterrupted run. Racing
    (sentune adapt) trains its candidates in such rounds."""

    def __init__(self, step: int | None) -> None:
        self.step, self.paused = step, False

    def on_step_end(self, args, state, control, **kwargs):
        if self.step is not None and state.global_step >= self.step and state.global_step < state.max_steps and not control.should_training_stop:
            control.should_training_stop = control.should_evaluate = control.should_save = True
            self.paused = True


class FreeMemory(TrainerCallback):
    """On the CPU, give the memory each step (and each evaluation) freed back to the system (sentune.core.memory):
    without it a run over passages of every length holds several times the memory it uses."""

    def on_step_end(self, args, state, control, **kwargs):
        if args.use_cpu:  # training.device resolved to cpu
            release_freed_memory()

    on_evaluate = on_step_end


def early_stopped(trainer) -> bool:
    """Whether the early-stopping patience is spent (the run is over even if it was also paused)."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, EarlyStoppingCallback):
            return callback.early_stopping_patience_counter >= callback.early_stopping_patience
    return False


class RunCallback(TrainerCallback):
    """Metrics log, and the loss's own state and the training time saved into each checkpoint before marking it complete."""

    def __init__(self, run_dir: Path, loss: torch.nn.Module, clock: TimeBudget) -> None:
        self.metrics = run_dir / "metrics.jsonl"
        self.loss = loss
        self.clock = clock

    def on_train_begin(self, args, state, control, **kwargs):
        # A resumed run re-logs the steps after its checkpoint: drop those lines first.
        if state.is_world_process_zero and self.metrics.exists():
            kept = [line for line in self.metrics.read_text().splitlines() if json.loads(line).get("step", 0) <= state.global_step]
            write_atomic(self.metrics, "".join(line + "\n" for line in kept))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero:  # data parallel: one process writes the run folder
            return
        with self.metrics.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": state.global_step, "epoch": state.epoch, **(logs or {})}) + "\n")

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        state_dict = loss_state(self.loss)
        if state_dict:
            save_file(state_dict, str(folder / LOSS_STATE))
        (folder / TRAINING_TIME).write_text(json.dumps({"seconds": self.clock.seconds()}))
        (folder / COMPLETE).write_text("ok\n")


def ordered_batch_sampler(dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
    """Batches in dataset order, for methods whose rows are laid out batch by batch."""
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from torch.utils.data import SequentialSampler

    return DefaultBatchSampler(
        SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last, valid_label_columns=valid_label_columns, generator=generator, seed=seed
    )


def latest_complete_checkpoint(folder: Path) -> Path | None:
    """The newest checkpoint whose save finished; half-written ones (killed mid-save) are removed (by the
    first process only, under data parallel training)."""
    if not folder.is_dir():
        return None
    found = []
    for path in folder.glob("checkpoint-*"):
        if (path / COMPLETE).is_file():
            found.append((int(path.name.split("-")[1]), path))
        elif rank() == 0:
            logger.warning("removing incomplete checkpoint %s (its save was interrupted)", path)
            shutil.rmtree(path, ignore_errors=True)
    return max(found)[1] if found else None


def _training_args(recipe: Recipe, output_dir: Path, dev_metric: str | None, device: str, checkpoints: bool = True) -> SentenceTransformerTrainingArguments:
    """`dev_metric` None: no evaluation while training (eval.dev: none); checkpoints are still saved to resume from,
    unless `checkpoints` is False (a run nothing resumes, train_in_memory)."""
    t = recipe.training
    return SentenceTransformerTrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=t.batch_size,
        learning_rate=t.learning_rate,
        num_train_epochs=t.epochs,
        max_steps=t.max_steps,
        warmup_steps=t.warmup_ratio,  # transformers >= 5: a float below 1 is a fraction of the steps
        weight_decay=t.weight_decay,
        adam_beta1=t.adam_beta1,
        adam_beta2=t.adam_beta2,
        max_grad_norm=t.max_grad_norm,
        lr_scheduler_type="constant" if t.scheduler in STEP_SCHEDULES else t.scheduler,
        optim=t.optimizer,
        seed=t.seed,
        data_seed=t.seed,
        eval_strategy="steps" if dev_metric else "no",
        eval_steps=t.eval_steps,
        save_strategy="steps" if checkpoints else "no",
        save_steps=t.eval_steps,
        save_total_limit=2,  # the best and the latest
        load_best_model_at_end=t.checkpoint == "best",
        metric_for_best_model=f"eval_{dev_metric}" if dev_metric else None,
        greater_is_better=True,
        logging_steps=t.logging_steps,
        report_to="none",
        use_cpu=device == "cpu",
        bf16=t.precision == "bf16",
        fp16=t.precision == "fp16",  # with the Trainer's loss scaler
        # Data parallel: every process must hold as many rows for the negatives' all-gather.
        dataloader_drop_last=world_size() > 1,
        disable_tqdm=False,  # True would print raw log dicts (PrinterCallback); TidyProgress hides its bar for --quiet instead
        # The Trainer's own NaN filter reads every step's loss (a GPU sync a step); SentuneTrainer stops on a NaN instead.
        logging_nan_inf_filter=False,
        gradient_checkpointing=t.gradient_checkpointing,
        # non-reentrant: the recommended form, and it needs no input that requires grad (embedding layers do not)
        gradient_checkpointing_kwargs={"use_reentrant": False} if t.gradient_checkpointing else None,
        # A paused run (racing) goes on with its early-stopping count where it was: without this the count starts
        # again at 0 on each resume, and a raced run trains up to `patience` evaluations longer per round.
        restore_callback_states_from_checkpoint=True,
    )


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
    max_seq_length was set) for a recipe, as every run starts: the model on `device` with
    the method's pooling and the recipe's max_seq_length, the method's view of the training data (`data`, a data kind
    of sentune.data.kinds; None: the recipe's train_data) and its loss. The one place this is set up (training, and
    benchmarks/speed/gpu_bench.py's step timings). `dev_data`: the dev set given as its kind (the recipe's eval.dev is
    then not read)."""
    params = validate_recipe(recipe, data=data, dev=dev_data)
    method = get_method(recipe.method)
    model = with_pooling(load_model(recipe.model, device=device), recipe.pooling or method.pooling)
    reason = method.cannot_train(model, params)
    if reason:
        raise UserError(f"method {method.name}: {reason}; model {recipe.model}")
    reads = model.max_seq_length  # what it reads once trained (Setup.reads)
    if recipe.training.max_seq_length:
        model.max_seq_length = recipe.training.max_seq_length
    ctx = method_context(recipe, params, data_dir, dev_score, show_progress, device, allow_modified, data)  # the caches and dev evaluation run there too
    columns = method.data_view(ctx)
    return method, model, columns, method.build_loss(model, columns, ctx), ctx, reads


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


def _set_up(
    recipe: Recipe, data_dir: Path, run_dir: Path, *, device: str | None, show_progress: bool, allow_modified: bool = False, data=None, dev_data=None
) -> Setup:
    params = validate_recipe(recipe, data=data, dev=dev_data)
    set_seed(recipe.training.seed)
    dev_set = recipe.eval.dev if dev_data is None else dev_data  # a dev set given as its kind is read from no file
    dev = None if dev_set == NO_DEV else dev_evaluator(dev_set, data_dir, allow_modified=allow_modified)
    if isinstance(dev, PairsEvaluator):
        dev.record = run_dir / "dev_cosines"
    device = training_device(recipe, device)
    dev_score = dev.score if dev else None
    method, model, columns, loss, ctx, reads = build_training(
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
    return Setup(method, model, columns, loss, ctx, dataset, evaluator, learning_rates, device, allow_modified, reads)


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
    training.device is auto (sentune.train.trainer.training_device). `allow_modified`: catalogued tasks (dev, training
    sets, the final evaluation) may differ from the catalog (--allow-modified-data). `data`: the training data as a data
    kind (sentune.data.kinds), instead of reading the recipe's train_data (which stays in config.yaml as its label);
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
        finalized = _finalized(setup)
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


def _finalized(setup: Setup) -> tuple[Any, dict | None]:
    """The model to keep, reading as far as the model it started from (Setup.reads), and what the method's finalize
    says it did (e.g. compile a flow head, keep CT's better tower, choose SED's pooling)."""
    model, note = (setup.model, None) if setup.method.finalize is None else setup.method.finalize(setup.model, setup.loss, setup.ctx)
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
    args = _training_args(recipe, run_dir / "checkpoints", primary, setup.device, checkpoints)
    if setup.learning_rates:  # parameters (by name pattern) with a rate of their own, e.g. a flow beside its encoder
        args.learning_rate_mapping = dict(setup.learning_rates)
    if setup.method.ordered_batches:
        args.batch_sampler = ordered_batch_sampler
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
            + (f"{recipe.eval.dev} {best['dev_metric']} {best['dev_score']:.2f}" if best["dev_score"] is not None else "no dev evaluation"),
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
