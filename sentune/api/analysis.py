"""The analysis commands from Python: `layerwise`, `tsne` and `pairs` (models on an STS task of the data directory),
`compare` and `report` (run folders of `sentune eval`, `layerwise`, `pairs`). Each command parses its options, calls the
function here, and writes what it returns (`.save(out)`); the functions themselves write nothing, except `report`,
whose product is its pages."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.api.common import Model, load, model_name
from sentune.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    import pandas
    from matplotlib.figure import Figure

Folder = str | PathLike[str]


def _data_and_task(data: Folder | None, task: str) -> tuple[Path, Any]:
    """The data directory and the task's spec (a group's first task, as the commands take it), checked before any model
    loads."""
    from sentune.data.catalog import resolve_data_dir, select_tasks

    data_dir = resolve_data_dir(os.fspath(data) if data is not None else None)
    return data_dir, select_tasks(task, "task")[0]


def _labelled(models: Model | Sequence[Model], labels: Sequence[str] | None) -> list[tuple[str, Model]]:
    """(label, model) per model: `labels`, else each model's name or path (`model N` for one in memory)."""
    listed: list[Model] = list(models) if isinstance(models, list | tuple) else [models]  # type: ignore[list-item]
    if not listed:
        raise UserError("models: give at least one model")
    if labels is not None and len(labels) != len(listed):
        raise UserError(f"labels: {len(labels)} given for {len(listed)} models: give one label per model or none")
    names = list(labels) if labels is not None else [model_name(m) or f"model {i + 1}" for i, m in enumerate(listed)]
    return list(zip(names, listed, strict=True))


def _loaded(models: list[tuple[str, Model]], device: str | None, trust_remote_code: bool) -> list[tuple[str, Any]]:
    return [(label, load(model, device=device, trust_remote_code=trust_remote_code)) for label, model in models]


@dataclass
class LayerwiseResult:
    """STS Spearman (x100) of every hidden state under CLS, mean and max pooling (Kim et al. 2021, Figure 1): `raw` is
    layerwise.json's content (`layers`, `scores` per pooling, `meta`)."""

    raw: dict

    @property
    def layers(self) -> list[int]:
        return self.raw["layers"]

    @property
    def scores(self) -> dict[str, list[float]]:
        """Each token pooling (`cls`, `mean`, `max`) → one score a layer (0: the embedding layer)."""
        return self.raw["scores"]

    def to_pandas(self) -> pandas.DataFrame:
        """One row a layer, one column a token pooling (Spearman x100)."""
        import pandas

        return pandas.DataFrame(self.scores, index=pandas.Index(self.layers, name="layer"))

    def figure(self) -> Figure:
        """The plot `sentune layerwise` saves (layerwise.png), a matplotlib Figure."""
        from sentune.analysis.layerwise import layerwise_figure

        return layerwise_figure([self.raw])

    def save(self, out: Folder, command: str | None = None) -> tuple[Path, Path]:
        """layerwise.json and layerwise.png into `out`, as `sentune layerwise --out` writes them."""
        from sentune.analysis.layerwise import plot_layerwise, save_layerwise

        raw = {**self.raw, "meta": {**self.raw["meta"], **({"command": command} if command else {})}}
        return save_layerwise(raw, Path(out)), plot_layerwise([raw], Path(out) / "layerwise.png")


def layerwise(
    model: Model = "default",
    task: str = "STS-B",
    *,
    data: Folder | None = None,
    allow_modified: bool = False,
    device: str | None = None,
    trust_remote_code: bool = False,
    show_progress: bool = False,
) -> LayerwiseResult:
    """Score every layer of `model` on an STS task under CLS, mean and max pooling, as `sentune layerwise`.

    Args:
        model: a name (`"default"`: all-MiniLM-L6-v2), a folder, or a `SentenceTransformer` in memory (a transformer
            with hidden states).
        task: an STS task of the catalog (`STS-B`, `STS12`, `SICK-R`, ...).
        data: the data directory (default: $SENTUNE_DATA).
    """
    data_dir, spec = _data_and_task(data, task)
    from sentune.analysis.layerwise import layerwise_scores

    loaded = load(model, device=device, trust_remote_code=trust_remote_code)
    name = model_name(model) or type(loaded).__name__
    return LayerwiseResult(layerwise_scores(loaded, spec, data_dir, show_progress=show_progress, model_name=name, allow_modified=allow_modified))


