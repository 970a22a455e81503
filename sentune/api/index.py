"""`sentune.Index`: build a search index over documents from Python, open one (`sentune index`'s, or a search `sentune
adapt` run's folder) and rank its documents for queries; a wrapper of sentune.search.index, whose files and rankings are
the command line's."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from sentune.api import given
from sentune.api.common import Model, load, model_name, resolve
from sentune.errors import UserError

if TYPE_CHECKING:
    from sentune.data.beir import Document, Query
    from sentune.search.index import SearchIndex


@dataclass(frozen=True)
class Hit:
    """One ranked document: its id, the system's score, its rank (1 = best) and its text (title and body)."""

    id: str
    score: float
    rank: int
    text: str


def documents_of(corpus: given.Given) -> list[Document]:
    """Documents from a BEIR corpus.jsonl path, BEIR-style dicts `{"_id", "title", "text"}`, a dict of id → text, plain
    strings (their ids are their positions, "0", "1", ...), a DataFrame or a `datasets.Dataset` (sentune.data.beir.Corpus)."""
    from sentune.data.beir import Corpus

    return (Corpus.from_file(Path(corpus)) if given.is_path(corpus) else given.as_kind(Corpus, corpus, "corpus")).documents


def _queries(queries: str | Sequence[str] | Mapping[str, str]) -> list[Query]:
    from sentune.data.beir import Queries

    return given.as_kind(Queries, [queries] if isinstance(queries, str) else queries, "queries").queries


