"""A search index on disk: what `sentune index` builds, `sentune search` reads and a retrieval `sentune adapt` run saves
its chosen system as. Its files (sentune.search.folder says which and where) are its settings (the system: dense,
bm25 or hybrid with its fusion; the model, by a folder inside the index relative to it, an absolute path or a name,
and its weights' digest; the documents' count and sha256), the documents (read a line at a time:
sentune.search.documents), their vectors (float32, documents × dimension, the model's own pipeline, memory-mapped
when read) with how many rows are written (an interrupted build resumes there), BM25 as BEIR runs it
(sentune.search.lexical, with the settings its record holds: an adapt run's fitted on its selection queries), and
with `passages: maxp` every document's later windows (the dense score of a document is its best passage's:
sentune.search.passages).

The vectors are written chunk by chunk into the memory-mapped file, so a build never holds more than one chunk's
activations, and the settings' `complete` is set last: a search refuses an index whose build did not finish, and one
whose files disagree with its settings (documents, vector rows, BM25's size) or hold no fusion weight for a hybrid.
A build over a finished index writes a new version beside it and switches to it when it is whole
(sentune.search.folder): a reader keeps the files it opened, a failed build leaves the index it had.

The model is checked on open: the one the settings name (a folder inside the index, never one relative to the current
directory) or the one the caller gives, refused when its weights' digest is not the recorded one.

Several processes (torchrun / accelerate launch, the launchers training uses): each rank encodes a contiguous shard of
the documents; rank 0 waits for all of them (a gloo or NCCL barrier), writes the vectors in document order, BM25 and
the settings. The result is the one-process index (tests/test_search.py checks it on 2 gloo processes).

Search is exact: every document scored (sentune.search.exact: NumPy in blocks, FAISS's flat index for large ones), as
every sentune evaluation ranks, ties by the id order saved beside the documents; the hybrid normalises each system's
scores over every document (sentune.search.fusion). An index built with `--ann` also holds an approximate dense index
(sentune.search.ann), searched instead unless `sentune search --exact`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentune.core.runtime import Runtime
from sentune.data.beir import Document, Query
from sentune.data.text_files import DataError
from sentune.errors import UserError
from sentune.search.ann import AnnIndex
from sentune.search.documents import DAMAGED, Documents, write_documents
from sentune.search.exact import dense_top
from sentune.search.folder import ANN, BM25, DOCUMENTS, OFFSETS, ORDER, PASSAGES, PROGRESS, SHARDS, VECTORS, IndexFolder, IndexVersion
from sentune.search.fusion import Fusion, hybrid_rank_rows, top_by_score
from sentune.search.lexical import LexicalIndex, LexicalSettings
from sentune.search.passages import PassageVectors, UnitVectors
from sentune.search.stored import (  # noqa: F401
    FORMAT,
    CheckedOut,
    check_lexical,
    check_out,
    check_resume,
    corpus_digest,
    current_version,
    open_vectors,
    read_settings,
    read_settings_file,
)
from sentune.search.trec import NOT_TREC_SAFE, read_trec_run, trec_safe, write_trec_run  # noqa: F401

# (check_out, read_trec_run and write_trec_run are imported from here too, where their callers have always found them)

CHUNK = 1024  # documents encoded between two progress marks
SYSTEMS = ("dense", "bm25", "hybrid")


def lexical_record(settings: LexicalSettings) -> dict:
    """How the settings record BM25's (a build with other settings rebuilds the BM25 side)."""
    return vars(settings) | {"label": settings.label}


@dataclass(frozen=True)
class BuildPlan:
    system: str = "dense"
    fusion: Fusion | None = None
    lexical: LexicalSettings = LexicalSettings()
    passages: str = "first"  # "maxp": documents also as passages, each scored by its best (sentune.search.passages)
    stride: int | None = None  # tokens between two windows' starts (None: half a window)


