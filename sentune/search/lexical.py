"""BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) as BEIR and Anserini run
it on English: lower-cased word tokens of two characters or more, English stop words removed, the English Snowball
stemmer (PyStemmer), one tokenisation for documents and queries. Scored by the bm25s package (Lù, 2024; Lucene's
variant, k1 = 1.5, b = 0.75, bm25s's defaults): `pip install sentune[search]`.

A document's BM25 text is its encoded text (title, then body) with the title counted `title_weight` times: the title
repeated, the simplest field weight (BM25F's with one boost; Robertson, Zaragoza & Taylor 2004), a no-op for documents
without a title. sentune.search.lexical_fit chooses k1, b and the title weight on a run's selection queries.

`stemmer=None` gives the unstemmed variant (reported beside the stemmed one on
benchmarks/results/retrieval.md). Every score here is over the whole document collection the index was built on, so a
subset of it (adapt's selection pool) is scored with the collection's statistics, not the subset's.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sentune.errors import UserError
from sentune.search.folder import LEXICAL_SETTINGS

STEMMER = "english"  # Snowball's English stemmer, as Elasticsearch's and Lucene's English analyzers


@dataclass(frozen=True)
class LexicalSettings:
    stemmer: str | None = STEMMER
    stopwords: str = "en"
    k1: float = 1.5
    b: float = 0.75
    title_weight: int = 1  # how many times a document's title counts in its BM25 text (1: once, as the model reads it)

    @property
    def label(self) -> str:
        stem = "stemmed: Snowball " + self.stemmer if self.stemmer else "unstemmed"
        title = f", title × {self.title_weight}" if self.title_weight != 1 else ""
        return f"BM25 (bm25s, k1 = {self.k1:g}, b = {self.b:g}{title}, {stem}, stop words {self.stopwords})"


def document_texts(documents, settings: LexicalSettings) -> list[str]:
    """Each document's BM25 text (sentune.data.beir.Document: `text` already holds the title once): the title repeated
    until it counts `title_weight` times."""
    return [weighted_text(d.title, d.text, settings) for d in documents]


def weighted_text(title: str, text: str, settings: LexicalSettings) -> str:
    """A text that holds its title once (a document's, or a passage of it with the title in front), as BM25 reads it:
    the title repeated until it counts `title_weight` times."""
    extra = settings.title_weight - 1
    return (title + " ") * extra + text if extra > 0 and title else text


_IMPORTING = threading.Lock()  # two threads hiding jax at once would put the other's None back


def _bm25s():
    with _IMPORTING:
        if "bm25s" in sys.modules:
            return sys.modules["bm25s"]
        with _jax_hidden():
            try:
                import bm25s  # noqa: F401

                logging.getLogger("bm25s").setLevel(logging.NOTSET)  # it sets DEBUG on import: the application's level rules
            except ImportError:
                raise UserError("BM25 needs the bm25s package: pip install 'sentune[search]' (or pip install bm25s PyStemmer)") from None
    return sys.modules["bm25s"]


@contextmanager
def _jax_hidden():
    """bm25s runs a jax top-k when it is imported, wherever jax is installed: that starts jax's GPU backend, which takes
    75 % of the GPU's memory by XLA's default, memory the encoder's training then lacks. sentune never uses bm25s's
    top-k (its scores come from `get_scores_from_ids`), so bm25s is imported with jax hidden; jax itself is put back
    as it was, for any later `import jax`."""
    had_jax, before = "jax" in sys.modules, sys.modules.get("jax")
    sys.modules["jax"] = None  # type: ignore[assignment]  # None in sys.modules makes `import jax` raise ImportError
    try:
        yield
    finally:
        if had_jax:
            sys.modules["jax"] = before  # type: ignore[assignment]
        else:
            del sys.modules["jax"]


def _stemmer(name: str | None):
    if name is None:
        return None
    try:
        import Stemmer
    except ImportError:
        raise UserError("stemmed BM25 needs PyStemmer: pip install 'sentune[search]' (or pip install PyStemmer)") from None
    return Stemmer.Stemmer(name).stemWord


@dataclass(frozen=True)
class CollectionStatistics:
    """What BM25 reads of a collection besides the scored document: each word's document frequency, the number of
    documents, their mean length in words."""

    document_frequency: dict[str, int]
    documents: int
    mean_length: float

    @classmethod
    def of(cls, tokens: list[list[str]]) -> CollectionStatistics:
        frequency = Counter(word for document in tokens for word in set(document))
        return cls(dict(frequency), len(tokens), float(np.mean([len(d) for d in tokens])) if tokens else 0.0)


class LexicalIndex:
    """BM25 over one document collection: `scores(texts)` gives every document's score for each text."""

    def __init__(self, retriever, settings: LexicalSettings, size: int, statistics: CollectionStatistics | None = None) -> None:
        self.retriever, self.settings, self.size = retriever, settings, size
        self.statistics = statistics  # an index built in this process knows them; one loaded from disk does not

    @classmethod
    def build(cls, texts: list[str], settings: LexicalSettings = LexicalSettings(), show_progress: bool = False, statistics: bool = False) -> LexicalIndex:
        return cls.of_tokens(tokenize(texts, settings), settings, show_progress, statistics)

    @classmethod
    def of_documents(cls, documents, settings: LexicalSettings = LexicalSettings(), show_progress: bool = False, statistics: bool = False) -> LexicalIndex:
        """BM25 over sentune.data.beir.Document records: their titles weighted as `settings` says (document_texts)."""
        return cls.build(document_texts(documents, settings), settings, show_progress, statistics)

    @classmethod
    def of_tokens(cls, tokens: list[list[str]], settings: LexicalSettings, show_progress: bool = False, statistics: bool = False) -> LexicalIndex:
        """BM25 over documents already tokenized by `tokenize` with these settings' stemmer (a grid of k1 and b
        tokenizes once). `statistics`: keep the collection's word statistics too, for `passage_scores` (a pass over
        every document and a dictionary of its words: only where passages are scored)."""
        bm25s = _bm25s()
        retriever = bm25s.BM25(k1=settings.k1, b=settings.b)
        retriever.index(tokens, show_progress=show_progress)
        return cls(retriever, settings, len(tokens), CollectionStatistics.of(tokens) if statistics else None)

    def tokens(self, texts: list[str]) -> list[list[str]]:
        return tokenize(texts, self.settings)

    def scores(self, texts: list[str]) -> np.ndarray:
        """(len(texts), documents) BM25 scores, float32; a text with no word in the collection scores 0 everywhere."""
        return self.scores_of_tokens(self.tokens(texts))

    def scores_of_tokens(self, queries: list[list[str]]) -> np.ndarray:
        out = np.zeros((len(queries), self.size), dtype=np.float32)
        for row, tokens in enumerate(queries):
            ids = self.retriever.get_tokens_ids(tokens)
            if ids:
                out[row] = self.retriever.get_scores_from_ids(ids)
        return out

    def with_statistics(self, texts: list[str]) -> LexicalIndex:
        """This index, knowing its collection's word statistics (for `passage_scores`): `texts` are the BM25 texts it
        was built on (document_texts), tokenised again when it does not know them yet."""
        if self.statistics is None:
            if len(texts) != self.size:
                raise ValueError(f"with_statistics: {len(texts)} texts for an index of {self.size} documents")
            self.statistics = CollectionStatistics.of(self.tokens(texts))
        return self

    def passage_scores(self, queries: list[str], passages: list[str]) -> np.ndarray:
        """BM25 of each query against its own passage, a text outside the collection, with the collection's
        statistics (document frequencies, size, mean length), the passage itself left out of them: a document's own
        score when the passage is one of the documents indexed.
        Lucene's BM25 as bm25s computes it (Kamphuis et al., ECIR 2020): Σ over the query's words w in the collection
        of ln(1 + (N − df(w) + 0.5) / (df(w) + 0.5)) · tf(w) / (tf(w) + k1 · (1 − b + b · |p| / avgdl)). Computed
        here because bm25s scores only the documents it indexed."""
        if self.statistics is None:
            raise ValueError("passage_scores needs the collection's statistics: built with statistics=True, or with_statistics")
        stats, k1, b = self.statistics, self.settings.k1, self.settings.b
        out = np.zeros(len(queries), dtype=np.float64)
        for row, (words, passage) in enumerate(zip(self.tokens(queries), self.tokens(passages), strict=True)):
            counts = Counter(passage)
            norm = k1 * (1 - b + b * (len(passage) / stats.mean_length if stats.mean_length else 0.0))
            for word in words:
                df, tf = stats.document_frequency.get(word, 0), counts.get(word, 0)
                if df and tf:
                    out[row] += math.log(1 + (stats.documents - df + 0.5) / (df + 0.5)) * tf / (tf + norm)
        return out

    def save(self, folder: Path) -> None:
        """bm25s's files and the settings into `folder`, written beside it and renamed into place: a folder another
        index version shares files with is replaced, never written into."""
        import shutil

        partial = folder.with_name(f".{folder.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        self.retriever.save(str(partial), show_progress=False)
        (partial / LEXICAL_SETTINGS).write_text(json.dumps({**asdict(self.settings), "documents": self.size}, indent=2))
        if folder.exists():
            shutil.rmtree(folder)
        partial.rename(folder)

    def mapped_arrays(self) -> list[np.ndarray]:
        """The score matrix's arrays (memory-mapped when loaded with `mmap`), for a server to read in once."""
        return [part for part in self.retriever.scores.values() if isinstance(part, np.ndarray)]

    @classmethod
    def load(cls, folder: Path, mmap: bool = False) -> LexicalIndex:
        """`mmap`: the score matrix stays in the files, its pages the page cache's (a server's workers share them);
        only for an index nothing rewrites while it is open."""
        bm25s = _bm25s()
        saved = json.loads((folder / LEXICAL_SETTINGS).read_text())
        size = saved.pop("documents")
        return cls(bm25s.BM25.load(str(folder), show_progress=False, verbosity=0, mmap=mmap), LexicalSettings(**saved), size)


def tokenize(texts: list[str], settings: LexicalSettings) -> list[list[str]]:
    """The one tokenisation of documents and queries: bm25s's word pattern, lower case, stop words out, then stemmed."""
    bm25s = _bm25s()
    stem = _stemmer(settings.stemmer)
    words = bm25s.tokenize(texts, stopwords=settings.stopwords, return_ids=False, show_progress=False)
    return [[stem(w) for w in row] for row in words] if stem else [list(row) for row in words]


class CollectionRanker:
    """BM25 over a whole document collection, ranking any subset of it (adapt's selection pool, or all of it) with
    the collection's statistics. A ranker of sentune.tasks.user_queries.QueryScorer.of_ranker: a document whose id is
    the query's is never returned (BEIR's rule for Quora-style sets)."""

    def __init__(self, index: LexicalIndex, collection_ids: list[str], depth: int = 100) -> None:
        self.index, self.depth = index, depth
        self.position = {doc: i for i, doc in enumerate(collection_ids)}
        self._last: tuple[tuple[str, ...], np.ndarray] | None = None

    def scores(self, texts: list[str], doc_ids: list[str]) -> np.ndarray:
        """BM25 scores of the texts against those documents; the last texts' scores are kept (a weight search asks
        for the same queries many times)."""
        key = tuple(texts)
        if self._last is None or self._last[0] != key:
            self._last = (key, self.index.scores(list(texts)))
        return self._last[1][:, [self.position[d] for d in doc_ids]]

    def __call__(self, queries, corpus) -> list[list[int]]:
        from sentune.search.fusion import id_order, top_by_score

        ids = [d.id for d in corpus]
        own = {doc: i for i, doc in enumerate(ids)}
        return top_by_score(self.scores([q.text for q in queries], ids), id_order(ids), self.depth, exclude=[own.get(q.id) for q in queries])
