"""Record: fetch outcomes update host state and URL state for the next round.

Host records (delay, last response end, robots cache, errors) are written as soon as the
fetcher is done with a host, so politeness holds across rounds even if a later stage fails.
URL state is merged cell by cell into the seen set, with ``u:duplicate_of``: the original's
URL when the page was found to copy another (exact or near), null otherwise, so the revisit
scheduler can lower a copy's recrawl priority. The frontier rows of URLs finished this
round are not deleted here: their keys are staged and deleted when the round commits,
after its WARC and Parquet files are in place, so a crash never loses a fetched page.
Likewise each URL's next visit (transforms/freshness.py) is staged as a frontier row and
written at the commit, before the finished rows are deleted: a round that fails leaves no
half-scheduled revisits, and a commit that resumes writes the same rows again (same keys).
Pages come as content seen's batches (``PageBatch``): each branch is one DoFn call per
batch, and a batch's URL rows are one store write.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import DONE, REQUEUE, RoundOutputs, part_name
from beamcrawl.schemas.records import (
    REVISIT_CELL,
    HostRecord,
    ParsedPage,
    UrlState,
    fp_key,
    json_cell,
    revisit_cell,
)
from beamcrawl.state.frontier import read_requeue_line, requeue_text
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms import dead_letter
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect
from beamcrawl.transforms.freshness import next_entry

__all__ = [
    "DUPLICATE_CELL",
    "RecordHostState",
    "RecordUrlState",
    "done_keys",
    "requeue_line",
    "read_requeue_line",
    "url_state_cells",
]

# refused: the address policy refused the connection; the URL is not asked for again.
# usage_refused: the site's usage preferences refuse a purpose of the crawl (not fetched),
# finished like robots_disallowed.
FINISHED = ("fetched", "error", "refused", "robots_disallowed", "usage_refused")
# The original a fetched page copies (JSON), null when it copies none. Written on every
# response, so a page that stops being a copy loses the mark, and only then: an error leaves
# the mark as it was. Its own cell beside UrlState's (whose from_cells skips cells it does
# not know), so rows stay readable by every version; a UrlState field of that name would
# read it as is.
DUPLICATE_CELL = "u:duplicate_of"
# Bytes of URL-state rows (key, cell names and values: some 330 a fetched page) a worker
# holds to write them as one sorted run: about 19,000 pages, some 12 MB as Python objects.
URL_ROWS_HELD = 6 << 20


def url_state_cells(page: ParsedPage) -> dict[str, bytes] | None:
    """The seen-set cells a fetch outcome updates (None when nothing happened): the outcome
    in one cell (``u:o``: state, status, time, checksum, error, and the URL, so that a URL
    queued by a run that died before marking it seen gets its row from here), and the
    revisit state and the copy mark in theirs when this fetch sets them."""
    f = page.fetch
    if f.outcome not in FINISHED or f.entry.source == "robots":
        return None
    checksum = page.checksum
    if f.status == 304 and page.revisit is not None:
        # Not modified: the content we hold stands; its checksum is the stored one.
        checksum = page.revisit.get("checksum")
    state = UrlState(
        url=f.entry.url,
        state=f.outcome,
        status=f.status if f.outcome == "fetched" else None,
        fetched_at_ms=int(f.fetched_at * 1000) if f.fetched_at else None,
        checksum=checksum,
        error=f.error,
    )
    cells = state.outcome_cells()
    if page.revisit is not None:  # freshness scheduled it: else the cell stays as it was
        cells[REVISIT_CELL] = page.revisit_cell or revisit_cell(page.revisit)
    if f.outcome == "fetched":
        cells[DUPLICATE_CELL] = json_cell(page.duplicate_of)
    return cells


def done_keys(page: ParsedPage) -> list[str]:
    """Frontier keys (hex) to delete when the round commits."""
    f = page.fetch
    if f.outcome not in FINISHED or f.entry.source == "robots":
        return []
    return [f.entry.key.hex(), *f.entry.also_keys]


def requeue_line(page: ParsedPage) -> str | None:
    """The URL's next frontier row as one staged line (``state/frontier.py:requeue_text``),
    or None."""
    entry = next_entry(page)
    if entry is None:
        return None
    return requeue_text(entry, page.revisit_cell)


class _WriteRowsFn(beam.DoFn):
    """Writes batches of ``(key, cells)`` to a store table.

    With ``hold_bytes`` the rows wait, up to that many bytes of keys and cells, and go to the
    store in key order (a sorted run, ``WRITE_ROWS`` rows a transaction) when that much has
    come or the bundle ends. For rows at keys spread over a large table (the URL state: a
    page batch's fetched URLs, from anywhere in the seen set), a batch's keys each dirty a
    B-tree leaf of their own on the embedded store, every leaf one WAL frame and one
    checkpoint copy; a bundle's keys in order share their leaves (bench/README.md, "URL
    state written in sorted runs"). A row the store refuses is still set aside alone.
    """

    WRITE_ROWS = 1000  # rows a transaction of a held run: the write lock is held that long

    def __init__(self, store_uri: str, table: str, hold_bytes: int = 0) -> None:
        self.store_uri = store_uri
        self.table = table
        self.hold_bytes = hold_bytes
        self.rows = Metrics.counter("record", f"{table}_rows")
        self.dead = Outlet("record")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def start_bundle(self) -> None:
        self.held: list[tuple[bytes, dict[str, bytes]]] = []
        self.held_size = 0

    def process(self, batch: list[tuple[bytes, dict[str, bytes]]]) -> Iterator[beam.pvalue.TaggedOutput]:
        if not self.hold_bytes:
            yield from self._write_batch(batch)
            return
        self.held.extend(batch)
        self.held_size += sum(map(_row_size, batch))
        if self.held_size >= self.hold_bytes:
            yield from self._write_held()

    def finish_bundle(self) -> Iterator[beam.pvalue.TaggedOutput]:
        for out in self._write_held():
            yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))

    def _write_held(self) -> Iterator[beam.pvalue.TaggedOutput]:
        # Stable: two rows of one key keep their order, so the later one's cells win as
        # they would have batch by batch.
        run = sorted(self.held, key=_row_key)
        self.held, self.held_size = [], 0
        for at in range(0, len(run), self.WRITE_ROWS):
            yield from self._write_batch(run[at : at + self.WRITE_ROWS])

    def _write_batch(self, batch: Sequence[tuple[bytes, dict[str, bytes]]]) -> Iterator[beam.pvalue.TaggedOutput]:
        # A row the store refuses (a bad key) is set aside alone; the batch's others are written.
        failed = dead_letter.each(self.dead, batch, self._write)
        self.rows.inc(len(batch) - len(failed))
        for letter in failed:
            yield beam.pvalue.TaggedOutput(ERRORS, letter)

    def _write(self, batch: Sequence[tuple[bytes, dict[str, bytes]]]) -> None:
        self.store.mutate(self.table, [Mutation.set(key, cells) for key, cells in batch])

    def teardown(self) -> None:
        self.store.close()


def _row_key(row: tuple[bytes, dict[str, bytes]]) -> tuple[int, bytes]:
    """A held row's place in its run: by key; a row whose key is not bytes goes last (the
    store refuses it, alone, as it would have in its batch)."""
    key = row[0] if isinstance(row, tuple) and row else None
    return (0, key) if isinstance(key, bytes) else (1, b"")


def _row_size(row: tuple[bytes, dict[str, bytes]]) -> int:
    """A held row's bytes (key, cell names, values); a malformed row counts for nothing here."""
    try:
        key, cells = row
        return len(key) + sum(len(column) + len(value) for column, value in cells.items())
    except Exception:  # refused when written, as one dead letter
        return 0


