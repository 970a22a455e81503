"""A newcomer's first hour (issue 16): wrong data, a mistyped model, an unwritable output, file modes,
blank input lines and an empty --resume each get one clear line, fast, and leave nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_recipe

from sentune.cli import main

SHARED = Path(os.environ.get("SENTUNE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
STSB = "senteval/STS/STSBenchmark"


@pytest.fixture
def cut_stsb(tmp_path) -> Path:
    """STS-B with its test file cut inside the last field of row 808: every line still has 7 fields."""
    if not (SHARED / STSB / "sts-test.csv").is_file():
        pytest.skip("needs the shared data directory (SENTUNE_DATA)")
    data = tmp_path / "data"
    shutil.copytree(SHARED / STSB, data / STSB)
    sums = [line for line in (SHARED / "SHA256SUMS").read_text().splitlines() if STSB in line]
    (data / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    raw = (data / STSB / "sts-test.csv").read_bytes()
    lines = raw.split(b"\n")
    cut = b"\n".join(lines[:807]) + b"\n" + lines[807][: len(lines[807]) - 5]
    (data / STSB / "sts-test.csv").write_bytes(cut)
    return data


def test_a_cut_task_file_is_an_error_naming_file_and_counts(cut_stsb, tiny_model_dir, tmp_path, capsys, checked_data):
    out = tmp_path / "eval"
    code = main(["eval", "--model", str(tiny_model_dir), "--tasks", "STS-B", "--data", str(cut_stsb), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "sts-test.csv" in err and "STS-B has 808 examples, the catalog expects 1379" in err and "sentune data check" in err
    assert not (out / "results.json").exists()


def test_a_file_edited_in_place_differs_from_its_checksum(cut_stsb, tiny_model_dir, tmp_path, capsys, checked_data):
    test_file = cut_stsb / STSB / "sts-test.csv"
    shutil.copy(SHARED / STSB / "sts-test.csv", test_file)
    text = test_file.read_text(encoding="utf-8").replace("\t5.000\t", "\t4.000\t", 1)  # one gold score changed, same count
    test_file.write_text(text, encoding="utf-8")
    assert main(["eval", "--model", str(tiny_model_dir), "--tasks", "STS-B", "--data", str(cut_stsb), "--quiet"]) == 2
    assert "STS-B: the file differs from" in capsys.readouterr().err


def test_allow_modified_data_scores_and_records_it(cut_stsb, tiny_model_dir, tmp_path, checked_data):
    out = tmp_path / "eval"
    args = ["eval", "--model", str(tiny_model_dir), "--tasks", "STS-B", "--data", str(cut_stsb), "--out", str(out), "--quiet"]
    assert main([*args, "--allow-modified-data"]) == 0
    meta = json.loads((out / "results.json").read_text())["meta"]
    assert "STS-B has 808 examples, the catalog expects 1379" in meta["modified_data"][0]


def test_a_mistyped_model_fails_offline_without_trying_the_hub(tmp_path, capsys, monkeypatch):
    """How fast: benchmarks/runners/cli_errors.py (a timing belongs in a benchmark, not a unit test)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert main(["encode", "--model", "nope-model", "in.txt", "o.npy"]) == 2
    err = capsys.readouterr().err
    assert err == "sentune: error: --model nope-model: no such folder, and not in the hub cache (HF_HUB_OFFLINE is set)\n"
    assert main(["eval", "--model", "./nope-model"]) == 2 and "--model ./nope-model: no such folder" in capsys.readouterr().err


