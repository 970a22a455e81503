"""What a server process holds and computes: the model, loaded once, and the index, opened once; `embed` and `search`
run in the batchers' worker thread (sentune.serve.batching), never two at a time.

Vectors are `sentune encode`'s (sentune.core.encode.Encoder, the model's own pooling); rankings are `sentune search`'s
(sentune.search.index.SearchIndex.search, one index object per system sharing the model, the documents and BM25). No
document is left out of a ranking for sharing a query's id (a user's search returns every document).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from sentune.serve.settings import ServeSettings, wants_small_batch_graph


@dataclass(frozen=True)
class Embedded:
    vector: np.ndarray
    tokens: int  # what the model read: the text's tokens, special tokens included, up to its limit
    truncated: bool


@dataclass(frozen=True)
class EmbedItem:
    text: str
    route: str | None  # an asymmetric model's route ("query", "document"; None: its default)


@dataclass(frozen=True)
class SearchItem:
    text: str
    system: str
    top: int


@dataclass(frozen=True)
class Ranked:
    hits: list  # sentune.search.index.Hit, best first
    truncated: bool  # the query was longer than the model reads (BM25 reads all of it)


class Engine:
    """`held`: a SentenceTransformer the caller already holds (sentune.serve_app(model)), served as it is: it runs on
    its own torch modules, and nothing (lanes, a small-batch graph) is attached to the caller's object."""

    def __init__(self, settings: ServeSettings, held: Any = None) -> None:
        import threadpoolctl

        from sentune.core.encode import Encoder, routed

        # One BLAS thread: a query's NumPy products are small, and OpenBLAS's threads keep spinning after each one,
        # taking the cores the model's next forward pass needs (a hybrid query on 2 cores took 2.5x as long with them).
        threadpoolctl.threadpool_limits(1, user_api="blas")
        self.settings = settings
        self.views: dict[str, Any] = {}  # system -> SearchIndex
        self.vectors: np.ndarray | None = None
        self.index: Any = None
        if settings.index:
            from sentune.core.onnx_runtime import backend_runtime

            self.model = self._open_index(Path(settings.index))
            source = Path(model_source(settings))
            runtime = backend_runtime(self.model, settings.backend, source=str(source) if source.is_dir() else None)
        elif held is not None:  # served as it is: PyTorch on its own modules
            from sentune.core.runtime import PYTORCH

            self.model, runtime = held, PYTORCH
        else:
            from sentune.core.models import load_model_with_runtime

            assert settings.model is not None
            self.model, runtime = load_model_with_runtime(
                settings.model, trust_remote_code=settings.trust_remote_code, device=settings.device, backend=settings.backend
            )
        if held is None and settings.backend == "torch" and self.model.device.type == "cpu":
            import torch

            from sentune.core.lanes import Lanes

            threads = torch.get_num_threads()
            lanes = min(settings.lanes or threads, threads)  # None: one a torch thread
            if lanes > 1:
                runtime = replace(runtime, lanes=Lanes(lanes, threads))  # sentune.core.lanes
            if wants_small_batch_graph(settings):  # a few texts on the exact ONNX graph (sentune.core.small_batch_graph)
                runtime = with_small_batch_graph(self.model, runtime, settings)
        # what computes every batch of the model: this encoder's, and the index's query encoding (sentune.core.runtime)
        self.runtime = runtime
        for view in [self.index, *self.views.values()] if self.views else []:
            view.runtime = runtime
        self.encoder = Encoder(self.model, "model", show_progress=False, runtime=runtime)
        # a Router model's routes, each its own encoder; a one-route model has none: its one encoder, whatever is asked
        routes = ("query", "document") if routed(self.model) else ()
        self.routes = {route: Encoder(self.model, "model", show_progress=False, runtime=runtime, task=route) for route in routes}
        self.max_tokens = int(self.model.max_seq_length or 0)
        self.dimension = int(self.encoder.encode(["warm up"]).shape[1])  # the first forward pass is the slow one
        self.name = served_name(settings, None if self.index is None else self.index.settings)
        # what a reload must keep (sentune.serve.service.State.reload): the index's record of its model's weights, else its source
        self.model_identity = None if self.index is None else self.index.settings.get("model_digest") or model_source(settings)
        for view in self.views.values():  # loads BM25 and reads the vectors once: the first query is as fast as the next
            view.search([self._query(0, "warm up")], 1)

    def _open_index(self, folder: Path):
        from sentune.search.index import SYSTEMS, SearchIndex

        device = "cpu" if self.settings.backend != "torch" else self.settings.device
        asked = self.settings.system  # the default one only: every system is served, so the vectors are opened for bm25 too
        index = SearchIndex.open(folder, asked if asked != "bm25" else None, device=device, model=self.settings.index_model, model_argument="--model")
        model = index.model()
        index.lexical(mmap=True)
        self.index = index
        for system in SYSTEMS:  # views of the one opened index: the model, documents and BM25 are shared
            if system == "hybrid" and index.fusion is None:  # no weight was saved: a hybrid would be a guess
                continue
            self.views[system] = index.system_view(system)
        self.vectors = self.views["dense"].vectors
        # one mapping of BM25's matrix, of the vectors and of the documents' offsets and id order for the life of the
        # process: every worker maps the same files, which a rebuild never changes (sentune.search.folder), so the
        # pages are the page cache's, once for all of them (checked in tests/test_serve.py); read in now, not on the
        # first query; a document's text is read from its line when it is a hit. Summed in float64 by numpy's buffered
        # reduction, never through a float64 copy (twice the vectors' size at every start and reload)
        self.touched = sum(float(np.asarray(a).sum(dtype=np.float64)) for a in index.mapped_arrays())
        return model

    def _query(self, number: int, text: str):
        from sentune.data.beir import Query
        from sentune.data.text_files import Source

        return Query(f"request-{number}", text, Source("request", number + 1))

    @property
    def default_system(self) -> str | None:
        return (self.settings.system or self.index.system) if self.views else None

    def token_counts(self, texts: list[str]) -> np.ndarray:
        return self.encoder.token_lengths(texts) if texts else np.zeros(0, dtype=np.int64)

    def embed(self, items: list[EmbedItem]) -> list[Embedded]:
        """Each route's texts in one encode (most batches: one route)."""
        out: list[Embedded | None] = [None] * len(items)
        for route in dict.fromkeys(item.route for item in items):
            rows = [i for i, item in enumerate(items) if item.route == route]
            texts = [items[i].text for i in rows]
            lengths = self.token_counts(texts)
            vectors = self.routes.get(route or "", self.encoder).encode(texts)
            limit = self.max_tokens or int(lengths.max(initial=0))
            for n, i in enumerate(rows):
                out[i] = Embedded(vectors[n], int(min(lengths[n], limit)), bool(lengths[n] > limit))
        return [e for e in out if e is not None]

    def search(self, items: list[SearchItem]) -> list[Ranked]:
        """Each system's queries in one SearchIndex.search call, at the deepest `top` asked: a ranking's first k are
        the same at any depth (exact scores, ties by document id)."""
        out: list[Ranked | None] = [None] * len(items)
        lengths = self.token_counts([item.text for item in items])
        for system in dict.fromkeys(item.system for item in items):
            rows = [i for i, item in enumerate(items) if item.system == system]
            queries = [self._query(n, items[i].text) for n, i in enumerate(rows)]
            hits = self.views[system].search(queries, max(items[i].top for i in rows))
            for n, i in enumerate(rows):
                truncated = system != "bm25" and bool(self.max_tokens and lengths[i] > self.max_tokens)
                out[i] = Ranked(hits[n][: items[i].top], truncated)
        return [r for r in out if r is not None]

    def health(self) -> dict:
        index = None
        if self.views:
            index = {
                "name": Path(self.settings.index or "").name,
                "documents": len(self.index.documents),
                "dimension": int(self.vectors.shape[1]) if self.vectors is not None else None,
                "vectors_bytes": int(self.vectors.nbytes) if self.vectors is not None else None,
                "system": self.default_system,
                "fusion": self.index.fusion.label if self.index.fusion else None,  # None: no hybrid to serve
                "systems": list(self.views),
            }
        return {
            "model": self.name,
            "backend": self.runtime.backend,
            "small_batches": self.runtime.small_batches,  # what computes a text or two (sentune.core.runtime)
            "dimension": self.dimension,
            "max_tokens": self.max_tokens,
            "index": index,
            "pid": os.getpid(),
        }


