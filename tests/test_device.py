"""Devices and precision on the CPU: bad device options fail in one line; bf16 training runs with losses
computed in float32; fp16 is refused without CUDA; results record device and precision."""

from __future__ import annotations

import json
import math

import pytest
import torch

from sentune.cli import main


def test_losses_stay_float32_under_bf16_autocast():
    from sentune.methods.mirror import mirror_infonce
    from sentune.methods.sg import opt3_loss

    g = torch.Generator().manual_seed(0)
    a, m, views = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g), torch.randn(6, 3, 8, generator=g)
    c, v = torch.nn.functional.normalize(a, dim=-1), torch.nn.functional.normalize(views, dim=-1)
    exact = mirror_infonce(a, m, 0.05), opt3_loss(c, v, 0.05)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = mirror_infonce(a, m, 0.05), opt3_loss(c, v, 0.05)
        lowered = (a @ m.T).dtype  # autocast is really on for other matmuls
    assert lowered == torch.bfloat16
    assert all(u.dtype == torch.float32 and u.item() == e.item() for u, e in zip(under, exact, strict=True))


def test_bad_devices_fail_in_one_line(capsys, tmp_path, tiny_data_dir):
    assert main(["eval", "--device", "tpu", "--model", "default"]) == 2
    assert capsys.readouterr().err == "sentune: error: --device tpu: expected auto, cpu, cuda or cuda:N\n"
    if not torch.cuda.is_available():
        (tmp_path / "in.txt").write_text("a sentence\n")  # the input is checked first: the device is asked for when the model loads
        assert main(["encode", "--device", "cuda", "--model", "default", str(tmp_path / "in.txt"), str(tmp_path / "o.npy")]) == 2
        assert "--device cuda: no CUDA device here" in capsys.readouterr().err
        assert main(["train", "005-ct", "training.precision=fp16", "--out", str(tmp_path / "r"), "--data", str(tiny_data_dir)]) == 2
        assert "training.precision fp16: needs a CUDA device (use bf16 on the CPU)" in capsys.readouterr().err


@pytest.mark.slow
def test_bf16_training_on_the_cpu_records_device_and_precision(tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import train_tiny

    run = train_tiny(tmp_path, "simcse", tiny_model_dir, tiny_data_dir, training={"precision": "bf16", "device": "cpu", "logging_steps": 1})
    meta = json.loads((run / "results.json").read_text())["meta"]
    assert meta["training_device"] == "cpu" and meta["training_precision"] == "bf16" and meta["device"] == "cpu"
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines() if "loss" in json.loads(line)]
    assert losses and all(math.isfinite(loss) for loss in losses)  # neither NaN nor ±inf
    assert "precision bf16" in (run / "model" / "README.md").read_text()


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_eval_records_its_device(device, tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("SENTUNE_DEVICE")  # conftest keeps tests on the CPU; auto must find CUDA where there is one
    out = tmp_path / "eval"
    assert (
        main(["eval", "--device", device, "--model", str(tiny_model_dir), "--tasks", "STS-B", "--data", str(tiny_data_dir), "--out", str(out), "--quiet"]) == 0
    )
    expected = "cuda:0" if device == "auto" and torch.cuda.is_available() else "cpu"
    assert json.loads((out / "results.json").read_text())["meta"]["device"] == expected


def test_the_environment_is_only_a_commands_default(monkeypatch, capsys):
    """resolve_device never reads SENTUNE_DEVICE; a command takes it as --device's default, and an explicit --device
    wins (that a command writes nothing there: tests/test_cli_state.py)."""
    from sentune.core.device import resolve_device

    monkeypatch.setenv("SENTUNE_DEVICE", "tpu")
    assert resolve_device("cpu") == "cpu" and resolve_device(None) == resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert main(["eval", "--model", "default"]) == 2
    assert capsys.readouterr().err == "sentune: error: --device tpu: expected auto, cpu, cuda or cuda:N\n"
    assert main(["eval", "--device", "cpu", "--model", "./no-such-model"]) == 2  # past the device check: the model's
    assert "--model ./no-such-model: no such folder" in capsys.readouterr().err


@pytest.mark.slow  # seconds: plain `pytest -q` stays short; scripts/test.sh runs it
def test_an_api_call_that_asks_for_the_cpu_fits_everything_there_with_cuda_present(monkeypatch, tiny_model_dir, tmp_path):
    """With CUDA faked present and SENTUNE_DEVICE=cuda, adapt called from Python with device="cpu" trains (simcse, and
    SED's members and learner), fits whitening and the flow, interpolates and scores on the CPU: anything that chose
    its own device would pick CUDA, which this build cannot run (torch raises). The trainer's `device` argument is
    what an auto recipe uses."""
    import numpy as np
    from conftest import _sentence

    from sentune.adaptation.budget import Budget
    from sentune.adaptation.inputs import AdaptConfig, prepare
    from sentune.adaptation.run import adapt
    from sentune.data.user_data import write_corpus, write_scored_pairs

    rng = np.random.default_rng(0)
    write_corpus(tmp_path / "corpus.txt", [_sentence(rng) for _ in range(120)])
    write_scored_pairs(tmp_path / "dev.tsv", [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 5))) for _ in range(100)])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    # Library bookkeeping that only asks whether CUDA exists: sentence-transformers' trainer builds default
    # TrainingArguments (for its model card), which select cuda:0, and transformers' checkpoints save the CUDA random
    # state. Neither places anything on CUDA; anything placed there still raises in this CPU build.
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda.random, "get_rng_state", lambda device="cuda": torch.zeros(1, dtype=torch.uint8))
    monkeypatch.setenv("SENTUNE_DEVICE", "cuda")
    from sentune.core.device import resolve_device

    assert resolve_device(None) == "cuda"  # the fake holds: an unchosen device would be CUDA
    config = AdaptConfig(
        corpus=tmp_path / "corpus.txt",
        model=str(tiny_model_dir),
        dev=tmp_path / "dev.tsv",
        methods=("whitening", "flow", "simcse", "sed", "wise"),
        budget=Budget(steps=2),
        sed_members=2,
        show_progress=False,
        device="cpu",
    )
    out = tmp_path / "run"
    results = adapt(config, out, data_dir=None, inputs=prepare(config, out, None))
    candidates = results["candidates"]
    assert {"whitening", "flow", "simcse", "sed", "wise"} <= set(candidates)
    assert all("skipped" not in candidates[name] for name in ("whitening", "flow", "simcse", "sed")), candidates
    trained = [json.loads(p.read_text())["meta"]["training_device"] for p in out.rglob("results.json") if "training_device" in p.read_text()]
    assert trained and set(trained) == {"cpu"}
