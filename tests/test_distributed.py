"""Data parallel on the CPU with the gloo backend: with negatives gathered, a step of two processes with b/2
sentences each gives the loss and every gradient of one process with b sentences (to 1e-5)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.slow  # every test here starts processes (torchrun, accelerate): seconds each

SENTENCES = [
    "a man plays the guitar",
    "a woman is playing the piano",
    "the dog runs in the park",
    "two kids eat food",
    "stock market price rises today",
    "the big red car is on the street",
    "a cat sits on the ball",
    "three boys are running quickly",
]


def _loss_and_rows(method: str, model_dir: str):
    """A deterministic loss (dropout off, seeded head) and the rows one step trains on."""
    from sentence_transformers import SentenceTransformer

    from sentune.methods.ct import ContrastiveTensionLoss
    from sentune.methods.mirror import MirrorLoss
    from sentune.methods.sg import SelfGuidedLoss
    from sentune.modules.build import with_pooling

    torch.manual_seed(0)
    base = SentenceTransformer(model_dir, device="cpu")
    if method == "simcse":
        return MirrorLoss(with_pooling(base, "mean").eval(), span_cap=0), [(s,) for s in SENTENCES]
    if method == "sg-opt":
        loss = SelfGuidedLoss(with_pooling(base, "cls"), head_hidden=16).eval()
        return loss, [(s,) for s in SENTENCES]
    loss = ContrastiveTensionLoss(with_pooling(base, "mean")).eval()
    pairs = [(SENTENCES[i], SENTENCES[i] if i % 4 == 0 else SENTENCES[(i + 3) % 8], float(i % 4 == 0)) for i in range(8)]
    return loss, pairs


def _step(rank: int, world: int, init_file: str, model_dir: str, method: str, out: str, gather: bool = True) -> None:
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    loss_fn, rows = _loss_and_rows(method, model_dir)
    loss_fn.gather_negatives = gather
    shard = rows[rank * len(rows) // world : (rank + 1) * len(rows) // world]
    model = loss_fn.model
    columns = [model.preprocess([row[k] for row in shard]) for k in range(2 if method == "ct" else 1)]
    labels = torch.tensor([row[2] for row in shard]) if method == "ct" else None
    out_value = loss_fn([dict(c) for c in columns], labels)
    value = sum(out_value.values()) if isinstance(out_value, dict) else out_value
    value.backward()
    grads = {name: p.grad.detach().clone() for name, p in loss_fn.named_parameters() if p.grad is not None}
    loss = value.detach().clone()
    if world > 1:  # what DDP does with the parameter gradients: their mean over the processes
        for grad in grads.values():
            dist.all_reduce(grad)
            grad /= world
        dist.all_reduce(loss)
        loss /= world
    if rank == 0:
        torch.save({"loss": loss, "grads": grads}, out)
    if world > 1:  # no process leaves while another still talks to it (gloo aborts on such a teardown)
        dist.barrier()
        dist.destroy_process_group()
        # Even after that, gloo's threads were seen (CI, torch 2.13) to abort a worker in the interpreter's own
        # shutdown ("terminate called without an active exception"), after all its work: leave without that shutdown.
        os._exit(0)


@pytest.mark.parametrize("method", ["simcse", "sg-opt", "ct"])
def test_two_processes_equal_one_with_the_whole_batch(method, tiny_model_dir, tmp_path):
    single, double = tmp_path / "single.pt", tmp_path / "double.pt"
    _step(0, 1, "", str(tiny_model_dir), method, str(single))
    mp.spawn(_step, args=(2, str(tmp_path / "init"), str(tiny_model_dir), method, str(double)), nprocs=2, join=True)
    one, two = torch.load(single), torch.load(double)
    assert len(one["grads"]) > 10 and one["grads"].keys() == two["grads"].keys()
    torch.testing.assert_close(two["loss"], one["loss"], rtol=0, atol=1e-5)
    for name, grad in one["grads"].items():
        torch.testing.assert_close(two["grads"][name], grad, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_without_gathering_each_process_contrasts_its_own_rows(tiny_model_dir, tmp_path):
    """params.gather_negatives=false: the two processes' loss is the mean of each half's own loss."""
    double = tmp_path / "double.pt"
    mp.spawn(_step, args=(2, str(tmp_path / "init"), str(tiny_model_dir), "simcse", str(double), False), nprocs=2, join=True)
    loss_fn, rows = _loss_and_rows("simcse", str(tiny_model_dir))
    with torch.no_grad():
        halves = [loss_fn([dict(loss_fn.model.preprocess([r[0] for r in part]))]) for part in (rows[:4], rows[4:])]
        whole = loss_fn([dict(loss_fn.model.preprocess([r[0] for r in rows]))])
    local = torch.load(double)["loss"]
    torch.testing.assert_close(local, (halves[0] + halves[1]) / 2, rtol=0, atol=1e-5)
    assert abs(local - whole) > 1e-3  # local negatives are another objective


def _torchrun(args, cwd, env, **kw):
    import subprocess
    import sys

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "sentune", "train", *args, "--allow-modified-data"]
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def test_two_process_training_writes_one_model_and_resumes_after_kill(tiny_model_dir, tiny_data_dir, tmp_path):
    """torchrun with two gloo processes: one run folder; SIGKILL of the whole job, then --resume, gives the
    weights of the uninterrupted two-process run."""
    import json
    import os

    from conftest import kill_when, tiny_recipe
    from safetensors.torch import load_file

    recipe = tiny_recipe(
        tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 60, "eval_steps": 4, "device": "cpu"}
    )  # gloo on the CPU, GPUs or not
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "SENTUNE_DATA": str(tiny_data_dir)}
    straight = _torchrun([str(recipe), "--out", "straight"], tmp_path, env)
    out, err = straight.communicate(timeout=300)
    assert straight.returncode == 0, err[-3000:]
    assert out.count("sentune train: method simcse") == 1 and out.count("| model |") == 1  # one process speaks
    assert sorted(p.name for p in (tmp_path / "straight").iterdir()) == ["config.yaml", "metrics.jsonl", "model", "results.json", "results.md"]

    killed = _torchrun([str(recipe), "--out", "killed"], tmp_path, env)
    kill_when(killed, tmp_path / "killed" / "checkpoints" / "checkpoint-4" / "COMPLETE", what="torchrun", children=True)
    assert not (tmp_path / "killed" / "model").exists()
    resumed = _torchrun([str(recipe), "--out", "killed", "--resume"], tmp_path, env)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    a, b = (json.loads((tmp_path / run / "results.json").read_text()) for run in ("straight", "killed"))
    assert b["meta"]["resumed_from"] is not None and a["meta"]["best_checkpoint"] == b["meta"]["best_checkpoint"]
    wa, wb = (load_file(str(tmp_path / run / "model" / "model.safetensors")) for run in ("straight", "killed"))
    for name in wa:
        torch.testing.assert_close(wb[name], wa[name], rtol=0, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")


def test_accelerate_launch_trains_like_torchrun(tiny_model_dir, tiny_data_dir, tmp_path):
    """`accelerate launch --multi_gpu --num_processes 2 -m sentune train` (the other standard launcher; with
    training.device=cpu its processes use gloo, GPUs or not): one run folder, two processes recorded, and the weights of
    the same two-process run under torchrun. (accelerate's `--cpu` starts one process unless an MPI host file is given.)"""
    import json
    import os
    import subprocess
    import sys

    from conftest import tiny_recipe
    from safetensors.torch import load_file

    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 6, "eval_steps": 3, "device": "cpu"})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "SENTUNE_DATA": str(tiny_data_dir)}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"]
    launch += ["--dynamo_backend", "no", "-m", "sentune", "train", str(recipe), "--out", "accelerate", "--allow-modified-data"]
    done = subprocess.run(launch, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("sentune train: method simcse") == 1  # one process speaks
    reference = _torchrun([str(recipe), "--out", "torchrun"], tmp_path, env)
    _, err = reference.communicate(timeout=300)
    assert reference.returncode == 0, err[-3000:]
    a, b = (json.loads((tmp_path / run / "results.json").read_text()) for run in ("accelerate", "torchrun"))
    assert a["meta"]["processes"] == b["meta"]["processes"] == 2 and a["meta"]["best_checkpoint"] == b["meta"]["best_checkpoint"]
    wa, wb = (load_file(str(tmp_path / run / "model" / "model.safetensors")) for run in ("accelerate", "torchrun"))
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")
