"""Commands that fit a post-processor and save the model with it: whiten, flow."""

from __future__ import annotations

import argparse
from pathlib import Path

from sentune.cli.base import Command, model_options


def cmd_postprocess(args: argparse.Namespace) -> int:
    from sentune.data.catalog import check_sentence_set, resolve_data_dir

    check_sentence_set(args.fit_on, "--fit-on")  # before torch loads
    data_dir = resolve_data_dir(args.data) if not args.fit_on.startswith("file:") else None
    from sentune.modules.build import build_postprocessed_model
    from sentune.postprocess import get_postprocessor

    if args.command == "whiten":
        settings = {"n_components": args.k}
    else:
        settings = {"n_blocks": args.blocks, "seed": args.seed, "epochs": args.epochs, "show_progress": not args.quiet}
    postprocessor = get_postprocessor(args.command)(**settings, device=args.device)
    path = build_postprocessed_model(
        args.model, args.pooling, postprocessor, args.fit_on, Path(args.out), data_dir=data_dir, device=args.device, show_progress=not args.quiet
    )
    print(f"saved model to {path} (load it with SentenceTransformer({str(path)!r}))")
    return 0


def whiten_options(p: argparse.ArgumentParser) -> None:
    model_options(p, "one pooling name")
    p.add_argument("--fit-on", default="nli", help="sentence set: nli, wiki, stsb, qqp, file:PATH or tasks:SELECTION")
    p.add_argument("--k", type=int, default=None, help="components to keep (default: all with non-zero variance)")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", required=True, help="output model folder")


def flow_options(p: argparse.ArgumentParser) -> None:
    model_options(p, "one pooling name")
    p.add_argument("--fit-on", default="nli", help="sentence set: nli, wiki, stsb, qqp, file:PATH or tasks:SELECTION")
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", required=True, help="output model folder")


WHITEN = Command("whiten", "fit whitening and save the model with it (loads with SentenceTransformer(path))", whiten_options, cmd_postprocess, runs_models=True)
FLOW = Command(
    "flow",
    "fit BERT-flow (Glow) on a sentence set and save the model with it (loads with SentenceTransformer(path))",
    flow_options,
    cmd_postprocess,
    runs_models=True,
)

COMMANDS = (
    WHITEN,
    FLOW,
)
