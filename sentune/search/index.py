"""A search index on disk: what `sentune index` builds, `sentune search` reads and a retrieval `sentune adapt` run saves
its chosen system as.

    INDEX/index.json       the system (dense, bm25 or hybrid with its fusion), the model (a path relative to INDEX when it
                           lies inside, else its name) and its weights' digest, the documents' count and sha256
    INDEX/documents.jsonl  the documents' ids and texts, in index order, read a line at a time: beside it each line's
                           offset and the ids' order, memory-mapped (sentune.search.documents)
    INDEX/vectors.npy      float32 (documents × dimension), the model's own pipeline; memory-mapped when read
    INDEX/progress.json    rows of vectors.npy written so far: an interrupted build resumes there
    INDEX/bm25/            BM25 as BEIR runs it (sentune.search.lexical), built after the vectors, with the settings
                           index.json's `lexical` records (an adapt run's: fitted on its selection queries)
    INDEX/passages/        with `passages: maxp`, every document's later windows' vectors and their documents: the
                           dense score of a document is its best passage's (sentune.search.passages)

The vectors are written chunk by chunk into the memory-mapped file, so a build never holds more than one chunk's
activations, and `complete` in index.json is set last: a search refuses an index whose build did not finish, and one
whose files disagree with index.json (documents, vector rows, BM25's size) or hold no fusion weight for a hybrid.

Several processes (torchrun / accelerate launch, the launchers training uses): each rank encodes a contiguous shard of
the documents into shards/rank-R.npy; rank 0 waits for all of them (a gloo or NCCL barrier), writes vectors.npy in
document order, BM25 and index.json. The result is the one-process index (tests/test_search.py checks it on 2 gloo
processes).

Search is exact: every document scored (sentune.search.exact: NumPy in blocks, FAISS's flat index for large ones), as
every sentune evaluation ranks, ties by the id order saved beside the documents; the hybrid normalises each system's
scores over every document (sentune.search.fusion). An index built with `--ann` also holds an approximate dense index (INDEX/ann/,
sentune.search.ann), searched instead unless `sentune search --exact`.
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
from sentune.search.documents import DAMAGED, OFFSETS, ORDER, Documents, write_documents
from sentune.search.exact import dense_top
from sentune.search.fusion import Fusion, hybrid_rank_rows, top_by_score
from sentune.search.lexical import LexicalIndex, LexicalSettings
from sentune.search.passages import PassageVectors, UnitVectors
from sentune.search.stored import (  # noqa: F401
    FORMAT,
    INDEX_FILE,
    CheckedOut,
    check_lexical,
    check_out,
    check_resume,
    corpus_digest,
    open_vectors,
    read_settings,
)
from sentune.search.trec import NOT_TREC_SAFE, read_trec_run, trec_safe, write_trec_run  # noqa: F401

# (check_out, read_trec_run and write_trec_run are imported from here too, where their callers have always found them)

FILES = (INDEX_FILE, "documents.jsonl", OFFSETS, ORDER, "vectors.npy", "progress.json", "bm25", "passages")  # what a build writes into its folder
CHUNK = 1024  # documents encoded between two progress marks
SYSTEMS = ("dense", "bm25", "hybrid")


def lexical_record(settings: LexicalSettings) -> dict:
    """How index.json records the BM25 settings (a build with other settings rebuilds the BM25 side)."""
    return vars(settings) | {"label": settings.label}


@dataclass(frozen=True)
class BuildPlan:
    system: str = "dense"
    fusion: Fusion | None = None
    lexical: LexicalSettings = LexicalSettings()
    passages: str = "first"  # "maxp": documents also as passages, each scored by its best (sentune.search.passages)
    stride: int | None = None  # tokens between two windows' starts (None: half a window)


def passages_record(plan: BuildPlan, model: Any) -> dict | None:
    """How index.json records the passages, their count left out (None: the first window alone); one line naming
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
) -> Path:
    """Encode `documents` with `model` into out/vectors.npy (resuming a build stopped before), build BM25, and write
    index.json. `model_ref`: how a search loads the model again (a path relative to `out`, or a name). `vectors`: the
    documents' vectors already encoded by this model (an adapt run's), written as they are; `passage_vectors` the same
    for the documents' later windows (plan.passages "maxp"). An index of the same model
    and documents with another system, fusion or BM25 settings keeps its vectors and gets the rest built again.
    `checked`: what check_out found in `out` before the model loaded (sentune.api.index.IndexBuild): not checked again."""
    from sentune.core.distributed import rank, world_size
    from sentune.core.embedding_cache import model_digest as digest_of

    model_digest = model_digest or digest_of(model)
    saved = check_resume(out, model_digest, documents, shared_folder, checked)
    wanted_passages = passages_record(plan, model)
    saved_passages = {k: v for k, v in saved["passages"].items() if k != "count"} if saved is not None and saved.get("passages") else None
    if (
        saved is not None
        and saved.get("complete")
        and saved["system"] == plan.system
        and saved.get("fusion") == (plan.fusion.to_dict() if plan.fusion else None)
        and saved.get("lexical") == lexical_record(plan.lexical)
        and saved_passages == wanted_passages
    ):
        return out
    if saved_passages != wanted_passages and (out / "passages").is_dir():  # other windows: encoded again
        import shutil

        shutil.rmtree(out / "passages")
    out.mkdir(parents=True, exist_ok=True)
    settings = {
        "format": FORMAT,
        "system": plan.system,
        "fusion": plan.fusion.to_dict() if plan.fusion else None,
        "model": model_ref,
        "model_digest": model_digest,
        "documents": len(documents),
        "corpus_sha256": corpus_digest(documents),
        "lexical": lexical_record(plan.lexical),
        "passages": wanted_passages,
        "complete": False,
    }
    if rank() == 0:
        _write_json(out / INDEX_FILE, settings)
        write_documents(out, documents)
    if vectors is None and world_size() == 1:
        vectors = _evaluated_before(model, documents)
    if vectors is not None:
        if rank() == 0:
            np.save(out / "vectors.npy", np.asarray(vectors, dtype=np.float32))
            _write_json(out / "progress.json", {"rows": len(documents)})
    elif world_size() > 1:
        _encode_shard(model, documents, out, show_progress)
    else:
        _encode_into(model, [d.text for d in documents], out / "vectors.npy", out / "progress.json", show_progress)
    if rank() != 0:
        return out
    if wanted_passages is not None:
        settings["passages"] = wanted_passages | {
            "count": _encode_passages(model, documents, out / "passages", wanted_passages, show_progress, passage_vectors)
        }
    LexicalIndex.of_documents(documents, plan.lexical, show_progress=show_progress).save(out / "bm25")
    settings["dimension"] = int(np.load(out / "vectors.npy", mmap_mode="r").shape[1])
    settings["complete"] = True
    _write_json(out / INDEX_FILE, settings)
    return out


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


