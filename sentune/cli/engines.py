"""`sentune export-index`: a search index into a search engine that serves it past one machine (Qdrant), as the
command record; the work is sentune.search.export_qdrant's."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from sentune.cli.base import Command

API_KEY_ENV = "QDRANT_API_KEY"  # the variable Qdrant's own tools read


def export_index_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", help="an index folder (`sentune index`, or a retrieval `sentune adapt` run's output folder)")
    p.add_argument("--to", required=True, choices=["qdrant"], help="the engine: qdrant (dense vectors, BM25 as sparse vectors with its IDF modifier)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--path", help="a folder for Qdrant's local mode (qdrant-client's embedded storage: QdrantClient(path=DIR) opens it)")
    where.add_argument("--url", help="a Qdrant server, e.g. http://localhost:6333")
    p.add_argument("--api-key", help=f"the server's API key (default: ${API_KEY_ENV})")
    p.add_argument("--collection", help="the collection's name (default: the index folder's name)")
    p.add_argument("--replace", action="store_true", help="replace a collection of that name (otherwise refused)")
    p.add_argument("--batch", type=int, default=256, help="documents a request (default 256)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def cmd_export_index(args: argparse.Namespace) -> int:
    from sentune.search.export_qdrant import export_command

    api_key = args.api_key or (os.environ.get(API_KEY_ENV) if args.url else None)
    print(
        export_command(
            Path(args.index),
            path=args.path,
            url=args.url,
            api_key=api_key,
            collection=args.collection,
            replace=args.replace,
            batch=args.batch,
            quiet=args.quiet,
        )
    )
    return 0


EXPORT_INDEX = Command(
    "export-index",
    "write a search index (dense vectors, BM25, ids and texts, the fusion weight) into Qdrant: a server (--url) or its local mode (--path)",
    export_index_options,
    cmd_export_index,
)

COMMANDS = (EXPORT_INDEX,)
