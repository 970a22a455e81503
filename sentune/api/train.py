"""`sentune.train`: train a recipe from Python, as `sentune train` does (the command parses its options and calls `run`
here), and get the trained SentenceTransformer back."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.api import given
from sentune.api.common import Model, check_models, check_out, refused_leaves_nothing, resolve, saved_model
from sentune.errors import UserError, names_python_arguments

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from sentune.data.tables import Kind
    from sentune.training.recipe import Recipe

logger = logging.getLogger("sentune.train")

INPUT_MODEL = "input-model"  # OUT/input-model: a model given in memory, saved for the recipe to name
MARKS = ("config.yaml", "results.json")  # what marks a folder as a training run's (sentune.training.trainer)


@names_python_arguments({"data": "data_dir", "allow-modified-data": "allow_modified"})
def train(
    recipe: str | Path,
    data: given.Given = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    out: str | Path | None = None,
    *,
    dev: given.Given = None,
    columns: Mapping[str, str] | None = None,
    model: Model | None = None,
    data_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    device: str | None = None,
    allow_modified: bool = False,
    show_progress: bool = False,
) -> SentenceTransformer:
    """Train `recipe` (a bundled recipe name such as `"002-simcse"`, or a YAML file) and return the trained model, as
    `sentune train` (docs/training.md); the run folder `out` holds its checkpoints, metrics and results.

    Args:
        recipe: a bundled recipe name (sentune/recipes/: `"002-simcse"`, `"005-ct"`, ...) or a recipe file.
        data: the training data, replacing the recipe's `train_data`: a named set or spec (`"wiki"`, `"file:PATH"`), or
            objects: sentences (strings), paraphrase pairs `(sentence, paraphrase)`, labelled pairs `(text1, text2,
            score)` or tuples `(anchor, positive, negative, ...)`; a list, a DataFrame, a `datasets.Dataset` or a data kind
            (sentune.data.kinds). Objects go to the trainer as they are (nothing is written); config.yaml's train_data
            then describes them (their kind and size: sentune.data.tables.Kind.describe).
        dev: the dev set that chooses the checkpoint, replacing the recipe's `eval.dev`: a task name (`"STS-B-dev"`), a
            pairs file (a Path), or `(text1, text2, score)` rows (a list, a DataFrame, a Dataset).
        columns: a DataFrame's or Dataset's column names mapped to sentune's (`{"question": "text"}`, `{"query":
            "anchor", "answer": "positive"}`), as pandas' `rename(columns=...)`, for `data` and `dev`; without it,
            sentune's names are read, and sentence-transformers' (`sentence1`, `sentence2`, `label` for the score).
        overrides: dotted overrides, `["training.max_steps=100"]` or `{"training.max_steps": 100}`.
        out: the run folder (default runs/RECIPE_NAME); None: a temporary folder, removed once the model is loaded.
        model: the model to start from, replacing the recipe's: a name, a folder or a `SentenceTransformer` in memory.
        data_dir: the data directory (default: $SENTUNE_DATA), for named sets, tasks and the dev evaluation.
        resume: continue an interrupted run in `out` from its last complete checkpoint.
        overwrite: replace a finished run in `out` (otherwise refused).

    The dev evaluations and other progress lines are INFO records of the `sentune` logger; `show_progress` adds the
    training's progress bar.
    """
    tmp = tempfile.TemporaryDirectory(prefix="sentune-train-") if out is None else None
    try:
        folder, _ = run(
            recipe, data, overrides, Path(tmp.name) if tmp is not None else Path(out),  # type: ignore[arg-type]
            dev=dev, columns=columns, model=model, data_dir=data_dir, resume=resume, overwrite=overwrite, device=device, allow_modified=allow_modified,
            show_progress=show_progress,
        )  # fmt: skip
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(folder / "model"), device="cpu")
    finally:
        if tmp is not None:
            tmp.cleanup()


def as_overrides(overrides: Sequence[str] | Mapping[str, Any]) -> list[str]:
    """`{"a.b": 1}` → `["a.b=1"]`; a list of `key=value` strings as it is."""
    if isinstance(overrides, Mapping):
        return [f"{key}={'true' if value is True else 'false' if value is False else value}" for key, value in overrides.items()]
    if isinstance(overrides, str):
        return [overrides]
    return list(overrides)


def training_kind(data: given.Given, columns: Mapping[str, str] | None = None) -> Kind:
    """Training data given as objects, as the kind its rows are: a data kind as it is; strings (or a `text` column):
    Sentences; (sentence, paraphrase) pairs (or `anchor`, `positive` columns): Pairs; (text1, text2, score) rows (or
    `sentence1`, `sentence2` and a `score` or `label`): ScoredPairs; rows of three texts or more (or a `negative`
    column): Tuples. `columns`: a table's names mapped to sentune's, applied before the kind is told."""
    from sentune.data.kinds import Pairs, Sentences, Tuples
    from sentune.data.tables import Kind
    from sentune.data.user_data import ScoredPairs

    if isinstance(data, Kind):
        return data
    table = list(getattr(data, "column_names", None) or getattr(data, "columns", []))
    if table:
        names = {(columns or {}).get(name, name) for name in table}
        scored = {"sentence1", "sentence2"} <= names and bool({"score", "label"} & names)
        kind = ScoredPairs if scored else Tuples if "negative" in names else Pairs if names & {"positive", "sentence2"} else Sentences
        return given.as_kind(kind, data, "data", columns)
    rows = list(data)
    first = rows[0] if rows else None
    if isinstance(first, str) or (isinstance(first, Mapping) and "text" in first):
        return given.as_kind(Sentences, rows, "data")
    width = len(first) if isinstance(first, tuple | list | Mapping) else 0
    if width == 2:
        return given.as_kind(Pairs, rows, "data")
    values = list(first.values()) if isinstance(first, Mapping) else list(first) if first is not None else []
    if width == 3 and not isinstance(values[2], str):
        return given.as_kind(ScoredPairs, rows, "data")
    if width >= 3:
        return given.as_kind(Tuples, rows, "data")
    raise UserError("data: expected sentences, (sentence, paraphrase) pairs, (text1, text2, score) or (anchor, positive, negative...) rows")


def run(
    recipe: str | Path | Recipe,
    data: given.Given,
    overrides: Sequence[str] | Mapping[str, Any],
    out: Path | None,
    *,
    dev: given.Given = None,
    columns: Mapping[str, str] | None = None,
    model: Model | None = None,
    data_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    device: str | None = None,
    allow_modified: bool = False,
    show_progress: bool = False,
    command: str | None = None,
    banner: Callable[[Recipe, Path, Path, str], None] | None = None,
    warn: Callable[[str], None] = logger.warning,
) -> tuple[Path, dict]:
    """train() returning the run folder and results.json's content: what
    `sentune train` calls. `banner(recipe, out, data_dir, device)`: said once everything is checked, before training;
    `warn`: how a notice is told. Nothing is written before the folder, the model and the recipe are checked; a run
    refused in a folder that was new or empty leaves nothing there."""
    more = as_overrides(overrides)
    if out is not None:
        check_out(Path(out), MARKS, "a training run", (INPUT_MODEL,))
    if model is not None:
        check_models(model)
    refused = refused_leaves_nothing(Path(out), before_work=(INPUT_MODEL, "config.yaml")) if out is not None else nullcontext()
    with refused:  # a refused run leaves nothing behind; one that failed part-way keeps what it wrote
        return _run(recipe, data, more, out, dev=dev, columns=columns, model=model, data_dir=data_dir, resume=resume, overwrite=overwrite, device=device,
                    allow_modified=allow_modified, show_progress=show_progress, command=command, banner=banner, warn=warn)  # fmt: skip


def _run(
    recipe,
    data,
    more: list[str],
    out: Path | None,
    *,
    dev,
    columns,
    model,
    data_dir,
    resume,
    overwrite,
    device,
    allow_modified,
    show_progress,
    command,
    banner,
    warn,
) -> tuple[Path, dict]:
    """run() once the folder and the model given are checked."""
    from sentune.data.catalog import resolve_data_dir
    from sentune.training.recipe import load_recipe, validate_recipe
    from sentune.training.run_folder import check_run_dir

    if model is not None:  # a model in memory is saved into the run folder, for the recipe to name and the trainer to load
        more.append(f"model={saved_model(model, (Path(out) if out is not None else Path('runs')) / INPUT_MODEL)}")
    kind = None
    if isinstance(data, str | os.PathLike):  # a named set or a train_data spec; a path: a sentence file
        more.append(f"train_data={data if isinstance(data, str) else 'file:' + os.fspath(data)}")
    elif data is not None:  # objects: handed to the trainer as their kind, nothing written; config.yaml describes them
        kind = training_kind(data, columns)
    dev_kind = None
    if isinstance(dev, str | os.PathLike):  # a task name as it is; a path: a file of scored pairs
        more.append(f"eval.dev={dev if isinstance(dev, str) else 'pairs:' + os.fspath(dev)}")
    elif dev is not None:
        from sentune.data.user_data import ScoredPairs

        dev_kind = given.as_kind(ScoredPairs, dev, "dev", columns)
    loaded = load_recipe(str(recipe), more, check=kind is None and dev_kind is None)  # every key and value checked before torch loads
    check_models(loaded.model)
    if kind is not None or dev_kind is not None:  # what was given, described (its kind, size, source): no string names it
        described = replace(loaded.eval, dev=dev_kind.describe()) if dev_kind is not None else loaded.eval
        loaded = replace(loaded, train_data=kind.describe() if kind is not None else loaded.train_data, eval=described)
        validate_recipe(loaded, str(recipe), data=kind, dev=dev_kind)
    folder = Path(out or Path("runs") / loaded.name)
    resolved_data = resolve_data_dir(str(data_dir) if data_dir is not None else None)
    if overwrite and (folder / "results.json").is_file() and int(os.environ.get("RANK", "0")) == 0:
        warn(f"--overwrite: removing the finished run in {folder}")
        for name in os.listdir(folder):  # a model given in memory (input-model) stays
            if name != "input-model":
                path = folder / name
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    check_run_dir(folder, loaded, resume)
    device = resolve(device)  # after every check: `auto` imports torch
    from sentune.core.distributed import rank
    from sentune.training.trainer import train as run_training
    from sentune.training.trainer import training_device

    if banner is not None and rank() == 0:
        banner(loaded, folder, resolved_data, training_device(loaded, device))
    if resume and not any((folder / "checkpoints").glob("checkpoint-*/COMPLETE")):
        warn(f"nothing to resume in {folder} (no complete checkpoint): training starts at step 0")
    results = run_training(
        loaded,
        folder,
        data_dir=resolved_data,
        resume=resume,
        command=command,
        show_progress=show_progress,
        device=device,
        allow_modified=allow_modified,
        data=kind,
        dev=dev_kind,
    )
    return folder, results
