"""BM25, the lexical baseline of BEIR (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
2009), with the bm25s package (Lù, 2024; `pip install sentune[search]`): Lucene's variant, k1 = 1.5, b = 0.75, lower-cased
word tokens of two characters or more, English stop words removed, no stemming. BEIR ran Elasticsearch's English
analyzer (with a stemmer), so its BM25 numbers can differ by a point or two.
"""

from __future__ import annotations

from sentune.data.beir import Document, Query
from sentune.errors import UserError
from sentune.tasks.retrieval import DEPTH


def bm25_rank(queries: list[Query], corpus: list[Document], depth: int = DEPTH) -> list[list[int]]:
    """The top `depth` document indices for each query by BM25 score (a document with the query's id left out)."""
    try:
        import bm25s
    except ImportError:
        raise UserError("BM25 needs the bm25s package: pip install 'sentune[search]' (or pip install bm25s)") from None
    retriever = bm25s.BM25(k1=1.5, b=0.75)
    retriever.index(bm25s.tokenize([d.text for d in corpus], stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([q.text for q in queries], stopwords="en", show_progress=False)
    found, _ = retriever.retrieve(tokens, k=min(depth + 1, len(corpus)), show_progress=False)
    return [[int(i) for i in row if corpus[int(i)].id != query.id][:depth] for row, query in zip(found, queries, strict=True)]
