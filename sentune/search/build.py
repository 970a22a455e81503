"""Building a search index (`sentune index`, `Index.build`, an adapt run's saved system): the documents, their vectors
written chunk by chunk into a memory-mapped file (an interrupted build resumes at its last chunk), BM25 and the
settings, written into a new version of the folder and switched in when whole (sentune.search.folder), so a reader
keeps the files it opened and a failed build leaves the index it had. A rebuild with another system, fusion or BM25
settings keeps what it can of the current version (its vectors, its BM25) as hard links; one over new documents
with the same model takes the vectors of the documents it held word for word and encodes only the new and changed
ones (the nightly rebuild of a served index).

Several processes (torchrun / accelerate launch, the launchers training uses): each rank encodes a contiguous shard of
the documents; rank 0 waits for all of them (a gloo or NCCL barrier), writes the vectors in document order, BM25 and
the settings. The result is the one-process index (tests/test_search.py checks it on 2 gloo processes). Reading the
index is sentune.search.index.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentune.core.runtime import Runtime
from sentune.data.beir import Document
from sentune.errors import UserError
from sentune.search.documents import write_documents
from sentune.search.folder import ANN, BM25, DOCUMENTS, OFFSETS, ORDER, PASSAGES, PROGRESS, SHARDS, VECTORS, IndexFolder, IndexVersion
from sentune.search.fusion import Fusion
from sentune.search.lexical import LexicalIndex, LexicalSettings
from sentune.search.stored import (
    FORMAT,
    CheckedOut,
    check_resume,
    corpus_digest,
    current_version,
    read_settings_file,
)

CHUNK = 1024  # documents encoded between two progress marks


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
    runtime: Runtime | None = None,
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
    the version before) and gets the rest built again; one over other documents keeps the vectors of those it held
    word for word and builds the rest (its approximate index too, as the current one was built). `checked`: what check_out found in `out` before the model
    loaded (sentune.api.index.IndexBuild): not checked again. `option`: how errors name `out`. `runtime`: what
    computes the documents' batches (sentune.core.runtime: its devices, several GPUs for a model loaded on an
    unnumbered cuda); none: PyTorch on the model's device."""
    from sentune.core.distributed import world_size
    from sentune.core.embedding_cache import model_digest as digest_of

    def build(digest: str | None, found: CheckedOut | None) -> Path:
        shared = (vectors, passage_vectors, shared_folder, found, ann, expansion, option, runtime)
        return _build(model, model_ref, documents, out, plan, show_progress, digest, *shared)

    if shared_folder or world_size() > 1:  # an adapt run holds its folder's lock; torchrun's processes build together
        return build(model_digest, checked)
    model_digest = model_digest or digest_of(model)
    checked = CheckedOut(check_resume(out, model_digest, documents, shared_folder, checked, option))  # refused before anything is written
    passages_record(plan, model)
    with IndexFolder(out).build_lock() as held:
        if not held:
            raise UserError(f"{option} {out}: another `sentune index` is building this index now; wait for it to finish")
        return build(model_digest, checked)


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
    runtime: Runtime | None,
) -> Path:
    from sentune.core.distributed import rank, world_size
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
        same_documents = saved.get("corpus_sha256") == settings["corpus_sha256"]
        reused = _reusable(saved, settings, current) if same_model and same_documents else set()
        if not same_documents:  # a rebuild over new documents: the approximate index it had is built again over them
            ann = ann if ann is not None else _current_ann(current)
            if same_model and vectors is None and rank() == 0 and world_size() == 1:
                vectors = _kept_vectors(model, documents, current, saved, show_progress, runtime)
        if rank() == 0:
            version.path.mkdir(parents=True, exist_ok=True)
            version.reuse(current, reused)
    if rank() == 0:
        _write_json(version.settings_file, settings)
        if DOCUMENTS not in reused:
            write_documents(version.path, documents)
    if VECTORS not in reused:  # (shared with the version before: written already)
        _write_vectors(model, documents, version, vectors, show_progress, runtime)
    if rank() != 0:
        return out
    if wanted_passages is not None:
        count = saved["passages"]["count"] if PASSAGES in reused and saved is not None else None
        if count is None:
            count = _encode_passages(model, documents, version, wanted_passages, show_progress, passage_vectors, runtime)
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