class _WriteRows(beam.PTransform):
    """Batches of ``(key, cells)`` → a store table; rows the store refuses are dead letters.
    ``hold_bytes``: rows held and written as sorted runs of that size (:class:`_WriteRowsFn`)."""

    def __init__(self, store_uri: str, table: str, hold_bytes: int = 0) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.table = table
        self.hold_bytes = hold_bytes

    def expand(self, batches: beam.PCollection) -> beam.PCollection:
        out = batches | beam.ParDo(_WriteRowsFn(self.store_uri, self.table, self.hold_bytes)).with_outputs(
            ERRORS, main="written"
        )
        collect(out[ERRORS])
        return out.written


class _StageLinesFn(beam.DoFn):
    """Appends lines (finished keys, next rows) to this bundle's file in the round's staging.

    The lines go to the file a chunk at a time, not held until the bundle ends: on a local
    runner one bundle holds the whole round's pages, and their lines (a next visit's row is
    most of a kilobyte) grew the round's memory with its size. The file appears under its
    name when the bundle finishes (:class:`~beamcrawl.core.runtime.files.PiecewiseFile`), with the
    same bytes as when it was written whole.
    """

    CHUNK_LINES = 2048  # lines joined and written at once

    def __init__(self, outputs: RoundOutputs, kind: str) -> None:
        self.outputs = outputs
        self.kind = kind

    def start_bundle(self) -> None:
        self.lines: list[str] = []
        self.file: files.PiecewiseFile | None = None

    def process(self, lines: list[str] | str) -> None:
        if isinstance(lines, str):
            self.lines.append(lines)
        else:
            self.lines.extend(lines)
        if len(self.lines) >= self.CHUNK_LINES:
            self._write()

    def _write(self) -> None:
        if not self.lines:
            return
        if self.file is None:
            self.file = files.PiecewiseFile(files.join(self.outputs.staged(self.kind), part_name(".txt")))
        self.file.write(("\n".join(self.lines) + "\n").encode("utf-8"))
        self.lines = []

    def finish_bundle(self) -> None:
        self._write()
        if self.file is not None:
            self.file.close()
            self.file = None


