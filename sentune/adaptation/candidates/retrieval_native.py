"""Search: candidates trained for retrieval without labels, on pseudo-queries built from the documents
(sentune.adaptation.pseudo_queries) with hard negatives mined by BM25 and by the unchanged model:

- `ict` and `crop` (PseudoQueryTrained): MultipleNegativesRankingLoss (sentune.methods.mnrl's mnrl-hard-negatives) on
  Inverse Cloze Task or independent-cropping pairs, each with its two mined negatives;
- `hybrid-distill` (HybridDistill): MarginMSE (sentune.methods.margin_mse) on ICT pseudo-queries against their
  passage (as `ict`'s: the document without the query sentence), the hybrid as teacher: BM25 (fitted on the selection
  queries, the hybrids' BM25) + the unchanged model fused at the weight chosen on the selection queries
  (LexicalService.choose_fusion_weight, as `hybrid` chooses it), margin = fused(q, passage) − fused(q, negative), the
  passage standing in for its document in the corpus. Its negatives are mined as `ict`'s, by the fixed BM25.

Each is one training by the one trainer (sentune.training.trainer.train_in_memory), a recipe fixed in advance: the
recipe's steps, or --budget's (STEPS: more pseudo-queries, as many rows as steps × batch; GPL trains for thousands of
steps, which a GPU affords), the last step kept, no evaluation while it trains (each
would encode the selection pool again, minutes on a real corpus, as for the supervised search candidate). It is then
scored and chosen, confirmed or not, like every candidate (sentune.adaptation.decide); it is dense, so `hybrid-best` may
fuse it with BM25, and tuned, so wise may interpolate it. None trains on a dev query: only `hybrid-distill`'s teacher
weight reads the selection queries (their ids are in its record), as `hybrid`'s does."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup, WithRun
from sentune.adaptation.names import CROP, HYBRID_DISTILL, ICT
from sentune.adaptation.records import CandidateRecord, write_record
from sentune.core.progress import say

if TYPE_CHECKING:
    from sentune.adaptation.context import Context
    from sentune.adaptation.pseudo_queries import Mined, PseudoQuery, Teacher
    from sentune.adaptation.time_plan import Costs

TRAINING_FILE = "train.tsv"


@dataclass
class PseudoQueryTrained(WithRun):
    """`ict` or `crop` (its name is its view of the documents and its recipe, adapt/NAME.yaml)."""

    kind: ClassVar[str] = "retrieval-native"
    phase: ClassVar[str] = "after_race"
    tuned: ClassVar[bool] = True
    names: ClassVar[tuple[str, ...]] = (ICT, CROP)

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(name) for name in cls.names if setup.search and name in setup.methods]

    @property
    def view(self) -> str:
        return self.name

    def recipe_name(self) -> str:
        return f"adapt/{self.name}"

    def describe(self, ctx: Context) -> str:
        return f"training on {self.view.upper()} pseudo-queries from the documents, hard negatives from BM25 and the unchanged model ({self.recipe_name()})"

    def planned_steps(self, ctx: Context) -> tuple[int, int]:
        """(steps, batch size): --budget's steps when given, else the recipe's (sized for two CPU cores): its pseudo-
        queries are built to fill them, so more steps train on more of the corpus, not on the same rows again."""
        from sentune.training.recipe import load_recipe

        training = load_recipe(self.recipe_name(), check=False).training
        return ctx.config.budget.steps or training.max_steps, training.batch_size

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """Encoding its pseudo-queries (to mine with the unchanged model), its training steps, and its scoring."""
        from sentune.training.recipe import load_recipe

        steps, batch = self.planned_steps(ctx)
        return costs.encode(steps * batch) + costs.steps(load_recipe(self.recipe_name(), check=False), steps) + self.scoring_seconds(ctx, costs)

    def teacher(self, ctx: Context) -> tuple[Teacher, list[str]] | None:
        """The hybrid that scores the margins, and the query ids its weight read (None: no teacher)."""
        return None

    def training_rows(self, queries: list[PseudoQuery], mined: list[Mined], doc_texts: list[str]) -> list[tuple[str, ...]]:
        """(query, its passage, its two negatives) per pseudo-query."""
        return [(q.text, q.positive, *(doc_texts[d] for d in m.negatives)) for q, m in zip(queries, mined, strict=True)]

    def build(self, ctx: Context, limit: int) -> tuple[list[tuple[str, ...]], dict]:
        """The training rows (at most `limit`) and what the record says of them."""
        import numpy as np

        from sentune.adaptation.pseudo_queries import BUILDERS, mine
        from sentune.adaptation.search_context import as_search
        from sentune.core.encode import Encoder
        from sentune.search.fusion import id_order

        search = as_search(ctx)
        documents = search.retrieval_dev().corpus
        ids, doc_texts = [d.id for d in documents], [d.text for d in documents]
        queries = BUILDERS[ICT if self.view == HYBRID_DISTILL else self.view](documents, limit, ctx.config.seed)
        if not queries:
            return [], {}
        doc_vectors = search.document_vectors()
        desc = f"{self.name}: encoding {len(queries)} pseudo-queries to mine negatives"
        query_vectors = Encoder(ctx.base, "model", show_progress=ctx.config.show_progress, desc=desc).encode([q.text for q in queries])
        teacher = self.teacher(ctx)
        passage_vectors = None
        if teacher is not None:  # the teacher scores each passage as the student sees it
            desc = f"{self.name}: encoding {len(queries)} pseudo-query passages for the teacher"
            passage_vectors = Encoder(ctx.base, "model", show_progress=ctx.config.show_progress, desc=desc).encode([q.positive for q in queries])
        lexical = search.lexical.ranker()  # the fixed BM25 mines, as for the supervised candidate: it read no query
        mined = mine(
            queries,
            doc_texts,
            id_order(ids),
            lambda texts: lexical.scores(texts, ids),
            query_vectors,
            doc_vectors,
            teacher[0] if teacher else None,
            passage_vectors,
        )
        rows = self.training_rows(queries, mined, doc_texts)
        about: dict = {
            "pseudo_queries": len(queries),
            "pseudo_query_documents": len({q.document for q in queries}),
            "pseudo_query_words": float(np.mean([len(q.text.split()) for q in queries])),
        }
        if teacher is not None:
            from sentune.adaptation.pseudo_queries import teacher_scale

            margins = np.array([m.margins() for m in mined])
            about |= {
                "teacher": teacher[0].fusion.label,
                "teacher_weight_read_queries": teacher[1],
                "mean_margins": [float(x) for x in margins.mean(axis=0)],  # before teacher_scale
                "teacher_scale": teacher_scale(mined),
            }
        return rows, about

    def produce(self, label: str, ctx: Context) -> CandidateRecord:
        """Pseudo-queries and their negatives (OUT/candidates/NAME/train.tsv), one training saved as
        OUT/candidates/NAME/run, then its scores; a run killed before the record is written trains it again whole."""
        from sentune.adaptation.candidates.supervised import tuples_as_written
        from sentune.training.trainer import train_in_memory

        say(f"{label} {self.name}: {self.describe(ctx)}")
        started = time.perf_counter()
        folder = self.folder(ctx)
        for left in list(folder.iterdir()):  # what a killed attempt left
            shutil.rmtree(left) if left.is_dir() else left.unlink()
        steps, batch = self.planned_steps(ctx)
        rows, about = self.build(ctx, steps * batch)
        if not rows:
            return write_record(self, {}, self.skip(f"no document gives a {self.view} pseudo-query (see sentune.adaptation.pseudo_queries)"), 0.0, label, ctx)
        path = folder / TRAINING_FILE
        path.write_text("".join("\t".join(" ".join(field.split()) for field in row) + "\n" for row in rows), encoding="utf-8")
        data = tuples_as_written(rows)  # the file records them; the trainer receives them
        recipe = ctx.labelled_recipe(self.recipe_name(), path, len(rows), data=data)
        say(f"    {self.name}: {len(rows)} pseudo-queries from {about['pseudo_query_documents']} documents, {recipe.training.max_steps} steps")
        trained = train_in_memory(recipe, self.run_folder(ctx), data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress, data=data)
        scores = ctx.scorer.of_vectors(ctx.vectors_of(trained.model, self.name))  # kept: a hybrid of this model reads them
        record = CandidateRecord(self.name, self.kind, run=str(self.run_folder(ctx).relative_to(ctx.out)))
        record.dev_indices_trained_on = []  # pseudo-queries from the documents: no dev query is a training row
        record.detail = {"setting": self.recipe_name(), "recipe": recipe.to_dict(), "training_seconds": trained.training_seconds, **about}
        return write_record(self, scores, record, time.perf_counter() - started, label, ctx)


@dataclass
class HybridDistill(PseudoQueryTrained):
    """`hybrid-distill`: the student learns the hybrid's margins on ICT pseudo-queries against their passage."""

    kind: ClassVar[str] = "retrieval-native"
    names: ClassVar[tuple[str, ...]] = (HYBRID_DISTILL,)

    def depends_on(self, ctx: Context) -> dict:
        # a record trained on unscaled margins (teacher_scale), or taught on whole documents, is redone
        return super().depends_on(ctx) | {"teacher_margins": "scaled", "teacher_positive": "passage"}

    def describe(self, ctx: Context) -> str:
        return f"distilling the hybrid (BM25 + the unchanged model, the weight chosen on the selection queries) on ICT pseudo-queries ({self.recipe_name()})"

    def teacher(self, ctx: Context) -> tuple[Teacher, list[str]] | None:
        """`hybrid`'s system: its weight chosen as `hybrid` chooses it, fusing the BM25 it was chosen with (fitted)."""
        import numpy as np

        from sentune.adaptation.pseudo_queries import Teacher
        from sentune.adaptation.search_context import as_search
        from sentune.search.lexical import document_texts, weighted_text

        search = as_search(ctx)
        fusion, curve, read = search.lexical.choose_fusion_weight(search.untuned_table())
        say(f"    {self.name}: teacher BM25 + unchanged, α = {fusion.alpha:g} (selection, whole corpus: {curve[fusion.alpha]:.2f})")
        documents = search.retrieval_dev().corpus
        lexical, ids = search.lexical.hybrid(), [d.id for d in documents]
        bm25 = lexical.index.with_statistics(document_texts(documents, lexical.index.settings))  # the fit's index may not know them

        def passage_lexical(queries: list[PseudoQuery]) -> np.ndarray:  # a passage holds its document's title in front, once
            return bm25.passage_scores([q.text for q in queries], [weighted_text(documents[q.document].title, q.positive, bm25.settings) for q in queries])

        return Teacher(fusion, lambda texts: lexical.scores(texts, ids), passage_lexical), read

    def training_rows(self, queries: list[PseudoQuery], mined: list[Mined], doc_texts: list[str]) -> list[tuple[str, ...]]:
        """(query, its passage, its two negatives, the teacher's two margins on the student's scale) per pseudo-query
        (sentune.adaptation.pseudo_queries.teacher_scale): the passage is ICT's (its document without the query sentence,
        but in KEEP_SENTENCE of them), the text the teacher scored, so the query's own copy of itself is taught only
        in that share."""
        from sentune.adaptation.pseudo_queries import teacher_scale

        scale = teacher_scale(mined)
        return [
            (q.text, q.positive, *(doc_texts[d] for d in m.negatives), *(f"{scale * x:.6f}" for x in m.margins())) for q, m in zip(queries, mined, strict=True)
        ]
