"""BM25 fitted to the domain (sentune.search.lexical_fit) and long documents as passages (sentune.search.passages) on
a retrieval example, split as `sentune adapt --example NAME` splits it: its dev queries into selection and
confirmation halves (sentune.adaptation.decide.split_dev, seed 0), its test queries apart. Every query is ranked against
the whole corpus (adapt ranks the selection queries against a pool; here they read the whole corpus, as the fit and
the hybrid's weight do in adapt).

Measured: nDCG@10 ×100 of BM25 fixed and fitted, of the dense model on the first window and by MaxP, and of the
hybrid of each pair (its convex weight chosen on the selection queries, as adapt's `hybrid`); the test differences
with a paired bootstrap 95 % interval; the seconds and peak resident memory of the fit and of the encoding. The
choices read the selection queries alone: the fit, MaxP or the first window (MaxP when better on them), the weight.
Writes benchmarks/results/bm25_fit_maxp-NAME.json.

Usage: python benchmarks/speed/bm25_fit_maxp.py [--example scifact] [--data DIR] [--stride TOKENS]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
RESAMPLES = 2000  # resamples of the queries, seed 0 (sentune.tasks.bootstrap.resamples)


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def conditions() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def ndcg_of(ranked_rows: list[list[int]], ids: list[str], queries) -> np.ndarray:
    from sentune.tasks.retrieval import HEADLINE, per_query_metrics

    return 100 * per_query_metrics([[ids[i] for i in row] for row in ranked_rows], queries)[HEADLINE]


def bootstrap(a: np.ndarray, b: np.ndarray) -> list[float]:
    """Mean of a − b over the queries and its paired bootstrap 95 % interval (sentune.tasks.bootstrap, as adapt's report)."""
    from sentune.tasks.bootstrap import paired_bootstrap, resamples

    found = paired_bootstrap(np.zeros(len(a)), a, b, "ndcg@10", resamples(len(a), RESAMPLES))
    return [found.candidate - found.baseline, found.difference_low, found.difference_high]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", default="scifact")
    parser.add_argument("--data", default=os.environ.get("SENTUNE_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--stride", type=int, help="tokens between two windows' starts (default: half a window)")
    parser.add_argument(
        "--vectors", help="a folder keeping the encoded vectors: a second run reads them instead of encoding (its seconds then are not measured)"
    )
    args = parser.parse_args()

    import torch

    from sentune.adaptation.decide import split_dev
    from sentune.adaptation.examples import write_example
    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.data.beir import read_beir_folder
    from sentune.search.fusion import ALPHAS, Fusion, hybrid_rank, id_order, top_by_score
    from sentune.search.lexical import LexicalIndex, LexicalSettings
    from sentune.search.lexical_fit import fit_lexical
    from sentune.search.passages import PassageVectors, later_windows, window_tokens

    started = datetime.now(UTC).isoformat(timespec="seconds")
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=REPO).stdout.strip()  # the code that runs
    before = conditions()
    with tempfile.TemporaryDirectory() as scratch:
        files = write_example(args.example, Path(args.data), Path(scratch))
        dev = read_beir_folder(files.dev, "dev")
        test = read_beir_folder(files.test, "test")
    split = split_dev(np.zeros(dev.units))
    parts = {"selection": [dev.queries[i] for i in split.select], "confirmation": [dev.queries[i] for i in split.confirm], "test": test.queries}
    documents = dev.corpus
    ids = [d.id for d in documents]
    ties = id_order(ids)
    position = {doc: i for i, doc in enumerate(ids)}
    seconds: dict[str, float] = {}

    clock = time.perf_counter()
    fit = fit_lexical(documents, parts["selection"])
    seconds["bm25 fit"] = time.perf_counter() - clock
    lexical = {"fixed": LexicalSettings(), "fitted": fit.settings}
    bm25 = {name: LexicalIndex.of_documents(documents, settings) for name, settings in lexical.items()}
    bm25_scores = {name: {part: index.scores([q.text for q in queries]) for part, queries in parts.items()} for name, index in bm25.items()}

    model = load_model("default", device="cpu")
    encoder = Encoder(model, "model", show_progress=False)
    window = window_tokens(model)
    stride = args.stride or window // 2
    keep = Path(args.vectors) if args.vectors else None

    def encoded(name: str, texts: list[str]) -> np.ndarray:
        path = keep / f"{args.example}-{name}.npy" if keep else None
        if path is not None and path.is_file():
            return np.load(path)
        clock = time.perf_counter()
        vectors = encoder.encode(texts)
        seconds[f"encode {name}"] = time.perf_counter() - clock
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
        return vectors

    doc_vectors = encoded("documents (first window)", [d.text for d in documents])
    texts, owners = later_windows(model.tokenizer, [d.text for d in documents], window, stride)
    passage_vectors = encoded(f"later windows (stride {stride})", texts)
    query_vectors = {part: encoder.encode([q.text for q in queries]) for part, queries in parts.items()}
    dense = {"first": doc_vectors, "maxp": PassageVectors(doc_vectors, passage_vectors, owners)}

    scores: dict[str, dict[str, np.ndarray]] = {}

    def own(queries) -> list[int | None]:
        return [position.get(q.id) for q in queries]

    for name in lexical:
        scores[f"bm25 {name}"] = {
            part: ndcg_of(top_by_score(bm25_scores[name][part], ties, 100, exclude=own(queries)), ids, queries) for part, queries in parts.items()
        }
    from sentune.search.passages import dense_scores

    for name, vectors in dense.items():
        scores[f"dense {name}"] = {
            part: ndcg_of(top_by_score(dense_scores(query_vectors[part], vectors), ties, 100, exclude=own(queries)), ids, queries)
            for part, queries in parts.items()
        }
    alphas: dict[str, dict] = {}
    for dense_name, vectors in dense.items():
        for lexical_name in lexical:

            def ranked(part: str, alpha: float, vectors=vectors, lexical_name=lexical_name) -> list[list[int]]:
                lex = bm25_scores[lexical_name][part]
                fusion = Fusion("convex", alpha)
                return hybrid_rank(query_vectors[part], vectors, lambda rows: lex[rows], ids, fusion, depth=100, query_ids=[q.id for q in parts[part]])

            curve = {a: float(ndcg_of(ranked("selection", a), ids, parts["selection"]).mean()) for a in ALPHAS}
            alpha = max(curve, key=lambda a: (round(curve[a], 9), -abs(a - 0.5)))
            key = f"hybrid: dense {dense_name} + bm25 {lexical_name}"
            alphas[key] = {"alpha": alpha, "curve": curve}
            scores[key] = {part: ndcg_of(ranked(part, alpha), ids, queries) for part, queries in parts.items()}

    long_documents = int(np.count_nonzero(encoder.token_lengths([d.text for d in documents]) > model.max_seq_length))
    maxp_chosen = scores["dense maxp"]["selection"].mean() > scores["dense first"]["selection"].mean()
    chosen_hybrid = f"hybrid: dense {'maxp' if maxp_chosen else 'first'} + bm25 fitted"
    comparisons = {
        "bm25 fitted − fixed": bootstrap(scores["bm25 fitted"]["test"], scores["bm25 fixed"]["test"]),
        "dense maxp − first": bootstrap(scores["dense maxp"]["test"], scores["dense first"]["test"]),
        f"{chosen_hybrid} − hybrid: dense first + bm25 fixed": bootstrap(scores[chosen_hybrid]["test"], scores["hybrid: dense first + bm25 fixed"]["test"]),
    }
    result = {
        "example": args.example,
        "command": f"python benchmarks/speed/bm25_fit_maxp.py --example {args.example}" + (f" --stride {args.stride}" if args.stride else ""),
        "started": started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "sentune": commit,
        "torch_threads": torch.get_num_threads(),
        "uptime_before": before,
        "uptime_after": conditions(),
        "queries": {part: len(queries) for part, queries in parts.items()},
        "documents": len(documents),
        "longer_than_the_model_reads": long_documents,
        "window": window,
        "stride": stride,
        "later_windows": len(texts),
        "bm25_fit": fit.record() | {"read_queries": len(fit.read)},
        "maxp_chosen_on_selection": bool(maxp_chosen),
        "ndcg@10": {name: {part: float(values.mean()) for part, values in by_part.items()} for name, by_part in scores.items()},
        "test_differences": comparisons,
        "hybrid_weights": {name: found["alpha"] for name, found in alphas.items()},
        "seconds": seconds,
        "peak_resident_mib": peak_mib(),
    }
    out = REPO / "benchmarks" / "results" / f"bm25_fit_maxp-{args.example}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "bm25_fit"}, indent=2))


if __name__ == "__main__":
    main()
