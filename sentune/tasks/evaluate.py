"""Evaluate a model on declared tasks: every sentence of every task is encoded once, under every pooling
asked for, then each evaluator reads its rows. Whitening variants reuse the same embeddings."""

from __future__ import annotations

import logging
import platform
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer
from tqdm.auto import tqdm

import sentune
from sentune.core.embedding_cache import encode_cached
from sentune.core.encode import Encoder
from sentune.core.results import averaged_sts_tasks, display_path
from sentune.core.runtime import Runtime
from sentune.data import catalog
from sentune.data.catalog import TaskSpec, load_examples, load_sentences, load_task, sentences_of
from sentune.errors import UserError
from sentune.postprocess import postprocessor
from sentune.tasks.alignment import alignment_uniformity
from sentune.tasks.evaluators import evaluate_task
from sentune.tasks.retrieval import HEADLINE
from sentune.tasks.transfer import PRESETS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PostprocessOption:
    """A post-processor fitted inside the evaluation: `kind` a name or word of sentune.postprocess.POSTPROCESSORS
    (`SET[:N]`, N setting the record's `number`: whitening's components kept, a flow's seed), fitted on `target`
    (all evaluated sentences), `per-task` (each task's own sentences, as BERT-whitening and BERT-flow's 'target'
    setting do), or a named sentence set / file:PATH."""

    kind: str
    fit_on: str
    number: int | None = None  # the N of SET:N (the record's `number` setting)
    settings: tuple = ()  # further constructor settings as (name, value) pairs, e.g. (("learning_rate", 1e-3),)
    device: str = "cpu"  # where it fits: evaluate() sets the evaluated model's

    @classmethod
    def parse(cls, kind: str, text: str, settings: dict | None = None) -> PostprocessOption:
        head, _, tail = text.rpartition(":")
        extra = tuple(sorted((settings or {}).items()))
        if tail.isdigit() and head:
            return cls(kind, head, int(tail), extra)
        return cls(kind, text, None, extra)

    @property
    def label(self) -> str:
        record = postprocessor(self.kind)
        number = "" if self.number is None else "," + record.number_label.format(self.number)
        extra = "".join(f",{k}={v}" for k, v in self.settings)
        return f"{record.word}({self.fit_on}{number}{extra})"

    def build(self):
        record = postprocessor(self.kind)
        number = {} if self.number is None else {record.number: self.number}
        return record.load()(**{**number, **dict(self.settings), "device": self.device})


class EmbeddingTable:
    """Sentence -> row lookup over the arrays the encoder produced."""

    def __init__(self, sentences: list[str], vectors: np.ndarray) -> None:
        self.index: dict[str, int] = {}
        rows: list[int] = []
        for position, sentence in enumerate(sentences):
            if sentence not in self.index:
                self.index[sentence] = len(rows)
                rows.append(position)
        self.vectors = vectors[rows]

    def __call__(self, sentences: list[str]) -> np.ndarray:
        return self.vectors[[self.index[s] for s in sentences]]

    def mapped(self, transform) -> EmbeddingTable:
        table = object.__new__(EmbeddingTable)
        table.index, table.vectors = self.index, transform(self.vectors)
        return table


def summarise(tasks: dict[str, dict]) -> dict:
    """Averages the papers report: STS 'all'/'mean'/'wmean' Spearman over STS tasks; transfer accuracy; retrieval nDCG@10."""
    summary: dict = {}
    sts_names = averaged_sts_tasks([n for n, r in tasks.items() if "all" in r])
    sts = {n: tasks[n] for n in sts_names}
    if sts:
        summary["sts_tasks"] = list(sts)
        for agg in ("all", "mean", "wmean"):
            summary[f"avg_{agg}_spearman"] = float(np.mean([r[agg]["spearman"] for r in sts.values()]))
            summary[f"avg_{agg}_pearson"] = float(np.mean([r[agg]["pearson"] for r in sts.values()]))
    retrieval = {n: r for n, r in tasks.items() if r.get("main") == HEADLINE}
    if retrieval:
        summary["retrieval_tasks"] = list(retrieval)
        summary[f"avg_{HEADLINE}"] = float(np.mean([r[HEADLINE] for r in retrieval.values()]))
    transfer = {n: r for n, r in tasks.items() if "acc" in r}
    if transfer:
        summary["transfer_tasks"] = list(transfer)
        summary["avg_transfer_acc"] = float(np.mean([r["acc"] for r in transfer.values()]))
    return summary


