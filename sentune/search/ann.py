"""An approximate dense index beside an index's exact vectors (`sentune index --ann`), for collections whose exact search
costs too much per query: FAISS (Douze et al., "The Faiss library", 2024) HNSW or IVF-PQ over the unit vectors of
the index's document vectors, kept in the index's ann/ folder (sentune.search.folder): the FAISS index, and its
kind and settings with what it was built from (written last: no settings, no ANN).

- hnsw (Malkov & Yashunin, 2018; IndexHNSWFlat): a graph over the full vectors, all of them in memory.
- ivfpq (Jégou, Douze & Schmid, 2011; IndexIVFPQ): `nlist` k-means cells, each vector stored as `pq` bytes; a query
  scans its `nprobe` nearest cells. Only the codes are in memory; the `refine` × top candidates are re-scored with the
  exact vectors read from the memory-mapped document vectors (FAISS's IndexRefineFlat would hold every vector in memory).

Every candidate either index returns is re-scored with its exact cosine from the document vectors, so a document found has the
score exact search gives it, and ties are ranked by document id, as every sentune ranking. The hybrid system fuses
the ANN's top candidates with BM25's (sentune.search.candidates) instead of scoring every document.
benchmarks/results/ann.md measures recall, nDCG@10, build time, memory and latency, and why each default is what it is.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentune.errors import UserError
from sentune.search.candidates import Candidates, fuse, lexical_candidates
from sentune.search.folder import IndexVersion
from sentune.search.fusion import Fusion

FORMAT = "sentune-ann/1"
ADD_CHUNK = 65_536  # rows normalised and added at once: the build holds one chunk of the vectors, never all of them
TRAIN_PER_LIST = 64  # k-means training rows per IVF list (FAISS warns under 39; more costs build time, not recall)
MIN_PER_LIST = 39
LEXICAL_BLOCK = 16  # queries whose BM25 scores of every document are held at once: 16 × 5M documents is 320 MB

# Each kind's settings with their defaults and allowed range; `search` settings can change per search, the others are
# the build's. nlist 0, nbits 0 and refine 0: chosen from the collection size (auto_nlist, auto_nbits, auto_refine).
KINDS: dict[str, dict[str, tuple[int, int, int]]] = {
    "hnsw": {"m": (32, 4, 128), "ef_construction": (100, 8, 2000), "ef_search": (128, 1, 10_000), "candidates": (100, 1, 10_000)},
    "ivfpq": {
        "nlist": (0, 0, 1 << 20),
        "pq": (48, 1, 512),
        "nbits": (0, 0, 12),
        "nprobe": (32, 1, 1 << 20),
        "refine": (0, 0, 100),
        "candidates": (100, 1, 10_000),
    },
}
SEARCH_SETTINGS = {"ef_search", "nprobe", "refine", "candidates"}
USAGE = "hnsw or ivfpq, optionally with settings: hnsw:m=32,ef_construction=100,ef_search=128 or ivfpq:nlist=1024,pq=48,nbits=8,nprobe=32,refine=50"

# IVF-PQ's `refine` by collection size: (at most this many documents, refine), then REFINE_PAST for larger ones. Its
# codes order crowded neighbours worse as a collection grows, so more candidates are re-scored from the exact vectors:
# each step is the smallest refine of benchmarks/results/ann.md's synthetic sweeps that brought recall@10 near 1 at
# that size (a size between two measured ones takes the larger one's step: re-scoring costs milliseconds, a missed
# neighbour is a wrong answer).
REFINE_BY_SIZE = ((100_000, 10), (1_000_000, 50))
REFINE_PAST = 100


@dataclass(frozen=True)
class AnnSpec:
    kind: str
    settings: dict[str, int] = field(default_factory=dict)

    @property
    def build_settings(self) -> dict[str, int]:
        return {k: v for k, v in self.settings.items() if k not in SEARCH_SETTINGS}

    @property
    def label(self) -> str:
        return f"{self.kind} ({', '.join(f'{k} {v}' for k, v in self.settings.items())})"


def _settings(text: str, option: str, allowed: dict[str, tuple[int, int, int]], kind: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        key, equals, value = item.partition("=")
        key = key.strip().lower()
        if key not in allowed:
            raise UserError(f"{option}: unknown {kind} setting {key!r}; choose from {', '.join(allowed)}")
        try:
            number = int(value) if equals else None
        except ValueError:
            number = None
        low, high = allowed[key][1:]
        if number is None or not low <= number <= high:
            raise UserError(f"{option}: {key} takes a whole number from {low} to {high}, not {value.strip()!r}")
        found[key] = number
    return found


def parse_ann(text: str, option: str = "--ann") -> AnnSpec:
    """`hnsw` / `ivfpq` / `KIND:key=value,...` → the kind with every setting resolved (defaults filled in)."""
    kind, _, rest = text.strip().partition(":")
    kind = kind.lower()
    if kind not in KINDS:
        raise UserError(f"{option} {text}: use {USAGE}")
    given = _settings(rest, f"{option} {text}", KINDS[kind], kind)
    return AnnSpec(kind, {key: given.get(key, default) for key, (default, _, _) in KINDS[kind].items()})


def auto_nlist(documents: int) -> int:
    """IVF lists for a collection: the power of two nearest 4·√n (FAISS's guideline is 4·√n to 16·√n), at most one
    list per MIN_PER_LIST documents so that k-means has enough rows to train every list."""
    nlist = 2 ** round(math.log2(max(1.0, 4 * math.sqrt(documents))))
    return max(1, min(nlist, 2 ** int(math.log2(max(1, documents // MIN_PER_LIST)))))


def auto_nbits(documents: int) -> int:
    """Bits of each PQ code: 8 (256 centroids a sub-vector, FAISS's usual), fewer when the collection is too small to
    train 256 centroids with MIN_PER_LIST rows each."""
    return max(1, min(8, int(math.log2(max(1, documents // MIN_PER_LIST)))))


def auto_refine(documents: int) -> int:
    """How many times the asked depth IVF-PQ re-scores with the exact vectors, for a collection of this size."""
    return next((refine for below, refine in REFINE_BY_SIZE if documents <= below), REFINE_PAST)


def check_fits(spec: AnnSpec, documents: int, dimension: int | None, option: str = "--ann") -> AnnSpec:
    """The spec with nlist resolved, or one line when it cannot be built over this collection (before any encoding;
    `dimension` None: before the model is loaded, the product quantizer's fit to it is checked on a later call)."""
    if spec.kind != "ivfpq":
        return spec
    settings = dict(spec.settings)
    if settings["nlist"] == 0:
        settings["nlist"] = auto_nlist(documents)
    if settings["nbits"] == 0:
        settings["nbits"] = auto_nbits(documents)
    if settings["refine"] == 0:
        settings["refine"] = auto_refine(documents)
    if settings["nlist"] * MIN_PER_LIST > documents:
        raise UserError(
            f"{option}: nlist={settings['nlist']} needs {settings['nlist'] * MIN_PER_LIST:,} documents ({MIN_PER_LIST} a list to train k-means); "
            f"this collection has {documents:,}: use at most nlist={max(1, documents // MIN_PER_LIST)} (or leave nlist out)"
        )
    if MIN_PER_LIST << settings["nbits"] > documents:
        raise UserError(
            f"{option}: nbits={settings['nbits']} trains {1 << settings['nbits']} centroids a sub-vector and needs {MIN_PER_LIST << settings['nbits']:,} "
            f"documents; this collection has {documents:,}: use at most nbits={auto_nbits(documents)} (or leave nbits out)"
        )
    if dimension is not None and dimension % settings["pq"]:
        raise UserError(f"{option}: pq={settings['pq']} must divide the vectors' dimension {dimension}")
    if settings["nprobe"] > settings["nlist"]:
        settings["nprobe"] = settings["nlist"]
    return AnnSpec(spec.kind, settings)


def coarse_codes(asked: AnnSpec, resolved: AnnSpec, documents: int, option: str = "--ann") -> str | None:
    """What to say when the codes chosen for a small collection are coarser than FAISS's usual 8 bits: another index
    than `ivfpq` suggests (None otherwise, and when nbits was given)."""
    if asked.kind != "ivfpq" or asked.settings["nbits"] != 0 or resolved.settings["nbits"] >= 8:
        return None
    bits = resolved.settings["nbits"]
    return (
        f"{option} ivfpq: {documents:,} documents train at most {1 << bits} centroids a sub-vector ({MIN_PER_LIST} rows each), so the codes "
        f"have nbits={bits}, not 8, over nlist={resolved.settings['nlist']} lists: coarse; exact search of so few documents costs little "
        "(leave --ann out), or hnsw keeps the full vectors"
    )


def _faiss():
    try:
        import faiss
    except ImportError:
        raise UserError("--ann needs FAISS: pip install 'sentune[search]' (or pip install faiss-cpu)") from None
    return faiss


def _unit(block: np.ndarray) -> np.ndarray:
    block = np.array(block, dtype=np.float32)  # a copy: normalising in place must not touch the memory-mapped file
    block /= np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
    return block


def build_ann(folder: Path, spec: AnnSpec, index_settings: dict, show_progress: bool = False, seed: int = 0) -> dict:
    """Build the approximate index over the vectors of the index version `folder` into its ann folder (replacing one
    built otherwise); returns its settings. An ANN built before with the same build settings over the same vectors is kept, its search settings
    updated."""
    from tqdm.auto import tqdm

    from sentune.core.results import write_atomic

    version = IndexVersion(folder)
    vectors = np.load(version.vectors, mmap_mode="r")
    rows, dimension = vectors.shape
    spec = check_fits(spec, rows, dimension)
    out, index_file, settings_file = version.ann, version.ann_index, version.ann_settings
    source = {"rows": rows, "dimension": dimension, "corpus_sha256": index_settings["corpus_sha256"], "model_digest": index_settings["model_digest"]}
    saved = read_ann_settings(folder)
    if saved is not None and saved["kind"] == spec.kind and saved["source"] == source and index_file.is_file():
        if {k: v for k, v in saved["settings"].items() if k not in SEARCH_SETTINGS} == spec.build_settings:
            saved["settings"] = spec.settings
            write_atomic(settings_file, json.dumps(saved, indent=2))
            return saved
    if out.exists():
        shutil.rmtree(out)  # a half-built or differently built ANN: nothing of it is kept
    out.mkdir(parents=True)
    faiss = _faiss()
    started = time.perf_counter()
    s = spec.settings
    if spec.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dimension, s["m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = s["ef_construction"]
    else:
        quantizer = faiss.IndexFlatIP(dimension)
        index = faiss.IndexIVFPQ(quantizer, dimension, s["nlist"], s["pq"], s["nbits"], faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = seed
        wanted = max(TRAIN_PER_LIST * s["nlist"], TRAIN_PER_LIST << s["nbits"])  # enough rows for the lists and for the PQ centroids
        train_rows = np.sort(np.random.default_rng(seed).choice(rows, size=min(rows, wanted), replace=False))
        index.train(_unit(vectors[train_rows]))
    with tqdm(total=rows, desc=f"building the {spec.kind} index", unit="vec", disable=not show_progress) as bar:
        for start in range(0, rows, ADD_CHUNK):
            index.add(_unit(vectors[start : start + ADD_CHUNK]))
            bar.update(min(ADD_CHUNK, rows - start))
    seconds = time.perf_counter() - started
    partial = index_file.with_name(index_file.name + ".partial")
    faiss.write_index(index, str(partial))
    partial.replace(index_file)
    record = {
        "format": FORMAT,
        "kind": spec.kind,
        "settings": spec.settings,
        "source": source,
        "build_seconds": round(seconds, 3),
        "bytes": index_file.stat().st_size,
        "faiss": faiss.__version__,
    }
    write_atomic(settings_file, json.dumps(record, indent=2))
    return record


def read_ann_settings(folder: Path) -> dict | None:
    path = IndexVersion(folder).ann_settings
    return json.loads(path.read_text()) if path.is_file() else None


class AnnIndex:
    """A built approximate index, read for searching; the FAISS index loads at the first search."""

    def __init__(self, folder: Path, saved: dict) -> None:
        self.folder, self.saved = folder, saved
        self.spec = AnnSpec(saved["kind"], dict(saved["settings"]))
        self._index: Any = None
        self._vectors: np.ndarray | None = None

    @classmethod
    def open(cls, folder: Path, index_settings: dict) -> AnnIndex | None:
        """The ANN of the index version `folder`, None when it has none; one line naming its settings when it was built
        from other vectors."""
        version = IndexVersion(folder)
        try:
            saved = read_ann_settings(folder)
        except (OSError, ValueError) as exc:
            raise UserError(f"{version.ann_settings}: unreadable ({exc}); rebuild it with `sentune index ... --ann KIND`") from None
        if saved is None:
            return None
        path = version.ann_settings
        if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("kind") not in KINDS:
            raise UserError(f"{path}: not a sentune ANN; rebuild it with `sentune index ... --ann KIND`")
        source: dict = saved["source"] if isinstance(saved.get("source"), dict) else {}
        stale = source.get("corpus_sha256") != index_settings.get("corpus_sha256") or source.get("model_digest") != index_settings.get("model_digest")
        shape = np.load(version.vectors, mmap_mode="r").shape if version.vectors.is_file() else None
        if stale or shape != (source.get("rows"), source.get("dimension")):
            raise UserError(f"{path}: built from other vectors than the index's; rebuild it with `sentune index ... --ann {saved['kind']}`")
        if not version.ann_index.is_file():
            raise UserError(f"{version.ann_index}: missing; rebuild it with `sentune index ... --ann {saved['kind']}`")
        return cls(folder, saved)

    def with_search_settings(self, text: str, option: str = "--ann") -> AnnIndex:
        """This index searched with other search-time settings (ef_search, nprobe, refine, candidates)."""
        allowed = {k: v for k, v in KINDS[self.spec.kind].items() if k in SEARCH_SETTINGS}
        given = _settings(text, f"{option} {text}", allowed, self.spec.kind)
        if given.get("refine") == 0:  # as at build: chosen from the collection size
            given["refine"] = auto_refine(int(self.saved["source"]["rows"]))
        changed = AnnIndex(self.folder, self.saved | {"settings": self.spec.settings | given})
        changed._index, changed._vectors = self._index, self._vectors
        return changed

    def faiss_index(self):
        if self._index is None:
            self._index = _faiss().read_index(str(IndexVersion(self.folder).ann_index))
        return self._index

    def nearest(self, query_vectors: np.ndarray, depth: int, ties: np.ndarray) -> list[Candidates]:
        """Per query, the `depth` documents nearest by the ANN, re-scored with their exact cosine, best first."""
        index, s = self.faiss_index(), self.spec.settings
        if self.spec.kind == "hnsw":
            index.hnsw.efSearch = max(s["ef_search"], depth)
            ask = depth
        else:
            index.nprobe = s["nprobe"]
            ask = depth * s["refine"]
        queries = _unit(query_vectors)
        _, found = index.search(queries, min(ask, index.ntotal))
        vectors = self.vectors()
        out = []
        for query, rows in zip(queries, found, strict=True):
            rows = np.unique(rows[rows >= 0])  # sorted: the memory-mapped file is read in order
            cosines = _unit(vectors[rows]) @ query if len(rows) else np.zeros(0, dtype=np.float32)
            order = np.lexsort((ties[rows], -cosines))[:depth]
            out.append(Candidates(rows[order], cosines[order].astype(np.float64)))
        return out

    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            self._vectors = np.load(IndexVersion(self.folder).vectors, mmap_mode="r")
        return self._vectors

    def rank(
        self, system: str, query_vectors: np.ndarray, lexical_scores: Callable[[range], np.ndarray], fusion: Fusion | None, ties: np.ndarray, depth: int
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The top `depth` documents per query and their scores: the ANN's for `dense`; for `hybrid`, BM25's and the ANN's
        top `candidates` fused (sentune.search.candidates). `lexical_scores(rows)`: those queries' BM25 scores of every
        document, asked LEXICAL_BLOCK queries at a time; `ties`: the documents' id order (id_order's)."""
        if system == "dense":
            found = self.nearest(query_vectors, depth, ties)
            return [c.rows.tolist() for c in found], [c.scores.tolist() for c in found]
        if fusion is None:  # the index holds no weight: SearchIndex refuses such a hybrid when it opens
            raise UserError("a hybrid needs the index's fusion weight")
        pool = max(self.spec.settings["candidates"], depth)
        dense = self.nearest(query_vectors, pool, ties)
        lexical = []
        for start in range(0, len(query_vectors), LEXICAL_BLOCK):
            lexical += lexical_candidates(lexical_scores(range(start, min(start + LEXICAL_BLOCK, len(query_vectors)))), ties, pool)
        fused = [fuse(d, w, fusion, ties, depth) for d, w in zip(dense, lexical, strict=True)]
        return [rows for rows, _ in fused], [values for _, values in fused]


def choose_ann(index, request: str | None, exact: bool) -> AnnIndex | None:
    """What `sentune search` searches with: the index's ANN unless `exact`; `request` ('' or search settings, from
    --ann) asks for the ANN and refuses an index without one."""
    ann = getattr(index, "ann", None)
    if exact:
        return None
    if request is None:
        return ann if index.system != "bm25" else None
    if index.system == "bm25":
        raise UserError("--ann: the bm25 system uses no dense index; use --system dense or hybrid")
    if ann is None:
        raise UserError(f"--ann: {index.folder} has no approximate index; build one with `sentune index ... --out {index.folder} --ann hnsw` (or ivfpq)")
    return ann.with_search_settings(request) if request.strip() else ann
