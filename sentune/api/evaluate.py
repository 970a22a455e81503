"""`sentune.evaluate`: score a model on the catalogued tasks (STS, transfer, retrieval, multilingual) from Python, as
`sentune eval` does (the command parses its options and calls `evaluate` here); the results as an object that turns into
a pandas DataFrame."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.api.common import Model, load_with_runtime, model_name
from sentune.errors import UserError, names_python_arguments

if TYPE_CHECKING:
    import pandas


@dataclass
class EvalResults:
    """An evaluation's results: `runs` maps each run (a pooling, with a post-processor or not) to its tasks' scores and
    summary, `meta` says what was evaluated, how and when (results.json's content, `raw`)."""

    raw: dict

    @property
    def runs(self) -> dict[str, dict]:
        return self.raw["runs"]

    @property
    def meta(self) -> dict:
        return self.raw["meta"]

    def to_pandas(self) -> pandas.DataFrame:
        """One row per score the evaluation reports: its run (a pooling, with a post-processor or not), task, subset
        (STS12's `MSRpar`, ...; None for the task's own scores) and metric, named by its place in the task's results
        (`all.spearman`, `wmean.pearson`, `spearman` within a subset, `accuracy`, `ndcg@10`, ...)."""
        import pandas

        rows = []
        for run, record in self.runs.items():
            for task, scores in record["tasks"].items():
                for path, value in _numbers(scores):
                    subset, metric = (path[1], path[2:]) if path[0] == "subsets" and len(path) > 2 else (None, path)
                    rows.append({"run": run, "pooling": record.get("pooling"), "task": task, "subset": subset, "metric": ".".join(metric), "score": value})
        return pandas.DataFrame(rows, columns=["run", "pooling", "task", "subset", "metric", "score"])

    to_dataframe = to_pandas

    def summary(self) -> dict[str, dict]:
        """Each run's summary (the averages `sentune eval` prints)."""
        return {run: record["summary"] for run, record in self.runs.items()}

    def save(self, out: str | Path, command: str | None = None) -> tuple[Path, Path]:
        """results.json and results.md into `out` (a folder, made if new), as `sentune eval --out` writes them."""
        from sentune.api.common import check_folder
        from sentune.core.results import save_results

        check_folder(Path(out), "out=" if command is None else "--out")
        return save_results(self.raw, Path(out), command)

    def __str__(self) -> str:
        from sentune.core.results import render_markdown

        return render_markdown(self.raw)

    def _repr_markdown_(self) -> str:
        return str(self)


def _numbers(value: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], float]]:
    """Every number of a task's results with its path of keys; counts and timings left out."""
    if isinstance(value, Mapping):
        return [pair for key, inner in value.items() if key not in ("n", "seconds") for pair in _numbers(inner, (*path, str(key)))]
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return [(path, float(value))]
    return []


@names_python_arguments({"allow-modified-data": "allow_modified", "quiet": "show_progress=False"})
def evaluate(
    model: Model = "default",
    tasks: str | Sequence[str] = "sts",
    pooling: str | Sequence[str] = "model",
    *,
    data: str | Path | None = None,
    postprocess: Mapping[str, str | Sequence[str]] | None = None,
    postprocess_settings: Mapping[str, Sequence[str]] | None = None,
    preset: str = "fast",
    precision: str = "fp32",
    alignment_pairs: str | None = None,
    backend: str = "torch",
    device: str | None = None,
    trust_remote_code: bool = False,
    allow_modified: bool = False,
    show_progress: bool = False,
) -> EvalResults:
    """Evaluate `model` on catalogued tasks from the data directory, as `sentune eval` (docs/evaluation.md).

    Args:
        model: a name (`"default"`: all-MiniLM-L6-v2), a folder, or a `SentenceTransformer` in memory.
        tasks: task or group names, a list or comma-separated: `sts`, `dev`, `transfer`, `STS12`, `scifact`, ...
        pooling: pooling name(s): `model` (the model's own), `cls`, `mean`, `first-last`, `wk`, ...; one run each.
        data: the data directory (default: $SENTUNE_DATA).
        postprocess: post-processors also evaluated, by name: `{"whitening": ["target:256", "nli"]}` (`--whitening`).
        postprocess_settings: their settings, `{"flow": ["learning_rate=1e-3"]}` (`--flow-set`).
        preset, precision, alignment_pairs, backend: as `sentune eval`'s options.
    """
    from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
    from sentune.postprocess import POSTPROCESSORS, postprocessor_settings

    data_dir = resolve_data_dir(str(data) if data is not None else None)
    specs = select_tasks(list(tasks) if not isinstance(tasks, str) else tasks)
    records = {name: POSTPROCESSORS[name] for name in POSTPROCESSORS}
    words = {r.word: r.name for r in records.values()} | {name: name for name in records}
    asked = {words.get(k, k): [v] if isinstance(v, str) else list(v) for k, v in (postprocess or {}).items()}
    tuning = {words.get(k, k): list(v) for k, v in (postprocess_settings or {}).items()}
    unknown = sorted((set(asked) | set(tuning)) - set(records))
    if unknown:
        raise UserError(f"postprocess {unknown[0]}: choose {', '.join(sorted(words))}")
    settings = {name: postprocessor_settings(r.word, tuning.get(name, []), f"--{r.word}-set") for name, r in records.items()}
    examples = {spec.name: load_task(spec, data_dir, allow_modified=allow_modified) for spec in specs}  # read and checked before torch
    if backend != "torch" and precision != "fp32":
        raise UserError(f"--precision {precision} is for --backend torch (an int8 graph is --backend onnx-int8)")
    from sentune.tasks.evaluate import PostprocessOption
    from sentune.tasks.evaluate import evaluate as run

    loaded, runtime = load_with_runtime(model, device=device, backend=backend, trust_remote_code=trust_remote_code)
    results = run(
        loaded,
        specs,
        data_dir,
        poolings=[p.strip() for p in pooling.split(",") if p.strip()] if isinstance(pooling, str) else list(pooling),
        postprocess=[PostprocessOption.parse(name, text, settings[name]) for name in records for text in asked.get(name, [])],
        preset=preset,
        alignment_pairs=alignment_pairs,
        show_progress=show_progress,
        model_name=model_name(model) or type(loaded).__name__,
        precision=precision,
        examples=examples,
        allow_modified=allow_modified,
        runtime=runtime,
    )
    return EvalResults(results)
