"""The model-selection metric: Spearman ('all', cosine ×100) of the model's own embedding on one dev task of the
catalog, or, for `pairs:PATH`, the metric a user's own pairs choose (sentune.tasks.user_pairs), or, for `queries:DIR`,
nDCG@10 on a user's queries (sentune.tasks.user_queries)."""

from __future__ import annotations

from pathlib import Path

from sentence_transformers.evaluation import SentenceEvaluator

from sentune.data.catalog import load_task, select_tasks
from sentune.data.kinds import RetrievalSet, ScoredPairs
from sentune.tasks.dev_sets import read_dev
from sentune.tasks.evaluate import evaluate
from sentune.tasks.user_pairs import PairsEvaluator
from sentune.tasks.user_queries import QueriesEvaluator


class DevEvaluator(SentenceEvaluator):
    """A sentence-transformers evaluator (the Trainer calls it every eval_steps); also a plain scorer."""

    def __init__(self, task: str, data_dir: Path, *, allow_modified: bool = False) -> None:
        super().__init__()
        self.task, self.data_dir = select_tasks(task)[0], data_dir
        self.examples = {self.task.name: load_task(self.task, data_dir, allow_modified=allow_modified)}  # read once, not every N steps
        self.name = self.task.name.lower()
        self.metric = "spearman"
        self.primary_metric = f"{self.name}_spearman"
        self.title = f"{self.task.name} Spearman"

    def __call__(self, model, output_path=None, epoch=-1, steps=-1) -> dict[str, float]:
        return {self.primary_metric: self.score(model)}

    def score(self, model) -> float:
        result = evaluate(model, [self.task], self.data_dir, poolings=["model"], show_progress=False, examples=self.examples)
        return result["runs"]["model"]["tasks"][self.task.name]["all"]["spearman"]


def dev_evaluator(dev: str | ScoredPairs | RetrievalSet, data_dir: Path, *, allow_modified: bool = False) -> DevEvaluator | PairsEvaluator:
    """The evaluator of a recipe's `eval.dev` (a catalog task name, `pairs:PATH` or `queries:DIR`: read_dev) or of a dev
    set given as its kind: a user's scored pairs, or queries (adapt's selection queries against their pool)."""
    data = read_dev(dev) if isinstance(dev, str) else dev
    if isinstance(data, ScoredPairs):
        return PairsEvaluator(data)
    if isinstance(data, RetrievalSet):
        return QueriesEvaluator(data)
    return DevEvaluator(data, data_dir, allow_modified=allow_modified)
