"""The retrieval-native adapt candidates (sentune.adaptation.candidates.retrieval_native): pseudo-queries from the documents
(sentune.adaptation.pseudo_queries), their mined negatives, MarginMSE against its formula, and the candidates in a tiny
search run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import naive_bm25

from sentune.adaptation.pseudo_queries import CROP_PASSAGE_WORDS, ICT_WORDS, PseudoQuery, Teacher, crop, ict, mine
from sentune.data.beir import Document
from sentune.data.readers import Source
from sentune.search.fusion import Fusion, id_order

HERE = Source("toy", 1)


def _documents(rng, n=40, duplicate=True):
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()
    sentence = lambda: " ".join(rng.choice(words, size=int(rng.integers(5, 12)))).capitalize() + "."  # noqa: E731
    docs = [Document(f"d{i:02d}", f"Title {i}. " + " ".join(sentence() for _ in range(int(rng.integers(2, 6)))), HERE, f"Title {i}.") for i in range(n)]
    if duplicate:  # a second copy of a document: never a negative of a pseudo-query from the first
        docs.append(Document("zz-copy", docs[3].text, HERE, docs[3].title))
    return docs


def test_ict_queries_are_body_sentences_left_out_of_their_passage_by_the_stated_rule():
    from sentune.data.passages import sentences

    docs = _documents(np.random.default_rng(0))
    found = ict(docs, limit=60, seed=5)
    assert len(found) == 60 and found == ict(docs, limit=60, seed=5) and found != ict(docs, limit=60, seed=6)
    per_document: dict[int, list[str]] = {}
    kept = 0
    for q in found:
        doc = docs[q.document]
        body = sentences(doc.text[len(doc.title) :])
        assert q.text in body and ICT_WORDS[0] <= len(q.text.split()) <= ICT_WORDS[1]
        assert q.positive.startswith(doc.title)  # the title stays in front
        kept += q.text in q.positive
        if q.text not in q.positive:  # removed: the rest of the body, in order
            assert q.positive == " ".join([doc.title, *(s for s in body if s != q.text)])
        per_document.setdefault(q.document, []).append(q.text)
    assert kept < len(found) / 3  # kept in place in a tenth, by the rule
    assert all(len(set(v)) == len(v) for v in per_document.values())  # a document's rounds take different sentences
    # one round gives each document one query before any gets a second
    first_round = [q for q in found if q.id.endswith("-0")]
    assert len(first_round) == len({q.document for q in first_round}) == len({q.document for q in found})


def test_crop_queries_are_a_short_span_and_a_longer_span_of_the_same_document():
    docs = _documents(np.random.default_rng(1))
    found = crop(docs, limit=100, seed=2)
    assert len(found) == 100 and found == crop(docs, limit=100, seed=2)
    for q in found:
        words = docs[q.document].text.split()
        text = " ".join(words)
        n = len(words)
        assert q.text in text and q.positive in text
        assert 4 <= len(q.text.split()) <= min(16, n // 4) and min(n // 2, CROP_PASSAGE_WORDS) <= len(q.positive.split()) <= CROP_PASSAGE_WORDS


def _naive_best(scores, ids, allowed):
    order = sorted(range(len(ids)), key=lambda d: (-scores[d], ids[d]))
    return next(d for d in order if allowed(d))


def test_mined_negatives_are_each_rankings_best_other_document_never_the_pseudo_querys_own():
    rng = np.random.default_rng(4)
    docs = _documents(rng)
    texts, ids = [d.text for d in docs], [d.id for d in docs]
    queries = ict(docs, limit=80, seed=1) + crop(docs, limit=80, seed=1)
    bm25 = rng.integers(0, 4, size=(len(queries), len(docs))).astype(float)  # ties everywhere: the id order breaks them
    for row, q in enumerate(queries):
        bm25[row, q.document] = 9.0  # its own document first, as BM25 would put it
        if q.document == 3:
            bm25[row, len(docs) - 1] = 8.0  # ... then its copy
    asked = [0]  # mine asks for the queries' BM25 scores block after block, in order (two may share a text)

    def lexical(batch):
        start = asked[0]
        asked[0] += len(batch)
        assert [q.text for q in queries[start : asked[0]]] == batch
        return bm25[start : asked[0]]

    query_vectors, doc_vectors = rng.normal(size=(len(queries), 6)), rng.normal(size=(len(docs), 6))
    for row, q in enumerate(queries):
        query_vectors[row] = doc_vectors[q.document]  # the unchanged model's best is its own document too
    alpha = 0.35
    teacher_bm25 = {q.text: rng.random(len(docs)) for q in queries}  # the teacher fuses another BM25 than the one that mines (hybrid-distill's: fitted)
    passage_bm25 = {q.id: 3 * rng.random() for q in queries}  # the teacher's BM25 of each passage, a text outside the corpus
    teacher = Teacher(
        Fusion("convex", alpha), lambda batch: np.stack([teacher_bm25[t] for t in batch]), lambda block: np.array([passage_bm25[q.id] for q in block])
    )
    passage_vectors = rng.normal(size=(len(queries), 6))
    with pytest.raises(ValueError, match="passage_vectors"):
        mine(queries, texts, id_order(ids), lexical, query_vectors, doc_vectors, teacher)
    asked[0] = 0
    mined = mine(queries, texts, id_order(ids), lexical, query_vectors, doc_vectors, teacher, passage_vectors)
    unit = lambda v: (v - v.min()) / (v.max() - v.min())  # noqa: E731
    for row, (q, m) in enumerate(zip(queries, mined, strict=True)):
        allowed = lambda d: d != q.document and q.text not in texts[d]  # noqa: E731,B023
        cos = doc_vectors @ query_vectors[row] / np.linalg.norm(doc_vectors, axis=1) / np.linalg.norm(query_vectors[row])
        first = _naive_best(bm25[row], ids, allowed)
        second = _naive_best(cos, ids, lambda d: allowed(d) and d != first)  # noqa: B023
        assert m.negatives == (first, second)
        negatives = {texts[d] for d in m.negatives}
        assert q.document not in m.negatives and texts[q.document] not in negatives and not any(q.text in t for t in negatives)
        assert q.text not in negatives and (q.document != 3 or len(docs) - 1 not in m.negatives)
        # the hybrid's score by its formula, the passage standing in for its document (its cosine and BM25 in that column)
        own_cos = passage_vectors[row] @ query_vectors[row] / np.linalg.norm(passage_vectors[row]) / np.linalg.norm(query_vectors[row])
        taught_cos, taught_bm25 = cos.copy(), teacher_bm25[q.text].copy()
        taught_cos[q.document], taught_bm25[q.document] = own_cos, passage_bm25[q.id]
        fused = alpha * unit(taught_cos) + (1 - alpha) * unit(taught_bm25)
        own = fused[q.document]
        assert m.margins() == pytest.approx((own - fused[first], own - fused[second]), abs=1e-6)
        assert m.dense_margins() == pytest.approx((own_cos - cos[first], own_cos - cos[second]), abs=1e-5)


def test_a_corpus_of_one_document_has_nothing_to_mine():
    only = Document("d0", "One sentence here is fine. Another sentence follows it.", HERE)
    q = PseudoQuery("d0#ict-0", "Another sentence follows it.", "One sentence here is fine.", 0)
    with pytest.raises(ValueError, match="no document other than"):
        mine([q], [only.text], id_order(["d0"]), lambda t: np.ones((len(t), 1)), np.ones((1, 3)), np.ones((1, 3)))


def test_margin_mse_equals_its_formula(tiny_st):
    import torch

    from sentune.methods.margin_mse import build_margin_mse_loss

    rng = np.random.default_rng(0)
    q, p, n1, n2 = (rng.normal(size=(5, 8)) for _ in range(4))
    margins = rng.normal(scale=0.3, size=(5, 2))
    loss = build_margin_mse_loss(tiny_st, {}, None)
    found = loss.compute_loss_from_embeddings([torch.tensor(x) for x in (q, p, n1, n2)], torch.tensor(margins)).item()
    cos = lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)  # noqa: E731
    naive = np.mean([((cos(q, p) - cos(q, n)) - margins[:, j]) ** 2 for j, n in enumerate((n1, n2))])
    assert found == pytest.approx(naive, rel=1e-6)


def test_the_hybrid_of_the_best_dense_candidate_may_fuse_a_retrieval_native_one():
    from types import SimpleNamespace

    from sentune.adaptation.candidates import Hybrid, HybridDistill, PseudoQueryTrained, Unchanged
    from sentune.adaptation.records import CandidateRecord

    best = Hybrid("hybrid-best", "best")
    candidates = [Unchanged("unchanged"), PseudoQueryTrained("ict"), PseudoQueryTrained("crop"), HybridDistill("hybrid-distill")]
    records = [
        CandidateRecord("unchanged", "unchanged", dev_score=63.0),
        CandidateRecord("ict", "retrieval-native", dev_score=64.0, dev_indices_trained_on=[]),
        CandidateRecord("crop", "retrieval-native", dev_score=62.0, dev_indices_trained_on=[]),
        CandidateRecord("hybrid-distill", "retrieval-native", dev_score=65.0, dev_indices_trained_on=[]),
    ]
    ctx = SimpleNamespace(records={r.name: r for r in records}, candidate=lambda name: next(c for c in candidates if c.name == name))
    assert all(c.dense and c.tuned and c.eligible for c in candidates[1:])
    assert best.source(ctx) == "hybrid-distill"
    assert best.depends_on(ctx) == {"fuses": "hybrid-distill 65.0"}
    ctx.records["hybrid-distill"].dev_score = 60.0
    assert best.source(ctx) == "ict"
    # a record made when another candidate was the best is not read back (a resumed run that adds wise, say)
    made_then = CandidateRecord("hybrid-best", "hybrid", source="hybrid-distill", detail={"fuses": "hybrid-distill 65.0"})
    assert not best._current(made_then, ctx)
    assert best._current(CandidateRecord("hybrid-best", "hybrid", source="ict", detail=best.depends_on(ctx)), ctx)
    for record in records[1:]:
        record.dev_score = 50.0
    assert best.source(ctx) is None and best.depends_on(ctx) == {"fuses": None}
    assert Hybrid("hybrid").depends_on(ctx) == {}


def test_the_expected_seconds_are_mining_training_and_scoring_at_the_runs_costs():
    from types import SimpleNamespace

    from sentune.adaptation.candidates import HybridDistill, PseudoQueryTrained
    from sentune.adaptation.time_plan import Costs
    from sentune.training.recipe import load_recipe

    costs = Costs(0.01, {"mnrl-hard-negatives": 20.0})  # the retrieval-native recipes are not in the table: the heaviest's weight
    for steps in (None, 5, 400):  # --budget's steps replace the recipe's, below or above them
        ctx = SimpleNamespace(config=SimpleNamespace(budget=SimpleNamespace(steps=steps)), eval_texts=lambda: 1000)
        for candidate in (PseudoQueryTrained("ict"), PseudoQueryTrained("crop"), HybridDistill("hybrid-distill")):
            training = load_recipe(f"adapt/{candidate.name}", check=False).training
            planned = steps or training.max_steps
            naive = 0.01 * planned * training.batch_size + planned * 20.0 * training.batch_size * 0.01 + 0.01 * 1000
            assert candidate.expected_seconds(ctx, costs) == pytest.approx(naive)


def test_the_candidates_are_planned_for_search_runs_only():
    from sentune.adaptation.candidates import parse_methods, plan

    methods = parse_methods("ict,crop,hybrid-distill,wise")
    search = [c.name for c in plan(methods, "mean", reference=False, search=True).all]
    assert search == ["unchanged", "ict", "crop", "hybrid-distill", "wise", "bm25", "bm25-unstemmed", "bm25-fitted"]  # after the race, before wise
    assert [c.name for c in plan(methods, "mean", reference=False, search=False).all] == ["unchanged", "wise"]
    # asked for by name only: a search run without --methods has none of them, and says so in --methods' help
    default = [c.name for c in plan(parse_methods(None), "mean", reference=False, search=True).all]
    assert "hybrid" in default and not {"ict", "crop", "hybrid-distill"} & set(default)


def _naive_teacher_margins(rows, sources, corpus, model_dir, alpha, settings) -> np.ndarray:
    """Per training row (query, its passage, two negatives, ...) and the document it came from: α · minmax(cosine) +
    (1 − α) · minmax(BM25) over every document, the passage in its document's place (BM25 by its formula with the
    collection's statistics and `settings`), the passage's minus each negative's; every margin then times the mean
    absolute cosine margin over the mean absolute fused one (the student's scale). The toy's documents have no titles
    to weight."""
    from sentence_transformers import SentenceTransformer

    from sentune.search.lexical import LexicalIndex

    assert not any(d.title for d in corpus)
    bm25 = LexicalIndex.of_documents(corpus, settings)
    collection = bm25.tokens([d.text for d in corpus])
    model = SentenceTransformer(str(model_dir), device="cpu")
    unit = lambda v: (v - v.min()) / (v.max() - v.min())  # noqa: E731
    normed = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    docs = normed(model.encode([d.text for d in corpus]))
    position = {" ".join(d.text.split()): i for i, d in enumerate(corpus)}
    found, cosine_margins = [], []
    for line, source in zip(rows.read_text().splitlines(), sources, strict=True):
        query, passage, first, second = line.split("\t")[:4]
        q = normed(model.encode([query]))[0]
        cosine, lexical = docs @ q, bm25.scores([query])[0].astype(np.float64)
        cosine[source] = normed(model.encode([passage]))[0] @ q
        lexical[source] = naive_bm25(bm25.tokens([query])[0], bm25.tokens([passage])[0], collection, settings.k1, settings.b)
        fused = alpha * unit(cosine) + (1 - alpha) * unit(lexical)
        found.append([fused[source] - fused[position[negative]] for negative in (first, second)])
        cosine_margins.append([cosine[source] - cosine[position[negative]] for negative in (first, second)])
    return np.array(found) * np.abs(cosine_margins).mean() / np.abs(found).mean()


@pytest.mark.slow
def test_the_candidates_run_in_a_tiny_search_adapt_run(tiny_model_dir, tmp_path, monkeypatch):
    from dataclasses import replace

    from test_adapt_retrieval import _toy_beir

    from sentune.adaptation.decide import split_dev
    from sentune.cli import main
    from sentune.data.beir import read_beir_folder
    from sentune.search import lexical_fit
    from sentune.search.lexical import LexicalSettings

    fit_lexical = lexical_fit.fit_lexical
    forced = LexicalSettings(k1=0.9, b=0.4)  # the fit's choice, made other than the fixed settings: the teacher's BM25 is then told apart
    monkeypatch.setattr(lexical_fit, "fit_lexical", lambda *args, **kwargs: replace(fit_lexical(*args, **kwargs), settings=forced, index=None))
    dev, test = _toy_beir(tmp_path / "toy")
    out = tmp_path / "run"
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--dev", str(dev), "--test", str(test), "--out", str(out)]
    assert main([*args, "--methods", "ict,crop,hybrid-distill,wise,hybrid", "--budget", "3"]) == 0
    from sentence_transformers import SentenceTransformer

    reads = SentenceTransformer(str(tiny_model_dir), device="cpu").max_seq_length
    results = json.loads((out / "results.json").read_text())["candidates"]
    data = read_beir_folder(out / "data" / "dev", "dev")
    split = split_dev(np.zeros(len(data.queries)))
    texts = {d.text for d in data.corpus}
    for name in ("ict", "crop", "hybrid-distill"):
        record = results[name]
        assert record["kind"] == "retrieval-native" and record["dense"] and record["select"] is not None, record
        assert record["recipe"]["training"]["max_steps"] == 3 and record["setting"] == f"adapt/{name}"
        assert record["dev_indices_trained_on"] == [] and record["run"] == f"candidates/{name}/run"
        assert (out / "candidates" / name / "run" / "model").is_dir() and (out / "candidates" / name / ".vectors.npy").is_file()
        # trained on 128-token rows, it reads (is scored and handed back at) the unchanged model's length: a record
        # without reads_tokens is produced again
        saved = SentenceTransformer(str(out / "candidates" / name / "run" / "model"), device="cpu")
        assert record["reads_tokens"] == saved.max_seq_length == reads != record["recipe"]["training"]["max_seq_length"]
        rows = [line.split("\t") for line in (out / "candidates" / name / "train.tsv").read_text().splitlines()]
        assert len(rows) == record["pseudo_queries"] == 3 * record["recipe"]["training"]["batch_size"]
        dev_queries = {q.text for q in data.queries}
        for query, positive, first, second, *margins in rows:
            assert first in texts and second in texts and first != second and query not in first and query not in second
            assert query not in dev_queries  # built from the documents, never a dev query
            assert len(margins) == (2 if name == "hybrid-distill" else 0)
            assert positive not in (first, second)  # hybrid-distill's too: its teacher scores the passage the student sees
    # the teacher's weight read the selection queries only, as `hybrid`'s
    distill, hybrid = results["hybrid-distill"], results["hybrid"]
    selection = [data.queries[i].id for i in split.select]
    assert distill["teacher_weight_read_queries"] == hybrid["weight_read_queries"] == selection
    test_ids = {q.id for q in read_beir_folder(test, "test").queries}
    assert not set(distill["teacher_weight_read_queries"]) & ({data.queries[i].id for i in split.confirm} | test_ids)
    assert distill["teacher"] == hybrid["setting"] and distill["teacher_margins"] == "scaled"  # an unscaled record would be redone
    assert distill["teacher_positive"] == "passage"  # as would one taught on whole documents
    # its margins are the hybrid's, by its formula: the fitted BM25 (as `hybrid` fuses it) and the unchanged model's cosines
    assert LexicalSettings(**hybrid["lexical_fit"]["settings"]) == forced
    rows = out / "candidates" / "hybrid-distill" / "train.tsv"
    margins = np.array([[float(x) for x in line.split("\t")[4:]] for line in rows.read_text().splitlines()])
    # its rows are ICT's pseudo-queries and their passages (not their documents), built by the stated rule at --seed 0
    built = ict(data.corpus, len(margins), seed=0)
    assert [" ".join(f.split()) for q in built for f in (q.text, q.positive)] == [f for line in rows.read_text().splitlines() for f in line.split("\t")[:2]]
    assert any(" ".join(q.text.split()) not in " ".join(q.positive.split()) for q in built)
    sources = [q.document for q in built]
    naive = {
        name: _naive_teacher_margins(rows, sources, data.corpus, tiny_model_dir, hybrid["fusion"]["alpha"], settings)
        for name, settings in (("fitted", forced), ("fixed", LexicalSettings()))
    }
    np.testing.assert_allclose(margins, naive["fitted"], atol=1e-4)
    # the fixed BM25's margins are others, by more than the fitted ones' tolerance: the check tells the two apart
    assert np.abs(margins - naive["fixed"]).max() > 0.05 * np.abs(margins).max() > 1e-4
    # wise may take any of them as its tuned end; hybrid-best fuses the best dense one, or says the unchanged model is
    assert results["wise"].get("source") in ("ict", "crop", "hybrid-distill") or results["wise"].get("skipped")
    best_dense = max((n for n in ("unchanged", "ict", "crop", "hybrid-distill", "wise")), key=lambda n: results[n]["dev_score"])
    assert results["hybrid-best"].get("source") == (None if best_dense == "unchanged" else best_dense)


def test_teacher_scale_is_the_mean_absolute_cosine_margin_over_the_teachers():
    from sentune.adaptation.pseudo_queries import Mined, teacher_scale

    mined = [Mined((1, 2), (0.9, 0.1, 0.5), (0.6, 0.5, 0.4)), Mined((3, 4), (0.2, 0.6, 0.2), (0.3, 0.5, 0.2))]
    teacher = np.mean(np.abs([0.9 - 0.1, 0.9 - 0.5, 0.2 - 0.6, 0.2 - 0.2]))
    dense = np.mean(np.abs([0.6 - 0.5, 0.6 - 0.4, 0.3 - 0.5, 0.3 - 0.2]))
    assert teacher_scale(mined) == pytest.approx(dense / teacher)
    assert teacher_scale([Mined((1, 2), (0.5, 0.5, 0.5), (0.6, 0.5, 0.4))]) == 1.0  # a teacher without margins: unscaled
    assert teacher_scale([Mined((1, 2), (0.9, 0.1, 0.5), (0.5, 0.5, 0.5))]) == 1.0  # nor a student without any
    assert teacher_scale([]) == 1.0
