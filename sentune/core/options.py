"""Typed option records: dataclasses whose fields carry a one-line meaning and limits, checked before any
work starts. Recipes (`training.*`, `eval.*`), method parameters (`params.*`) and post-processor settings
are all such records, so an unknown or mistyped key is one message naming the key, the allowed keys and
the expected type, raised while the command is still parsing its input.

    @dataclass
    class Params:
        temperature: float = option(0.05, "τ of the InfoNCE softmax", minimum=0, exclusive=True)
        pooling: str = option("max", "token pooling of the views", choices=("max", "mean", "cls"))
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import MISSING, dataclass, field
from typing import Any, Literal, TypeVar, Union

import yaml

from sentune.errors import UserError

T = TypeVar("T")


class OptionError(UserError):
    """A key or value that a typed option record does not accept; the message names the key."""


def option(
    default: Any = MISSING,
    help: str = "",
    *,
    minimum: float | None = None,
    exclusive: bool = False,
    below: float | None = None,
    choices: tuple | None = None,
    refused: dict | None = None,
    default_factory: Any = MISSING,
) -> Any:
    """A dataclass field with its meaning and limits (`minimum`, strict when `exclusive`; a strict upper
    bound `below`; `choices`; `refused`: values inside the limits that mean nothing, with the reason)."""
    metadata = {"help": help, "minimum": minimum, "exclusive": exclusive, "below": below, "choices": choices, "refused": refused}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class OptionInfo:
    name: str
    type: str
    default: Any
    help: str


def describe(cls: type) -> list[OptionInfo]:
    """Name, type, default and meaning of every field: for help texts and the README's method table."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else None)
        out.append(OptionInfo(f.name, type_name(hints[f.name]), default, f.metadata.get("help", "")))
    return out


def build_options(cls: type[T], values: dict[str, Any] | None, where: str) -> T:
    """`cls(**values)` after checking every key and coercing every value to its field's type.
    `where` names the section for messages, e.g. 'params' or 'training'."""
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        allowed = ", ".join(f"{n} ({type_name(h)})" for n, h in typing.get_type_hints(cls).items() if n in fields) or "none"
        raise OptionError(f"{_join(where, unknown[0])}: unknown key; {where or 'it'} takes: {allowed}")
    hints = typing.get_type_hints(cls)
    kwargs = {name: check_value(_join(where, name), value, hints[name], fields[name].metadata) for name, value in values.items()}
    return cls(**kwargs)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def check_value(key: str, value: Any, annotation: Any, metadata: Any = None) -> Any:
    """`value` as `annotation` (int, float, bool, str, Literal, X | None, list[X], tuple[X, ...]), with the
    field's limits; an OptionError naming `key` and the expected type otherwise."""
    metadata = metadata or {}
    coerced = _coerce(key, value, annotation)
    choices = metadata.get("choices")
    if choices is not None and coerced is not None and coerced not in choices:
        raise OptionError(f"{key}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    minimum = metadata.get("minimum")
    if minimum is not None and isinstance(coerced, (int, float)) and not isinstance(coerced, bool):
        if coerced < minimum or (metadata.get("exclusive") and coerced == minimum):
            bound = f"> {minimum}" if metadata.get("exclusive") else f">= {minimum}"
            raise OptionError(f"{key}: expected a number {bound}, got {value!r}")
    below = metadata.get("below")
    if below is not None and isinstance(coerced, (int, float)) and coerced >= below:
        raise OptionError(f"{key}: expected a number < {below}, got {value!r}")
    refused = metadata.get("refused") or {}
    if isinstance(coerced, (int, float, str)) and not isinstance(coerced, bool) and coerced in refused:
        raise OptionError(f"{key}: {value!r} {refused[coerced]}")
    return coerced


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(key, value, arg)
            except OptionError as exc:
                errors.append(exc)
        raise OptionError(f"{key}: expected {type_name(annotation)}, got {value!r}")
    if origin is Literal:
        if value in args and not (isinstance(value, bool) and not any(isinstance(a, bool) for a in args)):
            return value
        raise OptionError(f"{key}: expected one of {', '.join(map(repr, args))}, got {value!r}")
    if origin is dict:
        if not isinstance(value, dict):
            raise OptionError(f"{key}: expected a section (key: value lines), got {value!r}")
        return dict(value)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise OptionError(f"{key}: expected a list ({type_name(annotation)}), got {value!r}")
        item = args[0] if args else Any
        items = [_coerce(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if annotation in (Any, bool, int, float, str):
        return _coerce_scalar(key, value, annotation)
    if dataclasses.is_dataclass(annotation):
        value = {} if value is None else value  # an empty section in YAML
        if not isinstance(value, dict):
            raise OptionError(f"{key}: expected a section (key: value lines), got {value!r}")
        return build_options(typing.cast(type, annotation), value, key)
    raise TypeError(f"{key}: option type {annotation!r} is not supported")  # a bug in a record, not a user error


def _coerce_scalar(key: str, value: Any, annotation: Any) -> Any:
    if annotation is Any:
        return value
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise OptionError(f"{key}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise OptionError(f"{key}: expected an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 5e-5 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise OptionError(f"{key}: expected a number, got {value!r}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise OptionError(f"{key}: expected a string, got {value!r}")
    raise TypeError(f"{key}: {annotation!r}")  # unreachable: the caller passes only these types


def type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (list, tuple):
        return f"list of {type_name(args[0])}" if args else "list"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)$")


def parse_value(raw: str) -> Any:
    """A command-line value as YAML, except that 1e-3 is a number (YAML 1.1 reads it as a string)."""
    value = yaml.safe_load(raw) if raw else None
    return float(value) if isinstance(value, str) and _NUMBER.match(value) else value
