"""The search candidate that trains the query side only (`query-side`): the query encoder fine-tuned on the user's
judged queries against the unchanged model's document vectors, which the run already holds (its untuned pass, the
index's vectors), every document a negative (sentune.methods.query_side; DensePhrases' query-side fine-tuning, Lee
et al., ACL 2021). A fold costs its queries' encodes and its steps, never the corpus's: `supervised`, which tunes
both sides, encodes the selection pool's documents again for every fold it scores and every document for its refit.

Judged as `supervised` is: without --train, cross-fitted over the selection queries (sentune.adaptation.crossfit, the same
folds and seed), each fold's held-out queries encoded by the fold's query encoder and ranked against the selection pool
by the fixed document vectors, as every selection query is ranked; then refit on every selection query for the
confirmation and test queries and the model it ships. With --train, trained once on --train's queries.

It ships as one sentence-transformers model with two routes (sentence_transformers' Router, built as
Router.for_query_document builds one): "query", the fine-tuned copy, and "document", the unchanged model, its default
route. `SentenceTransformer(OUT/model).encode_query` / `encode_document` encode as the run scored, and the run's index
keeps the unchanged model's document vectors (nothing is re-indexed); sentune's search encodes queries by the query
route (sentune.core.encode.Encoder's `task`).

The trainings read the documents' vectors from one float16 file of unit rows in its folder, memory-mapped and removed
once they are done (sentune.methods.query_side's loss reads it a chunk at a time). It keeps, for `hybrid-query-side`,
each fold's vectors of its held-out queries and the shipped model's of every dev and test query."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, cast

from sentune.adaptation.candidates.base import Candidate, PlanSetup
from sentune.adaptation.names import QUERY_SIDE
from sentune.adaptation.records import CandidateRecord, write_record
from sentune.core.progress import say

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.text_table import EmbeddingTable
    from sentune.adaptation.time_plan import Costs
    from sentune.data.tables import Kind

RECIPE = f"adapt/{QUERY_SIDE}"
FIXED_DOCUMENTS = ".documents-float16.npy"  # the trainings' document matrix (fixed_documents), removed once they are done
QUERIES = "queries"  # the candidate store's name for the shipped model's vectors of every dev and test query


@dataclass
class QuerySide(Candidate):
    """`dense` False: `hybrid-best` does not fuse it (a hybrid looks its source's vectors up by text, and this model
    encodes a text one way as a query and another as a document); `hybrid-query-side` does, by route
    (sentune.adaptation.candidates.query_side_hybrid). `tuned` False: wise mixes one model's weights with the unchanged
    model's, and this one is two."""

    kind: ClassVar[str] = QUERY_SIDE
    phase: ClassVar[str] = "after_race"
    dense: ClassVar[bool] = False

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(QUERY_SIDE)] if setup.search and setup.labels and QUERY_SIDE in setup.methods else []

    def describe(self, ctx: Context) -> str:
        return "fine-tuning the query encoder alone on the labels against the unchanged model's document vectors (every document a negative; no re-index)"

    def depends_on(self, ctx: Context) -> dict:
        # what it trains on (--train's queries, or the selection part: None), and the tokens its routes read
        return {"train_sha256": ctx.inputs.train_sha256, "reads_tokens": ctx.base.max_seq_length}

    def training_queries(self, ctx: Context) -> list:
        given = ctx.inputs.task.train_units()
        return list(given) if given is not None else ctx.selection_units()

    def steps_for(self, queries: int, ctx: Context) -> int:
        """Its steps on `queries` training queries: its recipe's epochs, capped by --budget's steps (Context.labelled_recipe)."""
        import math

        from sentune.training.recipe import load_recipe

        recipe = load_recipe(RECIPE, check=False)
        steps = max(1, math.ceil(recipe.training.epochs * math.ceil(queries / recipe.training.batch_size)))
        return min(steps, ctx.config.budget.steps or steps)

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """Its trainings (one on --train; else K fold models on (K - 1)/K of the selection queries each and the refit:
        K times one on them all) and its encodes of every dev and test query; no document is encoded. Its rows are
        queries, and the run's text cost is a document's (time_plan measures it on the documents): both are counted
        at a query's share of a document's cost (query_share). Each step's partition reads every document vector: a
        cost that grows with the corpus and not with the queries' length, counted apart (`per_row_document` of
        step_costs.json: a large corpus makes this candidate far dearer than its few queries suggest)."""
        from sentune.adaptation.crossfit import FOLDS
        from sentune.training.recipe import load_recipe

        recipe = load_recipe(RECIPE, check=False)
        trainings = 1 if ctx.inputs.task.train_units() is not None else FOLDS
        queries = self.training_queries(ctx)
        steps = self.steps_for(len(queries), ctx)
        documents = len(getattr(ctx.inputs.task, "documents", ()))  # a search task's (the only one it is planned for)
        share = query_share(ctx, [q.text for q in queries])
        return share * (trainings * costs.steps(recipe, steps) + costs.encode(len(_query_texts(ctx)))) + trainings * costs.partition(recipe, steps, documents)

    def produce(self, label: str, ctx: Context) -> CandidateRecord:
        say(f"{label} {self.name}: {self.describe(ctx)}")
        started = time.perf_counter()
        documents = self.fixed_documents(ctx)  # the unchanged model's (its untuned pass: no encode), memory-mapped
        record = CandidateRecord(self.name, self.kind)
        recipes: list[dict] = []
        try:
            model, scores = self.trained(documents, record, recipes, ctx)
        finally:
            (self.folder(ctx) / FIXED_DOCUMENTS).unlink(missing_ok=True)  # only the trainings read it
        self.ship(model, ctx)
        # its model's default route is the unchanged model's: its vectors of every scored text, which the saved index
        # takes as its documents' (sentune.adaptation.run._save_index), are the untuned pass's
        ctx.store.vectors(self.name, ctx.untuned_vectors)
        record.detail |= {"setting": RECIPE, "recipe": recipes[-1], "documents_encoded": 0}
        return write_record(self, scores, record, time.perf_counter() - started, label, ctx)

    def trained(self, documents: np.ndarray, record: CandidateRecord, recipes: list[dict], ctx: Context):
        """The model it ships and its scores (the selection part's out of fold), `record` told what it trained on:
        trained on --train's queries, or cross-fitted on the selection queries and refit on them all."""
        from sentune.adaptation.crossfit import FOLDS, fold_rows, out_of_fold
        from sentune.core.memory import release_unreferenced

        if ctx.inputs.task.train_units() is not None:
            model = self.train(self.training_queries(ctx), self.folder(ctx), documents, ctx, recipes)
            record.trained_on, record.dev_indices_trained_on = "train", []
            record.detail["train_units"] = len(self.training_queries(ctx))
            return model, self.scores_of(model, ctx)
        select, units = ctx.inputs.split.select, ctx.selection_units()
        say(f"    {self.name}: cross-fitting on the {len(units)} selection queries: {FOLDS} trainings without one fold each, then one on all")

        def fit(fold: int, rows: np.ndarray):
            release_unreferenced()  # the previous fold's model and its trainer are garbage by now
            return fold, self.train([units[i] for i in rows], ctx.store.fold_folder(self.name, fold), documents, ctx)

        def predict(fitted, held: np.ndarray) -> np.ndarray:
            fold, model = fitted
            return self.score_held(model, [units[i] for i in held], ctx, fold)

        oof = out_of_fold(len(units), FOLDS, ctx.config.seed, fit, predict)
        release_unreferenced()
        model = self.train(units, self.folder(ctx), documents, ctx, recipes)
        scores = self.scores_of(model, ctx)
        scores["dev"][select] = oof  # the selection part's scores: out of fold
        folds = [sorted(int(select[i]) for i in fold_rows(len(units), FOLDS, ctx.config.seed, fold)[0]) for fold in range(FOLDS)]
        record.trained_on, record.dev_indices_trained_on, record.fold_dev_indices_trained_on = "selection", sorted(int(i) for i in select), folds
        record.detail |= {"train_units": len(units), "folds": FOLDS}
        return model, scores

    def fixed_documents(self, ctx: Context) -> np.ndarray:
        """The documents' vectors the trainings contrast with (rows: the corpus), the unchanged model's from the untuned
        pass, as float16 unit rows in a file of the candidate's folder, memory-mapped (sentune.methods.query_side says
        why), written a chunk of rows at a time: beside the run's untuned vectors, never a second float32 copy."""
        import os

        import numpy as np

        from sentune.adaptation.search_context import as_search
        from sentune.methods.query_side import CHUNK, unit_float16

        search = as_search(ctx)
        vectors, rows = search.untuned_vectors(), search.rows()
        kept = [rows.get(d.text) for d in search.retrieval_dev().corpus]
        if any(r is None for r in kept):
            search.document_vectors()  # its one line: a document no query ranks
        found = np.array(kept, dtype=np.int64)
        path = self.folder(ctx) / FIXED_DOCUMENTS
        partial = path.with_name(f".partial-{path.name}")
        out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float16, shape=(len(found), vectors.shape[1]))
        for start in range(0, len(found), CHUNK):
            out[start : start + CHUNK] = unit_float16(vectors[found[start : start + CHUNK]])
        out.flush()
        del out, vectors
        os.replace(partial, path)
        return np.load(path, mmap_mode="r")

    def train(self, queries: list, where: Path, documents: np.ndarray, ctx: Context, recipes: list[dict] | None = None):
        """The query encoder trained on `queries` against the fixed `documents` (where/train.tsv records the queries and
        their judged documents, the file its recipe names); kept in memory only."""
        from sentune.adaptation.search_context import as_search
        from sentune.methods.query_side import FixedDocuments
        from sentune.training.trainer import train_in_memory

        where.mkdir(parents=True, exist_ok=True)
        (where / "train.tsv").write_text("".join(f"{q.id}\t{' '.join(q.text.split())}\t{','.join(q.relevant)}\n" for q in queries), encoding="utf-8")
        data = FixedDocuments(list(queries), as_search(ctx).retrieval_dev().corpus, vectors=documents)
        recipe = ctx.labelled_recipe(RECIPE, where / "train.tsv", len(queries), ctx.config.model, data=data)
        if recipes is not None:
            recipes.append(recipe.to_dict())
        kind = cast("Kind", data)  # a RetrievalSet, a data kind the method takes (sentune.methods.query_side)
        return train_in_memory(recipe, None, data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress, data=kind).model

    def score_held(self, model, queries: list, ctx: Context, fold: int) -> np.ndarray:
        """Held-out selection queries, encoded by the fold's query encoder, against the selection pool's fixed vectors;
        the fold's vectors of them (rows: `queries`) stay in the candidate store (held `vectors`), which the hybrid of
        this candidate reads for its own out-of-fold scores (sentune.adaptation.candidates.query_side_hybrid)."""
        from sentune.adaptation.search_context import as_search

        scorer = as_search(ctx).selection.held_scorer(queries)
        vectors = self.encode_queries(model, [q.text for q in queries], ctx)
        ctx.store.save_held(self.name, fold, "vectors", vectors)
        return scorer.of_ranker(self.ranker(query_table([q.text for q in queries], vectors), ctx))["held"]

    def scores_of(self, model, ctx: Context) -> dict[str, np.ndarray]:
        """Every dev and test query's nDCG@10 ×100, the queries encoded by `model`, the documents by their fixed
        vectors; the queries' vectors stay in the candidate store (query_vectors)."""
        from sentune.adaptation.search_context import as_search

        texts = _query_texts(ctx)
        vectors = ctx.store.vectors(f"{self.name}/{QUERIES}", lambda: self.encode_queries(model, texts, ctx))
        return as_search(ctx).scorer.of_ranker(self.ranker(query_table(texts, vectors), ctx))

    def query_vectors(self, ctx: Context) -> EmbeddingTable:
        """The shipped model's query-route vectors of every dev and test query, looked up by text: those its scoring
        kept, or (a run resumed from one that kept none) encoded again by the saved model's query route."""
        texts = _query_texts(ctx)
        return query_table(texts, ctx.store.vectors(f"{self.name}/{QUERIES}", lambda: self.encode_queries(self.model(ctx), texts, ctx, task="query")))

    def held_vectors(self, ctx: Context, fold: int) -> np.ndarray | None:
        """Fold `fold`'s vectors of its held-out selection queries (rows: the fold's held-out rows, crossfit.fold_rows'
        order), None when it kept none."""
        return ctx.store.held(self.name, fold, "vectors") if ctx.store.has_held(self.name, fold, "vectors") else None

    def encode_queries(self, model, texts: list[str], ctx: Context, task: str | None = None) -> np.ndarray:
        """`texts`' vectors by `model` (the query encoder in training, or the shipped Router's query route: `task`)."""
        from sentune.core.encode import Encoder

        return Encoder(model, "model", show_progress=ctx.config.show_progress, desc=f"{self.name}: encoding the queries", task=task).encode(texts)

    def ranker(self, queries: EmbeddingTable, ctx: Context):
        """Rank a part's documents for its queries: the queries' vectors from `queries`, the documents' the unchanged
        model's (the untuned pass), a query's own document left out."""
        import numpy as np

        from sentune.adaptation.search_context import as_search
        from sentune.tasks.retrieval import rank

        table = as_search(ctx).untuned_table()

        def ranked(part, corpus) -> list[list[int]]:
            query_vectors = queries.of(q.text for q in part) if part else np.zeros((0, queries.vectors.shape[1]), np.float32)
            return rank(query_vectors, table.of(d.text for d in corpus), [d.id for d in corpus], query_ids=[q.id for q in part], skip_same_id=True)

        return ranked

    def ship(self, query_model, ctx: Context) -> None:
        """OUT/candidates/NAME/model: the query encoder and the unchanged model as the two routes of one Router model
        (the document route the default), normalised as the unchanged model is."""
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Router

        from sentune.modules.build import save_atomic

        def routed(model) -> list:
            modules = list(model)
            return modules[:-1] if type(modules[-1]).__name__ == "Normalize" else modules

        base = copy.deepcopy(ctx.base)  # the run's unchanged model stays the run's: the saved one gets its own modules
        router = Router.for_query_document(query_modules=routed(query_model), document_modules=routed(base))
        tail = [Normalize()] if type(list(ctx.base)[-1]).__name__ == "Normalize" else []
        model = SentenceTransformer(modules=[router, *tail], device=str(ctx.base.device))
        model.max_seq_length = ctx.base.max_seq_length  # both routes read as far as the unchanged model
        save_atomic(model, self.folder(ctx) / "model")


