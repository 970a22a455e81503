"""What an index folder holds, checked against its settings before anything is built over it or searched in it: the
settings file itself, the documents it was built over (their digest), its vectors and BM25's size (sentune.search.build
and sentune.search.index build and read the index; this is the part that needs no model; sentune.search.folder says where each file lies)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sentune.data.beir import Document
from sentune.data.text_files import DataError
from sentune.errors import UserError
from sentune.search.documents import DAMAGED, Documents
from sentune.search.folder import LEXICAL_SETTINGS, IndexFolder, IndexVersion
from sentune.search.passages import PassageVectors

FORMAT = "sentune-index/1"


def corpus_digest(documents: list[Document]) -> str:
    digest = hashlib.sha256()
    for d in documents:
        digest.update(d.id.encode() + b"\0" + d.text.encode() + b"\0")
    return digest.hexdigest()


def read_settings(folder: Path) -> dict | None:
    """The current index's settings, None when the folder has none; one line naming the file (and line) when it is not a
    JSON object."""
    return read_settings_file(IndexFolder(folder).settings_file)


def read_settings_file(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, f"not JSON ({exc.msg} at column {exc.colno}): not a sentune index, or a damaged one") from None
    except UnicodeDecodeError:
        raise DataError(path, None, "not UTF-8 text: not a sentune index") from None
    if not isinstance(settings, dict):
        raise DataError(path, None, f"not a JSON object ({type(settings).__name__}): not a sentune index")
    return settings


def current_version(folder: Path, settings: dict) -> IndexVersion:
    """The version `settings` (the folder's current ones) point at; one line naming the settings file when they name
    a version that is not there."""
    index = IndexFolder(folder)
    try:
        version = index.version_of(settings)
    except ValueError as exc:
        raise DataError(index.settings_file, None, f"{exc}; {DAMAGED}") from None
    if not version.path.is_dir():
        raise DataError(index.settings_file, None, f"its version {version.path} is missing; {DAMAGED}")
    return version


def check_out(folder: Path, documents: list[Document], shared_folder: bool = False, option: str = "--out") -> dict | None:
    """What a build into `folder` may continue, checked without the model (so before it loads): None for a new or empty
    folder, the settings of an index of these documents; one line naming `option` (how the caller named the folder) or
    the settings file when the folder is a file, holds other files, or an unfinished index over other documents (a
    finished one is rebuilt over the new ones as a new version). `shared_folder`: the index's files join others (an
    adapt run's output folder, never rebuilt over other documents)."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{option} {folder}: a file, not a folder; choose a new or empty folder")
    index = IndexFolder(folder)
    saved = read_settings(folder)
    if saved is None:
        if not shared_folder and not index.holds_only_index_files():
            raise UserError(f"{option} {folder}: a folder that is not empty and holds no {index.settings_file.name}; choose an empty or new folder")
        return None
    if saved.get("format") != FORMAT:
        raise UserError(f"{index.settings_file}: not a sentune index ({saved.get('format')!r}); choose another {option}")
    if saved.get("corpus_sha256") != corpus_digest(documents) and (shared_folder or not saved.get("complete")):
        # a finished index gets a new version of the new documents (sentune.search.build); an unfinished build would be
        # resumed with documents it was not started on, and an adapt run's folder holds what was chosen on its own
        what = "built over" if saved.get("complete") else "an unfinished build over"
        raise UserError(f"{index.settings_file}: {what} other documents ({saved.get('documents')}); choose another {option}")
    if saved.get("complete"):  # a finished index is kept as it is: a damaged file in it would stay so, under a new success line
        check_files(current_version(folder, saved), saved)  # (not the ANN: `sentune index --ann` is what rebuilds it)
    return saved


def check_files(version: IndexVersion, settings: dict) -> None:
    """The documents, vectors, passages and BM25 of a complete version against its settings."""
    count = len(Documents.open(version.path, settings.get("documents")))
    vectors = open_vectors(version.vectors, count, settings.get("dimension"))
    if settings.get("passages"):
        PassageVectors.open(version.path, vectors, settings["passages"])
    check_lexical(version.bm25, count)


@dataclass(frozen=True)
class CheckedOut:
    """What check_out found in a build's folder (`settings`: its current settings; None: a new or empty folder), checked
    before the model loaded: the build that follows reads this instead of checking the folder again."""

    settings: dict | None


def check_resume(
    folder: Path, model_digest: str, documents: list[Document], shared_folder: bool = False, checked: CheckedOut | None = None, option: str = "--out"
) -> dict | None:
    """check_out (unless `checked` holds what it found), and one line naming the settings file when the index was built
    by another model (nothing is written); an adapt run's folder (`shared_folder`) takes the model it chose."""
    saved = check_out(folder, documents, shared_folder, option) if checked is None else checked.settings
    if saved is not None and saved.get("model_digest") != model_digest and not shared_folder:
        raise UserError(
            f"{IndexFolder(folder).settings_file}: built by another model ({saved.get('model')}, weights {str(saved.get('model_digest'))[:12]}); "
            f"choose another {option}"
        )
    return saved


def open_vectors(path: Path, rows: int, dimension: int | None) -> np.ndarray:
    """The vectors memory-mapped; one line naming it when it cannot be read (a truncated file), or its shape is not
    (documents × the index's dimension): a search would rank other documents than it names."""
    try:
        vectors = np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise DataError(path, None, f"missing; {DAMAGED}") from None
    except (ValueError, OSError, EOFError) as exc:  # numpy: "mmap length is greater than file size" for a cut file
        raise DataError(path, None, f"not a whole .npy array ({exc}); {DAMAGED}") from None
    if vectors.ndim != 2 or vectors.shape[0] != rows or (dimension is not None and vectors.shape[1] != dimension):
        raise DataError(path, None, f"shape {vectors.shape}, but the index holds {rows} documents of dimension {dimension}; {DAMAGED}")
    return vectors


def check_lexical(folder: Path, rows: int) -> None:
    """BM25's saved settings name as many documents as the index holds."""
    path = folder / LEXICAL_SETTINGS
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(path, None, f"missing; {DAMAGED}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DataError(path, None, f"not JSON; {DAMAGED}") from None
    if not isinstance(saved, dict) or saved.get("documents") != rows:
        found = saved.get("documents") if isinstance(saved, dict) else None
        raise DataError(path, None, f"BM25 over {found} documents, but the index holds {rows}; {DAMAGED}")
