"""What `sentune index` and `sentune search` refuse, on a 150-document index of the tiny model: a damaged index (vector
rows, a cut file, a non-JSON index.json), a run file that could not be read back, an existing or folder --run, a bad
--out, a hybrid without a saved fusion. Each is one line naming the file or option, exit 2, nothing written, and the
checks that need no model come before it loads. Also: a user's search returns the document whose id is the query's
(adapt's scoring keeps BEIR's exclusion), and --no-stem on an existing index rebuilds its BM25 side."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from conftest import tree_state
from test_adapt_retrieval import _toy_beir

from sentune.cli import main

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")


@pytest.fixture(scope="module")
def built(tiny_model_dir, tmp_path_factory):
    """The toy corpus (150 documents, the first one's id "query", as `--query` names its query) and two indexes of
    it: hybrid (convex, α = 0.4) and dense (no fusion)."""
    folder = tmp_path_factory.mktemp("built")
    dev, _ = _toy_beir(folder / "toy")
    lines = (dev / "corpus.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "_id": "query"})
    corpus = folder / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    common = ["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--quiet"]
    assert main([*common, "--out", str(folder / "hybrid"), "--fusion", "convex:0.4"]) == 0
    assert main([*common, "--out", str(folder / "dense")]) == 0
    return {"folder": folder, "corpus": corpus, "queries": dev / "queries.jsonl", "model": tiny_model_dir}


@pytest.fixture
def no_model(monkeypatch):
    """Any model load fails the test: what is checked here is checked before a model loads."""
    import sentune.core.models

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the check")

    monkeypatch.setattr(sentune.core.models, "load_model_with_runtime", refuse)


def copy_index(built, tmp_path, name="hybrid"):
    return shutil.copytree(built["folder"] / name, tmp_path / name)


def one_error(capsys, args) -> str:
    capsys.readouterr()
    assert main([*args, "--quiet"]) == 2, args
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def search_run(folder, *args) -> list[list[str]]:
    """`sentune search --run` of these options, read back with sentune's reader: each query's documents."""
    from sentune.search.trec import read_trec_run

    run = folder / f"run-{len(list(folder.glob('run-*')))}.txt"
    assert main(["search", *map(str, args), "--run", str(run), "--quiet"]) == 0
    return list(read_trec_run(run).values())


# -- silent wrong results --


@pytest.mark.parametrize("rows", [140, 160])
def test_vectors_of_another_row_count_are_refused_naming_the_file(built, tmp_path, capsys, no_model, rows):
    index = copy_index(built, tmp_path)
    vectors = np.load(index / "vectors.npy")
    np.save(index / "vectors.npy", vectors[:rows] if rows < len(vectors) else np.concatenate([vectors, vectors[: rows - len(vectors)]]))
    before = tree_state(tmp_path)
    for system in ("dense", "hybrid"):
        message = one_error(capsys, ["search", str(index), "--query", "a man", "--system", system])
        assert f"{index / 'vectors.npy'}: shape ({rows}, " in message and "150 documents" in message
    assert tree_state(tmp_path) == before


def test_vectors_of_another_dimension_are_refused(built, tmp_path, capsys, no_model):
    index = copy_index(built, tmp_path)
    np.save(index / "vectors.npy", np.load(index / "vectors.npy")[:, :8])
    assert f"{index / 'vectors.npy'}: shape (150, 8)" in one_error(capsys, ["search", str(index), "--query", "a man"])


def test_a_document_whose_id_is_the_query_s_is_returned_unless_excluded(built, tmp_path):
    """`--query` names its query "query" and so does the corpus's first document; a queries file names a query as a
    document is named. Each system returns that document (dense: first, at cosine 1); --exclude-same-id leaves it
    out and the rest of the ranking as it was."""
    corpus = [json.loads(line) for line in built["corpus"].read_text().splitlines()]
    own = corpus[7]
    queries = tmp_path / "queries.tsv"
    queries.write_text(f"{own['_id']}\t{own['text']}\n")
    for system in ("dense", "bm25", "hybrid"):
        every = search_run(tmp_path, built["folder"] / "hybrid", "--queries", queries, "--top", "6", "--system", system)[0]
        assert own["_id"] in every[:5] and len(every) == 6
        excluded = search_run(tmp_path, built["folder"] / "hybrid", "--queries", queries, "--top", "5", "--system", system, "--exclude-same-id")[0]
        assert own["_id"] not in excluded and len(excluded) == 5
        if system != "hybrid":  # the hybrid also leaves the document out of its normalisation, which may reorder the rest
            assert excluded == [doc for doc in every if doc != own["_id"]][:5]
    dense = search_run(tmp_path, built["folder"] / "hybrid", "--queries", queries, "--top", "5", "--system", "dense")[0]
    assert dense[0] == own["_id"]
    printed = search_run(tmp_path, built["folder"] / "dense", "--query", corpus[0]["text"], "--top", "5")[0]
    assert printed[0] == "query" and len(printed) == 5


def test_adapt_s_scoring_still_leaves_the_query_s_own_document_out():
    """sentune adapt scores queries as BEIR does (a document with the query's id is no result): the same-id document
    nearest the query does not push the relevant one down, in the dense and the BM25 ranking."""
    from sentune.data.beir import Document, Query, RetrievalSet
    from sentune.data.readers import Source
    from sentune.search.lexical import CollectionRanker, LexicalIndex
    from sentune.tasks.user_queries import QueryScorer

    here = Source("test", 1)
    corpus = [Document("q1", "guitar guitar piano", here), Document("d1", "guitar piano dog", here), Document("d2", "stock market news", here)]
    query = Query("q1", "guitar guitar piano", here, {"d1": 1})
    scorer = QueryScorer.whole({"test": RetrievalSet([query], corpus)})
    rows = {text: i for i, text in enumerate(scorer.sentences())}
    vectors = np.zeros((len(rows), 3), dtype=np.float32)
    vectors[rows["guitar guitar piano"]] = [1.0, 0.0, 0.0]  # the query and its own document: cosine 1
    vectors[rows["guitar piano dog"]] = [0.8, 0.6, 0.0]
    vectors[rows["stock market news"]] = [0.0, 0.0, 1.0]
    assert scorer.of_vectors(vectors)["test"].tolist() == [100.0]  # d1 first: q1 left out (kept, nDCG@10 = 1 / log2(3))
    ranker = CollectionRanker(LexicalIndex.build([d.text for d in corpus]), [d.id for d in corpus])
    assert ranker([query], corpus) == [[1, 2]]  # q1, the best BM25 match, is no result


# -- tracebacks turned into one line --


def test_a_non_json_index_json_is_one_line_for_index_and_search(built, tmp_path, capsys, no_model):
    index = copy_index(built, tmp_path)
    (index / "index.json").write_text('{"format": "sentune-index/1",\n  not json\n')
    before = tree_state(tmp_path)
    message = one_error(capsys, ["search", str(index), "--query", "a man"])
    assert message.startswith(f"sentune: error: {index / 'index.json'}:2: not JSON")
    message = one_error(capsys, ["index", "--model", str(built["model"]), "--corpus", str(built["corpus"]), "--out", str(index)])
    assert f"{index / 'index.json'}:2: not JSON" in message
    assert tree_state(tmp_path) == before
    (index / "index.json").write_text("[1, 2]")
    assert f"{index / 'index.json'}: not a JSON object" in one_error(capsys, ["search", str(index), "--query", "a man"])


def test_a_truncated_vectors_file_is_one_line(built, tmp_path, capsys, no_model):
    index = copy_index(built, tmp_path)
    whole = (index / "vectors.npy").read_bytes()
    (index / "vectors.npy").write_bytes(whole[: len(whole) // 2])
    message = one_error(capsys, ["search", str(index), "--query", "a man"])
    assert f"{index / 'vectors.npy'}: not a whole .npy array" in message and "mmap length is greater than file size" in message
    assert main(["search", str(index), "--query", "a man", "--system", "bm25", "--quiet"]) == 0  # BM25 alone reads no vectors


def test_documents_cut_mid_line_or_short_by_lines_are_one_line(built, tmp_path, capsys, no_model):
    index = copy_index(built, tmp_path)
    whole = (index / "documents.jsonl").read_text()
    (index / "documents.jsonl").write_text(whole[: len(whole) - 40])
    message = one_error(capsys, ["search", str(index), "--query", "a man", "--system", "bm25"])
    assert message.startswith(f"sentune: error: {index / 'documents.jsonl'}:150: not a document")
    (index / "documents.jsonl").write_text("".join(whole.splitlines(keepends=True)[:145]))
    message = one_error(capsys, ["search", str(index), "--query", "a man"])
    assert f"{index / 'documents.jsonl'}: 145 documents, but index.json says 150" in message
    (index / "documents.jsonl").write_text(whole)
    (index / "bm25" / "lexical.json").write_text(json.dumps({**json.loads((index / "bm25" / "lexical.json").read_text()), "documents": 149}))
    assert f"{index / 'bm25' / 'lexical.json'}: BM25 over 149 documents" in one_error(capsys, ["search", str(index), "--query", "a man"])


# -- run files --


def test_ids_with_whitespace_are_refused_for_a_run_not_written_as_seven_fields(built, tmp_path, capsys, no_model):
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\ta man\nmy query\tthe dog\n")
    run = tmp_path / "out.run"
    before = tree_state(tmp_path)
    message = one_error(capsys, ["search", str(built["folder"] / "hybrid"), "--queries", str(queries), "--run", str(run)])
    assert message == (
        f"sentune: error: {queries}:2: query id 'my query' holds whitespace, which a TREC run line (qid Q0 docid rank score tag, split at "
        "whitespace) cannot carry; give it an id without spaces"
    )
    assert "my query" in one_error(capsys, ["search", str(built["folder"] / "hybrid"), "--queries", str(queries)])  # printed run lines too
    assert tree_state(tmp_path) == before
    from sentune.data.beir import Query
    from sentune.data.readers import Source
    from sentune.errors import UserError
    from sentune.search.index import Hit
    from sentune.search.trec import write_trec_run

    with pytest.raises(UserError, match="id 'd 1' holds whitespace"):
        write_trec_run(run, [Query("q1", "a man", Source("x", 1))], [[Hit("d 1", 1.0, "a man")]])
    assert not run.exists()


def test_run_onto_an_existing_file_or_a_folder_is_refused_before_any_work(built, tmp_path, capsys, monkeypatch):
    import sentune.search.index as index_module

    index = built["folder"] / "hybrid"
    existing = tmp_path / "existing.run"
    existing.write_text("kept\n")
    folder = tmp_path / "runs"
    folder.mkdir()
    opened = []
    monkeypatch.setattr(index_module.SearchIndex, "open", classmethod(lambda cls, *a, **k: opened.append(a)))
    before = tree_state(tmp_path)
    message = one_error(capsys, ["search", str(index), "--query", "a man", "--run", str(existing)])
    assert message == f"sentune: error: --run {existing}: the file exists; add --force to overwrite it"
    message = one_error(capsys, ["search", str(index), "--query", "a man", "--run", str(folder), "--force"])
    assert message == f"sentune: error: --run {folder}: a folder; give a file name (e.g. {folder / 'search.run'})"
    assert opened == [] and tree_state(tmp_path) == before  # no index opened, no temporary file left
    monkeypatch.undo()
    assert main(["search", str(index), "--query", "a man", "--top", "2", "--run", str(existing), "--force", "--quiet"]) == 0
    assert [line.split()[3] for line in existing.read_text().splitlines()] == ["1", "2"]


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path):
    from sentune.core.results import write_atomic

    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_text("x")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "taken", "text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


# -- options checked before the model loads --


def test_missing_inputs_name_their_option(built, tmp_path, capsys, no_model):
    missing = tmp_path / "nope.jsonl"
    message = one_error(capsys, ["index", "--model", str(built["model"]), "--corpus", str(missing), "--out", str(tmp_path / "new")])
    assert message == f"sentune: error: --corpus {missing}: file not found"
    message = one_error(capsys, ["search", str(built["folder"] / "hybrid"), "--queries", str(missing)])
    assert message == f"sentune: error: --queries {missing}: file not found"
    assert f"--queries {tmp_path}: a folder, not a file" in one_error(capsys, ["search", str(built["folder"] / "hybrid"), "--queries", str(tmp_path)])


def test_a_bad_out_is_refused_before_the_model_loads(built, tmp_path, capsys, no_model):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    other = tmp_path / "other.jsonl"
    other.write_text('{"_id": "a", "text": "a man"}\n')
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    unfinished = copy_index(built, tmp_path)  # a build of 150 documents stopped midway: resumed only with them
    settings = json.loads((unfinished / "index.json").read_text())
    (unfinished / "index.json").write_text(json.dumps(settings | {"complete": False}))
    index = ["index", "--model", str(built["model"]), "--corpus"]
    before = tree_state(tmp_path)
    cases = [
        ([*index, str(built["corpus"]), "--out", str(a_file)], f"--out {a_file}: a file, not a folder"),
        ([*index, str(built["corpus"]), "--out", str(a_file / "x")], f"--out {a_file / 'x'}: {a_file} is a file, not a folder"),
        ([*index, str(built["corpus"]), "--out", str(stranger)], f"--out {stranger}: a folder that is not empty and holds no index.json"),
        ([*index, str(other), "--out", str(unfinished)], f"{unfinished / 'index.json'}: an unfinished build over other documents (150)"),
    ]
    for args, expected in cases:
        assert expected in one_error(capsys, args), args
    assert tree_state(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_an_out_that_cannot_be_written_is_refused_before_the_model_loads(built, tmp_path, capsys, no_model):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        message = one_error(capsys, ["index", "--model", str(built["model"]), "--corpus", str(built["corpus"]), "--out", str(locked / "index")])
        assert f"--out {locked / 'index'}: cannot write in {locked}" in message
    finally:
        locked.chmod(0o755)


# -- an option that did nothing --


def test_no_stem_on_an_existing_index_rebuilds_its_bm25_and_keeps_its_vectors(built, tmp_path, monkeypatch, capsys):
    from sentune.core.encode import Encoder
    from sentune.search.folder import LEXICAL_SETTINGS, IndexFolder
    from sentune.search.fusion import id_order, top_by_score
    from sentune.search.lexical import LexicalIndex, LexicalSettings

    index = copy_index(built, tmp_path)
    vectors = (index / "vectors.npy").read_bytes()
    texts = [json.loads(line)["text"] for line in built["corpus"].read_text().splitlines()]
    ids = [json.loads(line)["_id"] for line in built["corpus"].read_text().splitlines()]
    query = "the men were playing guitars"  # stemming matches `playing`/`play`, `men`/`man` only stemmed

    def bm25_top(settings):
        return [ids[i] for i in top_by_score(LexicalIndex.build(texts, settings).scores([query]), id_order(ids), 10)[0]]

    assert bm25_top(LexicalSettings()) != bm25_top(LexicalSettings(stemmer=None))  # the two settings rank differently here
    encoded: list[int] = []
    real = Encoder.encode
    monkeypatch.setattr(Encoder, "encode", lambda self, texts, *a, **k: encoded.append(len(texts)) or real(self, texts, *a, **k))
    common = ["index", "--model", str(built["model"]), "--corpus", str(built["corpus"]), "--out", str(index), "--fusion", "convex:0.4", "--quiet"]
    for flags, settings in ((["--no-stem"], LexicalSettings(stemmer=None)), ([], LexicalSettings())):
        capsys.readouterr()
        assert main([*common, *flags]) == 0
        assert ("BM25 unstemmed" in capsys.readouterr().out) == bool(flags)
        saved = json.loads((index / "index.json").read_text())
        assert saved["complete"] and saved["lexical"]["stemmer"] == settings.stemmer
        current = IndexFolder(index).current()  # a rebuild is a new version of the folder (sentune.search.folder)
        assert current is not None and json.loads((current.bm25 / LEXICAL_SETTINGS).read_text())["stemmer"] == settings.stemmer
        assert search_run(tmp_path, index, "--query", query, "--system", "bm25")[0] == bm25_top(settings)
    assert encoded == [] and current.vectors.read_bytes() == vectors  # the documents were not encoded again
    assert current.vectors.stat().st_nlink >= 2  # shared with the version before, not copied


# -- the fusion weight --


def test_an_index_without_a_saved_fusion_refuses_the_hybrid(built, tmp_path, capsys, no_model):
    dense = built["folder"] / "dense"
    message = one_error(capsys, ["search", str(dense), "--query", "a man", "--system", "hybrid"])
    assert message.startswith(f"sentune: error: --system hybrid: {dense / 'index.json'} holds no fusion weight (a dense index)") and "--fusion" in message
    index = copy_index(built, tmp_path)
    settings = json.loads((index / "index.json").read_text())
    for fusion in (None, {"kind": "convex"}, {"kind": "convex", "alpha": 1.5}, {"kind": "max"}):
        (index / "index.json").write_text(json.dumps({**settings, "fusion": fusion}))
        message = one_error(capsys, ["search", str(index), "--query", "a man"])
        assert (f"{index / 'index.json'}: not a fusion sentune writes" if fusion else "holds no fusion weight (a hybrid index)") in message, fusion


def test_the_saved_fusion_reads_back_as_a_fusion(built):
    from sentune.search.fusion import Fusion
    from sentune.search.index import SearchIndex, saved_fusion
    from sentune.search.stored import read_settings

    assert SearchIndex.open(built["folder"] / "hybrid").fusion == Fusion("convex", 0.4)
    assert SearchIndex.open(built["folder"] / "dense").fusion is None
    assert saved_fusion(read_settings(built["folder"] / "dense"), built["folder"] / "dense") is None
    for fusion in (Fusion("convex", 0.0), Fusion("convex", 1.0), Fusion("convex", 0.35), Fusion("rrf"), Fusion("rrf", k=10)):
        assert Fusion.from_dict(json.loads(json.dumps(fusion.to_dict()))) == fusion
    for bad in ({"kind": "convex"}, {"kind": "rrf"}, {"kind": "convex", "alpha": "0.5"}, {}):
        with pytest.raises(ValueError, match="not a fusion sentune writes"):
            Fusion.from_dict(bad)
