"""Fast, deterministic sentence encoding under one or several poolings in a single forward pass.

Why it is faster than calling `SentenceTransformer.encode` task by task: identical sentences are encoded
once (the STS sets repeat many), batches are cut by exact token length with a token budget (less padding
than sorting by characters), and every pooling asked for is read off the same forward pass.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tqdm.auto import tqdm

from sentune.core.pooling import PoolingSpec, pool
from sentune.errors import UserError

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16")


def unique_in_order(sentences: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Unique sentences in first-seen order, and for each input the index of its unique sentence."""
    index: dict[str, int] = {}
    inverse = np.fromiter((index.setdefault(s, len(index)) for s in sentences), dtype=np.int64, count=len(sentences))
    return list(index), inverse


def token_budget_batches(lengths: np.ndarray, max_tokens: int, max_batch: int) -> list[np.ndarray]:
    """Split indices, longest first, into batches whose padded size (count × longest) fits the budget."""
    order = np.argsort(-lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        longest = max(int(lengths[order[start]]), 1)
        size = max(1, min(max_batch, max_tokens // longest))
        batches.append(order[start : start + size])
        start += size
    return batches


class Encoder:
    """Encode sentences with a sentence-transformers model under named poolings (see sentune.core.pooling).

    `encode_many` returns one float32 array per pooling, rows in input order. Sentences longer than
    the model's max_seq_length are truncated (as every STS/SentEval evaluation does); their input
    indices are kept in `truncated_indices` so callers can name the file and line.
    """

    def __init__(
        self,
        model: SentenceTransformer,
        poolings: Sequence[str] | str = "model",
        *,
        max_tokens: int = 4096,
        max_batch: int = 128,
        show_progress: bool = True,
        precision: str = "fp32",
        desc: str = "encoding",
    ) -> None:
        if precision not in PRECISIONS:
            raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.model = model
        self.desc = desc  # the progress bar's name: what is being encoded, and why
        names = [poolings] if isinstance(poolings, str) else list(poolings)
        self.specs = [PoolingSpec.parse(name) for name in names]
        self.max_tokens = max_tokens
        self.max_batch = max_batch
        self.show_progress = show_progress
        self.precision = precision
        self.truncated_indices: list[int] = []
        hf = self.hf_model
        if hf is not None:
            num_hidden = hf.config.num_hidden_layers + 1
            for spec in self.specs:
                spec.check_layers(num_hidden)
        elif any(spec.tokens != "model" for spec in self.specs):
            raise UserError(
                f"this model's first module ({type(model[0]).__name__}) gives only its own sentence embedding, "
                f"no token states: use the pooling 'model', not {', '.join(self.pooling_names)}"
            )

    @property
    def hf_model(self):
        """The Hugging Face model inside the first (Transformer) module, or None for other encoders."""
        return getattr(self.model[0], "model", None)

    @property
    def pooling_names(self) -> list[str]:
        return [spec.name for spec in self.specs]

    def token_lengths(self, sentences: Sequence[str]) -> np.ndarray:
        """Exact token counts including special tokens, before truncation."""
        tokenizer = self.model.tokenizer
        ids = tokenizer(list(sentences), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(sentences))

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        if len(self.specs) != 1:
            raise ValueError("encode() needs exactly one pooling; use encode_many() for several")
        return self.encode_many(sentences)[self.specs[0].name]

    @torch.inference_mode()
    def encode_many(self, sentences: Sequence[str]) -> dict[str, np.ndarray]:
        unique, inverse = unique_in_order(sentences)
        lengths = self.token_lengths(unique) if unique else np.zeros(0, dtype=np.int64)
        max_len = self.model.max_seq_length or int(lengths.max(initial=1))
        overlong = np.flatnonzero(lengths > max_len)
        overlong_set = set(overlong.tolist())
        self.truncated_indices = [i for i, u in enumerate(inverse) if int(u) in overlong_set] if len(overlong) else []
        results = self._encode_unique(unique, np.minimum(lengths, max_len))
        return {name: array[inverse] for name, array in results.items()}

    def _encode_unique(self, unique: list[str], lengths: np.ndarray) -> dict[str, np.ndarray]:
        self.model.eval()
        hf = self.hf_model
        need_layers = any(spec.needs_all_layers for spec in self.specs)
        previous = hf.config.output_hidden_states if hf is not None else None
        if hf is not None and need_layers:
            hf.config.output_hidden_states = True
        outputs: dict[str, np.ndarray | None] = {spec.name: None for spec in self.specs}
        try:
            with tqdm(total=len(unique), desc=self.desc, unit="sent", disable=not self.show_progress) as bar:
                for batch in token_budget_batches(lengths, self.max_tokens, self.max_batch):
                    pooled = self._forward([unique[i] for i in batch])
                    for name, vectors in pooled.items():
                        table = outputs[name]
                        if table is None:
                            table = outputs[name] = np.zeros((len(unique), vectors.shape[1]), dtype=np.float32)
                        table[batch] = vectors
                    bar.update(len(batch))
        finally:
            if hf is not None:
                hf.config.output_hidden_states = previous
        return {name: (array if array is not None else np.zeros((0, 0), np.float32)) for name, array in outputs.items()}

    def _forward(self, texts: list[str]) -> dict[str, np.ndarray]:
        if self.precision == "bf16":
            # Opt-in: bfloat16 matmuls (AMX/AVX512-BF16 on CPUs that have them) are ~2x faster here but
            # move embeddings by ~1e-2 absolute; the default fp32 path is exact.
            with torch.autocast(self.model.device.type, dtype=torch.bfloat16):
                return self._forward_exact(texts)
        return self._forward_exact(texts)

    def _forward_exact(self, texts: list[str]) -> dict[str, np.ndarray]:
        features = self.model.preprocess(texts)
        features = {k: (v.to(self.model.device) if isinstance(v, torch.Tensor) else v) for k, v in features.items()}
        features = self.model[0](features)
        mask = features["attention_mask"]
        out: dict[str, np.ndarray] = {}
        hidden = features.get("all_layer_embeddings")
        for spec in self.specs:
            if spec.tokens == "model":
                continue
            states = hidden if spec.needs_all_layers else (features["token_embeddings"],)
            out[spec.name] = pool(spec, states, mask).float().cpu().numpy()
        # The model's own modules run last: sentence-transformers' max Pooling writes into token_embeddings.
        if any(spec.tokens == "model" for spec in self.specs):
            rest = dict(features)
            for module in list(self.model)[1:]:
                rest = module(rest)
            out["model"] = rest["sentence_embedding"].float().cpu().numpy()
        return out
