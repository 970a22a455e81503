"""The method contract: what one method file declares, and the context the trainer hands it.

A method is one file in this folder that registers one or more `Method` records:

- `params`: a dataclass of its typed parameters (`sentune.core.options.option`: type, default, meaning,
  limits). A recipe's `params:` section is checked against it before anything is created on disk.
- `data_view(ctx) -> columns`: the dataset columns it trains on, built from the recipe and the data
  catalog (default: the training sentences plus their row index). Mirror's character masking, BT's
  paraphrases, CT's ordered blocks and the multitask rows live in their method's view.
- `build_loss(model, columns, ctx) -> nn.Module`: the loss (it calls the model; a second tower, a frozen
  guide or a cache of targets lives in the loss).
- `finalize(model, loss, ctx) -> (model, note)`: optional, after the best checkpoint is restored (compile
  a flow head, keep CT's better tower, choose SED's pooling on the recipe's dev task). The note goes into
  results.json's meta.finalize.
- `evaluator(loss, ctx, split)`: optional, for methods selected on their own metric (multitask heads).

The trainer (sentune.training.trainer) knows nothing else about a method.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.core.options import build_options
from sentune.data.kinds import Kind, Pairs, Sentences

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.evaluation import SentenceEvaluator
    from torch import nn

Columns = dict[str, list]


@dataclass
class TrainContext:
    """What a method may read: the resolved recipe, its typed parameters, the data directory, the cache
    folder and the recipe's dev task (with a scorer, so a method never imports the trainer)."""

    recipe: Any  # sentune.training.recipe.Recipe (not imported: methods sit below the training layer)
    params: Any  # an instance of the method's params dataclass
    data_dir: Path
    cache_dir: Path | None = None
    dev_score: Callable[[SentenceTransformer], float] | None = None  # recipe.eval.dev's metric ×100 (Spearman; nDCG@10 for queries)
    show_progress: bool = True
    device: str = "cpu"  # where the run trains: models a method loads (e.g. SED's members) go there
    allow_modified: bool = False  # catalogued tasks read from files that differ from the catalog (--allow-modified-data)
    data: Kind | None = None  # the training data, one of the kinds the method takes; None: the recipe's train_data, read when first asked

    def training_data(self) -> Kind:
        """The training data as its kind (sentune.data.kinds): given, or the recipe's train_data parsed and read once
        (a method whose data are fixed, such as nli's, never asks)."""
        if self.data is None:
            from sentune.data.catalog import parse_train_data

            self.data = parse_train_data(self.recipe.train_data).load(self.data_dir, allow_modified=self.allow_modified)
        return self.data

    @property
    def dev_task(self) -> str:
        """The recipe's dev set, as a message names it (a task, a file, or a description of a set given as objects)."""
        from sentune.data.tables import data_label

        return data_label(self.recipe.eval.dev)

    @property
    def training(self) -> Any:
        return self.recipe.training

    def score_on_dev(self, model: SentenceTransformer) -> float:
        if self.dev_score is None:
            raise RuntimeError("this context has no dev scorer (the trainer provides one)")
        return self.dev_score(model)

    def planned_rows(self, default_steps: int) -> int:
        """Rows for methods that build a fixed number of rows: max_steps (or `default_steps`) × batch."""
        steps = self.training.max_steps if self.training.max_steps > 0 else default_steps
        return steps * self.training.batch_size


@dataclass
class NoParams:
    """A method without parameters."""


def training_sentences(ctx: TrainContext) -> list[str]:
    """The training sentences: the unique sentences of the training data (sentences of fewer than training.min_words
    words dropped), or the first column of its pairs; a fixed-seed random training.max_sentences of them, in file
    order."""
    return sentence_rows(ctx)["sentence"]


def sentence_rows(ctx: TrainContext) -> Columns:
    """The default data view: `sentence` and `label` = the row index (caches look rows up by it); for `Pairs`, also
    `paraphrase`."""
    data, limit = ctx.training_data(), ctx.training.max_sentences
    columns: Columns
    if isinstance(data, Pairs):
        pairs = subset(data.pairs, limit)
        columns = {"sentence": [a for a, _ in pairs], "paraphrase": [b for _, b in pairs]}
    else:
        assert isinstance(data, Sentences)  # Method.takes, checked before the view is built
        columns = {"sentence": subset([x for x in data.unique().texts if len(x.split()) >= ctx.training.min_words], limit)}
    columns["label"] = list(range(len(columns["sentence"])))
    return columns


