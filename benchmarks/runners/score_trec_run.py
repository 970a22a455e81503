"""Score TREC run files (what `sentune search --run` writes) against BEIR judgements with sentune's own ranking metrics
(sentune.core.metrics, as `sentune eval --tasks retrieval` scores), so that a search run's numbers can be set beside
the evaluation's: a dense run over the same queries must give the evaluation's numbers.

    python benchmarks/runners/score_trec_run.py --corpus C --queries Q --qrels QRELS --name NAME --out DIR dense.tsv bm25.tsv ...

Every query with a relevant document counts; one the run does not rank scores 0 (trec_eval's -c). `--example NAME` scores
the runs again over that `sentune adapt --example`'s test queries (a subset of the queries searched), so that a run
stands beside the adapt run's test scores. Writes DIR/results.json: for each set of judged queries, each run file's
metrics (mean ×100, keyed by the file's stem) with a 95 % bootstrap interval of its nDCG@10 over the queries.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from sentune.core.results import display_path, write_atomic
from sentune.data.beir import read_retrieval_set
from sentune.errors import UserError
from sentune.search.trec import read_trec_run


def score(run: dict[str, list[str]], queries) -> dict:
    from sentune.tasks.bootstrap import resamples, score_interval
    from sentune.tasks.retrieval import per_query_metrics

    values = per_query_metrics([run.get(q.id, []) for q in queries], queries)
    low, high = score_interval(np.zeros(len(queries)), values["ndcg@10"] * 100, "ndcg@10", resamples(len(queries)))
    means = {name: float(np.mean(v) * 100) for name, v in values.items()}
    return means | {"ndcg@10_low": low, "ndcg@10_high": high, "n_queries": len(queries), "n_ranked": sum(q.id in run for q in queries)}


def example_test_set(name: str, data: str | None):
    """The test queries `sentune adapt --example NAME` scores, written as adapt writes them (into a temporary folder)."""
    import tempfile

    from sentune.adaptation.examples import write_example
    from sentune.data.catalog import resolve_data_dir

    with tempfile.TemporaryDirectory() as folder:
        test = write_example(name, resolve_data_dir(data), Path(folder)).test
        return read_retrieval_set(test / "corpus.jsonl", test / "queries.jsonl", next((test / "qrels").glob("*.tsv")))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="TREC run files")
    p.add_argument("--corpus", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--name", help="the judged queries' name on the page (default: the qrels file's stem)")
    p.add_argument("--example", help="also score over this adapt example's test queries")
    p.add_argument("--data", help="data directory for --example (default: $SENTUNE_DATA)")
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    try:  # a bad file: one line naming it, exit 2, nothing written (as the sentune commands)
        missing = [str(r) for r in args.runs if not r.is_file()]
        if missing:
            raise UserError(f"no such run file: {', '.join(missing)}")
        judged = read_retrieval_set(args.corpus, args.queries, args.qrels)
        sets = {args.name or Path(args.qrels).stem: judged.queries}
        if args.example:
            sets[f"{args.example} example test"] = example_test_set(args.example, args.data).queries
        runs = {run.stem: read_trec_run(run) for run in args.runs}
        scores = {name: {stem: score(ranked, queries) for stem, ranked in runs.items()} for name, queries in sets.items()}
    except UserError as error:
        print(f"score_trec_run: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    command = "python benchmarks/runners/score_trec_run.py " + " ".join(
        shlex.quote(display_path(str(a))) if Path(a).exists() else shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    meta = {"command": command, "date": datetime.date.today().isoformat(), "documents": len(judged.corpus)}
    write_atomic(args.out / "results.json", json.dumps({"meta": meta, "sets": scores}, indent=2))
    for name, by_run in scores.items():
        for stem, s in by_run.items():
            print(f"{name}, {stem}: nDCG@10 {s['ndcg@10']:.2f} over {s['n_queries']} judged queries")


if __name__ == "__main__":
    main()
