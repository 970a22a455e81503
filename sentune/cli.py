"""Command line: sentune train | eval | adapt | encode | whiten | layerwise | data check | data download | report."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from sentune.errors import UserError

logger = logging.getLogger("sentune")


_ARGV: list[str] = []


def _command_line() -> str:
    """The command as typed, for results files (so a table can always be regenerated)."""
    return "sentune " + " ".join(shlex.quote(a) for a in _ARGV)


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def cmd_eval(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from sentune.core.locks import exclusive_output

    # --out is held from the first check to the last write: two runs never write one folder, finished results stay
    with exclusive_output(Path(args.out), overwrite=args.overwrite) if args.out else nullcontext():
        return _eval(args)


def _eval(args: argparse.Namespace) -> int:
    from sentune.core.postprocess_settings import postprocessor_settings
    from sentune.data.catalog import load_task, resolve_data_dir, select_tasks

    data_dir = resolve_data_dir(args.data)
    tasks = select_tasks(args.tasks)
    flow_settings = postprocessor_settings("flow", args.flow_set, "--flow-set")
    examples = {spec.name: load_task(spec, data_dir) for spec in tasks}  # read and checked before torch is imported
    from sentune.core.models import load_model
    from sentune.core.results import render_markdown, retrieval_table, save_results, sts_summary_table
    from sentune.tasks.evaluate import PostprocessOption, evaluate

    if args.backend != "torch" and args.precision != "fp32":
        raise UserError(f"--precision {args.precision} is for --backend torch (an int8 graph is --backend onnx-int8)")
    model = load_model(args.model, trust_remote_code=args.trust_remote_code, backend=args.backend, device=args.device)
    results = evaluate(
        model,
        tasks,
        data_dir,
        poolings=_csv(args.pooling),
        postprocess=[PostprocessOption.parse("whitening", w) for w in args.whiten] + [PostprocessOption.parse("flow", f, flow_settings) for f in args.flow],
        preset=args.preset,
        alignment_pairs=args.alignment_pairs,
        show_progress=not args.quiet,
        model_name=args.model,
        precision=args.precision,
        examples=examples,
    )
    if args.out:
        json_path, md_path = save_results(results, Path(args.out), _command_line())
        tables = [t for t in (sts_summary_table(results["runs"]), retrieval_table(results["runs"])) if t]
        print("\n\n".join(tables) or render_markdown(results))
        print(f"\nwrote {json_path} and {md_path}")
    else:
        print(render_markdown(results))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from sentune.core.results import sts_summary_table
    from sentune.data.catalog import resolve_data_dir
    from sentune.train.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)  # every key and value checked before any work
    data_dir = resolve_data_dir(args.data)
    out = Path(args.out or Path("runs") / recipe.name)
    from sentune.train.trainer import check_run_dir, train

    if args.overwrite and (out / "results.json").is_file() and int(os.environ.get("RANK", "0")) == 0:
        import shutil

        print(f"sentune: --overwrite: removing the finished run in {out}", file=sys.stderr)
        shutil.rmtree(out)
    check_run_dir(out, recipe, args.resume)
    from sentune.core.distributed import rank

    main_process = rank() == 0  # data parallel (torchrun): one process speaks and writes
    if main_process:
        from sentune.train.trainer import training_device

        _train_banner(recipe, out, data_dir, training_device(recipe, args.device))
    if args.resume and not any((out / "checkpoints").glob("checkpoint-*/COMPLETE")):
        print(f"sentune: nothing to resume in {out} (no complete checkpoint): training starts at step 0", file=sys.stderr)
    results = train(recipe, out, data_dir=data_dir, resume=args.resume, command=_command_line(), show_progress=not args.quiet, device=args.device)
    if not main_process:
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


def cmd_paraphrase(args: argparse.Namespace) -> int:
    from sentune.data.readers import read_corpus

    read_corpus(Path(args.input), skip_blank=True, user_file=True)  # named before the translation models' code loads
    from sentune.data.paraphrase import write_paraphrase_file

    count = write_paraphrase_file(
        Path(args.input), Path(args.output), args.forward, args.backward, beams=args.beams, batch_size=args.batch_size, show_progress=not args.quiet
    )
    print(f"wrote {count} sentence<TAB>paraphrase lines to {args.output} (train with train_data=pairs:{args.output})")
    return 0


def cmd_pipeline(args: argparse.Namespace) -> int:
    from sentune.data.catalog import resolve_data_dir
    from sentune.train.pipeline import PipelineConfig, parse_stages, run_pipeline

    overrides: dict[str, list[str]] = {}
    for item in args.set:
        stage, sep, override = item.partition(":")
        if not sep or "=" not in override:
            raise UserError(f"--set {item!r}: expected STAGE:key=value, e.g. ct:training.max_steps=500")
        overrides.setdefault(stage, []).append(override)
    config = PipelineConfig(
        parse_stages(args.name), model=args.model, members=args.members, learners=args.learners, fit_on=args.fit_on, overrides=overrides, device=args.device
    )
    out = Path(args.out or Path("runs") / args.name)
    final = run_pipeline(config, out, data_dir=resolve_data_dir(args.data), command=_command_line())
    print(f"pipeline {args.name}: final model {final}; every stage's results under {out}")
    return 0


def cmd_ensemble(args: argparse.Namespace) -> int:
    from sentune.train.ensemble import save_ensemble

    folder = save_ensemble(args.member, Path(args.out), args.pooling, device=args.device)
    print(f"wrote {folder} (evaluate it with: sentune eval --model {folder})")
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    from sentune.data.readers import read_corpus

    read_corpus(Path(args.input), skip_blank=True, user_file=True)  # a missing or unreadable input is named before the model code loads
    from sentune.core.encoding_io import encode_file

    count = encode_file(
        args.model,
        args.pooling,
        Path(args.input),
        Path(args.output),
        trust_remote_code=args.trust_remote_code,
        show_progress=not args.quiet,
        backend=args.backend,
        device=args.device,
    )
    print(f"wrote {count} embeddings to {args.output}")
    return 0


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


def cmd_layerwise(args: argparse.Namespace) -> int:
    from sentune.data.catalog import resolve_data_dir, select_tasks

    data_dir, task = resolve_data_dir(args.data), select_tasks(args.task, "--task")[0]  # before torch loads
    from sentune.analysis.layerwise import layerwise_scores, plot_layerwise, save_layerwise
    from sentune.core.models import load_model

    model = load_model(args.model, trust_remote_code=args.trust_remote_code, device=args.device)
    result = layerwise_scores(model, task, data_dir, show_progress=not args.quiet, model_name=args.model)
    result["meta"]["command"] = _command_line()
    json_path = save_layerwise(result, Path(args.out))
    png = plot_layerwise([result], Path(args.out) / "layerwise.png")
    print(f"wrote {json_path} and {png}")
    return 0


def _labels(args: argparse.Namespace) -> list[str]:
    """One display label per --model: the --label options, or the model arguments themselves."""
    labels = args.label or []
    if labels and len(labels) != len(args.model):
        raise UserError(f"--label given {len(labels)} times for {len(args.model)} --model options: give one label per model or none")
    return labels or args.model


def cmd_tsne(args: argparse.Namespace) -> int:
    from sentune.data.catalog import resolve_data_dir, select_tasks

    data_dir, labels = resolve_data_dir(args.data), _labels(args)
    select_tasks(args.task, "--task")  # before torch loads
    from sentune.analysis.figures import tsne_figure
    from sentune.core.models import load_model

    models = [(label, load_model(name, trust_remote_code=args.trust_remote_code, device=args.device)) for name, label in zip(args.model, labels, strict=True)]
    path = tsne_figure(models, data_dir, Path(args.out), task=args.task, count=args.pairs)
    print(f"wrote {path}")
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    from sentune.data.catalog import resolve_data_dir, select_tasks

    data_dir, labels = resolve_data_dir(args.data), _labels(args)
    select_tasks(args.task, "--task")  # before torch loads
    from sentune.analysis.pairs import pair_cosines, save_pairs
    from sentune.core.models import load_model

    models = [(label, load_model(name, trust_remote_code=args.trust_remote_code, device=args.device)) for name, label in zip(args.model, labels, strict=True)]
    record = pair_cosines(models, args.task, data_dir, count=args.pairs, seed=args.seed)
    record["command"] = _command_line()
    print(f"wrote {save_pairs(record, Path(args.out))}")
    return 0


def cmd_data_check(args: argparse.Namespace) -> int:
    from sentune.data.check import check_data_dir

    if not Path(args.dir).is_dir():
        raise UserError(f"{args.dir}: no such folder (`sentune data download {args.dir}` fetches the canonical sets into it)")

    report, ok = check_data_dir(Path(args.dir), verify_checksums=not args.no_checksums)
    print(report)
    return 0 if ok else 1


def cmd_data_download(args: argparse.Namespace) -> int:
    from sentune.data.catalog import default_data_dir
    from sentune.data.download import download_all

    folder = Path(args.dir) if args.dir else default_data_dir()
    download_all(folder, base_urls=args.mirror, only=_csv(args.only) if args.only else None, show_progress=not args.quiet)
    if args.dir:
        print(f"data ready in {folder}; use it with --data {folder} or SENTUNE_DATA={folder}")
    else:
        print(f"data ready in {folder}, which every command reads when neither --data nor SENTUNE_DATA is given")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import json

    from sentune.core.results import sts_summary_table

    runs = {}
    for item in args.entries:
        label, sep, where = item.rpartition("=")
        folder, _, run = where.partition("#")
        path = Path(folder) / "results.json"
        if not path.is_file():
            raise UserError(f"{item}: no results.json in {folder}")
        results = json.loads(path.read_text(encoding="utf-8"))["runs"]
        run = run or "model"
        if run not in results:
            raise UserError(f"{item}: {path} has no run {run!r}; it has {', '.join(results)}")
        runs[label if sep else f"{folder}#{run}"] = results[run]
    print(sts_summary_table(runs) or "no STS results to compare")
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from sentune.core.cache import cache_dir, cache_entries, clear_cache

    if args.cache_command == "clear":
        removed = clear_cache(args.older_than)
        print(f"removed {len(removed)} cache entries from {cache_dir()}")
        return 0
    entries = cache_entries()
    total = sum(size for _, size, _ in entries)
    print(f"{cache_dir()}: {len(entries)} entries, {total / 2**20:.1f} MiB (SENTUNE_CACHE sets the folder)")
    for path, size, age in entries:
        print(f"  {size / 2**20:8.1f} MiB  {age:6.1f} days  {path.name}")
    return 0


def cmd_adapt(args: argparse.Namespace) -> int:
    from sentune.adapt.budget import Budget
    from sentune.adapt.candidates import parse_methods

    methods, budget = parse_methods(args.methods), Budget.parse(args.budget)  # checked before any file is read
    if args.sed_members < 2:
        raise UserError(f"--sed-members {args.sed_members}: an ensemble needs at least 2 members")
    out = Path(args.out)
    data_dir = None
    if args.example_train:
        from sentune.adapt.examples import check_example

        if not args.example or args.train:
            raise UserError("--example-train: give it with --example, instead of --train")
        if "train" not in check_example(args.example):
            raise UserError(f"--example-train: the example {args.example} has no labelled train split apart from its dev and test")
    train = Path(args.train) if args.train else None
    if args.example or not args.dev:  # the data directory is read only for an example or the default dev pairs
        from sentune.data.catalog import resolve_data_dir

        data_dir = resolve_data_dir(args.data)
    corpus, dev, test = (Path(args.corpus) if args.corpus else None), (Path(args.dev) if args.dev else None), (Path(args.test) if args.test else None)
    dev_qrels, test_qrels = (Path(args.dev_qrels) if args.dev_qrels else None), (Path(args.test_qrels) if args.test_qrels else None)
    if args.example:
        from sentune.adapt.examples import write_example

        assert data_dir is not None
        files = write_example(args.example, data_dir, out / "example")
        print(f"example {args.example}: {files.about}", flush=True)
        corpus, dev, test = files.corpus, files.dev, files.test
        dev_qrels, test_qrels = files.dev_qrels, files.test_qrels
        if args.example_train:
            train = files.train
    if corpus is None and not (dev is not None and dev.is_dir()):
        raise UserError("--corpus FILE (or --example NAME) is required")
    from dataclasses import replace

    from sentune.adapt.inputs import AdaptConfig, prepare

    config = AdaptConfig(
        corpus=corpus,
        model=args.model,
        corpus_column=args.corpus_column,
        dev=dev,
        test=test,
        dev_qrels=dev_qrels,
        test_qrels=test_qrels,
        queries_from=Path(args.queries_from) if args.queries_from else None,
        train=train,
        labels=not args.no_labels,
        methods=methods,
        budget=budget,
        sed_members=args.sed_members,
        reference=args.reference,
        low_memory=args.low_memory,
        seed=args.seed,
        example=args.example,
        show_progress=not args.quiet,
        backend=args.backend,
    )
    inputs = prepare(config, out, data_dir)  # every file read and checked before torch loads
    config = replace(config, device=args.device)
    from sentune.adapt.run import adapt, prune

    results = adapt(config, out, data_dir=data_dir, command=_command_line(), inputs=inputs)
    from sentune.adapt.report import candidate_table

    print("\n" + candidate_table(results))
    print(f"\nchosen: {results['choice']['name']}: {results['choice']['reason']}")
    if args.prune:
        removed = prune(out, results["choice"]["name"])
        print(f"--prune: removed {len(removed)} model folders of candidates not chosen", file=sys.stderr)
    print(f"model: {out / 'model'} (SentenceTransformer({str(out / 'model')!r})); results: {out / 'results.md'}, {out / 'report.html'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    missing = [p for p in args.runs if not Path(p).is_dir()]
    if missing:  # before the plotting code loads and before --out is made
        raise UserError(f"{', '.join(missing)}: no such run folder")
    from sentune.analysis.report import build_report

    md, html = build_report([Path(p) for p in args.runs], Path(args.out))
    print(f"wrote {md} and {html}")
    return 0


def _model_args(p: argparse.ArgumentParser, pooling_help: str = "pooling name(s), comma-separated") -> None:
    p.add_argument("--model", default="default", help="'default' (all-MiniLM-L6-v2), a hub id or a local path")
    p.add_argument("--pooling", default="model", help=pooling_help + " (model, cls, mean, max, first-last, last2, lastN, layerK-mean, wk)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model (off by default)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_eval(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a model on STS / transfer / multilingual tasks")
    _model_args(p)
    p.add_argument("--tasks", default="sts", help="task or group names, comma-separated: sts, dev, transfer, relatedness, multilingual, STS12, ...")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", help="folder for results.json and results.md (refused when it holds results, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace the results a finished eval left in --out")
    p.add_argument(
        "--whiten",
        action="append",
        default=[],
        metavar="SET[:k]",
        help="also evaluate with whitening fitted on SET (target, per-task, nli, wiki, stsb, file:PATH), keeping k dims; repeatable",
    )
    p.add_argument(
        "--flow",
        action="append",
        default=[],
        metavar="SET[:seed]",
        help="also evaluate with a BERT-flow (Glow) fitted on SET (target, per-task, nli, wiki, stsb, file:PATH, tasks:SELECTION); repeatable",
    )
    p.add_argument(
        "--flow-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Flow setting for every --flow, e.g. learning_rate=1e-3 (seeds 003/004); repeatable",
    )
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
    _backend_arg(p)
    p.set_defaults(func=cmd_eval)


def _backend_arg(p, choices: tuple[str, ...] = ("torch", "onnx", "onnx-int8")) -> None:
    p.add_argument(
        "--backend",
        default="torch",
        choices=choices,
        help="torch (default); onnx: the transformer runs in ONNX Runtime on the CPU (the folder's onnx/ from `sentune export`, else exported "
        "once into the cache); onnx-int8: its int8 graph",
    )


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a recipe (YAML) with dotted overrides, e.g. training.seed=2")
    p.add_argument("recipe", help="a recipe file or a bundled recipe name (sentune/recipes/)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides, e.g. params.temperature=0.1")
    p.add_argument("--out", help="run folder (default runs/RECIPE_NAME)")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its last complete checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a finished run in --out (otherwise refused)")
    p.add_argument("--quiet", action="store_true", help="no progress bars (the dev evaluations are still printed)")
    p.set_defaults(func=cmd_train)


def _add_paraphrase(sub) -> None:
    p = sub.add_parser("paraphrase", help="back-translate a sentence file into sentence<TAB>paraphrase pairs")
    p.add_argument("input", help="one sentence per line")
    p.add_argument("output", help="output .tsv")
    p.add_argument("--forward", default="Helsinki-NLP/opus-mt-en-de", help="translation model to the pivot language")
    p.add_argument("--backward", default="Helsinki-NLP/opus-mt-de-en", help="translation model back to English")
    p.add_argument("--beams", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_paraphrase)


def _add_pipeline(sub) -> None:
    p = sub.add_parser("pipeline", help="run composed stages, e.g. ct-sed-flow or nli-ct-sed-flow (resumable)")
    p.add_argument("name", help="stages joined by '-': nli, ct, sts, sg-opt, mirror, simcse, sed, flow, whiten")
    p.add_argument("--model", default="default")
    p.add_argument("--members", type=int, default=5, help="SED ensemble size (the paper: 10)")
    p.add_argument("--learners", type=int, default=1, help="SED learners distilled from the one ensemble, seeds 1..K (Table 3: >= 3)")
    p.add_argument("--fit-on", default="wiki", help="sentence set for flow / whitening stages (wiki, nli, stsb, file:PATH, tasks:SELECTION)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="STAGE:key=value",
        help="recipe override for one stage; sed: the members on top of their stage's overrides, sed-learner: the learners; repeatable",
    )
    p.add_argument("--data")
    p.add_argument("--out")
    p.set_defaults(func=cmd_pipeline)


def _add_ensemble(sub) -> None:
    p = sub.add_parser("ensemble", help="make a 'full ensemble' model folder: the average of several models' embeddings")
    p.add_argument("--member", action="append", required=True, help="a member model folder; repeat")
    p.add_argument("--pooling", default="mean", help="the members' pooling (SED: mean)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_ensemble)


def _add_encode(sub) -> None:
    p = sub.add_parser("encode", help="encode a text file (one sentence per line) to .npy or .jsonl")
    _model_args(p, "one pooling name")
    p.add_argument("input", help="text file, one sentence per line")
    p.add_argument("output", help="output .npy or .jsonl")
    _backend_arg(p)
    p.set_defaults(func=cmd_encode)


def _add_whiten(sub) -> None:
    p = sub.add_parser("whiten", help="fit whitening and save the model with it (loads with SentenceTransformer(path))")
    _model_args(p, "one pooling name")
    p.add_argument("--fit-on", default="nli", help="sentence set: nli, wiki, stsb, qqp, file:PATH or tasks:SELECTION")
    p.add_argument("--k", type=int, default=None, help="components to keep (default: all with non-zero variance)")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", required=True, help="output model folder")
    p.set_defaults(func=cmd_postprocess)


def _add_flow(sub) -> None:
    p = sub.add_parser("flow", help="fit BERT-flow (Glow) on a sentence set and save the model with it (loads with SentenceTransformer(path))")
    _model_args(p, "one pooling name")
    p.add_argument("--fit-on", default="nli", help="sentence set: nli, wiki, stsb, qqp, file:PATH or tasks:SELECTION")
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    p.add_argument("--out", required=True, help="output model folder")
    p.set_defaults(func=cmd_postprocess)


def _add_layerwise(sub) -> None:
    p = sub.add_parser("layerwise", help="Spearman of every layer under cls/mean/max pooling (seed 001, Figure 1)")
    p.add_argument("--model", default="default")
    p.add_argument("--task", default="STS-B")
    p.add_argument("--data")
    p.add_argument("--out", required=True)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_layerwise)


def _add_tsne(sub) -> None:
    p = sub.add_parser("tsne", help="t-SNE of positive and negative STS pairs, one panel per model (seed 001, Figure 5)")
    p.add_argument("--model", action="append", required=True, help="repeat for before/after panels")
    p.add_argument("--label", action="append", help="panel title per --model (default: the model argument)")
    p.add_argument("--task", default="STS-B-dev")
    p.add_argument("--pairs", type=int, default=20, help="positive and negative pairs each")
    p.add_argument("--data")
    p.add_argument("--out", required=True)
    p.add_argument("--trust-remote-code", action="store_true")
    p.set_defaults(func=cmd_tsne)


def _add_pairs(sub) -> None:
    p = sub.add_parser("pairs", help="sentence pairs of an STS task with each model's cosine and the gold score (seed 002, Tables 3-6)")
    p.add_argument("--model", action="append", required=True, help="repeat: one cosine column per model")
    p.add_argument("--label", action="append", help="column name per --model (default: the model argument)")
    p.add_argument("--task", default="STS13")
    p.add_argument("--pairs", type=int, default=8, help="number of pairs, stratified by gold score")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data")
    p.add_argument("--out", required=True)
    p.add_argument("--trust-remote-code", action="store_true")
    p.set_defaults(func=cmd_pairs)


def _add_data(sub) -> None:
    data = sub.add_parser("data", help="check or download a data directory").add_subparsers(dest="data_command", required=True)
    p = data.add_parser("check", help="validate a data directory: files, counts, sha256 against SHA256SUMS")
    p.add_argument("dir")
    p.add_argument("--no-checksums", action="store_true")
    p.set_defaults(func=cmd_data_check)
    p = data.add_parser("download", help="fetch the canonical SentEval/STS sources into DIR")
    p.add_argument("dir", nargs="?", help="the folder (default: $XDG_DATA_HOME/sentune/data, ~/.local/share/sentune/data, read when no --data is given)")
    p.add_argument("--mirror", action="append", default=None, metavar="URL", help="base URL replacing the canonical hosts (testing, mirrors)")
    p.add_argument("--only", help="comma-separated source names (senteval, wiki, snli, xnli, qqp, sts2017, sts2017-gold)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_data_download)


def _add_cache(sub) -> None:
    cache = sub.add_parser("cache", help="list or clear the caches (SG's views, SED's targets, retrieval corpora's embeddings)").add_subparsers(
        dest="cache_command", required=True
    )
    p = cache.add_parser("list", help="every entry with its size and age")
    p.set_defaults(func=cmd_cache)
    p = cache.add_parser("clear", help="remove entries")
    p.add_argument("--older-than", type=float, default=0.0, metavar="DAYS", help="only entries not written for DAYS days")
    p.set_defaults(func=cmd_cache)


def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="one STS table (Spearman x100, 'all') of runs side by side")
    p.add_argument("entries", nargs="+", metavar="[LABEL=]DIR[#RUN]", help="a results folder and the run in it (default: model)")
    p.set_defaults(func=cmd_compare)


def _add_adapt(sub) -> None:
    from sentune.adapt.names import METHODS  # no heavy imports: the list, so the help never drifts from it

    p = sub.add_parser("adapt", help="adapt a model to your unlabelled text: try every method, select on your dev pairs, keep the model unless one is better")
    p.add_argument("--model", default="default", help="'default' (all-MiniLM-L6-v2), a hub id or a local path")
    p.add_argument(
        "--corpus",
        help="your unlabelled sentences: .txt (one a line), .jsonl (a text field) or .csv (a column); de-duplicated. Retrieval: the documents, "
        "a BEIR corpus.jsonl (_id, title, text)",
    )
    p.add_argument("--corpus-column", help="the .jsonl field or .csv column holding the text (default: text or sentence)")
    p.add_argument(
        "--dev",
        help="scored pairs s1<TAB>s2<TAB>label (at least 100): half select, half confirm the choice (0/1 labels: average precision; scores: Spearman); "
        "default STS-B dev. Retrieval (nDCG@10): a BEIR folder (queries.jsonl, qrels/dev.tsv; its corpus.jsonl when --corpus is not given), or a "
        "queries file with --dev-qrels",
    )
    p.add_argument("--dev-qrels", help="retrieval: the judgements of the --dev queries file (query-id<TAB>corpus-id<TAB>score)")
    p.add_argument("--test", help="scored pairs (or retrieval queries, as --dev), scored for every candidate and reported, never used for the choice")
    p.add_argument("--test-qrels", help="retrieval: the judgements of the --test queries file")
    p.add_argument(
        "--queries-from",
        help="retrieval: generated queries, query<TAB>passage lines (e.g. from a doc2query model), that the GenQ candidate trains on "
        "(MultipleNegativesRankingLoss); none ship with sentune",
    )
    p.add_argument(
        "--example",
        help="a ready-made domain built from the data directory: sick, qqp, mrpc, stsb (pairs) or scifact, quora (retrieval); replaces --corpus/--dev/--test",
    )
    p.add_argument(
        "--train",
        help="labelled pairs (s1<TAB>s2<TAB>label, as --dev) the supervised candidates train on, apart from the dev set: never used to select "
        "or confirm; refused when it shares a pair with --dev or --test. Without it they train on the selection half, scored out of fold",
    )
    p.add_argument(
        "--example-train",
        action="store_true",
        help="with --example: train the supervised candidates on the example's labelled train split (sick, mrpc, stsb: the rest of "
        "their source split, no pair shared with dev or test), as --train",
    )
    p.add_argument("--no-labels", action="store_true", help="the label-free candidates only: the dev labels only select and confirm")
    p.add_argument("--methods", help=f"comma-separated subset of: {', '.join(METHODS)} (default: all)")
    p.add_argument("--budget", help="per candidate: STEPS, MINUTESm, both (500,10m) or epoch (default: one pass over the corpus)")
    p.add_argument("--sed-members", type=int, default=3, help="seeds of the best trained candidate that SED distils (default 3)")
    p.add_argument(
        "--reference",
        action="store_true",
        help="also train sentence-transformers' SimCSE recipe with its own defaults, reported beside the candidates, never chosen",
    )
    p.add_argument(
        "--low-memory",
        action="store_true",
        help="train every candidate (and --reference) with gradient checkpointing, and hand large blocks of memory back to the "
        "system as soon as they are freed: the same results in less memory, slower (measured by benchmarks/speed/training_memory.py)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the dev pairs' split into selection and confirmation halves, the bootstrap and the permutations"
    )
    p.add_argument("--prune", action="store_true", help="remove the model folders of candidates not chosen once the choice is saved")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA), for --example and the default dev pairs")
    p.add_argument("--out", required=True, help="the output folder; run the same command again to resume")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--backend",
        default="torch",
        choices=["torch", "onnx"],
        help="how candidates are scored on the dev and test sets: torch (default) or onnx (each model's ONNX graph, same vectors within 1e-5); "
        "training and its dev evaluations stay PyTorch",
    )
    p.set_defaults(func=cmd_adapt)


def _add_export(sub) -> None:
    p = sub.add_parser("export", help="write a model folder with ONNX graphs (fp32, --quantize int8) for fast CPU serving, checked against PyTorch")
    p.add_argument("model", help="'default' (all-MiniLM-L6-v2), a hub id or a local path")
    p.add_argument("--to", required=True, help="the new model folder (or the model's own folder, to add onnx/ to it)")
    p.add_argument("--quantize", choices=["int8"], help="also write onnx/model_qint8_<arch>.onnx (ONNX Runtime dynamic quantization)")
    p.add_argument(
        "--keep-fp32",
        help="int8: parts left unquantized, comma-separated: ffn-output, first-layer, last-layer (default: none; see benchmarks/results/onnx_int8.md)",
    )
    p.add_argument("--check", help="pairs file (s1<TAB>s2<TAB>label) or a catalog task the graphs are checked on (default: STS-B-dev when data is found)")
    p.add_argument("--max-loss", type=float, default=None, help="points of the check's metric an int8 graph may lose (default 0.5)")
    p.add_argument("--force", action="store_true", help="write an int8 graph that loses more than --max-loss, or one that cannot be checked")
    p.add_argument("--data", help="data directory (default: $SENTUNE_DATA), for --check TASK")
    p.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model (off by default)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    if args.max_loss is not None and not args.max_loss >= 0:
        raise UserError(f"--max-loss {args.max_loss}: a number of points, 0 or more")
    if args.keep_fp32 and not args.quantize:
        raise UserError("--keep-fp32 applies to --quantize int8")
    from sentune.export.check import DEFAULT_MAX_LOSS
    from sentune.export.command import ExportOptions, export_model

    options = ExportOptions(
        model=args.model,
        to=Path(args.to),
        quantize=args.quantize,
        check=args.check,
        data=args.data,
        max_loss=DEFAULT_MAX_LOSS if args.max_loss is None else args.max_loss,
        force=args.force,
        keep_fp32=args.keep_fp32,
        trust_remote_code=args.trust_remote_code,
    )
    report = export_model(options)
    if report is not None:
        print(report.markdown())
    print(f"wrote {args.to} (onnx/ inside; SentenceTransformer({args.to!r}) or sentune ... --backend onnx --model {args.to})")
    return 0


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="turn run folders into one Markdown and one HTML page with tables and plots")
    p.add_argument("runs", nargs="+", help="run folders (with results.json and/or layerwise.json)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_report)


def check_writable(path: Path, where: str) -> None:
    """Fail now, not after the model has loaded and encoded everything, when `path` cannot be written. Nothing
    is created: the nearest existing folder on the way must be a folder that takes a file."""
    import tempfile

    existing = next(p for p in (path, *path.parents) if p.exists() or p == p.parent)
    if existing != path and not existing.is_dir():
        raise UserError(f"{where} {path}: {existing} is a file, not a folder")
    folder = existing if existing.is_dir() else existing.parent
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".sentune-write-check-"):
            pass
    except OSError as exc:
        raise UserError(f"{where} {path}: cannot write in {folder} ({exc.strerror or exc})") from None


def _preflight(args: argparse.Namespace) -> None:
    """Checks that need no model and no data, run before any: the model names and the output paths."""
    from sentune.core.models import check_model_name

    models = args.model if isinstance(getattr(args, "model", None), list) else [getattr(args, "model", None)]
    for name in filter(None, models):
        check_model_name(name)
    for name in getattr(args, "member", None) or []:  # sentune ensemble
        check_model_name(name, "--member")
    if getattr(args, "output", None) and args.command == "encode":
        if Path(args.output).suffix not in (".npy", ".jsonl"):
            raise UserError(f"output {args.output}: use a .npy or .jsonl file name")
        check_writable(Path(args.output), "output")
    elif getattr(args, "out", None):
        check_writable(Path(args.out), "--out")
    if getattr(args, "run", None) and args.command == "search":
        check_writable(Path(args.run), "--run")


class OneLineParser(argparse.ArgumentParser):
    """argparse's own errors (a missing or unknown option) in one line like every other sentune error, exit code 2;
    --help still shows the usage. Subcommand parsers are made of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="sentune", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show the traceback of user errors too")
    parser.add_argument("-v", "--verbose", action="store_true", help="also show the libraries' logs and warnings")
    sub = parser.add_subparsers(dest="command", required=True)
    from sentune.search.command import add_index, add_search

    for add in (
        _add_eval,
        _add_train,
        _add_paraphrase,
        _add_pipeline,
        _add_ensemble,
        _add_encode,
        _add_whiten,
        _add_flow,
        _add_layerwise,
        _add_tsne,
        _add_pairs,
        _add_data,
        _add_report,
        _add_compare,
        _add_cache,
        _add_adapt,
        _add_export,
        add_index,
        add_search,
    ):
        add(sub)
    for name in (
        "eval",
        "train",
        "encode",
        "whiten",
        "flow",
        "layerwise",
        "tsne",
        "pairs",
        "pipeline",
        "ensemble",
        "adapt",
        "index",
        "search",
    ):  # the commands that run models
        sub.choices[name].add_argument(
            "--device",
            help="auto (CUDA when present, the default; $SENTUNE_DEVICE when set), cpu, cuda or cuda:N; a recipe's training.device other than auto wins",
        )
    for name in ("eval", "train", "pipeline", "layerwise", "tsne", "pairs", "adapt"):  # the commands that score catalogued tasks
        sub.choices[name].add_argument(
            "--allow-modified-data", action="store_true", help="score tasks whose files differ from the catalog (counts, SHA256SUMS); recorded in results.json"
        )
    return parser


