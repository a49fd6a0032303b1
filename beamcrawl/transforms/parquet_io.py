"""Publish: page events to ``pages/``, link edges to ``links/``, dead letters to ``errors/``, as Parquet per round.

Each writer collects its bundle's rows and writes one zstd-compressed Parquet part file
(another whenever ``FLUSH_ROWS`` rows or an estimated ``FLUSH_BYTES`` bytes are buffered: a
bundle on the local runners is the whole round, and a row from the web can be large) with the
explicit schema from
:mod:`beamcrawl.schemas.arrow`, whose field descriptions travel in the file's metadata.
Page events are sorted by URL, link edges by source then target, so a reader filtering on
``src`` skips most row groups by their statistics. Files go to the round's staging folder;
the round's commit moves them to ``pages/round=N/``, ``links/round=N/`` and ``errors/round=N/``
(hive partitions). Pages and their events come a batch per element (content seen's
``PageBatch``, the WARC stage's list of a batch's events); each page or row is still its own
dead letter.

Rows are held column by column (:class:`ColumnBuffer`), not as a dict per row: a page's
~13 link edges are a dozen list extends (the source's columns are one value repeated),
Arrow converts each column in one call, and Arrow sorts the table (a stable sort, as
Python's was). Building a dict per edge, sorting the dicts in Python and converting them
with ``Table.from_pylist`` cost about three times as much per page, the largest part
reading values back out of dicts the sort had scattered over memory. The files are the ones
that way wrote, byte for byte (tests compare the two).
"""

from __future__ import annotations

import time
from itertools import repeat
from typing import Any, Mapping

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beamcrawl.core.runtime import files, heap
from beamcrawl.core.runtime.outputs import RoundOutputs, part_name
from beamcrawl.core.urls.hostkeys import domain_of
from beamcrawl.core.urls.urlnorm import host_of
from beamcrawl.schemas.arrow import ERRORS_SCHEMA, LINKS_SCHEMA, PAGES_SCHEMA, signed64, timestamp_ms
from beamcrawl.schemas.records import LinkColumns, PageBatch, ParsedPage
from beamcrawl.transforms import dead_letter
from beamcrawl.transforms.dead_letter import ERRORS, DeadLetter, Outlet, collect, dead_letter_row

__all__ = [
    "ColumnBuffer",
    "WriteDeadLetters",
    "WriteLinkEdges",
    "WritePageEvents",
    "link_edge_columns",
    "link_edge_parts",
    "sorted_table",
    "write_part",
    "write_table",
]

FLUSH_ROWS = 200_000
# A part is written once its buffered rows are estimated at this many bytes (ColumnBuffer.nbytes:
# about 120k link edges or 45k page events; Python holds about 1.5 times the estimate).
FLUSH_BYTES = 32 * 1024 * 1024
_SLOT = 8  # bytes a value is counted for, besides a string's or binary's length
# Rows a buffer converts to Arrow at a time (about a batch of pages' events, or a third of
# its link edges): the Python values of at most this many rows wait at once.
SEAL_ROWS = 4096


def _is_variable(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)


def _lengths(values: list[Any]) -> int:
    """The summed lengths of a string column's values (None and anything without one: 0)."""
    try:
        return len("".join(filter(None, values)))  # one C pass; a len() call a value costs more
    except TypeError:  # bytes, or a value of another type (the conversion will refuse it)
        return sum(len(v) for v in values if isinstance(v, (str, bytes)))


# The registered domain of a ``host[:port]`` (cached: links name the same hosts over and
# over); never empty, an IP literal is its own domain.
_host_domain = domain_of


def link_edge_parts(page: ParsedPage) -> tuple[dict[str, Any], dict[str, list[Any]]] | None:
    """A page's links/ rows, one per out-link, as the values every row of the page shares
    (its source: ``src``, ``src_fp``, ``src_host``, ``src_domain``, ``fetched_at``) and the
    columns of the rest, or None when it has no links. Its round is the folder,
    ``links/round=N/``. :meth:`ColumnBuffer.add_columns` takes both as they are.

    Values are as the columns store them: fingerprints signed (:func:`signed64`) and
    ``fetched_at`` in epoch milliseconds (:func:`timestamp_ms`).
    """
    links = page.links
    if not links:
        return None
    f = page.fetch
    src_host = f.entry.host
    if not isinstance(links, LinkColumns):
        links = LinkColumns.of(links)
    dst = links.urls
    hosts = links.hosts
    dst_host = hosts if all(hosts) else [host or host_of(url) for url, host in zip(dst, hosts)]
    shared: dict[str, Any] = {
        "src": f.url,
        "src_fp": signed64(f.entry.fp),
        "src_host": src_host,
        "src_domain": _host_domain(src_host),
        "fetched_at": timestamp_ms(f.fetched_at) if f.fetched_at else None,
    }
    columns: dict[str, list[Any]] = {
        "dst": dst,
        "dst_fp": list(map(signed64, links.fps)),
        "dst_host": dst_host,
        "dst_domain": list(map(_host_domain, dst_host)),
        "anchor": [anchor or None for anchor in links.anchors],
        "nofollow": [True] * len(dst) if page.meta_nofollow else links.nofollow,
        "kind": links.kinds,
    }
    return shared, columns


