"""`sentune adapt`: its options and the command."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sentune.cli.base import Command, command_line


def cmd_adapt(args: argparse.Namespace) -> int:
    started = time.monotonic()  # --time counts the whole command, the imports and the checks included
    from sentune.api.adapt import adapt

    out = Path(args.out)
    result = adapt(
        args.model,
        args.corpus,
        args.dev,
        args.train,
        args.test,
        args.methods,
        args.time,
        out,
        dev_qrels=args.dev_qrels,
        test_qrels=args.test_qrels,
        queries_from=args.queries_from,
        corpus_column=args.corpus_column,
        example=args.example,
        example_train=args.example_train,
        labels=not args.no_labels,
        budget=args.budget,
        sed_members=args.sed_members,
        reference=args.reference,
        low_memory=args.low_memory,
        seed=args.seed,
        data=args.data,
        backend=args.backend,
        device=args.device_option if "device_option" in vars(args) else args.device,  # resolved after the files are checked
        allow_modified=args.allow_modified_data,
        show_progress=not args.quiet,
        command=command_line(),
        started=started,
    )
    from sentune.adaptation.report import candidate_table

    print("\n" + candidate_table(result.results))
    print(f"\nchosen: {result.choice}: {result.reason}")
    if args.prune:
        from sentune.adaptation.run import prune

        removed = prune(out, result.choice)
        print(f"--prune: removed {len(removed)} model folders of candidates not chosen", file=sys.stderr)
    print(f"model: {out / 'model'} (SentenceTransformer({str(out / 'model')!r})); results: {out / 'results.md'}, {out / 'report.html'}")
    return 0


def adapt_options(p: argparse.ArgumentParser) -> None:
    from sentune.adaptation.names import EVIDENCE_CAP, METHODS, OPT_IN, SEARCH_OPT_IN  # no heavy imports: the list, so the help never drifts from it

    p.add_argument("--model", default="default", help="'default' (all-MiniLM-L6-v2), a hub id or a local path (search: A,B fuses B too)")
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
        help="a ready-made domain built from the data directory: sick, qqp, mrpc, stsb (pairs) or scifact, quora, quora-clusters (retrieval); replaces --corpus/--dev/--test",
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
        "those left out are named with the reason and the --time that would include them before the first starts, and trainings stop at their share "
        "(default: 30m)",
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
