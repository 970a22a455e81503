"""BM25 fitted to a domain (sentune.search.lexical_fit): every grid point's score is the nDCG@10 of a naive ranking of
that BM25's scores, titles count as often as the weight says, a tie keeps the fixed settings, and an adapt run's fit
reads its selection queries and no other."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import naive_bm25

from sentune.data.beir import Document, Query, RetrievalSet
from sentune.data.text_files import Source

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

HERE = Source("toy", 1)
WORDS = "protein cell gene tumour virus membrane receptor enzyme neuron insulin kinase mutation plasma antibody".split()


def ndcg10(ranked: list[str], relevant: dict[str, int]) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(relevant.values(), reverse=True)[:10]))
    return dcg / ideal


def toy(seed: int = 0, n_docs: int = 40, n_queries: int = 30) -> RetrievalSet:
    """Titled documents of random words; each query two words of its document's title and one of its body."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_docs):
        title = " ".join(rng.choice(WORDS, size=3))
        body = " ".join(rng.choice(WORDS, size=int(rng.integers(8, 40))))
        docs.append(Document(f"d{i:02d}", f"{title} {body}", HERE, title))
    queries = []
    for i in range(n_queries):
        title, body = docs[i].title.split(), docs[i].text[len(docs[i].title) :].split()
        queries.append(Query(f"q{i}", f"{title[0]} {title[1]} {body[0]}", HERE, {f"d{i:02d}": 1}))
    return RetrievalSet(queries, docs)


def test_each_grid_point_scores_the_ndcg_of_its_bm25_ranking():
    from sentune.search.lexical import LexicalIndex
    from sentune.search.lexical_fit import BS, K1S, TITLE_WEIGHTS, fit_lexical, grid

    data = toy()
    fit = fit_lexical(data.corpus, data.queries)
    assert len(fit.curve) == len(K1S) * len(BS) * len(TITLE_WEIGHTS) == len(grid(fit.fixed, True))
    for point in (fit.fixed, fit.settings, grid(fit.fixed, True)[-1]):
        scores = LexicalIndex.of_documents(data.corpus, point).scores([q.text for q in data.queries])  # the titles repeated in the text
        naive = []
        for q, row in zip(data.queries, scores, strict=True):
            ranked = [d.id for _, d in sorted(zip(row, data.corpus, strict=True), key=lambda pair: (-pair[0], pair[1].id))]
            naive.append(ndcg10(ranked, q.relevant))
        assert fit.curve[(point.k1, point.b, point.title_weight)] == pytest.approx(100 * np.mean(naive), abs=1e-9)
    best = max(fit.curve.values())
    assert fit.curve[(fit.settings.k1, fit.settings.b, fit.settings.title_weight)] == best
    assert fit.record()["read_queries"] == [q.id for q in data.queries] and fit.record()["chosen_score"] == best
    # the best point's index is kept with the fit: it scores as the fitted BM25 built from the documents does
    assert fit.settings != fit.fixed and fit.index is not None and fit.index.settings == fit.settings
    texts = [q.text for q in data.queries] + ["words of no document"]
    np.testing.assert_allclose(fit.index.scores(texts), LexicalIndex.of_documents(data.corpus, fit.settings).scores(texts), rtol=1e-6)


def test_a_fit_reads_back_from_its_record():
    import json

    from sentune.search.lexical_fit import LexicalFit, fit_lexical

    data = toy(seed=2)
    fit = fit_lexical(data.corpus, data.queries[:20])
    found = LexicalFit.from_record(json.loads(json.dumps(fit.record())), fit.fixed)
    assert found == fit and found.index is None and found.record() == fit.record()


def test_titles_count_as_often_as_the_weight_says():
    from sentune.search.lexical import LexicalSettings, document_texts

    docs = [Document("a", "Title words body here", HERE, "Title words"), Document("b", "no title at all", HERE)]
    assert document_texts(docs, LexicalSettings()) == ["Title words body here", "no title at all"]
    assert document_texts(docs, LexicalSettings(title_weight=3)) == ["Title words Title words Title words body here", "no title at all"]


