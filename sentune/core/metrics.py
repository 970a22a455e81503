"""Every metric sentune reports, one record each (`Metric`): its name in results and records, how pages name it, how
it is computed for one set of predictions (`score`), for many at once (`rows`: bootstrap resamples, permutations), or
for one ranked query (`per_query`), and whether its value is a mean of per-item values (a query's nDCG@10), which tests
then swap and resample as they are. Evaluation, the bootstrap, the permutation tests, `sentune adapt` and the pages
all read METRICS: a new metric is one record here (and its function, here or in sentune.core.batched_metrics).

Pair metrics (sentune.data.user_data chooses them by the labels): graded scores → Spearman ×100 of the cosine
similarities; 0/1 labels → average precision ×100 of the cosines (and, reported beside it, the accuracy ×100 at the
best threshold); a metric says which labels it reads (`binary_labels`). STS and relatedness report Pearson and
Spearman ×100. Ranking metrics (BEIR's definitions, 0-1 per query, ×100 when averaged): nDCG@10 with graded gains
(Järvelin & Kekäläinen 2002), MRR@10, recall@10 and @100, MAP@100 (the sum of precisions at each relevant hit over
min(100, relevant)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sentune.core.batched_metrics import average_precision_rows, mean_rows, pearson_rows, spearman_rows

DEPTH = 100  # the deepest cut any ranking metric reads


def spearman(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Spearman ×100; 0 where either side is constant (a resample can be), where SciPy gives NaN."""
    from scipy.stats import spearmanr  # SciPy loads when a score is computed, not when a command checks its inputs

    if np.ptp(gold) == 0 or np.ptp(predicted) == 0:
        return 0.0
    return float(spearmanr(gold, predicted)[0] * 100)


def pearson(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Pearson ×100; 0 where either side is constant, as `spearman`."""
    from scipy.stats import pearsonr

    if np.ptp(gold) == 0 or np.ptp(predicted) == 0:
        return 0.0
    return float(pearsonr(gold, predicted)[0] * 100)


def average_precision(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Average precision ×100 of ranking the pairs by similarity, positives = label 1 (scikit-learn's); 0 without positives."""
    from sklearn.metrics import average_precision_score  # scikit-learn loads when a score is computed

    return float(average_precision_score(gold == 1, predicted) * 100) if (gold == 1).any() else 0.0


def best_threshold_accuracy(gold: np.ndarray, predicted: np.ndarray) -> float:
    """Accuracy ×100 of `similarity > t` for the best threshold t (as SentEval's and MTEB's pair classification). A
    threshold cannot separate pairs with the same similarity, so only cuts between distinct values count."""
    order = np.argsort(-predicted, kind="stable")
    ranked = predicted[order]
    positives = (gold[order] == 1).astype(np.int64)
    # Predicting the first k as positive: correct = positives among them + negatives among the rest.
    correct = np.concatenate([[0], np.cumsum(2 * positives - 1)]) + (len(gold) - positives.sum())
    cuts = np.concatenate([[True], ranked[1:] != ranked[:-1], [True]])  # k = 0, between distinct values, k = n
    return float(correct[cuts].max() / len(gold) * 100)


def mean_of_items(gold: np.ndarray, values: np.ndarray) -> float:
    """Retrieval: each query's nDCG@10 ×100 was computed when it was ranked (sentune.tasks.retrieval); the score is their
    mean, and a resample draws queries."""
    return float(np.mean(values))


def _dcg(gains: Sequence[float]) -> float:
    return float(sum(g / np.log2(i + 2) for i, g in enumerate(gains)))


def ndcg_at_10(ranked: Sequence[str], relevant: dict[str, int]) -> float:
    ideal = sorted(relevant.values(), reverse=True)[:10]
    return _dcg([relevant.get(doc, 0) for doc in ranked[:10]]) / _dcg(ideal)


def mrr_at_10(ranked: Sequence[str], relevant: dict[str, int]) -> float:
    first = next((i for i, doc in enumerate(ranked[:10]) if doc in relevant), None)
    return 0.0 if first is None else 1.0 / (first + 1)


def recall_at(k: int) -> Callable[[Sequence[str], dict[str, int]], float]:
    return lambda ranked, relevant: sum(doc in relevant for doc in ranked[:k]) / len(relevant)


def map_at_100(ranked: Sequence[str], relevant: dict[str, int]) -> float:
    hits = [doc in relevant for doc in ranked[:100]]
    precisions = [sum(hits[: i + 1]) / (i + 1) for i, hit in enumerate(hits) if hit]
    return sum(precisions) / min(100, len(relevant))


def _per_query_only(gold: np.ndarray, predicted: np.ndarray):
    raise ValueError("a ranking metric is computed per ranked query (Metric.per_query), then averaged")


@dataclass(frozen=True)
class Metric:
    name: str  # its key in results.json and in adapt's records
    label: str  # how tables and plots name it
    short: str  # a narrow column's header
    score: Callable[[np.ndarray, np.ndarray], float] = _per_query_only  # (gold, predicted) -> ×100
    rows: Callable[[np.ndarray, np.ndarray], np.ndarray] = _per_query_only  # the same for each row of many predictions
    per_query: Callable[[Sequence[str], dict[str, int]], float] | None = None  # a ranked query's value (0-1)
    mean_of_items: bool = False  # the mean of per-item values: a test swaps and resamples the items' values as they are
    binary_labels: bool = False  # scores 0/1 labels (positives = 1): the pairs are split per class, accuracy is reported beside it


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("spearman", "Spearman ×100", "Spearman", spearman, spearman_rows),
        Metric("pearson", "Pearson ×100", "Pearson", pearson, pearson_rows),
        Metric("average_precision", "average precision ×100", "AP", average_precision, average_precision_rows, binary_labels=True),
        Metric("accuracy", "accuracy ×100 (best threshold)", "accuracy", best_threshold_accuracy, binary_labels=True),
        Metric("ndcg@10", "nDCG@10 ×100", "nDCG@10", mean_of_items, mean_rows, ndcg_at_10, mean_of_items=True),
        Metric("mrr@10", "MRR@10 ×100", "MRR@10", per_query=mrr_at_10),
        Metric("recall@10", "recall@10 ×100", "R@10", per_query=recall_at(10)),
        Metric("recall@100", "recall@100 ×100", "R@100", per_query=recall_at(100)),
        Metric("map@100", "MAP@100 ×100", "MAP@100", per_query=map_at_100),
    )
}


def ranking_metrics() -> list[Metric]:
    """The metrics computed per ranked query, in the order tables show them."""
    return [m for m in METRICS.values() if m.per_query is not None]
