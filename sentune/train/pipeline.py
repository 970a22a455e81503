"""Composed recipes (seeds 003/004 §5): any sequence of stages, named as the paper names them
(`ct-flow`, `ct-sed`, `ct-sed-flow`, `nli-ct`, `nli-ct-sed-flow`, …), each stage's model feeding the next.

Stages:
  nli, ct, sts, …   train the stage's recipe (stage_recipes below) on the previous stage's model
  sed               train `members` copies of the previous training stage (its recipe and overrides, plus
                    `sed:` overrides) with seeds 1..N on the model that stage started from, then distil
                    their mean into `learners` learners (seeds 1..K) initialised from that same model; the
                    members also form the full ensemble (a loadable, evaluated model folder). A member
                    whose resolved recipe equals the previous stage's run reuses that run.
  flow, whiten      fit the post-processor on the previous model's embeddings of --fit-on and save the
                    model with it; `--set flow:learning_rate=1e-3` sets the post-processor's options

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
from pathlib import Path

from sentune.core.locks import run_lock
from sentune.core.results import save_results, write_atomic
from sentune.errors import UserError
from sentune.train.recipe import load_recipe, same_recipe
from sentune.train.runs import claim, train_each, train_run

logger = logging.getLogger(__name__)

STAGE_RECIPES = {"nli": "005-nli", "ct": "005-ct", "sts": "005-sts", "sg-opt": "001-sg-opt", "mirror": "002-mirror", "simcse": "002-simcse"}
POSTPROCESS_STAGES = ("flow", "whiten")


class PipelineError(UserError):
    pass


@dataclass
class PipelineConfig:
    stages: list[str]
    model: str = "default"
    members: int = 5  # SED ensemble size (the paper: 10)
    learners: int = 1  # SED learners distilled from the one ensemble (seeds 1..K; Table 3 reports >= 3)
    fit_on: str = "wiki"  # flow / whitening fit set
    overrides: dict[str, list[str]] = field(default_factory=dict)  # per stage: extra recipe overrides


def parse_stages(name: str) -> list[str]:
    stages = [s for s in name.split("-") if s]
    known = set(STAGE_RECIPES) | set(POSTPROCESS_STAGES) | {"sed"}
    unknown = [s for s in stages if s not in known]
    if unknown or not stages:
        raise UserError(f"pipeline {name!r}: unknown stage(s) {unknown}; stages: {', '.join(sorted(known))}")
    if stages[0] == "sed":
        raise UserError("sed distils an ensemble of the stage before it, so it cannot come first")
    return stages


def run_pipeline(config: PipelineConfig, out: Path, *, data_dir: Path, command: str | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    name = "-".join(config.stages)
    model = config.model
    previous: tuple[str, list[str], str, Path] | None = None  # (recipe, its overrides, start model, run folder)
    for index, stage in enumerate(config.stages):
        folder = out / "-".join(config.stages[: index + 1])
        if stage in POSTPROCESS_STAGES:
            _claim(folder, {"stage": stage, "input_model": model, "fit_on": config.fit_on, "overrides": config.overrides.get(stage, [])})
            model = _postprocess_stage(stage, model, folder, config, data_dir, command)
        elif stage == "sed":
            if previous is None:
                raise PipelineError("sed needs a training stage before it")
            model = _sed_stage(previous, folder, config, data_dir, command)
        else:
            recipe_name = STAGE_RECIPES[stage]
            overrides = config.overrides.get(stage, [])
            _claim(folder, {"stage": stage, "recipe": recipe_name, "input_model": model, "overrides": overrides})
            previous = (recipe_name, overrides, model, folder)
            feeds_sed = config.stages[index + 1 : index + 2] == ["sed"]
            recipe = load_recipe(recipe_name, [f"model={model}"] + overrides)
            if feeds_sed and train_run(recipe, folder, data_dir=data_dir, command=command, wait=False) is None:
                # Another process trains this stage. SED's other members start from this stage's input model,
                # not from its output, so train them now instead of waiting idle.
                _train_members_ahead(previous, out / "-".join(config.stages[: index + 2]), config, data_dir, command)
            train_run(recipe, folder, data_dir=data_dir, command=command)
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


def _sed_stage(previous, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> str:
    from sentune.train.ensemble import save_ensemble

    members, jobs = _member_jobs(previous, folder, config)
    train_each(jobs, data_dir=data_dir, command=command)
    # Which runs form the ensemble, relative to the pipeline folder (member 1 may be the previous stage).
    write_atomic(folder / "members.json", json.dumps([str(Path(m).parent.relative_to(folder.parent)) for m in members], indent=1))
    ensemble = folder / "full-ensemble"
    with run_lock(ensemble):
        if not (ensemble / "results.json").is_file():
            from sentune.core.models import load_model
            from sentune.data.catalog import select_tasks
            from sentune.tasks.evaluate import evaluate

            save_ensemble(members, ensemble / "model")
            results = evaluate(load_model(str(ensemble / "model")), select_tasks("sts"), data_dir, show_progress=False, model_name=str(ensemble / "model"))
            results["meta"]["stage"] = {"full_ensemble": members}
            save_results(results, ensemble, command)
    start, learner_overrides = previous[2], config.overrides.get("sed-learner", [])
    learners = [
        (
            load_recipe("005-sed", [f"model={start}", f"params.members={json.dumps(members)}", f"training.seed={seed}"] + learner_overrides),
            folder / f"learner-{seed}",
        )
        for seed in range(1, config.learners + 1)
    ]
    train_each(learners, data_dir=data_dir, command=command)
    return str(folder / "learner-1" / "model")


def _member_jobs(previous, folder: Path, config: PipelineConfig) -> tuple[list[str], list]:
    """Claim the SED folder; (every member's model folder, the training jobs of those not yet reusable)."""
    recipe_name, stage_overrides, start, trained = previous
    member_overrides = stage_overrides + config.overrides.get("sed", [])
    _claim(
        folder,
        {
            "stage": "sed",
            "recipe": recipe_name,
            "input_model": start,
            "member_overrides": member_overrides,
            "members": config.members,
            "learner_overrides": config.overrides.get("sed-learner", []),
        },
    )
    members, jobs = [], []
    for seed in range(1, config.members + 1):
        overrides = [f"model={start}"] + member_overrides + [f"training.seed={seed}"]
        if _same_run(recipe_name, overrides, trained):
            logger.info("member %d is the run of %s (same recipe and seed), reused", seed, trained)
            members.append(str(trained / "model"))
            continue
        jobs.append((load_recipe(recipe_name, overrides), folder / f"member-{seed}"))
        members.append(str(folder / f"member-{seed}" / "model"))
    return members, jobs


def _train_members_ahead(previous, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> None:
    """While another process trains the stage before `sed`, train the members that are not that stage's run
    (the member with the stage's own recipe and seed will be the stage's run, reused once it is done)."""
    recipe_name, stage_overrides, start, _ = previous
    stage_run = load_recipe(recipe_name, [f"model={start}"] + stage_overrides).to_dict()
    _, jobs = _member_jobs(previous, folder, config)
    train_each([job for job in jobs if job[0].to_dict() != stage_run], data_dir=data_dir, command=command)


def _same_run(recipe_name: str, overrides: list[str], folder: Path) -> bool:
    config = folder / "config.yaml"
    return (folder / "results.json").is_file() and config.is_file() and same_recipe(config, load_recipe(recipe_name, overrides))


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
    from sentune.postprocess import POSTPROCESSORS, postprocessor_settings
    from sentune.tasks.evaluate import evaluate

    saved = folder / "model"
    settings = postprocessor_settings(stage, config.overrides.get(stage, []), f"--set {stage}:")
    postprocessor = POSTPROCESSORS[stage](**settings)
    build_postprocessed_model(model, "model", postprocessor, config.fit_on, saved, data_dir=data_dir, show_progress=False)
    results = evaluate(load_model(str(saved)), select_tasks("sts"), data_dir, show_progress=False, model_name=str(saved))
    results["meta"]["stage"] = {"postprocess": stage, "fit_on": config.fit_on, "input_model": model}
    save_results(results, folder, command)
