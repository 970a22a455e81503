"""Recipes: a YAML file plus dotted overrides (`training.learning_rate=3e-5`), as typed dataclasses with
the defaults and meaning next to each field.

`load_recipe` checks every key and value against these records and the method's declared parameters
(`sentune.methods.base`), the pooling against what the method can train, and the data and task names
against the catalog, all before anything is read or created: an unknown or mistyped key is one
RecipeError naming the file, the key, the allowed keys and the expected type.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from sentune.core.options import OptionError, build_options, option, parse_value
from sentune.errors import UserError

if TYPE_CHECKING:
    from sentune.data.tables import Kind

RECIPE_DIR = Path(__file__).parents[1] / "recipes"  # sentune/recipes
PRECISIONS = ("fp32", "bf16", "fp16")
NO_DEV = "none"  # eval.dev: no evaluation while training (a fixed recipe whose last step is kept)
NO_TASKS = "none"  # eval.tasks: no final evaluation (e.g. `sentune adapt` scores its candidates on the user's pairs itself)


class RecipeError(UserError):
    """A recipe file or override that cannot be used; the message names the file or the option."""


@dataclass
class TrainingConfig:
    batch_size: int = option(16, "sentences (rows) per step", minimum=1)
    learning_rate: float = option(5e-5, "peak learning rate", minimum=0, exclusive=True)
    epochs: float = option(1.0, "passes over the training rows (max_steps > 0 overrides)", minimum=0, exclusive=True)
    max_steps: int = option(
        -1, "> 0: train this many steps; -1: use epochs", minimum=-1, refused={0: "would train nothing: give the steps (>= 1), or -1 to train `epochs` passes"}
    )
    warmup_ratio: float = option(0.1, "fraction of the steps with a linear warm-up", minimum=0, below=1)
    weight_decay: float = option(0.0, "AdamW weight decay", minimum=0)
    adam_beta1: float = option(0.9, "Adam β1", minimum=0, below=1)
    adam_beta2: float = option(0.999, "Adam β2", minimum=0, below=1)
    max_grad_norm: float = option(1.0, "gradient clipping norm", minimum=0)
    scheduler: str = option("linear", "a transformers scheduler name, or 'ct-steps' (CT's stepped rate)")
    optimizer: str = option("adamw_torch", "a transformers optimizer name, e.g. adamw_torch_fused, rmsprop (CT)")
    max_seq_length: int | None = option(
        128, "tokens per sentence while training (longer ones are truncated); the trained model reads as far as the model it started from", minimum=1
    )
    seed: int = option(1, "seed of the run (weights of new heads, dropout, data order)", minimum=0)
    eval_steps: int = option(50, "evaluate on the dev task every N steps (Kim et al. 2021: 50)", minimum=1)
    patience: int = option(10, "early stopping: evaluations without a new best (Kim et al. 2021: 10); 0 = never stop early", minimum=0)
    logging_steps: int = option(10, "log the loss every N steps", minimum=1)
    max_sentences: int | None = option(None, "use a fixed random N of the training sentences, in file order (CPU-scale runs)", minimum=1)
    keep_checkpoints: bool = option(False, "keep the best and last checkpoints after the run (they hold optimizer state: ~8x the model)")
    min_words: int = option(0, "drop training sentences of fewer words (the BERT-CF report drops Wiki1M lines of 5 words or less)", minimum=0)
    device: str = option("auto", "auto (CUDA when present), cpu or cuda; under torchrun each process takes its LOCAL_RANK's GPU")
    precision: Literal["fp32", "bf16", "fp16"] = option(
        "fp32", "autocast for training (losses and similarities stay fp32); fp16 adds a loss scaler and needs CUDA"
    )
    checkpoint: Literal["best", "last"] = option("best", "the model kept: the best on the dev task, or the last step's (sentence-transformers' default)")
    max_minutes: float | None = option(
        None, "stop training after this many minutes of training (summed over resumes), evaluating the step it stops at", minimum=0, exclusive=True
    )
    gradient_checkpointing: bool = option(
        False, "recompute each layer's activations in the backward pass instead of keeping them: less memory, more time (the same gradients)"
    )


@dataclass
class EvalConfig:
    dev: str | dict[str, Any] = option(
        "STS-B-dev",
        "the task that selects the checkpoint (and CT's tower, SED's pooling), pairs:PATH (s1<TAB>s2<TAB>label lines), or none "
        "(no evaluation while training: a recipe fixed in advance, its last step kept); a run's config.yaml describes a dev set "
        "given as objects instead (its kind, rows and source: sentune.data.tables.Kind.describe)",
    )
    tasks: str = option("sts", "final evaluation of the selected model: task or group names, or none")
    preset: Literal["fast", "standard", "fast-mlp", "standard-mlp"] = option("fast", "SentEval transfer preset (-mlp: SentEval's MLP classifier)")


@dataclass
class Recipe:
    method: str = option(help="a registered method (sentune.methods.registry)")
    name: str = option("", "the recipe's name (default: the file's stem)")
    model: str = option("default", "'default', a hub id or a local folder")
    train_data: str | dict[str, Any] = option(
        "stsb",
        "a named set (sentune/data/sets.yaml), file:PATH, tasks:SELECTION, pairs:PATH, labelled:PATH or tuples:PATH; a run's config.yaml "
        "describes data given as objects instead (their kind, rows and source: sentune.data.tables.Kind.describe)",
    )
    params: dict[str, Any] = option(default_factory=dict, help="the method's parameters (checked against its record)")
    # None = the method's own (e.g. mean for SimCSE). 'model' keeps the model's pipeline, e.g. a flow or
    # whitening head after the pooling, so fine-tuning trains through it.
    pooling: str | None = option(None, "the pooling trained and saved (null: the method's own)")
    training: TrainingConfig = option(default_factory=TrainingConfig, help="the training loop")
    eval: EvalConfig = option(default_factory=EvalConfig, help="model selection and final evaluation")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def resolve_recipe_path(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.is_file():
        return path
    bundled = RECIPE_DIR / (name_or_path if name_or_path.endswith(".yaml") else f"{name_or_path}.yaml")
    if bundled.is_file():
        return bundled
    available = ", ".join(sorted(p.stem for p in RECIPE_DIR.glob("*.yaml")))
    raise RecipeError(f"recipe {name_or_path!r}: no such file, nor a bundled recipe (bundled: {available})")


def apply_override(data: dict[str, Any], override: str) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise RecipeError(f"override {override!r}: expected key=value, e.g. training.learning_rate=3e-5")
    value = parse_value(raw)
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise RecipeError(f"override {override!r}: {part!r} is not a section")
    node[parts[-1]] = value


def load_recipe(name_or_path: str, overrides: list[str] | tuple[str, ...] = (), *, check: bool = True, data: Any = None, dev: Any = None) -> Recipe:
    """The recipe with its overrides, every value typed; with `check`, also validated against the method,
    the poolings and the catalog (validate_recipe, with the training data and dev set given as objects, if any)."""
    path = resolve_recipe_path(name_or_path)
    try:
        settings = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(settings, dict) or "method" not in settings:
        raise RecipeError(f"{path}: a recipe is a mapping with at least a 'method' key")
    for override in overrides:
        apply_override(settings, override)
    settings.setdefault("name", path.stem)
    try:
        recipe = build_options(Recipe, settings, "")
    except OptionError as exc:
        raise RecipeError(f"{path}: {exc}") from None
    if check:
        validate_recipe(recipe, str(path), data=data, dev=dev)
    return recipe


def validate_recipe(recipe: Recipe, where: str = "recipe", *, data: Any = None, dev: Any = None) -> Any:
    """Check what the typed records cannot: the method exists and takes these params, the pooling is one
    it can train, the data and tasks are in the catalog. Returns the method's typed parameters. `data`, `dev`: the
    training data and the dev set given as data kinds (sentune.data.kinds): the method must take that kind, and the
    recipe's train_data and eval.dev, which are not read then, are not checked."""
    from sentune.core.pooling import PoolingError, check_trainable
    from sentune.data.catalog import describe_forms, parse_train_data, select_tasks
    from sentune.methods.registry import get_method
    from sentune.tasks.dev_sets import read_dev

    try:
        method = get_method(recipe.method)
        params = method.resolve_params(recipe.params)
        pooling = recipe.pooling or method.pooling
        check_trainable(pooling)
        if method.poolings is not None and recipe.pooling not in (None, *method.poolings):
            raise PoolingError(f"pooling: method {method.name!r} trains {', '.join(method.poolings)}, not {recipe.pooling!r}")
        named_dev = written(recipe.eval.dev, "eval.dev") if dev is None else None
        if data is not None and method.refuses(type(data)):
            raise RecipeError(f"data: {method.refuses(type(data))}")
        # the trainer hands the method a data kind, never this string
        train = parse_train_data(written(recipe.train_data, "train_data")) if data is None else None
        if train is not None and method.refuses(train.kind):
            raise RecipeError(f"train_data: method {method.name!r} needs train_data: {' or '.join(describe_forms(k) for k in method.takes)}")
        if train is not None:
            train.check("train_data")
        if named_dev == NO_DEV:
            if recipe.training.checkpoint != "last" or recipe.training.patience:
                raise RecipeError("eval.dev: none needs training.checkpoint: last and training.patience: 0 (no evaluation chooses a checkpoint or stops early)")
            if method.finalize is not None:
                raise RecipeError(f"eval.dev: none: method {method.name!r} makes a choice on the dev task after training; name one")
        elif named_dev is not None and isinstance(named := read_dev(named_dev), str):  # a user's pairs or queries: read now, a malformed line named
            select_tasks(named)
        if recipe.eval.tasks != NO_TASKS:
            select_tasks(recipe.eval.tasks)
        _check_device(recipe.training)
    except RecipeError:
        raise
    except UserError as exc:
        raise RecipeError(f"{where}: {exc}") from None
    return params


