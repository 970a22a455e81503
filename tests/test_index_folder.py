"""The index folder (sentune.search.folder): a rebuild into a folder that is being read never changes what an opened
index ranks, a failed rebuild leaves the index whole, the model is the index's own (found in its folder, checked by
its digest, never a folder of the current directory), the Python API's errors name its arguments, and no module but
the folder object names the index's files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import WORDS

from sentune.cli import main
from sentune.errors import UserError

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

QUERIES = ["a man plays the guitar", "the market price rises", "news said today", "who what where", "stock falls"]


@pytest.fixture
def corpus(tmp_path) -> Path:
    """60 documents of random sentences (the words the tiny model knows): enough for BM25 settings to rank apart."""
    rng = np.random.default_rng(0)
    path = tmp_path / "corpus.jsonl"
    lines = []
    for i in range(60):
        text = " ".join(" ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)))).capitalize() + "." for _ in range(4))
        lines.append(json.dumps({"_id": f"d{i}", "title": "", "text": text}))
    path.write_text("\n".join(lines) + "\n")
    return path


def ranked(index, system: str) -> list[list[tuple[str, float]]]:
    """`index`'s top 10 (ids and scores) for each of QUERIES; `system`: the one it ranks with (named for the reader)."""
    assert index.system == system
    return [[(hit.doc_id, round(hit.score, 5)) for hit in row] for row in index.search(_queries(), 10)]


def _queries():
    from sentune.data.beir import Query
    from sentune.data.text_files import Source

    return [Query(f"q{i}", text, Source("test", i + 1), {}) for i, text in enumerate(QUERIES)]


def other_model(tiny_model_dir: Path, folder: Path) -> Path:
    """A model of the same shape as the tiny one, with other weights: it would rank the same index differently."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    model.save(str(folder))
    return folder


def test_a_rebuild_into_a_served_folder_leaves_an_opened_index_ranking_as_before(tiny_model_dir, corpus, tmp_path):
    from sentune.api.index import Index
    from sentune.search.index import SearchIndex

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="convex:0.5")
    served = {system: SearchIndex.open(out, system, device="cpu") for system in ("bm25", "hybrid")}
    for index in served.values():
        index.lexical(mmap=True)  # as a server holds it: BM25's matrix memory-mapped from the index's files
    before = {system: ranked(index, system) for system, index in served.items()}
    rebuilt = dict(fusion="rrf", stem=False, bm25_k1=0.4, bm25_b=0.3)
    Index.build(str(tiny_model_dir), str(corpus), out, **rebuilt)
    assert {system: ranked(index, system) for system, index in served.items()} == before  # what it opened, whole
    fresh = {system: SearchIndex.open(out, system, device="cpu") for system in ("bm25", "hybrid")}
    apart = tmp_path / "apart"  # the rebuilt index's own answer: the same build into a new folder
    Index.build(str(tiny_model_dir), str(corpus), apart, **rebuilt)
    expected = {system: ranked(SearchIndex.open(apart, system, device="cpu"), system) for system in ("bm25", "hybrid")}
    assert {system: ranked(index, system) for system, index in fresh.items()} == expected != before
    assert fresh["hybrid"].fusion is not None and fresh["hybrid"].fusion.kind == "rrf" and served["hybrid"].fusion.kind == "convex"


def test_a_failed_rebuild_leaves_the_index_whole_and_a_second_run_finishes_it(tiny_model_dir, corpus, tmp_path, monkeypatch):
    from sentune.api.index import Index
    from sentune.search.index import SearchIndex
    from sentune.search.lexical import LexicalIndex

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="convex:0.5")
    before = ranked(SearchIndex.open(out, "bm25", device="cpu"), "bm25")
    settings = json.loads((out / "index.json").read_text())

    def killed(self, folder):
        raise KeyboardInterrupt  # a rebuild stopped after the vectors, while BM25 is written

    monkeypatch.setattr(LexicalIndex, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        Index.build(str(tiny_model_dir), str(corpus), out, fusion="rrf", stem=False)
    monkeypatch.undo()
    assert json.loads((out / "index.json").read_text()) == settings  # still the finished index, never marked unfinished
    assert ranked(SearchIndex.open(out, "bm25", device="cpu"), "bm25") == before
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet"]) == 0  # servable as it was
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="rrf", stem=False)
    assert json.loads((out / "index.json").read_text())["fusion"]["kind"] == "rrf"
    assert ranked(SearchIndex.open(out, "bm25", device="cpu"), "bm25") != before


def tonight(corpus: Path, tmp_path: Path) -> tuple[Path, set[str]]:
    """A nightly corpus: the documents of `corpus` less d0, d1's text changed, d60 new; and the two texts it encodes."""
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    rows = rows[1:] + [{"_id": "d60", "title": "", "text": "A new report said the market price rises today."}]
    rows[0] = rows[0] | {"text": rows[0]["text"] + " The men play guitars."}
    path = tmp_path / "tonight.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path, {rows[0]["text"], rows[-1]["text"]}


