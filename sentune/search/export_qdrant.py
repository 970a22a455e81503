"""A sentune index in Qdrant (qdrant-client: a server at a URL, or its local mode, which speaks the same API from a
folder or memory), for collections one machine cannot serve: `sentune export-index INDEX --to qdrant`.

One collection, one point a document (point id: the document's row in the index; payload: `doc_id` and `text`):
- `dense`: the index's vectors, cosine distance (Qdrant normalises them, so a score is the cosine exact search gives);
- `bm25`: a sparse vector of the document's BM25 term weights as sentune's BM25 index computed them (bm25s, Lucene's
  variant, k1 and b as built), each weight divided by its term's IDF, with Qdrant's IDF modifier on: Qdrant multiplies
  the query's term counts by ln(1 + (N − df + 0.5) / (df + 0.5)), Lucene's IDF and bm25s's, over the collection it holds,
  so a sparse query scores every document with sentune's BM25 score, and documents added later keep the IDF current.
  A term's sparse index is the CRC-32 of the term (sentune.search.lexical's tokens: lower case, stop words out,
  Snowball-stemmed), so a query needs sentune's tokenisation, not its vocabulary; two terms with one CRC share a
  dimension (the export counts them);
- the collection's metadata: the index's system, fusion weight, model and BM25 settings (`sentune`).

Qdrant's hybrid query fuses the prefetched dense and sparse candidates with RRF or DBSF; sentune's convex min-max
fusion is no fusion Qdrant offers, so QdrantSearch fuses the two candidate lists Qdrant returns with sentune's own
candidate formula (sentune.search.candidates) on the client. benchmarks/results/ann.md measures each against sentune.
"""

from __future__ import annotations

import re
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentune.errors import UserError

DENSE, SPARSE = "dense", "bm25"
FORMAT = "sentune-qdrant/1"
COLLECTION_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")  # what every Qdrant version accepts as a collection name
ENGINE_FUSIONS = ("sentune", "rrf", "dbsf")


def qdrant():
    try:
        import qdrant_client
    except ImportError:
        raise UserError("exporting to Qdrant needs its client: pip install 'sentune[qdrant]' (or pip install qdrant-client)") from None
    return qdrant_client


def term_index(term: str) -> int:
    """A term's sparse dimension: CRC-32 of its UTF-8 bytes (an unsigned 32-bit integer, what Qdrant's sparse indices take)."""
    return zlib.crc32(term.encode("utf-8"))


def lucene_idf(df: np.ndarray, documents: int) -> np.ndarray:
    """ln(1 + (N − df + 0.5) / (df + 0.5)): Lucene's BM25 IDF, bm25s's default and Qdrant's IDF modifier."""
    df = np.asarray(df, dtype=np.float64)
    return np.log(1.0 + (documents - df + 0.5) / (df + 0.5))


def document_term_weights(lexical) -> tuple[Any, np.ndarray, int]:
    """(documents × terms CSR matrix of BM25 weights without the IDF, each term's sparse index, colliding terms) from a
    sentune BM25 index (sentune.search.lexical.LexicalIndex over bm25s, whose scores matrix holds IDF × the term's
    saturated frequency, term-major)."""
    import scipy.sparse as sp

    retriever = lexical.retriever
    scores = retriever.scores
    documents = int(scores["num_docs"])
    indptr = np.asarray(scores["indptr"])
    by_term = sp.csc_matrix((np.asarray(scores["data"], dtype=np.float64), np.asarray(scores["indices"]), indptr), shape=(documents, len(indptr) - 1))
    idf = lucene_idf(np.diff(indptr), documents)
    weights = (by_term @ sp.diags(1.0 / idf)).tocsr()
    indices = np.zeros(len(indptr) - 1, dtype=np.int64)
    for term, column in retriever.vocab_dict.items():
        if column < len(indices):  # bm25s's vocabulary also holds '' for words it never saw, with no column of scores
            indices[column] = term_index(term)
    collisions = len(indices) - len(np.unique(indices))
    return weights, indices, collisions


def query_sparse(tokens: list[str]) -> tuple[list[int], list[float]]:
    """A query's sparse vector: each term's count (bm25s adds a repeated query term once per occurrence)."""
    counts: Counter[int] = Counter(term_index(t) for t in tokens)
    ordered = sorted(counts.items())
    return [i for i, _ in ordered], [float(c) for _, c in ordered]