def written(value: str | dict[str, Any], key: str) -> str:
    """train_data or eval.dev as the recipe writes it, to be read (a set, task or file); a description of data given as
    objects (a run's record, sentune.data.tables.Kind.describe) names nothing to read: the data must be given again."""
    from sentune.data.tables import data_label

    if isinstance(value, str):
        return value
    described_kind(value, key)
    raise RecipeError(f"{key}: {data_label(value)}: given as objects, and named by no file to read; give them again")


def described_kind(value: dict[str, Any], key: str) -> type[Kind]:
    """The data kind a description of data given as objects names (sentune.data.tables.Kind.describe: `kind`), looked
    up in the registry of kinds (sentune.data.kinds.KINDS); a description naming none is an error naming `key`."""
    from sentune.data.kinds import KINDS

    found = KINDS.get(str(value.get("kind")))
    if found is None:
        raise RecipeError(f"{key}: a description of data of kind {value.get('kind')!r}, none of {', '.join(KINDS)}")
    return found


def _check_device(training: TrainingConfig) -> None:
    """training.device and training.precision, last: only a recipe that names a GPU or asks for fp16 needs to ask torch
    whether there is one (which imports it); auto with fp32 or bf16 trains wherever the command runs."""
    from sentune.core.device import check_device, check_precision, resolve_device

    device = check_device(training.device, "training.device")
    if device == "auto" and training.precision != "fp16":
        check_precision(training.precision, "cpu", "training.precision")  # the name; bf16 and fp32 run on either
        return
    device = resolve_device(device, "training.device")
    if ":" in device and "LOCAL_RANK" not in os.environ and device != "cuda:0":
        raise RecipeError(f"training.device {device}: train on one GPU with CUDA_VISIBLE_DEVICES={device.split(':')[1]} and training.device=cuda")
    check_precision(training.precision, device, "training.precision")