class Index:
    """A search index on disk (sentune.search.index's format): dense vectors of a model, BM25, and optionally their
    fusion and an approximate dense index. Made with `Index.build` or `Index.open`; ranked with `search`."""

    def __init__(self, folder: Path, opened: SearchIndex, model: Any = None, tmp: tempfile.TemporaryDirectory | None = None) -> None:
        self.path = folder
        self._opened = {opened.system: opened}
        self._default = opened.system
        self._model = model
        self._tmp = tmp  # a build into a temporary folder keeps it while the index lives

    @property
    def system(self) -> str:
        """How `search` ranks by default: dense, bm25 or hybrid."""
        return self._default

    def __len__(self) -> int:
        return len(self._opened[self._default].documents)

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, system={self.system!r}, documents={len(self)})"

    @classmethod
    def open(cls, path: str | Path, *, system: str | None = None, device: str | None = None) -> Index:
        """An index folder (`sentune index`, `Index.build`, or a search `sentune adapt` run's folder); `system`: rank with
        another part of it by default (dense, bm25, hybrid)."""
        from sentune.search.index import SearchIndex

        folder = Path(path)
        return cls(folder, SearchIndex.open(folder, system, device))

    @classmethod
    def build(
        cls,
        model: Model,
        corpus: given.Given,
        out: str | Path | None = None,
        *,
        fusion: str | None = None,
        ann: str | None = None,
        stem: bool = True,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        bm25_title_weight: int | None = None,
        passages: str = "first",
        passage_stride: int | None = None,
        device: str | None = None,
        trust_remote_code: bool = False,
        show_progress: bool = False,
    ) -> Index:
        """Encode `corpus` with `model` into an index folder `out` (None: a temporary folder kept while the index lives),
        as `sentune index` does; an interrupted build into the same `out` resumes.

        Args:
            model: a name, a folder, or a `SentenceTransformer` in memory (saved into OUT/model so the index reopens).
            corpus: a BEIR corpus.jsonl path, BEIR-style dicts `{"_id", "title", "text"}`, or strings.
            fusion: None (the model's cosine alone), `"rrf"` or `"convex:ALPHA"` (a hybrid with BM25, ALPHA on the cosine).
            ann: also an approximate dense index: `"hnsw"` or `"ivfpq"`, optionally with settings (`"hnsw:m=32"`).
            stem, bm25_k1, bm25_b, bm25_title_weight: BM25's settings (`sentune index --no-stem`, `--bm25-*`).
            passages: `"first"` (a document is what the model reads of it) or `"maxp"` (its best window's score).
        """
        from sentune.search.command import parse_fusion, parse_lexical
        from sentune.search.index import BuildPlan, SearchIndex, build_index, check_out

        parsed_fusion = parse_fusion(fusion)
        lexical = parse_lexical(argparse.Namespace(no_stem=not stem, bm25_k1=bm25_k1, bm25_b=bm25_b, bm25_title_weight=bm25_title_weight))
        if passage_stride is not None and (passages != "maxp" or passage_stride < 1):
            raise UserError(f"passage_stride {passage_stride}: a number of tokens from 1, with passages='maxp'")
        if ann is not None and passages == "maxp":
            raise UserError("ann: an approximate index holds one vector a document; passages='maxp' searches every passage exactly")
        from sentune.search.ann import build_ann, check_fits, parse_ann

        spec = parse_ann(ann, "ann") if ann is not None else None
        tmp = tempfile.TemporaryDirectory(prefix="sentune-index-") if out is None else None
        folder = Path(tmp.name if tmp is not None else out)  # type: ignore[arg-type]
        documents = documents_of(corpus)
        check_out(folder, documents)  # another index or other files in `out`: before the model loads
        loaded = load(model, device=device, trust_remote_code=trust_remote_code)
        ref = model_name(model)
        if ref is None or not os.path.isdir(ref):  # a model in memory, or a hub name: kept beside the index, found from anywhere
            ref = "model" if ref is None else ref
        else:
            ref = str(Path(ref).resolve())  # a folder: reopened from wherever the caller opens the index
        if spec is not None:
            spec = check_fits(spec, len(documents), loaded.get_sentence_embedding_dimension() or 0, "ann")
        plan = BuildPlan("hybrid" if parsed_fusion else "dense", parsed_fusion, lexical, passages, passage_stride)
        build_index(loaded, ref, documents, folder, plan, show_progress=show_progress)
        if ref == "model":
            loaded.save(str(folder / "model"))
        if spec is not None:
            from sentune.search.index import read_settings

            build_ann(folder, spec, read_settings(folder) or {}, show_progress=show_progress)
        return cls(folder, SearchIndex.open(folder, device=device), loaded, tmp)

    def _index(self, system: str | None) -> SearchIndex:
        from sentune.search.index import SearchIndex

        wanted = system or self._default
        if wanted not in self._opened:
            first = self._opened[self._default]
            self._opened[wanted] = SearchIndex.open(self.path, wanted, first.device)
        index = self._opened[wanted]
        if self._model is not None:
            index._model = self._model  # one model in memory for every system
        return index

    @overload
    def search(  # type: ignore[overload-overlap]  # a str is a Sequence[str]: this one, listed first, wins
        self,
        queries: str,
        top_k: int = 10,
        *,
        system: str | None = ...,
        ann: str | None = ...,
        exact: bool = ...,
        exclude_same_id: bool = ...,
        show_progress: bool = ...,
    ) -> list[Hit]: ...
    @overload
    def search(
        self,
        queries: Sequence[str],
        top_k: int = 10,
        *,
        system: str | None = ...,
        ann: str | None = ...,
        exact: bool = ...,
        exclude_same_id: bool = ...,
        show_progress: bool = ...,
    ) -> list[list[Hit]]: ...
    @overload
    def search(
        self,
        queries: Mapping[str, str],
        top_k: int = 10,
        *,
        system: str | None = ...,
        ann: str | None = ...,
        exact: bool = ...,
        exclude_same_id: bool = ...,
        show_progress: bool = ...,
    ) -> dict[str, list[Hit]]: ...

    def search(
        self,
        queries: str | Sequence[str] | Mapping[str, str],
        top_k: int = 10,
        *,
        system: str | None = None,
        ann: str | None = None,
        exact: bool = False,
        exclude_same_id: bool = False,
        show_progress: bool = False,
    ) -> list[Hit] | list[list[Hit]] | dict[str, list[Hit]]:
        """The `top_k` best documents for a query (a list of hits), for a list of queries (a list of lists) or for a dict
        of id → query (a dict of id → hits), as `sentune search` ranks them.

        Args:
            system: rank with dense, bm25 or hybrid instead of the index's own.
            ann: search the approximate index with these search settings (`""`: as built; `"ef_search=256"`); by
                default an index built with one searches it, unless `exact`.
            exclude_same_id: never return the document whose id is the query's (for queries that are documents too).
        """
        from sentune.search.ann import choose_ann

        if top_k < 1:
            raise UserError(f"top_k {top_k}: at least 1")
        index = self._index(system)
        index.ann = choose_ann(index, ann, exact)
        if exclude_same_id and index.ann is not None:
            raise UserError("exclude_same_id: the approximate index does not leave a query's own document out; add exact=True")
        asked = _queries(queries)
        if index.device is None:
            index.device = resolve(None)
        found = index.search(asked, top_k, show_progress=show_progress, exclude_same_id=exclude_same_id)
        hits = [[Hit(h.doc_id, h.score, rank, h.text) for rank, h in enumerate(row, start=1)] for row in found]
        if isinstance(queries, str):
            return hits[0]
        if isinstance(queries, Mapping):
            return {q.id: row for q, row in zip(asked, hits, strict=True)}
        return hits

    def write_run(self, queries: Mapping[str, str], path: str | Path, top_k: int = 10, *, tag: str = "sentune", **options: Any) -> Path:
        """Write a TREC run file (qid Q0 docid rank score tag) of `queries` (id → text), as `sentune search --run`."""
        from sentune.search.index import Hit as IndexHit
        from sentune.search.index import write_trec_run

        asked = _queries(queries)
        self._index(options.get("system")).check_run_ids(asked)
        ranked = self.search(dict(queries), top_k, **options)
        write_trec_run(Path(path), asked, [[IndexHit(h.id, h.score, h.text) for h in ranked[q.id]] for q in asked], tag=tag)
        return Path(path)
