"""`sentune data download` against a local HTTP server on loopback (never the internet)."""

from __future__ import annotations

import functools
import http.server
import io
import tarfile
import threading
import urllib.parse
import zipfile
from pathlib import Path

import pytest

from sentune.cli import main
from sentune.data import readers
from sentune.data.download import sources


def _serve(root: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _place(root: Path, name: str) -> Path:
    url = next(s["url"] for s in sources() if s["name"] == name)
    path = root / urllib.parse.urlsplit(url).path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _add(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def fake_hosts(tmp_path):
    root = tmp_path / "www"
    with tarfile.open(_place(root, "senteval"), "w") as tar:
        _add(tar, "downstream/STS/STSBenchmark/sts-test.csv", "main-captions\tMSRvid\t2012test\t0001\t5.000\ta man .\ta man .\n")
        _add(tar, "downstream/MR/rt-polarity.pos", "good film\n")
    _place(root, "wiki").write_text("first sentence .\n\nsecond  sentence .\nfirst sentence .\n")
    with zipfile.ZipFile(_place(root, "snli"), "w") as z:
        header = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\n"
        z.writestr("snli_1.0/snli_1.0_dev.txt", header + "neutral\tx\tx\tx\tx\tA dog .\tA cat .\n-\tx\tx\tx\tx\tNo label .\tGone .\n")
    with zipfile.ZipFile(_place(root, "sts2017"), "w") as z:
        z.writestr("STS2017.eval.v1.1/STS.input.track3.es-es.txt", "Un perro.\tUn gato.\n")
    with zipfile.ZipFile(_place(root, "scifact"), "w") as z:
        z.writestr("scifact/corpus.jsonl", '{"_id": "7", "title": "T", "text": "an abstract"}\n{"_id": "8", "title": "", "text": "another"}\n')
        z.writestr("scifact/queries.jsonl", '{"_id": "1", "text": "a claim"}\n{"_id": "2", "text": "a test claim"}\n')
        z.writestr("scifact/qrels/train.tsv", "query-id\tcorpus-id\tscore\r\n1\t7\t1\r\n")
        z.writestr("scifact/qrels/test.tsv", "query-id\tcorpus-id\tscore\r\n2\t8\t1\r\n")
    server = _serve(root)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_converts_into_layout(fake_hosts, tmp_path):
    data = tmp_path / "data"
    assert main(["data", "download", str(data), "--mirror", fake_hosts, "--only", "senteval,wiki,snli,sts2017", "--quiet"]) == 0
    assert readers.read_stsb_csv(data / "senteval/STS/STSBenchmark/sts-test.csv")[0].score == 5.0
    assert (data / "senteval/MR/rt-polarity.pos").read_text() == "good film\n"
    assert readers.read_corpus(data / "corpora/wiki/wiki_sentences.txt") == ["first sentence .", "second sentence ."]
    pairs = readers.read_nli_senteval(data / "corpora/nli/SNLI", "dev")
    assert [(p.a, p.b, p.label) for p in pairs] == [("A dog .", "A cat .", "neutral")]  # '-' gold dropped as SentEval does
    assert (data / "multilingual/STS2017/STS.input.track3.es-es.txt").is_file()
    assert not list((data / ".downloads").glob("*.part"))


def test_download_places_a_beir_set_where_the_retrieval_tasks_read_it(fake_hosts, tmp_path):
    from sentune.data.catalog import load_task, select_tasks

    data = tmp_path / "data"
    assert main(["data", "download", str(data), "--mirror", fake_hosts, "--only", "scifact", "--quiet"]) == 0
    train = load_task(select_tasks("scifact-train")[0], data)
    test = load_task(select_tasks("scifact-test")[0], data)
    assert [(q.id, q.relevant) for q in train["queries"]] == [("1", {"7": 1})]
    assert [(q.id, q.relevant) for q in test["queries"]] == [("2", {"8": 1})]
    assert [d.text for d in train["corpus"]] == ["T an abstract", "another"]


def test_download_failure_is_clear(tmp_path, capsys):
    server = _serve(tmp_path)  # serves an empty folder: every file is a 404
    try:
        code = main(["data", "download", str(tmp_path / "d"), "--mirror", f"http://127.0.0.1:{server.server_address[1]}", "--only", "wiki", "--quiet"])
    finally:
        server.shutdown()
    assert code == 2
    assert "download of http://127.0.0.1" in capsys.readouterr().err
    assert not list((tmp_path / "d" / ".downloads").glob("*"))


def test_download_without_dir_fills_the_default_folder_every_command_reads(fake_hosts, tmp_path, monkeypatch, capsys):
    from sentune.data.catalog import resolve_data_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SENTUNE_DATA", raising=False)
    with pytest.raises(readers.DataError, match="sentune data download"):
        resolve_data_dir(None)  # nothing downloaded yet: the error names the three ways
    assert main(["data", "download", "--mirror", fake_hosts, "--only", "wiki", "--quiet"]) == 0
    default = tmp_path / "xdg" / "sentune" / "data"
    assert str(default) in capsys.readouterr().out
    assert resolve_data_dir(None) == default
    assert readers.read_corpus(default / "corpora/wiki/wiki_sentences.txt") == ["first sentence .", "second sentence ."]
    monkeypatch.setenv("SENTUNE_DATA", str(tmp_path))
    assert resolve_data_dir(None) == tmp_path  # the environment variable wins over the default folder
