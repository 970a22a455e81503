"""The query-side search candidate (sentune.adaptation.candidates.query_side) and its method (sentune.methods.query_side):
the query encoder alone trained against fixed document vectors, every document a negative; shipped as a
sentence-transformers Router model (a "query" and a "document" route), whose queries sentune's encoder and index send
through the query route while the index keeps the unchanged model's document vectors."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from sentune.data.beir import Document, Query, RetrievalSet, read_beir_folder
from sentune.data.readers import Source

HERE = Source("toy", 1)


def _router(document_model, query_model):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Router

    return SentenceTransformer(modules=[Router.for_query_document(query_modules=list(query_model), document_modules=list(document_model))], device="cpu")


def _perturbed(model, seed: int = 3):
    """A copy whose weights moved: another query encoder than the document one."""
    other = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=generator))
    return other


def _units(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_the_loss_contrasts_each_query_with_every_document_and_pools_its_positives():
    """L_i = log Σ_j≠own exp(s·cos) − log Σ_{p∈P_i} exp(s·cos), over every document vector (not a batch's), the
    query's own document left out."""
    from sentune.methods.query_side import FixedDocumentsLoss

    rng = np.random.default_rng(0)
    queries, documents = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(9, 4)).astype(np.float32)

    class Fixed(torch.nn.Module):  # the query encoder: row r of `queries` for row index r
        def forward(self, features):
            return {"sentence_embedding": torch.as_tensor(queries)[features["rows"]]}

    positives = [[0], [1, 2], [3], [4, 5, 6], [7]]
    own = [8, -1, 0, -1, 1]
    padded = torch.full((5, 3), -1, dtype=torch.long)
    for i, found in enumerate(positives):
        padded[i, : len(found)] = torch.tensor(found)
    loss = FixedDocumentsLoss(Fixed(), torch.nn.functional.normalize(torch.as_tensor(documents), dim=-1), padded, torch.tensor(own), 20.0)
    batch = [1, 3, 0]  # a batch of three of the five rows: the negatives are still all nine documents
    found = float(loss([{"rows": torch.tensor(batch)}], torch.tensor(batch)))
    cos = 20.0 * _units(queries) @ _units(documents).T
    expected = []
    for i in batch:
        kept = [j for j in range(9) if j != own[i]]
        expected.append(np.log(np.exp(cos[i, kept]).sum()) - np.log(np.exp(cos[i, positives[i]]).sum()))
    assert found == pytest.approx(float(np.mean(expected)), rel=1e-5)
    batch_only = np.mean([np.log(np.exp(cos[i, batch]).sum()) - cos[i, positives[i][0]] for i in batch])  # in-batch negatives
    assert found != pytest.approx(float(batch_only), rel=1e-3)


