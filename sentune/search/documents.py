"""An index's documents read from its file, a line at a time, instead of held in each process's memory (where each
file lies: sentune.search.folder):

    the documents file      one {"_id", "text"} line a document, in index order
    its offsets array       int64, documents + 1: the byte where each line starts, then the file's size
    its order array         int64, documents: each document's rank in sorted-id order, the tie-break of every
                            ranking (sentune.search.fusion.id_order)

Both arrays are memory-mapped, so the workers of a server share their pages (the page cache's) as they share the
vectors'; a search reads only its hits' lines. `sentune index` writes them beside the documents. An index built
without them (or whose documents no longer match them) still opens: one streaming pass over the documents file
finds each line's offset and every id (no text is kept), and the arrays are written into the index folder then when
it is writable (atomically: several processes may do it at once), else held in this process's memory.

Opening checks what costs nothing (the arrays' length and the file's size against the settings' count; the last line
parses); a line that is not a document is named when a search reads it. The streaming pass reads every line, so an
index without the arrays gets every line checked on open.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from sentune.data.text_files import DataError
from sentune.search.damaged import DAMAGED
from sentune.search.folder import IndexVersion
from sentune.search.fusion import id_order

NOT_A_DOCUMENT = f'not a document ({{"_id": ..., "text": ...}}); {DAMAGED}'


def parse_line(path: Path, number: int, line: bytes) -> tuple[str, str]:
    """(id, text) of one line of the documents; one line naming the file and line when it is not a document."""
    try:
        record = json.loads(line)
        doc_id, text = record["_id"], record["text"]
    except UnicodeDecodeError:
        raise DataError(path, number, f"not UTF-8 text; {DAMAGED}") from None
    except (json.JSONDecodeError, KeyError, TypeError):
        raise DataError(path, number, NOT_A_DOCUMENT) from None
    if not isinstance(doc_id, str) or not isinstance(text, str):
        raise DataError(path, number, f"_id and text must be strings; {DAMAGED}")
    return doc_id, text


def document_line(doc_id: str, text: str) -> bytes:
    return (json.dumps({"_id": doc_id, "text": text}, ensure_ascii=False) + "\n").encode("utf-8")


def write_documents(folder: Path, documents: Iterable) -> None:
    """The documents file and the two arrays beside it (sentune.data.beir.Document's id and text) in the version
    `folder`, each written beside and renamed over (a file another version shares is never written into)."""
    offsets = [0]
    ids = []
    path = IndexVersion(folder).documents
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as f:
            for d in documents:
                offsets.append(offsets[-1] + f.write(document_line(d.id, d.text)))
                ids.append(d.id)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    save_arrays(folder, np.asarray(offsets, dtype=np.int64), id_order(ids))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_arrays(folder: Path, offsets: np.ndarray, order: np.ndarray) -> None:
    """The order first, the offsets last: offsets that match the documents vouch for both. Readable by whoever may
    read the documents (a temporary file is private)."""
    version = IndexVersion(folder)
    mode = version.documents.stat().st_mode & 0o777
    for path, array in ((version.order, order), (version.offsets, offsets)):
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".partial")
        try:
            with os.fdopen(handle, "wb") as f:
                np.save(f, array)
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


class Documents:
    """The documents of an index: its count, each document's tie-break rank (`order`), and any document's id and
    text read from its own line."""

    def __init__(self, path: Path, offsets: np.ndarray, order: np.ndarray) -> None:
        self.path, self.offsets, self.order = path, offsets, order
        self._file: int | None = None

    @classmethod
    def open(cls, folder: Path, expected: int | None) -> Documents:
        """The documents of the index version in `folder`; one line naming their file (and the line) when it is
        missing, holds another count than the settings say, or a line that is not a document."""
        path = IndexVersion(folder).documents
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise DataError(path, None, f"missing; {DAMAGED}") from None
        arrays = _saved_arrays(folder, expected, size)
        if arrays is None:
            offsets, order = scan(path, expected)
            try:
                save_arrays(folder, offsets, order)
                arrays = _saved_arrays(folder, expected, size)
            except OSError:  # a read-only index: this process keeps what it computed
                arrays = None
            if arrays is None:
                arrays = offsets, order
        documents = cls(path, *arrays)
        if len(documents):
            documents.read([len(documents) - 1])  # a file cut after the arrays were written: named now, not mid-search
        return documents

    def __len__(self) -> int:
        return len(self.order)

    def _fd(self) -> int:
        if self._file is None:  # one descriptor read with pread: threads and shallow copies share it safely
            self._file = os.open(self.path, os.O_RDONLY)
        return self._file

    def __del__(self, close=os.close) -> None:  # bound now: at interpreter exit the module's globals may be gone
        if self._file is not None:
            close(self._file)

    def read(self, rows: Iterable[int]) -> list[tuple[str, str]]:
        """(id, text) of each row, from its own line of the documents."""
        out = []
        for row in rows:
            start, stop = int(self.offsets[row]), int(self.offsets[row + 1])
            out.append(parse_line(self.path, row + 1, os.pread(self._fd(), stop - start, start)))
        return out

    def ids(self, rows: Iterable[int]) -> list[str]:
        return [doc_id for doc_id, _ in self.read(rows)]

    def stream(self) -> Iterator[tuple[int, str, str]]:
        """(line number, id, text) of every document in order, one line read at a time."""
        with self.path.open("rb") as f:
            for number, line in enumerate(f, start=1):
                doc_id, text = parse_line(self.path, number, line)
                yield number, doc_id, text

    def every_id(self) -> list[str]:
        """Every document's id, in order (a pass over the whole file: for exports and checks, never per query)."""
        return [doc_id for _, doc_id, _ in self.stream()]

    def rows_of(self, wanted: Iterable[str]) -> dict[str, int]:
        """The row of each id in `wanted` that a document has (one pass over the file)."""
        wanted = set(wanted)
        found: dict[str, int] = {}
        if not wanted:
            return found
        for number, doc_id, _ in self.stream():
            if doc_id in wanted:
                found.setdefault(doc_id, number - 1)
        return found


def _saved_arrays(folder: Path, expected: int | None, size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The memory-mapped arrays when they describe these documents (their file's size, the settings' count), else None."""
    version = IndexVersion(folder)
    try:
        offsets = np.load(version.offsets, mmap_mode="r")
        order = np.load(version.order, mmap_mode="r")
    except (OSError, ValueError, EOFError):
        return None
    if expected is None or offsets.shape != (expected + 1,) or order.shape != (expected,) or offsets.dtype != np.int64 or order.dtype != np.int64:
        return None
    if expected and (int(offsets[0]) != 0 or int(offsets[-1]) != size):
        return None
    return offsets, order


def scan(path: Path, expected: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Each line's offset and the ids' order, in one pass that checks every line and keeps no text; one line naming the
    file (and line) when a line is not a document or the count is not the settings'."""
    offsets = [0]
    ids: list[str] = []
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            ids.append(parse_line(path, number, line)[0])
            offsets.append(offsets[-1] + len(line))
    if len(ids) != expected:
        raise DataError(path, None, f"{len(ids)} documents, but {IndexVersion(path.parent).settings_file.name} says {expected}; {DAMAGED}")
    return np.asarray(offsets, dtype=np.int64), id_order(ids)
