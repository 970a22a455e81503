"""Back-translation paraphrases (Kim et al. 2021, A.2: English → German → English) through any pair of Hugging
Face translation models, e.g. Helsinki-NLP/opus-mt-en-de and Helsinki-NLP/opus-mt-de-en (Marian).
The paper used the WMT'19 fairseq models with beam 100; beams here default to 5 (CPU) and are an option."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)


def _load(name: str):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    model = AutoModelForSeq2SeqLM.from_pretrained(name, weights_only=True).eval()
    return tokenizer, model


@torch.inference_mode()
def translate(sentences: list[str], tokenizer, model, *, beams: int, batch_size: int, max_length: int, desc: str, show_progress: bool) -> list[str]:
    out = []
    for start in tqdm(range(0, len(sentences), batch_size), desc=desc, disable=not show_progress):
        batch = tokenizer(sentences[start : start + batch_size], return_tensors="pt", padding=True, truncation=True, max_length=max_length)
        batch.pop("token_type_ids", None)
        generated = model.generate(**batch, num_beams=beams, max_new_tokens=max_length)
        out += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return out


def back_translate(
    sentences: list[str], forward: str, backward: str, *, beams: int = 5, batch_size: int = 16, max_length: int = 128, show_progress: bool = True
) -> list[str]:
    pivot = translate(sentences, *_load(forward), beams=beams, batch_size=batch_size, max_length=max_length, desc="to pivot", show_progress=show_progress)
    back = translate(pivot, *_load(backward), beams=beams, batch_size=batch_size, max_length=max_length, desc="back", show_progress=show_progress)
    empty = [i for i, text in enumerate(back) if not text.strip()]
    if empty:
        # An empty paraphrase is no positive; keep the sentence itself and say how often that happened.
        logger.warning("%d of %d back-translations came out empty; the original sentence stands in (first: line %d)", len(empty), len(back), empty[0] + 1)
        for i in empty:
            back[i] = sentences[i]
    return [" ".join(text.split()) for text in back]


def write_pairs(path: Path, pairs: list[tuple[str, str]]) -> None:
    """`sentence<TAB>paraphrase` lines, the file a recipe trains on as `train_data: pairs:PATH`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{s}\t{p}\n" for s, p in pairs), encoding="utf-8")
