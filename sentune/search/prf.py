"""Pseudo-relevance feedback: each query expanded from its own first results, then the two sides fused as the hybrid is
(sentune.search.fusion), no label read.

- dense side, Rocchio (Rocchio, "Relevance feedback in information retrieval", in The SMART Retrieval System, 1971;
  as a dense retriever's feedback: Li et al., "Pseudo Relevance Feedback with Deep Language Models and Dense
  Retrievers", TOIS 2023): q' = α · q + β · mean of the unit vectors of the query's first `rocchio_docs` documents by
  cosine, renormalised to unit length, then every document scored by its cosine with q'.
- BM25 side, RM3 (Lavrenko & Croft, "Relevance-Based Language Models", SIGIR 2001; Abdul-Jaleel et al., "UMass at
  TREC 2004", as Anserini runs it): the feedback documents F are the query's first `rm3_docs` by BM25, each weighted
  by its BM25 score normalised over F (P(Q|D)); the relevance model P(w|R) ∝ Σ_{D∈F} P(Q|D) · tf(w, D) / |D|, cut to
  its `rm3_terms` most likely words and renormalised; the expanded query P'(w) = λ · tf(w, Q) / |Q| + (1 − λ) · P(w|R),
  λ = `rm3_original`; a document's score is Σ_w P'(w) · BM25(w, D), each word's BM25 as the index computes it (bm25s
  offers no feedback: its per-word scores are weighted here). Words are BM25's tokens (stemmed, stop words out); a
  feedback document is read as the model reads it (its title once).

The defaults are the published ones: Rocchio α = 1, β = 0.5 over 3 documents (Li et al.'s best on MS MARCO), RM3 over
10 documents and 10 words with λ = 0.5 (Anserini's)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from sentune.search.fusion import Fusion, top_by_score


@dataclass(frozen=True)
class Feedback:
    rocchio_docs: int = 3
    alpha: float = 1.0
    beta: float = 0.5
    rm3_docs: int = 10
    rm3_terms: int = 10
    rm3_original: float = 0.5

    def to_dict(self) -> dict:
        return {"kind": "prf"} | asdict(self)

    @classmethod
    def from_dict(cls, saved: dict) -> Feedback:
        """What to_dict wrote; anything else is a ValueError naming what is wrong (never a guessed setting)."""
        names = {f.name for f in fields(cls)}
        if not isinstance(saved, dict) or saved.get("kind") != "prf" or set(saved) - {"kind"} != names:
            raise ValueError(f"not a feedback sentune writes: {saved!r} (kind prf with {', '.join(sorted(names))})")
        values = {k: saved[k] for k in names}
        if any(not isinstance(values[k], int) or values[k] < 1 for k in ("rocchio_docs", "rm3_docs", "rm3_terms")):
            raise ValueError(f"feedback documents and words must be whole numbers from 1: {saved!r}")
        if any(not isinstance(values[k], int | float) for k in ("alpha", "beta", "rm3_original")) or not 0 <= values["rm3_original"] <= 1:
            raise ValueError(f"feedback weights must be numbers (rm3_original from 0 to 1): {saved!r}")
        return cls(**values)

    @property
    def label(self) -> str:
        return (
            f"Rocchio (α = {self.alpha:g}, β = {self.beta:g}, {self.rocchio_docs} documents) and "
            f"RM3 ({self.rm3_docs} documents, {self.rm3_terms} words, λ = {self.rm3_original:g})"
        )


def unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; float32 stays float32 (an index's vectors: half the memory), anything else float64."""
    vectors = np.asarray(vectors)
    vectors = vectors if vectors.dtype == np.float32 else vectors.astype(np.float64)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def in_blocks(rank: Callable[[list], list[list[int]]], queries: list, block: int | None = None) -> list[list[int]]:
    """rank(queries) a block at a time (sentune.search.fusion.QUERY_BLOCK): a block's scores of every document are
    held at once, never every query's (5,000 test queries × 500,000 documents would be 20 GB)."""
    from sentune.search.fusion import QUERY_BLOCK

    size = block or QUERY_BLOCK
    return [row for start in range(0, len(queries), size) for row in rank(queries[start : start + size])]


def rocchio(query_vectors: np.ndarray, doc_vectors: np.ndarray, ties: np.ndarray, feedback: Feedback, own: Sequence[int | None] | None = None) -> np.ndarray:
    """Each query's Rocchio vector (unit length): α · q + β · the mean unit vector of its first documents by cosine
    (ties by `ties`; a query's own document, `own[row]`, is no feedback)."""
    return moved_queries(unit(query_vectors), unit(doc_vectors), ties, feedback, own)


def moved_queries(queries: np.ndarray, docs: np.ndarray, ties: np.ndarray, feedback: Feedback, own=None) -> np.ndarray:
    """rocchio with both sides' vectors already unit rows (an index's documents normalised once, not per query)."""
    first = top_by_score(queries @ docs.T, ties, feedback.rocchio_docs, exclude=own)
    moved = np.stack([feedback.alpha * q + feedback.beta * docs[top].mean(axis=0) for q, top in zip(queries, first, strict=True)])
    return unit(moved)


