"""The ground every reader of text files stands on: the error that names file and line, where an example came from,
whitespace normalisation, and reading lines or JSON-lines records safely (sentune.data.readers, sentune.data.beir,
sentune.data.user_data)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
    return " ".join(text.split())


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
        raise DataError(path, number, f"not a JSON object: {exc.msg} at column {exc.colno}") from None
    if not isinstance(record, dict):
        raise DataError(path, number, f"not a JSON object: {type(record).__name__}")
    return record
