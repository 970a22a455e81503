"""`sentune.paraphrase`, `sentune.ensemble` and `sentune.pipeline`: back-translated training pairs, the full ensemble
of several models, and composed stages (ct-sed-flow, ...), from Python, as `sentune paraphrase`, `sentune ensemble` and
`sentune pipeline` (each command parses its options and calls these)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.api import given
from sentune.api.common import Model, load, model_name, resolve, saved_model
from sentune.errors import UserError, names_python_arguments

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

FORWARD, BACKWARD = "Helsinki-NLP/opus-mt-en-de", "Helsinki-NLP/opus-mt-de-en"


@names_python_arguments()
def paraphrase(
    sentences: given.Given,
    forward: str = FORWARD,
    backward: str = BACKWARD,
    *,
    beams: int = 5,
    batch_size: int = 16,
    out: str | Path | None = None,
    show_progress: bool = False,
) -> list[tuple[str, str]]:
    """Each sentence with its back-translation (English → pivot → English through the two Hugging Face translation
    models, Kim et al. 2021), as `sentune paraphrase` (docs/training.md); the `(sentence, paraphrase)` pairs are training
    data as they are (`sentune.train("001-sg-opt", data=pairs, overrides={"method": "bt-sg-opt"})`).

    Args:
        sentences: strings (a list, a DataFrame or Dataset with a `text` column, `sentune.data.kinds.Sentences`), or a
            path: a file of one sentence a line (blank lines skipped).
        forward, backward: the translation models to the pivot language and back.
        beams, batch_size: the translation's beam search width and batch.
        out: also write the pairs there as `sentence<TAB>paraphrase` lines (a recipe's `train_data: pairs:PATH`).
    """
    from sentune.data.kinds import Sentences
    from sentune.data.readers import read_corpus

    if given.is_path(sentences):
        texts = read_corpus(Path(sentences), skip_blank=True, user_file=True)  # named before the translation models' code loads
        if not texts:
            raise UserError(f"{sentences}: no sentences")
    else:
        texts = given.as_kind(Sentences, sentences, "sentences").texts
    for option, value in (("beams", beams), ("batch_size", batch_size)):
        if value < 1:
            raise UserError(f"{option} {value}: at least 1")
    from sentune.data.paraphrase import back_translate, write_pairs

    pairs = list(zip(texts, back_translate(texts, forward, backward, beams=beams, batch_size=batch_size, show_progress=show_progress), strict=True))
    if out is not None:
        write_pairs(Path(out), pairs)
    return pairs


@names_python_arguments({"member": "members"})
def ensemble(members: Sequence[Model], pooling: str = "mean", out: str | Path | None = None, *, device: str | None = None) -> SentenceTransformer:
    """The "full ensemble" of the SED paper: one SentenceTransformer whose embedding is the mean of the members'
    embeddings under `pooling`, as `sentune ensemble` (docs/training.md).

    Args:
        members: the models, each a name, a folder or a `SentenceTransformer` in memory.
        pooling: the members' pooling (SED: `mean`).
        out: also save it there (every member's weights inside; it loads with `SentenceTransformer(out,
            trust_remote_code=True)`, as `sentune eval --model OUT` does).
        device: where it runs (default: $SENTUNE_DEVICE, else CUDA when present; with a member in memory, its device).
    """
    from sentune.core.models import check_model_name
    from sentune.core.pooling import PoolingSpec

    if isinstance(members, str | os.PathLike) or not members:
        raise UserError("members: a list of models (names, folders or SentenceTransformers), at least one")
    PoolingSpec.parse(pooling)
    names = [model_name(m) for m in members]
    for name in names:
        if name is not None:
            check_model_name(name, "--member")
    resolved = device_for(members, device)
    from sentune.modules.build import save_atomic
    from sentune.training.ensemble import build_ensemble, ensemble_card

    built = build_ensemble([load(m, device=resolved) for m in members], pooling, device=resolved)
    if out is not None:
        save_atomic(built, Path(out), readme_extra=ensemble_card([n or "a model given in memory" for n in names], pooling))
    return built


def device_for(models: Sequence[Model], device: str | None) -> str:
    """`device` resolved; left out, a model given in memory's own (a new model made of its modules would move it)."""
    in_memory = [m for m in models if model_name(m) is None]
    return resolve(device) if device is not None or not in_memory else str(in_memory[0].device)  # type: ignore[union-attr]


@names_python_arguments({"allow-modified-data": "allow_modified"})
def pipeline(
    stages: str | Sequence[str],
    model: Model = "default",
    *,
    members: int = 5,
    learners: int = 1,
    fit_on: str | os.PathLike[str] = "wiki",
    overrides: Mapping[str, Sequence[str] | Mapping[str, Any]] | None = None,
    out: str | Path | None = None,
    data: str | Path | None = None,
    device: str | None = None,
    allow_modified: bool = False,
) -> SentenceTransformer:
    """Run composed stages, each stage's model feeding the next (`"ct-sed-flow"`, `["nli", "ct", "sed", "flow"]`: the
    SED paper's §5), as `sentune pipeline` (docs/training.md), and return the final model. Every stage writes its folder
    under `out` (each with its results, resumed or skipped when run again); None: a temporary folder, removed once the
    final model is loaded.

    Args:
        stages: stages joined by `-`, or a list: training stages (nli, ct, sts, sg-opt, mirror, simcse), `sed` and the
            post-processors' words (whiten, flow).
        model: the model the first stage starts from: a name, a folder or a `SentenceTransformer` in memory.
        members, learners: SED's ensemble size and the learners distilled from it (seeds 1..K).
        fit_on: the post-processor stages' sentence set: a named set, `tasks:SELECTION`, `file:PATH` or a Path (named,
            as each stage records it in its stage.json).
        overrides: per stage, its recipe's (or post-processor's) overrides: `{"ct": {"training.max_steps": 500},
            "flow": ["learning_rate=1e-3"]}`; `sed`: the members', `sed-learner`: the learners'.
        data: the data directory (default: $SENTUNE_DATA).
    """
    tmp = tempfile.TemporaryDirectory(prefix="sentune-pipeline-") if out is None else None
    try:
        final = run(stages, model, members=members, learners=learners, fit_on=fit_on, overrides=overrides, out=Path(tmp.name if tmp else out),  # type: ignore[arg-type]
                    data=data, device=device, allow_modified=allow_modified)  # fmt: skip
        from sentune.core.models import load_model

        return load_model(str(final), device=resolve(device))
    finally:
        if tmp is not None:
            tmp.cleanup()


def run(
    stages: str | Sequence[str],
    model: Model,
    *,
    members: int,
    learners: int,
    fit_on: str | os.PathLike[str],
    overrides: Mapping[str, Sequence[str] | Mapping[str, Any]] | None,
    out: Path,
    data: str | Path | None,
    device: str | None,
    allow_modified: bool,
    command: str | None = None,
) -> Path:
    """pipeline() returning the final model's folder: what `sentune pipeline` calls."""
    from dataclasses import replace

    from sentune.api.train import as_overrides
    from sentune.data.catalog import resolve_data_dir
    from sentune.training.pipeline import PipelineConfig, check_pipeline, parse_stages, run_pipeline

    for option, value in (("members", members), ("learners", learners)):
        if value < 1:
            raise UserError(f"--{option} {value}: at least 1")
    config = PipelineConfig(
        parse_stages(stages if isinstance(stages, str) else "-".join(stages)),
        model=model_name(model) or "default",  # one in memory: saved into the run once every stage is checked
        members=members,
        learners=learners,
        fit_on=fit_on if isinstance(fit_on, str) else "file:" + os.fspath(fit_on),
        overrides={stage: as_overrides(items) for stage, items in (overrides or {}).items()},
        allow_modified=allow_modified,
    )
    check_pipeline(config)  # every stage's recipe and settings, before the device is asked for (torch)
    data_dir = resolve_data_dir(str(data) if data is not None else None)
    if model_name(model) is None:
        config = replace(config, model=saved_model(model, out / "input-model"))
    return run_pipeline(replace(config, device=resolve(device)), out, data_dir=data_dir, command=command)
