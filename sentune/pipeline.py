"""Composed recipes (seeds 003/004 §5): any sequence of stages, named as the paper names them
(`ct-flow`, `ct-sed`, `ct-sed-flow`, `nli-ct`, `nli-ct-sed-flow`, …), each stage's model feeding the next.

Stages:
  nli, ct, sts, …   train the stage's recipe (stage_recipes below) on the previous stage's model
  sed               train `members` copies of the previous training stage with seeds 1..N on the model
                    that stage started from, then distil their mean into a learner initialised from that
                    same model; the members also form the full ensemble (a loadable model folder)
  flow, whiten      fit the post-processor on the previous model and save the model with it
Every stage writes its own folder under the pipeline folder; a stage whose results.json exists is
skipped, and one with checkpoints is resumed, so an interrupted pipeline recomputes nothing finished.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from sentune.recipe import load_recipe
from sentune.results import save_results

logger = logging.getLogger(__name__)

STAGE_RECIPES = {"nli": "005-nli", "ct": "005-ct", "sts": "005-sts", "sg-opt": "001-sg-opt", "mirror": "002-mirror", "simcse": "002-simcse"}
POSTPROCESS_STAGES = ("flow", "whiten")


@dataclass
class PipelineConfig:
    stages: list[str]
    model: str = "default"
    members: int = 5  # SED ensemble size (the paper: 10)
    fit_on: str = "wiki"  # flow / whitening fit set
    overrides: dict[str, list[str]] = field(default_factory=dict)  # per stage: extra recipe overrides


def parse_stages(name: str) -> list[str]:
    stages = [s for s in name.split("-") if s]
    known = set(STAGE_RECIPES) | set(POSTPROCESS_STAGES) | {"sed"}
    unknown = [s for s in stages if s not in known]
    if unknown or not stages:
        raise ValueError(f"pipeline {name!r}: unknown stage(s) {unknown}; stages: {', '.join(sorted(known))}")
    if stages[0] == "sed":
        raise ValueError("sed distils an ensemble of the stage before it, so it cannot come first")
    return stages


def run_pipeline(config: PipelineConfig, out: Path, *, data_dir: Path, command: str | None = None) -> Path:
    from sentune.train import train

    out.mkdir(parents=True, exist_ok=True)
    (out / "pipeline.json").write_text(json.dumps({"stages": config.stages, "model": config.model, "members": config.members, "fit_on": config.fit_on}, indent=2))
    model = config.model
    previous_train: tuple[str, str] | None = None  # (stage recipe, the model it started from)
    for index, stage in enumerate(config.stages):
        folder = out / f"{index + 1}-{stage}"
        if stage in POSTPROCESS_STAGES:
            model = _postprocess_stage(stage, model, folder, config, data_dir, command)
        elif stage == "sed":
            if previous_train is None:
                raise ValueError("sed needs a training stage before it")
            recipe_name, start = previous_train
            members = []
            for seed in range(1, config.members + 1):
                member_dir = folder / f"member-{seed}"
                _train_stage(recipe_name, [f"model={start}", f"training.seed={seed}"] + config.overrides.get(stage, []), member_dir, data_dir, command, train)
                members.append(str(member_dir / "model"))
            from sentune.ensemble import save_ensemble

            save_ensemble(members, folder / "full-ensemble")
            overrides = [f"model={start}", f"params.members={json.dumps(members)}"] + config.overrides.get("sed-learner", [])
            _train_stage("005-sed", overrides, folder / "learner", data_dir, command, train)
            model = str(folder / "learner" / "model")
        else:
            recipe_name = STAGE_RECIPES[stage]
            _train_stage(recipe_name, [f"model={model}"] + config.overrides.get(stage, []), folder, data_dir, command, train)
            previous_train = (recipe_name, model)
            model = str(folder / "model")
    (out / "final-model.txt").write_text(model + "\n")
    return Path(model)


def _train_stage(recipe_name: str, overrides: list[str], folder: Path, data_dir: Path, command: str | None, train) -> None:
    if (folder / "results.json").is_file():
        logger.info("stage %s done, skipped", folder)
        return
    recipe = load_recipe(recipe_name, overrides)
    train(recipe, folder, data_dir=data_dir, resume=(folder / "checkpoints").exists(), command=command)


def _postprocess_stage(stage: str, model: str, folder: Path, config: PipelineConfig, data_dir: Path, command: str | None) -> str:
    from sentune.build import build_postprocessed_model
    from sentune.evaluate import evaluate
    from sentune.models import load_model
    from sentune.postprocess import Flow, Whitening
    from sentune.tasks.catalog import select_tasks

    saved = folder / "model"
    if not (folder / "results.json").is_file():
        postprocessor = Flow() if stage == "flow" else Whitening()
        build_postprocessed_model(model, "model", postprocessor, config.fit_on, saved, data_dir=data_dir, show_progress=False)
        results = evaluate(load_model(str(saved)), select_tasks("sts"), data_dir, show_progress=False, model_name=str(saved))
        results["meta"]["stage"] = {"postprocess": stage, "fit_on": config.fit_on, "input_model": model}
        save_results(results, folder, command)
    return str(saved)