def test_a_rebuild_over_new_documents_encodes_only_what_changed_and_an_opened_index_keeps_the_old_ones(tiny_model_dir, corpus, tmp_path, monkeypatch):
    from sentune.api.index import Index
    from sentune.core.encode import Encoder
    from sentune.search.index import SearchIndex

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="convex:0.5")
    served = SearchIndex.open(out, "hybrid", device="cpu")
    served.lexical(mmap=True)
    before = ranked(served, "hybrid")
    new_corpus, changed = tonight(corpus, tmp_path)
    encoded: list[str] = []
    real = Encoder.encode
    monkeypatch.setattr(Encoder, "encode", lambda self, texts, *a, **k: encoded.extend(texts) or real(self, texts, *a, **k))
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(new_corpus), "--out", str(out), "--fusion", "convex:0.5", "--quiet"]) == 0
    assert set(encoded) == changed and len(encoded) == 2  # the 58 documents held word for word keep their vectors
    monkeypatch.undo()
    assert ranked(served, "hybrid") == before  # a reader keeps the index it opened, d0 and all
    apart = tmp_path / "apart"  # the new documents' own index, every one encoded
    Index.build(str(tiny_model_dir), str(new_corpus), apart, fusion="convex:0.5")
    fresh, own = SearchIndex.open(out, "hybrid", device="cpu"), SearchIndex.open(apart, "hybrid", device="cpu")
    assert np.allclose(fresh.vectors, own.vectors, atol=1e-5)
    found, expected = ranked(fresh, "hybrid"), ranked(own, "hybrid")
    assert [[i for i, _ in row] for row in found] == [[i for i, _ in row] for row in expected]
    assert np.allclose([s for row in found for _, s in row], [s for row in expected for _, s in row], atol=1e-4)
    assert "d0" not in fresh.documents.ids(range(len(fresh.documents))) and "d60" in fresh.documents.ids(range(len(fresh.documents)))


def test_a_rebuild_over_new_documents_builds_its_approximate_index_again_as_it_was_built(tiny_model_dir, corpus, tmp_path):
    pytest.importorskip("faiss")
    from sentune.api.index import Index
    from sentune.search.ann import read_ann_settings
    from sentune.search.folder import IndexFolder
    from sentune.search.index import SearchIndex

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out, ann="hnsw:m=8")
    first = read_ann_settings(IndexFolder(out).current().path)
    opened = SearchIndex.open(out, "dense", device="cpu")
    assert opened.ann is not None and opened.system_view("hybrid" if opened.fusion else "dense").ann is opened.ann  # one in memory
    Index.build(str(tiny_model_dir), str(tonight(corpus, tmp_path)[0]), out)
    current = IndexFolder(out).current()
    again = read_ann_settings(current.path)
    assert again is not None and again["kind"] == first["kind"] and again["settings"] == first["settings"]
    assert (current.ann_index).stat().st_ino != (IndexFolder(out).flat().ann_index).stat().st_ino  # built over the new vectors


def test_an_index_from_before_versions_opens_in_place_and_old_versions_are_pruned(tiny_model_dir, corpus, tmp_path):
    from sentune.api.index import Index
    from sentune.search.folder import IndexFolder

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out)  # the first build: its files in the folder itself, as before versions
    folder = IndexFolder(out)
    assert folder.current() == folder.flat() and (out / "vectors.npy").is_file() and "version" not in json.loads((out / "index.json").read_text())
    first = Index.open(out).search(QUERIES[0])
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="rrf")
    second = folder.current()
    assert second is not None and second.path.parent == out / "versions" and (out / "vectors.npy").is_file()  # the version before is kept
    assert second.vectors.stat().st_ino == (out / "vectors.npy").stat().st_ino  # the vectors shared, not encoded again
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="convex:0.3")
    third = folder.current()
    assert third is not None and third != second and second.path.is_dir() and not (out / "vectors.npy").exists()  # two back: gone
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="convex:0.2")
    fourth = folder.current()
    assert fourth is not None and not second.path.exists()
    assert sorted(p.name for p in (out / "versions").iterdir() if p.is_dir()) == sorted([third.path.name, fourth.path.name])
    assert [h.id for h in Index.open(out, system="dense").search(QUERIES[0])] == [h.id for h in first]


