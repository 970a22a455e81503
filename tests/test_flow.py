"""The Glow flow: invertibility, log-determinant against autograd's Jacobian, ActNorm's data-dependent
init, the exact compilation into Dense modules, and save/reload through SentenceTransformer(path)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sentune.postprocess.flow import ActNorm, Flow, GlowFlow, compile_to_dense


def _data(n=64, d=6, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 2.0).astype(np.float32)


@pytest.mark.parametrize("permutation", ["lu", "reverse"])
def test_inverse_of_forward_is_identity(permutation):
    flow = Flow(n_blocks=3, hidden=8, permutation=permutation, max_steps=30, batch_size=16).fit(_data())
    x = _data(10, seed=1)
    np.testing.assert_allclose(flow.inverse_transform(flow.transform(x)), x, atol=1e-4)


def test_logdet_equals_autograd_jacobian():
    torch.manual_seed(0)
    flow = GlowFlow(4, n_blocks=2, hidden=5).double()
    flow(torch.randn(32, 4, dtype=torch.float64))  # data-dependent init
    for layer in flow.modules():  # make every coupling non-trivial
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, std=0.5)
    x = torch.randn(3, 4, dtype=torch.float64)
    _, logdet = flow(x)
    for i in range(3):
        jacobian = torch.autograd.functional.jacobian(lambda v: flow(v.unsqueeze(0))[0][0], x[i])
        assert logdet[i].item() == pytest.approx(torch.linalg.slogdet(jacobian).logabsdet.item(), abs=1e-9)


def test_actnorm_initialises_to_zero_mean_unit_variance():
    x = torch.randn(100, 5) * torch.tensor([1.0, 2.0, 3.0, 0.5, 10.0]) + 7.0
    y, _ = ActNorm(5)(x)
    np.testing.assert_allclose(y.mean(0).detach().numpy(), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(0, unbiased=False).detach().numpy(), 1, atol=1e-4)


@pytest.mark.slow
def test_flow_training_lowers_nll_and_whitens():
    x = _data(512, seed=2)
    flow = Flow(n_blocks=3, hidden=16, epochs=60, batch_size=64, learning_rate=1e-3).fit(x)
    assert np.mean(flow.history_[-8:]) < np.mean(flow.history_[:8])
    z = flow.transform(x)
    np.testing.assert_allclose(z.mean(0), 0, atol=0.1)

    def worst_correlation(v):
        c = np.corrcoef(v.T)
        return np.abs(c - np.diag(np.diag(c))).max()

    assert worst_correlation(z) < 0.5 * worst_correlation(x)  # the mixing of the data is largely undone


def test_compiled_dense_chain_equals_flow():
    flow = Flow(n_blocks=3, hidden=8, max_steps=40).fit(_data())
    for layer in flow.flow_.modules():  # non-trivial couplings, not just their zero init
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, std=0.3)
    x = _data(20, seed=3)
    features = {"sentence_embedding": torch.from_numpy(x)}
    for module in compile_to_dense(flow.flow_):
        features = module(features)
    np.testing.assert_allclose(features["sentence_embedding"].detach().numpy(), flow.transform(x), rtol=1e-4, atol=1e-4)


def test_model_with_flow_head_reloads_identically(tiny_st, tmp_path):
    from conftest import SENTENCES, WORDS
    from sentence_transformers import SentenceTransformer

    from sentune.core.encode import Encoder
    from sentune.modules.build import save_atomic, with_pooling

    rng = np.random.default_rng(0)
    fit_sentences = [" ".join(rng.choice(WORDS, size=rng.integers(3, 10))) for _ in range(200)]
    pooled = with_pooling(tiny_st, "first-last")
    encoder = Encoder(pooled, "model", show_progress=False)
    flow = Flow(max_steps=30, hidden=8).fit(encoder.encode(fit_sentences))
    expected = flow.transform(encoder.encode(SENTENCES))
    path = save_atomic(SentenceTransformer(modules=list(pooled) + flow.to_modules(), device="cpu"), tmp_path / "flow")
    got = SentenceTransformer(str(path), device="cpu").encode(SENTENCES, convert_to_numpy=True)  # no remote code
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_nan_is_a_clear_error():
    x = _data()
    x[3, 2] = np.nan
    with pytest.raises(FloatingPointError, match="the flow's input has nan at row 3, column 2"):
        Flow(max_steps=5).fit(x)


def test_a_diverging_fit_is_a_clear_error_naming_its_step(monkeypatch):
    calls = []
    original = GlowFlow.nll

    def nll(self, batch):  # finite for two steps, then NaN: what a diverging fit produces
        calls.append(1)
        loss = original(self, batch)
        return loss if len(calls) <= 2 else loss * float("nan")

    monkeypatch.setattr(GlowFlow, "nll", nll)
    with pytest.raises(FloatingPointError, match="flow loss is nan at step 2"):
        Flow(max_steps=5).fit(_data())


def test_the_settings_checked_before_torch_loads_are_the_constructors():
    """sentune.postprocess.POSTPROCESSORS lists each post-processor's settings so the CLI can check them without torch;
    they must stay the constructors' parameters, and what `SET:N` and the command's flags set must be among them."""
    import inspect

    from sentune.postprocess import POSTPROCESSORS

    for name, record in POSTPROCESSORS.items():
        assert record.settings == tuple(inspect.signature(record.load()).parameters), name
        assert {record.number, *(o.setting for o in record.options)} <= set(record.settings), name


# A new post-processor: its module (here written to a folder on sys.path) and its one record in the registry.
CENTRING = """
from __future__ import annotations