def connect(path: str | None = None, url: str | None = None, api_key: str | None = None, memory: bool = False):
    """A Qdrant client: local mode in a folder (or memory), or a server; one line when it cannot be opened or reached."""
    client_module = qdrant()
    try:
        if memory:
            return client_module.QdrantClient(location=":memory:")
        if path is not None:
            return client_module.QdrantClient(path=path)
        client = client_module.QdrantClient(url=url, api_key=api_key, timeout=60)
        client.get_collections()  # reach it now: a wrong URL or key is one line before any work
        return client
    except UserError:
        raise
    except Exception as exc:  # the client raises its transport's errors (httpx, grpc, portalocker): all mean the same here
        where = f"--path {path}" if path is not None else f"--url {url}"
        raise UserError(f"{where}: cannot open Qdrant ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def check_collection_name(name: str) -> str:
    if not COLLECTION_NAME.match(name):
        raise UserError(f"--collection {name!r}: use letters, digits, '_', '-' and '.' (at most 255)")
    return name


@dataclass
class ExportReport:
    """What an export wrote: the collection, its points (one a document), the dense dimension, the BM25 terms (and how
    many share a sparse index with another), the seconds it took; `where` (the folder or server) and `fusion` (the
    index's fusion, kept in the collection's metadata) for `str(report)`, the line `sentune export-index` prints."""

    collection: str
    points: int
    dimension: int
    terms: int
    collisions: int
    seconds: float
    where: str = ""
    fusion: str = "none"

    def __str__(self) -> str:
        note = f", {self.collisions} BM25 terms share a sparse index with another" if self.collisions else ""
        return (
            f"qdrant: collection {self.collection} at {self.where}: {self.points} documents ({self.dimension}-dimensional dense, BM25 over "
            f"{self.terms} terms{note}) in {self.seconds:.1f} s; fusion in the metadata: {self.fusion}"
        )


def _points(index, weights, term_indices: np.ndarray, start: int, stop: int) -> Iterator[Any]:
    models = qdrant().models
    vectors = index.vectors
    block = np.asarray(vectors[start:stop], dtype=np.float32)
    for row, (doc_id, text) in zip(range(start, stop), index.documents.read(range(start, stop)), strict=True):
        lo, hi = weights.indptr[row], weights.indptr[row + 1]
        sparse: dict[int, float] = {}
        for column, value in zip(weights.indices[lo:hi], weights.data[lo:hi], strict=True):
            sparse[int(term_indices[column])] = sparse.get(int(term_indices[column]), 0.0) + float(value)  # colliding terms add up
        ordered = sorted(sparse.items())
        yield models.PointStruct(
            id=row,
            vector={DENSE: block[row - start].tolist(), SPARSE: models.SparseVector(indices=[i for i, _ in ordered], values=[v for _, v in ordered])},
            payload={"doc_id": doc_id, "text": text},
        )


def export_index(index, client, collection: str, *, replace: bool = False, batch: int = 256, show_progress: bool = False) -> ExportReport:
    """Write `index` (a sentune.search.index.SearchIndex) into `collection`; one line, before anything is written, when
    the collection exists and `replace` is off."""
    from tqdm.auto import tqdm

    models = qdrant().models
    if client.collection_exists(collection):
        if not replace:
            raise UserError(f"--collection {collection}: exists already; choose another name or pass --replace")
        client.delete_collection(collection)
    started = time.perf_counter()
    weights, term_indices, collisions = document_term_weights(index.lexical())
    if weights.shape[0] != len(index.documents):
        raise UserError(f"{index.version.bm25}: {weights.shape[0]} documents, the index {len(index.documents)}; rebuild the index")
    dimension = int(index.vectors.shape[1])
    ann = index.ann.spec.settings if index.ann is not None and index.ann.spec.kind == "hnsw" else None
    client.create_collection(
        collection,
        vectors_config={DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)},
        sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        hnsw_config=models.HnswConfigDiff(m=ann["m"], ef_construct=ann["ef_construction"]) if ann else None,
        metadata={
            "sentune": {
                "format": FORMAT,
                "system": index.settings["system"],
                "fusion": index.fusion.to_dict() if index.fusion else None,
                "model": index.settings["model"],
                "model_digest": index.settings["model_digest"],
                "lexical": index.settings.get("lexical"),
                "sparse_index": "crc32 of each sentune.search.lexical token; values: BM25 term weight / IDF (Qdrant's IDF modifier)",
                "documents": len(index.documents),
            }
        },
    )
    with tqdm(total=len(index.documents), desc=f"exporting to Qdrant ({collection})", unit="doc", disable=not show_progress) as bar:
        for start in range(0, len(index.documents), batch):
            stop = min(start + batch, len(index.documents))
            client.upsert(collection, points=list(_points(index, weights, term_indices, start, stop)), wait=True)
            bar.update(stop - start)
    return ExportReport(collection, len(index.documents), dimension, len(term_indices), collisions, time.perf_counter() - started)