def test_a_model_whose_weights_differ_from_the_recorded_ones_is_refused(tiny_model_dir, corpus, tmp_path, capsys):
    from sentune.api.index import Index

    model = tmp_path / "model-a"
    shutil.copytree(tiny_model_dir, model)
    out = tmp_path / "index"
    Index.build(str(model), str(corpus), out)
    other = other_model(tiny_model_dir, tmp_path / "other")
    shutil.rmtree(model)
    shutil.copytree(other, model)  # the folder the index names now holds another model
    with pytest.raises(UserError, match="built by a model with weights"):
        Index.open(out).search(QUERIES[0])
    capsys.readouterr()
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "built by a model with weights" in err[0] and "--model" in err[0], err
    with pytest.raises(
        UserError, match=r"built by a model with weights \w+, but model= .*other has others; name the model the index was built with \(model=\)"
    ):
        Index.open(out, model=str(other)).search(QUERIES[0])
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet", "--model", str(tiny_model_dir)]) == 0  # named: the same weights


def test_the_model_is_found_from_the_index_folder_never_the_current_one(tiny_model_dir, corpus, tmp_path, monkeypatch, capsys):
    built_in, elsewhere = tmp_path / "a", tmp_path / "b"
    built_in.mkdir()
    elsewhere.mkdir()
    shutil.copytree(tiny_model_dir, built_in / "mymodel")
    other_model(tiny_model_dir, elsewhere / "mymodel")  # another model of that name where the search runs
    out = tmp_path / "index"
    monkeypatch.chdir(built_in)
    assert main(["index", "--model", "mymodel", "--corpus", str(corpus), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet"]) == 0
    expected = capsys.readouterr().out
    monkeypatch.chdir(elsewhere)
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet"]) == 0
    assert capsys.readouterr().out == expected  # the model the index was built with, not ./mymodel here
    # an adapt run's or an in-memory model's folder inside the index: relative to the index, from anywhere
    from sentence_transformers import SentenceTransformer

    from sentune.api.index import Index

    inside = tmp_path / "inside"
    Index.build(SentenceTransformer(str(tiny_model_dir), device="cpu"), str(corpus), inside)
    assert json.loads((inside / "index.json").read_text())["model"] == "model"
    other_model(tiny_model_dir, elsewhere / "model")
    scores = [h.score for h in Index.open(inside).search(QUERIES[0])]
    monkeypatch.chdir(tmp_path)
    assert [h.score for h in Index.open(Path("inside")).search(QUERIES[0])] == scores


def test_index_build_errors_name_the_python_arguments(tiny_model_dir, corpus, tmp_path):
    from sentune.api.index import Index

    file = tmp_path / "a-file"
    file.write_text("x")
    cases = [
        (dict(bm25_k1=-1.0), "bm25_k1 -1.0: 0 or more"),
        (dict(bm25_b=2.0), "bm25_b 2.0: from 0 to 1"),
        (dict(bm25_title_weight=0), "bm25_title_weight 0: 1 or more"),
        (dict(fusion="convex:7"), "fusion convex:7: use none, rrf or convex:ALPHA"),
    ]
    for options, message in cases:
        with pytest.raises(UserError) as raised:
            Index.build(str(tiny_model_dir), str(corpus), tmp_path / "new", **options)
        assert message in str(raised.value) and "--" not in str(raised.value), options
    with pytest.raises(UserError, match=r"^out .*a-file: a file, not a folder"):
        Index.build(str(tiny_model_dir), str(corpus), file)
    assert not (tmp_path / "new").exists()


def test_a_system_view_shares_the_opened_index(tiny_model_dir, corpus, tmp_path):
    from sentune.api.index import Index
    from sentune.search.index import SearchIndex

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out, fusion="convex:0.5")
    base = SearchIndex.open(out, device="cpu")
    views = {system: base.system_view(system) for system in ("dense", "bm25", "hybrid")}
    assert views["bm25"].lexical() is views["hybrid"].lexical() is base.lexical()
    assert views["dense"].model() is base.model() and views["dense"].vectors is base.vectors and views["bm25"].vectors is None
    for system, view in views.items():
        assert ranked(view, system) == ranked(SearchIndex.open(out, system, device="cpu"), system)
    with pytest.raises(UserError, match="system sparse: choose dense, bm25, hybrid"):
        base.system_view("sparse")
    dense_only = tmp_path / "dense"
    Index.build(str(tiny_model_dir), str(corpus), dense_only)
    with pytest.raises(UserError, match="holds no fusion weight"):
        SearchIndex.open(dense_only).system_view("hybrid")
    arrays = base.mapped_arrays()
    assert any(a is base.vectors for a in arrays) and all(isinstance(a, np.ndarray) for a in arrays)


# the index's file names, as code or docs would name them; the folder object is the one module that knows them
FILE_NAMES = re.compile(
    r"(?<![\w.])(vectors\.npy|index\.json|progress\.json|documents\.jsonl|documents\.offsets\.npy|documents\.order\.npy|lexical\.json|index\.faiss|ann\.json)"
    r"|/ \"(bm25|passages|ann|shards|versions)\""
)


def test_no_module_but_the_folder_object_names_the_index_files():
    package = Path(__file__).resolve().parents[1] / "sentune"
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "folder.py" or path.parent.name != "search"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if FILE_NAMES.search(line)
    ]
    assert found == []


