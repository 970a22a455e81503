"""What every command shares: the command record, the option groups declared once, and the helpers the commands and
the parser use (the command line as typed, one-line parser errors, output routing, the write check)."""

from __future__ import annotations

import argparse
import importlib.abc
import logging
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sentune.errors import UserError

ARGV: list[str] = []  # the arguments of the running command (sentune.cli.app.main)


@dataclass(frozen=True)
class Command:
    """One `sentune` command: its name and one-line help, the options it declares, what it runs, and the option groups
    the parser adds to it (--device to a command that runs models, --allow-modified-data to one that scores catalogued
    tasks). A command with `subcommands` (data, cache) runs one of them. The parser, the command list and the command
    reference (docs/commands.md) are built from these records (sentune.cli.app)."""

    name: str
    help: str
    options: Callable[[argparse.ArgumentParser], None] | None = None
    run: Callable[[argparse.Namespace], int] | None = None
    runs_models: bool = False
    scores_tasks: bool = False
    subcommands: tuple[Command, ...] = ()


def device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        help="auto (CUDA when present, the default; $SENTUNE_DEVICE when set), cpu, cuda or cuda:N; a recipe's training.device other than auto wins",
    )


def modified_data_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-modified-data", action="store_true", help="score tasks whose files differ from the catalog (counts, SHA256SUMS); recorded in results.json"
    )


def command_line() -> str:
    """The command as typed, for results files (so a table can always be regenerated)."""
    return "sentune " + " ".join(shlex.quote(a) for a in ARGV)


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def model_options(p: argparse.ArgumentParser, pooling_help: str = "pooling name(s), comma-separated") -> None:
    p.add_argument("--model", default="default", help="'default' (all-MiniLM-L6-v2), a hub id or a local path")
    p.add_argument("--pooling", default="model", help=pooling_help + " (model, cls, mean, max, first-last, last2, lastN, layerK-mean, wk)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model (off by default)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def backend_option(p, choices: tuple[str, ...] = ("torch", "onnx", "onnx-int8")) -> None:
    p.add_argument(
        "--backend",
        default="torch",
        choices=choices,
        help="torch (default); onnx: the transformer runs in ONNX Runtime on the CPU (the folder's onnx/ from `sentune export`, else exported "
        "once into the cache); onnx-int8: its int8 graph",
    )


def check_writable(path: Path, where: str) -> None:
    """Fail now, not after the model has loaded and encoded everything, when `path` cannot be written. Nothing
    is created: the nearest existing folder on the way must be a folder that takes a file."""
    import tempfile

    existing = next(p for p in (path, *path.parents) if p.exists() or p == p.parent)
    if existing != path and not existing.is_dir():
        raise UserError(f"{where} {path}: {existing} is a file, not a folder")
    folder = existing if existing.is_dir() else existing.parent
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".sentune-write-check-"):
            pass
    except OSError as exc:
        raise UserError(f"{where} {path}: cannot write in {folder} ({exc.strerror or exc})") from None


class OneLineParser(argparse.ArgumentParser):
    """argparse's own errors (a missing or unknown option) in one line like every other sentune error, exit code 2;
    --help still shows the usage. Subcommand parsers are made of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


LIBRARIES = (
    "sentence_transformers",
    "transformers",
    "datasets",
    "accelerate",
    "bm25s",
    "faiss",
    "httpx",
    "httpx2",
    "huggingface_hub",
    "urllib3",
    "py.warnings",
)
LIBRARY_ROOTS = {name.split(".")[0] for name in LIBRARIES}


class LibraryFilter(logging.Filter):
    """Drops the libraries' records below `floor` (ERROR without -v), whatever level their loggers were set to."""

    floor = logging.ERROR

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.floor or record.name.split(".")[0] not in LIBRARY_ROOTS


LIBRARY_FILTER = LibraryFilter()


def configure_output(verbose: bool) -> None:
    """sentune's own messages (INFO and up) on stderr; the libraries' logs and Python warnings only with -v:
    stdout carries results, tables and one line per evaluation."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.captureWarnings(True)  # library warnings become log records of 'py.warnings', shown with -v
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    # A library may set its own logger's level when it is imported (bm25s sets DEBUG), after this: the handlers
    # themselves drop the libraries' records below what -v allows.
    LIBRARY_FILTER.floor = logging.INFO if verbose else logging.ERROR  # one filter, its floor set by the latest command
    for handler in logging.getLogger().handlers:
        if LIBRARY_FILTER not in handler.filters:
            handler.addFilter(LIBRARY_FILTER)
    if not any(isinstance(finder, QuietOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, QuietOnImport())


SETS_OWN_LEVEL = ("transformers", "datasets")  # each sets its logger's level while it is imported


class QuietOnImport(importlib.abc.MetaPathFinder):
    """transformers and datasets set their own logger's level when they are imported (WARNING unless their
    environment variable says otherwise), usually after configure_output ran and always before a record passes their own
    handler: without -v this sets it back to ERROR as soon as their import ends. It reads the floor of the latest
    command when the import happens, so one command's choice never outlives it."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in SETS_OWN_LEVEL or LIBRARY_FILTER.floor < logging.ERROR:
            return None
        spec = next((found for finder in sys.meta_path if finder is not self and (found := _spec(finder, fullname, path, target))), None)
        loader = spec.loader if spec else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module) -> None:
            run(module)
            if LIBRARY_FILTER.floor >= logging.ERROR:
                logging.getLogger(fullname).setLevel(logging.ERROR)

        loader.exec_module = exec_module
        return spec


def _spec(finder, fullname: str, path, target):
    find = getattr(finder, "find_spec", None)
    return find(fullname, path, target) if find else None