def _current_ann(current: IndexVersion) -> Any:
    """The approximate index the current version holds, as a spec to build again (None: it has none)."""
    from sentune.search.ann import AnnSpec, read_ann_settings

    saved = read_ann_settings(current.path)
    return AnnSpec(saved["kind"], dict(saved["settings"])) if saved else None


def _kept_vectors(model: Any, documents: list[Document], current: IndexVersion, saved: dict, show_progress: bool, runtime: Runtime | None) -> np.ndarray | None:
    """A rebuild over new documents with the index's own model: the vectors of the documents the current version holds
    word for word (the same id and text) taken from it, only the new and changed ones encoded, so a nightly rebuild
    costs what changed (None: it holds none of them; all are encoded as in a first build)."""
    from sentune.core.encode import Encoder
    from sentune.search.documents import Documents
    from sentune.search.stored import open_vectors

    held = {(doc_id, text): number - 1 for number, doc_id, text in Documents.open(current.path, saved.get("documents")).stream()}
    rows = np.asarray([held.get((d.id, d.text), -1) for d in documents], dtype=np.int64)  # -1: new or changed
    kept = np.flatnonzero(rows >= 0)
    if not len(kept):
        return None
    before = open_vectors(current.vectors, int(saved["documents"]), saved.get("dimension"))
    vectors = np.empty((len(documents), before.shape[1]), dtype=np.float32)
    vectors[kept] = before[rows[kept]]
    new = np.flatnonzero(rows < 0)
    if len(new):  # the Encoder batches them (and shows its own progress)
        vectors[new] = Encoder(model, "model", show_progress=show_progress, runtime=runtime).encode([documents[i].text for i in new])
    return vectors


def _write_vectors(
    model: Any, documents: list[Document], version: IndexVersion, vectors: np.ndarray | None, show_progress: bool, runtime: Runtime | None
) -> None:
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
        _encode_shard(model, documents, version, show_progress, runtime)
    else:
        _encode_into(model, [d.text for d in documents], version.vectors, version.progress, show_progress, runtime)


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


def _encode_passages(
    model: Any,
    documents: list[Document],
    version: IndexVersion,
    record: dict,
    show_progress: bool,
    given: np.ndarray | None = None,
    runtime: Runtime | None = None,
) -> int:
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
        _encode_into(model, texts, version.passage_vectors, version.passage_progress, show_progress, runtime)
    else:
        dimension = int(np.load(version.vectors, mmap_mode="r").shape[1])
        _save_npy(version.passage_vectors, np.zeros((0, dimension), dtype=np.float32))
        _write_json(version.passage_progress, {"rows": 0})
    return len(texts)


def _write_json(path: Path, value: dict) -> None:
    from sentune.core.results import write_atomic

    write_atomic(path, json.dumps(value, indent=2))


def _encode_into(model: Any, texts: list[str], vectors_path: Path, progress_path: Path, show_progress: bool, runtime: Runtime | None = None) -> None:
    """texts' vectors into a memory-mapped .npy, CHUNK rows at a time; progress_path says how many rows are written."""
    from tqdm.auto import tqdm

    from sentune.core.encode import Encoder

    encoder = Encoder(model, "model", show_progress=False, runtime=runtime)
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


def _encode_shard(model: Any, documents: list[Document], version: IndexVersion, show_progress: bool, runtime: Runtime | None) -> None:
    import torch.distributed as dist

    from sentune.core.distributed import rank, world_size

    if not dist.is_initialized():
        dist.init_process_group("nccl" if os.environ.get("SENTUNE_INDEX_BACKEND") == "nccl" else "gloo")
    me, ranks = rank(), world_size()
    start, stop = shard_bounds(len(documents), ranks, me)
    shards = version.shards
    shards.mkdir(parents=True, exist_ok=True)
    texts = [d.text for d in documents[start:stop]]
    _encode_into(model, texts, *version.shard(me), show_progress and me == 0, runtime)
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