# -- a server whose folder is rebuilt under it --

SERVED_QUERIES = ["guitar market", "the price rises today", "news report"]


def _rebuilt_answer(tiny_model_dir: Path, corpus: Path, folder: Path, options: list[str]) -> dict[str, list[list[str]]]:
    """What a fresh build with `options` ranks (each system's top 3 ids per query): the rebuilt index's own answer."""
    from sentune.api.index import Index

    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(folder), "--quiet", *options]) == 0
    index = Index.open(folder)
    return {system: [[hit.id for hit in row] for row in index.search(SERVED_QUERIES, 3, system=system)] for system in ("bm25", "hybrid")}


REBUILT = ["--fusion", "rrf", "--no-stem", "--bm25-k1", "0.3", "--bm25-b", "0.2"]


@pytest.mark.slow  # three builds and a server's start-up
def test_a_served_folder_rebuilt_under_the_app_serves_its_old_answers_until_a_reload(tiny_model_dir, corpus, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    key = "rebuild-test-key"
    served = tmp_path / "served"
    before = _rebuilt_answer(tiny_model_dir, corpus, served, ["--fusion", "convex:0.5"])
    after = _rebuilt_answer(tiny_model_dir, corpus, tmp_path / "apart", REBUILT)
    assert before != after  # the two builds rank differently here

    def answers(client) -> dict[str, list[list[str]]]:
        found = {}
        for system in ("bm25", "hybrid"):
            found[system] = []
            for query in SERVED_QUERIES:
                reply = client.post("/search", json={"query": query, "top_k": 3, "system": system}, headers={"Authorization": f"Bearer {key}"})
                assert reply.status_code == 200, reply.text
                found[system].append([hit["id"] for hit in reply.json()["results"][0]["hits"]])
        return found

    with TestClient(create_app(ServeSettings(target=str(served), index=str(served), model=None, api_key=key))) as client:
        assert answers(client) == before
        assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(served), "--quiet", *REBUILT]) == 0
        assert answers(client) == before  # the files it mapped are unchanged: the old index whole, until a reload
        assert client.post("/admin/reload", json={}, headers={"Authorization": f"Bearer {key}"}).status_code == 200
        assert answers(client) == after


@pytest.mark.slow  # a server process of its own
def test_sentune_serve_survives_its_folder_rebuilt_and_reloads_the_new_index(tiny_model_dir, corpus, tmp_path):
    import signal
    import time

    httpx = pytest.importorskip("httpx")
    from conftest import free_port
    from test_serve import start_server, stop_server

    served = tmp_path / "served"
    before = _rebuilt_answer(tiny_model_dir, corpus, served, ["--fusion", "convex:0.5"])
    after = _rebuilt_answer(tiny_model_dir, corpus, tmp_path / "apart", REBUILT)
    port = free_port()
    proc = start_server([str(served), "--quiet"], port)
    url = f"http://127.0.0.1:{port}"

    def answers() -> dict[str, list[list[str]]]:
        found = {}
        for system in ("bm25", "hybrid"):
            found[system] = []
            for query in SERVED_QUERIES:
                reply = httpx.post(f"{url}/search", json={"query": query, "top_k": 3, "system": system}, timeout=30)
                assert reply.status_code == 200, reply.text
                found[system].append([hit["id"] for hit in reply.json()["results"][0]["hits"]])
        return found

    try:
        assert answers() == before
        assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(served), "--quiet", *REBUILT]) == 0
        assert answers() == before and proc.poll() is None  # no SIGBUS, no mixed rankings: the index it opened
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 60
        while answers() != after:
            assert time.time() < deadline and proc.poll() is None, "not reloaded"
            time.sleep(0.2)
    finally:
        stop_server(proc)


