"""Typed option records: each value coerced to its field's type or refused with a message naming the key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from sentune.core.options import OptionError, build_options, describe, option


@dataclass
class Inner:
    size: int = option(2, "a size", minimum=1)


@dataclass
class Record:
    rate: float = option(0.1, "a rate", minimum=0, exclusive=True, below=1)
    mode: Literal["a", "b", 3] = option("a", "a mode")
    layers: list[int] | None = option(None, "some layers")
    weights: tuple[float, ...] = option((1.0, 2.0), "weights")
    flag: bool = option(False, "a flag")
    name: str = option("x", "a name")
    inner: Inner = option(default_factory=Inner, help="a section")


def test_values_are_coerced_to_their_types():
    r = build_options(Record, {"rate": "5e-1", "mode": 3, "layers": [1, 2.0], "weights": [1, 2], "flag": True, "inner": {"size": 4}}, "params")
    assert r.rate == 0.5 and r.mode == 3 and r.layers == [1, 2] and r.weights == (1.0, 2.0) and r.flag is True and r.inner.size == 4
    assert build_options(Record, {"layers": None, "inner": None}, "params").inner == Inner()  # an empty YAML section


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"nope": 1}, "params.nope: unknown key; params takes: rate (float), mode ('a' | 'b' | 3)"),
        ({"rate": 0}, "params.rate: expected a number > 0, got 0"),
        ({"rate": 1}, "params.rate: expected a number < 1, got 1"),
        ({"rate": "fast"}, "params.rate: expected a number, got 'fast'"),
        ({"mode": "c"}, "params.mode: expected one of 'a', 'b', 3, got 'c'"),
        ({"mode": True}, "params.mode: expected one of"),
        ({"layers": [1, "x"]}, "params.layers: expected list of int | null, got [1, 'x']"),
        ({"layers": 3}, "params.layers: expected list of int | null, got 3"),
        ({"flag": "yes"}, "params.flag: expected true or false, got 'yes'"),
        ({"flag": 1}, "params.flag: expected true or false, got 1"),
        ({"name": 5}, "params.name: expected a string, got 5"),
        ({"inner": {"size": 0}}, "params.inner.size: expected a number >= 1, got 0"),
        ({"inner": {"width": 1}}, "params.inner.width: unknown key"),
        ({"inner": 7}, "params.inner: expected a section"),
    ],
)
def test_bad_values_name_the_key(values, message):
    with pytest.raises(OptionError) as info:
        build_options(Record, values, "params")
    assert message in str(info.value)


def test_an_integer_field_takes_no_bool_and_no_fraction():
    with pytest.raises(OptionError, match="params.inner.size: expected an integer, got True"):
        build_options(Record, {"inner": {"size": True}}, "params")
    with pytest.raises(OptionError, match="expected an integer, got 2.5"):
        build_options(Record, {"inner": {"size": 2.5}}, "params")


def test_describe_lists_every_field_with_its_meaning():
    rows = {row.name: row for row in describe(Record)}
    assert rows["rate"].type == "float" and rows["rate"].default == 0.1 and rows["rate"].help == "a rate"
    assert rows["layers"].type == "list of int | null" and rows["inner"].default == Inner()
