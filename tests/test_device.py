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
        assert main(["encode", "--device", "cuda", "--model", "default", "in.txt", str(tmp_path / "o.npy")]) == 2
        assert "--device cuda: no CUDA device here" in capsys.readouterr().err
        assert main(["train", "005-ct", "training.precision=fp16", "--out", str(tmp_path / "r"), "--data", str(tiny_data_dir)]) == 2
        assert "training.precision fp16: needs a CUDA device (use bf16 on the CPU)" in capsys.readouterr().err


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


def test_auto_follows_the_device_a_command_or_the_user_chose(monkeypatch):
    """A recipe's `training.device: auto` (or a post-processor's None) takes SENTUNE_DEVICE, which --device sets;
    an explicit device wins over it."""
    from sentune.core.device import resolve_device

    monkeypatch.setenv("SENTUNE_DEVICE", "cpu")
    assert resolve_device("auto") == resolve_device(None) == "cpu"
    monkeypatch.delenv("SENTUNE_DEVICE")
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("SENTUNE_DEVICE", "tpu")
    with pytest.raises(Exception, match="--device tpu: expected auto, cpu, cuda or cuda:N"):
        resolve_device(None)
