"""Candidates fine-tuned on the user's labels: --train's, else the selection part of the dev set, cross-fitted
(sentune.adaptation.crossfit), on pairs (Supervised) or on search data (SupervisedSearch)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup, WithRun, best, tuned_sources
from sentune.adaptation.candidates.trained import Ensemble, Trained
from sentune.adaptation.evidence import held_out_digest
from sentune.adaptation.names import CROSS_FIT, HELD_OUT, SUPERVISED, SUPERVISED_RECIPES, SUPERVISED_STACKED, TRAINED, UNCHANGED
from sentune.adaptation.records import CandidateRecord, write_record
from sentune.core.metrics import METRICS
from sentune.core.progress import say

CROSS_FIT_STEPS = 100  # above it the evidence selection pairs are held out: three fold trainings would cost too much

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.time_plan import Costs


@dataclass
class Supervised(WithRun):
    """Fine-tuned on the user's labels: --train's when given, else the selection part of the dev set, its selection
    score then out of fold (sentune.adaptation.crossfit: K models each trained without one fold score it, then the model is
    refit on the whole selection part for confirmation and test). On --train pairs whose evidence judges
    (sentune.adaptation.train_evidence) it trains without the evidence confirmation pairs, and is cross-fitted over the
    evidence selection pairs the same way (cross_fit_evidence): so it is judged on the same dev + train selection pairs as
    every label-free candidate (one yardstick, sentune.adaptation.decide), each train pair by a fold model that never trained
    on it, and the refit on all its rows is confirmed, tested and shipped; when its steps (capped by --budget) read
    fewer rows than it has, it holds them out instead (evidence_mode). CoSENT on graded pairs, OnlineContrastiveLoss
    on 0/1 pairs (sentune.methods.labelled), MultipleNegativesRankingLoss with two mined hard negatives on search data
    (SupervisedSearch), each a recipe fixed in advance. `start`: the unchanged model, or ('best') the best label-free
    trained candidate (domain adaptation, then labels: the order sentence-transformers recommends); that one is skipped
    when none trained."""

    start: str = UNCHANGED
    kind: ClassVar[str] = "supervised"
    phase: ClassVar[str] = "after_race"
    tuned: ClassVar[bool] = True
    ships_first_look: ClassVar[bool] = False  # a member the time stops after its first fold is skipped
    search: ClassVar[bool] = False  # which data it plans for: pairs, or (SupervisedSearch) queries

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        if not setup.labels or setup.search != cls.search:
            return []
        stacked = SUPERVISED_STACKED in setup.methods and any(m in TRAINED for m in setup.methods)
        return [*([cls(SUPERVISED)] if SUPERVISED in setup.methods else []), *([cls(SUPERVISED_STACKED, "best")] if stacked else [])]

    def depends_on(self, ctx: Context) -> dict:
        # what it trains on (--train's less what judges it, or the selection part: None), and the mixes its folds score
        found = super().depends_on(ctx) | {"train_sha256": ctx.inputs.train_sha256, "train_held_out": held_out_digest(ctx.evidence)}
        mode = self.evidence_mode(ctx)
        return found | ({"evidence_mode": mode} if mode else {}) | ({"evidence_mixes": list(self.out_of_fold_mixes(ctx))} if mode == CROSS_FIT else {})

    @staticmethod
    def judged_by_evidence(ctx: Context) -> bool:
        """Whether --train's evidence pairs judge it: a pairs run with --train whose evidence passed its checks
        (sentune.adaptation.evidence)."""
        return ctx.inputs.task.train_units() is not None and ctx.evidence is not None and ctx.evidence.judges

    def evidence_mode(self, ctx: Context) -> str | None:
        """How it is judged on the evidence selection pairs (None: they do not judge). CROSS_FIT: trained on them, scored
        there by fold models (cross_fit_evidence: three more trainings). HELD_OUT: it trains without them, as without
        any pair that judges it, when its steps (epochs capped by --budget) read fewer rows than it has (they would add
        no step: scripts/main.sh's 120 steps of 16) or number more than CROSS_FIT_STEPS (three more such trainings would
        cost more than the rows gain: sick's supervised took 21.8 min on --train, benchmarks/results/adapt.md)."""
        if not self.judged_by_evidence(ctx):
            return None
        from sentune.training.recipe import load_recipe

        given, recipe = ctx.inputs.task.train_units() or [], load_recipe(self.recipe_name(ctx), check=False)
        held = ctx.evidence.confirm_train_indices
        rows = sum(len(r) for r in self.training_rows_counted([u for i, u in enumerate(given) if i not in held]))
        steps = self.steps_for(rows, ctx)
        return HELD_OUT if steps * recipe.training.batch_size < rows or steps > CROSS_FIT_STEPS else CROSS_FIT

    def steps_for(self, rows: int, ctx: Context) -> int:
        """Its steps on `rows` training rows: its recipe's epochs, capped by --budget's steps (Context.labelled_recipe)."""
        import math

        from sentune.training.recipe import load_recipe

        recipe = load_recipe(self.recipe_name(ctx), check=False)
        steps = max(1, math.ceil(recipe.training.epochs * math.ceil(rows / recipe.training.batch_size)))
        return min(steps, ctx.config.budget.steps or steps)

    @staticmethod
    def out_of_fold_mixes(ctx: Context) -> tuple[float, ...]:
        """The mixes with the unchanged model its evidence folds score their held-out pairs at: itself (1), and, when the
        run has `wise`, WiSE-FT's (sentune.adaptation.wise.MIXES), so that a wise of it is judged out of fold on the same
        pairs (sentune.adaptation.train_evidence) at the mix it chooses on the dev selection pairs."""
        from sentune.adaptation.names import WISE
        from sentune.adaptation.wise import MIXES

        return (1.0, *MIXES) if any(c.name == WISE for c in ctx.plan.after_race) else (1.0,)

    def evidence_folds(self, ctx: Context) -> list[np.ndarray]:
        """Each evidence fold's held-out --train indices: the evidence selection pairs dealt into FOLDS folds
        (sentune.adaptation.crossfit.fold_rows, the run's seed)."""
        from sentune.adaptation.crossfit import FOLDS, fold_rows

        pairs = ctx.evidence.indices[ctx.evidence.split.select]
        return [pairs[fold_rows(len(pairs), FOLDS, ctx.config.seed, fold)[1]] for fold in range(FOLDS)]

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """Its trainings (one on --train; else K on (K - 1)/K of the selection units each and the refit: K times one
        on them all, less what the fold race is expected to spare it), at its recipe's epochs capped by --budget's
        steps, the race's check of it on the train pairs the race reads (TrainRace), and its scoring."""
        return self._seconds(ctx, costs, raced=True)

    def whole_seconds(self, ctx: Context, costs: Costs) -> float:
        """As expected_seconds, for the member the race keeps going: all of its folds and its refit, nothing spared."""
        return self._seconds(ctx, costs, raced=False)

    def _seconds(self, ctx: Context, costs: Costs, *, raced: bool) -> float:
        import math

        from sentune.adaptation.crossfit import FOLDS
        from sentune.training.recipe import load_recipe

        recipe = load_recipe(self.recipe_name(ctx), check=False)
        given = ctx.inputs.task.train_units()
        units = [given[i] for i in self.given_indices(ctx)] if given is not None else ctx.selection_units()
        rows = sum(len(r) for r in self.training_rows_counted(units))
        steps = self.steps_for(rows, ctx)
        racing = sum(isinstance(c, Supervised) for c in ctx.plan.after_race)
        checks = 0.0
        share = math.ceil(racing / 2) / racing if racing > 1 and raced else 1.0  # of the members, those the race is expected to keep
        if given is not None:  # the first rung, then the rest for those going on (search runs train each unraced)
            from sentune.adaptation.candidates.supervised_race import TrainRace, first_rung

            trainings = 1.0 if ctx.inputs.task.search else first_rung() + (1 - first_rung()) * share
            checks = costs.encode(2 * TrainRace.train_pairs_read(ctx)) if TrainRace.applies(ctx) else 0.0
            if self.evidence_mode(ctx) == CROSS_FIT:  # and, for those going on, a fold model a fold of evidence selection pairs
                folds = share * FOLDS * costs.steps(recipe, self.steps_for(max(1, rows - len(ctx.evidence.split.select) // FOLDS), ctx))
                texts = 2 * len(ctx.evidence.split.select)  # each fold's held-out pairs, at each mix
                scoring = self.scoring_seconds(ctx, costs) + share * len(self.out_of_fold_mixes(ctx)) * costs.encode(texts)
                return trainings * costs.steps(recipe, steps) + folds + scoring + checks
        else:  # the first fold, then the rest for the share of the fold race's members that go on
            fold = (FOLDS - 1) / FOLDS
            trainings = fold + (FOLDS - fold) * share
        return trainings * costs.steps(recipe, steps) + self.scoring_seconds(ctx, costs) + checks

    def first_look_seconds(self, ctx: Context, costs: Costs) -> float:
        """The supervised race's first round (every member races, a lone one too, but on a search run's --train): its
        first fold (without --train) or the first rung of its steps on --train, with the race's check of it on the train
        pairs; unraced, all of it."""
        from sentune.adaptation.crossfit import FOLDS
        from sentune.training.recipe import load_recipe

        given = ctx.inputs.task.train_units()
        if given is not None and ctx.inputs.task.search:
            return self.expected_seconds(ctx, costs)
        recipe = load_recipe(self.recipe_name(ctx), check=False)
        units = [given[i] for i in self.given_indices(ctx)] if given is not None else ctx.selection_units()
        steps = self.steps_for(sum(len(r) for r in self.training_rows_counted(units)), ctx)
        if given is None:
            first = (FOLDS - 1) / FOLDS * costs.steps(recipe, steps) + self.held_out_look(ctx, costs)
        else:
            from sentune.adaptation.candidates.supervised_race import TrainRace, first_rung

            first = first_rung() * costs.steps(recipe, steps) + costs.encode(2 * TrainRace.train_pairs_read(ctx))
        return min(first, self.expected_seconds(ctx, costs))

    def held_out_look(self, ctx: Context, costs: Costs) -> float:
        """What scoring the first fold's held-out units adds to its first look (pairs: a few hundred encodes, counted
        nothing)."""
        return 0.0

    def training_rows_counted(self, units: list) -> list[list]:
        """As many rows a unit as training_rows gives it, without building them (a pair: one)."""
        return [[None] for _ in units]

    def builds_on(self, others: list[Candidate], ctx: Context) -> tuple[str, ...]:
        return tuple(c.name for c in others if isinstance(c, Trained | Ensemble)) if self.start != UNCHANGED else ()

    def describe(self, ctx: Context) -> str:
        where = "the unchanged model" if self.start == UNCHANGED else "the best label-free trained candidate"
        return f"fine-tuning {where} on the labels ({self.recipe_name(ctx)})"

    def recipe_name(self, ctx: Context) -> str:
        return f"adapt/{SUPERVISED_RECIPES['binary' if METRICS[ctx.metric].binary_labels else 'graded']}"

    # -- what differs between pairs and queries --
    def training_rows(self, units: list, ctx: Context) -> list[list[tuple]]:
        """Each unit's training rows (a pair: itself with its label), built once for every training of the run."""
        return [[(p.a, p.b, p.score)] for p in units]

    def write_training(self, rows: list[tuple], path: Path) -> None:
        from sentune.data.user_data import write_scored_pairs

        write_scored_pairs(path, rows)

    def training_data(self, rows: list[tuple], path: Path):
        """`rows` as the trainer receives them: what reading write_training's file gives, without reading it (the file
        is the record of what it trained on)."""
        from sentune.data.user_data import pairs_as_written

        return pairs_as_written(path, rows)

    def score_held(self, model, units: list, ctx: Context, fold: int | None = None):
        """The held-out fold's scores by the model trained without it (`fold`: which, when it is the selection part's)."""
        from sentune.data.user_data import ScoredPairs
        from sentune.tasks.user_pairs import PairScorer

        return PairScorer({"held": ScoredPairs(units, "binary" if METRICS[ctx.metric].binary_labels else "scores", "held-out fold")}).of_model(model)["held"]

    def start_model(self, ctx: Context) -> str | None:
        """The model its trainings start from; None: the best label-free trained candidate it starts from is missing."""
        if self.start == UNCHANGED:
            return ctx.config.model
        sources = tuned_sources(ctx, (Trained.kind, Ensemble.kind))
        return str(best(sources).weights(ctx.out)) if sources else None

    def train(self, rows: list[tuple], where: Path, run: Path | None, start_model: str, ctx: Context, recipes: dict[Path, dict] | None = None):
        """A model trained on `rows` (recorded in where/train.tsv, which its recipe names); `run`: saved there."""
        from sentune.training.trainer import train_in_memory

        where.mkdir(parents=True, exist_ok=True)
        self.write_training(rows, where / "train.tsv")
        data = self.training_data(rows, where / "train.tsv")
        recipe = ctx.labelled_recipe(self.recipe_name(ctx), where / "train.tsv", len(rows), start_model, data=data)
        if recipes is not None:
            recipes[where] = recipe.to_dict()
        return train_in_memory(recipe, run, data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress, data=data).model

    def given_indices(self, ctx: Context) -> list[int]:
        """The --train units it trains on: all but the train pairs that confirm (sentune.adaptation.evidence), which judge it
        as they judge every candidate, and, held out (evidence_mode), those that select."""
        given = ctx.inputs.task.train_units()
        assert given is not None
        held = ctx.evidence.confirm_train_indices if ctx.evidence is not None else set()
        if self.evidence_mode(ctx) == HELD_OUT:
            held = held | {int(i) for i in ctx.evidence.indices[ctx.evidence.split.select]}
        return [i for i in range(len(given)) if i not in held]

    def given_rows(self, ctx: Context) -> list[tuple]:
        """Its training rows from --train (given_indices' units)."""
        given = ctx.inputs.task.train_units()
        assert given is not None
        return [row for rows in self.training_rows([given[i] for i in self.given_indices(ctx)], ctx) for row in rows]

    def given_data(self, ctx: Context):
        """Its --train rows as the trainer receives them (race_recipe records them in its folder's train.tsv)."""
        return self.training_data(self.given_rows(ctx), self.folder(ctx) / "train.tsv")

    def race_recipe(self, ctx: Context, start_model: str):
        """Its recipe on --train as a saved run the race pauses (sentune.adaptation.candidates.supervised_race.TrainRace):
        evaluated on the selection pairs every first_rung() of its steps, its last step kept whatever they say."""
        import math
        from dataclasses import replace

        from sentune.adaptation.candidates.supervised_race import first_rung

        rows = self.given_rows(ctx)
        self.folder(ctx).mkdir(parents=True, exist_ok=True)
        self.write_training(rows, self.folder(ctx) / "train.tsv")
        recipe = ctx.labelled_recipe(self.recipe_name(ctx), self.folder(ctx) / "train.tsv", len(rows), start_model, data=self.given_data(ctx))
        first = max(1, math.ceil(first_rung() * recipe.training.max_steps))
        return replace(recipe, training=replace(recipe.training, eval_steps=first), eval=replace(recipe.eval, dev=ctx.training_dev()))

    def first_fold(self, ctx: Context, start_model: str) -> np.ndarray:
        """Fold 0 of its cross-fitting, trained and scored for the fold race (sentune.adaptation.candidates.supervised_race); its
        held-out scores are kept in its folder for the rest of its cross-fitting."""
        import numpy as np

        from sentune.adaptation.crossfit import FOLDS, fold_rows
        from sentune.core.memory import release_unreferenced

        units = ctx.selection_units()
        training, held = fold_rows(len(units), FOLDS, ctx.config.seed, 0)
        by_unit = self.training_rows(units, ctx)
        model = self.train([row for i in training for row in by_unit[i]], ctx.store.fold_folder(self.name, 0), None, start_model, ctx)
        found = np.asarray(self.score_held(model, [units[i] for i in held], ctx, 0))
        del model
        release_unreferenced()
        ctx.store.save_held(self.name, 0, "scores", found)
        return found

    def produce(self, label: str, ctx: Context) -> CandidateRecord:
        """Every training is one run of the trainer without checkpoints (sentune.training.trainer.train_in_memory): a
        fold's model is kept in memory only while it scores its held-out fold, and the refit, which the run ships or
        builds on (hybrids, wise, the index), is saved as OUT/candidates/NAME/run. Cross-fitted supervised candidates
        race on their first fold (sentune.adaptation.candidates.supervised_race) and only those it keeps train the other folds and
        the refit. A run killed before the record is written trains the candidate again, but for what the race kept of
        it (its first fold's held-out scores, or its paused run on --train, which goes on from its last checkpoint)."""
        from sentune.adaptation.crossfit import FOLDS, fold_rows, out_of_fold_from
        from sentune.core.memory import release_unreferenced
        from sentune.training.recipe import load_recipe
        from sentune.training.runs import train_run

        say(f"{label} {self.name}: {self.describe(ctx)}")
        started = time.perf_counter()
        folder = self.folder(ctx)
        given = ctx.inputs.task.train_units()
        race = ctx.supervised_race  # run before the first member (sentune.adaptation.phases.SupervisedRace)
        raced = race is not None and self.name in race.seconds
        raced_parts = ("fold-0",) if given is None else ("run", "train.tsv")  # what the race trained of it this run
        for left in list(folder.iterdir()):  # what a killed attempt left (its refit's run, its vectors, maybe of other training data)
            if not (raced and left.name in raced_parts):
                shutil.rmtree(left) if left.is_dir() else left.unlink()
        if race is not None and self.name in race.stopped:
            shutil.rmtree(self.run_folder(ctx), ignore_errors=True)  # a paused run's checkpoint: nothing resumes it
            return write_record(self, {}, self.skip(race.stopped[self.name]), race.seconds[self.name], label, ctx)
        start_model = self.start_model(ctx)
        if start_model is None:
            return write_record(self, {}, self.skip("no label-free trained candidate with weights to start from"), 0.0, label, ctx)
        recipes: dict[Path, dict] = {}
        record = CandidateRecord(self.name, self.kind, run=str(self.run_folder(ctx).relative_to(ctx.out)))
        record.detail = {"setting": self.recipe_name(ctx), "start": start_model if self.start != UNCHANGED else UNCHANGED}
        if given is not None:
            if raced:  # the race paused its run at its first rung: it goes on from there to its last step
                data, dev = self.given_data(ctx), ctx.training_dev_data()
                recipe = load_recipe(str(self.run_folder(ctx) / "config.yaml"), data=data, dev=dev)  # its record describes them
                train_run(recipe, self.run_folder(ctx), data_dir=ctx.data_dir or Path("."), show_progress=ctx.config.show_progress, data=data, dev=dev)
                recipes[folder] = recipe.to_dict()
                model = self.model(ctx)
            else:
                model = self.train(self.given_rows(ctx), folder, self.run_folder(ctx), start_model, ctx, recipes)
            kept = self.given_indices(ctx)
            scores = ctx.scorer.of_vectors(ctx.vectors_of(model, self.name))  # kept: a hybrid of this model reads them
            record.trained_on, record.dev_indices_trained_on = "train", []
            record.detail["train_units"] = len(kept)
            if not ctx.inputs.task.search:
                record.train_indices_trained_on = kept
            if self.evidence_mode(ctx) is not None:
                record.detail["evidence_mode"] = self.evidence_mode(ctx)
            if self.evidence_mode(ctx) == CROSS_FIT:
                del model  # the refit is saved: only one fold model is held at a time from here
                record.detail["evidence_folds"] = self.cross_fit_evidence(ctx, start_model)
        else:
            select, units = ctx.inputs.split.select, ctx.selection_units()
            by_unit = self.training_rows(units, ctx)

            def fit(fold: int, rows: np.ndarray):
                release_unreferenced()  # the previous fold's model and its trainer are garbage by now
                return self.train([row for i in rows for row in by_unit[i]], ctx.store.fold_folder(self.name, fold), None, start_model, ctx), fold

            def held_out(fitted, held: np.ndarray) -> np.ndarray:
                model, fold = fitted
                return self.score_held(model, [units[i] for i in held], ctx, fold)

            done = {0: ctx.store.held(self.name, 0, "scores")} if raced else {}
            # each training prints its own time; the user should know how many there are
            say(
                f"    {self.name}: cross-fitting on the {len(units)} selection {ctx.inputs.dev.unit}: {FOLDS - len(done)} trainings without one fold each"
                + (" (the fold race trained the first)" if done else "")
                + ", then one on all",
            )
            oof = out_of_fold_from(len(units), FOLDS, ctx.config.seed, fit, held_out, done)
            release_unreferenced()
            model = self.train([row for rows in by_unit for row in rows], folder, self.run_folder(ctx), start_model, ctx, recipes)
            scores = ctx.scorer.of_vectors(ctx.vectors_of(model, self.name))  # kept: a hybrid of this model reads them
            scores["dev"][select] = oof  # the selection part's scores: out of fold
            folds = [sorted(int(select[i]) for i in fold_rows(len(units), FOLDS, ctx.config.seed, fold)[0]) for fold in range(FOLDS)]
            record.trained_on, record.dev_indices_trained_on, record.fold_dev_indices_trained_on = "selection", sorted(int(i) for i in select), folds
            record.detail |= {"train_units": len(units), "folds": FOLDS}
        if race is not None and raced:
            record.detail["race"] = race.summary()
        # the refit's (the folds' differ in their rows, and a raced refit in the race's checks of it, which keep its last step)
        record.detail["recipe"] = recipes[folder]
        seconds = time.perf_counter() - started + (race.seconds[self.name] if race is not None and raced else 0.0)
        return write_record(self, scores, record, seconds, label, ctx)

    def cross_fit_evidence(self, ctx: Context, start_model: str) -> list[list[int]]:
        """Its out-of-fold scores of the evidence selection pairs (sentune.adaptation.crossfit, over those pairs): for each
        fold, a model trained on its --train rows without the fold's pairs scores them, at each of out_of_fold_mixes;
        kept in the candidate store (save_out_of_fold_train), which sentune.adaptation.train_evidence reads in place of the
        refit's scores of those pairs. Each fold's held-out --train indices, for its record."""
        import numpy as np

        from sentune.adaptation.crossfit import FOLDS
        from sentune.core.memory import release_unreferenced

        given = ctx.inputs.task.train_units()
        assert given is not None and ctx.evidence is not None
        kept, folds, mixes = self.given_indices(ctx), self.evidence_folds(ctx), list(self.out_of_fold_mixes(ctx))
        say(
            f"    {self.name}: cross-fitting on the {sum(len(f) for f in folds)} evidence selection pairs of --train: {FOLDS} trainings without "
            f"one fold each, each scoring its fold{' at wise mixes too' if len(mixes) > 1 else ''}",
        )
        found = []
        for fold, held in enumerate(folds):
            release_unreferenced()  # the previous fold's model and its trainer are garbage by now
            out = set(held.tolist())
            rows = [row for rows in self.training_rows([given[i] for i in kept if i not in out], ctx) for row in rows]
            model = self.train(rows, ctx.store.fold_folder(self.name, fold), None, start_model, ctx)
            found.append(self.score_mixes(model, [given[i] for i in held], mixes, ctx))
            del model
        release_unreferenced()
        width = min(len(rows) for rows in found)  # 1 when its transformer cannot be mixed with the unchanged one
        scores = np.concatenate([rows[:width] for rows in found], axis=1)
        ctx.store.save_out_of_fold_train(self.name, ctx.evidence.digest, np.concatenate(folds), np.array(mixes[:width]), scores)
        return [sorted(int(i) for i in held) for held in folds]

    def score_mixes(self, model, units: list, mixes: list[float], ctx: Context) -> np.ndarray:
        """`units` scored by `model` mixed with the unchanged model at each mix (sentune.adaptation.wise.interpolate; 1: the
        model itself), one row a mix; the first row alone when the two cannot be mixed (a wise of it is skipped too)."""
        import copy

        import numpy as np

        from sentune.adaptation.wise import NotInterpolable, interpolate

        rows = [np.asarray(self.score_held(model, units, ctx))]
        mixed = copy.deepcopy(model) if len(mixes) > 1 else None
        try:
            rows += [np.asarray(self.score_held(interpolate(ctx.base, model, mix, into=mixed), units, ctx)) for mix in mixes[1:]]
        except NotInterpolable:
            rows = rows[:1]
        return np.stack(rows)


@dataclass
class SupervisedSearch(Supervised):
    """Supervised on search data: MultipleNegativesRankingLoss on (query, relevant document, BM25's best-ranked
    unjudged document, the unchanged model's best-ranked unjudged document) rows, a relevant document drawn per query
    per pass (sentune.adaptation.hard_negatives.search_rows: its steps follow the queries, not the judgements;
    sentune.methods.mnrl; no judged-relevant document is ever a negative). Mined here rather than with
    sentence-transformers' mine_hard_negatives, which mines with one embedding model: BM25's and the unchanged model's
    rankings of the whole corpus are what the run already holds. Held-out selection queries rank the selection pool,
    as every candidate's selection queries do."""

    search: ClassVar[bool] = True

    def recipe_name(self, ctx: Context) -> str:
        return f"adapt/{SUPERVISED_RECIPES['search']}"

    def training_rows(self, units: list, ctx: Context) -> list[list[tuple]]:
        """Each query's rows, a judged-relevant document drawn per pass: (query, document, its two mined negatives). A
        query's draws and negatives do not depend on the other queries with it: the same in every training of the run."""
        from sentune.adaptation.hard_negatives import search_rows
        from sentune.adaptation.search_context import as_search

        search = as_search(ctx)
        texts = {d.id: d.text for d in search.retrieval_dev().corpus}
        return search_rows(units, texts, search.negatives.of(units), ctx.config.seed)

    def training_rows_counted(self, units: list) -> list[list]:
        from sentune.adaptation.hard_negatives import POSITIVE_DRAWS, drawn_positives

        return [drawn_positives(q, POSITIVE_DRAWS, 0) for q in units]  # a row per draw

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        """Supervised's, and each cross-fitted fold's held-out queries ranked against the selection pool (encoded by
        the fold's model: minutes on a corpus of long documents)."""
        return super().expected_seconds(ctx, costs) + self._held_out_pools(ctx, costs)

    def whole_seconds(self, ctx: Context, costs: Costs) -> float:
        return super().whole_seconds(ctx, costs) + self._held_out_pools(ctx, costs)

    def _held_out_pools(self, ctx: Context, costs: Costs) -> float:
        from sentune.adaptation.crossfit import FOLDS

        folds = FOLDS if ctx.inputs.task.train_units() is None else 0
        return folds * costs.encode(ctx.selection_texts())

    def held_out_look(self, ctx: Context, costs: Costs) -> float:
        """The first fold's held-out queries ranked against the selection pool, encoded by its model."""
        return costs.encode(ctx.selection_texts())

    def write_training(self, rows: list[tuple], path: Path) -> None:
        path.write_text("".join("\t".join(" ".join(field.split()) for field in row) + "\n" for row in rows), encoding="utf-8")

    def training_data(self, rows: list[tuple], path: Path):
        return tuples_as_written(rows)

    def score_held(self, model, units: list, ctx: Context, fold: int | None = None):
        """The held-out queries against the selection pool; a selection fold's vectors of them and of the pool stay in
        the candidate store (held `vectors`), which the hybrid of this candidate reads for its own out-of-fold scores."""
        from sentune.adaptation.search_context import as_search

        scorer = as_search(ctx).selection.held_scorer(units)
        vectors = scorer.encode(model, ["model"], f"{self.name}: scoring a held-out fold")["model"]
        if fold is not None:
            ctx.store.save_held(self.name, fold, "vectors", vectors)
        return scorer.of_vectors(vectors)["held"]


def tuples_as_written(rows: list[tuple]):
    """What reading tab-separated training rows back gives (sentune.data.readers.read_tuples: each field normalised),
    without reading them."""
    from sentune.data.kinds import Tuples
    from sentune.data.text_files import normalise

    return Tuples([tuple(normalise(field) for field in row) for row in rows])
