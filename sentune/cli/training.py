"""Commands that train: train, paraphrase (training pairs), pipeline, ensemble."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sentune.cli.base import Command, command_line
from sentune.errors import UserError
from sentune.postprocess import POSTPROCESSORS


def cmd_train(args: argparse.Namespace) -> int:
    from sentune.api.train import run

    out, results = run(
        args.recipe,
        None,
        args.overrides,
        Path(args.out) if args.out else None,
        data_dir=args.data,
        resume=args.resume,
        overwrite=args.overwrite,
        device=args.device_option if "device_option" in vars(args) else args.device,  # resolved once the recipe is checked
        allow_modified=args.allow_modified_data,
        show_progress=not args.quiet,
        command=command_line(),
        banner=_train_banner,
        warn=lambda message: print(f"sentune: {message}", file=sys.stderr),
    )
    from sentune.core.distributed import rank
    from sentune.core.results import sts_summary_table

    if rank() != 0:  # data parallel (torchrun): one process speaks and writes
        return 0
    print(sts_summary_table(results["runs"]) or "")
    print(f"\nmodel: {out / 'model'} (SentenceTransformer({str(out / 'model')!r})); results: {out / 'results.md'}")
    return 0


def _device(device: str) -> str:
    import torch

    return f"{device} ({torch.cuda.get_device_name(device)})" if device.startswith("cuda") else f"cpu ({torch.get_num_threads()} threads)"


def _train_banner(recipe, out: Path, data_dir: Path, device: str) -> None:
    t = recipe.training
    length = f"{t.max_steps} steps" if t.max_steps > 0 else f"{t.epochs:g} epoch(s)"
    stop = f", stops after {t.patience} without a new best" if t.patience else ""
    print(
        f"sentune train: method {recipe.method} (recipe {recipe.name}) on model {recipe.model}\n"
        f"  data: {recipe.train_data} from {data_dir}; device: {_device(device)}\n"
        f"  {length} at batch {t.batch_size}, evaluated on {recipe.eval.dev} every {t.eval_steps} steps{stop}\n"
        f"  run folder: {out}",
        flush=True,
    )


def train_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", help="a recipe file or a bundled recipe name (sentune/recipes/)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides, e.g. params.temperature=0.1")
    p.add_argument("--out", help="run folder (default runs/RECIPE_NAME)")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its last complete checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a finished run in --out (otherwise refused)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (the dev evaluations are still printed)")


def cmd_paraphrase(args: argparse.Namespace) -> int:
    from sentune.api.models import paraphrase

    pairs = paraphrase(
        Path(args.input), args.forward, args.backward, beams=args.beams, batch_size=args.batch_size, out=Path(args.output), show_progress=not args.quiet
    )
    print(f"wrote {len(pairs)} sentence<TAB>paraphrase lines to {args.output} (train with train_data=pairs:{args.output})")
    return 0


def paraphrase_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="one sentence per line")
    p.add_argument("output", help="output .tsv")
    p.add_argument("--forward", default="Helsinki-NLP/opus-mt-en-de", help="translation model to the pivot language")
    p.add_argument("--backward", default="Helsinki-NLP/opus-mt-de-en", help="translation model back to English")
    p.add_argument("--beams", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--quiet", action="store_true")


def cmd_pipeline(args: argparse.Namespace) -> int:
    from sentune.api.models import run

    overrides: dict[str, list[str]] = {}
    for item in args.set:
        stage, sep, override = item.partition(":")
        if not sep or "=" not in override:
            raise UserError(f"--set {item!r}: expected STAGE:key=value, e.g. ct:training.max_steps=500")
        overrides.setdefault(stage, []).append(override)
    out = Path(args.out or Path("runs") / args.name)
    final = run(
        args.name,
        args.model,
        members=args.members,
        learners=args.learners,
        fit_on=args.fit_on,
        overrides=overrides,
        out=out,
        data=args.data,
        device=args.device_option,  # resolved once every stage is checked
        allow_modified=args.allow_modified_data,
        command=command_line(),
    )
    print(f"pipeline {args.name}: final model {final}; every stage's results under {out}")
    return 0


def pipeline_options(p: argparse.ArgumentParser) -> None:
    postprocessors = ", ".join(record.word for record in POSTPROCESSORS.values())
    p.add_argument("name", help=f"stages joined by '-': nli, ct, sts, sg-opt, mirror, simcse, sed, {postprocessors}")
    p.add_argument("--model", default="default")
    p.add_argument("--members", type=int, default=5, help="SED ensemble size (the paper: 10)")
    p.add_argument("--learners", type=int, default=1, help="SED learners distilled from the one ensemble, seeds 1..K (Table 3: >= 3)")
    p.add_argument("--fit-on", default="wiki", help="sentence set for the post-processor stages (wiki, nli, stsb, file:PATH, tasks:SELECTION)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="STAGE:key=value",
        help="recipe override for one stage; sed: the members on top of their stage's overrides, sed-learner: the learners; repeatable",
    )
    p.add_argument("--data")
    p.add_argument("--out")


def cmd_ensemble(args: argparse.Namespace) -> int:
    from sentune.api.models import ensemble

    ensemble(args.member, args.pooling, Path(args.out), device=args.device_option)
    print(f"wrote {args.out} (evaluate it with: sentune eval --model {args.out})")
    return 0


def ensemble_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--member", action="append", required=True, help="a member model folder; repeat")
    p.add_argument("--pooling", default="mean", help="the members' pooling (SED: mean)")
    p.add_argument("--out", required=True)


TRAIN = Command("train", "train a recipe (YAML) with dotted overrides, e.g. training.seed=2", train_options, cmd_train, runs_models=True, scores_tasks=True)
PARAPHRASE = Command("paraphrase", "back-translate a sentence file into sentence<TAB>paraphrase pairs", paraphrase_options, cmd_paraphrase)
PIPELINE = Command(
    "pipeline", "run composed stages, e.g. ct-sed-flow or nli-ct-sed-flow (resumable)", pipeline_options, cmd_pipeline, runs_models=True, scores_tasks=True
)
ENSEMBLE = Command(
    "ensemble", "make a 'full ensemble' model folder: the average of several models' embeddings", ensemble_options, cmd_ensemble, runs_models=True
)

COMMANDS = (
    TRAIN,
    PARAPHRASE,
    PIPELINE,
    ENSEMBLE,
)