@dataclass
class _Inputs:
    """Every sentence an evaluation encodes: the tasks' (with their source lines), the fit sets of the
    post-processors, and the alignment pairs."""

    examples: dict[str, dict[str, list]]
    sentences: list[str]  # the tasks' sentences, in task order
    sources: list  # their source lines (truncation warnings)
    extra: dict[str, list[str]]  # fit sets by name; "__pairs__": the sentences of every pair of the alignment set (P ∪ N)
    pair_set: list[tuple[str, str]] | None  # its positive pairs (P)
    documents: list[str]  # the retrieval corpora's texts, unique: encoded through the embedding cache

    @property
    def all_sentences(self) -> list[str]:
        return self.sentences + [s for group in self.extra.values() for s in group]


def _gather(tasks, data_dir, postprocess, alignment_pairs, examples, allow_modified: bool) -> _Inputs:
    # Callers that evaluate repeatedly (the trainer's dev evaluation) pass the examples they loaded once.
    examples = examples or {spec.name: load_task(spec, data_dir, allow_modified=allow_modified) for spec in tasks}
    sentences, sources = [], []
    for name in examples:
        for text, source in sentences_of(examples[name]):
            sentences.append(text)
            sources.append(source)
    extra_sets = {w.fit_on for w in postprocess if w.fit_on not in ("target", "per-task")}
    extra = {name: load_sentences(name, data_dir, allow_modified=allow_modified) for name in extra_sets}
    pair_set = None
    if alignment_pairs:
        pair_set, every_sentence = _alignment_pairs(alignment_pairs, data_dir, allow_modified)
        extra["__pairs__"] = every_sentence
    documents = list(dict.fromkeys(d.text for spec in tasks if spec.kind == "retrieval" for d in examples[spec.name]["corpus"]))
    return _Inputs(examples, sentences, sources, extra, pair_set, documents)


def _modified_data(tasks: list[TaskSpec], data_dir: Path, examples: dict[str, dict[str, list]]) -> list[str]:
    """What differs from the catalogued data, for results.json, when --allow-modified-data let it through."""
    problems = [catalog.data_problem(spec, data_dir, examples[spec.name]) for spec in tasks]
    return [f"{where}: {what.split('; check the data directory')[0]}" for where, _, what in filter(None, problems)]


