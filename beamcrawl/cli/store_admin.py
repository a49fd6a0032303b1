"""``beamcrawl store``: create a crawl's state store and look at its size.

    beamcrawl store init --store URI     create the tables and column families (idempotent)
    beamcrawl store info --store URI     rows per table (~: estimated)

``URI`` is ``bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]`` (Cloud Bigtable, or the emulator
when ``BIGTABLE_EMULATOR_HOST`` is set) or an embedded store (``sqlite:///PATH`` or a
folder). A Bigtable store must be initialised once before the first crawl, by someone
allowed to create tables; the crawl itself only reads and writes rows. An embedded store
is created on first use, so ``init`` just creates it early.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence, TextIO

from beamcrawl.cli.args import OneLineArgumentParser
from beamcrawl.core.content import textfp
from beamcrawl.state import simhash_layout
from beamcrawl.stores.base import TABLES, StoreError, open_store


def _parser() -> argparse.ArgumentParser:
    # One-line usage errors, like the other commands (subcommands inherit the class).
    parser = OneLineArgumentParser(
        prog="beamcrawl store", description="Create a crawl's state store and look at its size."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    init = sub.add_parser("init", help="create the store's tables and column families (idempotent)")
    init.add_argument("--store", required=True, metavar="URI", help="bigtable://PROJECT/INSTANCE[/PREFIX] or a path")
    info = sub.add_parser("info", help="print each table's rows (~: estimated)")
    info.add_argument("--store", required=True, metavar="URI", help="bigtable://PROJECT/INSTANCE[/PREFIX] or a path")
    return parser


def init_store(uri: str, out: TextIO) -> None:
    """Creates the store named by ``uri`` (tables and families where missing).

    Raises:
        StoreError: The store cannot be created (the message says why).
    """
    if uri.startswith("bigtable://"):
        from beamcrawl.stores.bigtable import BigtableStore

        store = BigtableStore.from_uri(uri, check=False)
        try:
            created = store.create_tables()
        finally:
            store.close()
        what = ", ".join(created) if created else "nothing (all tables and families exist)"
        print(f"store {store.uri}: created {what}", file=out)
        return
    with open_store(uri) as embedded:
        print(f"store {embedded.uri}: ready", file=out)


def store_info(uri: str, out: TextIO) -> None:
    """Prints each table's rows: counted where the store counts them cheaply (the embedded
    store, in SQLite), else its estimate, marked ``~`` (Bigtable past 20,000 rows: a count
    there streams every key). ``Store.report_rows`` decides, as for a round's report; the
    plain key-space estimate is for sizing joins over uniform keys, and would read a
    simhash table, whose keys begin with their table byte, as many times its size.

    Raises:
        StoreError: The store is missing or unreachable.
    """
    with open_store(uri) as store:
        print(f"store {store.uri}", file=out)
        for table in TABLES:
            rows, exact = store.report_rows(table)
            print(f"  {table:<9} {'' if exact else '~'}{rows} rows", file=out)
        recorded = simhash_layout.recorded_layout(store)
        layout = recorded or simhash_layout.default_layout(store)
        how = "recorded" if recorded else "none recorded yet: the next round records it"
        print(f"  near copies in {len(layout.orders)} simhash tables ({textfp.layout_name(layout)}; {how})", file=out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Runs ``beamcrawl store ARGS``; returns the exit status (0 ok, 1 store error, 2 usage)."""
    out = out or sys.stdout
    parser = _parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse exits on usage errors and --help
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help(file=out)
        return 2
    try:
        if args.command == "init":
            init_store(args.store, out)
        else:
            store_info(args.store, out)
    except StoreError as exc:
        print(f"beamcrawl store: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
