"""`sentune.whiten`, `sentune.flow` and `sentune.fit_postprocessor`: fit a post-processor (sentune.postprocess's
registry) on a model's embeddings of a sentence set and get the model with it back, as `sentune whiten` and `sentune
flow` do (each command parses its options and calls `fit_postprocessor` here)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.api import given
from sentune.api.common import Model, load
from sentune.api.models import device_for
from sentune.errors import UserError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


def fit_postprocessor(
    model: Model,
    method: str,
    fit_on: given.Given = "nli",
    *,
    pooling: str = "model",
    settings: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    data: str | Path | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
    allow_modified: bool = False,
    show_progress: bool = False,
) -> SentenceTransformer:
    """`model` under `pooling`, followed by the post-processor `method` (a name or command word of
    sentune.postprocess.POSTPROCESSORS: `"whitening"`/`"whiten"`, `"flow"`) fitted on its embeddings of `fit_on`; the
    returned SentenceTransformer carries it, as the folder `sentune WORD --out` saves (docs/training.md, docs/evaluation.md).

    Args:
        model: a name (`"default"`: all-MiniLM-L6-v2), a folder, or a `SentenceTransformer` in memory.
        method: the post-processor, by name or word.
        fit_on: the sentences it is fitted on: a named set (`"nli"`, `"wiki"`, `"stsb"`, `"qqp"`), `"tasks:SELECTION"`
            (every sentence of those catalogued tasks), `"file:PATH"` or a Path (a corpus file), or sentences as objects
            (strings, a DataFrame or Dataset with a `text` column, `sentune.data.kinds.Sentences`); each sentence once.
        pooling: one pooling name (`model`, `cls`, `mean`, `first-last`, ...), applied before the post-processor.
        settings: the post-processor's constructor settings (`{"n_components": 256}`, `{"learning_rate": 1e-3}`).
        out: also save the model there (atomically), as `sentune WORD --out`.
        data: the data directory for named sets and tasks (default: $SENTUNE_DATA).
        device: where the model runs and the post-processor is fitted (default: $SENTUNE_DEVICE, else CUDA when
            present; for a model in memory, its own device).
    """
    from sentune.postprocess import postprocessor

    record = postprocessor(method)
    asked = dict(settings or {})
    unknown = sorted(set(asked) - set(record.settings))
    if unknown:
        raise UserError(f"settings {unknown[0]}: {record.word} takes {', '.join(sorted(record.settings))}")
    sentences, name = _fit_set(fit_on, data, allow_modified)  # read and checked before torch loads
    resolved = device_for([model], device)
    offered = {"show_progress": show_progress, "device": resolved}  # each post-processor takes those its constructor names
    instance = record.load()(**asked, **{k: v for k, v in offered.items() if k in record.settings and k not in asked})
    from sentune.modules.build import postprocessed_model, save_atomic

    loaded = load(model, device=resolved, trust_remote_code=trust_remote_code)
    fitted = postprocessed_model(loaded, pooling, instance, sentences, name, show_progress=show_progress)
    if out is not None:
        save_atomic(fitted, Path(out))
    return fitted


def _fit_set(fit_on: given.Given, data: str | Path | None, allow_modified: bool) -> tuple[list[str], str]:
    """The fit set's unique sentences and its name: a name or spec parsed once into what it names (a set, tasks, a
    file: sentune.data.catalog.TrainData), a Path a corpus file, objects read as Sentences."""
    from sentune.data.catalog import TrainData, resolve_data_dir, sentence_source
    from sentune.data.kinds import Sentences

    if isinstance(fit_on, str):
        source = sentence_source(fit_on, "--fit-on")
    elif isinstance(fit_on, os.PathLike):
        source = TrainData(Sentences, "file", os.fspath(fit_on))
    else:
        return given.as_kind(Sentences, fit_on, "fit_on").unique().texts, "the given sentences"
    source.check("--fit-on")
    data_dir = resolve_data_dir(str(data) if data is not None else None) if source.origin != "file" else Path(".")  # a file needs none
    texts = source.load(data_dir, allow_modified=allow_modified)
    assert isinstance(texts, Sentences)
    return texts.unique().texts, fit_on if isinstance(fit_on, str) else os.fspath(fit_on)


def whiten(
    model: Model = "default",
    fit_on: given.Given = "nli",
    *,
    k: int | None = None,
    pooling: str = "model",
    out: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
    **options: Any,
) -> SentenceTransformer:
    """`model` with whitening fitted on `fit_on` (its mean and the rotation to unit variance, keeping `k` components:
    all with variance by default), as `sentune whiten`; `settings`, `options` (`data`, `device`, `show_progress`, ...):
    as `fit_postprocessor`."""
    return fit_postprocessor(model, "whitening", fit_on, pooling=pooling, out=out, settings={"n_components": k, **(settings or {})}, **options)


def flow(
    model: Model = "default",
    fit_on: given.Given = "nli",
    *,
    blocks: int = 3,
    epochs: int = 1,
    seed: int = 0,
    pooling: str = "model",
    out: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
    **options: Any,
) -> SentenceTransformer:
    """`model` with a BERT-flow (Glow: `blocks` coupling blocks trained `epochs` epochs from `seed`) fitted on `fit_on`,
    as `sentune flow`; `settings` (`{"learning_rate": 1e-3}`, ...) and `options` (`data`, `device`, `show_progress`,
    ...): as `fit_postprocessor`."""
    chosen = {"n_blocks": blocks, "epochs": epochs, "seed": seed, **(settings or {})}
    return fit_postprocessor(model, "flow", fit_on, pooling=pooling, out=out, settings=chosen, **options)