def test_two_builds_never_write_one_index_at_once(tiny_model_dir, corpus, tmp_path):
    from sentune.api.index import Index
    from sentune.search.folder import IndexFolder

    out = tmp_path / "index"
    Index.build(str(tiny_model_dir), str(corpus), out)
    settings = (out / "index.json").read_text()
    with IndexFolder(out).build_lock() as held:  # another process's build, as its lock shows
        assert held
        with pytest.raises(UserError, match="another `sentune index` is building this index now"):
            Index.build(str(tiny_model_dir), str(corpus), out, fusion="rrf")
    assert (out / "index.json").read_text() == settings


def test_a_missing_model_is_named_as_the_caller_names_it(tiny_model_dir, corpus, tmp_path, capsys):
    from sentune.api.index import Index

    model = tmp_path / "gone"
    shutil.copytree(tiny_model_dir, model)
    out = tmp_path / "index"
    Index.build(str(model), str(corpus), out)
    shutil.rmtree(model)
    with pytest.raises(UserError) as raised:
        Index.open(out).search(QUERIES[0])
    message = str(raised.value)
    assert str(out / "index.json") in message and "no such folder" in message and "(model=)" in message and "--model" not in message
    capsys.readouterr()
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such folder" in err[0] and "(--model)" in err[0], err
    assert main(["search", str(out), "--query", QUERIES[0], "--quiet", "--model", str(tiny_model_dir)]) == 0


def test_a_server_names_the_model_of_an_index_whose_model_moved_with_its_model_option(tiny_model_dir, corpus, tmp_path):
    """The index names a folder that is gone: `sentune serve` says so naming --model, an option it has, and serves with
    the model it names (its weights checked); serve_app(Index) serves with the model the Index was opened with."""
    pytest.importorskip("fastapi")
    from conftest import free_port
    from fastapi.testclient import TestClient

    from sentune.api.index import Index
    from sentune.api.serve import serve_app
    from sentune.cli import build_parser
    from sentune.cli.serve import settings_from
    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine

    model, moved = tmp_path / "model-a", tmp_path / "models" / "model-a"
    shutil.copytree(tiny_model_dir, model)
    out = tmp_path / "index"
    Index.build(str(model), str(corpus), out, fusion="convex:0.5")
    expected = [h.id for h in Index.open(out).search(QUERIES[0], top_k=3)]
    moved.parent.mkdir()
    model.rename(moved)

    def settings(*extra: str):
        return settings_from(build_parser().parse_args(["serve", str(out), "--port", str(free_port()), *extra]))

    with pytest.raises(UserError, match=r"no such folder.*\(--model\)"):
        Engine(settings())
    served = settings("--model", str(moved))
    assert served.index_model == str(moved.resolve())
    with TestClient(create_app(served, Engine(served)), base_url="http://localhost") as client:  # the command answers loopback names
        reply = client.post("/search", json={"query": QUERIES[0], "top_k": 3})
        assert reply.status_code == 200 and [h["id"] for h in reply.json()["results"][0]["hits"]] == expected
        assert client.get("/health").json()["model"] == "model-a"
    with pytest.raises(UserError, match=r"built by a model with weights .*--model"):
        Engine(settings("--model", str(other_model(tiny_model_dir, tmp_path / "other"))))
    with pytest.raises(UserError, match=r"--model .*: only with an index"):
        settings_from(build_parser().parse_args(["serve", str(moved), "--port", str(free_port()), "--model", str(moved)]))
    for app in (serve_app(Index.open(out, model=str(moved))), serve_app(str(out), index_model=str(moved))):
        with TestClient(app) as client:
            reply = client.post("/search", json={"query": QUERIES[0], "top_k": 3})
            assert reply.status_code == 200 and [h["id"] for h in reply.json()["results"][0]["hits"]] == expected
    with pytest.raises(UserError, match=r"index_model='.*nowhere': no such folder"):
        serve_app(str(out), index_model=str(tmp_path / "nowhere"))
