"""BM25 fitted to a domain: k1, b and the title weight (sentune.search.lexical.LexicalSettings) chosen by nDCG@10 of
the queries given, each ranked against the whole collection, over a small grid around the settings engines ship:

    k1            0.9 (Anserini's), 1.2 (Elasticsearch's, Lucene's), 1.5 (bm25s's, sentune's fixed BM25), 2.0
    b             0.4 (Anserini's), 0.6, 0.75 (Elasticsearch's, bm25s's), 0.9
    title weight  1 (the title once, as the model reads it), 2, 3; only 1 when no document has a title

Parameters alone move BEIR's nDCG@10 by points (xhluca/bm25-benchmarks: Elasticsearch's 1.2 / 0.75 against Anserini's
0.9 / 0.4), so the grid spans those; it stays small because a few hundred queries choose among its points, and every
point it adds is one more chance to fit them by luck. The fixed settings are in the grid and win every tie, so a
fit that finds nothing better keeps them. Documents and queries are tokenized once; each point is one bm25s index, and
the best point's is kept with the fit (its caller ranks with it: no second build). A run's record of the fit reads back
as the fit (LexicalFit.from_record): a resumed run does not fit again.

An adapt run gives it the selection queries alone (sentune.adaptation.lexical_service.LexicalService.fitted): the
fit's `read` lists the query ids it scored, and the run's record keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from sentune.search.lexical import LexicalIndex, LexicalSettings, tokenize

K1S = (0.9, 1.2, 1.5, 2.0)
BS = (0.4, 0.6, 0.75, 0.9)
TITLE_WEIGHTS = (1, 2, 3)
FIXED = LexicalSettings()  # sentune's BM25 before any fit


@dataclass(frozen=True)
class LexicalFit:
    settings: LexicalSettings  # the best point (the fixed settings when none beats them)
    fixed: LexicalSettings
    curve: dict[tuple[float, float, int], float]  # (k1, b, title weight) -> mean nDCG@10 ×100 of the queries read
    read: list[str]  # the ids of the queries the fit scored, in order
    index: LexicalIndex | None = field(default=None, compare=False, repr=False)  # the best point's, when the fit built it

    @classmethod
    def from_record(cls, saved: dict, fixed: LexicalSettings) -> LexicalFit:
        """The fit a record (LexicalFit.record) keeps, its fixed settings `fixed`; without the index."""
        curve = {(float(k1), float(b), int(w)): float(score) for k1, b, w, score in saved["grid"]}
        return cls(LexicalSettings(**saved["settings"]), fixed, curve, list(saved["read_queries"]))

    def record(self) -> dict:
        """What a run's record keeps: the settings chosen, the fixed ones' score beside the chosen one's, every
        point's, and the query ids read."""
        key = lambda s: (s.k1, s.b, s.title_weight)  # noqa: E731
        return {
            "chosen": self.settings.label,
            "settings": asdict(self.settings),
            "chosen_score": self.curve[key(self.settings)],
            "fixed": self.fixed.label,
            "fixed_score": self.curve[key(self.fixed)],
            "grid": [[k1, b, w, score] for (k1, b, w), score in self.curve.items()],
            "read_queries": self.read,
        }


def grid(fixed: LexicalSettings, titled: bool) -> list[LexicalSettings]:
    """Every point, the fixed settings first (a tie keeps them)."""
    weights = TITLE_WEIGHTS if titled else (1,)
    points = [replace(fixed, k1=k1, b=b, title_weight=w) for w in weights for k1 in K1S for b in BS]
    return [fixed, *[p for p in points if p != fixed]]


def fit_lexical(documents: Sequence, queries: Sequence, fixed: LexicalSettings = FIXED, depth: int = 100) -> LexicalFit:
    """The grid point of best mean nDCG@10 over `queries` (sentune.data.beir.Query with judgements), each ranked
    against every document of `documents` (sentune.data.beir.Document), a query's own document left out (BEIR's rule
    for Quora-style sets)."""
    from sentune.search.fusion import id_order, top_by_score
    from sentune.tasks.retrieval import HEADLINE, per_query_metrics

    ids = [d.id for d in documents]
    ties = id_order(ids)
    position = {doc: i for i, doc in enumerate(ids)}
    own = [position.get(q.id) for q in queries]
    titles = tokenize([d.title for d in documents], fixed)
    texts = tokenize([d.text for d in documents], fixed)
    query_tokens = tokenize([q.text for q in queries], fixed)
    curve: dict[tuple[float, float, int], float] = {}
    best: tuple[float, LexicalSettings, LexicalIndex] | None = None
    for point in grid(fixed, any(d.title for d in documents)):
        tokens = [title * (point.title_weight - 1) + text for title, text in zip(titles, texts, strict=True)]  # document_texts' tokens
        index = LexicalIndex.of_tokens(tokens, point)
        scores = index.scores_of_tokens(query_tokens)
        ranked = top_by_score(scores, ties, depth, exclude=own)
        score = 100 * float(np.mean(per_query_metrics([[ids[i] for i in row] for row in ranked], queries)[HEADLINE]))
        curve[(point.k1, point.b, point.title_weight)] = score
        if best is None or round(score, 9) > round(best[0], 9):
            best = (score, point, index)
        del index  # only the best point's index outlives its scoring: two at most at once
    assert best is not None  # the grid holds the fixed settings at least
    return LexicalFit(best[1], fixed, curve, [q.id for q in queries], best[2])
