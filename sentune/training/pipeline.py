"""Composed recipes (the SED paper §5): any sequence of stages, named as the paper names them
(`ct-flow`, `ct-sed`, `ct-sed-flow`, `nli-ct`, `nli-ct-sed-flow`, …), each stage's model feeding the next.

Stages:
  nli, ct, sts, …   train the stage's recipe (stage_recipes below) on the previous stage's model
  sed               train `members` ensemble members, member k running every training stage before `sed` (the
                    chain: `nli-ct` in nli-ct-sed) with seed k from the model the chain started from (the
                    last stage also takes the `sed:` overrides), then distil their mean into `learners`
                    learners (seeds 1..K) initialised from that same model (the SED paper §4: "an ensemble of
                    ... models, which each have been first fine-tuned towards the siamese NLI task and then
                    tuned with CT"; "distillation learners and ensemble models are pre-trained Transformers").
                    The members also form the full ensemble (a loadable, evaluated model folder). A member
                    stage whose resolved recipe equals the pipeline's own run of that stage reuses the run.
  flow, whiten, …   a post-processor's word (sentune.postprocess.POSTPROCESSORS): fit it on the previous model's
                    embeddings of --fit-on and save the model with it; `--set flow:learning_rate=1e-3` sets
                    the post-processor's options

Every stage writes its own folder named by the stages up to it (`OUT/ct`, `OUT/ct-sed`, `OUT/ct-sed-flow`),
so pipelines given the same --out share their common prefix: `ct-flow` after `ct-sed-flow` trains no new CT
model. A stage whose results.json exists is skipped and one with checkpoints is resumed, so an interrupted
pipeline recomputes nothing finished. Pipelines run in parallel on one --out split the work through stage
locks; a process that finds the stage before `sed` taken trains the other ensemble members meanwhile. Each
stage folder records its settings (stage.json); a folder holding a different stage is an error, never
silently reused.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from sentune.core.locks import run_lock
from sentune.core.results import save_results, write_atomic
from sentune.errors import UserError
from sentune.postprocess import POSTPROCESSORS, get_postprocessor, postprocessor_settings
from sentune.training.recipe import load_recipe
from sentune.training.runs import claim, train_each, train_run

logger = logging.getLogger(__name__)

STAGE_RECIPES = {"nli": "005-nli", "ct": "005-ct", "sts": "005-sts", "sg-opt": "001-sg-opt", "mirror": "002-mirror", "simcse": "002-simcse"}
POSTPROCESS_STAGES = tuple(p.word for p in POSTPROCESSORS.values())


class PipelineError(UserError):
    pass


@dataclass
class PipelineConfig:
    stages: list[str]
    model: str = "default"
    members: int = 5  # SED ensemble size (the paper: 10)
    learners: int = 1  # SED learners distilled from the one ensemble (seeds 1..K; Table 3 reports >= 3)
    fit_on: str = "wiki"  # the post-processors' fit set
    overrides: dict[str, list[str]] = field(default_factory=dict)  # per stage: extra recipe overrides
    device: str = "cpu"  # the command's: where stages whose training.device is auto train, and every model loads
    allow_modified: bool = False  # catalogued tasks whose files differ from the catalog are read anyway (--allow-modified-data)


def parse_stages(name: str) -> list[str]:
    stages = [s for s in name.split("-") if s]
    known = set(STAGE_RECIPES) | set(POSTPROCESS_STAGES) | {"sed"}
    unknown = [s for s in stages if s not in known]
    if unknown or not stages:
        raise UserError(f"pipeline {name!r}: unknown stage(s) {unknown}; stages: {', '.join(sorted(known))}")
    if stages[0] == "sed":
        raise UserError("sed distils an ensemble of the stage before it, so it cannot come first")
    return stages


def check_pipeline(config: PipelineConfig) -> None:
    """Every stage's recipe with its overrides, the post-processors' settings and --fit-on, checked before anything is
    trained or written (no torch): a mistake in the last stage's --set answers now, not after the first stages train."""
    from sentune.data.catalog import check_sentence_set

    # a stage this pipeline lacks may be set (one set of overrides for pipelines sharing --out); a name no stage has is a typo
    stages = sorted({*STAGE_RECIPES, *POSTPROCESS_STAGES, "sed", "sed-learner"})
    unknown = sorted(set(config.overrides) - set(stages))
    if unknown:
        raise PipelineError(f"--set {unknown[0]}:...: no stage is called {unknown[0]} (stages: {', '.join(stages)})")
    for index, stage in enumerate(config.stages):
        overrides = config.overrides.get(stage, [])
        if stage in POSTPROCESS_STAGES:
            postprocessor_settings(stage, overrides, f"--set {stage}:")
            check_sentence_set(config.fit_on, "--fit-on")
        elif stage == "sed":
            before = config.stages[index - 1]
            if before not in STAGE_RECIPES:
                raise PipelineError("sed distils an ensemble of training stages: put a training stage right before it (post-processors after it)")
            # the members: the stage before with the sed: overrides too; the learners (their members come later)
            load_recipe(STAGE_RECIPES[before], [f"model={config.model}", *config.overrides.get(before, []), *overrides])
            load_recipe("005-sed", [f"model={config.model}", 'params.members=["member"]', *config.overrides.get("sed-learner", [])])
        else:
            load_recipe(STAGE_RECIPES[stage], [f"model={config.model}", *overrides])


