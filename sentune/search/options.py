"""The options of `sentune index` and `sentune search` read into the search layer's settings (--fusion, BM25's), and
the checks of their inputs that name an option or a file's line; shared by the command line (sentune.cli.search) and
the Python API (sentune.api.index), so both refuse the same things in the same words."""

from __future__ import annotations

import argparse
import os
import unicodedata
from pathlib import Path

from sentune.errors import UserError


def parse_fusion(text: str | None, option: str = "--fusion"):
    """--fusion none | rrf | convex:ALPHA (ALPHA in [0, 1], the weight of the dense scores); `option`: how errors name it."""
    from sentune.search.fusion import Fusion

    if text in (None, "none"):
        return None
    if text == "rrf":
        return Fusion("rrf")
    kind, _, value = (text or "").partition(":")
    try:
        alpha = float(value)
    except ValueError:
        alpha = -1.0
    if kind != "convex" or not 0.0 <= alpha <= 1.0:
        raise UserError(f"{option} {text}: use none, rrf or convex:ALPHA with ALPHA from 0 to 1 (the weight of the dense scores)")
    return Fusion("convex", alpha)


def parse_lexical(args: argparse.Namespace):
    """BM25's settings from --no-stem, --bm25-k1, --bm25-b and --bm25-title-weight (sentune.search.lexical)."""
    return lexical_settings(not args.no_stem, args.bm25_k1, args.bm25_b, args.bm25_title_weight, CLI_NAMES)


CLI_NAMES = ("--bm25-k1", "--bm25-b", "--bm25-title-weight")
PYTHON_NAMES = ("bm25_k1", "bm25_b", "bm25_title_weight")  # sentune.Index.build's arguments


def lexical_settings(stem: bool, k1: float | None, b: float | None, title_weight: int | None, names: tuple[str, str, str] = PYTHON_NAMES):
    """BM25's settings (sentune.search.lexical); one line naming the setting as the caller named it (`names`: k1's,
    b's and the title weight's) when it is out of range."""
    from dataclasses import replace

    from sentune.search.lexical import LexicalSettings

    settings = LexicalSettings() if stem else LexicalSettings(stemmer=None)
    if k1 is not None:
        if not k1 >= 0:
            raise UserError(f"{names[0]} {k1}: 0 or more")
        settings = replace(settings, k1=k1)
    if b is not None:
        if not 0 <= b <= 1:
            raise UserError(f"{names[1]} {b}: from 0 to 1")
        settings = replace(settings, b=b)
    if title_weight is not None:
        if title_weight < 1:
            raise UserError(f"{names[2]} {title_weight}: 1 or more")
        settings = replace(settings, title_weight=title_weight)
    return settings


def input_file(path: str, option: str) -> Path:
    """A file the user named with `option`: one line naming the option when it is missing or a folder."""
    found = Path(path)
    if not found.is_file():
        raise UserError(f"{option} {found}: {'a folder, not a file' if found.is_dir() else 'file not found'}")
    return found


def check_run_file(given: str, force: bool) -> None:
    """--run names a file this search may write: not a folder (nor a name ending in a slash, which names one), and not
    one that exists unless --force."""
    path = Path(given)
    if path.is_dir() or given.endswith(("/", os.sep)):
        raise UserError(f"--run {path}: a folder; give a file name (e.g. {path / 'search.run'})")
    if path.exists() and not force:
        raise UserError(f"--run {path}: the file exists; add --force to overwrite it")


def printable(text: str) -> str:
    """`text` safe to print on a terminal: control and format characters (an escape sequence that would recolour, retitle
    or clear the terminal, a bidirectional override) written as Python escapes instead."""
    if text.isprintable():
        return text
    return "".join(c if unicodedata.category(c) not in ("Cc", "Cf") else ascii(c)[1:-1] for c in text)


def check_document_ids(documents) -> None:
    """An id with whitespace cannot be named by the TREC run lines `sentune search --queries` writes: refused here,
    naming its corpus line, rather than indexed and then refused by every search of a queries file."""
    from sentune.search.trec import NOT_TREC_SAFE, trec_safe

    for document in documents:
        if not trec_safe(document.id):
            raise UserError(f"{document.source}: document id {document.id!r} {NOT_TREC_SAFE}; give it an id without spaces")
