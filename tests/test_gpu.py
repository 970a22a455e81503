"""Every method's training, evaluation, encode and every post-processor on a CUDA device (marked `gpu`,
skipped without CUDA; CI has none: run on a GPU machine with `bash scripts/test.sh -m gpu`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sentune.cli import main

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

SENTENCE_METHODS = ["sg", "sg-opt", "simcse", "mirror", "mirror-char", "flow-joint", "st-mnrl", "st-ct", "ct"]


def _train(tmp_path, method, model, data_dir, train_data="wiki", params=None, training=None):
    from conftest import train_tiny

    run = train_tiny(tmp_path, method, model, data_dir, train_data=train_data, params=params, training={"device": "cuda", **(training or {})})
    meta = json.loads((run / "results.json").read_text())["meta"]
    assert meta["training_device"].startswith("cuda") and meta["device"].startswith("cuda")
    return run


@pytest.mark.parametrize("method", SENTENCE_METHODS)
def test_method_trains_on_cuda(method, tiny_model_dir, tiny_data_dir, tmp_path):
    params = {"head_hidden": 16} if method.startswith("sg") else {}
    _train(tmp_path, method, tiny_model_dir, tiny_data_dir, params=params)


@pytest.mark.parametrize("method", ["nli", "sts-regression", "multitask"])
def test_labelled_methods_train_on_cuda(method, tiny_model_dir, tiny_data_dir, tmp_path):
    _train(tmp_path, method, tiny_model_dir, tiny_data_dir, training={"max_sentences": 16})


@pytest.mark.parametrize("method", ["bt", "bt-sg-opt"])
def test_paraphrase_methods_train_on_cuda(method, tiny_model_dir, tiny_data_dir, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"a man plays {w}\ta man is playing {w}\n" for w in ["guitar", "piano", "ball", "food", "car", "cat", "dog", "kids"]))
    _train(tmp_path, method, tiny_model_dir, tiny_data_dir, train_data=f"pairs:{pairs}", params={"head_hidden": 16})


def test_sed_distils_on_cuda(tiny_model_dir, tiny_data_dir, tmp_path):
    members = [str(_train(tmp_path / f"m{seed}", "simcse", tiny_model_dir, tiny_data_dir, training={"seed": seed}) / "model") for seed in (1, 2)]
    _train(tmp_path, "sed", tiny_model_dir, tiny_data_dir, params={"members": members})


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_training_on_cuda(precision, tiny_model_dir, tiny_data_dir, tmp_path):
    _train(tmp_path, "simcse", tiny_model_dir, tiny_data_dir, training={"precision": precision})


def test_eval_encode_and_postprocessors_on_cuda(tiny_model_dir, tiny_data_dir, tmp_path):
    base = ["--device", "cuda", "--model", str(tiny_model_dir)]
    assert (
        main(
            [
                "eval",
                *base,
                "--pooling",
                "mean,cls",
                "--tasks",
                "STS-B",
                "--whiten",
                "target",
                "--flow",
                "target",
                "--data",
                str(tiny_data_dir),
                "--out",
                str(tmp_path / "e"),
                "--quiet",
            ]
        )
        == 0
    )
    (tmp_path / "in.txt").write_text("a man plays\nthe dog runs\n")
    assert main(["encode", *base, str(tmp_path / "in.txt"), str(tmp_path / "o.npy"), "--quiet"]) == 0
    assert np.load(tmp_path / "o.npy").shape[0] == 2
    for command in ("whiten", "flow"):
        assert (
            main([command, *base, "--pooling", "mean", "--fit-on", "tasks:STS-B", "--data", str(tiny_data_dir), "--out", str(tmp_path / command), "--quiet"])
            == 0
        )