def run_pipeline(config: PipelineConfig, out: Path, *, data_dir: Path, command: str | None = None) -> Path:
    check_pipeline(config)
    out.mkdir(parents=True, exist_ok=True)
    name = "-".join(config.stages)
    model = config.model
    chain: Chain | None = None  # the training stages since the last sed or post-processor: what SED's members repeat
    for index, stage in enumerate(config.stages):
        folder = out / "-".join(config.stages[: index + 1])
        if stage in POSTPROCESS_STAGES:
            _claim(folder, {"stage": stage, "input_model": model, "fit_on": config.fit_on, "overrides": config.overrides.get(stage, [])})
            model = _postprocess_stage(stage, model, folder, config, data_dir, command)
            chain = None
        elif stage == "sed":
            if chain is None:
                raise PipelineError("sed distils an ensemble of training stages: put a training stage right before it (post-processors after it)")
            model = _sed_stage(chain, folder, config, data_dir, command)
            chain = None
        else:
            recipe_name = STAGE_RECIPES[stage]
            overrides = config.overrides.get(stage, [])
            _claim(folder, {"stage": stage, "recipe": recipe_name, "input_model": model, "overrides": overrides})
            chain = chain or Chain(start=model)
            chain.stages.append(ChainStage(stage, recipe_name, overrides, folder, model))
            feeds_sed = config.stages[index + 1 : index + 2] == ["sed"]
            recipe = load_recipe(recipe_name, [f"model={model}"] + overrides)
            if (
                feeds_sed
                and train_run(recipe, folder, data_dir=data_dir, command=command, wait=False, device=config.device, allow_modified=config.allow_modified)
                is None
            ):
                # Another process trains this stage. The other SED members do not depend on it: train them meanwhile.
                _train_members_ahead(chain, out / "-".join(config.stages[: index + 2]), config, data_dir, command)
            train_run(recipe, folder, data_dir=data_dir, command=command, device=config.device, allow_modified=config.allow_modified)
            model = str(folder / "model")
    record = {
        "stages": config.stages,
        "model": config.model,
        "members": config.members,
        "learners": config.learners,
        "fit_on": config.fit_on,
        "overrides": config.overrides,
        "final_model": model,
        "command": command,
    }
    write_atomic(out / f"pipeline-{name}.json", json.dumps(record, indent=2))
    return Path(model)


@dataclass
class ChainStage:
    name: str  # the stage's name (nli, ct, ...)
    recipe: str
    overrides: list[str]
    folder: Path  # the pipeline's own run of it
    input_model: str  # the model the pipeline's own run started from

    def own_recipe(self):
        return load_recipe(self.recipe, [f"model={self.input_model}"] + self.overrides)


@dataclass
class Chain:
    """Consecutive training stages and the model they started from."""

    start: str
    stages: list[ChainStage] = field(default_factory=list)


@dataclass
class Member:
    seed: int
    jobs: list[tuple]  # (recipe, run folder) per stage, in order; a stage reused from the pipeline's own run is absent
    model: str  # its last stage's model folder
    independent: bool  # no stage is the pipeline's own run: it can train before the pipeline's stages finish


