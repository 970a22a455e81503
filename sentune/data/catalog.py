"""The data catalog: every file sentune reads is a named record here, never a path built in code.

- tasks.yaml: evaluation tasks (name, `kind` = the evaluator, `format` = the reader, files, groups such
  as `sts` or `transfer`, the official example count, the gold score range);
- sets.yaml: named sets of sentences or labelled pairs (training corpora, fit sets, QQP halves).

Both are read through one registry of formats (sentune.data.readers.FORMATS). Groups of tasks (`sts`,
`transfer`, ...) are defined only here; code asks `group_tasks("sts")` instead of writing the list out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from sentune.data import kinds
from sentune.data.kinds import Kind, Pairs, ScoredPairs, Sentences, Tuples
from sentune.data.readers import FORMATS, DataError, Source, sentences_of

TASKS_FILE = Path(__file__).with_name("tasks.yaml")
SETS_FILE = Path(__file__).with_name("sets.yaml")
KINDS = ("sts", "classification", "pair-classification", "relatedness", "retrieval")
DATA_ENV = "SENTUNE_DATA"


def default_data_dir() -> Path:
    """Where `sentune data download` puts the sets when no folder is named, and where every command looks when neither
    --data nor SENTUNE_DATA is given: $XDG_DATA_HOME/sentune/data (~/.local/share/sentune/data)."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser() / "sentune" / "data"


__all__ = ["DataError", "Source", "sentences_of"]  # re-exported for callers of the catalog


@dataclass(frozen=True, kw_only=True)
class FileRecord:
    """Files in one format: `files` by split, or SemEval's `dir` + `subsets`, with the reader's options."""

    format: str
    files: dict[str, str] = field(default_factory=dict)
    dir: str | None = None
    subsets: tuple[str, ...] = ()
    keep_blank: bool = False  # binary tasks: SentEval keeps blank lines as empty examples
    labels: tuple[str, ...] | None = None  # pair-tsv: the allowed labels
    optional: bool = False  # sets: read only when the files exist

    def paths(self, data_dir: Path) -> list[Path]:
        """Every file this record reads, for `sentune data check`."""
        return FORMATS[self.format].paths(self, data_dir)

    def load(self, data_dir: Path) -> dict[str, list]:
        """The examples by split (STS: by subset). Each reader raises DataError naming file and line."""
        return FORMATS[self.format].read(self, data_dir)


@dataclass(frozen=True, kw_only=True)
class TaskSpec(FileRecord):
    name: str
    kind: str
    groups: tuple[str, ...] = ()
    protocol: str | None = None  # transfer: nested-cv, split, cv-then-test
    expected_examples: int | None = None  # the official size, checked before scoring
    score_range: tuple[float, float] | None = None  # relatedness: the gold scale
    skip_same_id: bool = False  # retrieval: a document with the query's id is not a result (BEIR's rule for Quora)


def _record(cls: type, source: Path, where: str, entry: Any) -> Any:
    if not isinstance(entry, dict):
        raise ValueError(f"{source}: {where}: expected a mapping, got {entry!r}")
    entry = dict(entry)
    for key in ("groups", "subsets", "labels", "score_range"):
        if entry.get(key) is not None:
            entry[key] = tuple(entry[key])
    if entry.get("format") not in FORMATS:
        raise ValueError(f"{source}: {where}: format must be one of {', '.join(FORMATS)}, got {entry.get('format')!r}")
    try:
        return cls(**entry)
    except TypeError as exc:
        raise ValueError(f"{source}: {where}: {exc}") from None


@cache
def load_catalog(path: str | None = None) -> dict[str, TaskSpec]:
    """All tasks by name; duplicate names are an error (the registry must be unambiguous)."""
    source = Path(path) if path else TASKS_FILE
    catalog: dict[str, TaskSpec] = {}
    for number, entry in enumerate(yaml.safe_load(source.read_text(encoding="utf-8")), start=1):
        spec = _record(TaskSpec, source, f"entry {number} ({entry.get('name')})", entry)
        if spec.kind not in KINDS:
            raise ValueError(f"{source}: entry {number} ({spec.name}): kind must be one of {KINDS}")
        if spec.name in catalog:
            raise ValueError(f"{source}: task {spec.name!r} declared twice")
        catalog[spec.name] = spec
    return catalog


@cache
def set_catalog() -> dict[str, tuple[FileRecord, ...]]:
    """Named sets by name, each a tuple of file records read in order."""
    entries = yaml.safe_load(SETS_FILE.read_text(encoding="utf-8"))
    return {name: tuple(_record(FileRecord, SETS_FILE, f"set {name!r}", part) for part in parts) for name, parts in entries.items()}


def group_tasks(group: str) -> tuple[str, ...]:
    """The task names of a group, in catalog order (`sts`: the papers' 7 STS tasks)."""
    names = tuple(t.name for t in load_catalog().values() if group in t.groups)
    if not names:
        raise ValueError(f"no task is in group {group!r}")
    return names


