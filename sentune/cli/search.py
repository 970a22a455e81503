"""`sentune index` and `sentune search` as command records; their options and work are sentune.search.command's."""

from __future__ import annotations

from sentune.cli.base import Command
from sentune.search.command import INDEX_HELP, SEARCH_HELP, cmd_index, cmd_search, index_options, search_options

COMMANDS = (
    Command("index", INDEX_HELP, index_options, cmd_index, runs_models=True),
    Command("search", SEARCH_HELP, search_options, cmd_search, runs_models=True),
)
