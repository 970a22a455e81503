"""Commands that fit a post-processor and save the model with it: one per record of sentune.postprocess.POSTPROCESSORS,
named by its word (whiten, flow)."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from sentune.cli.base import Command, model_options
from sentune.postprocess import POSTPROCESSORS, Postprocessor, postprocessor


def cmd_postprocess(args: argparse.Namespace) -> int:
    from sentune.api.postprocess import fit_postprocessor

    record = postprocessor(args.command)
    fit_postprocessor(
        args.model,
        record.name,
        args.fit_on,
        pooling=args.pooling,
        settings={o.setting: getattr(args, o.setting) for o in record.options},
        out=Path(args.out),
        data=args.data,
        device=args.device_option,  # resolved once the options and the fit set are checked
        trust_remote_code=args.trust_remote_code,
        show_progress=not args.quiet,
    )
    print(f"saved model to {args.out} (load it with SentenceTransformer({str(Path(args.out))!r}))")
    return 0


def postprocess_options(record: Postprocessor, p: argparse.ArgumentParser) -> None:
    model_options(p, "one pooling name")
    p.add_argument("--fit-on", default="nli", help="sentence set: nli, wiki, stsb, qqp, file:PATH or tasks:SELECTION")
    for option in record.options:
        p.add_argument(option.flag, dest=option.setting, metavar=option.flag.lstrip("-").upper(), type=option.type, default=option.default, help=option.help)
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", required=True, help="output model folder")


def postprocess_command(record: Postprocessor) -> Command:
    return Command(
        record.word,
        f"fit {record.about} on a sentence set and save the model with it (loads with SentenceTransformer(path))",
        partial(postprocess_options, record),
        cmd_postprocess,
        runs_models=True,
    )


COMMANDS = tuple(postprocess_command(record) for record in POSTPROCESSORS.values())