def test_an_unwritable_output_fails_before_the_model_loads(tiny_model_dir, tmp_path, capsys, monkeypatch):
    import sentune.core.models

    monkeypatch.setattr(sentune.core.models, "load_model_with_runtime", lambda *a, **k: pytest.fail("the model was loaded"))
    (tmp_path / "in.txt").write_text("a man plays\n")
    (tmp_path / "afile").write_text("")
    assert main(["encode", "--model", str(tiny_model_dir), str(tmp_path / "in.txt"), str(tmp_path / "afile" / "o.npy")]) == 2
    assert capsys.readouterr().err == f"sentune: error: output {tmp_path / 'afile' / 'o.npy'}: {tmp_path / 'afile'} is a file, not a folder\n"
    assert main(["encode", "--model", str(tiny_model_dir), str(tmp_path / "in.txt"), str(tmp_path / "o.txt")]) == 2
    assert "use a .npy or .jsonl file name" in capsys.readouterr().err
    assert main(["whiten", "--model", str(tiny_model_dir), "--out", str(tmp_path / "afile" / "m")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_saved_files_follow_the_umask(tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import train_tiny

    old = os.umask(0o022)
    try:
        run = train_tiny(tmp_path, "simcse", tiny_model_dir, tiny_data_dir)
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(run / "model") == 0o755
    assert all(mode(p) == 0o644 for p in (run / "model").rglob("*") if p.is_file())
    assert all(mode(run / name) == 0o644 for name in ("config.yaml", "results.json", "results.md"))


def test_blank_lines_in_encode_are_reported_and_keep_row_alignment(tiny_model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("a man plays\n\nthe dog runs\n   \n")
    assert main(["encode", "--model", str(tiny_model_dir), "--pooling", "mean", str(source), str(tmp_path / "o.npy"), "--quiet"]) == 0
    vectors = np.load(tmp_path / "o.npy")
    assert vectors.shape[0] == 4  # row i is line i
    err = capsys.readouterr().err
    assert "2 blank lines (first: line 2) encoded as empty strings" in err


def test_resume_with_nothing_to_resume_says_so(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"batch_size": 8, "max_steps": 2, "eval_steps": 2, "patience": 0})
    assert main(["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir), "--resume"]) == 0
    assert "nothing to resume in" in capsys.readouterr().err


def test_data_check_says_which_files_failed(tmp_path):
    from sentune.data.check import checksum_report

    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(name)
    (tmp_path / "SHA256SUMS").write_text("".join(f"{'0' * 64}  {n}\n" for n in ("a.txt", "b.txt")) + f"{'0' * 64}  missing.txt\n")
    lines, ok = checksum_report(tmp_path)
    assert not ok
    assert lines[-1] == "FAIL sha256: 3 of 3 files listed in SHA256SUMS failed (a.txt, b.txt, missing.txt)"


def test_caches_live_in_one_folder_and_can_be_listed_and_cleared(tmp_path, monkeypatch, capsys):
    import time as clock

    from sentune.core.cache import cache_dir

    monkeypatch.delenv("SENTUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "sentune"
    monkeypatch.setenv("SENTUNE_CACHE", str(tmp_path / "c"))
    (tmp_path / "c").mkdir()
    np.save(tmp_path / "c" / "sg-views-old.npy", np.zeros(10))
    np.save(tmp_path / "c" / "sed-targets-new.npy", np.zeros(1000))
    old = clock.time() - 10 * 86400
    os.utime(tmp_path / "c" / "sg-views-old.npy", (old, old))
    assert main(["cache", "list"]) == 0
    listing = capsys.readouterr().out
    assert f"{tmp_path / 'c'}: 2 entries" in listing and listing.index("sed-targets-new") < listing.index("sg-views-old")
    assert main(["cache", "clear", "--older-than", "5"]) == 0
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["sed-targets-new.npy"]
    assert main(["cache", "clear"]) == 0 and not list((tmp_path / "c").iterdir())


@pytest.mark.slow
def test_overwrite_replaces_a_finished_run_only_when_asked(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"batch_size": 8, "max_steps": 2, "eval_steps": 2, "patience": 0})
    args = ["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)]
    assert main(args) == 0
    first = (tmp_path / "run" / "results.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(args) == 2 and "holds a finished run (results.json): choose another --out, or pass --overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    assert (tmp_path / "run" / "results.json").stat().st_mtime_ns != first


@pytest.mark.slow
def test_training_output_is_a_banner_and_one_line_per_evaluation(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    recipe = tiny_recipe(
        tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"batch_size": 8, "max_steps": 10, "eval_steps": 5, "patience": 0, "logging_steps": 1}
    )
    assert main(["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sentune train: method simcse (recipe r) on model {tiny_model_dir}\n")
    assert "10 steps at batch 8, evaluated on STS-B-dev every 5 steps" in out
    assert "expected: " in out and " s a step, so about " in out
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("step ")] == ["step 5", "step 10"]
    assert "{'" not in out and "Warning" not in out  # no raw Trainer dicts, no library warnings on stdout
