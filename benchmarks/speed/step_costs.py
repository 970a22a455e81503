"""What one training step of each adapt recipe costs, in units of what encoding one text costs, with the default model
on this machine: the table `sentune adapt --time` plans with (sentune/adaptation/step_costs.json, read by
sentune.adaptation.time_plan), before the run has measured anything itself.

    python benchmarks/speed/step_costs.py --data ../shared/data --out sentune/adaptation/step_costs.json

The texts are MRPC's train sentences (the corpus of `sentune adapt --example mrpc`; its pairs, with their 0/1 labels,
train the supervised recipes, and four of its sentences make a search tuple). A text's cost: the seconds the model
takes to encode one, as sentune.adaptation.time_plan.probe_text_seconds measures it in a run. A step's cost: each recipe
trained by the trainer's one loop (sentune.training.trainer.train_in_memory) for 2 and for 2 + STEPS steps; the difference
over STEPS is a step without the set-up (a method that needs a dev task gets 16 pairs, evaluated once at the end of
both). The ratio of the two is what the planner multiplies by the run's own text
cost and the recipe's batch size. Run it on an idle machine: the page of numbers it writes says under what load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEPS = 6
WARM = 2
ALL_RECIPES = "simcse,mirror,ct,sg-opt,tsdae,sed,cosent,online-contrastive,mnrl-hard-negatives"  # every adapt recipe


def mrpc_pairs(data: Path) -> list[tuple[str, str, float]]:
    rows = []
    with (data / "senteval" / "MRPC" / "msr_paraphrase_train.txt").open(encoding="utf-8-sig") as f:
        next(f)
        for line in f:
            label, _, _, a, b = line.rstrip("\n").split("\t")
            rows.append((a, b, float(label)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("SENTUNE_DATA"), help="the data directory (default: $SENTUNE_DATA)")
    parser.add_argument("--out", default=str(REPO / "sentune" / "adaptation" / "step_costs.json"))
    parser.add_argument("--recipes", default=ALL_RECIPES)
    args = parser.parse_args()
    if not args.data:
        sys.exit("step_costs: give --data or set SENTUNE_DATA")

    from sentune.adaptation.time_plan import probe_text_seconds
    from sentune.core.models import DEFAULT_HUB_ID, load_model
    from sentune.data.kinds import ScoredPairs, Sentences, Tuples
    from sentune.training.recipe import NO_DEV, RecipeError, load_recipe, validate_recipe
    from sentune.training.trainer import train_in_memory

    pairs = mrpc_pairs(Path(args.data))
    sentences = list(dict.fromkeys(s for a, b, _ in pairs for s in (a, b)))
    base = load_model("default", device="cpu")
    text_seconds = probe_text_seconds(base, sentences)
    load_before = os.getloadavg()
    found: dict[str, dict] = {}
    # the trainer receives the data as objects, as adapt hands them (nothing written to be read back)
    corpus, dev, labelled = Sentences.of(sentences), ScoredPairs.of(pairs[:16]), ScoredPairs.of(pairs)
    rng = random.Random(0)
    tuples = Tuples([(a, b, rng.choice(sentences), rng.choice(sentences)) for a, b, label in pairs if label == 1])
    data = {"cosent": labelled, "online-contrastive": labelled, "mnrl-hard-negatives": tuples}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        members = str(work / "member")
        base.save(members)  # SED distils members: the model itself twice costs what two members cost
        for name in args.recipes.split(","):
            recipe = load_recipe(f"adapt/{name}", check=False)
            params = {**recipe.params, **({"members": [members, members]} if name == "sed" else {})}
            train = data.get(name, corpus)
            seconds = []
            # SED's first run encodes the corpus with every member into a cache its later runs read (sentune.methods.sed;
            # the planner counts that encoding apart): a first run of one step fills it, outside the measure
            for steps in ((1,) if name == "sed" else ()) + (WARM, WARM + STEPS):
                training = replace(recipe.training, max_steps=steps, eval_steps=steps, patience=0, checkpoint="last", device="cpu")
                run = replace(
                    recipe,
                    model="default",
                    train_data=train.describe(),
                    params=params,
                    training=training,
                    eval=replace(recipe.eval, dev=NO_DEV),
                )
                given_dev = None
                try:
                    validate_recipe(run, data=train)
                except RecipeError:  # a method that chooses on a dev task after training (CT's tower): 16 pairs, once at the end
                    given_dev = dev
                    run = replace(run, eval=replace(run.eval, dev=dev.describe()))
                started = time.perf_counter()
                train_in_memory(run, data_dir=Path(args.data), show_progress=False, data=train, dev=given_dev)
                seconds.append(time.perf_counter() - started)
            step = (seconds[-1] - seconds[-2]) / STEPS
            found[name] = {
                "batch_size": recipe.training.batch_size,
                "step_seconds": round(step, 4),
                "texts_per_step": round(step / text_seconds, 2),  # a step costs this many texts encoded
                "per_batch_text": round(step / (text_seconds * recipe.training.batch_size), 3),
            }
            print(name, found[name], flush=True)
    record = {
        "about": "a training step of each adapt recipe in units of one text encoded by the same model (per_batch_text: "
        "per text of the batch); sentune.adaptation.time_plan multiplies it by a run's own measured text cost",
        "model": DEFAULT_HUB_ID,
        "text_seconds": round(text_seconds, 6),
        "recipes": found,
        "command": "python benchmarks/speed/step_costs.py --data DATA" + (f" --recipes {shlex.quote(args.recipes)}" if args.recipes != ALL_RECIPES else ""),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": [round(x, 2) for x in load_before] + [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"step_costs: wrote {args.out}")


if __name__ == "__main__":
    main()
