"""The steps of the one training loop (sentune.training.trainer): sentence-transformers' Trainer with a NaN guard, AdamW's
foreach update and CT's stepped rate (SentuneTrainer), its arguments from a recipe (training_args), and the callbacks
every run has: the progress line per evaluation, the time budget, pausing at a step, memory given back on the CPU, the
metrics log and checkpoints marked complete once saved. Apart from trainer.py, which sets a run up and saves it."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from tqdm.auto import tqdm
from transformers import EarlyStoppingCallback, ProgressCallback, TrainerCallback
from transformers.training_args import OptimizerNames

from sentune.core.distributed import rank, world_size
from sentune.core.memory import release_freed_memory
from sentune.core.results import write_atomic
from sentune.training.recipe import Recipe
from sentune.training.run_folder import TrainingError

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
            _say_beside(
                self.training_bar,
                f"expected: {per_step:.2f} s a step, so about {per_step * left / 60:.1f} min for the {left} steps left "
                + ("(plus the dev evaluations; early stopping may end sooner)" if self.key else "(no dev evaluation)"),
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
        _say_beside(self.training_bar, f"step {state.global_step}: {self.title} {score:.2f} (best {self.best[0]:.2f} at step {self.best[1]})")


def _say_beside(bar: tqdm, line: str) -> None:
    """A progress line (sentune.core.progress: stdout in a command, logging from Python) with the bar cleared and redrawn
    around it, as tqdm.write does."""
    from sentune.core.progress import say

    with bar.external_write_mode():
        say(line)


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
            control.should_training_stop = True
            control.should_evaluate = evaluates(args)  # a run without a dev set has nothing to evaluate the step on
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
            control.should_training_stop = control.should_save = True
            control.should_evaluate = evaluates(args)
            self.paused = True


def evaluates(args) -> bool:
    """Whether the run evaluates on a dev set (its eval_strategy is not "no"): a stop asks for an evaluation only then,
    since the Trainer has no eval dataset to evaluate otherwise."""
    return str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no"


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


def training_args(recipe: Recipe, output_dir: Path, dev_metric: str | None, device: str, checkpoints: bool = True) -> SentenceTransformerTrainingArguments:
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