def model_source(settings: ServeSettings) -> str:
    """The model a server loads: the one given (a model served alone, or an index's `--model`), or the index's (a folder
    inside it, else its name)."""
    if settings.model:
        return settings.model
    if settings.index_model:
        return settings.index_model if Path(settings.index_model).is_dir() else resolved_model(settings.index_model)
    from sentune.search.index import index_model_source

    source = index_model_source(Path(settings.index or ""))
    return source if Path(source).is_dir() else resolved_model(source)


def prepare_graph(settings: ServeSettings) -> None:
    """The model's ONNX graph for --backend or --small-batches, exported (and quantized) into the cache now if it is not
    there yet."""
    from sentune.core.models import load_model_with_runtime

    model, runtime = load_model_with_runtime(model_source(settings), trust_remote_code=settings.trust_remote_code, device="cpu", backend=settings.backend)
    if wants_small_batch_graph(settings):
        with_small_batch_graph(model, runtime, settings)


def with_small_batch_graph(model, runtime, settings: ServeSettings):
    """`runtime` with the exact graph for small batches of `model` (sentune.core.small_batch_graph), looked for first in
    the served model's folder; required under --small-batches onnx."""
    from sentune.core import small_batch_graph

    source = model_source(settings)
    return small_batch_graph.with_small_batch_graph(model, runtime, source if Path(source).is_dir() else None, required=settings.small_batches == "onnx")


def resolved_model(ref: str) -> str:
    from sentune.core.models import resolve_model_name

    return resolve_model_name(ref)


def served_name(settings: ServeSettings, recorded: dict | None = None) -> str:
    """The model's name in /v1/embeddings answers: --model-name, else the hub id, or the folder's name. `recorded`: the
    served index's settings as it was opened (read from its folder when not given)."""
    from sentune.core.models import DEFAULT_HUB_ID

    if settings.model_name:
        return settings.model_name
    if settings.index and settings.index_model:
        ref = settings.index_model
    elif settings.index:
        from sentune.search.folder import IndexFolder
        from sentune.search.stored import read_settings

        folder = Path(settings.index)
        ref = str(((read_settings(folder) if recorded is None else recorded) or {}).get("model"))
        if IndexFolder(folder).model_location(ref) is not None:  # an adapt run's model/ inside the index
            return f"{folder.name}/{ref}"
    else:
        ref = settings.target
    if ref in ("default", DEFAULT_HUB_ID):
        return DEFAULT_HUB_ID
    path = Path(ref)
    return path.resolve().name if path.exists() else ref