def _host_row(item: tuple[str, HostRecord]) -> tuple[bytes, dict[str, bytes]]:
    host, record = item
    return host.encode(), record.to_cells()


class RecordHostState(beam.PTransform):
    """``(host, HostRecord)`` → the hosts table, in batches."""

    def __init__(self, store_uri: str) -> None:
        super().__init__()
        self.store_uri = store_uri

    def expand(self, hosts: beam.PCollection) -> beam.PCollection:
        return (
            hosts
            | "Host rows" >> dead_letter.Map("record", _host_row)
            | "Batch host rows" >> beam.BatchElements(min_batch_size=100, max_batch_size=2000)
            | "Write host rows" >> _WriteRows(self.store_uri, "hosts")
        )


def _url_rows(page: ParsedPage) -> Iterable[tuple[bytes, dict[str, bytes]]]:
    cells = url_state_cells(page)
    if cells is not None:
        yield fp_key(page.fetch.entry.fp), cells


class RecordUrlState(beam.PTransform):
    """``PageBatch`` → URL state in the seen set (one store write per batch); finished
    frontier keys and the next visits' rows staged for the commit. Each branch runs its
    function per page, a page that fails is that branch's dead letter, once per batch."""

    def __init__(self, store_uri: str, outputs: RoundOutputs) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.outputs = outputs

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        (
            pages
            | "URL state rows" >> dead_letter.MapPages("record", _url_rows, flat=True)
            | "Write URL rows" >> _WriteRows(self.store_uri, "urls", hold_bytes=URL_ROWS_HELD)
        )
        (
            pages
            | "Next visit rows" >> dead_letter.MapPages("record", requeue_line)
            | "Stage next visits" >> beam.ParDo(_StageLinesFn(self.outputs, REQUEUE))
        )
        return (
            pages
            | "Finished frontier keys" >> dead_letter.MapPages("record", done_keys, flat=True)
            | "Stage finished keys" >> beam.ParDo(_StageLinesFn(self.outputs, DONE))
        )