@dataclass
class TsneResult:
    """t-SNE coordinates of the most and least similar pairs of an STS task, one panel per model (Kim et al. 2021,
    Figure 5): `raw` is tsne.json's content (`panels`: label → the points of sentences a, b, a, b, ..., positives first;
    `cosines`: label → each pair's cosine; `positives`, `negatives`: their gold scores)."""

    raw: dict

    @property
    def panels(self) -> dict[str, np.ndarray]:
        """Each model's label → its points, shape (2 x pairs, 2)."""
        import numpy as np

        return {label: np.asarray(points) for label, points in self.raw["panels"].items()}

    def figure(self) -> Figure:
        """The figure `sentune tsne` saves (tsne.png), a matplotlib Figure."""
        from sentune.analysis.figures import tsne_plot

        return tsne_plot(self.raw)

    def save(self, out: Folder) -> Path:
        """tsne.png and tsne.json into `out`, as `sentune tsne --out` writes them; the PNG's path."""
        from sentune.analysis.figures import save_tsne

        return save_tsne(self.raw, Path(out))


def tsne(
    models: Model | Sequence[Model],
    *,
    labels: Sequence[str] | None = None,
    task: str = "STS-B-dev",
    pairs: int = 20,
    seed: int = 0,
    data: Folder | None = None,
    allow_modified: bool = False,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> TsneResult:
    """t-SNE of the `pairs` highest- and `pairs` lowest-scored pairs of `task`, a panel per model, as `sentune tsne`.

    Args:
        models: one model or a list (before/after panels): names, folders or `SentenceTransformer`s in memory.
        labels: a panel title per model (default: the model's name or path).
    """
    named = _labelled(models, labels)
    data_dir, _ = _data_and_task(data, task)
    from sentune.analysis.figures import tsne_points

    loaded = _loaded(named, device, trust_remote_code)
    return TsneResult(tsne_points(loaded, data_dir, task=task, count=pairs, seed=seed, allow_modified=allow_modified))


@dataclass
class PairTable:
    """Sentence pairs of an STS task with their gold score and each model's cosine (the BERT-CF report, Tables 3-6):
    `raw` is pairs.json's content (`rows`, `models`: the labels, `task`, `seed`)."""

    raw: dict

    @property
    def rows(self) -> list[dict]:
        """One dict a pair: `a`, `b`, `gold`, `cosine` (label → the model's cosine)."""
        return self.raw["pairs"]

    def to_pandas(self) -> pandas.DataFrame:
        """One row a pair: `a`, `b`, `gold`, and a column of cosines a model (named by its label)."""
        import pandas

        return pandas.DataFrame([{"a": r["a"], "b": r["b"], "gold": r["gold"], **r["cosine"]} for r in self.rows])

    def save(self, out: Folder, command: str | None = None) -> Path:
        """pairs.json and pairs.md into `out`, as `sentune pairs --out` writes them; the Markdown's path."""
        from sentune.analysis.pairs import save_pairs

        return save_pairs({**self.raw, **({"command": command} if command else {})}, Path(out))

    def __str__(self) -> str:
        from sentune.analysis.pairs import pairs_markdown

        return pairs_markdown(self.raw)

    def _repr_markdown_(self) -> str:
        return str(self)


def pairs(
    models: Model | Sequence[Model],
    *,
    labels: Sequence[str] | None = None,
    task: str = "STS13",
    count: int = 8,
    seed: int = 0,
    data: Folder | None = None,
    allow_modified: bool = False,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> PairTable:
    """`count` pairs of `task` (a seeded sample, stratified by gold score) with each model's cosine, as `sentune pairs`.

    Args:
        models: one model or a list: names, folders or `SentenceTransformer`s in memory; each encodes with its own pipeline.
        labels: a column name per model (default: the model's name or path).
    """
    named = _labelled(models, labels)
    data_dir, _ = _data_and_task(data, task)
    from sentune.analysis.pairs import pair_cosines

    loaded = _loaded(named, device, trust_remote_code)
    return PairTable(pair_cosines(loaded, task, data_dir, count=count, seed=seed, allow_modified=allow_modified))


RunRef = Folder | tuple[Folder, str]


@dataclass
class Comparison:
    """Runs side by side: `runs` maps each label to its run of a results.json (`tasks`, `summary`); `str()` is the STS
    table `sentune compare` prints (Spearman x100 of each task's 'all')."""

    runs: dict[str, dict]

    def to_pandas(self) -> pandas.DataFrame:
        """One row a run (indexed by label), one column an STS task, then the average; NaN where a run lacks a task."""
        import pandas

        from sentune.core.results import sts_summary

        summary = sts_summary(self.runs)
        if summary is None:
            return pandas.DataFrame(index=pandas.Index(list(self.runs), name="run"))
        header, rows = summary
        return pandas.DataFrame([row[1:] for row in rows], index=pandas.Index([row[0] for row in rows], name="run"), columns=header[1:], dtype=float)

    def __str__(self) -> str:
        from sentune.core.results import sts_summary_table

        return sts_summary_table(self.runs) or "no STS results to compare"

    def _repr_markdown_(self) -> str:
        return str(self)


def compare(runs: Mapping[str, RunRef] | Sequence[RunRef]) -> Comparison:
    """Runs of results folders (from `sentune eval --out`, `sentune.evaluate(...).save`) side by side, as `sentune compare`.

    Args:
        runs: folders, or `(folder, run)` for a run other than `model` (`("runs/eval", "cls")`); a dict names each
            label, a list labels each `folder#run`.
    """
    import json

    if isinstance(runs, str | PathLike):
        runs = [runs]  # one folder, not its characters
    items = list(runs.items()) if isinstance(runs, Mapping) else [(None, ref) for ref in runs]
    if not items:
        raise UserError("runs: give at least one results folder")
    chosen = {}
    for label, ref in items:
        folder, run = (Path(ref[0]), ref[1]) if isinstance(ref, tuple) else (Path(ref), "model")
        name = label or f"{folder}#{run}"
        path = folder / "results.json"
        if not path.is_file():
            raise UserError(f"{name}: no results.json in {folder}")
        results = json.loads(path.read_text(encoding="utf-8"))["runs"]
        if run not in results:
            raise UserError(f"{name}: {path} has no run {run!r}; it has {', '.join(results)}")
        chosen[name] = results[run]
    return Comparison(chosen)


@dataclass(frozen=True)
class Report:
    """The pages `report` wrote (`markdown, html = sentune.report(...)` unpacks them)."""

    markdown: Path
    html: Path

    def __iter__(self) -> Iterator[Path]:
        return iter((self.markdown, self.html))


def report(runs: Sequence[Folder], out: Folder) -> Report:
    """One Markdown and one HTML page (report.md, report.html, their plots) in `out` from run folders holding
    results.json, layerwise.json and/or pairs.json, as `sentune report`. The folders are checked before `out` is made."""
    if isinstance(runs, str | PathLike):
        runs = [runs]
    folders = [Path(run) for run in runs]
    if not folders:
        raise UserError("runs: give at least one run folder")
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise UserError(f"{', '.join(missing)}: no such run folder")
    empty = [str(f) for f in folders if not any((f / name).is_file() for name in ("results.json", "layerwise.json", "pairs.json"))]
    if empty:
        raise UserError(f"{', '.join(empty)}: no results.json, layerwise.json or pairs.json (`sentune eval --out {empty[0]}` writes one)")
    from sentune.analysis.report import build_report

    return Report(*build_report(folders, Path(out)))
