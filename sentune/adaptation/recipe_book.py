"""The candidate recipes of one `sentune adapt` run (RecipeBook): each bundled recipe (sentune/recipes/adapt/) read
once, set for this run (its model, data, steps, the selection units as dev) and validated once; asking again for the
same recipe returns the one already checked."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PATIENCE = 3  # evaluations without a new best on the selection pairs before a candidate stops early
EVALUATIONS = 10  # dev evaluations per candidate's planned steps


@dataclass
class RecipeBook:
    """Recipes for the run `ctx` (sentune.adaptation.context.Context) reads: what each depends on that changes as the
    run goes (the minutes --time leaves) is part of the recipe, so a recipe asked for later with less time is another."""

    ctx: Any
    _bundled: dict[str, Any] = field(default_factory=dict)
    _checked: dict[str, Any] = field(default_factory=dict)

    def bundled(self, name: str):
        """The bundled recipe `name` as its file says it, unchecked (read once)."""
        from sentune.training.recipe import load_recipe

        if name not in self._bundled:
            self._bundled[name] = load_recipe(name, check=False)
        return self._bundled[name]

    def _validated(self, recipe, name: str, **kinds):
        """`recipe`, validated against the data kinds it trains and evaluates on, the first time it is asked for."""
        from sentune.training.recipe import validate_recipe

        key = json.dumps([name, recipe.to_dict()], sort_keys=True, default=str)
        if key not in self._checked:
            validate_recipe(recipe, name, **kinds)
            self._checked[key] = recipe
        return self._checked[key]

    def training(self, name: str, *, steps: int | None = None, seed: int | None = None, members: list[str] | None = None, reference: bool = False):
        """A bundled candidate recipe set for this run: the model, the corpus, the selection pairs as dev, the steps
        (default: the budget) with 10 evaluations and early stopping. The reference keeps its own defaults (one epoch,
        the last checkpoint, no budget); only its dev curve is set."""
        ctx = self.ctx
        recipe = self.bundled(name)
        data = ctx.training_data(recipe)  # GenQ trains on the user's generated queries, not on the corpus
        rows = len(ctx.inputs.corpus) if data is ctx._corpus_data else len(data)
        epoch = max(1, math.ceil(rows / recipe.training.batch_size))
        training = replace(
            recipe.training,
            device=ctx.device,
            seed=seed if seed is not None else recipe.training.seed,
            gradient_checkpointing=recipe.training.gradient_checkpointing or ctx.config.low_memory,
        )
        if reference:
            training = replace(training, eval_steps=max(1, math.ceil(epoch / EVALUATIONS)))
        else:
            steps = steps or ctx.config.budget.steps or epoch
            training = replace(
                training, max_steps=steps, eval_steps=max(1, math.ceil(steps / EVALUATIONS)), patience=PATIENCE, max_minutes=ctx.training_minutes()
            )
        recipe = replace(
            recipe,
            model=ctx.config.model,
            train_data=data.describe(ctx._training_record(data)),
            pooling=recipe.pooling if reference else ctx.config.training_pooling,
            params={**recipe.params, **({"members": members} if members is not None else {})},
            training=training,
            eval=replace(recipe.eval, dev=ctx.training_dev()),  # checkpoints are chosen on the selection pairs (or queries)
        )
        return self._validated(recipe, name, data=data, dev=ctx.training_dev_data())

    def labelled(self, name: str, train_file: Path, rows: int, model: str | None = None, *, data):
        """A supervised candidate's recipe (sentune/recipes/adapt/NAME.yaml), fixed in advance: its epochs over the `rows`
        training rows of `train_file` (labelled pairs, or search tuples), its last step kept and no evaluation while it
        trains (nothing may be chosen on the rows it trained on, and on search data each evaluation would encode the
        selection pool again), from `model` (default: the unchanged one). --budget caps it as it caps every training
        candidate: at most its steps, and its minutes. `data`: the rows as the trainer receives them (the method
        must take their kind); the recipe's train_data describes them, naming `train_file`, their record."""
        from sentune.training.recipe import NO_DEV

        ctx = self.ctx
        recipe = self.bundled(name)
        steps = max(1, math.ceil(recipe.training.epochs * math.ceil(rows / recipe.training.batch_size)))
        steps = min(steps, ctx.config.budget.steps or steps)
        training = replace(
            recipe.training,
            device=ctx.device,
            max_steps=steps,
            eval_steps=steps,
            patience=0,
            checkpoint="last",
            max_minutes=ctx.training_minutes(),
            gradient_checkpointing=recipe.training.gradient_checkpointing or ctx.config.low_memory,
        )
        recipe = replace(
            recipe,
            model=model or ctx.config.model,
            train_data=data.describe(train_file),
            pooling=ctx.config.training_pooling,
            training=training,
            eval=replace(recipe.eval, dev=NO_DEV),
        )
        return self._validated(recipe, name, data=data)