def test_the_loss_reads_every_document_a_chunk_at_a_time_from_a_float16_memmap_with_its_formulas_value_and_gradient(tmp_path):
    """The partition over every document in chunks (of 1, 4 and more rows than there are: a chunk holding only a
    query's own document among them) from a memory-mapped float16 matrix it never copies: the loss and its gradient
    with respect to the query vectors are those of the formula computed naively on the whole matrix."""
    from sentune.methods.query_side import FixedDocumentsLoss, unit_float16

    rng = np.random.default_rng(1)
    np.save(tmp_path / "documents.npy", unit_float16(rng.normal(size=(11, 6))))
    documents = np.load(tmp_path / "documents.npy", mmap_mode="r")
    start = rng.normal(size=(5, 6)).astype(np.float32)
    positives = [[0], [1, 9], [3], [4, 5, 6], [7]]
    own = [10, -1, 0, -1, 8]  # 10: alone in the last chunk of 1 row (and of 4: rows 8 to 10)
    padded = torch.full((5, 3), -1, dtype=torch.long)
    for i, found in enumerate(positives):
        padded[i, : len(found)] = torch.tensor(found)
    batch = [1, 3, 0, 4]

    def naive() -> tuple[float, np.ndarray]:
        queries = torch.tensor(start, requires_grad=True)
        units = torch.nn.functional.normalize(queries, dim=-1)
        cos = 20.0 * units @ torch.nn.functional.normalize(torch.tensor(np.asarray(documents, dtype=np.float32)), dim=-1).T
        terms = []
        for i in batch:
            kept = [j for j in range(11) if j != own[i]]
            terms.append(torch.logsumexp(cos[i, kept], 0) - torch.logsumexp(cos[i, positives[i]], 0))
        loss = torch.stack(terms).mean()
        loss.backward()
        return loss.item(), queries.grad.numpy()

    expected, expected_grad = naive()

    class Fixed(torch.nn.Module):  # the query encoder: row r of its vectors for row index r
        def __init__(self) -> None:
            super().__init__()
            self.vectors = torch.nn.Parameter(torch.tensor(start))

        def forward(self, features):
            return {"sentence_embedding": self.vectors[features["rows"]]}

    for chunk in (1, 4, 11, 64):
        encoder = Fixed()
        queries = encoder.vectors
        loss = FixedDocumentsLoss(encoder, documents, padded, torch.tensor(own), 20.0, chunk=chunk)
        assert loss.documents is documents  # held by reference: the memory map, never a copy in memory
        found = loss([{"rows": torch.tensor(batch)}], torch.tensor(batch))
        found.backward()
        assert found.item() == pytest.approx(expected, rel=1e-5), chunk
        assert queries.grad is not None and np.isfinite(queries.grad.numpy()).all(), chunk
        np.testing.assert_allclose(queries.grad.numpy(), expected_grad, rtol=1e-4, atol=1e-6, err_msg=f"chunk {chunk}")


def test_router_queries_take_the_query_route_in_the_encoder_and_the_index(tiny_st, tmp_path):
    """sentune's Encoder sends texts by a Router's route (task="query": encode_query's), and a search of an index
    encodes its queries by the query route while the index keeps the document vectors it was built with."""
    from sentence_transformers import SentenceTransformer

    from sentune.core.encode import Encoder
    from sentune.search.build import BuildPlan, build_index
    from sentune.search.index import SearchIndex

    texts = ["a man plays the guitar", "two kids eat food in the park", "the red car is on the street"]
    model = _router(tiny_st, _perturbed(tiny_st))
    documents, queries = model.encode_document(texts), model.encode_query(texts)
    assert not np.allclose(documents, queries, atol=1e-3)  # two routes
    np.testing.assert_allclose(Encoder(model, "model", show_progress=False).encode(texts), documents, atol=1e-5)  # the default route
    np.testing.assert_allclose(Encoder(model, "model", show_progress=False, task="query").encode(texts), queries, atol=1e-5)
    np.testing.assert_allclose(Encoder(tiny_st, "model", show_progress=False, task="query").encode(texts), tiny_st.encode(texts), atol=1e-5)  # one route
    index = tmp_path / "index"  # the model inside it, as an adapt run saves both
    model.save(str(index / "model"))
    docs = [Document(f"d{i}", text, HERE) for i, text in enumerate(texts)]
    loaded = SentenceTransformer(str(index / "model"), device="cpu")
    out = build_index(loaded, "model", docs, index, BuildPlan("dense"), vectors=documents, shared_folder=True)
    np.testing.assert_allclose(np.load(out / "vectors.npy"), documents)
    asked = ["who plays the guitar", "kids in a park", "a red car"]
    hits = SearchIndex.open(out).search([Query(f"q{i}", text, HERE) for i, text in enumerate(asked)], top=3)
    expected = np.argsort(-(_units(model.encode_query(asked)) @ _units(documents).T), axis=1, kind="stable")
    assert [[h.doc_id for h in row] for row in hits] == [[f"d{j}" for j in row] for row in expected]
    scores = _units(model.encode_query(asked)) @ _units(documents).T
    assert [h.score for h in hits[0]] == pytest.approx(sorted(scores[0], reverse=True), abs=1e-5)


