"""The ground every reader of text files stands on: the error that names file and line, where an example came from,
whitespace normalisation, and reading lines or JSON-lines records safely (sentune.data.readers, sentune.data.beir,
sentune.data.user_data)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentune.errors import UserError


class DataError(UserError):
    """Bad or missing input; str() is `path:line: what is wrong` (or `path: ...` for whole-file problems)."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path, self.line = str(path), line
        super().__init__(f"{path}:{line}: {message}" if line is not None else f"{path}: {message}")


@dataclass(frozen=True)
class Source:
    """Where one example came from, for error messages and truncation warnings."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def normalise(text: str) -> str:
    """Whitespace collapsed, and no lone surrogate (without_lone_surrogates): every reader's text passes here."""
    return without_lone_surrogates(" ".join(text.split()))


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone UTF-16 surrogate (from a JSON escape such as "\\ud800", or an undecodable byte of a command
    line argument) replaced by U+FFFD, and a split pair joined: such a string cannot be encoded as UTF-8, so the
    tokenizer, a file write or a hash would fail on it. The one policy at every edge where text comes in."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def json_without_lone_surrogates(value: Any) -> Any:
    """A parsed JSON value with without_lone_surrogates applied to every string in it."""
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, dict):
        return {json_without_lone_surrogates(k): json_without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_without_lone_surrogates(v) for v in value]
    return value


def json_problem(exc: json.JSONDecodeError) -> str:
    """What is wrong and where, once: json's own message of some errors ends with "at" ("Invalid control character at")."""
    return f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"


def read_lines(path: str | Path, encoding: str = "utf-8", *, user_file: bool = False) -> list[str]:
    """All lines of a text file without their line endings (\\n or \\r\\n), BOM removed.

    Raises DataError for a missing file, an empty file, or bytes that are not `encoding`, naming the
    line and the byte offset within it. A missing file of the data directory points at --data; one the
    user named (`user_file`) is just not found.
    """
    path = Path(path)
    if not path.is_file():
        hint = " (a folder, not a file)" if path.is_dir() else ""
        where = "" if user_file else "; check the data directory (option --data or SENTUNE_DATA)"
        raise DataError(path, None, f"file not found{hint}{where}")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(path, None, "file is empty")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        if b"\x00" in line:  # UTF-8 text never holds NUL: a binary file, which would otherwise read as one long "sentence"
            raise DataError(path, number, f"a NUL byte at column {line.index(bytes(1)) + 1}: a binary (or UTF-16) file, not {encoding} text")
        try:
            text = line.decode(encoding)
        except UnicodeDecodeError as exc:
            raise DataError(path, number, f"not valid {encoding}: byte 0x{line[exc.start]:02x} at column {exc.start + 1}") from None
        out.append(text.rstrip("\r"))
    if out and out[0].startswith("\ufeff"):
        out[0] = out[0][1:]
    return out


def json_object(path: Path, number: int, line: str) -> dict:
    """One JSON-lines record, which must be an object."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(path, number, f"not a JSON object: {exc.msg.removesuffix(' at')} at column {exc.colno}") from None
    if not isinstance(record, dict):
        raise DataError(path, number, f"not a JSON object: {type(record).__name__}")
    # a lone surrogate can only come from a \u escape: the line itself was decoded from valid UTF-8
    return json_without_lone_surrogates(record) if "\\u" in line else record