def _sed_stage(chain: Chain, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> str:
    from sentune.training.ensemble import save_ensemble

    members = _members(chain, folder, config)
    _train_members(members, data_dir, command, config)
    paths = [m.model for m in members]
    # Which runs form the ensemble, relative to the pipeline folder (member 1 may be the pipeline's own runs).
    write_atomic(folder / "members.json", json.dumps([str(Path(m).parent.relative_to(folder.parent)) for m in paths], indent=1))
    ensemble = folder / "full-ensemble"
    with run_lock(ensemble):
        if not (ensemble / "results.json").is_file():
            from sentune.core.models import load_model
            from sentune.data.catalog import select_tasks
            from sentune.tasks.evaluate import evaluate

            save_ensemble(paths, ensemble / "model", device=config.device)
            results = evaluate(
                load_model(str(ensemble / "model"), device=config.device),
                select_tasks("sts"),
                data_dir,
                show_progress=False,
                model_name=str(ensemble / "model"),
                allow_modified=config.allow_modified,
            )
            results["meta"]["stage"] = {"full_ensemble": paths}
            save_results(results, ensemble, command)
    learner_overrides = config.overrides.get("sed-learner", [])
    learners = [
        (
            load_recipe("005-sed", [f"model={chain.start}", f"params.members={json.dumps(paths)}", f"training.seed={seed}"] + learner_overrides),
            folder / f"learner-{seed}",
        )
        for seed in range(1, config.learners + 1)
    ]
    train_each(learners, data_dir=data_dir, command=command, device=config.device, allow_modified=config.allow_modified)
    return str(folder / "learner-1" / "model")


def _members(chain: Chain, folder: Path, config: PipelineConfig) -> list[Member]:
    """Claim the SED folder; every member's stages with its seed, each on the model its previous stage made."""
    sed_overrides = config.overrides.get("sed", [])
    last = chain.stages[-1]
    settings: dict = {"stage": "sed", "recipe": last.recipe, "input_model": chain.start, "member_overrides": last.overrides + sed_overrides}
    if len(chain.stages) > 1:  # a one-stage chain keeps the settings it always had, so earlier pipelines resume
        settings["chain"] = [{"stage": s.name, "recipe": s.recipe, "overrides": s.overrides} for s in chain.stages]
    _claim(folder, {**settings, "members": config.members, "learner_overrides": config.overrides.get("sed-learner", [])})
    members = []
    for seed in range(1, config.members + 1):
        model, jobs, reused = chain.start, [], True
        for stage in chain.stages:
            overrides = [f"model={model}"] + stage.overrides + (sed_overrides if stage is last else []) + [f"training.seed={seed}"]
            if reused and load_recipe(stage.recipe, overrides).to_dict() == stage.own_recipe().to_dict():
                logger.info("member %d, stage %s: the pipeline's own run (same recipe and seed), reused", seed, stage.name)
                model = str(stage.folder / "model")
                continue
            reused = False
            run = folder / f"member-{seed}" / stage.name if len(chain.stages) > 1 else folder / f"member-{seed}"
            jobs.append((load_recipe(stage.recipe, overrides), run))
            model = str(run / "model")
        members.append(Member(seed, jobs, model, independent=len(jobs) == len(chain.stages)))
    return members


def _train_members(members: list[Member], data_dir: Path, command: str | None, config: PipelineConfig, only_independent: bool = False) -> None:
    """Each member's stages in order. Members another process is training are passed over and waited for at the end,
    so parallel pipeline workers share the members instead of queueing behind one."""
    pending = [m for m in members if m.jobs and (m.independent or not only_independent)]
    run_once = partial(train_run, data_dir=data_dir, command=command, device=config.device, allow_modified=config.allow_modified)
    while pending:
        waiting = []
        for member in pending:
            for index, (recipe, run) in enumerate(member.jobs):
                if run_once(recipe, run, wait=False) is None:  # busy elsewhere
                    waiting.append(Member(member.seed, member.jobs[index:], member.model, member.independent))
                    break
        if len(waiting) == len(pending) and all(w.jobs == p.jobs for w, p in zip(waiting, pending, strict=True)):
            recipe, run = waiting[0].jobs[0]  # nothing moved: wait for the first busy stage
            run_once(recipe, run)
        pending = waiting


def _train_members_ahead(chain: Chain, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> None:
    """While another process trains the pipeline's stage before `sed`, train the members that do not reuse it."""
    _train_members(_members(chain, folder, config), data_dir, command, config, only_independent=True)


def _claim(folder: Path, settings: dict) -> None:
    """Record what this stage folder holds; refuse a folder that holds a different stage."""
    claim(folder / "stage.json", settings, "a stage")


def _postprocess_stage(stage: str, model: str, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> str:
    with run_lock(folder):
        if not (folder / "results.json").is_file():
            _fit_postprocessor(stage, model, folder, config, data_dir, command)
    return str(folder / "model")


def _fit_postprocessor(stage: str, model: str, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> None:
    from sentune.core.models import load_model
    from sentune.data.catalog import select_tasks
    from sentune.modules.build import build_postprocessed_model
    from sentune.tasks.evaluate import evaluate, fit_summary

    saved = folder / "model"
    settings = postprocessor_settings(stage, config.overrides.get(stage, []), f"--set {stage}:")
    postprocessor = get_postprocessor(stage)(**settings, device=config.device)
    build_postprocessed_model(
        model, "model", postprocessor, config.fit_on, saved, data_dir=data_dir, device=config.device, show_progress=False, allow_modified=config.allow_modified
    )
    model_on_device = load_model(str(saved), device=config.device)
    results = evaluate(model_on_device, select_tasks("sts"), data_dir, show_progress=False, model_name=str(saved), allow_modified=config.allow_modified)
    # fit() returns the post-processor itself: its loss history and, for a flow, the null directions it found
    results["meta"]["stage"] = {"postprocess": stage, "fit_on": config.fit_on, "input_model": model, "fit": fit_summary(postprocessor)}
    save_results(results, folder, command)
