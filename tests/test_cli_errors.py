"""Issue 28: mistakes answer in one line with exit code 2 and change nothing on disk (the timing of the whole error
matrix is benchmarks/runners/cli_errors.py's job, not a unit test's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

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


RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "runners"
PROBE = """
import contextlib, io, json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from cli_errors import cases, scratch
from sentune.cli import main
root = Path(sys.argv[2])
files = scratch(root)
os.chdir(root)
wanted = set(json.loads(sys.argv[3]))
for what, argv, message in cases(files, str(files["empty_data"])):
    if what in wanted:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        heavy = [name for name in ("torch", "sentence_transformers") if name in sys.modules]
        print(json.dumps({"case": what, "code": code, "err": err.getvalue(), "message": message, "heavy": heavy}), flush=True)
"""


def _error_cases() -> list[str]:
    sys.path.insert(0, str(RUNNER))
    try:
        from cli_errors import cases
    finally:
        sys.path.remove(str(RUNNER))
    return [what for what, _, _ in cases(defaultdict(lambda: Path("x")), "data")]


def test_every_error_of_the_matrix_answers_before_torch_loads(tmp_path):
    """The cases of benchmarks/runners/cli_errors.py (options, recipes, input files of every command), run one after
    the other in one fresh process without SENTUNE_DEVICE (so --device is auto, whose CUDA question imports torch): each
    exits 2 with its message, writes no output folder, and neither torch nor sentence-transformers has been imported
    when it answers, nor by any case before it."""
    names = _error_cases()
    env = {k: v for k, v in os.environ.items() if k not in ("SENTUNE_DEVICE", "SENTUNE_DATA")} | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(RUNNER), str(tmp_path), json.dumps(names)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["case"] for r in results] == names
    for r in results:
        assert r["code"] == 2 and r["message"] in r["err"], r
        assert r["heavy"] == [], f"{r['case']}: {', '.join(r['heavy'])} imported by the time it answered"
    assert not (tmp_path / "out").exists()