import numpy as np

from sentune.postprocess import Option, Postprocessor

RECORD = Postprocessor("centring", "centre", "centring:CentreOnly", ("offset", "device"), "centring", "offset", "c", "offset={}", (Option("--offset", "offset", 0),))


class CentreOnly:
    \"\"\"A toy post-processor: subtract the mean of what it was fitted on, less `offset`.\"\"\"

    def __init__(self, offset: int = 0, device: str = "cpu") -> None:
        self.offset, self.device = offset, device

    def fit(self, x):
        self.mean_ = np.asarray(x).mean(axis=0) - self.offset
        return self

    def transform(self, x):
        return np.asarray(x) - self.mean_

    def to_modules(self):
        import torch
        from sentence_transformers.models import Dense

        size = len(self.mean_)
        bias = -torch.as_tensor(self.mean_, dtype=torch.float32)
        return [Dense(size, size, bias=True, activation_function=torch.nn.Identity(), init_weight=torch.eye(size), init_bias=bias)]
"""


def test_a_new_post_processor_is_one_registry_line(tiny_st, tiny_data_dir, tmp_path, monkeypatch):
    """Registered by one record, a post-processor is fitted and applied inside an evaluation by its name."""
    import importlib
    import sys

    from sentune.data.catalog import select_tasks
    from sentune.postprocess import POSTPROCESSORS
    from sentune.tasks.evaluate import PostprocessOption, evaluate

    (tmp_path / "centring.py").write_text(CENTRING)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "centring", raising=False)
    monkeypatch.setitem(POSTPROCESSORS, "centring", importlib.import_module("centring").RECORD)
    results = evaluate(tiny_st, select_tasks("STS-B"), tiny_data_dir, postprocess=[PostprocessOption.parse("centring", "target")], show_progress=False)
    assert set(results["runs"]) == {"model", "model+centre(target)"}
    plain, centred = (results["runs"][r]["tasks"]["STS-B"]["all"]["spearman"] for r in ("model", "model+centre(target)"))
    assert np.isfinite(centred) and centred != plain  # centring changes cosines


@pytest.mark.slow
def test_a_new_post_processor_reaches_eval_its_command_pipelines_and_adapt(tiny_model_dir, tiny_data_dir, tmp_path):
    """The record alone, registered before sentune's modules build their lists (as a line in the registry is), gives
    `sentune eval --centre` and `--centre-set`, the `sentune centre` command, the pipeline stage `centre` and adapt's
    `--methods centring`."""
    import json
    import os
    import subprocess
    import sys

    from sentence_transformers import SentenceTransformer

    (tmp_path / "centring.py").write_text(CENTRING)
    data = ["--model", str(tiny_model_dir), "--data", str(tiny_data_dir)]
    script = f"""
