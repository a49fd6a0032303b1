"""What the state rows of a round cost: per new URL and per new original, on both stores.

For simweb pages built straight from its model (no server), the URLs they discover and the
pages taken as new originals are written as a round writes them, and the cost is printed per
row and per URL (or original), CPU µs of this process (the emulator's own CPU is not
counted; its wall time is printed beside it):

- **new URLs**: ``state/frontier.py:queue_new_urls``, a frontier row and a seen-set row per
  URL, into an empty store, then again into the same store (a second batch of as many URLs:
  the B-tree is no longer empty); the same rows as URL seen's merge writes them, from a
  bucket's columns (``queue_new_block``) against its rows made candidates first; the cells'
  encoding alone (``FrontierEntry.to_cells`` and ``UrlState.discovered_cells``, and the
  columns' cells) and their decoding (``from_cells`` of the rows read back);
- **fetch outcomes**: ``transforms/record.py:url_state_cells`` for each page once fetched and
  scheduled, its seen-set row written as ``RecordUrlState`` writes a batch, into a store that
  already holds the pages' discovery rows; the cells' encoding alone, and
  ``UrlState.from_cells`` of the rows read back (a fetched URL's whole row); and the next
  visit's frontier row each schedules (its cell's encoding and decoding, and its size);
- **new originals**: ``content_seen.settle`` for each page taken as a new original, and its
  rows (one content row, 20 simhash-table rows) written as ``_SettleFn`` writes them; the
  cells' encoding alone, and the decoding of the rows read back (``ContentRecord.from_cells``
  and ``parse_simhash_cells``); and the simhash-table rows alone, built and written as
  cells (``Store.write_cells``) against a Mutation a row (``Store.mutate``).

    .venv/bin/python bench/state_rows.py [--pages 2000] [--hosts 300] [--stores embedded,emulator] [--repeat 3]

Each figure is the best of ``--repeat`` runs, each on a fresh store.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from beamcrawl.core.runtime import gctune
from beamcrawl.schemas import cell_columns
from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.records import Candidate, FrontierEntry, UrlState, fp_key
from beamcrawl.state.frontier import block_priorities, queue_new_block, queue_new_urls
from beamcrawl.stores.base import Store, open_store
from beamcrawl.stores.interface import Mutation
from beamcrawl.state import content_rows
from beamcrawl.transforms import content_seen as cs
from beamcrawl.transforms.freshness import SchedulePolicy, next_entry, schedule_page
from beamcrawl.transforms.record import url_state_cells
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.url_seen import page_candidates

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from stage_costs import sample_results  # noqa: E402

__all__ = ["main"]


def _cpu(fn: Callable[[], Any]) -> tuple[float, float]:
    """(CPU s, wall s) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def _best(repeat: int, fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    runs = [fn() for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


@contextmanager
def _stores(kind: str) -> Iterator[Callable[[], Any]]:
    """Yields a factory of fresh stores of ``kind`` (each a context manager of a Store)."""
    if kind == "embedded":

        @contextmanager
        def fresh() -> Iterator[Store]:
            with tempfile.TemporaryDirectory() as tmp:
                store = open_store(f"sqlite:///{tmp}/store.sqlite")
                try:
                    yield store
                finally:
                    store.close()

        yield fresh
        return
    from beamcrawl.stores.emulator import running_emulator, scratch_store

    with running_emulator():

        @contextmanager
        def fresh_bt() -> Iterator[Store]:
            with scratch_store() as uri:
                store = open_store(uri)
                try:
                    yield store
                finally:
                    store.close()

        yield fresh_bt


def _line(label: str, seconds: float, units: int, unit: str, wall: float | None = None, rows: int = 0) -> None:
    per = 1e6 * seconds / max(1, units)
    extra = f"  {1e6 * seconds / rows:7.2f} µs/row" if rows else ""
    walls = f"  wall {1e6 * wall / max(1, units):8.2f} µs/{unit}" if wall is not None else ""
    print(f"  {label:<58} {per:8.2f} µs/{unit}{extra}{walls}")


def _new_urls(fresh: Callable[[], Any], cands: list[Candidate], repeat: int) -> None:
    half = len(cands) // 2
    first, second = cands[:half], cands[half:]
    now = 1_800_000_000_000

    def empty() -> tuple[float, float]:
        with fresh() as store:
            return _cpu(lambda: queue_new_urls(store, first, now))

    def grown() -> tuple[float, float]:
        with fresh() as store:
            queue_new_urls(store, first, now)
            return _cpu(lambda: queue_new_urls(store, second, now))

    t, w = _best(repeat, empty)
    _line(f"queue_new_urls, {len(first):,} URLs into an empty store", t, len(first), "URL", w, 2 * len(first))
    t, w = _best(repeat, grown)
    _line(f"queue_new_urls, {len(second):,} more URLs", t, len(second), "URL", w, 2 * len(second))

    # As URL seen's merge queues them since 7260d44: a bucket's block (distinct fingerprints,
    # sorted), its new rows' cells made from the columns, against the same rows as candidates.
    for label, part, before in (("an empty store", first, None), ("more URLs", second, first)):
        block = _bucket_block(part)
        rows = np.arange(len(block))

        def timed(queue: Callable[[Store], Any], before: list[Candidate] | None = before) -> tuple[float, float]:
            with fresh() as store:
                if before is not None:
                    queue_new_block(store, _bucket_block(before), np.arange(len(_bucket_block(before))), now)
                return _cpu(lambda: queue(store))

        t, w = _best(repeat, lambda: timed(lambda store: queue_new_urls(store, block.to_candidates(rows), now)))
        _line(f"a bucket's {len(block):,} as candidates, {label}", t, len(block), "URL", w, 2 * len(block))
        t, w = _best(repeat, lambda: timed(lambda store: queue_new_block(store, block, rows, now)))
        _line("the same from its columns (queue_new_block)", t, len(block), "URL", w, 2 * len(block))
    block = _bucket_block(cands)

    def columns() -> None:
        priority = block_priorities(block)
        cell_columns.frontier_cells(block, now, priority, "")
        cell_columns.queued_cells(block, now)
        cell_columns.frontier_keys(now, block.fp)
        cell_columns.seen_keys(block.fp)

    t, _ = _best(repeat, lambda: _cpu(columns))
    _line("  of which the columns' cells, keys and priorities", t, len(block), "URL")

    entries = queue_new_urls(_NullStore(), cands, now)
    t, _ = _best(
        repeat,
        lambda: _cpu(
            lambda: [(e.to_cells(), UrlState.discovered_cells(e.url, now, e.source, e.depth)) for e in entries]
        ),
    )
    _line("  of which encoding the two cells", t, len(entries), "URL")
    with fresh() as store:
        queue_new_urls(store, cands, now)
        frontier = list(store.read_range("frontier"))
        urls = list(store.read_range("urls"))
    t, _ = _best(repeat, lambda: _cpu(lambda: [FrontierEntry.from_cells(c) for _, c in frontier]))
    _line("FrontierEntry.from_cells (select's decode)", t, len(frontier), "row")
    t, _ = _best(repeat, lambda: _cpu(lambda: [UrlState.from_cells(c) for _, c in urls]))
    _line("UrlState.from_cells of a discovered row", t, len(urls), "row")


def _bucket_block(cands: list[Candidate]) -> CandidateBlock:
    """The candidates as a merged bucket holds them: one a fingerprint, in fingerprint order."""
    return CandidateBlock.from_candidates(sorted({c.fp: c for c in reversed(cands)}.values(), key=lambda c: c.fp))


def _fetch_outcomes(fresh: Callable[[], Any], pages: list[Any], repeat: int) -> None:
    now = 1_800_000_000_000
    discovered = [
        Candidate(fp=p.fetch.entry.fp, url=p.fetch.entry.url, host=p.fetch.entry.host, depth=1, priority=1.0)
        for p in pages
    ]

    def rows() -> list[tuple[bytes, dict[str, bytes]]]:
        return [(fp_key(p.fetch.entry.fp), c) for p in pages if (c := url_state_cells(p)) is not None]

    def write() -> tuple[float, float]:
        with fresh() as store:
            queue_new_urls(store, discovered, now)

            def run() -> None:
                batch = rows()
                for i in range(0, len(batch), 2000):  # RecordUrlState's batches
                    store.mutate("urls", [Mutation.set(k, c) for k, c in batch[i : i + 2000]])

            return _cpu(run)

    cells = rows()
    n = sum(len(c) for _, c in cells)
    t, w = _best(repeat, write)
    _line(
        f"URL state of {len(pages):,} fetches ({n / max(1, len(cells)):.2f} cells a row)", t, len(pages), "page", w, n
    )
    t, _ = _best(repeat, lambda: _cpu(rows))
    _line("  of which url_state_cells (the cells' encoding)", t, len(pages), "page")
    with fresh() as store:
        queue_new_urls(store, discovered, now)
        store.mutate("urls", [Mutation.set(k, c) for k, c in cells])
        read = list(store.read_range("urls"))
    t, _ = _best(repeat, lambda: _cpu(lambda: [UrlState.from_cells(c) for _, c in read]))
    _line("UrlState.from_cells of a fetched row", t, len(read), "row")
    size = sum(len(v) for _, c in cells for v in c.values())
    print(f"  stored value bytes of a fetch's cells: {size / max(1, len(cells)):.1f} B/row")

    # The next visit's frontier row each fetch schedules: it carries the revisit state too.
    nexts = [e for e in (next_entry(p) for p in pages) if e is not None]
    t, _ = _best(repeat, lambda: _cpu(lambda: [e.to_cells() for e in nexts]))
    _line("FrontierEntry.to_cells of a next visit", t, len(nexts), "row")
    rows_next = [e.to_cells() for e in nexts]
    t, _ = _best(repeat, lambda: _cpu(lambda: [FrontierEntry.from_cells(c) for c in rows_next]))
    _line("FrontierEntry.from_cells of a next visit", t, len(nexts), "row")
    size = sum(len(v) for c in rows_next for v in c.values())
    print(f"  stored value bytes of a next visit's row: {size / max(1, len(nexts)):.1f} B/row")


class _NullStore(Store):
    """A store that drops what is written (to time the encoding alone)."""

    uri = "null://"

    def read_range(self, table: str, start: bytes | None = None, end: bytes | None = None, **kw: Any) -> Iterator[Any]:
        return iter(())

    def read_keys(self, table: str, keys: Any, *, keys_only: bool = False) -> dict[bytes, dict[str, bytes]]:
        return {}

    def mutate(self, table: str, mutations: Any) -> None:
        for _ in mutations:
            pass

    def check_and_set(self, table: str, key: bytes, column: str, expected: Any, new: Any) -> bool:
        return True


def _write_originals(store: Store, probes: list[cs.Probe]) -> int:
    """Settles each probe as a new original and writes its rows as _SettleFn does."""
    settle = cs._SettleFn(store.uri, 1, cs.textfp.LAYOUT, True, None)
    settle.store = store
    settle.start_bundle()
    for probe in probes:
        new = cs.NewContent(probe.checksum, probe)
        for _ in settle.process((cs.near_part(probe.url_fp), {cs.NEW: [[new]], cs.NEAR: []})):
            pass
    settle._flush()
    return len(probes)


def _simhash_rows_two_ways(fresh: Callable[[], Any], probes: list[cs.Probe], repeat: int) -> None:
    """The originals' simhash-table rows built and written as cells (``Store.write_cells``,
    what ``_SettleFn`` does) and as a Mutation a row (``Store.mutate``, what it did)."""
    cells = content_rows.sorted_cells([c for p in probes for c in content_rows.simhash_row_cells(p, 1)])
    mutations = content_rows.sorted_run([m for p in probes for m in content_rows.simhash_cells(p, 1)])
    n = len(cells)
    t, _ = _best(
        repeat,
        lambda: _cpu(
            lambda: content_rows.sorted_cells([c for p in probes for c in content_rows.simhash_row_cells(p, 1)])
        ),
    )
    _line("simhash rows built as cells", t, n, "row")
    t, _ = _best(
        repeat,
        lambda: _cpu(lambda: content_rows.sorted_run([m for p in probes for m in content_rows.simhash_cells(p, 1)])),
    )
    _line("simhash rows built as mutations", t, n, "row")

    def write(how: Callable[[Any], None]) -> tuple[float, float]:
        with fresh() as store:
            return _cpu(lambda: how(store))

    t, w = _best(repeat, lambda: write(lambda store: store.write_cells(content_rows.SIMHASH_TABLE, cells)))
    _line("simhash rows written: write_cells", t, n, "row", w)
    t, w = _best(repeat, lambda: write(lambda store: store.mutate(content_rows.SIMHASH_TABLE, mutations)))
    _line("simhash rows written: mutate", t, n, "row", w)


def _new_originals(fresh: Callable[[], Any], probes: list[cs.Probe], repeat: int) -> None:
    hashed = sum(p.simhash is not None for p in probes)
    rows = len(probes) + 20 * hashed

    def write() -> tuple[float, float]:
        with fresh() as store:
            return _cpu(lambda: _write_originals(store, probes))

    t, w = _best(repeat, write)
    _line(f"settle + content and simhash rows, {len(probes):,} originals", t, len(probes), "original", w, rows)
    t, _ = _best(repeat, lambda: _cpu(lambda: [cs.settle(cs.NewContent(p.checksum, p), None, 1) for p in probes]))
    _line("  of which settle (the decision and its cells)", t, len(probes), "original")
    _simhash_rows_two_ways(fresh, [p for p in probes if p.simhash is not None], repeat)
    with fresh() as store:
        _write_originals(store, probes)
        content = list(store.read_range(content_rows.CONTENT_TABLE))
        simhash = list(store.read_range(content_rows.SIMHASH_TABLE))
    t, _ = _best(repeat, lambda: _cpu(lambda: [content_rows.ContentRecord.from_cells(c) for _, c in content]))
    _line("ContentRecord.from_cells (the checksum merge's decode)", t, len(content), "row")
    cells = sum(len(c) for _, c in simhash)
    t, _ = _best(repeat, lambda: _cpu(lambda: [content_rows.parse_simhash_cells(c, 2) for _, c in simhash]))
    _line(f"_parse_simhash_cells ({cells / max(1, len(simhash)):.2f} cells a row)", t, cells, "cell")
    size = sum(len(v) for _, c in content for v in c.values())
    ssize = sum(len(v) for _, c in simhash for v in c.values())
    print(
        f"  stored value bytes: content {size / max(1, len(content)):.1f} B/row, simhash {ssize / max(1, cells):.1f} B/cell"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--stores", default="embedded,emulator")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    gctune.tune()

    results = sample_results(args.hosts, args.pages)
    pages = [parse_fetch(r, "beamcrawl") for r in results]
    new: dict[int, Candidate] = {}
    for page in pages:
        for c in page_candidates(page):
            new.setdefault(c.fp, c)
    cands = sorted(new.values(), key=lambda c: c.fp)
    probes = [p for p in (cs.probe_page(pg) for pg in pages) if p is not None]
    policy = SchedulePolicy()
    scheduled = [schedule_page(pg, policy) for pg in pages]
    print(f"{len(pages):,} pages, {len(cands):,} new URLs, {len(probes):,} originals")
    for kind in args.stores.split(","):
        print(f"{kind}:")
        with _stores(kind) as fresh:
            _new_urls(fresh, cands, args.repeat)
            _fetch_outcomes(fresh, scheduled, args.repeat)
            _new_originals(fresh, probes, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
