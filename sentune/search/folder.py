"""An index folder on disk: the one module that knows its files' names and where each version of the index lies.

    INDEX/index.json          the current index's settings (sentune.search.index: system, fusion, model and its digest,
                              documents, ...), replaced atomically (os.replace) when a build finishes: the switch.
                              Its `version` names the folder that holds the current files; without one (the first
                              build, and every index sentune wrote before versions) they lie in INDEX itself
    INDEX/versions/ID/        a rebuild's files, ID a digest of what the version is built from and with
    INDEX/model/              a model the build was given in memory (an adapt run's chosen model lies there too)

A version (INDEX, or INDEX/versions/ID) holds

    VERSION/index.json        the version's own settings, `complete` set last (a build resumes from it)
    VERSION/documents.jsonl   the documents' ids and texts, one line a document, in index order, with beside it
    VERSION/documents.offsets.npy and documents.order.npy (each line's offset, the ids' order: sentune.search.documents)
    VERSION/vectors.npy       float32 (documents × dimension), the model's own pipeline; memory-mapped when read
    VERSION/progress.json     rows of vectors.npy written so far: an interrupted build resumes there
    VERSION/bm25/             BM25 (bm25s's files and lexical.json, its settings: sentune.search.lexical)
    VERSION/passages/         vectors.npy, documents.npy (each later window's document) and progress.json of
                              `passages: maxp` (sentune.search.passages)
    VERSION/ann/              index.faiss and ann.json of `--ann` (sentune.search.ann)
    VERSION/dense-N/          vectors.npy of an adapt run's other models (sentune.search.expansion)
    VERSION/shards/           rank-R.npy and rank-R.json while several processes build (sentune.search.build)

A version's files never change once it is current: a rebuild writes a new version, reusing the current one's
unchanged files as hard links (never writing into them), and switches the top index.json to it last, so a reader
that opened the index before keeps reading whole files of the index it opened (a server's memory maps stay valid),
and a rebuild that fails or is killed leaves the current index whole. The version before the current one is kept
for readers that opened it; older ones go at the next switch (a reader keeps the files it has open or mapped, as
POSIX keeps an unlinked file for whoever holds it; one that opens a file of a version two rebuilds old finds it gone:
a server reads everything in when it opens, sentune.serve.engine). One build writes a folder at a time (a lock on
INDEX/versions/.lock).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

SETTINGS = "index.json"
VERSIONS = "versions"
DOCUMENTS = "documents.jsonl"
OFFSETS = "documents.offsets.npy"
ORDER = "documents.order.npy"
VECTORS = "vectors.npy"
PROGRESS = "progress.json"
BM25 = "bm25"
LEXICAL_SETTINGS = "lexical.json"  # inside bm25/, beside bm25s's own files
PASSAGES = "passages"
PASSAGE_OWNERS = "documents.npy"
ANN = "ann"
ANN_INDEX = "index.faiss"
ANN_SETTINGS = "ann.json"
SHARDS = "shards"
MODEL = "model"  # a model given in memory, saved into the index (its settings name it so)
# everything a build writes into a version (a flat index's files, pruned from INDEX once it is no longer needed)
FILES = (SETTINGS, DOCUMENTS, OFFSETS, ORDER, VECTORS, PROGRESS, BM25, PASSAGES, ANN, SHARDS)


class IndexVersion:
    """One version's files (`path`: INDEX itself, or INDEX/versions/ID)."""

    path: Path

    def __init__(self, path: Path | IndexVersion) -> None:
        self.path = path.path if isinstance(path, IndexVersion) else Path(path)

    def __repr__(self) -> str:
        return f"IndexVersion({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexVersion) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    settings_file = property(lambda self: self.path / SETTINGS)
    documents = property(lambda self: self.path / DOCUMENTS)
    offsets = property(lambda self: self.path / OFFSETS)
    order = property(lambda self: self.path / ORDER)
    vectors = property(lambda self: self.path / VECTORS)
    progress = property(lambda self: self.path / PROGRESS)
    bm25 = property(lambda self: self.path / BM25)
    passages = property(lambda self: self.path / PASSAGES)
    ann = property(lambda self: self.path / ANN)
    shards = property(lambda self: self.path / SHARDS)
    passage_vectors = property(lambda self: self.passages / VECTORS)
    passage_owners = property(lambda self: self.passages / PASSAGE_OWNERS)
    passage_progress = property(lambda self: self.passages / PROGRESS)
    ann_index = property(lambda self: self.ann / ANN_INDEX)
    ann_settings = property(lambda self: self.ann / ANN_SETTINGS)

    def shard(self, rank: int) -> tuple[Path, Path]:
        """A process's vectors and its progress while several build (sentune.search.build)."""
        return self.shards / f"rank-{rank}.npy", self.shards / f"rank-{rank}.json"

    def expansion_vectors(self, number: int) -> str:
        """Where an adapt run's other model `number` keeps its document vectors, relative to the version (the
        index's settings name it so)."""
        return f"dense-{number}/{VECTORS}"

    def file(self, relative: str) -> Path:
        """A file the version's settings name relative to it (expansion_vectors's); one inside the version only."""
        path = self.path / relative
        if ".." in Path(relative).parts or Path(relative).is_absolute():
            raise ValueError(f"{relative!r} is not a file inside the index")
        return path

    def rows_written(self, progress: Path | None = None) -> int:
        """The rows progress.json says are written (0: none, or no vectors yet)."""
        progress = progress or self.progress
        vectors = progress.parent / VECTORS if progress.name == PROGRESS else progress.with_suffix(".npy")
        if not (progress.is_file() and vectors.is_file()):
            return 0
        return int(json.loads(progress.read_text())["rows"])

    def reuse(self, source: IndexVersion, parts: Iterable[str]) -> None:
        """The named parts (file or folder names of FILES) of `source` as hard links in this version (a copy where the
        file system has none), for those this version lacks: the files are shared, so neither version may write into
        them (the build writes new files and renames them over, never into one in place)."""
        for name in parts:
            have, given = self.path / name, source.path / name
            if have.exists() or not given.exists():
                continue
            if given.is_dir():
                shutil.copytree(given, have, copy_function=_link_or_copy)
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                _link_or_copy(str(given), str(have))


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


