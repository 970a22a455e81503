"""Commands that measure models: eval, encode, layerwise, tsne, pairs, compare, report."""

from __future__ import annotations

import argparse
from pathlib import Path

from sentune.cli.base import Command, backend_option, command_line, csv_list, model_options
from sentune.errors import UserError
from sentune.postprocess import POSTPROCESSORS, Postprocessor


def cmd_eval(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from sentune.core.locks import exclusive_output

    # --out is held from the first check to the last write: two runs never write one folder, finished results stay
    with exclusive_output(Path(args.out), overwrite=args.overwrite) if args.out else nullcontext():
        return _eval(args)


def _eval(args: argparse.Namespace) -> int:
    from sentune.api.evaluate import evaluate

    results = evaluate(
        args.model,
        csv_list(args.tasks),
        csv_list(args.pooling),
        data=args.data,
        postprocess={p.name: getattr(args, _dest(p)) for p in POSTPROCESSORS.values()},
        postprocess_settings={p.name: getattr(args, _set_dest(p)) for p in POSTPROCESSORS.values()},
        preset=args.preset,
        precision=args.precision,
        alignment_pairs=args.alignment_pairs,
        backend=args.backend,
        device=args.device_option if "device_option" in vars(args) else args.device,  # resolved once the tasks are read
        trust_remote_code=args.trust_remote_code,
        allow_modified=args.allow_modified_data,
        show_progress=not args.quiet,
    )
    from sentune.core.results import render_markdown, retrieval_table, sts_summary_table

    if args.out:
        json_path, md_path = results.save(Path(args.out), command_line())
        tables = [t for t in (sts_summary_table(results.runs), retrieval_table(results.runs)) if t]
        print("\n\n".join(tables) or render_markdown(results.raw))
        print(f"\nwrote {json_path} and {md_path}")
    else:
        print(render_markdown(results.raw))
    return 0


def eval_options(p: argparse.ArgumentParser) -> None:
    model_options(p)
    p.add_argument("--tasks", default="sts", help="task or group names, comma-separated: sts, dev, transfer, relatedness, multilingual, STS12, ...")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", help="folder for results.json and results.md (refused when it holds results, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace the results a finished eval left in --out")
    postprocess_options(p)
    p.add_argument(
        "--preset",
        default="fast",
        choices=["fast", "standard", "fast-mlp", "standard-mlp"],
        help="SentEval transfer preset: fast (5-fold) or standard (10-fold), logistic regression; -mlp: SentEval's MLP (50 hidden units)",
    )
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16"],
        help="fp32 (exact, default) or bf16 autocast (about 2x faster on CPUs with bf16 units; embeddings move by ~1e-2)",
    )
    p.add_argument("--alignment-pairs", choices=["qqp", "stsb"], help="also report alignment and uniformity on these positive pairs")
    backend_option(p)


def _dest(record: Postprocessor) -> str:
    return f"postprocess_{record.name}"


def _set_dest(record: Postprocessor) -> str:
    return f"postprocess_{record.name}_set"


def postprocess_options(p: argparse.ArgumentParser) -> None:
    """`--WORD SET[:N]` and `--WORD-set NAME=VALUE` for every registered post-processor."""
    for record in POSTPROCESSORS.values():
        p.add_argument(
            f"--{record.word}",
            dest=_dest(record),
            action="append",
            default=[],
            metavar=f"SET[:{record.number_metavar}]",
            help=f"also evaluate with {record.about} fitted on SET (target, per-task, nli, wiki, stsb, file:PATH, tasks:SELECTION), "
            f"and :{record.number_metavar} sets its {record.number}; repeatable",
        )
        p.add_argument(
            f"--{record.word}-set",
            dest=_set_dest(record),
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help=f"a setting of every --{record.word}: {', '.join(s for s in record.settings if s != 'device')}; repeatable",  # it fits on the model's device
        )


def cmd_encode(args: argparse.Namespace) -> int:
    import sys

    from sentune.core.encoding_io import check_embeddings_path, write_embeddings
    from sentune.data.readers import read_corpus, read_lines

    read_corpus(Path(args.input), skip_blank=True, user_file=True)  # a missing or unreadable input is named before the model code loads
    check_embeddings_path(Path(args.output))
    # Every line is encoded, blank ones too (as the empty string), so that row i of the output is line i of the input
    sentences = read_lines(Path(args.input), user_file=True)
    blank = [number for number, line in enumerate(sentences, start=1) if not line.strip()]
    if blank:
        print(f"warning: {args.input}: {len(blank)} blank lines (first: line {blank[0]}) encoded as empty strings, so that row i is line i", file=sys.stderr)
    from sentune.api.encode import encode

    vectors = encode(args.model, sentences, args.pooling, source=args.input, backend=args.backend, show_progress=not args.quiet, **_running(args))
    write_embeddings(Path(args.output), sentences, vectors)
    print(f"wrote {len(sentences)} embeddings to {args.output}")
    return 0


def _running(args: argparse.Namespace) -> dict:
    """How the API loads a command's models: its --device (resolved when read) and --trust-remote-code."""
    return {"device": args.device, "trust_remote_code": args.trust_remote_code}


def encode_options(p: argparse.ArgumentParser) -> None:
    model_options(p, "one pooling name")
    p.add_argument("input", help="text file, one sentence per line")
    p.add_argument("output", help="output .npy or .jsonl")
    backend_option(p)


def cmd_layerwise(args: argparse.Namespace) -> int:
    from sentune.data.catalog import select_tasks

    select_tasks(args.task, "--task")  # the option named in the error
    from sentune.api.analysis import layerwise

    result = layerwise(args.model, args.task, data=args.data, allow_modified=args.allow_modified_data, show_progress=not args.quiet, **_running(args))
    json_path, png = result.save(Path(args.out), command_line())
    print(f"wrote {json_path} and {png}")
    return 0


def layerwise_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default")
    p.add_argument("--task", default="STS-B")
    p.add_argument("--data")
    p.add_argument("--out", required=True)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--quiet", action="store_true")


def _labels(args: argparse.Namespace) -> list[str]:
    """One display label per --model: the --label options, or the model arguments themselves."""
    labels = args.label or []
    if labels and len(labels) != len(args.model):
        raise UserError(f"--label given {len(labels)} times for {len(args.model)} --model options: give one label per model or none")
    return labels or args.model


def _compared(args: argparse.Namespace) -> dict:
    """tsne and pairs: the API's arguments, the labels and the task checked with the options' names."""
    from sentune.data.catalog import select_tasks

    labels = _labels(args)
    select_tasks(args.task, "--task")
    return {"labels": labels, "task": args.task, "data": args.data, "allow_modified": args.allow_modified_data, **_running(args)}


def compared_models_options(p: argparse.ArgumentParser, *, model_help: str, label_help: str, task: str, pairs: int, pairs_help: str) -> None:
    """The options tsne and pairs share: the models side by side and the task's pairs they are shown on."""
    p.add_argument("--model", action="append", required=True, help=model_help)
    p.add_argument("--label", action="append", help=label_help)
    p.add_argument("--task", default=task)
    p.add_argument("--pairs", type=int, default=pairs, help=pairs_help)
    p.add_argument("--data")
    p.add_argument("--out", required=True)
    p.add_argument("--trust-remote-code", action="store_true")


def cmd_tsne(args: argparse.Namespace) -> int:
    from sentune.api.analysis import tsne

    print(f"wrote {tsne(args.model, pairs=args.pairs, **_compared(args)).save(Path(args.out))}")
    return 0


def tsne_options(p: argparse.ArgumentParser) -> None:
    compared_models_options(
        p,
        model_help="repeat for before/after panels",
        label_help="panel title per --model (default: the model argument)",
        task="STS-B-dev",
        pairs=20,
        pairs_help="positive and negative pairs each",
    )


def cmd_pairs(args: argparse.Namespace) -> int:
    from sentune.api.analysis import pairs

    table = pairs(args.model, count=args.pairs, seed=args.seed, **_compared(args))
    print(f"wrote {table.save(Path(args.out), command_line())}")
    return 0


def pairs_options(p: argparse.ArgumentParser) -> None:
    compared_models_options(
        p,
        model_help="repeat: one cosine column per model",
        label_help="column name per --model (default: the model argument)",
        task="STS13",
        pairs=8,
        pairs_help="number of pairs, stratified by gold score",
    )
    p.add_argument("--seed", type=int, default=0)


def cmd_compare(args: argparse.Namespace) -> int:
    from sentune.api.analysis import compare

    runs = {}
    for item in args.entries:
        label, sep, where = item.rpartition("=")
        folder, _, run = where.partition("#")
        run = run or "model"
        runs[label if sep else f"{folder}#{run}"] = (folder, run)
    print(compare(runs))
    return 0


def compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("entries", nargs="+", metavar="[LABEL=]DIR[#RUN]", help="a results folder and the run in it (default: model)")


def cmd_report(args: argparse.Namespace) -> int:
    from sentune.api.analysis import report

    md, html = report(args.runs, Path(args.out))
    print(f"wrote {md} and {html}")
    return 0


def report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", help="run folders (with results.json and/or layerwise.json)")
    p.add_argument("--out", required=True)


EVAL = Command("eval", "evaluate a model on STS / transfer / multilingual tasks", eval_options, cmd_eval, runs_models=True, scores_tasks=True)
ENCODE = Command("encode", "encode a text file (one sentence per line) to .npy or .jsonl", encode_options, cmd_encode, runs_models=True)
LAYERWISE = Command(
    "layerwise",
    "Spearman of every layer under cls/mean/max pooling (Kim et al. 2021, Figure 1)",
    layerwise_options,
    cmd_layerwise,
    runs_models=True,
    scores_tasks=True,
)
TSNE = Command(
    "tsne",
    "t-SNE of positive and negative STS pairs, one panel per model (Kim et al. 2021, Figure 5)",
    tsne_options,
    cmd_tsne,
    runs_models=True,
    scores_tasks=True,
)
PAIRS = Command(
    "pairs",
    "sentence pairs of an STS task with each model's cosine and the gold score (the BERT-CF report, Tables 3-6)",
    pairs_options,
    cmd_pairs,
    runs_models=True,
    scores_tasks=True,
)
COMPARE = Command("compare", "one STS table (Spearman x100, 'all') of runs side by side", compare_options, cmd_compare)
REPORT = Command("report", "turn run folders into one Markdown and one HTML page with tables and plots", report_options, cmd_report)

COMMANDS = (
    EVAL,
    ENCODE,
    LAYERWISE,
    TSNE,
    PAIRS,
    COMPARE,
    REPORT,
)
