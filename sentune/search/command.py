"""`sentune index` and `sentune search`: build a search index over a BEIR corpus.jsonl, and rank its documents for a
query or a queries file (sentune.search.index). Every input is read and checked before a model loads (--out, --run, the
index's files); a mistake is one line naming the file and line (or the option), exit 2, nothing written."""

from __future__ import annotations

import argparse
import os
import sys
import unicodedata
from pathlib import Path

from sentune.errors import UserError


def parse_fusion(text: str | None):
    """--fusion none | rrf | convex:ALPHA (ALPHA in [0, 1], the weight of the dense scores)."""
    from sentune.search.fusion import Fusion

    if text in (None, "none"):
        return None
    if text == "rrf":
        return Fusion("rrf")
    kind, _, value = (text or "").partition(":")
    try:
        alpha = float(value)
    except ValueError:
        alpha = -1.0
    if kind != "convex" or not 0.0 <= alpha <= 1.0:
        raise UserError(f"--fusion {text}: use none, rrf or convex:ALPHA with ALPHA from 0 to 1 (the weight of the dense scores)")
    return Fusion("convex", alpha)


def parse_lexical(args: argparse.Namespace):
    """BM25's settings from --no-stem, --bm25-k1, --bm25-b and --bm25-title-weight (sentune.search.lexical)."""
    from dataclasses import replace

    from sentune.search.lexical import LexicalSettings

    settings = LexicalSettings(stemmer=None) if args.no_stem else LexicalSettings()
    if args.bm25_k1 is not None:
        if not args.bm25_k1 >= 0:
            raise UserError(f"--bm25-k1 {args.bm25_k1}: 0 or more")
        settings = replace(settings, k1=args.bm25_k1)
    if args.bm25_b is not None:
        if not 0 <= args.bm25_b <= 1:
            raise UserError(f"--bm25-b {args.bm25_b}: from 0 to 1")
        settings = replace(settings, b=args.bm25_b)
    if args.bm25_title_weight is not None:
        if args.bm25_title_weight < 1:
            raise UserError(f"--bm25-title-weight {args.bm25_title_weight}: 1 or more")
        settings = replace(settings, title_weight=args.bm25_title_weight)
    return settings


def input_file(path: str, option: str) -> Path:
    """A file the user named with `option`: one line naming the option when it is missing or a folder."""
    found = Path(path)
    if not found.is_file():
        raise UserError(f"{option} {found}: {'a folder, not a file' if found.is_dir() else 'file not found'}")
    return found


def check_run_file(given: str, force: bool) -> None:
    """--run names a file this search may write: not a folder (nor a name ending in a slash, which names one), and not
    one that exists unless --force."""
    path = Path(given)
    if path.is_dir() or given.endswith(("/", os.sep)):
        raise UserError(f"--run {path}: a folder; give a file name (e.g. {path / 'search.run'})")
    if path.exists() and not force:
        raise UserError(f"--run {path}: the file exists; add --force to overwrite it")


def printable(text: str) -> str:
    """`text` safe to print on a terminal: control and format characters (an escape sequence that would recolour, retitle
    or clear the terminal, a bidirectional override) written as Python escapes instead."""
    if text.isprintable():
        return text
    return "".join(c if unicodedata.category(c) not in ("Cc", "Cf") else ascii(c)[1:-1] for c in text)


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


def check_document_ids(documents) -> None:
    """An id with whitespace cannot be named by the TREC run lines `sentune search --queries` writes: refused here,
    naming its corpus line, rather than indexed and then refused by every search of a queries file."""
    from sentune.search.index import NOT_TREC_SAFE, trec_safe

    for document in documents:
        if not trec_safe(document.id):
            raise UserError(f"{document.source}: document id {document.id!r} {NOT_TREC_SAFE}; give it an id without spaces")