def evaluate(
    model: SentenceTransformer,
    tasks: list[TaskSpec],
    data_dir: Path,
    *,
    poolings: list[str] | tuple[str, ...] = ("model",),
    postprocess: list[PostprocessOption] | tuple = (),
    preset: str = "fast",
    alignment_pairs: str | None = None,
    show_progress: bool = True,
    model_name: str | None = None,
    precision: str = "fp32",
    examples: dict[str, dict[str, list]] | None = None,
    allow_modified: bool = False,
    runtime: Runtime | None = None,
) -> dict:
    """Returns {"meta": ..., "runs": {run_name: {"tasks": ..., "summary": ...}}}; one run per pooling
    and per (pooling, post-processor) combination. `allow_modified`: score tasks whose files differ from the catalog
    (--allow-modified-data), each difference recorded in the meta. `runtime`: what computes the batches
    (sentune.core.runtime; none: PyTorch on the model's device)."""
    if preset not in PRESETS:
        raise UserError(f"unknown preset {preset!r}; choose {', '.join(PRESETS)}")
    started = time.perf_counter()
    postprocess = [replace(option, device=str(model.device)) for option in postprocess]  # fitted where the model runs
    inputs = _gather(tasks, data_dir, postprocess, alignment_pairs, examples, allow_modified)
    all_sentences = inputs.all_sentences
    encoder = Encoder(model, poolings, show_progress=show_progress, precision=precision, desc="encoding the tasks' sentences", runtime=runtime)
    encode_start = time.perf_counter()
    documents = set(inputs.documents)
    positions = [i for i, s in enumerate(all_sentences) if s not in documents]  # the rest: encoded every time
    encoded = [all_sentences[i] for i in positions] + inputs.documents
    vectors = encoder.encode_many(encoded[: len(positions)])
    truncated = [positions[i] for i in encoder.truncated_indices]
    doc_truncated: list[int] = []
    if inputs.documents:
        encoder.desc = "encoding the retrieval corpus (cached)"
        doc_vectors, doc_truncated = encode_cached(encoder, inputs.documents)
        vectors = {name: np.concatenate([array, doc_vectors[name]]) for name, array in vectors.items()}
        _warn_truncated_documents(len(doc_truncated), len(inputs.documents), model.max_seq_length)
    encode_seconds = time.perf_counter() - encode_start
    _warn_truncated(truncated, inputs.sources, len(inputs.sentences), model.max_seq_length)

    runs: dict[str, dict] = {}
    bar = tqdm(total=len(encoder.pooling_names) * (1 + len(postprocess)) * len(tasks), desc="evaluating", unit="task", disable=not show_progress)
    for pooling in encoder.pooling_names:
        table = EmbeddingTable(encoded, vectors[pooling])
        for run_name, option in [(pooling, None)] + [(f"{pooling}+{w.label}", w) for w in postprocess]:
            runs[run_name] = _run(pooling, run_name, option, table, tasks, inputs, preset, alignment_pairs, bar)
    bar.close()
    meta = {
        "model": model_name,
        "tasks": [t.name for t in tasks],
        "poolings": list(encoder.pooling_names),
        "postprocess": [w.label for w in postprocess],
        "transfer_preset": preset if any(t.kind != "sts" for t in tasks) else None,
        "data_dir": display_path(str(data_dir)),
        "n_sentences": len(all_sentences),
        "n_unique_sentences": len(dict.fromkeys(all_sentences)),
        "n_truncated": len(truncated) + len(doc_truncated),
        "max_seq_length": model.max_seq_length,
        "precision": precision,
        "device": str(model.device),
        "encode_seconds": encode_seconds,
        "total_seconds": time.perf_counter() - started,
        "sentune_version": sentune.__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "similarity": "cosine",
        "sts_protocol": "STS12-16 with SentEval subsets, pairs without gold skipped; STS-B and SICK-R test; Spearman/Pearson x100",
    }
    modified = _modified_data(tasks, data_dir, inputs.examples) if allow_modified else []
    if modified:  # scored anyway (--allow-modified-data): say so wherever the numbers go
        meta["modified_data"] = modified
    return {"meta": meta, "runs": runs}


def _run(pooling, run_name, option, table, tasks, inputs: _Inputs, preset, alignment_pairs, bar) -> dict:
    """Every task under one pooling and post-processor (fitted per task or once, as the option says)."""
    results = {}
    # fitted once for the run unless it is fitted per task: the same fit for every task, not one per task
    shared = _embedder(table, option, inputs.examples, None, inputs.sentences, inputs.extra) if option and option.fit_on != "per-task" else None
    for spec in tasks:
        embed, fit = shared or _embedder(table, option, inputs.examples, spec, inputs.sentences, inputs.extra)
        task_start = time.perf_counter()
        results[spec.name] = evaluate_task(spec, inputs.examples[spec.name], embed, preset)
        results[spec.name]["seconds"] = round(time.perf_counter() - task_start, 3)
        if fit and shared is None:
            results[spec.name]["fit"] = fit
        bar.set_postfix_str(f"{run_name} {spec.name}", refresh=False)
        bar.update(1)
        if spec.kind != "sts":  # the classifiers take minutes; say where we are
            logger.info("%s: %s done in %.1f s", run_name, spec.name, results[spec.name]["seconds"])
    run = {"pooling": pooling, "postprocess": option.label if option else None, "tasks": results, "summary": summarise(results)}
    if shared and shared[1]:
        run["fit"] = shared[1]
    if inputs.pair_set is not None:
        embed, _ = shared or _embedder(table, option, inputs.examples, None, inputs.sentences, inputs.extra)
        pairs = inputs.pair_set
        sentences = list(dict.fromkeys(inputs.extra["__pairs__"]))
        scores = alignment_uniformity(embed([a for a, _ in pairs]), embed([b for _, b in pairs]), embed(sentences))
        # the counts say what each was computed over: alignment over P, uniformity over the sentences of P ∪ N
        run["alignment_uniformity"] = {"pairs": alignment_pairs, "positive_pairs": len(pairs), "uniformity_sentences": len(sentences), **scores}
    return run


