"""``beamcrawl export urls|hosts``: the crawl's URL state or host state as Parquet.

    beamcrawl export urls  --out DIR (--store URI | --crawl CRAWL_OUT) [--chunk-rows N]
    beamcrawl export hosts --out DIR (--store URI | --crawl CRAWL_OUT) [--chunk-rows N]
    beamcrawl export quarantine --out DIR (--store URI | --crawl CRAWL_OUT)

Writes ``DIR/urls/part-*.parquet`` (the seen set, ``URLS_SCHEMA``) or
``DIR/hosts/part-*.parquet`` (host records, ``HOSTS_SCHEMA``) or ``DIR/quarantine/`` (the
URLs and hosts that failed in a round, quarantined or not yet: ``QUARANTINE_SCHEMA``;
``beamcrawl hosts release`` ends a quarantine), replacing an earlier export
of the same table. The store is streamed with range scans in chunks (never loaded whole),
so it works on a running crawl too: a scan sees each row as it is at the moment its chunk
is read. ``--crawl`` names a crawl's output folder and opens the embedded store in it.
This is not a Beam job: one sequential scan is the whole of the work.

EXAMPLES::

    beamcrawl export urls --crawl demo-out --out /tmp/state
    beamcrawl export hosts --store bigtable://my-project/my-instance --out gs-mounted/state
    duckdb -c "select state, count(*) from '/tmp/state/urls/*.parquet' group by 1"
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from beamcrawl.cli.args import OneLineArgumentParser, positive_int

PROG = "beamcrawl export"


def _parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description="Export the crawl's URL state or host state as Parquet.")
    parser.add_argument(
        "what",
        choices=("urls", "hosts", "quarantine"),
        help="urls: the seen set; hosts: host records; quarantine: URLs and hosts that failed in a round.",
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="Folder to write DIR/<what>/part-*.parquet in.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--store", metavar="URI", help="Store URI: sqlite:///PATH, a folder, or bigtable://PROJECT/INSTANCE[/PREFIX]."
    )
    source.add_argument("--crawl", metavar="CRAWL_OUT", help="A crawl's output folder (its store.sqlite is read).")
    parser.add_argument(
        "--chunk-rows", type=positive_int, default=None, help="Rows per range scan and row group (default 20000)."
    )
    return parser


def _store_uri(args: argparse.Namespace) -> str:
    """The store to open; an embedded store must already exist (opening would create it)."""
    if args.crawl:
        path = os.path.join(args.crawl, "store.sqlite")
        if not os.path.isfile(path):
            raise ValueError(f"no crawl store at {path} (is {args.crawl} a crawl's --out folder?)")
        return f"sqlite:///{os.path.abspath(path)}"
    uri: str = args.store
    if "://" in uri and not uri.startswith("sqlite://"):
        return uri
    raw = uri[len("sqlite://") :] if uri.startswith("sqlite://") else uri
    candidates = [raw, os.path.join(raw, "store.sqlite")]
    if not any(os.path.isfile(c) for c in candidates):
        raise ValueError(f"no store at {raw}")
    return uri


def main(argv: Sequence[str]) -> int:
    """Runs ``beamcrawl export``; returns the exit status (0 ok, 1 failed, 2 bad usage)."""
    args = _parser().parse_args(list(argv))
    try:
        uri = _store_uri(args)
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"{PROG}: error: --out {args.out} is a file, not a folder", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        print(f"{PROG}: error: cannot create output folder {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2

    from beamcrawl.state.parquet_export import CHUNK_ROWS, export_table
    from beamcrawl.stores.base import StoreError, open_store

    try:
        with open_store(uri) as store:
            result = export_table(store, args.what, args.out, chunk_rows=args.chunk_rows or CHUNK_ROWS)
    except StoreError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    skipped = f", {result.skipped} unreadable rows skipped" if result.skipped else ""
    print(
        f"{args.what}: {result.rows} rows in {len(result.files)} file(s) under {os.path.join(args.out, args.what)}{skipped}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
