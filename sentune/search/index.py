"""A search index on disk: what `sentune index` builds, `sentune search` reads and a retrieval `sentune adapt` run saves
its chosen system as. Its files (sentune.search.folder says which and where) are its settings (the system: dense,
bm25 or hybrid with its fusion; the model, by a folder inside the index relative to it, an absolute path or a name,
and its weights' digest; the documents' count and sha256), the documents (read a line at a time:
sentune.search.documents), their vectors (float32, documents × dimension, the model's own pipeline, memory-mapped
when read) with how many rows are written (an interrupted build resumes there), BM25 as BEIR runs it
(sentune.search.lexical, with the settings its record holds: an adapt run's fitted on its selection queries), and
with `passages: maxp` every document's later windows (the dense score of a document is its best passage's:
sentune.search.passages).

Building it (the vectors chunk by chunk, resumable, a rebuild written beside the index and switched in when whole,
several processes each encoding a shard) is sentune.search.build; a reader keeps the files it opened, whatever is
rebuilt after.

The model is checked on open: the one the settings name (a folder inside the index, never one relative to the current
directory) or the one the caller gives, refused when its weights' digest is not the recorded one.

Search is exact: every document scored (sentune.search.exact: NumPy in blocks, FAISS's flat index for large ones), as
every sentune evaluation ranks, ties by the id order saved beside the documents; the hybrid normalises each system's
scores over every document (sentune.search.fusion). An index built with `--ann` also holds an approximate dense index
(sentune.search.ann), searched instead unless `sentune search --exact`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentune.core.runtime import Runtime
from sentune.data.beir import Query
from sentune.data.text_files import DataError
from sentune.errors import UserError
from sentune.search.ann import AnnIndex
from sentune.search.documents import DAMAGED, Documents
from sentune.search.exact import dense_top
from sentune.search.folder import IndexFolder, IndexVersion
from sentune.search.fusion import Fusion, hybrid_rank_rows, top_by_score
from sentune.search.lexical import LexicalIndex
from sentune.search.passages import PassageVectors, UnitVectors
from sentune.search.stored import (
    FORMAT,
    check_lexical,
    current_version,
    open_vectors,
    read_settings,
)
from sentune.search.trec import NOT_TREC_SAFE, trec_safe

SYSTEMS = ("dense", "bm25", "hybrid")


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
        self.ann: AnnIndex | None = AnnIndex.open(version.path, settings)  # one FAISS index in memory for every view
        self.given_model = model  # a name, a folder or a model in memory the caller named (None: the index's own)
        self.model_argument = model_argument  # how the caller names it (`--model`, `model=`)
        self.model: Any = None


class SearchIndex:
    """A built index, read for searching: `search(texts)` ranks every document for each text. Opening it checks every
    file the chosen system reads against its settings (documents, vector rows and dimension, BM25's size), so a damaged
    index is one line naming its file, never a ranking of the wrong documents. The documents stay in their file: a
    search reads its hits' lines (sentune.search.documents). An opened index reads the version of the folder that was
    current when it opened, whatever is rebuilt there after (sentune.search.folder); `system_view(name)` is a view of
    the same opened index (its files, model, BM25 and approximate index) ranking with another system."""

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
        self.ann: AnnIndex | None = shared.ann  # `sentune index --ann`: searched by default (sentune.search.ann)
        if self.passages is not None:  # an approximate index holds one vector a document: passages are searched exactly
            self.ann = None

    folder = property(lambda self: self._shared.folder, doc="The index folder as the caller named it (messages name it).")
    version = property(lambda self: self._shared.version, doc="The version of the folder this index reads (sentune.search.folder).")
    documents = property(lambda self: self._shared.documents)
    given_model = property(lambda self: self._shared.given_model, doc="The model the caller named to rank with (None: the index's own).")
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
