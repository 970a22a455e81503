"""The `sentune` parser, built from the command records of each family module (sentune.cli.evaluate, training,
postprocess, adapt, export, data, search, serve, engines), and the entry point: the checks that need no model, the
device chosen once when the command first needs it, one-line errors."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sentune.cli import adapt, data, engines, evaluate, export, postprocess, search, serve, training
from sentune.cli.base import ARGV, Command, OneLineParser, check_writable, configure_output, device_option, modified_data_option
from sentune.errors import UserError

COMMANDS: tuple[Command, ...] = (
    *evaluate.COMMANDS[:1],
    *training.COMMANDS,
    *evaluate.COMMANDS[1:],
    *postprocess.COMMANDS,
    *data.COMMANDS,
    *adapt.COMMANDS,
    *export.COMMANDS,
    *search.COMMANDS,
    *serve.COMMANDS,
    *engines.COMMANDS,
)
DESCRIPTION = "Command line: " + " | ".join(c.name for c in COMMANDS) + "."


def add_command(sub, command: Command) -> None:
    p = sub.add_parser(command.name, help=command.help)
    if command.options:
        command.options(p)
    if command.runs_models:
        device_option(p)
    if command.scores_tasks:
        modified_data_option(p)
    if command.subcommands:
        nested = p.add_subparsers(dest=f"{command.name}_command", required=True)
        for inner in command.subcommands:
            add_command(nested, inner)
    if command.run:
        p.set_defaults(func=command.run)


class CommandArgs(argparse.Namespace):
    """The parsed command line. `device` (on the commands that run models) is resolved the first time the command reads
    it: `auto` asks torch whether CUDA is present, which imports torch (seconds), and a command reads its device only
    once its own checks of options, recipes and files have passed, as it loads its first model; so a mistake there
    answers before torch loads. Resolved once, from --device or else SENTUNE_DEVICE, and then passed down as a plain
    string; its spelling is checked at once (main)."""

    @property
    def device(self) -> str:
        if "device_option" not in vars(self):
            raise AttributeError("device")  # a command that runs no model has no --device
        if "resolved_device" not in vars(self):
            from sentune.core.device import resolve_device

            self.resolved_device = resolve_device(self.device_option, "--device")
        return self.resolved_device

    @device.setter
    def device(self, option: str | None) -> None:
        self.device_option = option
        vars(self).pop("resolved_device", None)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="sentune", description=DESCRIPTION)
    parser.add_argument("--debug", action="store_true", help="show the traceback of user errors too")
    parser.add_argument("-v", "--verbose", action="store_true", help="also show the libraries' logs and warnings")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        add_command(sub, command)
    return parser


def preflight(args: argparse.Namespace) -> None:
    """Checks that need no model and no data, run before any: the model names and the output paths."""
    from sentune.core.models import check_model_name

    models = args.model if isinstance(getattr(args, "model", None), list) else [getattr(args, "model", None)]
    if getattr(args, "command", None) == "adapt" and getattr(args, "model", None):  # `--model A,B`: B fused with A (multi-dense)
        models = args.model.split(",")
    for name in filter(None, models):
        check_model_name(name)
    for name in getattr(args, "member", None) or []:  # sentune ensemble
        check_model_name(name, "--member")
    if getattr(args, "output", None) and args.command == "encode":
        if Path(args.output).suffix not in (".npy", ".jsonl"):
            raise UserError(f"output {args.output}: use a .npy or .jsonl file name")
        check_writable(Path(args.output), "output")
    elif getattr(args, "out", None):
        check_writable(Path(args.out), "--out")
    if getattr(args, "run", None) and args.command == "search":
        check_writable(Path(args.run), "--run")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ARGV[:] = argv
    parser = build_parser()
    args, extra = parser.parse_known_args(argv, CommandArgs())
    configure_output(args.verbose)
    if args.command == "train":  # overrides may also follow the options: train R --out D key=value
        args.overrides += [e for e in extra if "=" in e and not e.startswith("-")]
        extra = [e for e in extra if e not in args.overrides]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if "device_option" in vars(args):  # the cheapest check first: an option's spelling, before any model name
            from sentune.core.device import DEVICE_ENV, check_device

            # SENTUNE_DEVICE is --device's default, read once here; the device is resolved when the command first reads it
            args.device = check_device(args.device_option or os.environ.get(DEVICE_ENV), "--device")
        preflight(args)
    except UserError as exc:
        print(f"sentune: error: {exc}", file=sys.stderr)
        return 2
    from sentune.core.progress import shown_on_stdout
    from sentune.errors import command_line_names

    try:
        with shown_on_stdout(), command_line_names():  # progress lines on stdout (sentune.core.progress); errors name options
            return args.func(args)
    except UserError as exc:  # a mistake the user can fix: one line (the traceback with --debug)
        if args.debug:
            raise
        print(f"sentune: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder the command could not read or write (permissions, disk full)
        if args.debug:
            raise
        print(f"sentune: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
