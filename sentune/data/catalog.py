"""The task catalog (tasks.yaml) as typed records, and loading a task's examples from a data directory."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from sentune.data import readers
from sentune.data.readers import DataError

CATALOG_FILE = Path(__file__).with_name("tasks.yaml")
KINDS = ("sts", "classification", "pair-classification", "relatedness")
DATA_ENV = "SENTUNE_DATA"


@dataclass(frozen=True)
class TaskSpec:
    name: str
    kind: str
    format: str
    groups: tuple[str, ...] = ()
    dir: str | None = None
    subsets: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    protocol: str | None = None
    keep_blank: bool = False
    expected_examples: int | None = None

    def paths(self, data_dir: Path) -> list[Path]:
        """Every file this task reads, for `sentune data check`."""
        if self.format == "semeval":
            base = data_dir / self.dir
            return [base / f"STS.{kind}.{s}.txt" for s in self.subsets for kind in ("input", "gs")]
        return [data_dir / p for p in self.files.values()]


@lru_cache(maxsize=None)
def load_catalog(path: str | None = None) -> dict[str, TaskSpec]:
    """All tasks by name; duplicate names are an error (the registry must be unambiguous)."""
    source = Path(path) if path else CATALOG_FILE
    entries = yaml.safe_load(source.read_text(encoding="utf-8"))
    catalog: dict[str, TaskSpec] = {}
    for number, entry in enumerate(entries, start=1):
        spec = _spec_from_entry(source, number, entry)
        if spec.name in catalog:
            raise ValueError(f"{source}: task {spec.name!r} declared twice")
        catalog[spec.name] = spec
    return catalog


def _spec_from_entry(source: Path, number: int, entry: dict[str, Any]) -> TaskSpec:
    if entry.get("kind") not in KINDS:
        raise ValueError(f"{source}: entry {number} ({entry.get('name')}): kind must be one of {KINDS}")
    entry = dict(entry)
    entry["groups"] = tuple(entry.get("groups", ()))
    entry["subsets"] = tuple(entry.get("subsets", ()))
    return TaskSpec(**entry)


def select_tasks(names: str | list[str]) -> list[TaskSpec]:
    """Task names and group names (comma-separated or a list) -> task specs in catalog order."""
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    catalog = load_catalog()
    chosen: list[str] = []
    for name in wanted:
        members = [t.name for t in catalog.values() if name in t.groups] or ([name] if name in catalog else [])
        if not members:
            groups = sorted({g for t in catalog.values() for g in t.groups})
            raise ValueError(f"unknown task or group {name!r}; groups: {', '.join(groups)}; tasks: {', '.join(catalog)}")
        chosen.extend(m for m in members if m not in chosen)
    return [catalog[name] for name in chosen]


def resolve_data_dir(option: str | os.PathLike | None = None) -> Path:
    """The data directory from the option, else SENTUNE_DATA; a clear error when neither points anywhere."""
    value = option or os.environ.get(DATA_ENV)
    if not value:
        raise DataError(
            "<data directory>", None,
            f"no data directory given: pass --data DIR or set {DATA_ENV} (`sentune data download DIR` fetches the canonical sets)",
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        source = "--data" if option else DATA_ENV
        raise DataError(path, None, f"data directory from {source} does not exist")
    return path


def load_task(spec: TaskSpec, data_dir: Path) -> dict[str, list]:
    """A task's examples by split (STS: by subset). Each reader raises DataError naming file and line."""
    fmt, files = spec.format, {k: data_dir / v for k, v in spec.files.items()}
    if fmt == "semeval":
        base = data_dir / spec.dir
        return {s: readers.read_sts_pairs(base / f"STS.input.{s}.txt", base / f"STS.gs.{s}.txt") for s in spec.subsets}
    if fmt == "semeval-files":
        return {"test": readers.read_sts_pairs(files["input"], files["gold"])}
    if fmt == "stsb":
        return {split: readers.read_stsb_csv(path) for split, path in files.items()}
    if fmt == "sick":
        return {split: readers.read_sick_relatedness(path) for split, path in files.items()}
    if fmt == "sick-e":
        return {split: readers.read_sick_entailment(path) for split, path in files.items()}
    if fmt == "binary":
        pos = readers.read_labeled_lines(files["pos"], 1, keep_blank=spec.keep_blank)
        neg = readers.read_labeled_lines(files["neg"], 0, keep_blank=spec.keep_blank)
        return {"all": pos + neg}
    if fmt in ("sst2", "sst5"):
        return {split: readers.read_sst(path, fine=fmt == "sst5") for split, path in files.items()}
    if fmt == "trec":
        return {split: readers.read_trec(path) for split, path in files.items()}
    if fmt == "mrpc":
        return {split: readers.read_mrpc(path) for split, path in files.items()}
    raise ValueError(f"task {spec.name}: unknown format {fmt!r}")


def sentences_of(examples: dict[str, list]) -> list[tuple[str, readers.Source]]:
    """Every sentence a task encodes, with its source line (pairs give two)."""
    out = []
    for items in examples.values():
        for ex in items:
            if hasattr(ex, "text"):
                out.append((ex.text, ex.source))
            else:
                out.append((ex.a, ex.source))
                out.append((ex.b, ex.source))
    return out
