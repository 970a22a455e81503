"""The one base class for mistakes a user can fix (a bad file, option, recipe or model name).

The CLI prints a UserError as one line and exits 2; anything else is a bug in sentune or a library and
keeps its traceback. Each layer raises its own subclass (DataError, RecipeError, ...) so a message can
say where the problem is; all of them derive from this one class and from ValueError.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


class UserError(ValueError):
    """Input that cannot be used as given; str() says what and where (file:line, option or key)."""


# A command-line option as a message names it: `--dev[7]`, `--time '30x':`, `--corpus FILE`, `--methods:`; its value
# (one token before a colon, or a placeholder in capitals) is kept beside the Python argument as `time='30x'`.
_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:(\s+(?:'[^']*'|\"[^\"]*\"|[^\s:,;()\[\]]+)(?=:))|(\s+[A-Z][A-Z_]+\b))?")


def python_names(message: str, arguments: Mapping[str, str]) -> str:
    """`message` with each command-line option that `arguments` maps (`sed-members` → `sed_members`, `no-labels` →
    `labels=False`) written as the Python argument: `--dev[7]` → `dev[7]`, `--time '30x'` → `time='30x'`."""

    def named(match: re.Match[str]) -> str:
        argument = arguments.get(match.group(1))
        if argument is None:
            return match.group(0)
        value = (match.group(2) or match.group(3) or "").strip()
        return f"{argument}={value}" if value and "=" not in argument else argument

    return _OPTION.sub(named, message)


_IN_COMMAND: ContextVar[bool] = ContextVar("sentune_in_command", default=False)


@contextmanager
def command_line_names() -> Iterator[None]:
    """Within it (a command, sentune.cli.app), the Python API's refusals keep naming the command's options."""
    token = _IN_COMMAND.set(True)
    try:
        yield
    finally:
        _IN_COMMAND.reset(token)


def names_python_arguments(extra: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """A Python API function whose refusals (UserError) name its Python arguments, not the options of the command that
    shares its checks: each parameter `x_y` is the option `--x-y`, `extra` maps the others (`no-labels`:
    `labels=False`). A call from the command line (within `command_line_names`, or with `command=` given) keeps the
    options' names."""

    def decorate(function: F) -> F:
        arguments = {name.replace("_", "-"): name for name in inspect.signature(function).parameters} | dict(extra or {})

        @functools.wraps(function)
        def called(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("command") is not None or _IN_COMMAND.get():
                return function(*args, **kwargs)
            try:
                return function(*args, **kwargs)
            except UserError as error:
                if error.args and isinstance(error.args[0], str):
                    error.args = (python_names(error.args[0], arguments), *error.args[1:])
                raise

        return cast(F, called)

    return decorate
