"""Score TREC run files (what `sentune search --run` writes) against BEIR judgements with sentune's own ranking metrics
(sentune.core.metrics, as `sentune eval --tasks retrieval` scores), so that a search run's numbers can be set beside
the evaluation's: a dense run over the same queries must give the evaluation's numbers.

    python benchmarks/runners/score_trec_run.py --corpus C --queries Q --qrels QRELS --out DIR dense.tsv bm25.tsv ...

Every query with a relevant document counts; one the run does not rank scores 0 (trec_eval's -c). Writes DIR/results.json:
each run file's metrics (mean ×100), keyed by the file's stem.
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


def read_run(path: Path) -> dict[str, list[str]]:
    """Each query's documents in rank order (the rank column, not the file's order)."""
    rows: dict[str, list[tuple[int, str]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6 or not parts[3].isdigit():
            raise UserError(f"{path}:{number}: not a TREC run line (qid Q0 docid rank score tag)")
        rows.setdefault(parts[0], []).append((int(parts[3]), parts[2]))
    return {qid: [doc for _, doc in sorted(ranked)] for qid, ranked in rows.items()}


def score(run: dict[str, list[str]], queries) -> dict:
    from sentune.tasks.retrieval import per_query_metrics

    values = per_query_metrics([run.get(q.id, []) for q in queries], queries)
    return {name: float(np.mean(v) * 100) for name, v in values.items()} | {"n_queries": len(queries), "n_ranked": sum(q.id in run for q in queries)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="TREC run files")
    p.add_argument("--corpus", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    try:  # a bad file: one line naming it, exit 2, nothing written (as the sentune commands)
        missing = [str(r) for r in args.runs if not r.is_file()]
        if missing:
            raise UserError(f"no such run file: {', '.join(missing)}")
        judged = read_retrieval_set(args.corpus, args.queries, args.qrels)
        scores = {run.stem: score(read_run(run), judged.queries) for run in args.runs}
    except UserError as error:
        print(f"score_trec_run: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    command = "python benchmarks/runners/score_trec_run.py " + " ".join(
        shlex.quote(display_path(str(a))) if Path(a).exists() else shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    meta = {"command": command, "date": datetime.date.today().isoformat(), "documents": len(judged.corpus)}
    write_atomic(args.out / "results.json", json.dumps({"meta": meta, "runs": scores}, indent=2))
    for name, s in scores.items():
        print(f"{name}: nDCG@10 {s['ndcg@10']:.2f} over {s['n_queries']} judged queries")


if __name__ == "__main__":
    main()
