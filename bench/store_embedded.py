"""Throughput of the embedded store (not collected by pytest; run it by hand).

    .venv/bin/python bench/store_embedded.py [--rows 100000] [--keys 10000] [--dir DIR]

Measures: mutate of ``rows`` rows with 3 cells each, a keys-only read_range over them, a
full read_range, and read_keys of ``keys`` random keys (half of them absent), plus the
read_keys strategies compared when choosing the implementation (chunked ``IN (...)``
lists of several sizes and a temporary key table).
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

from beamcrawl.stores.base import Mutation
from beamcrawl.stores.embedded import EmbeddedStore

T = TypeVar("T")


def _timed(label: str, units: int, unit: str, fn: Callable[[], T]) -> T:
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<44} {dt * 1000:9.1f} ms  {units / dt:12,.0f} {unit}/s")
    return out


def _temp_table_read(store: EmbeddedStore, keys: list[bytes]) -> dict[bytes, dict[str, bytes]]:
    """The alternative to IN lists: load the keys into a temp table and join."""
    out: dict[bytes, dict[str, bytes]] = {}
    with store._use() as conn:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS want (k BLOB PRIMARY KEY) WITHOUT ROWID")
        conn.execute("BEGIN")
        try:
            conn.execute("DELETE FROM temp.want")
            conn.executemany("INSERT OR IGNORE INTO temp.want VALUES (?)", [(k,) for k in keys])
            for k, c, v in conn.execute("SELECT u.k, u.c, u.v FROM temp.want w JOIN urls u ON u.k = w.k"):
                out.setdefault(k, {})[c] = v
        finally:
            conn.execute("COMMIT")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where to put the file (default: a temp dir)")
    args = parser.parse_args(argv)

    rng = random.Random(7)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = EmbeddedStore.from_uri(os.path.join(tmp, "bench"))
        # URL fingerprints are uniform 64-bit values: random insert positions in the B-tree.
        fps = [struct.pack(">Q", rng.getrandbits(64)) for _ in range(args.rows)]
        muts = [
            Mutation.set(
                fp,
                {
                    "u:url": b"https://example.com/" + fp.hex().encode(),
                    "u:state": b"queued",
                    "u:depth": b"3",
                },
            )
            for fp in fps
        ]
        print(f"store {store.path}; sqlite {__import__('sqlite3').sqlite_version}")
        _timed(
            f"mutate {args.rows:,} rows x 3 cells",
            3 * args.rows,
            "cells",
            lambda: store.mutate("urls", muts),
        )
        n = _timed(
            "read_range keys_only (rows)",
            args.rows,
            "rows",
            lambda: sum(1 for _ in store.read_range("urls", keys_only=True)),
        )
        assert n == args.rows, n
        n = _timed(
            "read_range full (rows)",
            args.rows,
            "rows",
            lambda: sum(1 for _ in store.read_range("urls")),
        )
        assert n == args.rows, n

        present = rng.sample(fps, args.keys // 2)
        absent = [struct.pack(">Q", rng.getrandbits(64)) for _ in range(args.keys - len(present))]
        want = present + absent
        rng.shuffle(want)
        for chunk in (500, 2_000, 10_000, 30_000):
            store.keys_chunk = chunk
            got = _timed(
                f"read_keys {args.keys:,} keys, IN chunk {chunk:,}",
                args.keys,
                "keys",
                lambda: store.read_keys("urls", want),
            )
            assert len(got) == len(present)
        got = _timed(
            f"read_keys {args.keys:,} keys, temp table",
            args.keys,
            "keys",
            lambda: _temp_table_read(store, want),
        )
        assert len(got) == len(present)
        store.keys_chunk = EmbeddedStore.keys_chunk
        _timed(
            f"read_keys keys_only (chunk {store.keys_chunk:,})",
            args.keys,
            "keys",
            lambda: store.read_keys("urls", want, keys_only=True),
        )

        # The common rewrite pattern: delete each row and set it again, in one batch.
        _timed(
            f"mutate delete+set {args.rows:,} rows x 3 cells",
            3 * args.rows,
            "cells",
            lambda: store.mutate(
                "urls",
                (m for fp, mm in zip(fps, muts, strict=True) for m in (Mutation.delete_row(fp), mm)),
            ),
        )
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
