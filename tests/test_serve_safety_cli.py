"""What `sentune index`, `sentune search` and `sentune serve` do with input that used to break them or mislead: lone
surrogates in a corpus, a queries file or --query (read as U+FFFD); terminal escapes in a document (printed escaped);
a damaged index under `sentune index` (refused, not reported built); a tiny IVF-PQ (said); BM25 hits without a shared
term (none); a serve key that could never match, a hybrid without a fusion (refused before the model loads); --run
naming a folder; a corpus id with a space; a queries .tsv header; FAISS's import log under --quiet."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import tree_state
from test_search_errors import built, copy_index, no_model, one_error  # noqa: F401 (fixtures)

from sentune.cli import main
from sentune.search.damaged import DAMAGED

pytest.importorskip("bm25s")


def write_corpus(path, rows: list[str]) -> None:
    path.write_text("".join(row + "\n" for row in rows), encoding="utf-8")


def test_lone_surrogates_in_a_corpus_queries_and_query_are_read_as_the_replacement_character(tiny_model_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(
        corpus,
        [
            r'{"_id": "d0", "title": "half \ud800", "text": "a man plays the guitar \udfff"}',
            r'{"_id": "d1", "text": "the dog runs in the park"}',
            r'{"_id": "d2", "text": "a pair \ud83d\ude00 stays one character"}',
        ],
    )
    index = tmp_path / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(index), "--quiet", "--fusion", "rrf"]) == 0
    stored = [json.loads(line) for line in (index / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    assert stored[0]["text"] == "half \ufffd a man plays the guitar \ufffd" and stored[2]["text"] == "a pair \U0001f600 stays one character"
    queries = tmp_path / "queries.jsonl"
    write_corpus(queries, [r'{"_id": "q1", "text": "guitar \ud800"}'])
    capsys.readouterr()
    assert main(["search", str(index), "--queries", str(queries), "--top", "1", "--quiet"]) == 0
    assert capsys.readouterr().out.split()[:3] == ["q1", "Q0", "d0"]
    # an undecodable byte of a command line argument reaches Python as a lone surrogate (surrogateescape)
    assert main(["search", str(index), "--query", "guitar \udcff", "--top", "1", "--quiet"]) == 0
    assert "d0" in capsys.readouterr().out


def test_terminal_escapes_in_documents_are_printed_escaped(tiny_model_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(
        corpus, [r'{"_id": "d0", "text": "a man \u001b[2J\u001b]0;owned\u0007 plays \u202e the guitar"}', r'{"_id": "d\u001b[31m1", "text": "the dog"}']
    )
    index = tmp_path / "index"
    assert main(["index", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(index), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["search", str(index), "--query", "guitar", "--top", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "a man \\x1b[2J\\x1b]0;owned\\x07 plays \\u202e the guitar" in out and "d\\x1b[31m1" in out


def test_index_over_a_damaged_index_is_refused_not_reported_built(built, tmp_path, capsys, no_model):  # noqa: F811
    index = copy_index(built, tmp_path)
    vectors = np.load(index / "vectors.npy")
    np.save(index / "vectors.npy", vectors[:-3])
    before = tree_state(index)
    args = ["index", "--model", str(built["model"]), "--corpus", str(built["corpus"]), "--out", str(index), "--fusion", "convex:0.4"]
    message = one_error(capsys, args)
    assert str(index / "vectors.npy") in message and DAMAGED in message
    np.save(index / "vectors.npy", vectors)
    (index / "bm25" / "lexical.json").write_text("{}")
    assert "bm25" in one_error(capsys, args) and tree_state(index) != before  # the BM25 side: named too
    assert not any("index:" in line for line in capsys.readouterr().out.splitlines())


def test_a_tiny_ivfpq_says_what_it_builds_and_a_misfit_is_refused_before_the_model_loads(built, tmp_path, capsys, monkeypatch):  # noqa: F811
    pytest.importorskip("faiss")
    args = ["index", "--model", str(built["model"]), "--corpus", str(built["corpus"]), "--quiet"]
    import sentune.core.models

    loaded = []
    real_load = sentune.core.models.load_model_with_runtime
    monkeypatch.setattr(sentune.core.models, "load_model_with_runtime", lambda *a, **k: loaded.append(a) or real_load(*a, **k))
    message = one_error(capsys, [*args, "--out", str(tmp_path / "too-many-lists"), "--ann", "ivfpq:nlist=64,pq=8"])
    assert "nlist=64 needs 2,496 documents" in message and loaded == [] and not (tmp_path / "too-many-lists").exists()
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "tiny"), "--ann", "ivfpq:pq=8"]) == 0
    captured = capsys.readouterr()
    assert "150 documents train at most 2 centroids" in captured.err and "nbits=1, not 8, over nlist=2 lists" in captured.err
    assert "ivfpq (nlist 2, pq 8, nbits 1" in captured.out


def test_bm25_returns_only_documents_sharing_a_term(built, capsys):  # noqa: F811
    capsys.readouterr()
    assert main(["search", str(built["folder"] / "hybrid"), "--system", "bm25", "--query", "zebra quantum", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "no document matches" in captured.err
    from sentune.data.beir import Query
    from sentune.data.text_files import Source
    from sentune.search.index import SearchIndex

    index = SearchIndex.open(built["folder"] / "hybrid", "bm25")
    word = json.loads(built["corpus"].read_text().splitlines()[3])["text"].split()[2].strip(".").lower()
    hits = index.search([Query("q", word, Source("test", 1))], 150)[0]
    assert 0 < len(hits) < 150 and all(hit.score > 0 for hit in hits)
    scores = index.lexical().scores([word])[0]
    assert len(hits) == int((scores > 0).sum())  # every matching document, and no other


def test_serve_refuses_a_key_that_could_never_match_and_a_missing_fusion_before_loading(built, tmp_path, capsys, monkeypatch, no_model):  # noqa: F811
    import sentune.serve.engine

    monkeypatch.setattr(sentune.serve.engine, "Engine", lambda *a: pytest.fail("the model was loaded"))
    monkeypatch.delenv("SENTUNE_API_KEY", raising=False)
    hybrid, dense = str(built["folder"] / "hybrid"), str(built["folder"] / "dense")
    assert one_error(capsys, ["serve", hybrid, "--api-key", ""]) == "sentune: error: --api-key: empty"
    assert "--api-key: a space at position 4" in one_error(capsys, ["serve", hybrid, "--api-key", "abc def"])
    assert "--api-key: the character '\\r' at position 4" in one_error(capsys, ["serve", hybrid, "--api-key", "abc\r"])
    monkeypatch.setenv("SENTUNE_API_KEY", " abc")
    assert "$SENTUNE_API_KEY: a space at position 1" in one_error(capsys, ["serve", hybrid])
    monkeypatch.delenv("SENTUNE_API_KEY")
    key_file = tmp_path / "key"
    key_file.write_bytes(b"abc\r\n")  # saved on Windows
    assert f"--api-key-file {key_file}: the character '\\r' at position 4" in one_error(capsys, ["serve", hybrid, "--api-key-file", str(key_file)])
    key_file.write_text("abc\nsecond\n")
    assert "more than one line" in one_error(capsys, ["serve", hybrid, "--api-key-file", str(key_file)])
    assert "give one of them" in one_error(capsys, ["serve", hybrid, "--api-key", "abc", "--api-key-file", str(key_file)])
    message = one_error(capsys, ["serve", dense, "--system", "hybrid"])
    assert message.startswith("sentune: error: --system hybrid:") and "holds no fusion weight" in message


def test_serve_reads_its_key_from_a_file_and_its_help_points_away_from_ps(built, tmp_path, capsys):  # noqa: F811
    from unittest import mock

    from sentune.cli.app import build_parser
    from sentune.cli.serve import settings_from

    key_file = tmp_path / "key"
    key_file.write_text("s3cret-key\n")
    with mock.patch("sentune.serve.settings.check_address"):
        settings = settings_from(build_parser().parse_args(["serve", str(built["folder"] / "hybrid"), "--api-key-file", str(key_file)]))
    assert settings.api_key == "s3cret-key" and settings.allowed_hosts is None
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "$SENTUNE_API_KEY or --api-key-file" in help_text and "(ps)" in help_text


def test_run_naming_a_folder_is_refused_and_nothing_is_written(built, tmp_path, capsys, no_model):  # noqa: F811
    before = tree_state(tmp_path)
    message = one_error(capsys, ["search", str(built["folder"] / "hybrid"), "--query", "a man", "--run", f"{tmp_path / 'newdir'}/"])
    assert message == f"sentune: error: --run {tmp_path / 'newdir'}: a folder; give a file name (e.g. {tmp_path / 'newdir' / 'search.run'})"
    assert tree_state(tmp_path) == before and not (tmp_path / "newdir").exists()


def test_a_corpus_id_with_a_space_is_refused_at_index_time_naming_its_line(built, tmp_path, capsys, no_model):  # noqa: F811
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus, ['{"_id": "d0", "text": "a man"}', '{"_id": "d 1", "text": "the dog"}'])
    message = one_error(capsys, ["index", "--model", str(built["model"]), "--corpus", str(corpus), "--out", str(tmp_path / "index")])
    assert message.startswith(f"sentune: error: {corpus}:2: document id 'd 1' holds whitespace") and not (tmp_path / "index").exists()


def test_a_queries_tsv_header_is_not_searched(built, tmp_path, capsys):  # noqa: F811
    queries = tmp_path / "queries.tsv"
    queries.write_text("query-id\tquery\nq1\ta man plays\n")
    capsys.readouterr()
    assert main(["search", str(built["folder"] / "hybrid"), "--queries", str(queries), "--top", "2", "--quiet"]) == 0
    assert {line.split()[0] for line in capsys.readouterr().out.splitlines()} == {"q1"}
    from sentune.data.beir import read_queries

    queries.write_text("id\ttext\n")
    with pytest.raises(Exception, match="no queries"):
        read_queries(queries)
    raw_tab = tmp_path / "queries.jsonl"
    raw_tab.write_text('{"_id": "q1", "text": "a\tman"}\n')  # a tab inside a JSON string: json's message ends with "at"
    with pytest.raises(Exception, match=r"queries.jsonl:1: not a JSON object: Invalid control character at column 25$"):
        read_queries(raw_tab)


def test_faiss_logs_nothing_on_import_without_verbose():
    pytest.importorskip("faiss")
    code = "from sentune.cli.base import configure_output; configure_output(False); import faiss"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