def _encode_passages(model: Any, documents: list[Document], folder: Path, record: dict, show_progress: bool, given: np.ndarray | None = None) -> int:
    """Every document's later windows (sentune.search.passages) encoded into folder/vectors.npy, resumable as the
    documents' vectors are (`given`: encoded already, written as they are), their documents' rows into
    folder/documents.npy; their count."""
    from sentune.search.passages import later_windows

    texts, owners = later_windows(model.tokenizer, [d.text for d in documents], record["window"], record["stride"])
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "documents.npy", owners)
    if given is not None and len(given) == len(texts):
        np.save(folder / "vectors.npy", np.asarray(given, dtype=np.float32))
        _write_json(folder / "progress.json", {"rows": len(texts)})
    elif texts:
        _encode_into(model, texts, folder / "vectors.npy", folder / "progress.json", show_progress)
    else:
        dimension = int(np.load(folder.parent / "vectors.npy", mmap_mode="r").shape[1])
        np.save(folder / "vectors.npy", np.zeros((0, dimension), dtype=np.float32))
        _write_json(folder / "progress.json", {"rows": 0})
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
    if done == 0:
        dimension = encoder.encode(texts[:1]).shape[1]
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


def _encode_shard(model: Any, documents: list[Document], out: Path, show_progress: bool) -> None:
    import torch.distributed as dist

    from sentune.core.distributed import rank, world_size

    if not dist.is_initialized():
        dist.init_process_group("nccl" if os.environ.get("SENTUNE_INDEX_BACKEND") == "nccl" else "gloo")
    me, ranks = rank(), world_size()
    start, stop = shard_bounds(len(documents), ranks, me)
    shards = out / "shards"
    shards.mkdir(exist_ok=True)
    texts = [d.text for d in documents[start:stop]]
    _encode_into(model, texts, shards / f"rank-{me}.npy", shards / f"rank-{me}.json", show_progress and me == 0)
    dist.barrier()
    if me == 0:
        parts = [np.load(shards / f"rank-{r}.npy", mmap_mode="r") for r in range(ranks)]
        vectors = np.lib.format.open_memmap(out / "vectors.npy", mode="w+", dtype=np.float32, shape=(len(documents), parts[0].shape[1]))
        for r, part in enumerate(parts):
            lo, hi = shard_bounds(len(documents), ranks, r)
            vectors[lo:hi] = part
        vectors.flush()
        del vectors, parts
        _write_json(out / "progress.json", {"rows": len(documents)})
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
    """The fusion index.json records, as a Fusion (None: the index has none, a dense one); one line naming the file
    when the record is not one sentune writes."""
    if settings.get("fusion") is None:
        return None
    try:
        return Fusion.from_dict(settings["fusion"])
    except ValueError as exc:
        raise DataError(path, None, f"{exc}; {DAMAGED}") from None