def subset(items: list, limit: int | None) -> list:
    """A fixed-seed random `limit` of the items, in file order. Corpora are often grouped by source, so the
    first N would not be representative; the seed does not follow training.seed, so runs that differ only
    in seed (ensemble members, SED learners) see the same sentences and share their caches."""
    if limit is None or limit >= len(items):
        return items
    return [items[i] for i in sorted(random.Random(0).sample(range(len(items)), limit))]


@dataclass(frozen=True)
class deferred:  # noqa: N801 (used like the function it stands for)
    """A function named `"module:name"`, imported on its first call: a method's record (sentune.methods.records) names
    its code this way, so reading the record (its parameters, its data) never imports torch."""

    target: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import importlib

        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)(*args, **kwargs)


# (model, loss, context) -> (the model to save, a note for results.json or None); the loss is the method's own class.
Finalize = Callable[["SentenceTransformer", Any, TrainContext], "tuple[SentenceTransformer, dict | None]"]


@dataclass(frozen=True)
class Method:
    name: str
    build_loss: Callable[[SentenceTransformer, Columns, TrainContext], nn.Module]
    pooling: str  # the sentence embedding the trained model outputs (saved with the model)
    columns: tuple[str, ...]  # dataset columns the loss reads, in order ("label" = per-row value)
    params: type = NoParams  # a dataclass of typed parameters (sentune.core.options.option fields)
    defaults: dict[str, Any] = field(default_factory=dict)  # this method's defaults over the record's (sg vs sg-opt)
    data_view: Callable[[TrainContext], Columns] = sentence_rows
    finalize: Finalize | None = None
    evaluator: Callable[[Any, TrainContext, str], SentenceEvaluator] | None = None  # (loss, context, split)
    ordered_batches: bool = False  # batches in dataset order (rows laid out in blocks, e.g. CT's 1 + 7)
    # No text twice in a batch (sentence-transformers' NO_DUPLICATES sampler): for a loss whose negatives are the
    # batch's other rows, a copy of a row's query or document among them would be a false negative
    distinct_batches: bool = False
    poolings: tuple[str, ...] | None = None  # poolings it can train; None: any trainable pooling
    # The data kinds it trains on (sentune.data.kinds), checked when a recipe is built and when data are handed to the
    # trainer. By default sentences, or the first column of pairs.
    takes: tuple[type[Kind], ...] = (Sentences, Pairs)
    # (the encoder's HF config, the method's params) -> why this method cannot train it (None: it can); checked before
    # any training
    unsupported: Callable[[Any, Any], str | None] | None = None
    # params -> {parameter-name pattern: learning rate} for parameters that train at a rate of their own (the loss's
    # named parameters, e.g. "model.3.flow."; sentence-transformers' learning_rate_mapping); None: one rate for all
    learning_rates: Callable[[Any], dict[str, float]] | None = None
    citation: str = ""

    def refuses(self, kind: type) -> str | None:
        """Why this method cannot train on data of `kind` (None: it can)."""
        if any(issubclass(kind, taken) for taken in self.takes):
            return None
        return f"method {self.name!r} trains on {' or '.join(k.name for k in self.takes)}, not {getattr(kind, 'name', kind.__name__)}"

    def cannot_train(self, model, params: Any = None) -> str | None:
        """Why this method cannot train `model` (a SentenceTransformer) with `params` (None: its defaults), or None."""
        config = getattr(getattr(list(model)[0], "auto_model", None), "config", None)
        if self.unsupported is None or config is None:
            return None
        return self.unsupported(config, self.resolve_params(None) if params is None else params)

    def resolve_params(self, values: dict[str, Any] | None) -> Any:
        """The typed parameters: the record's defaults, this method's defaults, then the recipe's values."""
        return build_options(self.params, {**self.defaults, **(values or {})}, "params")

    def param_names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.params)]
