"""`sentune adapt`: its options and the command."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sentune.cli.base import Command, command_line
from sentune.errors import UserError


def cmd_adapt(args: argparse.Namespace) -> int:
    started = time.monotonic()  # --time counts the whole command, the imports and the checks included
    from sentune.adapt.budget import Budget
    from sentune.adapt.candidates import parse_methods
    from sentune.adapt.time_plan import parse_time

    methods, budget = parse_methods(args.methods), Budget.parse(args.budget)  # checked before any file is read
    time_limit = parse_time(args.time)
    if args.sed_members < 2:
        raise UserError(f"--sed-members {args.sed_members}: an ensemble needs at least 2 members")
    out = Path(args.out)
    data_dir = None
    if args.example_train and (not args.example or args.train):
        raise UserError("--example-train: give it with --example, instead of --train")
    train = Path(args.train) if args.train else None
    if args.example:
        from sentune.adapt.examples import check_example

        check_example(args.example)  # the name, before the data directory it is built from
    if args.example or not args.dev:  # the data directory is read only for an example or the default dev pairs
        from sentune.data.catalog import resolve_data_dir

        data_dir = resolve_data_dir(args.data)
    if args.example_train:
        from sentune.adapt.examples import has_train

        assert data_dir is not None  # --example-train comes with --example
        if not has_train(args.example, data_dir):
            raise UserError(f"--example-train: the example {args.example} has no labelled train split apart from its dev and test in {data_dir}")
    corpus, dev, test = (Path(args.corpus) if args.corpus else None), (Path(args.dev) if args.dev else None), (Path(args.test) if args.test else None)
    dev_qrels, test_qrels = (Path(args.dev_qrels) if args.dev_qrels else None), (Path(args.test_qrels) if args.test_qrels else None)
    if args.example:
        from sentune.adapt.examples import write_example

        assert data_dir is not None
        files = write_example(args.example, data_dir, out / "example", allow_modified=args.allow_modified_data)
        print(f"example {args.example}: {files.about}", flush=True)
        corpus, dev, test = files.corpus, files.dev, files.test
        dev_qrels, test_qrels = files.dev_qrels, files.test_qrels
        if args.example_train:
            train = files.train
            if train is None:  # every query dev left is also a dev or test query
                raise UserError(f"--example-train: the example {args.example} leaves no train query apart from its dev and test in {data_dir}")
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
        time_limit=time_limit,
        sed_members=args.sed_members,
        reference=args.reference,
        low_memory=args.low_memory,
        seed=args.seed,
        example=args.example,
        show_progress=not args.quiet,
        backend=args.backend,
        allow_modified=args.allow_modified_data,
    )
    inputs = prepare(config, out, data_dir)  # every file read and checked before torch loads
    config = replace(config, device=args.device)
    from sentune.adapt.run import adapt, prune

    results = adapt(config, out, data_dir=data_dir, command=command_line(), inputs=inputs, started=started)
    from sentune.adapt.report import candidate_table

    print("\n" + candidate_table(results))
    print(f"\nchosen: {results['choice']['name']}: {results['choice']['reason']}")
    if args.prune:
        removed = prune(out, results["choice"]["name"])
        print(f"--prune: removed {len(removed)} model folders of candidates not chosen", file=sys.stderr)
    print(f"model: {out / 'model'} (SentenceTransformer({str(out / 'model')!r})); results: {out / 'results.md'}, {out / 'report.html'}")
    return 0


def adapt_options(p: argparse.ArgumentParser) -> None:
    from sentune.adapt.names import EVIDENCE_CAP, METHODS, OPT_IN, SEARCH_OPT_IN  # no heavy imports: the list, so the help never drifts from it

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
        help="labelled pairs (s1<TAB>s2<TAB>label, as --dev) the supervised candidates train on, apart from the dev set; refused when it shares "
        f"a pair with --dev or --test. On pairs, a sample of them (at most {EVIDENCE_CAP:,}, at most half) also selects and confirms every candidate that never trained on "
        "them, unless their scale, labels or texts differ from the dev pairs'. Without it they train on the selection half, scored out of fold",
    )
    p.add_argument(
        "--example-train",
        action="store_true",
        help="with --example: train the supervised candidates on the example's labelled train split (sick, mrpc, stsb: the rest of "
        "their source split, no pair shared with dev or test; scifact: the train claims dev leaves, once the data directory holds BEIR's "
        "test judgements, which then test), as --train",
    )
    p.add_argument("--no-labels", action="store_true", help="the label-free candidates only: the dev labels only select and confirm")
    p.add_argument(
        "--methods",
        help=f"comma-separated subset of: {', '.join(METHODS)} (default: all but {', '.join(OPT_IN)}; a search run also leaves out {', '.join(SEARCH_OPT_IN)})",
    )
    p.add_argument("--budget", help="per candidate: STEPS, MINUTESm, both (500,10m) or epoch (default: one pass over the corpus)")
    p.add_argument(
        "--time",
        help="the time the whole run may take (30m, 90s, 1.5h): the candidates with the best expected gain a second that fit are run, "
        "those left out are named with the reason before the first starts, and trainings stop at their share (default: no limit)",
    )
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


ADAPT = Command(
    "adapt",
    "adapt a model to your unlabelled text: try every method, select on your dev pairs, keep the model unless one is better",
    adapt_options,
    cmd_adapt,
    runs_models=True,
    scores_tasks=True,
)

COMMANDS = (ADAPT,)
