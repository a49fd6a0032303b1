"""Publish: page events to ``pages/`` and link edges to ``links/``, as Parquet per round.

Each writer collects its bundle's rows and writes one zstd-compressed Parquet part file
(another after every ``FLUSH_ROWS`` rows) with the explicit schema from
:mod:`beamcrawl.schemas.arrow`, whose field descriptions travel in the file's metadata.
Page events are sorted by URL, link edges by source then target, so a reader filtering on
``src`` skips most row groups by their statistics. Files go to the round's staging folder;
the round's commit moves them to ``pages/round=N/`` and ``links/round=N/`` (hive partitions).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Iterable

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics

from beamcrawl.core import files
from beamcrawl.core.outputs import RoundOutputs, part_name
from beamcrawl.core.urlnorm import host_of, registered_domain
from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA, signed64
from beamcrawl.schemas.records import ParsedPage

__all__ = ["WritePageEvents", "WriteLinkEdges", "link_edges", "write_part"]

FLUSH_ROWS = 200_000


def link_edges(page: ParsedPage) -> list[dict[str, Any]]:
    """One links/ row per out-link of a page (its round is the folder, ``links/round=N/``)."""
    f = page.fetch
    if not page.links:
        return []
    src_host = f.entry.host
    src_domain = registered_domain(src_host.split(":", 1)[0])
    fetched_at = dt.datetime.fromtimestamp(f.fetched_at, dt.timezone.utc) if f.fetched_at else None
    src_fp = signed64(f.entry.fp)
    rows = []
    for link in page.links:
        dst_host = host_of(link.url)
        rows.append(
            {
                "src": f.url,
                "dst": link.url,
                "src_fp": src_fp,
                "dst_fp": signed64(link.fp),
                "src_host": src_host,
                "dst_host": dst_host,
                "src_domain": src_domain,
                "dst_domain": registered_domain(dst_host.split(":", 1)[0]),
                "anchor": link.anchor or None,
                "nofollow": link.nofollow or page.meta_nofollow,
                "kind": link.kind,
                "fetched_at": fetched_at,
            }
        )
    return rows


class _ParquetPartsFn(beam.DoFn):
    """Buffers a bundle's rows and writes them as one Parquet part file."""

    def __init__(self, folder: str, schema: pa.Schema, sort_by: tuple[str, ...], name: str) -> None:
        self.folder = folder
        self.schema = schema
        self.sort_by = sort_by
        self.name = name
        ns = f"publish_{name}"
        self.received = Metrics.counter(ns, "received")
        self.success = Metrics.counter(ns, "success")
        self.error = Metrics.counter(ns, "error")
        self.files = Metrics.counter(ns, "files")
        self.latency_us = Metrics.distribution(ns, "latency_us")

    def start_bundle(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def process(self, rows: Iterable[dict[str, Any]]) -> None:
        before = len(self.rows)
        self.rows.extend(rows)
        self.received.inc(len(self.rows) - before)
        if len(self.rows) >= FLUSH_ROWS:
            self._flush()

    def finish_bundle(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        started = time.perf_counter()
        try:
            write_part(rows, self.schema, self.sort_by, files.join(self.folder, part_name(".parquet")))
        except (pa.ArrowException, OSError):
            # A bad row is a bug and a failed write is the disk's; either way the round must
            # fail (and be rerun) rather than publish less than it fetched.
            self.error.inc(len(rows))
            raise
        self.success.inc(len(rows))
        self.files.inc()
        self.latency_us.update(int((time.perf_counter() - started) * 1e6))


def write_part(rows: list[dict[str, Any]], schema: pa.Schema, sort_by: tuple[str, ...], path: str) -> None:
    """Writes rows as one zstd Parquet file, sorted by the ``sort_by`` columns."""
    if sort_by:
        rows.sort(key=lambda r: tuple(r[c] for c in sort_by))
    table = pa.Table.from_pylist(rows, schema=schema)
    sink = pa.BufferOutputStream()  # a part is bounded (FLUSH_ROWS); any filesystem takes bytes
    pq.write_table(table, sink, compression="zstd")
    files.write_bytes(path, sink.getvalue().to_pybytes())


class WritePageEvents(beam.PTransform[beam.PCollection[dict[str, Any]], beam.PCollection[None]]):
    """Page event dicts → ``pages/round=N/part-*.parquet``."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, events: beam.PCollection[dict[str, Any]]) -> beam.PCollection[None]:
        return (
            events
            | "One row per event" >> beam.Map(lambda event: [event])
            | "Write pages Parquet"
            >> beam.ParDo(_ParquetPartsFn(self.outputs.staged("pages"), PAGES_SCHEMA, ("url",), "pages"))
        )


class WriteLinkEdges(beam.PTransform[beam.PCollection[ParsedPage], beam.PCollection[None]]):
    """``ParsedPage`` → ``links/round=N/part-*.parquet``, one row per edge, sorted by source."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, pages: beam.PCollection[ParsedPage]) -> beam.PCollection[None]:
        return (
            pages
            | "Edges of each page" >> beam.Map(link_edges)
            | "Write links Parquet"
            >> beam.ParDo(_ParquetPartsFn(self.outputs.staged("links"), LINKS_SCHEMA, ("src", "dst"), "links"))
        )