class IndexFolder:
    """INDEX: its current settings and version, a version to build into, and the switch to it."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    @property
    def settings_file(self) -> Path:
        """The current index's settings (what a reader opens first)."""
        return self.root / SETTINGS

    @property
    def model_folder(self) -> Path:
        """Where a build saves a model it was given in memory (shared by every version: one model, one digest)."""
        return self.root / MODEL

    def build_lock(self):
        """An exclusive lock while a build writes the folder (a context manager yielding False when another holds it);
        the OS drops it when the process dies (sentune.core.locks)."""
        from sentune.core.locks import run_lock

        return run_lock(self.root / VERSIONS, wait=False)

    def holds_only_index_files(self) -> bool:
        """Whether the folder holds nothing but what a build put there before its settings (the build lock)."""
        return all(path.name == VERSIONS for path in self.root.iterdir()) if self.root.is_dir() else True

    def has_index(self) -> bool:
        return self.settings_file.is_file()

    def version_of(self, settings: dict) -> IndexVersion:
        """The version the current settings point at; ValueError when they name none inside INDEX/versions."""
        named = settings.get("version")
        if named is None:
            return IndexVersion(self.root)
        parts = Path(str(named)).parts
        if len(parts) != 2 or parts[0] != VERSIONS or parts[1] in ("..", "."):
            raise ValueError(f"version {named!r} is not a folder of {VERSIONS}/")
        return IndexVersion(self.root / VERSIONS / parts[1])

    def flat(self) -> IndexVersion:
        """INDEX itself as a version (the first build's, an index from before versions)."""
        return IndexVersion(self.root)

    def staged(self, identity: dict) -> IndexVersion:
        """The version a rebuild writes into: INDEX/versions/ID, ID a digest of `identity` (what the version is built
        from and with), so that the same build run again, in any process of a torchrun, resumes the same folder."""
        key = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return IndexVersion(self.root / VERSIONS / key)

    def switch(self, version: IndexVersion, settings: dict, write_json) -> None:
        """Make `version` (complete, its settings `settings`) the current index: its own settings written, then the
        top index.json replaced by them in one rename; then versions no reader can still need are removed.
        `write_json(path, value)`: an atomic write."""
        previous = self.current()
        if version.path == self.root:
            write_json(self.settings_file, settings)
            return
        write_json(version.settings_file, settings)
        write_json(self.settings_file, settings | {"version": f"{VERSIONS}/{version.path.name}"})
        self._prune(keep={version.path, previous.path if previous is not None else version.path})

    def current(self) -> IndexVersion | None:
        """The version a reader opening the index now reads (None: no finished index)."""
        try:
            settings = json.loads(self.settings_file.read_text(encoding="utf-8"))
            return self.version_of(settings) if isinstance(settings, dict) and settings.get("complete") else None
        except (OSError, ValueError):
            return None

    def _prune(self, keep: set[Path]) -> None:
        """Remove every version but `keep` (the current and the one before it: a reader that opened it reads on). A
        reader of a removed version keeps the files it holds open (POSIX unlinks a name, not an open file)."""
        folder = self.root / VERSIONS
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if path in keep or not path.is_dir():
                continue
            if path.name.startswith("."):  # a removal killed midway: finished now
                shutil.rmtree(path, ignore_errors=True)
                continue
            hidden = path.with_name(f".removed-{path.name}")
            os.replace(path, hidden)  # out of sight first: a removal killed midway leaves no half version under its name
            shutil.rmtree(hidden, ignore_errors=True)
        if self.root not in keep:  # a flat index two versions ago: its files go (never the top index.json)
            for name in FILES[1:]:
                path = self.root / name
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                elif path.exists():
                    path.unlink()

    def model_location(self, reference: str) -> str | None:
        """The folder inside INDEX the settings' model reference names (a path relative to INDEX), None when it names
        none: then it is an absolute path or a model name, never a folder relative to the current directory."""
        if Path(reference).is_absolute():
            return None
        inside = self.root / reference
        return str(inside) if inside.is_dir() else None

    def model_reference(self, given: str) -> str:
        """How the settings name a model given by `given` (a name, or a folder as typed): a folder inside INDEX relative
        to it, another folder by its absolute path (the index opens from anywhere), else the name."""
        path = Path(given)
        if not path.is_dir():
            return given
        resolved, root = path.resolve(), self.root.resolve()
        return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)
