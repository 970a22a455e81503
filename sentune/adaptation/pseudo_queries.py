"""Pseudo-queries built from the user's documents (`--corpus`), for the retrieval-native candidates
(sentune.adaptation.candidates.retrieval_native): no label is read, only the documents.

- ICT, the Inverse Cloze Task (Lee, Chang & Toutanova, "Latent Retrieval for Weakly Supervised Open Domain Question
  Answering", ACL 2019, §6): a sentence of a document's body is the query; the document without that sentence (its
  title kept in front) is the passage it should retrieve. The sentence is left in place in KEEP_SENTENCE of the
  pairs, as Lee et al. do, so that word overlap stays worth something.
- Independent cropping (Izacard et al., "Unsupervised Dense Information Retrieval with Contrastive Learning"
  (Contriever), TMLR 2022, §3.2): two spans of the same document drawn independently, a short one as the query and a
  longer one as the passage; they may overlap.

The rule, fixed in advance and the same for every corpus:

- ICT: a query is a body sentence (sentune.data.passages.sentences) of ICT_WORDS words; a document needs one such
  sentence and at least one other sentence.
- crop: documents of at least CROP_MIN_WORDS words (title and body); the query span is uniform in
  [CROP_QUERY_WORDS[0], min(CROP_QUERY_WORDS[1], n // 4)] words, the passage span uniform in [n // 2, n] words capped
  at CROP_PASSAGE_WORDS, each starting at a uniform position (n: the document's words).
- How many: the documents in one seeded random order, one pseudo-query each per round (a document's r-th round takes
  its r-th sentence, in a seeded order, for ICT; a fresh pair of spans for crop), rounds until `limit` pseudo-queries
  or MAX_ROUNDS; the caller's `limit` is its training's rows (steps × batch size), so a small corpus gives several per
  document and a large one one to a subset of its documents.
- Seeds: one numpy generator seeded by `seed` (adapt's --seed) draws everything, so a run builds the same
  pseudo-queries again.

Hard negatives (mine): per pseudo-query the best-ranked document under BM25 and the best-ranked other one under the
unchanged model, over the whole corpus, never the pseudo-query's own document nor any document whose text holds the
query's text (a duplicate of its own). With a teacher given (a fusion and the BM25 it fuses, which need not be the
BM25 that mines), its fused score of the pseudo-query's passage (the text the student is taught to retrieve, standing
in for its document in the corpus) and of each negative comes with them (hybrid-distill's margins)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sentune.adaptation.names import CROP, ICT
from sentune.data.passages import sentences

if TYPE_CHECKING:
    from sentune.data.beir import Document
    from sentune.search.fusion import Fusion

VIEWS = (ICT, CROP)
ICT_WORDS = (4, 40)  # a query sentence's words, both ends included: shorter is a heading, longer a paragraph
KEEP_SENTENCE = 0.1  # Lee et al.'s share of ICT pairs whose passage keeps the query sentence
CROP_MIN_WORDS = 16
CROP_QUERY_WORDS = (4, 16)  # queries are short: a claim or a question is a sentence, not half a document
CROP_PASSAGE_WORDS = 96  # about 128 word pieces: the recipes' max_seq_length, so the span is what the model reads
MAX_ROUNDS = 8
MINING_BLOCK = 64  # pseudo-queries scored at once: 64 × a million documents is 512 MB of float64 fused scores
CANDIDATES_DEPTH = 8  # each ranking's top documents looked through before sorting it whole for an allowed one


@dataclass(frozen=True)
class PseudoQuery:
    id: str  # DOCUMENT-ID#VIEW-ROUND
    text: str
    positive: str  # the passage it should retrieve (ICT: its document without it; crop: another span of its document)
    document: int  # its document's index in the corpus it was built from


def body(document: Document) -> str:
    """The document's text without its title (Document.text is title + " " + body)."""
    title = document.title.strip()
    return document.text[len(title) :].strip() if title and document.text.startswith(title) else document.text


