"""The one base class for mistakes a user can fix (a bad file, option, recipe or model name).

The CLI prints a UserError as one line and exits 2; anything else is a bug in sentune or a library and
keeps its traceback. Each layer raises its own subclass (DataError, RecipeError, ...) so a message can
say where the problem is; all of them derive from this one class and from ValueError.
"""

from __future__ import annotations


class UserError(ValueError):
    """Input that cannot be used as given; str() says what and where (file:line, option or key)."""