def link_edge_columns(page: ParsedPage) -> dict[str, list[Any]] | None:
    """:func:`link_edge_parts` as one list a column (LINKS_SCHEMA's names, in its order)."""
    parts = link_edge_parts(page)
    if parts is None:
        return None
    shared, columns = parts
    n = len(columns["dst"])
    return {name: columns[name] if name in columns else [shared[name]] * n for name in LINKS_SCHEMA.names}


class ColumnBuffer:
    """Rows of one schema, held column by column until they become a table.

    Rows come in whole (:meth:`add_row`, a dict as ``Table.from_pylist`` takes: a missing
    key is null) or as columns (:meth:`add_columns`, the schema's names, equal lengths) into
    one Python list per column; every ``SEAL_ROWS`` rows :meth:`seal` converts those lists
    into an Arrow record batch, so a part's rows wait as Arrow buffers rather than as Python
    strings and ints: a few times smaller, and not scattered over the interpreter's small-
    object arenas, where the few values a buffer keeps alive from each batch of pages kept
    whole arenas of that batch's freed objects from going back (measured with
    ``bench/memory_timeline.py``, bench/README.md). :meth:`take` returns every row as one
    table and starts over. :attr:`nbytes` estimates what the rows weigh: 8 bytes a value,
    plus each string's length.
    """

    def __init__(self, schema: pa.Schema, seal_rows: int | None = None) -> None:
        self.schema = schema
        self.seal_rows = SEAL_ROWS if seal_rows is None else seal_rows
        self.columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        self.pending = 0  # rows in the lists, not sealed yet
        self.rows = 0
        self.nbytes = 0
        self._sealed: list[pa.RecordBatch] = []
        self._sealed_nbytes = 0
        self._variable = tuple(f.name for f in schema if _is_variable(f.type))
        self._variable_set = frozenset(self._variable)
        self._row_slots = _SLOT * len(schema.names)

    def __len__(self) -> int:
        return self.rows

    def add_row(self, row: Mapping[str, Any]) -> None:
        for name, column in self.columns.items():
            column.append(row.get(name))
        self.rows += 1
        self.pending += 1
        size = self._row_slots
        for name in self._variable:
            value = row.get(name)
            if isinstance(value, (str, bytes)):
                size += len(value)
        self.nbytes += size

    def add_columns(self, columns: Mapping[str, list[Any]], shared: Mapping[str, Any] | None = None) -> int:
        """Appends rows given column by column, and ``shared``: columns whose value is the
        same in every one of these rows, given once (a page's source in each of its link
        edges); returns how many rows. A column in neither is null."""
        n = len(next(iter(columns.values()), ()))
        shared = shared or {}
        size = self._row_slots * n
        for name, column in self.columns.items():
            values = columns.get(name)
            if values is not None:
                column.extend(values)
                if name in self._variable_set:
                    size += _lengths(values)
            else:
                value = shared.get(name)
                column.extend(repeat(value, n))
                if isinstance(value, (str, bytes)) and name in self._variable_set:
                    size += len(value) * n
        self.rows += n
        self.pending += n
        self.nbytes += size
        return n

    def full(self) -> bool:
        """Whether the unsealed rows are due to be sealed (``seal_rows`` of them)."""
        return self.pending >= self.seal_rows

    def seal(self) -> None:
        """Converts the unsealed rows to an Arrow record batch (each column with its field's
        type) and empties the lists.

        Raises:
            pa.ArrowException, TypeError, ValueError, OverflowError: A value its column's type
                refuses; nothing is sealed then (:meth:`drop_bad_rows` takes it out).
        """
        if not self.pending:
            return
        arrays = [pa.array(self.columns[f.name], type=f.type) for f in self.schema]
        self._sealed.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self.columns = {name: [] for name in self.schema.names}
        self.pending = 0
        self._sealed_nbytes = self.nbytes

    def drop_bad_rows(self) -> list[dict[str, Any]]:
        """Removes the unsealed rows with a value its column's type refuses; returns them as
        dicts (the sealed ones were converted already).

        For when :meth:`seal` or :meth:`take` fails: a value from the web (a string with a
        lone surrogate, say) that Arrow cannot convert costs its row, not the part file."""
        bad: set[int] = set()
        for f in self.schema:
            column = self.columns[f.name]
            try:
                pa.array(column, type=f.type)
                continue
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass
            for i, value in enumerate(column):
                try:
                    pa.array([value], type=f.type)
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    bad.add(i)
        rows = [{name: self.columns[name][i] for name in self.columns} for i in sorted(bad)]
        if bad:
            self.columns = {n: [v for i, v in enumerate(c) if i not in bad] for n, c in self.columns.items()}
            self.rows -= len(bad)
            self.pending -= len(bad)
            self.nbytes = (
                self._sealed_nbytes
                + self._row_slots * self.pending
                + sum(_lengths(self.columns[n]) for n in self._variable)
            )
        return rows

    def take(self) -> pa.Table:
        """The rows so far as one table of the schema (fields, metadata and all), made of the
        sealed batches as they are (no copy: sorting copies it once anyway); empties the
        buffer.

        Raises:
            As :meth:`seal`, leaving the buffer as it was.
        """
        self.seal()
        table = pa.Table.from_batches(self._sealed, schema=self.schema)
        self._sealed = []
        self.rows = self.nbytes = self._sealed_nbytes = 0
        return table


