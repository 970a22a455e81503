"""Recipes: a YAML file plus dotted overrides (`training.learning_rate=3e-5`), as typed dataclasses with
the defaults next to each field. Unknown keys are an error naming the key and the file."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

RECIPE_DIR = Path(__file__).parents[1] / "recipes"  # sentune/recipes


class RecipeError(ValueError):
    """A recipe file or override that cannot be used; the message names the file or the option."""


@dataclass
class TrainingConfig:
    batch_size: int = 16
    learning_rate: float = 5e-5
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    max_grad_norm: float = 1.0
    scheduler: str = "linear"  # a transformers scheduler name, or "ct-steps"
    optimizer: str = "adamw_torch"  # a transformers optimizer name, e.g. "rmsprop" (CT)
    max_seq_length: int | None = 128
    seed: int = 1
    eval_steps: int = 50  # evaluate on the dev task every N steps (seed 001: 50)
    patience: int = 10  # early stopping: evaluations without a new best (seed 001: 10); 0 = never stop early
    logging_steps: int = 10
    max_sentences: int | None = None  # use a fixed random N of the training sentences, in file order (CPU-scale runs)
    keep_checkpoints: bool = False  # keep the best and last trainer checkpoints after a run finishes (they hold optimizer state: ~8x the model)
    min_words: int = 0  # drop training sentences of fewer words (seed 002 drops Wiki1M lines of 5 words or less)


@dataclass
class EvalConfig:
    dev: str = "STS-B-dev"  # model selection
    tasks: str = "sts"  # final evaluation of the selected model
    preset: str = "fast"


@dataclass
class Recipe:
    method: str
    name: str = ""
    model: str = "default"
    train_data: str = "stsb"  # a named sentence set (sentune/data/corpora.yaml) or file:PATH
    params: dict[str, Any] = field(default_factory=dict)  # the method's loss parameters
    # The pooling trained and saved; None = the method's own (e.g. mean for SimCSE). 'model' keeps the
    # model's pipeline, e.g. a flow or whitening head after the pooling, so fine-tuning trains through it.
    pooling: str | None = None
    training: TrainingConfig = field(default_factory=TrainingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

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


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)$")


def parse_value(raw: str) -> Any:
    """A command-line value as YAML, except that 1e-3 is a number (YAML 1.1 reads it as a string)."""
    value = yaml.safe_load(raw) if raw else None
    return float(value) if isinstance(value, str) and _NUMBER.match(value) else value


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


def _build(cls, data: dict[str, Any], where: str):
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(names)
    if unknown:
        raise RecipeError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(names)}")
    kwargs = {}
    for key, value in data.items():
        if key in ("training", "eval") and cls is Recipe:
            value = _build(TrainingConfig if key == "training" else EvalConfig, value or {}, f"{where} [{key}]")
        elif isinstance(value, str) and names[key].type in ("float", "float | None"):
            try:
                value = float(value)  # YAML reads 5e-5 (no dot) as a string
            except ValueError:
                raise RecipeError(f"{where}: {key} must be a number, got {value!r}") from None
        kwargs[key] = value
    return cls(**kwargs)


def load_recipe(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    path = resolve_recipe_path(name_or_path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or "method" not in data:
        raise RecipeError(f"{path}: a recipe is a mapping with at least a 'method' key")
    for override in overrides:
        apply_override(data, override)
    data.setdefault("name", path.stem)
    return _build(Recipe, data, str(path))


def same_recipe(saved: Path, recipe: Recipe) -> bool:
    """Whether a run's saved config.yaml holds `recipe`. Keys the saved file lacks take today's defaults,
    so a run written before an option existed still resumes (and is still recognised as done)."""
    return load_recipe(str(saved)).to_dict() == recipe.to_dict()