def test_untitled_documents_fit_k1_and_b_only_and_a_tie_keeps_the_fixed_settings():
    from sentune.search.lexical_fit import BS, K1S, fit_lexical

    data = toy()
    untitled = [Document(d.id, d.text, HERE) for d in data.corpus]
    assert len(fit_lexical(untitled, data.queries).curve) == len(K1S) * len(BS)
    unmatched = [Query("u", "zebra quartz", HERE, {"d00": 1})]  # no word of any document: every point ranks by id alone
    fit = fit_lexical(data.corpus, unmatched)
    assert len(set(fit.curve.values())) == 1 and fit.settings == fit.fixed


def test_an_adapt_run_fits_bm25_on_its_selection_queries_alone():
    """An adapt run's fitted BM25 (LexicalService.fitted) over dev queries whose confirmation part cannot be read: touching a confirmation
    query's text or judgements fails the test."""
    from sentune.adaptation.decide import split_dev

    class Unreadable:
        def __init__(self, query_id: str) -> None:
            self.id = query_id

        @property
        def text(self):
            raise AssertionError(f"the fit read confirmation query {self.id}'s text")

        @property
        def relevant(self):
            raise AssertionError(f"the fit read confirmation query {self.id}'s judgements")

    data = toy()
    split = split_dev(np.zeros(len(data.queries)))
    queries: list = list(data.queries)
    for i in split.confirm:
        queries[i] = Unreadable(queries[i].id)
    dev = RetrievalSet(queries, data.corpus)
    fit = _search_context(dev, split).fitted()
    assert fit.read == [data.queries[i].id for i in split.select]
    assert not set(fit.read) & {data.queries[i].id for i in split.confirm}


def _search_context(dev: RetrievalSet, split, records: dict | None = None):
    """An adapt search run's BM25 (SearchContext.lexical) holding only what it reads: the documents, the selection
    queries and the records so far."""
    from sentune.adaptation.lexical_service import LexicalService

    return LexicalService(dev.corpus, lambda: [dev.queries[i] for i in split.select], dict(records or {}))


def _count_builds(monkeypatch) -> list:
    """Every BM25 index built from documents (LexicalIndex.of_documents), its settings in order."""
    from sentune.search.lexical import LexicalIndex

    built: list = []
    original = LexicalIndex.of_documents.__func__  # type: ignore[attr-defined]

    def counted(cls, documents, settings, show_progress=False):
        built.append(settings)
        return original(cls, documents, settings, show_progress)

    monkeypatch.setattr(LexicalIndex, "of_documents", classmethod(counted))
    return built


def test_a_fit_that_keeps_the_fixed_settings_shares_their_index(monkeypatch):
    from sentune.adaptation.decide import split_dev
    from sentune.search.lexical import LexicalSettings
    from sentune.search.lexical_fit import FIXED, LexicalFit

    data = toy()
    split = split_dev(np.zeros(len(data.queries)))
    read = [data.queries[i].id for i in split.select]
    monkeypatch.setattr("sentune.search.lexical_fit.fit_lexical", lambda *args, **kwargs: LexicalFit(FIXED, FIXED, {(1.5, 0.75, 1): 50.0}, read))
    built = _count_builds(monkeypatch)
    context = _search_context(data, split)
    fixed = context.ranker()
    assert context.ranker(fitted=True) is fixed and context.hybrid() is fixed and built == [LexicalSettings()]
    assert context.ranker(stemmed=False) is not fixed and built == [LexicalSettings(), LexicalSettings(stemmer=None)]