def relevance_model(query: list[str], feedback_docs: list[list[str]], feedback_scores: Sequence[float], feedback: Feedback) -> dict[str, float]:
    """RM3's expanded query: each word's weight P'(w) (they sum to 1 when the query has a word)."""
    weights = np.asarray(feedback_scores, dtype=np.float64)
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(len(weights), 1.0 / max(len(weights), 1))
    model: dict[str, float] = {}
    for words, weight in zip(feedback_docs, weights, strict=True):
        for word, count in Counter(words).items():
            model[word] = model.get(word, 0.0) + weight * count / len(words)
    kept = dict(sorted(model.items(), key=lambda item: -item[1])[: feedback.rm3_terms])  # ties: the first counted
    total = sum(kept.values())
    expanded = {word: feedback.rm3_original * count / len(query) for word, count in Counter(query).items()}
    for word, value in kept.items():
        expanded[word] = expanded.get(word, 0.0) + ((1.0 - feedback.rm3_original) * value / total if total > 0 else 0.0)
    return expanded


def weighted_scores(lexical, weights: dict[str, float]) -> np.ndarray:
    """Σ_w weight(w) · BM25(w, D) for every document of `lexical` (sentune.search.lexical.LexicalIndex), words outside
    its vocabulary adding nothing."""
    out = np.zeros(lexical.size, dtype=np.float64)
    for word, weight in weights.items():
        ids = lexical.retriever.get_tokens_ids([word])
        if ids:
            out += weight * lexical.retriever.get_scores_from_ids(ids)
    return out


def rm3_scores(
    lexical, texts: list[str], read: Callable[[list[int]], list[str]], ties: np.ndarray, feedback: Feedback, own: Sequence[int | None] | None = None
) -> np.ndarray:
    """Every document's RM3 score for each text (rows: texts): feedback from its first documents by BM25 (those with
    a score above 0, its own document left out), `read(rows)` giving their texts."""
    first_scores = lexical.scores(texts)
    out = np.zeros((len(texts), lexical.size), dtype=np.float64)
    tops = top_by_score(first_scores, ties, feedback.rm3_docs, exclude=own)
    for row, (query, top) in enumerate(zip(lexical.tokens(texts), tops, strict=True)):
        top = [d for d in top if first_scores[row, d] > 0]
        if not query:
            continue
        if not top:  # no document shares a word: the query as it is
            out[row] = first_scores[row] / len(query)
            continue
        words = lexical.tokens(read(top))
        kept = [(w, first_scores[row, d]) for w, d in zip(words, top, strict=True) if w]
        out[row] = weighted_scores(lexical, relevance_model(query, [w for w, _ in kept], [s for _, s in kept], feedback))
    return out


def prf_rank(
    query_vectors: np.ndarray,
    doc_units: np.ndarray,
    lexical,
    texts: list[str],
    read: Callable[[list[int]], list[str]],
    ties: np.ndarray,
    fusion: Fusion,
    feedback: Feedback,
    *,
    depth: int,
    own: Sequence[int | None] | None = None,
) -> tuple[list[list[int]], list[list[float]]]:
    """The top `depth` documents (rows of the collection; `doc_units` their unit vectors) per query under `fusion` of the
    Rocchio cosine and RM3's BM25, with their fused scores; `own[row]`: the query's own document, neither feedback,
    ranked, nor normalised over."""
    from sentune.search.fusion import QUERY_BLOCK

    ranked: list[list[int]] = []
    values: list[list[float]] = []
    for start in range(0, len(texts), QUERY_BLOCK):  # a block's scores of every document at once, as the hybrid's
        rows = slice(start, start + QUERY_BLOCK)
        block_own = list(own[rows]) if own is not None else None
        dense, words = prf_scores(query_vectors[rows], doc_units, lexical, texts[rows], read, ties, feedback, block_own)
        found = fuse_rank(dense, words, ties, fusion, depth, block_own)
        ranked, values = ranked + found[0], values + found[1]
    return ranked, values


def prf_scores(query_vectors, doc_units, lexical, texts, read, ties, feedback: Feedback, own=None) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' scores of every document (rows: queries): Rocchio's cosines (`doc_units`: the documents' unit
    vectors) and RM3's BM25."""
    dense = moved_queries(unit(query_vectors), doc_units, ties, feedback, own) @ doc_units.T
    return dense, rm3_scores(lexical, texts, read, ties, feedback, own)


def fuse_rank(dense: np.ndarray, lexical: np.ndarray, ties: np.ndarray, fusion: Fusion, depth: int, own=None) -> tuple[list[list[int]], list[list[float]]]:
    """Both sides fused (a query's own document set to each side's row minimum first: out of both normalisations, as
    sentune.search.fusion.hybrid_rank_rows does), the top `depth` with their scores."""
    dense, lexical = np.array(dense, dtype=np.float64), np.array(lexical, dtype=np.float64)
    for row, doc in enumerate(own or []):
        if doc is not None and dense.shape[1] > 1:
            dense[row, doc] = np.delete(dense[row], doc).min()
            lexical[row, doc] = np.delete(lexical[row], doc).min()
    fused = fusion.fuse(dense, lexical, ties)
    ranked = top_by_score(fused, ties, depth, exclude=own)
    return ranked, [[float(fused[r, d]) for d in row] for r, row in enumerate(ranked)]