import centring
from sentune.postprocess import POSTPROCESSORS
POSTPROCESSORS["centring"] = centring.RECORD
from sentune.adaptation.candidates import parse_methods
from sentune.cli.app import main
data = {data!r}
assert main(["eval", *data, "--tasks", "STS-B", "--centre", "target:2", "--centre-set", "nope=1"]) == 2
assert main(["eval", *data, "--tasks", "STS-B", "--centre", "target:2", "--out", "eval", "--quiet", "--allow-modified-data"]) == 0
assert main(["centre", *data, "--pooling", "mean", "--fit-on", "wiki", "--offset", "1", "--out", "saved", "--quiet"]) == 0
assert main(["pipeline", "centre", *data, "--fit-on", "tasks:STS-B", "--set", "centre:offset=3", "--out", "pipeline", "--allow-modified-data"]) == 0
print("methods:", ",".join(parse_methods("centring,simcse")))
"""
    path = os.pathsep.join([str(tmp_path), *sys.path])
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--centre-set nope=1: centre takes device, offset (as NAME=VALUE)" in done.stderr
    assert "model+centre(target,offset=2)" in json.loads((tmp_path / "eval" / "results.json").read_text())["runs"]
    for folder in (tmp_path / "saved", tmp_path / "pipeline" / "centre" / "model"):
        saved = SentenceTransformer(str(folder), device="cpu")  # its last module is the centring: one shift for every sentence
        headless = SentenceTransformer(modules=list(saved)[:-1], device="cpu")
        shift = saved.encode(["a man plays", "the dog runs"]) - headless.encode(["a man plays", "the dog runs"])
        np.testing.assert_allclose(shift[0], shift[1], atol=1e-5)
        assert np.abs(shift).max() > 1e-3, folder
    assert json.loads((tmp_path / "pipeline" / "centre" / "stage.json").read_text())["overrides"] == ["offset=3"]
    assert "methods: centring,simcse" in done.stdout


def hyperplane_data(n: int = 600, dim: int = 12, null: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(points spanning dim − null dimensions of R^dim around an offset, an orthonormal basis of the other `null`)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    span, missing = basis[:, : dim - null], basis[:, dim - null :]
    x = rng.standard_normal((n, dim - null)) * rng.uniform(0.5, 2.0, dim - null) @ span.T + rng.standard_normal(dim)
    return x.astype(np.float32), missing


def test_null_directions_are_exactly_those_the_data_does_not_use():
    from sentune.postprocess.flow import null_directions

    x, missing = hyperplane_data()
    basis, largest = null_directions(torch.as_tensor(x), 1e-6)
    assert basis.shape == (12, 2)
    # the same subspace: projecting the true missing directions onto the found basis keeps them whole
    np.testing.assert_allclose(np.linalg.norm(basis.double().numpy().T @ missing, axis=0), 1.0, atol=1e-4)
    assert largest == pytest.approx(np.sqrt(np.linalg.eigvalsh(np.cov(x.T.astype(np.float64)))[-1]), rel=1e-4)
    full = np.random.default_rng(1).standard_normal((600, 12)).astype(np.float32)
    assert null_directions(torch.as_tensor(full), 1e-6)[0].shape == (12, 0)


def test_flow_on_data_of_full_rank_is_fitted_as_without_the_null_space_noise():
    x = np.random.default_rng(2).standard_normal((200, 6)).astype(np.float32)
    with_noise, without = Flow(seed=3, max_steps=20).fit(x), Flow(seed=3, max_steps=20, null_noise=0.0).fit(x)
    assert with_noise.null_directions_ == 0
    assert with_noise.history_ == without.history_  # no noise drawn, nothing else changed
    np.testing.assert_array_equal(with_noise.transform(x), without.transform(x))


def test_flow_adds_noise_only_along_the_null_directions_while_fitting(monkeypatch):
    x, missing = hyperplane_data()
    seen = []
    original = GlowFlow.nll
    monkeypatch.setattr(GlowFlow, "nll", lambda self, batch: seen.append(batch.detach().clone()) or original(self, batch))
    flow = Flow(seed=0, max_steps=5, batch_size=16, null_noise=0.1).fit(x)
    assert flow.null_directions_ == 2 and len(seen) == 5
    mean = x.astype(np.float64).mean(0)
    span = np.linalg.svd(x - mean, full_matrices=False)[2][:10]  # the directions the data uses
    data_in_span = (x - mean) @ span.T
    for batch in seen:
        inputs = batch.double().numpy()
        assert np.abs((inputs - mean) @ missing).max() > 1e-3  # noise is there (std 0.1 × the largest std)
        # within the data's own span every input is exactly a data point: the noise lies wholly in the null space
        within = (inputs - mean) @ span.T
        assert np.linalg.norm(within[:, None, :] - data_in_span[None], axis=2).min(axis=1).max() < 1e-4
    np.testing.assert_array_equal(flow.transform(x), flow.transform(x))  # transform adds no noise