def sorted_table(table: pa.Table, sort_by: tuple[str, ...]) -> pa.Table:
    """The table's rows ascending by the ``sort_by`` columns, ties in their order (a stable
    sort). Arrow compares strings as UTF-8 bytes, which orders them as Python compares
    ``str`` (by code point)."""
    if not sort_by or table.num_rows < 2:
        return table
    return table.take(pc.sort_indices(table, sort_keys=[(name, "ascending") for name in sort_by]))


def write_table(table: pa.Table, sort_by: tuple[str, ...], path: str) -> None:
    """Writes a table as one zstd Parquet file, sorted by the ``sort_by`` columns.

    What a flush holds at once is the rows twice (unsorted and sorted, while the sort copies
    them) and then the sorted rows and the file's bytes: the unsorted rows go as soon as the
    sorted copy exists when the caller keeps no reference (``write_table(buffer.take(),
    ...)``), and the file's bytes are written from Arrow's buffer, not copied to Python's.
    """
    table = sorted_table(table, sort_by)
    sink = pa.BufferOutputStream()  # a part is bounded (FLUSH_ROWS, FLUSH_BYTES); any filesystem takes bytes
    pq.write_table(table, sink, compression="zstd")
    del table
    files.write_bytes(path, memoryview(sink.getvalue()))


def write_part(rows: list[dict[str, Any]], schema: pa.Schema, sort_by: tuple[str, ...], path: str) -> None:
    """Writes row dicts as one zstd Parquet file, sorted by the ``sort_by`` columns."""
    write_table(pa.Table.from_pylist(rows, schema=schema), sort_by, path)


