"""An index whose system ranks beyond one fusion of BM25 and its model's cosine: its settings' `expansion`, written by an
adapt run that chose such a candidate, read by sentune.search.index.SearchIndex.search for the index's own system
(`--system dense` or `bm25` still rank plainly).

- {"kind": "prf", ...}: pseudo-relevance feedback (sentune.search.prf), Rocchio on the dense side and RM3 on BM25's,
  fused with the index's fusion;
- {"kind": "multi-dense", "models": [{"model": NAME_OR_PATH, "vectors": FILE}, ...], "weights": [...]}:
  the index's model, each other model and BM25 fused with those weights (sentune.search.multi_dense); each other model
  is loaded once per process; FILE: where its document vectors lie in the index (sentune.search.folder names it)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from sentune.data.text_files import DataError
from sentune.search.documents import DAMAGED
from sentune.search.folder import IndexFolder
from sentune.search.prf import Feedback, prf_rank, unit

KINDS = ("prf", "multi-dense")


def feedback_of(index: Any) -> Feedback:
    """The feedback the settings record; one line naming the file when it is not one sentune writes."""
    saved = index.settings.get("expansion")
    try:
        return Feedback.from_dict(saved)
    except ValueError as exc:
        raise DataError(IndexFolder(index.folder).settings_file, None, f"expansion: {exc}; {DAMAGED}") from None


def expanded_rank(index: Any, query_vectors: np.ndarray, texts: list[str], top: int, own: list[int | None] | None) -> tuple[list[list[int]], list[list[float]]]:
    """The index's system's top `top` documents per query with their scores (sentune.search.index.SearchIndex's rows):
    every document scored exactly (an approximate index is not read: feedback reads the first results of both sides,
    and the other models have no approximate index)."""
    saved = index.settings.get("expansion")
    if isinstance(saved, dict) and saved.get("kind") == "multi-dense":
        return _multi_dense(index, query_vectors, texts, top, own)
    feedback = feedback_of(index)
    if index.fusion is None:
        raise DataError(IndexFolder(index.folder).settings_file, None, f"expansion {feedback.label} without a fusion; {DAMAGED}")

    def read(rows: list[int]) -> list[str]:
        return [text for _, text in index.documents.read(rows)]

    if getattr(index, "_prf_units", None) is None:  # the documents normalised once per index object, not per request
        index._prf_units = unit(np.asarray(index.vectors))
    return prf_rank(query_vectors, index._prf_units, index.lexical(), texts, read, index.documents.order, index.fusion, feedback, depth=top, own=own)


@lru_cache(maxsize=8)
def _model(name: str, device: str | None):
    from sentune.core.models import load_model

    return load_model(name, device=device)


def _multi_dense(index: Any, query_vectors: np.ndarray, texts: list[str], top: int, own) -> tuple[list[list[int]], list[list[float]]]:
    from sentune.core.encode import Encoder
    from sentune.search.fusion import QUERY_BLOCK
    from sentune.search.multi_dense import MultiFusion, multi_rank
    from sentune.search.stored import open_vectors

    saved, path = index.settings["expansion"], IndexFolder(index.folder).settings_file
    models = saved.get("models")
    try:
        fusion = MultiFusion.from_dict(saved)
        if (
            not isinstance(models, list)
            or len(models) + 2 != len(fusion.weights)
            or not all(isinstance(m, dict) and {"model", "vectors"} <= set(m) for m in models)
        ):
            raise ValueError(f"{len(fusion.weights)} weights for models {models!r}")
    except ValueError as exc:
        raise DataError(path, None, f"expansion: {exc}; {DAMAGED}") from None
    if getattr(index, "_multi_units", None) is None:  # every model's documents normalised once per index object
        try:
            files = [index.version.file(str(entry["vectors"])) for entry in models]
        except ValueError as exc:
            raise DataError(path, None, f"expansion: {exc}; {DAMAGED}") from None
        others = [open_vectors(file, len(index.documents), None) for file in files]
        index._multi_units = [unit(np.asarray(v)) for v in [index.vectors, *others]]
    encoded = [unit(query_vectors)]
    encoded += [unit(Encoder(_model(entry["model"], index.device), "model", show_progress=False).encode(texts)) for entry in models]
    lexical = index.lexical()
    ranked: list[list[int]] = []
    values: list[list[float]] = []
    for start in range(0, len(texts), QUERY_BLOCK):  # a block's scores of every document at once, as the hybrid's
        rows = slice(start, start + QUERY_BLOCK)
        dense = [queries[rows] @ docs.T for queries, docs in zip(encoded, index._multi_units, strict=True)]
        found = multi_rank(dense, lexical.scores(texts[rows]), index.documents.order, fusion, top, own[rows] if own is not None else None)
        ranked, values = ranked + found[0], values + found[1]
    return ranked, values