LIBRARIES = ("sentence_transformers", "transformers", "datasets", "accelerate", "bm25s", "httpx", "httpx2", "huggingface_hub", "urllib3", "py.warnings")


def configure_output(verbose: bool) -> None:
    """sentune's own messages (INFO and up) on stderr; the libraries' logs and Python warnings only with -v:
    stdout carries results, tables and one line per evaluation."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.captureWarnings(True)  # library warnings become log records of 'py.warnings', shown with -v
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    if not verbose:  # read when transformers / datasets are first imported
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("DATASETS_VERBOSITY", "error")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    _ARGV[:] = argv
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    configure_output(args.verbose)
    if args.command == "train":  # overrides may also follow the options: train R --out D key=value
        args.overrides += [e for e in extra if "=" in e and not e.startswith("-")]
        extra = [e for e in extra if e not in args.overrides]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if hasattr(args, "device"):  # the cheapest check first: an option's spelling, before any model name
            from sentune.core.device import DEVICE_ENV, resolve_device

            # chosen once (SENTUNE_DEVICE is --device's default) and passed down; exported for the processes it starts
            args.device = resolve_device(args.device or os.environ.get(DEVICE_ENV), "--device")
            os.environ[DEVICE_ENV] = args.device
        _preflight(args)
    except UserError as exc:
        print(f"sentune: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "allow_modified_data", False):
        from sentune.data.catalog import ALLOW_MODIFIED_ENV

        os.environ[ALLOW_MODIFIED_ENV] = "1"  # also for the processes a command starts
    try:
        return args.func(args)
    except UserError as exc:  # a mistake the user can fix: one line (the traceback with --debug)
        if args.debug:
            raise
        print(f"sentune: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder the command could not read or write (permissions, disk full)
        if args.debug:
            raise
        print(f"sentune: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