def same_recipe(saved: Path, recipe: Recipe) -> bool:
    """Whether a run's saved config.yaml holds `recipe`. Keys the saved file lacks take today's defaults,
    so a run written before an option existed still resumes (and is still recognised as done)."""
    return _settings_that_matter(load_recipe(str(saved), check=False)) == _settings_that_matter(recipe)


def _settings_that_matter(recipe: Recipe) -> dict:
    """The recipe as a dict without what changes how a run is computed but not what it computes (a resumed run may
    switch gradient checkpointing on to fit in less memory) or how long it may take (training.max_minutes: a run killed
    under `adapt --time` resumes with the minutes left then, a cap counted over resumes), and with its data as the file of their kind they are (a
    description of data given as objects and an older run's `PREFIX:PATH` of the same file are the same data)."""
    from sentune.data.catalog import parse_train_data
    from sentune.tasks.dev_sets import dev_file

    settings = recipe.to_dict()
    settings["training"] = {k: v for k, v in settings["training"].items() if k not in ("gradient_checkpointing", "max_minutes")}
    train = parse_train_data(recipe.train_data) if isinstance(recipe.train_data, str) else None
    settings["train_data"] = _data_file(recipe.train_data, (train.kind, train.value) if train is not None and train.origin == "file" else None)
    dev = recipe.eval.dev
    settings["eval"]["dev"] = _data_file(dev, dev_file(dev) if isinstance(dev, str) else None)
    return settings


def _data_file(value: str | dict[str, Any], named: tuple[type, str] | None) -> Any:
    """(kind, path) of the file that holds train_data or eval.dev (`named`: what the string names), else the value."""
    if isinstance(value, dict) and "source" in value:
        return (described_kind(value, "data").name, value["source"])
    return (named[0].name, named[1]) if named is not None else value  # type: ignore[attr-defined]  # every kind has a name