def cmd_index(args: argparse.Namespace) -> int:
    from sentune.data.beir import read_corpus_jsonl
    from sentune.search.ann import build_ann, check_fits, coarse_codes, parse_ann
    from sentune.search.index import BuildPlan, build_index, check_out

    fusion = parse_fusion(args.fusion)
    lexical = parse_lexical(args)
    if args.passage_stride is not None and (args.passages != "maxp" or args.passage_stride < 1):
        raise UserError(f"--passage-stride {args.passage_stride}: a number of tokens from 1, with --passages maxp")
    if args.ann is not None and args.passages == "maxp":
        raise UserError("--ann: an approximate index holds one vector a document; --passages maxp searches every passage exactly (leave --ann out)")
    ann = parse_ann(args.ann) if args.ann is not None else None
    out = Path(args.out)
    if out.exists() and not out.is_dir():  # the cheapest check first
        raise UserError(f"--out {out}: a file, not a folder; choose a new or empty folder")
    documents = read_corpus_jsonl(input_file(args.corpus, "--corpus"))  # a bad line or an empty file: file:line, before the model loads
    check_document_ids(documents)
    check_out(out, documents)  # another index, other files or a damaged index in --out: before the model loads
    asked = ann
    if ann is not None:  # what the collection's size allows, before the model loads (the dimension is checked after)
        ann = check_fits(ann, len(documents), None)
    from sentune.core.embedding_cache import model_digest
    from sentune.core.models import load_model

    model = load_model(args.model, trust_remote_code=args.trust_remote_code, device=args.device)
    digest = model_digest(model)
    if ann is not None:  # settings that cannot fit this collection: one line before any document is encoded
        ann = check_fits(ann, len(documents), model.get_sentence_embedding_dimension() or 0)
        from sentune.core.distributed import rank

        if (coarse := coarse_codes(asked or ann, ann, len(documents))) and rank() == 0:
            print(coarse, file=sys.stderr)
    plan = BuildPlan("hybrid" if fusion else "dense", fusion, lexical, args.passages, args.passage_stride)
    # an index of another model in --out: one line, before anything is written
    build_index(model, args.model, documents, out, plan, show_progress=not args.quiet, model_digest=digest)
    from sentune.core.distributed import rank

    if ann is not None and rank() == 0:
        from sentune.search.index import read_settings

        built = build_ann(out, ann, read_settings(out) or {}, show_progress=not args.quiet)
        print(f"approximate index: {out / 'ann'} ({ann.label}, built in {built['build_seconds']:.1f} s)")
    if rank() == 0:  # under torchrun, one process speaks
        from dataclasses import replace

        from sentune.search.lexical import LexicalSettings

        print(
            f"index: {out} ({len(documents)} documents, {plan.system}{', ' + fusion.label if fusion else ''}{', BM25 unstemmed' if args.no_stem else ''}"
            f"{', ' + lexical.label if lexical != replace(LexicalSettings(), stemmer=lexical.stemmer) else ''}"
            f"{', documents scored by their best passage' if args.passages == 'maxp' else ''}); "
            f"search it with `sentune search {out} --query TEXT`"
        )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from sentune.data.beir import Query, read_queries
    from sentune.data.readers import Source
    from sentune.search.index import SearchIndex, write_trec_run

    if args.top < 1:
        raise UserError(f"--top {args.top}: at least 1")
    if args.run:
        check_run_file(args.run, args.force)
    if args.query is not None and not args.query.strip():
        raise UserError("--query: empty")
    from sentune.data.text_files import without_lone_surrogates

    query_text = without_lone_surrogates(args.query) if args.query is not None else None  # an undecodable byte of the argument
    index = SearchIndex.open(Path(args.index), args.system)
    from sentune.search.ann import choose_ann

    index.ann = choose_ann(index, args.ann, args.exact)
    if args.exclude_same_id and index.ann is not None:  # the candidate search has no such rule: say so rather than ignore it
        raise UserError("--exclude-same-id: the approximate index does not leave a query's own document out; add --exact")
    queries = [Query("query", query_text, Source("--query", 1), {})] if query_text is not None else read_queries(input_file(args.queries, "--queries"))
    if args.run or args.query is None:  # both write TREC run lines
        index.check_run_ids(queries)
    index.device = args.device  # read last: resolving `auto` imports torch, after every input is checked
    hits = index.search(queries, args.top, show_progress=not args.quiet, exclude_same_id=args.exclude_same_id)
    if args.run:
        write_trec_run(Path(args.run), queries, hits)
        print(f"run: {args.run} ({len(queries)} queries × top {args.top}, {index.system})", file=sys.stderr)
        return 0
    if args.query is not None:
        for i, hit in enumerate(hits[0], start=1):
            snippet = hit.text if len(hit.text) <= 100 else hit.text[:97] + "..."
            print(f"{i:>3}  {hit.score:8.4f}  {printable(hit.doc_id)}  {printable(snippet)}")
        if not hits[0]:
            print(f"no document matches ({index.system})", file=sys.stderr)
        return 0
    for query, row in zip(queries, hits, strict=True):
        for i, hit in enumerate(row, start=1):
            print(f"{printable(query.id)} Q0 {printable(hit.doc_id)} {i} {hit.score:.6f} sentune")
    return 0