def _embedder(table: EmbeddingTable, option: PostprocessOption | None, examples, spec, task_sentences, extra) -> tuple:
    """(sentence -> vector lookup after the post-processor, a summary of its fit or None)."""
    if option is None:
        return table, None
    if option.fit_on == "per-task" and spec is not None:
        fit_sentences = list(dict.fromkeys(s for s, _ in sentences_of(examples[spec.name])))
    elif option.fit_on in ("target", "per-task"):
        fit_sentences = list(dict.fromkeys(task_sentences))
    else:
        fit_sentences = extra[option.fit_on]
    fitted = option.build().fit(table(fit_sentences))
    return table.mapped(fitted.transform), fit_summary(fitted, len(fit_sentences))


def fit_summary(fitted, sentences: int | None = None) -> dict:
    """What the post-processor was fitted on (when the caller knows the count) and, for a trained one (flow), its
    loss at the start and the end: a fit that went wrong (a flow that diverged) shows there instead of only as a low
    score."""
    out: dict = {} if sentences is None else {"sentences": sentences}
    history = getattr(fitted, "history_", None)
    if history:
        window = max(1, min(50, len(history) // 10))
        out |= {"steps": len(history), "loss_first": float(np.mean(history[:window])), "loss_last": float(np.mean(history[-window:])), "loss_window": window}
    if getattr(fitted, "null_directions_", 0):
        out["null_directions"] = fitted.null_directions_  # the flow fitted with noise there (sentune.postprocess.flow)
    return out


def _alignment_pairs(name: str, data_dir: Path, allow_modified: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """(positive pairs P, the sentences of every pair P ∪ N) of an alignment set: `qqp` (both held-out halves;
    duplicates, label 1, are P) or `stsb` (STS-B test; gold score >= 4 is P). The BERT-CF report §6.3 (after Wang & Isola
    2020): alignment over P, uniformity over the data D = P ∪ N, each distinct sentence once."""
    if name == "qqp":
        pairs = load_examples("qqp-dev", data_dir) + load_examples("qqp-test", data_dir)
        positive = [(p.a, p.b) for p in pairs if p.label == 1]
    elif name == "stsb":
        from sentune.data.catalog import load_catalog

        pairs = load_task(load_catalog()["STS-B"], data_dir, allow_modified=allow_modified)["test"]
        positive = [(p.a, p.b) for p in pairs if p.score >= 4.0]
    else:
        raise UserError(f"unknown positive-pair set {name!r}; choose qqp or stsb")
    return positive, list(dict.fromkeys(s for p in pairs for s in (p.a, p.b)))


def _warn_truncated_documents(count: int, total: int, max_len: int | None) -> None:
    if count:
        logger.warning(
            "%d of the %d retrieval documents are longer than max_seq_length=%s tokens: their first %s tokens are encoded, as BEIR does",
            count,
            total,
            max_len,
            max_len,
        )


def _warn_truncated(truncated: list[int], sources: list, n_task_sentences: int, max_len: int | None) -> None:
    hits = [sources[i] for i in truncated if i < n_task_sentences]
    if hits:
        shown = ", ".join(str(s) for s in hits[:5])
        what = "1 sentence is" if len(hits) == 1 else f"{len(hits)} sentences are"
        more = " ..." if len(hits) > 5 else ""
        logger.warning("%s longer than max_seq_length=%s tokens and truncated, as SentEval and sentence-transformers do: %s%s", what, max_len, shown, more)
