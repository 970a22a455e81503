"""The `sentune` command line: one module per command family (evaluate, training, postprocess, adapt, export, data,
search, serve), each command a record (sentune.cli.base.Command) declaring its options; sentune.cli.app builds the parser and
the command list from them, and sentune.cli.reference the command reference (docs/commands.md)."""

from sentune.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