def passages_record(plan: BuildPlan, model: Any) -> dict | None:
    """How the settings record the passages, their count left out (None: the first window alone); one line naming
    --passage-stride when it is not from 1 to a window."""
    from sentune.search.passages import window_tokens

    if plan.passages == "first":
        return None
    window = window_tokens(model)
    stride = plan.stride if plan.stride is not None else max(1, window // 2)
    if not 0 < stride <= window:
        raise UserError(f"--passage-stride {stride}: from 1 to the model's window, {window} tokens")
    return {"kind": plan.passages, "window": window, "stride": stride}


def build_index(
    model: Any,
    model_ref: str,
    documents: list[Document],
    out: Path,
    plan: BuildPlan = BuildPlan(),
    *,
    show_progress: bool = False,
    model_digest: str | None = None,
    vectors: np.ndarray | None = None,
    passage_vectors: np.ndarray | None = None,
    shared_folder: bool = False,
    checked: CheckedOut | None = None,
    ann: Any = None,
    expansion: dict | None = None,
    option: str = "--out",
) -> Path:
    """Encode `documents` with `model` into an index in `out` (resuming a build stopped before), build BM25 (and the
    approximate index `ann`, an AnnSpec), and switch `out` to it. `model_ref`: how a search loads the model again (a
    folder inside `out`, relative to it, or a name; a folder outside is recorded by its absolute path). `vectors`: the
    documents' vectors already encoded by this model (an adapt run's), written as they are; `passage_vectors` the same
    for the documents' later windows (plan.passages "maxp"); `expansion`: what the index ranks with beyond its fusion
    (sentune.search.expansion; its models' vectors given as arrays, written into the index). The first build writes
    into `out`; a build over a finished index writes a new version of it beside (sentune.search.folder) and switches
    to it only once it is whole, so a reader of the index keeps its files and a failed build leaves it as it was. An
    index of the same model and documents with another system, fusion or BM25 settings keeps its vectors (shared with
    the version before) and gets the rest built again. `checked`: what check_out found in `out` before the model
    loaded (sentune.api.index.IndexBuild): not checked again. `option`: how errors name `out`."""
    from sentune.core.distributed import world_size
    from sentune.core.embedding_cache import model_digest as digest_of

    if shared_folder or world_size() > 1:  # an adapt run holds its folder's lock; torchrun's processes build together
        return _build(
            model, model_ref, documents, out, plan, show_progress, model_digest, vectors, passage_vectors, shared_folder, checked, ann, expansion, option
        )
    model_digest = model_digest or digest_of(model)
    checked = CheckedOut(check_resume(out, model_digest, documents, shared_folder, checked, option))  # refused before anything is written
    passages_record(plan, model)
    with IndexFolder(out).build_lock() as held:
        if not held:
            raise UserError(f"{option} {out}: another `sentune index` is building this index now; wait for it to finish")
        return _build(
            model, model_ref, documents, out, plan, show_progress, model_digest, vectors, passage_vectors, shared_folder, checked, ann, expansion, option
        )


def _build(
    model: Any,
    model_ref: str,
    documents: list[Document],
    out: Path,
    plan: BuildPlan,
    show_progress: bool,
    model_digest: str | None,
    vectors: np.ndarray | None,
    passage_vectors: np.ndarray | None,
    shared_folder: bool,
    checked: CheckedOut | None,
    ann: Any,
    expansion: dict | None,
    option: str,
) -> Path:
    from sentune.core.distributed import rank
    from sentune.core.embedding_cache import model_digest as digest_of

    model_digest = model_digest or digest_of(model)
    saved = check_resume(out, model_digest, documents, shared_folder, checked, option)
    index_folder = IndexFolder(out)
    wanted_passages = passages_record(plan, model)
    named_expansion, expansion_arrays = _named_expansion(expansion)
    settings = {
        "format": FORMAT,
        "system": plan.system,
        "fusion": plan.fusion.to_dict() if plan.fusion else None,
        "model": index_folder.model_reference(model_ref),
        "model_digest": model_digest,
        "documents": len(documents),
        "corpus_sha256": corpus_digest(documents),
        "lexical": lexical_record(plan.lexical),
        "passages": wanted_passages,
        "complete": False,
    }
    if named_expansion is not None:
        settings["expansion"] = named_expansion
    current = current_version(out, saved) if saved is not None and saved.get("complete") else None
    if saved is not None and current is not None and _same_build(saved, settings) and _same_ann(current, ann):
        return out
    same_model = saved is not None and saved.get("model_digest") == model_digest
    if current is None:  # the first build (or its resumption): into `out` itself, which no reader can be reading
        version = index_folder.flat()
        if saved is not None and not same_model and rank() == 0:  # an adapt run's unfinished index of another model
            _remove(version, (VECTORS, PROGRESS, PASSAGES, BM25, ANN, SHARDS))
        if saved is not None and _passages_of(saved) != wanted_passages and rank() == 0:  # other windows: encoded again
            _remove(version, (PASSAGES,))
        reused: set[str] = set()
    else:
        assert saved is not None  # a current version has its settings
        identity = {k: v for k, v in settings.items() if k != "complete"} | {"ann": _ann_identity(current, ann), "expansion": _shapes(expansion)}
        version = index_folder.staged(identity)
        own = read_settings_file(version.settings_file) if version.settings_file.is_file() else None
        if own is not None and own.get("complete"):  # built before and never changed since: switched back to
            if rank() == 0:
                index_folder.switch(version, own, _write_json)
            return out
        reused = _reusable(saved, settings, current) if same_model else set()
        if rank() == 0:
            version.path.mkdir(parents=True, exist_ok=True)
            version.reuse(current, reused)
    if rank() == 0:
        _write_json(version.settings_file, settings)
        if DOCUMENTS not in reused:
            write_documents(version.path, documents)
    if VECTORS not in reused:  # (shared with the version before: written already)
        _write_vectors(model, documents, version, vectors, show_progress)
    if rank() != 0:
        return out
    if wanted_passages is not None:
        count = saved["passages"]["count"] if PASSAGES in reused and saved is not None else None
        if count is None:
            count = _encode_passages(model, documents, version, wanted_passages, show_progress, passage_vectors)
        settings["passages"] = wanted_passages | {"count": count}
    if BM25 not in reused:
        LexicalIndex.of_documents(documents, plan.lexical, show_progress=show_progress).save(version.bm25)
    for relative, array in expansion_arrays.items():
        target = version.file(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        _save_npy(target, np.asarray(array, dtype=np.float32))
    settings["dimension"] = int(np.load(version.vectors, mmap_mode="r").shape[1])
    if ann is not None:
        from sentune.search.ann import build_ann

        build_ann(version.path, ann, settings, show_progress=show_progress)
    settings["complete"] = True
    index_folder.switch(version, settings, _write_json)
    return out


def _write_vectors(model: Any, documents: list[Document], version: IndexVersion, vectors: np.ndarray | None, show_progress: bool) -> None:
    """The documents' vectors into the version: those given, those `sentune eval` encoded before, else encoded here
    (by every process's shard under torchrun), resuming where an interrupted build stopped."""
    from sentune.core.distributed import rank, world_size

    if vectors is None and world_size() == 1:
        vectors = _evaluated_before(model, documents)
    if vectors is not None:
        if rank() == 0:
            _save_npy(version.vectors, np.asarray(vectors, dtype=np.float32))
            _write_json(version.progress, {"rows": len(documents)})
    elif world_size() > 1:
        _encode_shard(model, documents, version, show_progress)
    else:
        _encode_into(model, [d.text for d in documents], version.vectors, version.progress, show_progress)


BUILD_KEYS = ("format", "system", "fusion", "model_digest", "documents", "corpus_sha256", "lexical", "expansion")


def _same_build(saved: dict, wanted: dict) -> bool:
    """Whether the finished index `saved` is the one `wanted` asks for (its passages' count left out)."""
    return all(saved.get(key) == wanted.get(key) for key in BUILD_KEYS) and _passages_of(saved) == wanted["passages"] and saved.get("model") == wanted["model"]


def _passages_of(settings: dict) -> dict | None:
    found = settings.get("passages")
    return {k: v for k, v in found.items() if k != "count"} if found else None


def _same_ann(current: IndexVersion, spec: Any) -> bool:
    """Whether the current version holds the approximate index `spec` asks for (None: none asked, whatever it holds)."""
    if spec is None:
        return True
    from sentune.search.ann import read_ann_settings

    saved = read_ann_settings(current.path)
    return saved is not None and saved.get("kind") == spec.kind and saved.get("settings") == spec.settings


def _ann_identity(current: IndexVersion, spec: Any) -> Any:
    """What a new version's approximate index is: the one asked for, else the current one's (kept)."""
    from sentune.search.ann import read_ann_settings

    if spec is not None:
        return {"kind": spec.kind, "settings": spec.settings}
    saved = read_ann_settings(current.path)
    return {"kept": saved.get("kind"), "settings": saved.get("settings")} if saved else None


def _reusable(saved: dict, wanted: dict, current: IndexVersion) -> set[str]:
    """The parts of the current version (same model, same documents) a new one shares instead of building again."""
    parts = {DOCUMENTS, OFFSETS, ORDER, VECTORS, PROGRESS}
    if _passages_of(saved) == wanted["passages"]:
        parts.add(PASSAGES)
    if saved.get("lexical") == wanted["lexical"]:
        parts.add(BM25)
    if current.ann.is_dir():  # build_ann keeps it when built with the same settings, else builds another
        parts.add(ANN)
    return parts


def _named_expansion(expansion: dict | None) -> tuple[dict | None, dict[str, np.ndarray]]:
    """The expansion as the settings record it (each other model's vectors by the file they are written to) and the
    arrays to write."""
    if expansion is None or not isinstance(expansion.get("models"), list):
        return expansion, {}
    arrays: dict[str, np.ndarray] = {}
    models = []
    for number, entry in enumerate(expansion["models"], start=1):
        if isinstance(entry, dict) and isinstance(entry.get("vectors"), np.ndarray):
            relative = IndexVersion(Path()).expansion_vectors(number)
            arrays[relative] = entry["vectors"]
            entry = entry | {"vectors": relative}
        models.append(entry)
    return expansion | {"models": models}, arrays


def _shapes(expansion: dict | None) -> Any:
    """The expansion with its arrays as their shape and a digest of their first rows (a version's identity)."""
    if expansion is None:
        return None
    named, arrays = _named_expansion(expansion)
    import hashlib

    return {"record": named, "arrays": {k: [list(v.shape), hashlib.sha256(np.ascontiguousarray(v[:64]).tobytes()).hexdigest()] for k, v in arrays.items()}}


def _remove(version: IndexVersion, names: tuple[str, ...]) -> None:
    import shutil

    for name in names:
        path = version.path / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _save_npy(path: Path, array: np.ndarray) -> None:
    """An array written beside `path` and renamed over it: a file another version shares is never written into."""
    partial = path.with_name(f".{path.name}.partial.npy")
    np.save(partial, array)
    os.replace(partial, path)


def _evaluated_before(model: Any, documents: list[Document]) -> np.ndarray | None:
    """The documents' vectors when `sentune eval` (a retrieval task on this corpus, model pooling, fp32) encoded them
    with this model before: its embedding cache holds each distinct text once, in corpus order."""
    from sentune.core.embedding_cache import cached_only
    from sentune.core.encode import Encoder

    texts = list(dict.fromkeys(d.text for d in documents))
    found = cached_only(Encoder(model, "model", show_progress=False), texts)
    if found is None:
        return None
    row = {text: i for i, text in enumerate(texts)}
    return found["model"][[row[d.text] for d in documents]]


def _encode_passages(model: Any, documents: list[Document], version: IndexVersion, record: dict, show_progress: bool, given: np.ndarray | None = None) -> int:
    """Every document's later windows (sentune.search.passages) encoded into the version's passages, resumable as the
    documents' vectors are (`given`: encoded already, written as they are), with their documents' rows; their count."""
    from sentune.search.passages import later_windows

    texts, owners = later_windows(model.tokenizer, [d.text for d in documents], record["window"], record["stride"])
    version.passages.mkdir(parents=True, exist_ok=True)
    _save_npy(version.passage_owners, owners)
    if given is not None and len(given) == len(texts):
        _save_npy(version.passage_vectors, np.asarray(given, dtype=np.float32))
        _write_json(version.passage_progress, {"rows": len(texts)})
    elif texts:
        _encode_into(model, texts, version.passage_vectors, version.passage_progress, show_progress)
    else:
        dimension = int(np.load(version.vectors, mmap_mode="r").shape[1])
        _save_npy(version.passage_vectors, np.zeros((0, dimension), dtype=np.float32))
        _write_json(version.passage_progress, {"rows": 0})
    return len(texts)


def _write_json(path: Path, value: dict) -> None:
    from sentune.core.results import write_atomic

    write_atomic(path, json.dumps(value, indent=2))


def _encode_into(model: Any, texts: list[str], vectors_path: Path, progress_path: Path, show_progress: bool) -> None:
    """texts' vectors into a memory-mapped .npy, CHUNK rows at a time; progress_path says how many rows are written."""
    from tqdm.auto import tqdm

    from sentune.core.encode import Encoder

    encoder = Encoder(model, "model", show_progress=False)
    done = json.loads(progress_path.read_text())["rows"] if progress_path.is_file() and vectors_path.is_file() else 0
    if done >= len(texts) and done:  # written whole before: never opened for writing again
        return
    if done == 0:
        dimension = encoder.encode(texts[:1]).shape[1]
        vectors_path.unlink(missing_ok=True)  # a new file, never one another version shares
        np.lib.format.open_memmap(vectors_path, mode="w+", dtype=np.float32, shape=(len(texts), dimension)).flush()
    vectors = np.lib.format.open_memmap(vectors_path, mode="r+")
    with tqdm(total=len(texts), initial=done, desc="encoding the documents", unit="doc", disable=not show_progress) as bar:
        for start in range(done, len(texts), CHUNK):
            chunk = texts[start : start + CHUNK]
            vectors[start : start + len(chunk)] = encoder.encode(chunk)
            vectors.flush()
            _write_json(progress_path, {"rows": start + len(chunk)})
            bar.update(len(chunk))
    del vectors


def shard_bounds(total: int, ranks: int, rank: int) -> tuple[int, int]:
    """The contiguous rows rank `rank` of `ranks` encodes (the first total % ranks ranks take one more)."""
    size, extra = divmod(total, ranks)
    start = rank * size + min(rank, extra)
    return start, start + size + (rank < extra)


def _encode_shard(model: Any, documents: list[Document], version: IndexVersion, show_progress: bool) -> None:
    import torch.distributed as dist

    from sentune.core.distributed import rank, world_size

    if not dist.is_initialized():
        dist.init_process_group("nccl" if os.environ.get("SENTUNE_INDEX_BACKEND") == "nccl" else "gloo")
    me, ranks = rank(), world_size()
    start, stop = shard_bounds(len(documents), ranks, me)
    shards = version.shards
    shards.mkdir(parents=True, exist_ok=True)
    texts = [d.text for d in documents[start:stop]]
    _encode_into(model, texts, *version.shard(me), show_progress and me == 0)
    dist.barrier()
    if me == 0:
        parts = [np.load(version.shard(r)[0], mmap_mode="r") for r in range(ranks)]
        vectors = np.lib.format.open_memmap(version.vectors, mode="w+", dtype=np.float32, shape=(len(documents), parts[0].shape[1]))
        for r, part in enumerate(parts):
            lo, hi = shard_bounds(len(documents), ranks, r)
            vectors[lo:hi] = part
        vectors.flush()
        del vectors, parts
        _write_json(version.progress, {"rows": len(documents)})
        for path in shards.iterdir():
            path.unlink()
        shards.rmdir()
    dist.barrier()  # no process leaves while another still talks to it (gloo aborts on such a teardown)
    dist.destroy_process_group()


@dataclass
class Hit:
    doc_id: str
    score: float
    text: str


def saved_fusion(settings: dict, path: Path) -> Fusion | None:
    """The fusion the settings record, as a Fusion (None: the index has none, a dense one); one line naming the file
    when the record is not one sentune writes."""
    if settings.get("fusion") is None:
        return None
    try:
        return Fusion.from_dict(settings["fusion"])
    except ValueError as exc:
        raise DataError(path, None, f"{exc}; {DAMAGED}") from None


def index_model_source(folder: Path, settings: dict | None = None, model_argument: str = "--model") -> str:
    """The model the index in `folder` names: a folder inside the index, an absolute folder or a name, never a folder
    relative to the current directory (one line saying to name the model with `model_argument` when the settings
    name one: an index built before models were recorded so)."""
    settings = settings if settings is not None else read_settings(folder) or {}
    ref = str(settings.get("model"))
    inside = IndexFolder(folder).model_location(ref)
    if inside is not None:
        return inside
    if not Path(ref).is_absolute() and Path(ref).exists():
        raise UserError(
            f"{IndexFolder(folder).settings_file}: its model {ref!r} is a folder relative to where the index was built, not inside the "
            f"index; name the model with {model_argument}"
        )
    return ref


class _Shared:
    """What every system's view of one opened index shares: its files' readers, loaded once, and its model."""

    def __init__(self, folder: Path, version: IndexVersion, settings: dict, documents: Documents, model: Any, model_argument: str) -> None:
        self.folder, self.version, self.settings, self.documents = folder, version, settings, documents
        self.vectors: np.ndarray | None = None
        self.passages: PassageVectors | None = None
        self.lexical_checked = False
        self.lexical: LexicalIndex | None = None
        self.unit_vectors: UnitVectors | np.ndarray | None = None
        self.given_model = model  # a name, a folder or a model in memory the caller named (None: the index's own)
        self.model_argument = model_argument  # how the caller names it (`--model`, `model=`)
        self.model: Any = None


class SearchIndex:
    """A built index, read for searching: `search(texts)` ranks every document for each text. Opening it checks every
    file the chosen system reads against its settings (documents, vector rows and dimension, BM25's size), so a damaged
    index is one line naming its file, never a ranking of the wrong documents. The documents stay in their file: a
    search reads its hits' lines (sentune.search.documents). An opened index reads the version of the folder that was
    current when it opened, whatever is rebuilt there after (sentune.search.folder); `system(name)` is a view of the
    same opened index ranking with another system."""

    def __init__(self, shared: _Shared, system: str, device: str | None = None) -> None:
        self._shared = shared
        self.system = system
        self.settings = settings = shared.settings
        self.fusion: Fusion | None = saved_fusion(settings, IndexFolder(shared.folder).settings_file)
        if system == "hybrid" and self.fusion is None:
            raise UserError(
                f"--system hybrid: {IndexFolder(shared.folder).settings_file} holds no fusion weight (a {settings['system']} index); rebuild it with one, "
                f"`sentune index --model MODEL --corpus CORPUS --out {shared.folder} --fusion convex:ALPHA` (or rrf; its vectors are kept)"
            )
        count = len(shared.documents)
        if system != "bm25" and shared.vectors is None:
            shared.vectors = open_vectors(shared.version.vectors, count, settings.get("dimension"))
            if settings.get("passages"):  # documents scored by their best passage (`passages: maxp`)
                shared.passages = PassageVectors.open(shared.version.path, shared.vectors, settings["passages"])
        if system != "dense" and not shared.lexical_checked:
            check_lexical(shared.version.bm25, count)
            shared.lexical_checked = True
        self.device = device
        self.runtime: Runtime | None = None  # what computes the queries' batches (sentune.core.runtime); None: PyTorch
        self.ann: AnnIndex | None = AnnIndex.open(shared.version.path, settings)  # `sentune index --ann`: searched by default (sentune.search.ann)
        if self.passages is not None:  # an approximate index holds one vector a document: passages are searched exactly
            self.ann = None

    folder = property(lambda self: self._shared.folder, doc="The index folder as the caller named it (messages name it).")
    version = property(lambda self: self._shared.version, doc="The version of the folder this index reads (sentune.search.folder).")
    documents = property(lambda self: self._shared.documents)
    vectors = property(lambda self: self._shared.vectors if self.system != "bm25" else None)
    passages = property(lambda self: self._shared.passages if self.system != "bm25" else None)

    @classmethod
    def open(cls, folder: Path, system: str | None = None, device: str | None = None, *, model: Any = None, model_argument: str = "--model") -> SearchIndex:
        """One line naming the folder or file when it is not a finished, whole index (checked before any model loads).
        `model`: the model to rank with instead of the one the index names (a name, a folder or a model in memory;
        its weights must be the recorded ones); `model_argument`: how the caller names it in errors."""
        index_folder = IndexFolder(folder)
        settings = read_settings(folder)
        if settings is None or settings.get("format") != FORMAT:
            hint = " (an adapt run saves one only for search data)" if (folder / "adapt.json").is_file() else ""
            raise UserError(f"{folder}: no sentune index ({index_folder.settings_file.name}){hint}; build one with `sentune index`")
        if not settings.get("complete"):
            raise UserError(f"{index_folder.settings_file}: the build did not finish; run the same `sentune index` command again to resume it")
        if system is not None and system not in SYSTEMS:
            raise UserError(f"--system {system}: choose {', '.join(SYSTEMS)}")
        if settings.get("system") not in SYSTEMS:
            raise DataError(index_folder.settings_file, None, f"system {settings.get('system')!r} is none of {', '.join(SYSTEMS)}; {DAMAGED}")
        version = current_version(folder, settings)
        documents = Documents.open(version.path, settings.get("documents"))
        return cls(_Shared(folder, version, settings, documents, model, model_argument), system or settings["system"], device)

    def system_view(self, name: str) -> SearchIndex:
        """This opened index ranking with system `name` (dense, bm25 or hybrid): the same files, model and loaded BM25;
        one line when it is none of them, or a hybrid the index holds no fusion for."""
        if name not in SYSTEMS:
            raise UserError(f"system {name}: choose {', '.join(SYSTEMS)}")
        return SearchIndex(self._shared, name, self.device)

    def mapped_arrays(self) -> list[np.ndarray]:
        """Every memory-mapped array a search reads (vectors, BM25's matrix, the documents' offsets and order,
        passages), BM25 loaded memory-mapped: a server reads them in once, their pages the page cache's."""
        arrays: list[np.ndarray] = [self.documents.offsets, self.documents.order]
        if self._shared.vectors is not None:
            arrays.append(self._shared.vectors)
        if self._shared.passages is not None:
            arrays += [self._shared.passages.passages, self._shared.passages.owners]
        if self._shared.lexical_checked:
            arrays += self.lexical(mmap=True).mapped_arrays()
        return arrays

    def model_source(self) -> str:
        """Where the model is loaded from: the caller's (a name or folder), else the index's (index_model_source)."""
        given = self._shared.given_model
        if isinstance(given, str | Path):
            return str(given)
        return index_model_source(self.folder, self.settings, self._shared.model_argument)

    def model(self):
        """The index's model, loaded once for every view; one line when its weights are not those the index recorded."""
        shared = self._shared
        if shared.model is None:
            from sentune.core.embedding_cache import model_digest
            from sentune.core.models import ModelLoadError, check_model_name, load_model

            given = shared.given_model
            if given is not None and not isinstance(given, str | Path):
                loaded = given
            else:
                source = self.model_source()
                where = shared.model_argument if given is not None else f"{IndexFolder(self.folder).settings_file}: its model"
                try:
                    check_model_name(source, where)  # a folder that is gone: named as the caller can act on it, in one line
                except ModelLoadError as exc:
                    raise UserError(f"{exc}; name the model the index was built with ({shared.model_argument})") from None
                loaded = load_model(source, device=self.device)
            recorded = self.settings.get("model_digest")
            if recorded is not None and model_digest(loaded) != recorded:
                named = (
                    f"{shared.model_argument} {given}"
                    if isinstance(given, str | Path)
                    else (shared.model_argument if given is not None else repr(self.model_source()))
                )
                raise UserError(
                    f"{IndexFolder(self.folder).settings_file}: built by a model with weights {str(recorded)[:12]}, but {named} has others; "
                    f"name the model the index was built with ({shared.model_argument})"
                )
            shared.model = loaded
        return shared.model

    def unit_vectors(self) -> UnitVectors | np.ndarray:
        """The document vectors normalised once, on the first hybrid search (sentune.search.passages.UnitVectors)."""
        if self._shared.unit_vectors is None:
            assert self.vectors is not None
            self._shared.unit_vectors = UnitVectors.of(self.vectors)
        return self._shared.unit_vectors

    def lexical(self, mmap: bool = False) -> LexicalIndex:
        """BM25, loaded once for every view (`mmap`: its matrix left in the files, which never change)."""
        if self._shared.lexical is None:
            if not self._shared.lexical_checked:
                check_lexical(self._shared.version.bm25, len(self.documents))
                self._shared.lexical_checked = True
            self._shared.lexical = LexicalIndex.load(self._shared.version.bm25, mmap=mmap)
        return self._shared.lexical

    def search(self, queries: list[Query], top: int = 10, show_progress: bool = False, exclude_same_id: bool = False) -> list[list[Hit]]:
        """The top documents for each query, best first, with the system's score. `exclude_same_id`: a document whose
        id is the query's is not returned (BEIR's convention for sets whose queries are documents too, Quora's, and how
        `sentune adapt` scores); a user's search returns every document."""
        from sentune.core.encode import Encoder
        from sentune.tasks.retrieval import unit_rows

        texts = [q.text for q in queries]
        ties = self.documents.order
        own: list[int | None] | None = None
        if exclude_same_id:  # the queries' own documents, found in one pass over the file
            rows = self.documents.rows_of(q.id for q in queries)
            own = [rows.get(q.id) for q in queries]
        if self.system == "bm25":
            scores = self.lexical().scores(texts)
            ranked = top_by_score(scores, ties, top, exclude=own)
            ranked = [[d for d in row if scores[r, d] > 0] for r, row in enumerate(ranked)]  # a document sharing no term is no match
            values = [[float(scores[r, d]) for d in row] for r, row in enumerate(ranked)]
            return self._hits(ranked, values)
        vectors = self.vectors
        assert vectors is not None  # opened for every system but bm25
        # task "query": an asymmetric model (a Router) encodes queries by its query route, beside the documents' vectors
        query_vectors = Encoder(self.model(), "model", show_progress=show_progress, desc="encoding the queries", runtime=self.runtime, task="query").encode(
            texts
        )
        if self.system == self.settings["system"] and self.settings.get("expansion"):  # an adapt run's feedback (sentune.search.expansion)
            from sentune.search.expansion import expanded_rank

            return self._hits(*expanded_rank(self, query_vectors, texts, top, own))
        if self.ann is not None:  # the approximate index's candidates instead of every document (sentune.search.ann)
            return self._hits(*self.ann.rank(self.system, query_vectors, lambda rows: self.lexical().scores([texts[r] for r in rows]), self.fusion, ties, top))
        if self.system == "dense" and self.passages is not None:
            scores = self.passages.cosines(query_vectors)
            ranked = top_by_score(scores, ties, top, exclude=own)
            return self._hits(ranked, [[float(scores[r, d]) for d in row] for r, row in enumerate(ranked)])
        if self.system == "dense":
            ranked = dense_top(query_vectors, vectors, ties, top, exclude=own)
            units = unit_rows(query_vectors)
            values = [[float(units[r] @ unit_rows(vectors[[d]])[0]) for d in row] for r, row in enumerate(ranked)]
            return self._hits(ranked, values)
        assert self.fusion is not None  # a hybrid without a fusion is refused when opened
        lexical = self.lexical().scores(texts)
        dense = self.passages if self.passages is not None else self.unit_vectors()
        ranked, values = hybrid_rank_rows(query_vectors, dense, lambda rows: lexical[rows], ties, self.fusion, depth=top, own=own, with_scores=True)
        return self._hits(ranked, values)

    def _hits(self, ranked: list[list[int]], values: list[list[float]]) -> list[list[Hit]]:
        """The hits' ids and texts, each read from its own line (in file order: the reads go forward)."""
        rows = sorted({d for row in ranked for d in row})
        lines = dict(zip(rows, self.documents.read(rows), strict=True))
        return [[Hit(lines[d][0], v, lines[d][1]) for d, v in zip(row, scores, strict=True)] for row, scores in zip(ranked, values, strict=True)]

    def check_run_ids(self, queries: list[Query]) -> None:
        """Every query and document id fits a TREC run line (checked before the model loads when a run is written)."""
        for q in queries:
            if not trec_safe(q.id):
                raise UserError(f"{q.source}: query id {q.id!r} {NOT_TREC_SAFE}; give it an id without spaces")
        for number, doc, _ in self.documents.stream():
            if not trec_safe(doc):
                raise UserError(
                    f"{self.documents.path}:{number}: document id {doc!r} {NOT_TREC_SAFE}; build the index from ids without spaces, or search with --query"
                )
