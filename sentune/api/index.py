"""`sentune.Index`: build a search index over documents from Python, open one (`sentune index`'s, or a search `sentune
adapt` run's folder) and rank its documents for queries; a wrapper of sentune.search.index, whose files and rankings are
the command line's."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from sentune.api import given
from sentune.api.common import Model, load_with_runtime, logger, model_name, resolve
from sentune.errors import UserError, names_python_arguments

if TYPE_CHECKING:
    from sentune.data.beir import Document, Queries, Query
    from sentune.search.ann import AnnSpec
    from sentune.search.build import BuildPlan
    from sentune.search.fusion import Fusion
    from sentune.search.index import SearchIndex
    from sentune.search.lexical import LexicalSettings
    from sentune.search.stored import CheckedOut


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


def _queries(queries: str | Sequence[str] | Mapping[str, str] | Queries) -> list[Query]:
    from sentune.data.beir import Queries

    return given.as_kind(Queries, [queries] if isinstance(queries, str) else queries, "queries").queries


def _reference(model: Model, folder: Path) -> str:
    """How the index names `model`: a name as given, a folder made absolute (the index opens from anywhere), the
    index's own model folder for one in memory (saved there)."""
    from sentune.search.folder import IndexFolder

    name = model_name(model)
    if name is None:
        return str(IndexFolder(folder).model_folder)
    return str(Path(name).resolve()) if os.path.isdir(name) else name