def query_share(ctx: Context, queries: list[str]) -> float:
    """What encoding a query costs beside one of the documents the run measured its text cost on (the first
    time_plan.PROBE_TEXTS of them): the ratio of their mean token counts, each cut at the model's length (at most 1;
    tokenizing only)."""
    from sentune.adaptation.time_plan import PROBE_TEXTS

    tokenizer, limit = ctx.base.tokenizer, ctx.base.max_seq_length or None

    def mean_tokens(texts: list[str]) -> float:
        ids = tokenizer(texts, add_special_tokens=True, truncation=limit is not None, max_length=limit)["input_ids"] if texts else []
        return sum(len(row) for row in ids) / max(1, len(ids))

    task = ctx.inputs.task
    assert task.search  # planned for search runs only
    documents = list(dict.fromkeys(d.text for d in task.documents))[:PROBE_TEXTS]
    return min(1.0, mean_tokens(queries) / max(1.0, mean_tokens(documents)))


def query_table(texts: list[str], vectors: np.ndarray) -> EmbeddingTable:
    """Query vectors (rows: `texts`) looked up by text."""
    from sentune.adaptation.text_table import EmbeddingTable, TextRows

    return EmbeddingTable(TextRows(texts), vectors)


def _query_texts(ctx: Context) -> list[str]:
    """Every dev and test query's text the run's scorer ranks (the selection part's with the confirmation's)."""
    return list(dict.fromkeys(q.text for parts in ctx.scorer.splits.values() for part in parts for q in part.data.queries))
