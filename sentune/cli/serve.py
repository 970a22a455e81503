"""`sentune serve` as a command record; its options and work are sentune.serve.command's."""

from __future__ import annotations

from sentune.cli.base import Command
from sentune.serve.command import SERVE_HELP, cmd_serve, serve_options

COMMANDS = (Command("serve", SERVE_HELP, serve_options, cmd_serve),)
