"""One registry from a task's `kind` (tasks.yaml) to its evaluator. An evaluator takes the task record, its
examples by split, `embed(list_of_str) -> (n, d)` over the already computed embeddings, and the transfer
preset, and returns the task's result dict. A new kind of task is one function and one line here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sentune.data.catalog import TaskSpec
from sentune.tasks.relatedness import evaluate_relatedness
from sentune.tasks.retrieval import evaluate_retrieval
from sentune.tasks.sts import evaluate_sts
from sentune.tasks.transfer import PRESETS, TransferPreset, evaluate_transfer

Embed = Callable[[list[str]], np.ndarray]


def _sts(spec: TaskSpec, examples: dict[str, list], embed: Embed, preset: TransferPreset) -> dict[str, Any]:
    subsets = {name: (embed([p.a for p in pairs]), embed([p.b for p in pairs]), np.array([p.score for p in pairs])) for name, pairs in examples.items()}
    return evaluate_sts(subsets)


def _relatedness(spec: TaskSpec, examples: dict[str, list], embed: Embed, preset: TransferPreset) -> dict[str, Any]:
    if spec.score_range is None:
        raise ValueError(f"task {spec.name}: a relatedness task needs score_range in tasks.yaml")
    return evaluate_relatedness(examples, embed, score_range=spec.score_range)


def _retrieval(spec: TaskSpec, examples: dict[str, list], embed: Embed, preset: TransferPreset) -> dict[str, Any]:
    queries, corpus = examples["queries"], examples["corpus"]
    doc_ids, doc_vectors = [d.id for d in corpus], embed([d.text for d in corpus])
    return evaluate_retrieval(queries, embed([q.text for q in queries]), doc_ids, doc_vectors, skip_same_id=spec.skip_same_id)


EVALUATORS: dict[str, Callable[[TaskSpec, dict[str, list], Embed, TransferPreset], dict[str, Any]]] = {
    "sts": _sts,  # cosine similarity, Spearman/Pearson ×100 under 'all', 'mean' and 'wmean'
    "classification": evaluate_transfer,  # SentEval logistic regression on frozen embeddings
    "pair-classification": evaluate_transfer,  # the same on [|u−v|, u⊙v]
    "relatedness": _relatedness,  # SentEval's supervised regressor on [|u−v|, u⊙v]
    "retrieval": _retrieval,  # BEIR: rank the corpus per query by cosine; nDCG@10, MRR@10, Recall@10/100, MAP@100
}


def evaluate_task(spec: TaskSpec, examples: dict[str, list], embed: Embed, preset_name: str) -> dict[str, Any]:
    return EVALUATORS[spec.kind](spec, examples, embed, PRESETS[preset_name])