def test_a_search_run_runs_the_query_side_and_its_fusion_before_the_two_sided_fine_tune():
    """They need nothing of `supervised`, which re-encodes the corpus for every fold: planned short of what it really
    took, it would spend their minutes first. Both run in the phase before the supervised one (up to the first
    supervised candidate); those built on supervised stay after it."""
    from sentune.adaptation.candidates import parse_methods, plan
    from sentune.adaptation.phases import SUPERVISED_KIND

    after = [c.name for c in plan(parse_methods(None), "mean", reference=False, search=True).after_race]
    first = next(i for i, c in enumerate(plan(parse_methods(None), "mean", reference=False, search=True).after_race) if c.kind == SUPERVISED_KIND)
    assert after[first] == "supervised" and after.index("query-side") < after.index("hybrid-query-side") < first
    assert first < after.index("hybrid-supervised") and first < after.index("hybrid-best")


def test_a_default_search_run_plans_it_at_the_cost_of_its_queries_and_steps_and_its_partition_over_the_corpus(tiny_st):
    """Planned by a search run's defaults (not a pairs run's, nor --no-labels'); its expected seconds: K fold trainings
    of (K - 1)/K of the selection queries' steps and the refit (K times the steps on them all) and one encode of every
    dev and test query, at the step cost sentune/adaptation/step_costs.json gives its recipe and at a query's share of
    the documents' text cost, and each step's partition over every document (linear in the corpus's size)."""
    from types import SimpleNamespace

    from sentune.adaptation.candidates import parse_methods, plan
    from sentune.adaptation.candidates.query_side import QuerySide
    from sentune.adaptation.time_plan import STEP_COSTS, Costs
    from sentune.tasks.user_queries import RankedQueries
    from sentune.training.recipe import load_recipe

    assert "query-side" in [c.name for c in plan(parse_methods(None), "mean", reference=False, search=True).all]
    assert "query-side" not in [c.name for c in plan(parse_methods(None), "mean", reference=False).all]
    assert "query-side" not in [c.name for c in plan(parse_methods(None), "mean", reference=False, search=True, labels=False).all]
    costs = Costs.measured(0.01)
    assert "query-side" in costs.per_batch_text
    from conftest import WORDS

    words = [w for w in dict.fromkeys(WORDS) if w.isalpha()][:10]
    queries = [Query(f"q{i}", f"{a} {b}", HERE, {"d0": 1}) for i, (a, b) in enumerate((a, b) for a in words for b in words)]  # 100 texts of two words

    def expected(documents: int, text: str) -> float:
        corpus = [Document(f"d{i}", text, HERE) for i in range(documents)]
        splits = {
            "dev": [RankedQueries(RetrievalSet(queries[:60], corpus), np.arange(60))],
            "test": [RankedQueries(RetrievalSet(queries[60:], corpus), np.arange(40))],
        }
        task = SimpleNamespace(train_units=lambda: None, documents=corpus, search=True)
        ctx = SimpleNamespace(
            base=tiny_st, inputs=SimpleNamespace(task=task), selection_units=lambda: queries[:30], config=SimpleNamespace(budget=SimpleNamespace(steps=None))
        )
        ctx.scorer = SimpleNamespace(splits=splits)
        return QuerySide("query-side").expected_seconds(ctx, costs)

    recipe = load_recipe("adapt/query-side", check=False)
    steps = recipe.training.epochs * 2  # 30 queries: two batches of 16 a pass
    per_row_document = json.loads(STEP_COSTS.read_text())["recipes"]["query-side"]["per_row_document"]
    assert per_row_document > 0

    def partition(documents: int) -> float:  # every step's softmax over every document vector, 3 fold trainings
        return costs.encode(1) * 3 * steps * recipe.training.batch_size * documents * per_row_document

    assert expected(50, "a man") == pytest.approx(3 * costs.steps(recipe, steps) + costs.encode(100) + partition(50))  # documents as long as queries
    assert expected(50_000, "a man") - expected(50, "a man") == pytest.approx(partition(50_000) - partition(50))  # the corpus's size: the partition only
    long = "the big red car is on the street with a small blue ball and a cat " * 3
    assert expected(50, long) < expected(50, "a man") / 5  # a query costs a fraction of a long document


def _toy(folder: Path, seed: int = 0, n_docs: int = 150, n_queries: int = 120):
    from test_adapt_retrieval import _toy_beir

    return _toy_beir(folder, seed, n_docs, n_queries)


