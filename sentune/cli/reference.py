"""The command reference (docs/commands.md), generated from the command records and the parser they build, so it
cannot drift from the options (tests/test_cli.py regenerates it and compares):

    python -m sentune.cli.reference > docs/commands.md
"""

from __future__ import annotations

import argparse

from sentune.cli import app
from sentune.cli.base import Command


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        metavar = action.metavar if isinstance(action.metavar, str) else None
        name = ", ".join(action.option_strings) or metavar or action.dest
        if action.option_strings and action.nargs != 0:
            name += f" {metavar or action.dest.upper()}"
        default = "" if action.default in (None, False, [], argparse.SUPPRESS) else f"`{action.default}`"
        required = "required" if action.required or not action.option_strings and action.nargs not in ("?", "*") else ""
        choices = f" (one of: {', '.join(map(str, action.choices))})" if action.choices else ""
        rows.append(f"| `{_cell(name)}` | {required} | {_cell(default)} | {_cell((action.help or '') + choices)} |")
    return rows


def _section(command: Command, parent: str, sub) -> list[str]:
    app.add_command(sub, command)
    parser = sub.choices[command.name]
    title = f"{parent} {command.name}".strip()
    lines = [f"## `sentune {title}`", "", command.help + ".", ""]
    rows = _options(parser)
    if rows:
        lines += ["| option | required | default | meaning |", "|---|---|---|---|", *rows, ""]
    if command.subcommands:
        nested = argparse.ArgumentParser(prog=title).add_subparsers()
        for inner in command.subcommands:
            lines += _section(inner, title, nested)
    return lines


def command_reference() -> str:
    sub = argparse.ArgumentParser(prog="sentune").add_subparsers()
    lines = [
        "# sentune command reference",
        "",
        "Generated from the command records (sentune/cli/) by `python -m sentune.cli.reference > docs/commands.md`; do not edit.",
        "Every command also takes `--help`; `sentune --debug` shows tracebacks, `sentune -v` the libraries' logs.",
        "",
        "Commands: " + ", ".join(f"`{c.name}`" for c in app.COMMANDS) + ".",
        "",
    ]
    for command in app.COMMANDS:
        lines += _section(command, "", sub)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(command_reference(), end="")
