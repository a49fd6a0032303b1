"""Export the crawl's state (seen set, host records) from the store as Parquet.

The store is read with range scans of ``chunk_rows`` rows, each resumed just after the last
key of the one before, so memory holds one chunk whatever the table's size; each chunk
becomes one row group, and a file is closed (and another started) every ``file_rows`` rows.
Files are written under a temporary folder and moved into place when the export is
complete, so a reader never sees half an export and a failed one leaves the last good one.
Nothing here imports Beam.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from beamcrawl.core.urls.urlnorm import host_of
from beamcrawl.schemas.arrow import (
    HOSTS_SCHEMA,
    QUARANTINE_SCHEMA,
    URLS_SCHEMA,
    signed64,
)
from beamcrawl.schemas.records import (
    JSON_CELL,
    OUTCOME_CELL,
    QUEUED_CELL,
    HostRecord,
    UrlState,
    key_fp,
)
from beamcrawl.stores.base import Row, Store

__all__ = ["EXPORTS", "ExportResult", "export_table", "host_row", "scan_chunks", "url_row"]

CHUNK_ROWS = 20_000
FILE_ROWS = 5_000_000


def _ts_ms(ms: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc) if ms else None


def _ts_s(seconds: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc) if seconds else None


def url_row(key: bytes, cells: dict[str, bytes]) -> dict[str, Any] | None:
    """A ``urls`` export row from a seen-set row (None if the row has no URL)."""
    state = UrlState.from_cells(cells) if "u:url" in cells or QUEUED_CELL in cells or OUTCOME_CELL in cells else None
    if state is None or not state.url:
        return None
    try:
        host: str | None = host_of(state.url)
    except ValueError:
        host = None
    return {
        "url": state.url,
        "url_fp": signed64(key_fp(key)),
        "host": host,
        "state": state.state,
        "source": state.source,
        "depth": state.depth,
        "first_seen": _ts_ms(state.first_seen_ms),
        "status": state.status,
        "fetched_at": _ts_ms(state.fetched_at_ms),
        "checksum": state.checksum,
        "error": state.error,
    }


def host_row(key: bytes, cells: dict[str, bytes]) -> dict[str, Any] | None:
    """A ``hosts`` export row from a host record (None if the row holds none)."""
    raw = cells.get(JSON_CELL)
    if raw is None:
        return None
    data = json.loads(raw)
    known = {f.name for f in dataclasses.fields(HostRecord)}
    # Fields added to the record later are ignored here rather than failing the export.
    record = HostRecord(
        **{k: v for k, v in data.items() if k in known} | {"host": data.get("host") or key.decode("utf-8", "replace")}
    )
    robots = record.robots or {}
    return {
        "host": record.host,
        "delay": record.delay,
        "last_fetch_end": _ts_s(record.last_fetch_end),
        "not_before": _ts_s(record.not_before),
        "last_response_time": record.last_response_time,
        "robots_kind": robots.get("kind"),
        "robots_status": record.robots_status,
        "robots_fetched_at": _ts_s(record.robots_fetched_at),
        # getattr: fields a store written by an older version may lack
        "robots_failing_since": _ts_s(getattr(record, "robots_failing_since", 0.0)),
        "ip": record.ip,
        "dns_error": getattr(record, "dns_error", None),
        "consecutive_errors": record.consecutive_errors,
        "fetches": record.fetches,
    }


@dataclass(frozen=True)
class _Export:
    table: str
    schema: pa.Schema
    row: Callable[[bytes, dict[str, bytes]], dict[str, Any] | None]
    prefix: bytes = b""  # rows of the table outside it are not this export's (not "skipped")


def quarantine_row(key: bytes, cells: dict[str, bytes]) -> dict[str, Any] | None:
    """A ``quarantine`` export row from a ``meta`` row (None for the other meta rows)."""
    from beamcrawl.state import quarantine

    if not key.startswith(quarantine.PREFIX):
        return None
    state = quarantine.load_state(cells)
    if state is None:
        return None
    rounds = [r for r in state.get("rounds", []) if isinstance(r, int)]
    return {
        "kind": state.get("kind"),
        "id": state.get("id"),
        "host": state.get("host") or None,
        "quarantined": bool(state.get("quarantined")),
        "failed_rounds": len(rounds),
        "first_round": min(rounds) if rounds else None,
        "last_round": max(rounds) if rounds else None,
        "stage": state.get("stage"),
        "exception": state.get("exception"),
        "message": state.get("message"),
    }


EXPORTS = {
    "urls": _Export("urls", URLS_SCHEMA, url_row),
    "hosts": _Export("hosts", HOSTS_SCHEMA, host_row),
    "quarantine": _Export("meta", QUARANTINE_SCHEMA, quarantine_row, prefix=b"quarantine/"),
}


def scan_chunks(store: Store, table: str, chunk_rows: int = CHUNK_ROWS) -> Iterator[list[Row]]:
    """Yields a table's rows in key order, ``chunk_rows`` at a time, one range scan each."""
    start: bytes | None = None
    while True:
        rows = list(store.read_range(table, start, None, limit=chunk_rows))
        if rows:
            yield rows
        if len(rows) < chunk_rows:
            return
        start = rows[-1][0] + b"\x00"  # the smallest key after the last one read


@dataclass(frozen=True)
class ExportResult:
    what: str
    rows: int
    skipped: int
    files: list[str]


def export_table(
    store: Store,
    what: str,
    out_dir: str,
    chunk_rows: int = CHUNK_ROWS,
    file_rows: int = FILE_ROWS,
) -> ExportResult:
    """Exports ``urls`` or ``hosts`` to ``out_dir/<what>/part-NNNNN.parquet`` (replacing an
    earlier export of the same table)."""
    spec = EXPORTS[what]
    final = os.path.join(out_dir, what)
    tmp = os.path.join(out_dir, f".{what}.tmp-{uuid.uuid4().hex[:8]}")
    os.makedirs(tmp)
    rows_out = skipped = 0
    names: list[str] = []
    writer: pq.ParquetWriter | None = None
    in_file = 0
    try:
        for chunk in scan_chunks(store, spec.table, chunk_rows):
            rows = []
            for key, cells in chunk:
                if not key.startswith(spec.prefix):
                    continue
                row = spec.row(key, cells)
                if row is None:
                    skipped += 1
                else:
                    rows.append(row)
            if not rows:
                continue
            if writer is None or in_file >= file_rows:
                if writer is not None:
                    writer.close()
                names.append(f"part-{len(names):05d}.parquet")
                writer = pq.ParquetWriter(os.path.join(tmp, names[-1]), spec.schema, compression="zstd")
                in_file = 0
            writer.write_table(pa.Table.from_pylist(rows, schema=spec.schema))
            in_file += len(rows)
            rows_out += len(rows)
        if writer is None:  # an empty table still exports a file with the schema
            names.append("part-00000.parquet")
            pq.write_table(spec.schema.empty_table(), os.path.join(tmp, names[-1]), compression="zstd")
        else:
            writer.close()
            writer = None
    except BaseException:
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = f"{final}.old-{uuid.uuid4().hex[:8]}"
    if os.path.exists(final):
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return ExportResult(what, rows_out, skipped, [os.path.join(final, n) for n in names])
