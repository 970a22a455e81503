"""Commands that look after data and caches: data check, data download, cache list, cache clear."""

from __future__ import annotations

import argparse

from sentune.cli.base import Command, csv_list


def cmd_data_check(args: argparse.Namespace) -> int:
    from sentune.api.data import check_data

    report = check_data(args.dir, checksums=not args.no_checksums)
    print(report)
    return 0 if report.ok else 1


def cmd_data_download(args: argparse.Namespace) -> int:
    from sentune.api.data import download_data

    folder = download_data(
        args.dir, only=csv_list(args.only) if args.only else None, mirror=args.mirror[0] if args.mirror else None, show_progress=not args.quiet
    )
    if args.dir:
        print(f"data ready in {folder}; use it with --data {folder} or SENTUNE_DATA={folder}")
    else:
        print(f"data ready in {folder}, which every command reads when neither --data nor SENTUNE_DATA is given")
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from sentune.api.data import cache_entries, cache_folder, clear_cache

    if args.cache_command == "clear":
        removed = clear_cache(args.older_than)
        print(f"removed {len(removed)} cache entries from {cache_folder()}")
        return 0
    entries = cache_entries()
    total = sum(entry.bytes for entry in entries)
    print(f"{cache_folder()}: {len(entries)} entries, {total / 2**20:.1f} MiB (SENTUNE_CACHE sets the folder)")
    for entry in entries:
        print(f"  {entry.bytes / 2**20:8.1f} MiB  {entry.age_days:6.1f} days  {entry.path.name}")
    return 0


def data_check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir")
    p.add_argument("--no-checksums", action="store_true")


def data_download_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", nargs="?", help="the folder (default: $XDG_DATA_HOME/sentune/data, ~/.local/share/sentune/data, read when no --data is given)")
    p.add_argument("--mirror", action="append", default=None, metavar="URL", help="base URL replacing the canonical hosts (testing, mirrors)")
    p.add_argument("--only", help="comma-separated source names (senteval, wiki, snli, xnli, qqp, sts2017, sts2017-gold)")
    p.add_argument("--quiet", action="store_true")


def cache_clear_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--older-than", type=float, default=0.0, metavar="DAYS", help="only entries not written for DAYS days")


DATA = Command(
    "data",
    "check or download a data directory",
    subcommands=(
        Command("check", "validate a data directory: files, counts, sha256 against SHA256SUMS", data_check_options, cmd_data_check),
        Command("download", "fetch the canonical SentEval/STS sources into DIR", data_download_options, cmd_data_download),
    ),
)
CACHE = Command(
    "cache",
    "list or clear the caches (SG's views, SED's targets, retrieval corpora's embeddings)",
    subcommands=(Command("list", "every entry with its size and age", run=cmd_cache), Command("clear", "remove entries", cache_clear_options, cmd_cache)),
)

COMMANDS = (DATA, CACHE)
