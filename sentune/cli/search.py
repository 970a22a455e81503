"""`sentune index` and `sentune search`: build a search index over a BEIR corpus.jsonl, and rank its documents for a
query or a queries file. Each parses and checks its options (one line naming the option, the file and line, exit 2,
nothing written, before a model loads), then calls the Python API, sentune.api.index.Index, and prints what it gives."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sentune.cli.base import Command
from sentune.errors import UserError
from sentune.search.options import check_run_file, input_file, parse_fusion, parse_lexical, printable

INDEX_HELP = "build a search index (dense vectors, memory-mapped and resumable, and BM25) over a BEIR corpus.jsonl"
SEARCH_HELP = "rank an index's documents for a query (--query) or a queries file (--queries), or write a TREC run file"


def index_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default", help="'default' (all-MiniLM-L6-v2), a hub id or a local path")
    p.add_argument("--corpus", required=True, help="the documents: a BEIR corpus.jsonl (_id, title, text)")
    p.add_argument("--out", required=True, help="the index folder; run the same command again to resume an interrupted build")
    p.add_argument(
        "--fusion",
        default="none",
        help="how `sentune search` ranks: none (the model's cosine alone), convex:ALPHA (min-max normalised cosine and BM25, ALPHA on the "
        "cosine; `sentune adapt` chooses it on your queries) or rrf (reciprocal rank fusion, k = 60)",
    )
    p.add_argument(
        "--no-stem",
        action="store_true",
        help="BM25 without the English stemmer (BEIR and Anserini stem); on an existing index, its BM25 side is built again with the settings given",
    )
    p.add_argument("--bm25-k1", type=float, help="BM25's k1 (default 1.5, bm25s's; `sentune adapt` fits it on your queries)")
    p.add_argument("--bm25-b", type=float, help="BM25's b, from 0 to 1 (default 0.75)")
    p.add_argument(
        "--bm25-title-weight",
        type=int,
        help="how many times a document's title counts in its BM25 text (default 1: once, as the model reads it; corpus.jsonl's `title`)",
    )
    p.add_argument(
        "--passages",
        choices=("first", "maxp"),
        default="first",
        help="first: a document is its first window of the model's max_seq_length tokens (what the model reads); maxp: also its later windows, "
        "and a document's dense score is its best window's (MaxP), for documents longer than the model reads",
    )
    p.add_argument("--passage-stride", type=int, help="with --passages maxp: tokens between two windows' starts (default half a window)")
    p.add_argument(
        "--ann",
        help="also build an approximate dense index, searched instead of every document: hnsw or ivfpq, optionally with settings "
        "(ivfpq:nlist=1024,pq=48,nbits=8,nprobe=32,refine=50, where nlist, nbits and refine left out are chosen from the collection size; "
        "hnsw:m=32,ef_construction=100,ef_search=128; candidates=K: each system's top K the hybrid fuses)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model (off by default)")


def search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", help="an index folder (`sentune index`, or a retrieval `sentune adapt` run's output folder)")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", help="one query: its ranked documents are printed")
    group.add_argument("--queries", help="queries.jsonl (_id, text) or a .tsv of id<TAB>query")
    p.add_argument("--top", type=int, default=10, help="documents per query (default 10)")
    p.add_argument(
        "--model",
        help="the model to encode the queries with (default: the index's own, a folder inside the index or the one it names); "
        "refused unless its weights are those the index was built with",
    )
    p.add_argument(
        "--run",
        help="write a TREC run file (qid Q0 docid rank score tag) instead of printing; a query or document id with whitespace is refused "
        "(a run line is split at whitespace), not encoded",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing --run file")
    p.add_argument("--system", help="rank with another part of the index: dense, bm25 or hybrid (default: the index's own; hybrid needs a saved fusion)")
    p.add_argument(
        "--exclude-same-id",
        action="store_true",
        help="never return a document whose id is the query's: BEIR's convention for sets whose queries are documents too (Quora), "
        "and how `sentune adapt` scores; off by default",
    )
    approximate = p.add_mutually_exclusive_group()
    approximate.add_argument(
        "--ann",
        nargs="?",
        const="",
        metavar="SETTINGS",
        help="search the index's approximate index (the default once `sentune index --ann` built one), optionally with other search settings: "
        "ef_search=N, nprobe=N, refine=N, candidates=N",
    )
    approximate.add_argument("--exact", action="store_true", help="score every document even when the index has an approximate index")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def cmd_index(args: argparse.Namespace) -> int:
    from sentune.api.index import IndexBuild
    from sentune.data.beir import Corpus
    from sentune.search.ann import parse_ann

    fusion = parse_fusion(args.fusion)
    lexical = parse_lexical(args)
    ann = parse_ann(args.ann) if args.ann is not None else None
    out = Path(args.out)
    corpus = Corpus.from_file(input_file(args.corpus, "--corpus"))  # a bad line or an empty file: file:line, before the model loads
    # the document ids, --out (another index, other files, a damaged index) and what --ann can build over this many
    # documents: checked once, here, before the model loads; the build reads what was found
    build = IndexBuild.check(corpus, out, fusion, lexical, args.passages, args.passage_stride, ann, "--ann")
    documents = build.documents
    from sentune.core.distributed import rank
    from sentune.core.models import load_model

    # loaded here, not by the build: a model that will not load is named as the option it came from
    model = load_model(args.model, trust_remote_code=args.trust_remote_code, device=args.device)
    index = build.run(
        model,
        show_progress=not args.quiet,
        reference=args.model,  # as given: a name, or a folder as the user typed it
        warn=lambda line: print(line, file=sys.stderr),
    )
    if rank() != 0:  # under torchrun, one process speaks
        return 0
    if build.ann is not None:
        built = index.ann_record() or {}
        print(f"approximate index: in {out} ({build.ann.label}, built in {built['build_seconds']:.1f} s)")
    from dataclasses import replace

    from sentune.search.lexical import LexicalSettings

    print(
        f"index: {out} ({len(documents)} documents, {'hybrid' if fusion else 'dense'}{', ' + fusion.label if fusion else ''}{', BM25 unstemmed' if args.no_stem else ''}"
        f"{', ' + lexical.label if lexical != replace(LexicalSettings(), stemmer=lexical.stemmer) else ''}"
        f"{', documents scored by their best passage' if args.passages == 'maxp' else ''}); "
        f"search it with `sentune search {out} --query TEXT`"
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from sentune.api.index import Index
    from sentune.data.beir import Queries, Query
    from sentune.data.readers import Source
    from sentune.data.text_files import without_lone_surrogates

    if args.top < 1:
        raise UserError(f"--top {args.top}: at least 1")
    if args.run:
        check_run_file(args.run, args.force)
    if args.query is not None and not args.query.strip():
        raise UserError("--query: empty")
    query_text = without_lone_surrogates(args.query) if args.query is not None else None  # an undecodable byte of the argument
    index = Index.opened(Path(args.index), system=args.system, model=args.model, model_argument="--model")
    approximate = index.uses_ann(ann=args.ann, exact=args.exact)
    if args.exclude_same_id and approximate:  # the candidate search has no such rule: say so rather than ignore it
        raise UserError("--exclude-same-id: the approximate index does not leave a query's own document out; add --exact")
    if query_text is not None:
        queries = Queries([Query("query", query_text, Source("--query", 1), {})])
    else:
        queries = Queries.from_file(input_file(args.queries, "--queries"))
    if args.run or args.query is None:  # both write TREC run lines
        index.check_run_ids(queries)
    # the device read last: resolving `auto` imports torch, after every input is checked
    options = dict(ann=args.ann, exact=args.exact, exclude_same_id=args.exclude_same_id, show_progress=not args.quiet, device=args.device)
    if args.run:
        index.write_run(queries, args.run, args.top, **options)
        print(f"run: {args.run} ({len(queries.queries)} queries × top {args.top}, {index.system})", file=sys.stderr)
        return 0
    hits = index.search(queries, args.top, **options)
    if args.query is not None:
        for hit in hits[0]:
            snippet = hit.text if len(hit.text) <= 100 else hit.text[:97] + "..."
            print(f"{hit.rank:>3}  {hit.score:8.4f}  {printable(hit.id)}  {printable(snippet)}")
        if not hits[0]:
            print(f"no document matches ({index.system})", file=sys.stderr)
        return 0
    for query, row in zip(queries.queries, hits, strict=True):
        for hit in row:
            print(f"{printable(query.id)} Q0 {printable(hit.id)} {hit.rank} {hit.score:.6f} sentune")
    return 0


COMMANDS = (
    Command("index", INDEX_HELP, index_options, cmd_index, runs_models=True),
    Command("search", SEARCH_HELP, search_options, cmd_search, runs_models=True),
)
