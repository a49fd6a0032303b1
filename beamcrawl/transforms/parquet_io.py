"""Publish: page events to ``pages/`` and link edges to ``links/``, as Parquet per round.

Each writer collects its bundle's rows and writes one zstd-compressed Parquet part file
with the explicit schema from :mod:`beamcrawl.schemas.arrow` (links sorted by source), in
the round's staging folder; the round's commit moves the files into place.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any, Callable, Iterable

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.metrics import Metrics

from beamcrawl.core.outputs import RoundOutputs, part_name
from beamcrawl.core.urlnorm import host_of, registered_domain
from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA, signed64
from beamcrawl.schemas.records import ParsedPage

__all__ = ["WritePageEvents", "WriteLinkEdges", "link_edges"]

FLUSH_ROWS = 200_000


def link_edges(page: ParsedPage, round_no: int) -> list[dict[str, Any]]:
    """One links/ row per out-link of a page."""
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
                "round": round_no,
            }
        )
    return rows


class _ParquetPartsFn(beam.DoFn):
    """Buffers a bundle's rows and writes them as one Parquet part file."""

    def __init__(self, folder: str, schema: pa.Schema, sort_by: str | None, counter: str) -> None:
        self.folder = folder
        self.schema = schema
        self.sort_by = sort_by
        self.rows_written = Metrics.counter("publish", counter)

    def start_bundle(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def process(self, rows: Iterable[dict[str, Any]]) -> None:
        self.rows.extend(rows)
        if len(self.rows) >= FLUSH_ROWS:
            self._flush()

    def finish_bundle(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        rows = self.rows
        if self.sort_by:
            rows.sort(key=lambda r: r[self.sort_by])
        table = pa.Table.from_pylist(rows, schema=self.schema)
        os.makedirs(self.folder, exist_ok=True)
        pq.write_table(table, os.path.join(self.folder, part_name(".parquet")), compression="zstd")
        self.rows_written.inc(len(rows))
        self.rows = []


class WritePageEvents(beam.PTransform):
    """Page event dicts → ``pages/round=N/part-*.parquet``."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, events: beam.PCollection) -> beam.PCollection:
        return (
            events
            | "One row per event" >> beam.Map(lambda event: [event])
            | "Write pages Parquet"
            >> beam.ParDo(_ParquetPartsFn(self.outputs.staged("pages"), PAGES_SCHEMA, "url", "page_rows"))
        )


class WriteLinkEdges(beam.PTransform):
    """``ParsedPage`` → ``links/round=N/part-*.parquet``, one row per edge, sorted by source."""

    def __init__(self, outputs: RoundOutputs) -> None:
        super().__init__()
        self.outputs = outputs

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        round_no = self.outputs.round_no
        edges: Callable[[ParsedPage], list[dict[str, Any]]] = lambda page: link_edges(page, round_no)
        return (
            pages
            | "Edges of each page" >> beam.Map(edges)
            | "Write links Parquet"
            >> beam.ParDo(_ParquetPartsFn(self.outputs.staged("links"), LINKS_SCHEMA, "src", "link_rows"))
        )

