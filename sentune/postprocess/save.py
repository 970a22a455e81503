"""Fit a post-processor on a model's embeddings of a sentence set and save the model with it, as
sentence-transformers modules (`SentenceTransformer(path)` reproduces the post-processed embeddings)."""

from __future__ import annotations

from pathlib import Path

from sentence_transformers import SentenceTransformer

from sentune.core.build import save_atomic, with_pooling
from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.data.catalog import load_sentences
from sentune.postprocess.base import PostProcessor


def build_postprocessed_model(
    model_name: str, pooling: str, postprocessor: PostProcessor, fit_on: str, out: Path, *, data_dir: Path | None, show_progress: bool = True
) -> Path:
    base = with_pooling(load_model(model_name), pooling)
    sentences = load_sentences(fit_on, data_dir or Path("."))
    fitted = postprocessor.fit(Encoder(base, "model", show_progress=show_progress).encode(sentences))
    return save_atomic(SentenceTransformer(modules=list(base) + fitted.to_modules(), device="cpu"), out)