class Index:
    """A search index on disk (sentune.search.index's format): dense vectors of a model, BM25, and optionally their
    fusion and an approximate dense index. Made with `Index.build` or `Index.open`; ranked with `search`."""

    def __init__(
        self, folder: Path, opened: SearchIndex | None, model: Any = None, tmp: tempfile.TemporaryDirectory | None = None, system: str | None = None
    ) -> None:
        self.path = folder
        self._opened = {opened.system: opened} if opened is not None else {}
        self._built_ann = {system: index.ann for system, index in self._opened.items()}
        self._default = opened.system if opened is not None else system or ""  # a build's index opens at its first use
        self._model = model
        self._tmp = tmp  # a build into a temporary folder keeps it while the index lives
        self.device: str | None = opened.device if opened is not None else None

    @property
    def system(self) -> str:
        """How `search` ranks by default: dense, bm25 or hybrid."""
        return self._default

    @property
    def given_model(self) -> Model | None:
        """The model it was opened with (`Index.open(..., model=)`) or built by; None: it ranks with the one it names."""
        if self._model is not None:
            return self._model
        return next((opened.given_model for opened in self._opened.values()), None)

    def ann_record(self) -> dict | None:
        """What the index's approximate index records (kind, settings, what it was built from, its build seconds), None
        when it has none."""
        ann = self._index(None).ann
        return dict(ann.saved) if ann is not None else None

    def __len__(self) -> int:
        return len(self._index(None).documents)

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, system={self.system!r}, documents={len(self)})"

    @classmethod
    @names_python_arguments()
    def open(cls, path: str | Path, *, system: str | None = None, device: str | None = None, model: Model | None = None) -> Index:
        """An index folder (`sentune index`, `Index.build`, or a search `sentune adapt` run's folder); `system`: rank with
        another part of it by default (dense, bm25, hybrid). `model`: the model to encode queries with (a name, a
        folder or a `SentenceTransformer` in memory) instead of the one the index names (a folder inside the index, an
        absolute folder or a hub name, never a folder relative to the current directory); either is refused when its
        weights are not those the index was built with. The index reads the files that were current when it opened:
        a rebuild into the same folder does not change what it ranks (open it again to read the rebuilt index)."""
        return cls.opened(Path(path), system=system, device=device, model=model)

    @classmethod
    def opened(cls, folder: Path, *, system: str | None = None, device: str | None = None, model: Model | None = None, model_argument: str = "model=") -> Index:
        """Index.open, its errors naming the model as `model_argument` (`sentune search` names its --model)."""
        from sentune.search.index import SearchIndex

        return cls(folder, SearchIndex.open(folder, system, device, model=model, model_argument=model_argument))

    @classmethod
    @names_python_arguments()
    def build(
        cls,
        model: Model,
        corpus: given.Given,
        out: str | Path | None = None,
        *,
        fusion: str | Fusion | None = None,
        ann: str | AnnSpec | None = None,
        stem: bool = True,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        bm25_title_weight: int | None = None,
        passages: str = "first",
        passage_stride: int | None = None,
        device: str | None = None,
        trust_remote_code: bool = False,
        show_progress: bool = False,
        reference: str | None = None,
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
            reference: how the index names its model, to load it when it is searched (default: the name given, a folder
                made absolute so the index opens from anywhere; a model in memory is saved into OUT/model). With a
                model in memory and a reference, nothing is saved: the reference must load it.
        """
        from sentune.search.ann import parse_ann
        from sentune.search.options import lexical_settings, parse_fusion

        parsed_fusion = fusion if fusion is None or not isinstance(fusion, str) else parse_fusion(fusion, "fusion")
        lexical = lexical_settings(stem, bm25_k1, bm25_b, bm25_title_weight)
        spec = parse_ann(ann, "ann") if isinstance(ann, str) else ann
        build = IndexBuild.check(corpus, out, parsed_fusion, lexical, passages, passage_stride, spec, out_option="out")
        return build.run(model, device=device, trust_remote_code=trust_remote_code, show_progress=show_progress, reference=reference)

    def _index(self, system: str | None) -> SearchIndex:
        from sentune.search.index import SearchIndex

        wanted = system or self._default or None
        if wanted not in self._opened:
            if self._opened:  # another system of the index opened: a view of the same files and model
                opened = next(iter(self._opened.values())).system_view(wanted or self._default)
            else:
                opened = SearchIndex.open(self.path, wanted, self.device, model=self._model, model_argument="model=")
            self._default = self._default or opened.system
            self._opened[opened.system] = opened
            self._built_ann[opened.system] = opened.ann  # what a search with no ann setting searches, whatever one before asked
            wanted = opened.system
        return self._opened[wanted]

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
        device: str | None = ...,
    ) -> list[Hit]: ...
    @overload
    def search(
        self,
        queries: Sequence[str] | Queries,
        top_k: int = 10,
        *,
        system: str | None = ...,
        ann: str | None = ...,
        exact: bool = ...,
        exclude_same_id: bool = ...,
        show_progress: bool = ...,
        device: str | None = ...,
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
        device: str | None = ...,
    ) -> dict[str, list[Hit]]: ...

    def search(
        self,
        queries: str | Sequence[str] | Mapping[str, str] | Queries,
        top_k: int = 10,
        *,
        system: str | None = None,
        ann: str | None = None,
        exact: bool = False,
        exclude_same_id: bool = False,
        show_progress: bool = False,
        device: str | None = None,
    ) -> list[Hit] | list[list[Hit]] | dict[str, list[Hit]]:
        """The `top_k` best documents for a query (a list of hits), for a list of queries or a `Queries` (a list of
        lists) or for a dict of id → query (a dict of id → hits), as `sentune search` ranks them.

        Args:
            system: rank with dense, bm25 or hybrid instead of the index's own.
            ann: search the approximate index with these search settings (`""`: as built; `"ef_search=256"`); by
                default an index built with one searches it, unless `exact`.
            exclude_same_id: never return the document whose id is the query's (for queries that are documents too).
            device: where the queries are encoded (default: the index's, else $SENTUNE_DEVICE, else auto).
        """
        asked = _queries(queries)
        found = self._ranked(asked, top_k, system, ann, exact, exclude_same_id, show_progress, device)
        hits = [[Hit(h.doc_id, h.score, rank, h.text) for rank, h in enumerate(row, start=1)] for row in found]
        if isinstance(queries, str):
            return hits[0]
        if isinstance(queries, Mapping):
            return {q.id: row for q, row in zip(asked, hits, strict=True)}
        return hits

    def uses_ann(self, *, system: str | None = None, ann: str | None = None, exact: bool = False) -> bool:
        """Whether `search` with these settings searches the approximate index (else every document exactly)."""
        from sentune.search.ann import choose_ann

        index = self._index(system)
        index.ann = self._built_ann[index.system]
        return choose_ann(index, ann, exact) is not None

    def check_run_ids(self, queries: Mapping[str, str] | Queries | list[Query], *, system: str | None = None) -> None:
        """One line naming the query (its file and line when it came from one) or document whose id a TREC run line
        cannot hold (whitespace: a line is split at it)."""
        self._index(system).check_run_ids(queries if isinstance(queries, list) else _queries(queries))

    def _ranked(self, asked: list[Query], top_k: int, system, ann, exact, exclude_same_id, show_progress, device) -> list:
        from sentune.search.ann import choose_ann

        if top_k < 1:
            raise UserError(f"top_k {top_k}: at least 1")
        index = self._index(system)
        index.ann = self._built_ann[index.system]
        index.ann = choose_ann(index, ann, exact)
        if exclude_same_id and index.ann is not None:
            raise UserError("exclude_same_id: the approximate index does not leave a query's own document out; add exact=True")
        if device is not None or index.device is None:
            index.device = resolve(device)
        return index.search(asked, top_k, show_progress=show_progress, exclude_same_id=exclude_same_id)

    def write_run(self, queries: Mapping[str, str] | Queries, path: str | Path, top_k: int = 10, *, tag: str = "sentune", **options: Any) -> Path:
        """Write a TREC run file (qid Q0 docid rank score tag) of `queries` (id → text, or a `Queries`), as
        `sentune search --run`; `options` as `search`'s. An id a run line cannot hold is refused before any search."""
        from sentune.search.trec import write_trec_run

        asked = _queries(queries)
        self.check_run_ids(asked, system=options.get("system"))
        ranked = self._ranked(
            asked,
            top_k,
            options.get("system"),
            options.get("ann"),
            options.get("exact", False),
            options.get("exclude_same_id", False),
            options.get("show_progress", False),
            options.get("device"),
        )
        write_trec_run(Path(path), asked, ranked, tag=tag)
        return Path(path)


@dataclass
class IndexBuild:
    """A build into `folder` checked before any model loads (the documents' ids, the folder, what --ann can build over
    this many documents), once: `sentune index` checks here, then loads its model and runs it; Index.build does both."""

    documents: list[Document]
    folder: Path
    plan: BuildPlan
    ann: AnnSpec | None  # resolved for the collection's size; its fit to the model's dimension is checked by run()
    asked: AnnSpec | None  # as given (coarse_codes says what the size chose that was not asked for)
    checked: CheckedOut  # what the folder holds, for build_index
    option: str  # how messages name the ann setting (`ann`, or the command's `--ann`)
    tmp: tempfile.TemporaryDirectory | None = None  # out=None: a temporary folder, kept while the index lives
    out_option: str = "--out"  # how messages name the folder

    @classmethod
    def check(
        cls,
        corpus: given.Given,
        out: str | Path | None,
        fusion: Fusion | None,
        lexical: LexicalSettings,
        passages: str = "first",
        passage_stride: int | None = None,
        ann: AnnSpec | None = None,
        option: str = "ann",
        out_option: str = "--out",
    ) -> IndexBuild:
        """The documents read, their ids and `out` checked (another index or other files in it) and `ann` fitted to
        their number: every one-line error a build can give before the model loads. `lexical`: BM25's settings;
        `option`, `out_option`: how errors name the ann setting and `out`."""
        from sentune.search.ann import check_fits
        from sentune.search.build import BuildPlan
        from sentune.search.options import check_document_ids
        from sentune.search.stored import CheckedOut, check_out

        command = option.startswith("--")  # `sentune index` names its options, a Python caller its arguments
        if passage_stride is not None and (passages != "maxp" or passage_stride < 1):
            stride, maxp = ("--passage-stride", "--passages maxp") if command else ("passage_stride", "passages='maxp'")
            raise UserError(f"{stride} {passage_stride}: a number of tokens from 1, with {maxp}")
        if ann is not None and passages == "maxp":
            maxp, leave = ("--passages maxp", " (leave --ann out)") if command else ("passages='maxp'", "")
            raise UserError(f"{option}: an approximate index holds one vector a document; {maxp} searches every passage exactly{leave}")
        tmp = tempfile.TemporaryDirectory(prefix="sentune-index-") if out is None else None
        folder = Path(tmp.name if tmp is not None else out)  # type: ignore[arg-type]
        documents = documents_of(corpus)
        check_document_ids(documents)  # an id a TREC run line cannot hold: its line now, not at every search of a queries file
        checked = CheckedOut(check_out(folder, documents, option=out_option))  # another index, other files or a damaged index in `out`
        resolved = check_fits(ann, len(documents), None, option) if ann is not None else None  # the dimension is checked after
        plan = BuildPlan("hybrid" if fusion else "dense", fusion, lexical, passages, passage_stride)
        return cls(documents, folder, plan, resolved, ann, checked, option, tmp, out_option)

    def run(
        self,
        model: Model,
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        show_progress: bool = False,
        reference: str | None = None,
        warn: Callable[[str], None] = logger.warning,
    ) -> Index:
        """Encode the documents with `model` (a name, a folder or a model in memory) and build the index, as
        Index.build says; `warn`: how a notice is told (ivfpq codes coarser than asked)."""
        from sentune.core.distributed import rank
        from sentune.core.embedding_cache import model_digest
        from sentune.search.ann import check_fits, coarse_codes
        from sentune.search.build import build_index
        from sentune.search.folder import IndexFolder
        from sentune.search.index import SearchIndex

        # its runtime: several GPUs share the documents when the model is loaded on an unnumbered cuda
        loaded, runtime = load_with_runtime(model, device=device, trust_remote_code=trust_remote_code)
        folder = self.folder
        ref = reference or _reference(model, folder)
        spec = self.ann
        if spec is not None:  # settings that cannot fit this collection: one line before any document is encoded
            spec = check_fits(spec, len(self.documents), loaded.get_sentence_embedding_dimension() or 0, self.option)
            if self.asked is not None and (coarse := coarse_codes(self.asked, spec, len(self.documents), self.option)) and rank() == 0:
                warn(coarse)
        digest = model_digest(loaded)
        saved_model = IndexFolder(folder).model_folder
        if reference is None and Path(ref) == saved_model and rank() == 0 and not saved_model.is_dir():  # before the switch: no index without its model
            folder.mkdir(parents=True, exist_ok=True)
            loaded.save(str(saved_model))
        build_index(
            loaded,
            ref,
            self.documents,
            folder,
            self.plan,
            show_progress=show_progress,
            model_digest=digest,
            checked=self.checked,
            ann=spec,
            option=self.out_option,
            runtime=runtime,
        )
        if rank() != 0:  # under torchrun every process encodes its share; one saves and builds what is left, and opens it
            return Index(folder, None, loaded, self.tmp, self.plan.system)
        return Index(folder, SearchIndex.open(folder, device=device, model=loaded, model_argument="model="), loaded, self.tmp)