def _ndcg(query_vectors: np.ndarray, document_vectors: np.ndarray, data: RetrievalSet) -> float:
    from sentune.tasks.retrieval import rank
    from sentune.tasks.user_queries import QueryScorer

    scorer = QueryScorer.whole({"held": data})
    return float(scorer.of_ranker(lambda queries, corpus: rank(query_vectors, document_vectors, [d.id for d in corpus]))["held"].mean())


@pytest.mark.slow
def test_query_side_training_lifts_held_out_queries_against_fixed_documents(tiny_model_dir, tmp_path):
    """On a toy where the unchanged query encoder is poor (each query a few words of its document, a random tiny BERT),
    training the query side against the fixed document vectors lifts held-out queries' nDCG@10 (seeded), and the
    documents are never encoded by the trained model."""
    from sentence_transformers import SentenceTransformer

    from sentune.core.encode import Encoder
    from sentune.methods.query_side import FixedDocuments
    from sentune.training.recipe import load_recipe
    from sentune.training.trainer import train_in_memory

    dev = read_beir_folder(_toy(tmp_path / "toy")[0], "dev")
    base = SentenceTransformer(str(tiny_model_dir), device="cpu")
    documents = Encoder(base, "model", show_progress=False).encode([d.text for d in dev.corpus])
    trained_on, held = dev.queries[:70], RetrievalSet(dev.queries[70:], dev.corpus)

    def held_ndcg(model) -> float:
        return _ndcg(Encoder(model, "model", show_progress=False).encode([q.text for q in held.queries]), documents, held)

    recipe = load_recipe("adapt/query-side", check=False)
    training = replace(recipe.training, max_steps=40, eval_steps=40, learning_rate=2e-4, patience=0, checkpoint="last", device="cpu")
    recipe = replace(recipe, model=str(tiny_model_dir), train_data={"kind": "retrieval-set"}, training=training, eval=replace(recipe.eval, dev="none"))
    trained = train_in_memory(recipe, None, data_dir=Path("."), show_progress=False, data=FixedDocuments(trained_on, dev.corpus, vectors=documents)).model
    before, after = held_ndcg(base), held_ndcg(trained)
    assert after > before + 2.0, (before, after)


