"""A command leaves nothing behind in the process: two `main()` calls in one process, the first with --device or
--allow-modified-data, the second without, and the second runs as if the first had never run (nothing is carried in
os.environ or anywhere else)."""

from __future__ import annotations

import json
import os

import pytest
import torch

import sentune.cli.app
from sentune.cli import main
from sentune.cli.base import Command


@pytest.fixture
def device_probe(monkeypatch):
    """A command that runs models and prints the device and the data flag it was given."""

    def show(args):
        print(args.device, getattr(args, "allow_modified_data", None))
        return 0

    probe = Command("probe", "print the device it was given", None, show, runs_models=True, scores_tasks=True)
    monkeypatch.setattr(sentune.cli.app, "COMMANDS", (*sentune.cli.app.COMMANDS, probe))


def test_a_device_chosen_once_is_not_the_next_commands(device_probe, monkeypatch, capsys):
    monkeypatch.delenv("SENTUNE_DEVICE", raising=False)  # conftest's default: this test is about the absence of one
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # auto would choose CUDA here
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    before = dict(os.environ)
    assert main(["probe", "--device", "cpu"]) == 0 and capsys.readouterr().out == "cpu False\n"
    assert dict(os.environ) == before
    assert main(["probe"]) == 0 and capsys.readouterr().out == "cuda False\n"  # its own default, not the first command's cpu
    assert main(["probe", "--device", "cuda"]) == 0 and capsys.readouterr().out == "cuda False\n"
    assert main(["probe", "--device", "cpu"]) == 0 and capsys.readouterr().out == "cpu False\n"
    assert dict(os.environ) == before


def test_the_environment_default_is_read_each_time(device_probe, monkeypatch, capsys):
    monkeypatch.setenv("SENTUNE_DEVICE", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["probe"]) == 0 and capsys.readouterr().out == "cpu False\n"
    monkeypatch.setenv("SENTUNE_DEVICE", "auto")
    assert main(["probe"]) == 0 and capsys.readouterr().out == "cuda False\n"


def test_allowing_modified_data_once_does_not_allow_it_to_the_next_command(tiny_model_dir, tiny_data_dir, tmp_path, capsys, checked_data):
    """The tiny data directory's STS-B is not the catalogued one: scored with --allow-modified-data (and said so in
    results.json), refused by the next command, which does not ask for it."""
    before = dict(os.environ)
    args = ["eval", "--model", str(tiny_model_dir), "--tasks", "STS-B", "--data", str(tiny_data_dir), "--quiet"]
    assert main([*args, "--allow-modified-data", "--out", str(tmp_path / "allowed")]) == 0
    assert "the catalog expects 1379" in json.loads((tmp_path / "allowed" / "results.json").read_text())["meta"]["modified_data"][0]
    assert dict(os.environ) == before
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the catalog expects 1379" in err and "--allow-modified-data" in err
    assert not (tmp_path / "refused" / "results.json").exists()
    assert dict(os.environ) == before


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
def test_quiet_libraries_need_no_environment_variable():
    """Without -v, transformers (which sets its own logger's level when imported) stays at ERROR, and the environment
    the command was started with is the one it ends with; with -v it keeps the library's own level."""
    import subprocess
    import sys

    code = (
        "import logging, os, sys; from sentune.cli.base import configure_output; before = dict(os.environ); configure_output({verbose}); "
        "import transformers; print(logging.getLogger('transformers').level, dict(os.environ) == before)"
    )
    quiet = subprocess.run([sys.executable, "-c", code.format(verbose=False)], capture_output=True, text=True, check=True).stdout
    assert quiet.split() == [str(40), "True"]
    loud = subprocess.run([sys.executable, "-c", code.format(verbose=True)], capture_output=True, text=True, check=True).stdout
    assert loud.split() == [str(30), "True"]


def test_serve_hands_its_workers_their_settings_in_uvicorns_config_not_the_environment(monkeypatch):
    """`sentune serve --workers N`: the settings travel inside the uvicorn Config that each worker process unpickles,
    and a worker's app is create_app with exactly them; this process's environment is left as it was."""
    import pickle

    from conftest import free_port

    import sentune.serve.workers as workers
    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    started = []

    class Supervisor:  # uvicorn's Multiprocess, recording what it would start the workers with
        def __init__(self, config, sockets):
            started.append((config, sockets))

        def run(self):
            for socket in started[0][1]:
                socket.close()

        processes: list = []

    monkeypatch.setattr(workers, "Multiprocess", Supervisor)
    settings = ServeSettings(target="idx", index="idx", model=None, port=free_port(), workers=2, api_key="k")
    before = dict(os.environ)
    assert workers.run_workers(settings, host="127.0.0.1", port=settings.port, log_level="warning")
    assert dict(os.environ) == before
    config = pickle.loads(pickle.dumps(started[0][0]))  # as the spawned worker receives it
    assert config.workers == 2 and config.factory
    factory = config.load_app()
    assert factory.func is create_app and factory.args == (settings,)


def test_serve_workers_report_a_worker_that_failed_to_start(monkeypatch):
    """uvicorn stops every worker once one exits with its start-up failure code (its app would fail the same way on
    each restart); run_workers says so, so `sentune serve --workers N` ends with an error, not as if it had served."""
    from types import SimpleNamespace

    from conftest import free_port
    from uvicorn.config import STARTUP_FAILURE

    import sentune.serve.workers as workers
    from sentune.serve.settings import ServeSettings

    def supervisor(exitcodes):
        class Supervisor:
            def __init__(self, config, sockets):
                self.sockets, self.processes = sockets, [SimpleNamespace(exitcode=code) for code in exitcodes]

            def run(self):
                for socket in self.sockets:
                    socket.close()

        return Supervisor

    settings = ServeSettings(target="idx", index="idx", model=None, port=free_port(), workers=2, api_key="k")
    outcomes = {}
    for exitcodes in [(0, 0), (STARTUP_FAILURE, 0), (None, -15)]:
        monkeypatch.setattr(workers, "Multiprocess", supervisor(exitcodes))
        outcomes[exitcodes] = workers.run_workers(settings, host="127.0.0.1", port=settings.port, log_level="warning")
    assert outcomes == {(0, 0): True, (STARTUP_FAILURE, 0): False, (None, -15): True}


def test_no_module_of_sentune_writes_the_process_environment():
    """Nothing under sentune/ assigns, updates, deletes or puts an environment variable (commands take their state as
    arguments; a child process gets its own env)."""
    import ast
    from pathlib import Path

    import sentune

    writes = []
    for path in Path(sentune.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
            targets += node.targets if isinstance(node, ast.Delete) else []
            environ = [t for t in targets if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ"]
            called = isinstance(node, ast.Call) and ast.unparse(node.func) in {
                "os.environ.update",
                "os.environ.setdefault",
                "os.environ.pop",
                "os.environ.clear",
                "os.putenv",
                "os.unsetenv",
            }
            if environ or called:
                writes.append(f"{path.name}:{node.lineno}")
    assert writes == []
