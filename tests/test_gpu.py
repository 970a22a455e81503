"""Every method's training, evaluation, encode and every post-processor on a CUDA device (marked `gpu`,
skipped without CUDA; CI has none: run on a GPU machine with `bash scripts/test.sh -m gpu`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sentune.cli import main
from sentune.methods.registry import method_names

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _train(tmp_path, method, model, data_dir, train_data="wiki", params=None, training=None, data=None):
    from conftest import train_tiny
    from method_setups import train_given

    tmp_path.mkdir(parents=True, exist_ok=True)
    training = {"device": "cuda", **(training or {})}
    if data is not None:  # given as Python data (tests/method_setups.py)
        run = train_given(tmp_path, method, model, data_dir, data=data, params=params, training=training)
    else:
        run = train_tiny(tmp_path, method, model, data_dir, train_data=train_data, params=params, training=training)
    meta = json.loads((run / "results.json").read_text())["meta"]
    assert meta["training_device"].startswith("cuda") and meta["device"].startswith("cuda")
    return run


@pytest.mark.parametrize("method", method_names())  # every registered method, with tests/method_setups.py's set-up
def test_method_trains_on_cuda(method, tiny_model_dir, tiny_data_dir, tmp_path):
    from method_setups import tiny_training_args

    _train(tmp_path, method, tiny_model_dir, tiny_data_dir, **tiny_training_args(method, tmp_path, tiny_model_dir))


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


def test_regulariser_on_cuda_matches_the_cpu_sum_and_its_gradient():
    """SG's λ‖θ_T − θ_F‖² takes the foreach kernels on a GPU: the same value and gradient as the CPU's term-by-term sum."""
    from sentune.methods.sg import squared_distance

    torch.manual_seed(0)
    tuned, frozen = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3)), torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3))
    on_cpu = squared_distance(tuned, frozen)
    on_cpu.backward()
    expected = [p.grad.clone() for p in tuned.parameters()]
    tuned.zero_grad()
    tuned, frozen = tuned.cuda(), frozen.cuda()
    on_gpu = squared_distance(tuned, frozen)
    on_gpu.backward()
    torch.testing.assert_close(on_gpu.cpu(), on_cpu.detach(), rtol=1e-6, atol=0)
    for grad, want in zip((p.grad.cpu() for p in tuned.parameters()), expected, strict=True):
        torch.testing.assert_close(grad, want, rtol=1e-6, atol=1e-7)


def test_whitening_covariance_on_cuda_equals_numpy():
    from sentune.postprocess.whitening import mean_and_covariance

    x = np.random.default_rng(0).standard_normal((500, 16))
    mean, covariance = mean_and_covariance(x, "cuda")
    np.testing.assert_allclose(mean, x.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(covariance, np.cov(x.T), rtol=1e-10, atol=1e-12)


def test_a_nan_loss_on_cuda_stops_training_with_the_step(tiny_model_dir, tiny_data_dir, tmp_path, capsys):
    """On a GPU the NaN guard reads each loss one step late (no sync a step): the run still stops, naming step 0."""
    from conftest import tiny_recipe

    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, params={"temperature": 1e-45}, training={"device": "cuda", "max_steps": 3})
    assert main(["train", str(recipe), "--out", str(tmp_path / "run"), "--data", str(tiny_data_dir)]) == 2
    assert "the loss is nan at step 0" in capsys.readouterr().err


def test_adapt_runs_on_cuda(tiny_model_dir, tmp_path):
    """`sentune adapt --device cuda`: the untuned scoring, the post-processor fits, the trained and the supervised candidates on the GPU."""
    rng = np.random.default_rng(0)
    words = "a the man woman dog cat plays runs eats guitar piano park food car street ball".split()
    sentence = lambda: " ".join(rng.choice(words, size=5))
    (tmp_path / "corpus.txt").write_text("".join(sentence() + "\n" for _ in range(400)))  # adapt needs 100 distinct
    (tmp_path / "dev.tsv").write_text("".join(f"{sentence()}\t{sentence()}\t{rng.uniform(0, 5):.2f}\n" for _ in range(120)))  # adapt needs 100
    out = tmp_path / "run"
    args = [
        "adapt",
        "--quiet",
        "--device",
        "cuda",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(tmp_path / "corpus.txt"),
        "--dev",
        str(tmp_path / "dev.tsv"),
    ]
    assert main([*args, "--methods", "poolings,whitening,flow,simcse,supervised", "--budget", "3", "--out", str(out)]) == 0
    for trained in ("simcse", "supervised"):  # supervised: the refit on the selection part (its folds train the same way)
        run = json.loads((out / "candidates" / trained / "run" / "results.json").read_text())
        assert run["meta"]["training_device"].startswith("cuda"), trained
    assert json.loads((out / "results.json").read_text())["choice"]["name"]


def test_index_and_search_on_cuda_equal_the_cpu(tiny_model_dir, tmp_path):
    """`sentune index --device cuda` writes the vectors the CPU writes (within float noise) and searches the same."""
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    from test_adapt_retrieval import _toy_beir

    dev, _ = _toy_beir(tmp_path / "toy")
    for device in ("cpu", "cuda"):
        args = ["index", "--quiet", "--device", device, "--model", str(tiny_model_dir), "--corpus", str(dev / "corpus.jsonl"), "--fusion", "convex:0.5"]
        assert main([*args, "--out", str(tmp_path / device)]) == 0
        assert (
            main(
                [
                    "search",
                    str(tmp_path / device),
                    "--device",
                    device,
                    "--queries",
                    str(dev / "queries.jsonl"),
                    "--run",
                    str(tmp_path / f"{device}.run"),
                    "--quiet",
                ]
            )
            == 0
        )
    np.testing.assert_allclose(np.load(tmp_path / "cuda" / "vectors.npy"), np.load(tmp_path / "cpu" / "vectors.npy"), atol=1e-4)
    top = lambda path: [line.split()[2] for line in path.read_text().splitlines() if line.split()[3] == "1"]  # noqa: E731
    assert sum(a == b for a, b in zip(top(tmp_path / "cpu.run"), top(tmp_path / "cuda.run"), strict=True)) >= 98