class _ParquetPartsFn(beam.DoFn):
    """Buffers a bundle's rows column by column and writes them as Parquet part files, one
    whenever ``FLUSH_ROWS`` rows or ``FLUSH_BYTES`` estimated bytes are buffered.

    Items are page event dicts (one row each) or, with ``columnar``, a page's rows as
    columns (:func:`link_edge_columns`); with ``batched`` an element is a list of items (a
    batch of pages' events or edges), each handled as an element on its own would be: its
    own dead letter, and a part written as soon as the buffer is full, mid-batch too.
    """

    def __init__(
        self,
        folder: str,
        schema: pa.Schema,
        sort_by: tuple[str, ...],
        name: str,
        columnar: bool = False,
        batched: bool = False,
    ) -> None:
        self.folder = folder
        self.schema = schema
        self.sort_by = sort_by
        self.name = name
        self.columnar = columnar
        self.batched = batched
        ns = f"publish_{name}"
        self.received = Metrics.counter(ns, "received")
        self.success = Metrics.counter(ns, "success")
        self.error = Metrics.counter(ns, "error")
        self.files = Metrics.counter(ns, "files")
        self.latency_us = Metrics.distribution(ns, "latency_us")
        self.dead = Outlet(ns)

    def setup(self) -> None:
        heap.arrow_on_the_system_allocator()  # the parts' buffers reuse what the stage frees

    def start_bundle(self) -> None:
        self.buffer = ColumnBuffer(self.schema)

    # Not generators: the rows are buffered when called (a test calls these directly).
    def process(self, element: Any) -> list[beam.pvalue.TaggedOutput]:
        if element is None:
            return []
        if not self.batched:
            return self._add(element)
        out: list[beam.pvalue.TaggedOutput] = []
        for item in element:
            out.extend(self._add(item))
        return out

    def _add(self, item: Any) -> list[beam.pvalue.TaggedOutput]:
        """Buffers one item: a row dict, or with ``columnar`` a dict of columns or a
        ``(shared values, columns)`` pair (:func:`link_edge_parts`)."""
        try:
            self.dead.check(item)
        except Exception as exc:
            return [self.dead.tagged(exc, item)]
        if self.columnar:
            # A page's columns, or its link edges as (shared values, columns): link_edge_parts.
            shared, columns = item if isinstance(item, tuple) else (None, item)
            self.received.inc(self.buffer.add_columns(columns, shared))
        else:
            self.buffer.add_row(item)
            self.received.inc()
        if len(self.buffer) >= FLUSH_ROWS or self.buffer.nbytes >= FLUSH_BYTES:
            return [beam.pvalue.TaggedOutput(ERRORS, letter) for letter in self._flush()]
        if self.buffer.full():
            return [beam.pvalue.TaggedOutput(ERRORS, letter) for letter in self._seal()]
        return []

    def finish_bundle(self) -> list[beam.pvalue.TaggedOutput]:
        return [beam.pvalue.TaggedOutput(ERRORS, GlobalWindows.windowed_value(letter)) for letter in self._flush()]

    def _bad_rows(self, exc: Exception) -> list[DeadLetter]:
        """Dead letters of the rows Arrow refuses (their values came from the web)."""
        letters = [self.dead.letter(exc, row) for row in self.buffer.drop_bad_rows()]
        self.error.inc(len(letters))
        return letters

    def _seal(self) -> list[DeadLetter]:
        """Converts the buffer's unsealed rows to Arrow; the rows it refuses are dead letters."""
        try:
            self.buffer.seal()
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            letters = self._bad_rows(exc)
            self.buffer.seal()
            return letters
        return []

    def _flush(self) -> list[DeadLetter]:
        rows = len(self.buffer)
        if not rows:
            return []
        started = time.perf_counter()
        letters: list[DeadLetter] = []
        try:
            self.buffer.seal()
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            letters = self._bad_rows(exc)
            rows = len(self.buffer)
            if not rows:
                return letters
        try:
            # Taken in the call: no reference here keeps the unsorted rows while they are written.
            write_table(self.buffer.take(), self.sort_by, files.join(self.folder, part_name(".parquet")))
        except (pa.ArrowException, OSError):
            # A failed write is the disk's: the round must fail (and be rerun) rather than
            # publish less than it fetched.
            self.error.inc(rows)
            raise
        self.success.inc(rows)
        self.files.inc()
        self.latency_us.update(int((time.perf_counter() - started) * 1e6))
        return letters


class WritePageEvents(beam.PTransform[beam.PCollection[list[dict[str, Any]]], beam.PCollection[None]]):
    """Lists of page event dicts (a batch's, as the WARC stage gives them) →
    ``pages/round=N/part-*.parquet``."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, events: beam.PCollection[list[dict[str, Any]]]) -> beam.PCollection[None]:
        out = events | "Write pages Parquet" >> beam.ParDo(
            _ParquetPartsFn(self.outputs.staged("pages"), PAGES_SCHEMA, ("url",), "pages", batched=True)
        ).with_outputs(ERRORS, main="written")
        collect(out[ERRORS])
        return out.written


class WriteLinkEdges(beam.PTransform[beam.PCollection[PageBatch], beam.PCollection[None]]):
    """``PageBatch`` → ``links/round=N/part-*.parquet``, one row per edge, sorted by source."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, pages: beam.PCollection[PageBatch]) -> beam.PCollection[None]:
        out = (
            pages
            | "Edges of each page" >> dead_letter.MapPages("publish_links", link_edge_parts)
            | "Write links Parquet"
            >> beam.ParDo(
                _ParquetPartsFn(
                    self.outputs.staged("links"), LINKS_SCHEMA, ("src", "dst"), "links", columnar=True, batched=True
                )
            ).with_outputs(ERRORS, main="written")
        )
        collect(out[ERRORS])
        return out.written


class WriteDeadLetters(beam.PTransform[beam.PCollection[DeadLetter], beam.PCollection[None]]):
    """``DeadLetter`` → ``errors/round=N/part-*.parquet``, sorted by stage then key,
    committed with the round's other files (transforms/dead_letter.py)."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, letters: beam.PCollection[DeadLetter]) -> beam.PCollection[None]:
        return (
            letters
            | "Dead-letter rows" >> beam.Map(dead_letter_row)
            | "Write errors Parquet"
            >> beam.ParDo(_ParquetPartsFn(self.outputs.staged("errors"), ERRORS_SCHEMA, ("stage", "key"), "errors"))
        )
