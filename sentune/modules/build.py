"""Build saved models (the modules of this package after a transformer) whose pipeline carries sentune's pooling and post-processors, so that plain
`SentenceTransformer(path)` reproduces the embeddings sentune evaluated.

sentence-transformers >= 6 imports module classes outside its namespace only with
trust_remote_code=True, so every pooling that built-in modules can express is saved as built-ins:
  cls / mean / max                 -> Pooling(mode)
  first-last, lastN, layerK-tok    -> WeightedLayerPooling with fixed 0/1 weights -> Pooling(mode)
                                     (mean and CLS commute with averaging layers, so this is exact)
Only WK pooling and lastN-max (max does not commute with the layer average) need sentune's
LayerPooling, and such a model then loads with trust_remote_code=True (a warning says so).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.models import Normalize, Pooling, WeightedLayerPooling

from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.core.pooling import PoolingSpec
from sentune.core.results import umask_mode
from sentune.data.catalog import load_sentences
from sentune.modules.layer_pooling import LayerPooling, enable_hidden_states
from sentune.postprocess.base import PostProcessor

logger = logging.getLogger(__name__)


def pooling_modules(spec: PoolingSpec, dim: int, num_hidden_states: int) -> list:
    """The modules after the transformer that compute `spec`; built-ins whenever exact."""
    if spec.layers == (-1,) and spec.tokens in ("cls", "mean", "max"):
        return [Pooling(dim, spec.tokens)]
    if spec.tokens in ("cls", "mean") or (spec.tokens == "max" and len(spec.layers) == 1):
        spec.check_layers(num_hidden_states)
        layers = sorted({layer % num_hidden_states for layer in spec.layers})
        start = layers[0]
        weights = torch.zeros(num_hidden_states - start)
        weights[[layer - start for layer in layers]] = 1.0
        weighted = WeightedLayerPooling(
            dim, num_hidden_layers=num_hidden_states - 1, layer_start=start, layer_weights=torch.nn.Parameter(weights, requires_grad=False)
        )
        return [weighted, Pooling(dim, spec.tokens)]
    logger.warning("pooling %r has no sentence-transformers built-in; the saved model needs trust_remote_code=True", spec.name)
    return [LayerPooling(spec.name, dim, spec.wk_layer_start, spec.wk_window)]


def with_pooling(model: SentenceTransformer, pooling: str) -> SentenceTransformer:
    """The model's transformer followed by the pooling (or the model unchanged for 'model')."""
    spec = PoolingSpec.parse(pooling)
    if spec.tokens == "model":
        return model
    transformer: Any = model[0]
    num_hidden_states = int(transformer.model.config.num_hidden_layers) + 1
    modules = pooling_modules(spec, int(transformer.get_embedding_dimension()), num_hidden_states)
    pooled = SentenceTransformer(modules=[transformer, *modules], device=str(model.device))
    if spec.needs_all_layers:
        enable_hidden_states(pooled)
    return pooled


def ends_normalized(model: SentenceTransformer) -> bool:
    """Whether the model's pipeline ends by normalising its vectors (all-MiniLM-L6-v2's Normalize module)."""
    return isinstance(list(model)[-1], Normalize)


def normalized(model: SentenceTransformer) -> SentenceTransformer:
    """`model` ending in Normalize: unit vectors, the same cosines (a dot-product ranking then ranks by them)."""
    return model if ends_normalized(model) else SentenceTransformer(modules=[*model, Normalize()], device=str(model.device))


def save_atomic(model: SentenceTransformer, out: Path, readme_extra: str | None = None, finish: Callable[[Path], str | None] | None = None) -> Path:
    """Save into a temporary sibling folder, then rename: an interrupted save never leaves a half model.
    `readme_extra` is appended to the model card (README.md) before the folder becomes visible; so is what `finish`
    (called with the temporary folder once the model is in it, e.g. to add files) returns. An exception in `finish`
    leaves `out` as it was."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in out.parent.glob(f".{out.name}.tmp*"):  # left by a save that was killed
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp"))
    tmp.chmod(umask_mode(directory=True))  # mkdtemp's 0700 would hide the model from other users and containers
    try:
        model.save(str(tmp))
        for item in tmp.rglob("*"):  # some writers (safetensors) create their files 0600
            item.chmod(umask_mode(directory=item.is_dir()))
        if finish is not None:
            readme_extra = (readme_extra or "") + (finish(tmp) or "")
            for item in tmp.rglob("*"):
                item.chmod(umask_mode(directory=item.is_dir()))
        if readme_extra:
            with (tmp / "README.md").open("a", encoding="utf-8") as card:
                card.write(readme_extra)
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def build_postprocessed_model(
    model_name: str,
    pooling: str,
    postprocessor: PostProcessor,
    fit_on: str,
    out: Path,
    *,
    data_dir: Path | None,
    device: str,
    show_progress: bool = True,
    allow_modified: bool = False,
) -> Path:
    """`allow_modified`: a `tasks:` fit set may be read from files that differ from the catalog (--allow-modified-data)."""
    base = load_model(model_name, device=device)
    sentences = load_sentences(fit_on, data_dir or Path("."), allow_modified=allow_modified)
    return save_atomic(postprocessed_model(base, pooling, postprocessor, sentences, fit_on, show_progress=show_progress), out)


def postprocessed_model(
    model: SentenceTransformer, pooling: str, postprocessor: PostProcessor, sentences: list[str], fit_on: str, *, show_progress: bool = True
) -> SentenceTransformer:
    """`model` under `pooling`, followed by `postprocessor` fitted on its embeddings of `sentences` (`fit_on` names them
    in the progress bar), in memory."""
    base = with_pooling(model, pooling)
    fitted = postprocessor.fit(
        Encoder(base, "model", show_progress=show_progress, desc=f"encoding {fit_on} to fit {type(postprocessor).__name__}").encode(sentences)
    )
    return SentenceTransformer(modules=list(base) + fitted.to_modules(), device=str(base.device))