def select_tasks(names: str | list[str], option: str = "--tasks") -> list[TaskSpec]:
    """Task names and group names (comma-separated or a list) -> task specs in catalog order; an unknown name is an
    error naming `option`."""
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    catalog = load_catalog()
    chosen: list[str] = []
    for name in wanted:
        members = [t.name for t in catalog.values() if name in t.groups] or ([name] if name in catalog else [])
        if not members:
            groups = sorted({g for t in catalog.values() for g in t.groups})
            raise DataError(option, None, f"unknown task or group {name!r}; groups: {', '.join(groups)}; tasks: {', '.join(catalog)}")
        chosen.extend(m for m in members if m not in chosen)
    return [catalog[name] for name in chosen]


def resolve_data_dir(option: str | os.PathLike | None = None) -> Path:
    """The data directory: the option, else SENTUNE_DATA, else the default folder when it exists (default_data_dir());
    a clear error naming all three when none points anywhere."""
    value = option or os.environ.get(DATA_ENV)
    if not value:
        default = default_data_dir()
        if default.is_dir():
            return default
        raise DataError(
            "<data directory>",
            None,
            f"no data directory given: pass --data DIR, set {DATA_ENV}, or run `sentune data download` (fetches the canonical sets into "
            f"{default}, which every command reads when neither is given)",
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        source = "--data" if option else DATA_ENV
        raise DataError(path, None, f"data directory from {source} does not exist")
    return path


def load_task(spec: TaskSpec, data_dir: Path, *, allow_modified: bool = False) -> dict[str, list]:
    """A task's examples by split (STS: by subset). The example count must be the catalog's official size and every
    file listed in the data directory's SHA256SUMS must match it: a cut or edited file is an error naming the file and
    the fix, never a silently different score, unless `allow_modified` (--allow-modified-data, recorded in
    results.json)."""
    examples = spec.load(data_dir)
    if not allow_modified:
        problem = data_problem(spec, data_dir, examples)
        if problem:
            raise DataError(*problem)
    return examples


def data_problem(spec: TaskSpec, data_dir: Path, examples: dict[str, list]) -> tuple[Path | str, None, str] | None:
    """(file, None, what differs) when the task's data is not the catalogued data; None when it is."""
    fix = f"check the data directory with `sentune data check {data_dir}`, or pass --allow-modified-data to score it anyway"
    count = sum(len(v) for v in examples.values())
    if spec.expected_examples is not None and count != spec.expected_examples:
        files = ", ".join(str(p) for p in spec.paths(data_dir))
        return files, None, f"{spec.name} has {count} examples, the catalog expects {spec.expected_examples} (a cut or modified file?); {fix}"
    for path in spec.paths(data_dir):
        expected = _listed_sums(data_dir).get(path.resolve())
        if expected is not None and sha256_of(path) != expected:
            return path, None, f"{spec.name}: the file differs from {data_dir / 'SHA256SUMS'}; {fix}"
    return None


@cache
def _listed_sums_cached(sums: Path, stamp: tuple[int, int]) -> dict[Path, str]:
    listed = {}
    for line in sums.read_text(encoding="utf-8").splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2:
            listed[(sums.parent / parts[1].lstrip("*")).resolve()] = parts[0]
    return listed


def _listed_sums(data_dir: Path) -> dict[Path, str]:
    sums = data_dir / "SHA256SUMS"
    if not sums.is_file():
        return {}
    stat = sums.stat()
    return _listed_sums_cached(sums.resolve(), (stat.st_size, stat.st_mtime_ns))


_HASHES: dict[tuple[Path, int, int], str] = {}


def sha256_of(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime): repeated evaluations hash each file once."""
    import hashlib

    stat = path.stat()
    key = (path.resolve(), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def load_set(name: str, data_dir: Path) -> dict[str, list]:
    """A named set's examples by split, its records' splits merged in order (e.g. qqp-test → {'test': pairs})."""
    catalog = set_catalog()
    if name not in catalog:
        raise DataError("<set>", None, f"unknown set {name!r}; sets: {', '.join(catalog)}")
    out: dict[str, list] = {}
    for record in catalog[name]:
        if record.optional and not all(p.exists() for p in record.paths(data_dir)):
            continue
        for split, items in record.load(data_dir).items():
            out.setdefault(split, []).extend(items)
    return out


def load_examples(name: str, data_dir: Path) -> list:
    """Every example of a named set, split by split in the order the records first name them, each split's records in
    sets.yaml's order (`nli`: SNLI dev, XNLI-en dev, SNLI test). Training reads them in this order through a seeded
    shuffle, so another order trains another model (sed.md shows 005-nli's)."""
    return [ex for items in load_set(name, data_dir).values() for ex in items]


@dataclass(frozen=True)
class TrainFiles:
    """A kind a recipe's `train_data: PREFIX:PATH` reads from a file, by its name in the registry of data kinds
    (sentune.data.kinds.KINDS), and how that file's lines look (for errors)."""

    kind_name: str
    lines: str

    @property
    def kind(self) -> type[Kind]:
        return kinds.kind(self.kind_name)


# train_data's PREFIX:PATH forms. The YAML syntax stays the recipes' own; what the trainer and the methods receive is
# the kind it parses into (TrainData.load), never the string.
TRAIN_FILES: dict[str, TrainFiles] = {
    "file": TrainFiles(Sentences.name, "one sentence per line"),
    "pairs": TrainFiles(Pairs.name, "sentence<TAB>paraphrase lines"),
    "labelled": TrainFiles(ScoredPairs.name, "s1<TAB>s2<TAB>label lines"),
    "tuples": TrainFiles(Tuples.name, "anchor<TAB>positive<TAB>negative lines"),
}
SENTENCE_FORMS = "a named set (sentune/data/sets.yaml), file:PATH or tasks:SELECTION"


@dataclass(frozen=True)
class TrainData:
    """A recipe's `train_data` (or another option naming sentences, e.g. --fit-on) parsed once: the data kind it holds
    and where that is read from: a named set, `tasks:SELECTION` (every sentence of those evaluation tasks) or
    `PREFIX:PATH` (TRAIN_FILES)."""

    kind: type[Kind]
    origin: Literal["set", "tasks", "file"]
    value: str  # the set's name, the task selection, or the path

    def forms(self) -> str:
        """How a recipe names data of this kind (for the error of a method that takes another kind)."""
        return describe_forms(self.kind)

    def check(self, where: str) -> None:
        """Validate without reading the data (labelled pairs are read, so that a malformed line is named now, not when
        training starts)."""
        if self.origin == "tasks":
            select_tasks(self.value)
        elif self.origin == "set":
            if self.value not in set_catalog():
                raise DataError(where, None, f"unknown sentence set {self.value!r}; choose {', '.join(set_catalog())}, file:PATH or tasks:SELECTION")
        elif self.kind is ScoredPairs:
            ScoredPairs.from_file(self.value)
        elif not Path(self.value).is_file():
            raise DataError(self.value, None, f"{where}: file not found")

    def load(self, data_dir: Path, *, allow_modified: bool = False) -> Kind:
        """The data, as its kind: a set's or the tasks' unique sentences, or the file read by its kind's reader."""
        if self.origin == "file":
            return self.kind.from_file(Path(self.value))
        if self.origin == "tasks":
            texts = [text for task in select_tasks(self.value) for text, _ in sentences_of(load_task(task, data_dir, allow_modified=allow_modified))]
        else:
            self.check("<set>")
            texts = [text for text, _ in sentences_of(load_set(self.value, data_dir))]
        return Sentences(texts)


def describe_forms(kind: type[Kind]) -> str:
    """How a recipe's train_data names data of `kind`."""
    forms = [f"{prefix}:PATH ({files.lines})" for prefix, files in TRAIN_FILES.items() if files.kind is kind and prefix != "file"]
    return " or ".join(forms) if forms else (SENTENCE_FORMS if kind is Sentences else f"{kind.name} given as Python data")


def parse_train_data(text: str) -> TrainData:
    """`train_data` (or --fit-on) as written → what it names; reads nothing."""
    prefix, sep, rest = text.partition(":")
    if sep and prefix == "tasks":
        return TrainData(Sentences, "tasks", rest)
    if sep and prefix in TRAIN_FILES:
        return TrainData(TRAIN_FILES[prefix].kind, "file", rest)
    return TrainData(Sentences, "set", text)


def sentence_source(name: str, where: str) -> TrainData:
    """An option that names sentences (a set, file:PATH, tasks:SELECTION), parsed; another kind is an error."""
    data = parse_train_data(name)
    if data.kind is not Sentences:
        raise DataError(where, None, f"{name!r} holds {data.kind.name}, not sentences; choose {SENTENCE_FORMS}")
    return data


def load_sentences(name: str, data_dir: Path, *, unique: bool = True, allow_modified: bool = False) -> list[str]:
    """Sentences of a named set (sets.yaml: nli, wiki, stsb, qqp, ...), of `file:PATH` (a corpus file: one sentence per
    line, blank lines skipped) or of `tasks:SELECTION` (every sentence of the evaluation tasks selected, e.g.
    `tasks:STS12,STS13,STS14,STS15,STS16`, the set the SED paper fits its flows on)."""
    data = sentence_source(name, "<set>").load(data_dir, allow_modified=allow_modified)
    assert isinstance(data, Sentences)
    return data.unique().texts if unique else data.texts


def check_sentence_set(name: str, where: str) -> None:
    """Validate a sentence-set name without reading data (for recipes and options, before any work)."""
    sentence_source(name, where).check(where)