def ict(documents: Sequence[Document], limit: int, seed: int) -> list[PseudoQuery]:
    """ICT pairs by the module's rule."""
    rng = np.random.default_rng(seed)
    plans = []
    for index in rng.permutation(len(documents)):
        document = documents[int(index)]
        parts = sentences(body(document))
        eligible = [i for i, s in enumerate(parts) if ICT_WORDS[0] <= len(s.split()) <= ICT_WORDS[1]]
        if len(parts) >= 2 and eligible:
            plans.append((int(index), parts, [eligible[int(i)] for i in rng.permutation(len(eligible))]))
    found: list[PseudoQuery] = []
    for round_ in range(MAX_ROUNDS):
        for index, parts, order in plans:
            if len(found) >= limit:
                return found
            if round_ >= len(order):
                continue
            chosen = order[round_]
            keep = rng.random() < KEEP_SENTENCE
            rest = [s for i, s in enumerate(parts) if keep or i != chosen]
            title = documents[index].title.strip()
            found.append(PseudoQuery(f"{documents[index].id}#{ICT}-{round_}", parts[chosen], " ".join([title, *rest] if title else rest), index))
    return found


def crop(documents: Sequence[Document], limit: int, seed: int) -> list[PseudoQuery]:
    """Independent cropping pairs by the module's rule."""
    rng = np.random.default_rng(seed)
    usable = [int(i) for i in rng.permutation(len(documents)) if len(documents[int(i)].text.split()) >= CROP_MIN_WORDS]
    found: list[PseudoQuery] = []
    for round_ in range(MAX_ROUNDS):
        for index in usable:
            if len(found) >= limit:
                return found
            words = documents[index].text.split()
            n = len(words)
            query_words = int(rng.integers(CROP_QUERY_WORDS[0], min(CROP_QUERY_WORDS[1], n // 4) + 1))
            passage_words = min(int(rng.integers(n // 2, n + 1)), CROP_PASSAGE_WORDS)
            q, p = int(rng.integers(0, n - query_words + 1)), int(rng.integers(0, n - passage_words + 1))
            query, passage = " ".join(words[q : q + query_words]), " ".join(words[p : p + passage_words])
            found.append(PseudoQuery(f"{documents[index].id}#{CROP}-{round_}", query, passage, index))
    return found


BUILDERS: dict[str, Callable[[Sequence[Document], int, int], list[PseudoQuery]]] = {ICT: ict, CROP: crop}


@dataclass(frozen=True)
class Teacher:
    """A hybrid scoring every document for hybrid-distill's margins: `fusion` of the unchanged model's cosines and
    `lexical(texts)`, the BM25 scores it was chosen with (rows: texts, columns: every document); `passage_lexical(
    queries)` the same BM25's score of each pseudo-query's passage, a text outside the corpus, with the corpus's
    statistics (sentune.search.lexical.LexicalIndex.passage_scores)."""

    fusion: Fusion
    lexical: Callable[[list[str]], np.ndarray]
    passage_lexical: Callable[[list[PseudoQuery]], np.ndarray]


@dataclass(frozen=True)
class Mined:
    """A pseudo-query's two hard negatives (document indices: BM25's, then the unchanged model's) and, with a teacher,
    its fused score of the pseudo-query's passage and of each negative."""

    negatives: tuple[int, int]
    teacher: tuple[float, float, float] | None = None
    dense: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the unchanged model's cosines of the same three texts

    def margins(self) -> tuple[float, float]:
        """teacher(q, its passage) − teacher(q, negative), per negative."""
        if self.teacher is None:
            raise ValueError("mined without a teacher")
        own, first, second = self.teacher
        return own - first, own - second

    def dense_margins(self) -> tuple[float, float]:
        """The same margins under the unchanged model's cosines."""
        own, first, second = self.dense
        return own - first, own - second


def teacher_scale(mined: Sequence[Mined]) -> float:
    """The factor that puts a teacher's margins on the student's scale: the mean absolute margin of the unchanged
    model's cosines over the teacher's, over every row and negative. A hybrid's fused scores are min-max normalised per
    query over the whole corpus, so its margins are several times a cosine's; unscaled, MarginMSE would ask the
    student to spread its cosines that much. 1 when either is zero, or without rows."""
    if not mined:
        return 1.0
    teacher = float(np.mean(np.abs([m.margins() for m in mined])))
    dense = float(np.mean(np.abs([m.dense_margins() for m in mined])))
    return dense / teacher if teacher > 0 and dense > 0 else 1.0


def mine(
    queries: Sequence[PseudoQuery],
    doc_texts: Sequence[str],
    ties: np.ndarray,
    lexical: Callable[[list[str]], np.ndarray],
    query_vectors: np.ndarray,
    doc_vectors: np.ndarray,
    teacher: Teacher | None = None,
    passage_vectors: np.ndarray | None = None,
) -> list[Mined]:
    """Each pseudo-query's hard negatives over the whole corpus (the module's rule). `lexical(texts)`: the BM25 scores
    that mine, of the texts against every document (rows: texts); `query_vectors` / `doc_vectors`: the unchanged
    model's; `ties`: each document's position in id order (sentune.search.fusion.id_order), every ranking's tie-break.
    With `teacher` (and `passage_vectors`, the unchanged model's vectors of each pseudo-query's passage), its fused
    score of the passage and of each negative: the passage stands in for its document (its cosine and BM25 in the
    document's column), so the fusion's per-query normalisation reads the passage, not the document the student never
    sees, whose copy of the query sentence would top both scores."""
    from sentune.search.passages import cosines
    from sentune.tasks.retrieval import unit_rows

    if teacher is not None and passage_vectors is None:
        raise ValueError("a teacher scores each pseudo-query's passage: give passage_vectors")
    found: list[Mined] = []
    for start in range(0, len(queries), MINING_BLOCK):
        block = list(queries[start : start + MINING_BLOCK])
        bm25 = np.asarray(lexical([q.text for q in block]), dtype=np.float64)
        dense = cosines(query_vectors[start : start + MINING_BLOCK], doc_vectors).astype(np.float64)
        own = None  # each pseudo-query's cosine with its own passage
        if passage_vectors is not None:
            own = np.einsum(
                "ij,ij->i", unit_rows(query_vectors[start : start + MINING_BLOCK]), unit_rows(passage_vectors[start : start + MINING_BLOCK])
            ).astype(np.float64)
        fused = None
        if teacher is not None and own is not None:
            rows, documents = np.arange(len(block)), [q.document for q in block]
            taught_dense, taught_lexical = dense.copy(), np.array(teacher.lexical([q.text for q in block]), dtype=np.float64)
            taught_dense[rows, documents], taught_lexical[rows, documents] = own, teacher.passage_lexical(block)
            fused = teacher.fusion.fuse(taught_dense, taught_lexical, ties)
        for row, q in enumerate(block):
            query = " ".join(q.text.split())  # compared with each text's words: a copy may be spaced differently
            allowed = lambda d: d != q.document and query not in " ".join(doc_texts[d].split())  # noqa: E731,B023
            first = _best_allowed(bm25[row], ties, allowed)
            second = _best_allowed(dense[row], ties, lambda d: allowed(d) and d != first)  # noqa: B023
            by_teacher = None if fused is None else (float(fused[row, q.document]), float(fused[row, first]), float(fused[row, second]))
            positive = float(dense[row, q.document]) if own is None else float(own[row])
            found.append(Mined((first, second), by_teacher, (positive, float(dense[row, first]), float(dense[row, second]))))
    return found


def _best_allowed(scores: np.ndarray, ties: np.ndarray, allowed: Callable[[int], bool]) -> int:
    """The best-scored document (ties by `ties`) that `allowed` accepts: the top CANDIDATES_DEPTH first, then the rest."""
    depth = min(CANDIDATES_DEPTH, len(scores))
    top = np.argpartition(-scores, depth - 1)[:depth] if depth < len(scores) else np.arange(len(scores))
    boundary = scores[top].min()
    top = np.flatnonzero(scores >= boundary)  # every document tied with the last of them too: the order is exact
    for candidates in (top, np.arange(len(scores))):
        for d in candidates[np.lexsort((ties[candidates], -scores[candidates]))]:
            if allowed(int(d)):
                return int(d)
    raise ValueError("no document other than the pseudo-query's own to mine a negative from")
