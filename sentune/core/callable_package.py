"""A package that is also a function: `sentune.adapt` and `sentune.train` are packages, and the Python API's functions of
the same name (sentune.api). Importing a package sets it as an attribute of `sentune`, over the function, so each package
is made callable as its function; `sentune.adapt(...)` then works whichever of the two the attribute holds."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


def call_through(package: str, module: str, function: str) -> None:
    """Make the package `package` callable as `module.function` (imported when first called: no import here)."""

    class CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(module), function)(*args, **kwargs)

    sys.modules[package].__class__ = CallablePackage
