"""`sentune export-index`: a search index into a search engine that serves it past one machine (Qdrant), as the
command record; the work is sentune.api.export.export_index's."""

from __future__ import annotations

import argparse
from pathlib import Path

from sentune.cli.base import Command


def export_index_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", help="an index folder (`sentune index`, or a retrieval `sentune adapt` run's output folder)")
    p.add_argument("--to", required=True, choices=["qdrant"], help="the engine: qdrant (dense vectors, BM25 as sparse vectors with its IDF modifier)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--path", help="a folder for Qdrant's local mode (qdrant-client's embedded storage: QdrantClient(path=DIR) opens it)")
    where.add_argument("--url", help="a Qdrant server, e.g. http://localhost:6333")
    p.add_argument("--api-key", help="the server's API key (default: $QDRANT_API_KEY)")
    p.add_argument("--collection", help="the collection's name (default: the index folder's name)")
    p.add_argument("--replace", action="store_true", help="replace a collection of that name (otherwise refused)")
    p.add_argument("--batch", type=int, default=256, help="documents a request (default 256)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_export_index(args: argparse.Namespace) -> int:
    from sentune.api.export import export_index

    report = export_index(
        Path(args.index),
        args.to,
        path=args.path,
        url=args.url,
        api_key=args.api_key,
        collection=args.collection,
        replace=args.replace,
        batch=args.batch,
        show_progress=not args.quiet,
    )
    print(report)
    return 0


EXPORT_INDEX = Command(
    "export-index",
    "write a search index (dense vectors, BM25, ids and texts, the fusion weight) into Qdrant: a server (--url) or its local mode (--path)",
    export_index_options,
    cmd_export_index,
)

COMMANDS = (EXPORT_INDEX,)
