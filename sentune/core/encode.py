"""Fast, deterministic sentence encoding under one or several poolings in a single forward pass.

Why it is faster than calling `SentenceTransformer.encode` task by task: identical sentences are encoded
once (the STS sets repeat many), batches are cut by exact token length with a token budget (less padding
than sorting by characters), and every pooling asked for is read off the same forward pass.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from tqdm.auto import tqdm

from sentune.core.lanes import lane_shares
from sentune.core.memory import release_freed_memory
from sentune.core.pooling import PoolingSpec, pool
from sentune.core.runtime import PYTORCH, Runtime
from sentune.errors import UserError

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16")


def unique_in_order(sentences: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Unique sentences in first-seen order, and for each input the index of its unique sentence."""
    index: dict[str, int] = {}
    inverse = np.fromiter((index.setdefault(s, len(index)) for s in sentences), dtype=np.int64, count=len(sentences))
    return list(index), inverse


def overlong_indices(texts: Sequence[str], model: SentenceTransformer) -> list[int]:
    """Indices of the texts `model` truncates (more than its max_seq_length tokens, special tokens included), without
    encoding anything. Only texts of more UTF-8 bytes than the limit are tokenized: no tokenizer makes more tokens than
    a text has bytes, plus its few special tokens."""
    limit, tokenizer = model.max_seq_length, getattr(model, "tokenizer", None)
    if not limit or tokenizer is None:
        return []
    long = [i for i, text in enumerate(texts) if len(text.encode("utf-8")) + 3 > limit]
    if not long:
        return []
    ids = tokenizer([texts[i] for i in long], add_special_tokens=True, truncation=False)["input_ids"]
    return [i for i, tokens in zip(long, ids, strict=True) if len(tokens) > limit]


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
    indices are kept in `truncated_indices` so callers can name the file and line. `runtime` says what computes the
    batches (sentune.core.runtime: an ONNX graph, the small-batch graph, lanes, several GPUs); none: PyTorch on the
    model's device, as `model.encode` runs it.
    """

    def __init__(
        self,
        model: SentenceTransformer,
        poolings: Sequence[str] | str = "model",
        *,
        max_tokens: int | None = None,
        max_batch: int | None = None,
        show_progress: bool = True,
        precision: str = "fp32",
        desc: str = "encoding",
        devices: Sequence[str | torch.device] | None = None,
        runtime: Runtime | None = None,
        task: str | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.runtime = runtime or PYTORCH
        self.runtime.check_model(model)
        self.model = model
        self.desc = desc  # the progress bar's name: what is being encoded, and why
        names = [poolings] if isinstance(poolings, str) else list(poolings)
        self.specs = [PoolingSpec.parse(name) for name in names]
        # A GPU wants few large batches (each costs a launch of every kernel); on the CPU the smaller ones measured best.
        on_gpu = model.device.type == "cuda"
        self.max_tokens = max_tokens or (65536 if on_gpu else 4096)
        self.max_batch = max_batch or (1024 if on_gpu else 128)
        # Several devices: the model is copied to each and the batches dealt out (tested on the CPU with two "cpu"s).
        self.devices = [torch.device(d) for d in devices] if devices else self.runtime.devices(model)
        self._replica_models: list[SentenceTransformer] | None = None  # made on first use
        self.show_progress = show_progress
        self.precision = precision
        self.truncated_indices: list[int] = []
        # An asymmetric model (sentence-transformers' Router, e.g. a query encoder beside the unchanged document one):
        # the route its texts take, as encode_query / encode_document send them ("query", "document"; None: its default
        # route). A model without a Router has one route: `task` changes nothing.
        self.task = task if routed(model) else None
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
    def needs_all_layers(self) -> bool:
        return any(spec.needs_all_layers for spec in self.specs)

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
        unique, inverse, parts = self._encode_unique(sentences)
        outputs: dict[str, np.ndarray] = {}
        for batch, name, vectors in _drain(parts):
            if name not in outputs:
                outputs[name] = np.zeros((len(unique), vectors.shape[1]), dtype=np.float32)
            outputs[name][batch] = vectors
        results = {spec.name: outputs.pop(spec.name, np.zeros((0, 0), np.float32)) for spec in self.specs}
        if len(unique) == len(sentences):  # every sentence once: `inverse` is the identity, no copy needed
            return results
        # One pooling's copy at a time, its unique array dropped as soon as it is copied: the peak stays one array
        # above the results instead of doubling them.
        return {name: results.pop(name)[inverse] for name in list(results)}

    def encode_stacked(self, sentences: Sequence[str]) -> np.ndarray:
        """(sentences, poolings, d): every pooling of a sentence in one row, in the order of the poolings (all of one
        width). Filled in place: the poolings encoded apart and then stacked hold every vector twice (SG's views of the
        SciFact passages, 7 layers: 237 MiB more)."""
        unique, inverse, parts = self._encode_unique(sentences)
        position = {spec.name: index for index, spec in enumerate(self.specs)}
        stacked = np.zeros((0, len(self.specs), 0), dtype=np.float32)
        for batch, name, vectors in _drain(parts):
            if not len(stacked):
                stacked = np.zeros((len(unique), len(self.specs), vectors.shape[1]), dtype=np.float32)
            stacked[batch, position[name]] = vectors
        return stacked if len(unique) == len(sentences) else stacked[inverse]

    def _encode_unique(self, sentences: Sequence[str]) -> tuple[list[str], np.ndarray, list[tuple[np.ndarray, dict[str, np.ndarray]]]]:
        """The unique sentences, each sentence's index among them, and the unique sentences' vectors as (rows, {pooling:
        vectors}) parts; records which sentences the model truncates (truncated_indices)."""
        unique, inverse = unique_in_order(sentences)
        lengths = self.token_lengths(unique) if unique else np.zeros(0, dtype=np.int64)
        max_len = self.model.max_seq_length or int(lengths.max(initial=1))
        overlong = np.flatnonzero(lengths > max_len)
        overlong_set = set(overlong.tolist())
        self.truncated_indices = [i for i, u in enumerate(inverse) if int(u) in overlong_set] if len(overlong) else []
        clipped = np.minimum(lengths, max_len)
        on_cpu = self.devices[0].type == "cpu"
        lanes = self.runtime.lanes if on_cpu else None  # a runtime with a graph has none
        if lanes is not None and lanes.for_batch(len(unique)) > 1:  # a server's batch (sentune.core.lanes)
            shares = lane_shares(clipped, lanes.for_batch(len(unique)))
            with tqdm(total=len(unique), desc=self.desc, unit="sent", disable=not self.show_progress) as bar:
                run = lambda share: self._run(
                    self.model, unique, [share[b] for b in token_budget_batches(clipped[share], self.max_tokens, self.max_batch)], bar
                )  # noqa: E731
                parts = [part for done in lanes.run(run, shares) for part in done]
            return unique, inverse, parts
        if lanes is not None:
            lanes.whole()
        batches = token_budget_batches(clipped, self.max_tokens, self.max_batch)
        replicas = self._replicas()
        shards = [batches[i :: len(replicas)] for i in range(len(replicas))]  # several GPUs: a share each
        # the backend's graph, or for a text or two on the CPU the exact small-batch graph (sentune.core.runtime);
        # not for a Router, whose routes a graph of one module cannot hold
        runner = None if routed(self.model) else self.runtime.runner_for(len(unique), exact_on_cpu=on_cpu and self.precision == "fp32")
        with tqdm(total=len(unique), desc=self.desc, unit="sent", disable=not self.show_progress) as bar:
            if len(replicas) == 1:
                parts = self._run(replicas[0], unique, shards[0], bar, runner)
            else:  # one thread a GPU: CUDA work releases the GIL, so the devices run side by side
                with ThreadPoolExecutor(len(replicas)) as pool:
                    futures = [pool.submit(self._run, model, unique, shard, bar, runner) for model, shard in zip(replicas, shards, strict=True)]
                    parts = [part for future in futures for part in future.result()]
        return unique, inverse, parts

    def _replicas(self) -> list[SentenceTransformer]:
        """The model on each device that takes a share of the sentences (copies made once per Encoder)."""
        if self._replica_models is None:
            self._replica_models = [self.model] + [copy.deepcopy(self.model).to(device) for device in self.devices[1:]]
        return self._replica_models

    def _run(
        self, model: SentenceTransformer, unique: list[str], batches: list[np.ndarray], bar, runner=None
    ) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Encode `batches` on one model's device (`runner`: the runtime's ONNX graph that computes the token states in
        place of PyTorch). On a GPU the next batches are tokenized in a thread while the current one runs, and
        vectors stay on the device until the end (no wait for each batch to finish)."""
        if model.training:  # eval() walks every module: a server's one-query batch paid a millisecond for it
            model.eval()
        hf = getattr(model[0], "model", None)
        previous = hf.config.output_hidden_states if hf is not None else None
        if hf is not None and self.needs_all_layers:
            hf.config.output_hidden_states = True
        on_gpu = model.device.type == "cuda"
        done: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
        pending: list[tuple[np.ndarray, dict[str, torch.Tensor]]] = []
        try:
            for number, (batch, features) in enumerate(self._tokenized(model, unique, batches, prefetch=on_gpu, task=self.task), start=1):
                ids = features.get("input_ids")
                long_batch = ids is not None and ids.shape[-1] >= TRIM_FROM_TOKENS
                pending.append((batch, self._forward(model, features, runner)))
                bar.update(len(batch))
                if not on_gpu or len(pending) >= FLUSH_EVERY:
                    done += _to_numpy(pending)
                    pending = []
                if not on_gpu and (long_batch or number % TRIM_EVERY_BATCHES == 0):
                    release_freed_memory()
            done += _to_numpy(pending)
        finally:
            if hf is not None:
                hf.config.output_hidden_states = previous
        return done

    @staticmethod
    def _tokenized(
        model: SentenceTransformer, unique: list[str], batches: list[np.ndarray], prefetch: bool, task: str | None = None
    ) -> Iterator[tuple[np.ndarray, dict]]:
        # a Router reads the route from the features (`task`), as SentenceTransformer.encode(task=...) sends it
        tokenize = lambda batch: model.preprocess([unique[i] for i in batch], **({"task": task} if task else {}))
        if not prefetch:
            yield from ((batch, tokenize(batch)) for batch in batches)
            return
        with ThreadPoolExecutor(1) as pool:  # the Rust tokenizer releases the GIL
            ahead = [pool.submit(tokenize, batch) for batch in batches[:PREFETCH]]
            for i, batch in enumerate(batches):
                features = ahead[i].result()
                if i + PREFETCH < len(batches):
                    ahead.append(pool.submit(tokenize, batches[i + PREFETCH]))
                yield batch, features

    @torch.inference_mode()
    def _forward(self, model: SentenceTransformer, features: dict, runner=None) -> dict[str, torch.Tensor]:
        if self.precision == "bf16":
            # Opt-in: bfloat16 matmuls (AMX/AVX512-BF16 on CPUs that have them) are ~2x faster here but
            # move embeddings by ~1e-2 absolute; the default fp32 path is exact.
            with torch.autocast(model.device.type, dtype=torch.bfloat16):
                return self._forward_exact(model, features, runner)
        return self._forward_exact(model, features, runner)

    def _forward_exact(self, model: SentenceTransformer, features: dict, runner=None) -> dict[str, torch.Tensor]:
        features = {k: (v.to(model.device, non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in features.items()}
        if runner is not None:  # ONNX Runtime computes the token states: every layer when a pooling asks, or the model's own modules read them (first-last, WK)
            config = getattr(getattr(model[0], "model", None), "config", None)
            features = runner(features, all_layers=self.needs_all_layers or bool(getattr(config, "output_hidden_states", False)))
        else:
            features = model[0](features)
        mask = features["attention_mask"]
        out: dict[str, torch.Tensor] = {}
        hidden_states: Any
        hidden_states = features.get("all_layer_embeddings")
        for spec in self.specs:
            if spec.tokens == "model":
                continue
            states = hidden_states if spec.needs_all_layers else (features["token_embeddings"],)
            out[spec.name] = pool(spec, states, mask).float()
        # The model's own modules run last: sentence-transformers' max Pooling writes into token_embeddings.
        if any(spec.tokens == "model" for spec in self.specs):
            rest = dict(features)
            for module in list(model)[1:]:
                rest = module(rest)
            out["model"] = rest["sentence_embedding"].float()
        return out


# Padded batch length from which release_freed_memory runs after the batch. `sentune eval --tasks scifact-train`
# (5,183 abstracts at 256 tokens) peaked at 2,181 MiB without it and 1,124 MiB with it, taking 197.6 s and 208.3 s
# (benchmarks/speed/retrieval_eval.py, 2026-11-24; InformationRetrievalEvaluator in the same two runs took 208.8 s and
# 212.7 s, so most of that difference is the machine). After every batch it also cost 6 % on short STS sentences,
# which never reach this length.
TRIM_FROM_TOKENS = 128
# Short batches leave smaller holes, but many of them add up: the SciFact passages (23,078, about 90 tokens each),
# encoded by SED's members, took a process to 2.1 GB resident, 0.9 GB after one trim (gdb, 2026-11-24). The cost of
# trimming after every 16th short batch has not been timed on its own.
TRIM_EVERY_BATCHES = 16
FLUSH_EVERY = 64  # batches whose vectors wait on a GPU before one copy to the host
PREFETCH = 2  # batches tokenized ahead of the GPU


def _drain(parts: list[tuple[np.ndarray, dict[str, np.ndarray]]]):
    """(rows, pooling, vectors) of every part, each part dropped from the list once its vectors have been used: the
    caller copies them into its output, so the parts and the output are not all held at once."""
    while parts:
        batch, pooled = parts.pop()
        for name, vectors in pooled.items():
            yield batch, name, vectors


def _to_numpy(pending: list[tuple[np.ndarray, dict[str, torch.Tensor]]]) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """One device-to-host copy per pooling for all pending batches."""
    if not pending:
        return []
    names = list(pending[0][1])
    joined = {name: torch.cat([pooled[name] for _, pooled in pending]).cpu().numpy() for name in names}
    rows = np.concatenate([batch for batch, _ in pending])
    return [(rows, joined)]


def routed(model: SentenceTransformer) -> bool:
    """Whether the model's first module is sentence-transformers' Router (its texts take a route by task)."""
    from sentence_transformers.sentence_transformer.modules import Router

    return len(model) > 0 and isinstance(model[0], Router)