class SearchIndex:
    """A built index, read for searching: `search(texts)` ranks every document for each text. Opening it checks every
    file the chosen system reads against index.json (documents, vector rows and dimension, BM25's size), so a damaged
    index is one line naming its file, never a ranking of the wrong documents. The documents stay in their file: a
    search reads its hits' lines (sentune.search.documents)."""

    def __init__(self, folder: Path, settings: dict, system: str | None = None, device: str | None = None) -> None:
        self.folder, self.settings = folder, settings
        self.system = system or settings["system"]
        self.fusion: Fusion | None = saved_fusion(settings, folder / INDEX_FILE)
        if self.system == "hybrid" and self.fusion is None:
            raise UserError(
                f"--system hybrid: {folder / INDEX_FILE} holds no fusion weight (a {settings['system']} index); rebuild it with one, "
                f"`sentune index --model MODEL --corpus CORPUS --out {folder} --fusion convex:ALPHA` (or rrf; its vectors are kept)"
            )
        self.documents = Documents.open(folder, settings.get("documents"))
        count = len(self.documents)
        self.vectors = open_vectors(folder / "vectors.npy", count, settings.get("dimension")) if self.system != "bm25" else None
        self.passages: PassageVectors | None = None  # documents scored by their best passage (`passages: maxp`)
        if self.vectors is not None and settings.get("passages"):
            self.passages = PassageVectors.open(folder, self.vectors, settings["passages"])
        if self.system != "dense":
            check_lexical(folder / "bm25", count)
        self.device = device
        self.runtime: Runtime | None = None  # what computes the queries' batches (sentune.core.runtime); None: PyTorch
        self._model: Any = None
        self._lexical: LexicalIndex | None = None
        self._unit_vectors: UnitVectors | np.ndarray | None = None
        self.ann: AnnIndex | None = AnnIndex.open(folder, settings)  # `sentune index --ann`: searched by default (sentune.search.ann)
        if self.passages is not None:  # an approximate index holds one vector a document: passages are searched exactly
            self.ann = None

    @classmethod
    def open(cls, folder: Path, system: str | None = None, device: str | None = None) -> SearchIndex:
        """One line naming the folder or file when it is not a finished, whole index (checked before any model loads)."""
        settings = read_settings(folder)
        if settings is None or settings.get("format") != FORMAT:
            hint = " (an adapt run saves one only for search data)" if (folder / "adapt.json").is_file() else ""
            raise UserError(f"{folder}: no sentune index ({INDEX_FILE}){hint}; build one with `sentune index`")
        if not settings.get("complete"):
            raise UserError(f"{folder / INDEX_FILE}: the build did not finish; run the same `sentune index` command again to resume it")
        if system is not None and system not in SYSTEMS:
            raise UserError(f"--system {system}: choose {', '.join(SYSTEMS)}")
        if settings.get("system") not in SYSTEMS:
            raise DataError(folder / INDEX_FILE, None, f"system {settings.get('system')!r} is none of {', '.join(SYSTEMS)}; {DAMAGED}")
        return cls(folder, settings, system, device)

    def model(self):
        if self._model is None:
            from sentune.core.models import load_model

            ref = self.settings["model"]
            inside = self.folder / ref
            self._model = load_model(str(inside) if inside.is_dir() else ref, device=self.device)
        return self._model

    def unit_vectors(self) -> UnitVectors | np.ndarray:
        """The document vectors normalised once, on the first hybrid search (sentune.search.passages.UnitVectors)."""
        if self._unit_vectors is None:
            assert self.vectors is not None
            self._unit_vectors = UnitVectors.of(self.vectors)
        return self._unit_vectors

    def lexical(self, mmap: bool = False) -> LexicalIndex:
        if self._lexical is None:
            self._lexical = LexicalIndex.load(self.folder / "bm25", mmap=mmap)
        return self._lexical

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