class QdrantSearch:
    """Searching an exported collection as sentune searches its index: dense, bm25, or hybrid with `engine_fusion`
    sentune (the two candidate lists fused on the client with sentune.search.candidates), rrf or dbsf (Qdrant's own)."""

    def __init__(self, client, collection: str) -> None:
        from sentune.search.fusion import Fusion
        from sentune.search.lexical import LexicalSettings

        self.client, self.collection = client, collection
        saved = (client.get_collection(collection).config.metadata or {}).get("sentune")
        if not saved or saved.get("format") != FORMAT:
            raise UserError(f"Qdrant collection {collection}: not written by `sentune export-index`")
        self.fusion = Fusion.from_dict(saved["fusion"]) if saved.get("fusion") else None  # None: a dense index, no hybrid
        lexical = dict(saved["lexical"] or {})
        lexical.pop("label", None)
        self.lexical = LexicalSettings(**lexical)

    def sparse_query(self, text: str):
        from sentune.search.lexical import tokenize

        indices, values = query_sparse(tokenize([text], self.lexical)[0])
        return qdrant().models.SparseVector(indices=indices, values=values)

    def search(
        self, query_vectors: np.ndarray, texts: list[str], top: int = 10, system: str = "hybrid", engine_fusion: str = "sentune", candidates: int = 100
    ) -> list[list[tuple[str, float]]]:
        """Per query, (doc_id, score) best first."""
        models = qdrant().models
        out = []
        for vector, text in zip(np.asarray(query_vectors, dtype=np.float32), texts, strict=True):
            dense = models.Prefetch(query=vector.tolist(), using=DENSE, limit=max(candidates, top))
            sparse = models.Prefetch(query=self.sparse_query(text), using=SPARSE, limit=max(candidates, top))
            if system == "dense":
                points = self.client.query_points(self.collection, query=dense.query, using=DENSE, limit=top, with_payload=["doc_id"]).points
            elif system == "bm25":
                points = self.client.query_points(self.collection, query=sparse.query, using=SPARSE, limit=top, with_payload=["doc_id"]).points
            elif self.fusion is None:
                raise UserError(f"Qdrant collection {self.collection}: exported from an index without a fusion weight; search it with system dense or bm25")
            elif engine_fusion == "sentune":
                out.append(self._fused_here(dense, sparse, top))
                continue
            else:
                fusion_query = models.RrfQuery(rrf=models.Rrf(k=self.fusion.k)) if engine_fusion == "rrf" else models.FusionQuery(fusion=models.Fusion.DBSF)
                points = self.client.query_points(self.collection, prefetch=[dense, sparse], query=fusion_query, limit=top, with_payload=["doc_id"]).points
            out.append([(p.payload["doc_id"], float(p.score)) for p in points])
        return out

    def _fused_here(self, dense, sparse, top: int) -> list[tuple[str, float]]:
        from sentune.search.candidates import Candidates, fuse
        from sentune.search.fusion import id_order

        models = qdrant().models
        requests = [models.QueryRequest(query=p.query, using=p.using, limit=p.limit, with_payload=["doc_id"]) for p in (dense, sparse)]
        found = [r.points for r in self.client.query_batch_points(self.collection, requests=requests)]
        ids = sorted({p.payload["doc_id"] for points in found for p in points})  # rows of this query's candidates only
        row = {doc: i for i, doc in enumerate(ids)}
        lists = [Candidates(np.array([row[p.payload["doc_id"]] for p in points], dtype=np.int64), np.array([p.score for p in points])) for points in found]
        assert self.fusion is not None  # search() refuses a hybrid without one
        rows, values = fuse(lists[0], lists[1], self.fusion, id_order(ids), top)
        return [(ids[r], v) for r, v in zip(rows, values, strict=True)]


def export_command(
    index_folder: Path, *, path: str | None, url: str | None, api_key: str | None, collection: str | None, replace: bool, batch: int, quiet: bool
) -> ExportReport:
    """What `sentune export-index` does (and sentune.api.export.export_index), every input checked before Qdrant is
    opened; `str()` of the report is the command's line."""
    from sentune.search.index import SearchIndex

    if batch < 1:
        raise UserError(f"--batch {batch}: at least 1")
    if api_key and url is None:
        raise UserError("--api-key applies to --url (a Qdrant server); local mode (--path) has no key")
    if url is not None and not re.match(r"^https?://[^\s/]+", url):
        raise UserError(f"--url {url}: a Qdrant server's address, e.g. http://localhost:6333")
    name = check_collection_name(collection or index_folder.resolve().name)
    if path is not None:
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--path {path}: a file, not a folder")
        if folder.is_dir() and any(folder.iterdir()) and not (folder / "meta.json").is_file():
            raise UserError(f"--path {path}: a folder that is not empty and holds no Qdrant local storage (meta.json)")
    index = SearchIndex.open(index_folder)
    if index.settings.get("passages"):  # a point holds one dense vector: MaxP's best passage cannot be exported
        raise UserError(f"{index_folder}: documents scored by their best passage (--passages maxp), which a Qdrant point (one vector a document) cannot hold")
    client = connect(path=path, url=url, api_key=api_key)
    try:
        report = export_index(index, client, name, replace=replace, batch=batch, show_progress=not quiet)
    finally:
        client.close()
    report.where = f"--path {path}" if path is not None else str(url)
    report.fusion = index.fusion.label if index.fusion else "none"
    return report
