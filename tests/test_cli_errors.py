"""Issue 28: mistakes answer in one line with exit code 2 and change nothing on disk (the timing of the whole error
matrix is benchmarks/runners/cli_errors.py's job, not a unit test's)."""

from __future__ import annotations

import pytest
from conftest import tree_state

from sentune.cli import main


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_argparse_errors_are_one_line_too(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--no-such-option"])
    assert exit_.value.code == 2
    assert _one_line(capsys) == "sentune: error: unrecognized arguments: --no-such-option (`sentune --help` lists the options)"
    with pytest.raises(SystemExit) as exit_:
        main(["encode"])
    assert exit_.value.code == 2 and "the following arguments are required: input, output" in _one_line(capsys)


def test_data_commands_refuse_what_does_not_exist(tmp_path, capsys):
    assert main(["data", "check", str(tmp_path / "nope")]) == 2
    assert (
        _one_line(capsys)
        == f"sentune: error: {tmp_path / 'nope'}: no such folder (`sentune data download {tmp_path / 'nope'}` fetches the canonical sets into it)"
    )
    assert main(["data", "download", str(tmp_path / "d"), "--only", "senteval,bogus", "--quiet"]) == 2
    assert "--only bogus: no such source; choose from senteval" in _one_line(capsys) and not (tmp_path / "d").exists()


def test_report_of_a_missing_run_makes_no_folder(tmp_path, capsys):
    assert main(["report", str(tmp_path / "no-run"), "--out", str(tmp_path / "report")]) == 2
    assert _one_line(capsys) == f"sentune: error: {tmp_path / 'no-run'}: no such run folder" and not (tmp_path / "report").exists()


def test_adapt_refuses_a_binary_corpus_and_names_a_missing_dev_file_plainly(tiny_model_dir, tmp_path, capsys):
    corpus, binary = tmp_path / "corpus.txt", tmp_path / "binary.txt"
    corpus.write_text("".join(f"sentence number {i}\n" for i in range(150)))
    binary.write_bytes(b"\x00" * 4096)
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(f"a man {i}\ta guy {i}\t{i % 5}\n" for i in range(120)))
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "note.txt").write_text("the user's own file\n")
    before = tree_state(tmp_path)
    out = ["--model", str(tiny_model_dir), "--out", str(kept / "run"), "--quiet"]
    assert main(["adapt", "--corpus", str(binary), "--dev", str(dev), *out]) == 2
    assert _one_line(capsys) == f"sentune: error: {binary}:1: a NUL byte at column 1: a binary (or UTF-16) file, not utf-8 text"
    assert main(["adapt", "--corpus", str(corpus), "--dev", str(tmp_path / "missing.tsv"), *out]) == 2
    assert _one_line(capsys) == f"sentune: error: {tmp_path / 'missing.tsv'}: file not found"  # no hint at --data: it is the user's file
    assert tree_state(tmp_path) == before and not (kept / "run").exists()


@pytest.mark.parametrize("command", [["encode"], ["paraphrase"]])
def test_a_missing_input_of_encode_or_paraphrase_is_just_not_found(tmp_path, capsys, command):
    missing = tmp_path / "missing.txt"
    assert main([*command, str(missing), str(tmp_path / ("vectors.npy" if command == ["encode"] else "pairs.tsv"))]) == 2
    assert _one_line(capsys) == f"sentune: error: {missing}: file not found"  # the user's file: no hint at --data
    assert list(tmp_path.iterdir()) == []