def test_the_fitted_bm25_is_the_fits_own_index_and_a_record_of_the_fit_is_not_fitted_again(monkeypatch):
    from sentune.adaptation.decide import split_dev
    from sentune.adaptation.records import CandidateRecord
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    data = toy()
    split = split_dev(np.zeros(len(data.queries)))
    built = _count_builds(monkeypatch)
    context = _search_context(data, split)
    fixed, fitted = context.ranker(), context.ranker(fitted=True)
    settings = context.fitted().settings
    assert settings != LexicalSettings() and fitted is not fixed and fitted.index.settings == settings
    assert built == [LexicalSettings()] and context.fitted().index is None  # the fit's best index ranks: no second build
    ids = [d.id for d in data.corpus]
    texts = [q.text for q in data.queries]
    np.testing.assert_allclose(fitted.scores(texts, ids), LexicalIndex.of_documents(data.corpus, settings).scores(texts), rtol=1e-6)
    # a later process of the same run reads the fit from a record of it, and fits nothing
    record = CandidateRecord("bm25-fitted", "baseline", detail={"lexical_fit": context.fitted().record()})
    monkeypatch.setattr("sentune.search.lexical_fit.fit_lexical", lambda *args, **kwargs: pytest.fail("fitted again"))
    again = _search_context(data, split, {"bm25-fitted": record})
    assert again.knows_fit() and again.fitted() == context.fitted()
    assert again.settings(fitted=True) == settings
    # ... a fit of these selection queries only: a record of others' is not this run's fit
    assert not _search_context(data, split_dev(np.zeros(len(data.queries)), seed=1), {"bm25-fitted": record}).knows_fit()


@pytest.mark.parametrize("jax_first", [False, True])
def test_bm25s_is_imported_without_starting_jax_and_jax_stays_importable(tmp_path, jax_first):
    """bm25s runs a jax top-k at import wherever jax is installed, which takes most of a GPU's memory; a stand-in jax
    package records whether anything imported it. Imported before (jax_first), jax is the same module after."""
    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True)
    marker = tmp_path / "jax-imported"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('jax\\n')\n")
    (fake / "lax.py").write_text("def top_k(scores, k):\n    raise AssertionError('jax top-k ran')\n")
    script = (
        "import sys, pathlib\n" + ("import jax as first\n" if jax_first else "") + "from sentune.search.lexical import _bm25s\n"
        "assert _bm25s() is sys.modules['bm25s']\n"
        "import bm25s.selection\n"
        "assert not bm25s.selection.JAX_IS_AVAILABLE\n"
        + ("" if jax_first else f"assert not pathlib.Path({str(marker)!r}).exists(), 'bm25s imported jax'\n")
        + "import jax.lax\n"
        + ("assert jax is first\n" if jax_first else "")
        + "print(jax.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(fake / "__init__.py")
    assert marker.read_text() == "jax\n"


def test_a_passage_outside_the_collection_scores_as_bm25s_scores_a_document_of_it():
    """passage_scores against bm25s on the documents it indexed (a query word twice, one no document has, stemming),
    and against the formula written out for a text that is not in the collection."""
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    documents = ["cats chase the small mice", "a dog chases cats and cats run", "mice eat cheese", "the cheese shop sells cheese daily", "dogs"]
    settings = LexicalSettings(k1=1.2, b=0.6)
    index = LexicalIndex.build(documents, settings, statistics=True)
    queries = ["cats chasing cheese cats", "mice", "zebra dogs"]
    for query in queries:
        np.testing.assert_allclose(index.passage_scores([query] * len(documents), documents), index.scores([query])[0], rtol=1e-5, atol=1e-6)
    outside = "cats and mice share the cheese"
    naive = naive_bm25(index.tokens([queries[0]])[0], index.tokens([outside])[0], index.tokens(documents), settings.k1, settings.b)
    assert naive > 0 and index.passage_scores([queries[0]], [outside])[0] == pytest.approx(naive)
    loaded = LexicalIndex.build(documents, settings)  # built without them, or read from disk: none
    with pytest.raises(ValueError, match="statistics"):
        loaded.passage_scores(queries, documents[:3])
    with pytest.raises(ValueError, match="5 documents"):
        loaded.with_statistics(documents[:3])
    assert loaded.with_statistics(documents).statistics == index.statistics
    np.testing.assert_array_equal(loaded.passage_scores(queries, [outside] * 3), index.passage_scores(queries, [outside] * 3))