@pytest.mark.slow
def test_adapt_query_side_is_cross_fitted_encodes_no_document_and_its_index_searches_with_its_router(tiny_model_dir, tmp_path, monkeypatch):
    """`--methods query-side`: three fold trainings and a refit, no document encoded by any of them nor by the saved
    index (the unchanged model's pass encoded them before), shipped as a Router model that plain
    sentence-transformers loads (its documents the unchanged model's vectors, its queries the fine-tuned encoder's),
    and, chosen, saved with an index whose vectors are the unchanged model's and whose search takes the query route."""
    from sentence_transformers import SentenceTransformer

    import sentune.adaptation.select as select
    from sentune.adaptation.candidates.query_side import QuerySide
    from sentune.cli import main
    from sentune.core.encode import Encoder
    from sentune.search.index import SearchIndex

    dev, test = _toy(tmp_path / "toy")
    documents = {d.text for d in read_beir_folder(dev, "dev").corpus}
    encoded: list[tuple[str, str]] = []  # (when: before query-side, during it, or after it, text)
    phase = ["before"]
    original_encode, original_produce, original_ship = Encoder.encode_many, QuerySide.produce, QuerySide.ship
    shipped = {}

    def encode_many(self, sentences):
        encoded.extend((phase[0], s) for s in sentences)
        return original_encode(self, sentences)

    def produce(self, label, ctx):
        phase[0] = "during"
        try:
            return original_produce(self, label, ctx)
        finally:
            phase[0] = "after"

    def ship(self, query_model, ctx):
        shipped["query"] = copy.deepcopy(query_model)
        return original_ship(self, query_model, ctx)

    def decide(*args, **kwargs):  # chosen, so that the run saves its index
        return replace(original_decide(*args, **kwargs), name="query-side")

    original_decide = select.decide
    monkeypatch.setattr(Encoder, "encode_many", encode_many)
    monkeypatch.setattr(QuerySide, "produce", produce)
    monkeypatch.setattr(QuerySide, "ship", ship)
    monkeypatch.setattr(select, "decide", decide)
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out), "--methods", "query-side"]
    assert main(args) == 0
    assert documents <= {text for when, text in encoded if when == "before"}  # the unchanged model's pass encodes them all
    assert not [text for when, text in encoded if when == "during" and text in documents]  # no fold, refit or score encodes one
    assert {text for when, text in encoded if when == "during"}  # (its queries are encoded)
    assert not [text for when, text in encoded if when == "after" and text in documents]  # nor the saved index
    record = json.loads((out / "candidates" / "query-side" / "candidate.json").read_text())
    assert record["trained_on"] == "the selection part (cross-fitted)" and len(record["fold_dev_indices_trained_on"]) == 3
    assert record["documents_encoded"] == 0 and record["recipe"]["method"] == "query-side"
    results = json.loads((out / "results.json").read_text())
    assert results["choice"]["name"] == "query-side" and results["candidates"]["query-side"]["test"]["score"] >= 0
    # plain sentence-transformers loads it as an asymmetric model
    base = SentenceTransformer(str(tiny_model_dir), device="cpu")
    for folder in (out / "candidates" / "query-side" / "model", out / "model"):
        loaded = SentenceTransformer(str(folder), device="cpu")
        texts = sorted(documents)[:5]
        np.testing.assert_allclose(loaded.encode_document(texts), base.encode(texts), atol=1e-5)
        asked = [q.text for q in read_beir_folder(test, "test").queries]
        np.testing.assert_allclose(loaded.encode_query(asked), shipped["query"].encode(asked), atol=1e-5)
        assert not np.allclose(loaded.encode_query(asked), base.encode(asked), atol=1e-4)
    # the index: the unchanged model's document vectors, searched by the query route
    corpus = read_beir_folder(dev, "dev").corpus
    np.testing.assert_allclose(np.load(out / "vectors.npy"), base.encode([d.text for d in corpus]), atol=1e-5)
    queries = read_beir_folder(test, "test").queries
    hits = SearchIndex.open(out).search(queries, top=10)
    from sentune.tasks.retrieval import rank

    expected = rank(shipped["query"].encode([q.text for q in queries]), np.load(out / "vectors.npy"), [d.id for d in corpus], depth=10)
    assert [[h.doc_id for h in row] for row in hits] == [[corpus[i].id for i in row] for row in expected]


def test_serve_embeds_by_the_route_a_request_names(_tiny_st):
    """/v1/embeddings of a Router model: `input_type` "query" gives encode_query's vectors, "document" and none the
    document route's (the Router's default), texts of both routes batched together each by its own; a one-route model
    gives its vectors whatever is named."""
    from fastapi.testclient import TestClient

    import sentune

    texts = ["a man plays the guitar", "a dog runs"]
    model = _router(copy.deepcopy(_tiny_st), _perturbed(copy.deepcopy(_tiny_st)))
    query, document = model.encode_query(texts), model.encode_document(texts)
    assert not np.allclose(query, document, atol=1e-3)  # the routes differ: the check below can tell them apart
    with TestClient(sentune.serve_app(model)) as client:

        def vectors(**route) -> np.ndarray:
            answer = client.post("/v1/embeddings", json={"input": texts, **route})
            assert answer.status_code == 200, answer.text
            return np.array([row["embedding"] for row in answer.json()["data"]])

        np.testing.assert_allclose(vectors(input_type="query"), query, atol=1e-5)
        np.testing.assert_allclose(vectors(input_type="document"), document, atol=1e-5)
        np.testing.assert_allclose(vectors(), document, atol=1e-5)
        refused = client.post("/v1/embeddings", json={"input": texts, "input_type": "passage"})
        assert refused.status_code == 400 and "input_type" in refused.text
    with TestClient(sentune.serve_app(_tiny_st)) as client:
        plain = client.post("/v1/embeddings", json={"input": texts, "input_type": "query"})
        np.testing.assert_allclose(np.array([row["embedding"] for row in plain.json()["data"]]), _tiny_st.encode(texts), atol=1e-5)
