"""Search: the models a user already has fused with BM25 (sentune.search.multi_dense): the unchanged model and every other
model `--model` names (`--model A,B`: A is adapted, B only fused), each document scored by every model's cosine and by
BM25 (fitted on the selection queries), the weights chosen on the selection queries alone, each ranked against the whole
corpus. Nothing is trained. Planned with the hybrid; a run with one model skips it and says how to name another. The
saved index ranks as it was scored: the other models' document vectors beside the index's and the index settings'
`expansion` naming the models and the weights (sentune.search.expansion; sentune.search.folder says where they lie)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.prf import FusedWithUnchanged
from sentune.adaptation.names import UNCHANGED
from sentune.adaptation.records import CandidateRecord
from sentune.core.progress import say
from sentune.search.fusion import Fusion

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context

MULTI_DENSE = "multi-dense"


def other_models(ctx: Context) -> tuple[str, ...]:
    """The models named after the first by --model (AdaptConfig.more_models)."""
    return tuple(getattr(ctx.config, "more_models", ()))


def split_models(model):
    """`--model A,B,...`: the model adapted (A) and the others fused with it (a model given in memory, or one name: none)."""
    from sentune.errors import UserError

    if not isinstance(model, str) or "," not in model:
        return model, ()
    names = [m.strip() for m in model.split(",")]
    if not all(names):
        raise UserError(f"--model {model}: an empty name; give MODEL or MODEL,OTHER,...")
    return names[0], tuple(names[1:])


def model_ref(name: str) -> str:
    """How the index names a model: a local folder by its absolute path (the index may be read from elsewhere), else
    the hub id as given."""
    return str(Path(name).resolve()) if Path(name).is_dir() else name


@dataclass
class MultiDense(FusedWithUnchanged):
    kind: ClassVar[str] = "multi-dense"
    planned_as: ClassVar[str] = MULTI_DENSE

    def describe(self, ctx: Context) -> str:
        return f"fusing BM25 with the unchanged model and {', '.join(other_models(ctx)) or 'no other model'}, the weights chosen on the selection queries"

    def depends_on(self, ctx: Context) -> dict:
        return {"models": [model_ref(m) for m in other_models(ctx)]}  # other models named: scored again

    def expected_seconds(self, ctx: Context, costs) -> float:
        return costs.encode(ctx.eval_texts()) * len(other_models(ctx))  # each other model encodes every query and document (at this model's cost)

    def tables(self, ctx: Context) -> list:
        """The unchanged model's vectors, then each other model's, of every scored text (encoded once per run)."""
        from sentune.adaptation.search_context import as_search
        from sentune.core.models import load_model

        search = as_search(ctx)
        found = [search.untuned_table()]
        for i, name in enumerate(other_models(ctx), start=1):
            found.append(search.table(ctx.vectors_of(load_model(name, device=ctx.device), f"{self.name}/model-{i}")))
        return found

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentune.adaptation.search_context import as_search
        from sentune.search.fusion import QUERY_BLOCK, id_order
        from sentune.search.multi_dense import choose_weights, multi_rank
        from sentune.search.prf import in_blocks, unit
        from sentune.tasks.retrieval import DEPTH, HEADLINE, per_query_metrics

        if not other_models(ctx):
            return {}, self.skip("one model: `--model MODEL,OTHER` names another model to fuse with it and BM25")
        search = as_search(ctx)
        tables, lexical = self.tables(ctx), search.lexical.hybrid()

        def scored(queries, corpus, documents):
            """Each model's cosines and BM25's scores of `corpus` (`documents`: each model's unit vectors of it)."""
            texts, ids = [q.text for q in queries], [d.id for d in corpus]
            position = {doc: i for i, doc in enumerate(ids)}
            dense = [unit(t.of(texts)) @ docs.T for t, docs in zip(tables, documents, strict=True)]
            return dense, lexical.scores(texts, ids), id_order(ids), [position.get(q.id) for q in queries]

        def unit_documents(corpus) -> list[np.ndarray]:
            return [unit(t.of(d.text for d in corpus)) for t in tables]

        queries, collection = search.selection_queries(), search.retrieval_dev().corpus
        documents = unit_documents(collection)

        def blocks():
            for start in range(0, len(queries), QUERY_BLOCK):
                dense, words, _, own = scored(queries[start : start + QUERY_BLOCK], collection, documents)
                yield dense, words, own

        def score(ranked) -> float:
            return 100 * float(per_query_metrics([[collection[i].id for i in row] for row in ranked], queries)[HEADLINE].mean())

        multi, curve = choose_weights(blocks(), id_order([d.id for d in collection]), score, DEPTH)
        say(f"    {self.name}: {multi.label} (selection, whole corpus: {curve[multi.weights]:.2f})")

        def ranker(part_queries, corpus) -> list[list[int]]:
            documents = unit_documents(corpus)  # once per part, not per block of its queries

            def block(queries) -> list[list[int]]:
                part_dense, part_words, part_ties, part_own = scored(queries, corpus, documents)
                return multi_rank(part_dense, part_words, part_ties, multi, DEPTH, part_own)[0]

            return in_blocks(block, part_queries)

        main, bm25 = multi.weights[0], multi.weights[-1]
        # what plain `--system hybrid` readers see (serve's fusion label): the two-system part of the weights
        fusion = Fusion("convex", round(main / (main + bm25), 6) if main + bm25 > 0 else 0.5)
        detail = {
            "setting": f"{multi.label} ({', '.join(['unchanged', *other_models(ctx)])})",
            "weights": multi.to_dict(),
            "models": [model_ref(m) for m in other_models(ctx)],
            "lexical": search.lexical.settings(fitted=True).label,
            "weight_curve": [[list(w), s] for w, s in curve.items()],
            "weight_read_queries": [q.id for q in queries],
        } | self.depends_on(ctx)
        return search.rank_with(ranker), CandidateRecord(self.name, self.kind, source=UNCHANGED, fusion=fusion, detail=detail)

    def expansion(self, ctx: Context) -> dict | None:
        """What the index records of the other models: each one's name and its document vectors (in the index's
        document order, as an array the index build writes into the index), and the weights."""
        import numpy as np

        from sentune.adaptation.search_context import as_search

        record = ctx.records[self.name]
        if record.fusion is None:
            return None
        documents = as_search(ctx).retrieval_dev().corpus
        models = []
        for i, table in enumerate(self.tables(ctx)[1:], start=1):
            models.append({"model": record.detail["models"][i - 1], "vectors": np.asarray(table.of(d.text for d in documents), dtype=np.float32)})
        return {"kind": "multi-dense", "models": models} | record.detail["weights"]
