"""Store pages once: WARC/1.1 files with a CDXJ index beside each, and each fetch's page event.

A writer DoFn owns one gzipped WARC file per bundle (rotated by size) and starts it with a
``warcinfo`` record. Each fetch becomes a response record followed by its request record
(``WARC-Concurrent-To`` links them), each its own gzip member, with block and payload
digests (warcio computes them), ``WARC-IP-Address`` and, when the body cap cut the body,
``WARC-Truncated: length``. A fetch is serialised in memory first and appended whole, so a
record that cannot be built never leaves half a gzip member in the file.

Copies, as the content-seen stage marked them (``transforms/content_seen.py``), are not
stored again (:func:`capture_kind`):

- an exact copy whose payload is byte for byte its original's becomes a ``revisit`` record
  (profile identical-payload-digest, ``WARC-Refers-To-Target-URI`` and ``-Date`` naming the
  original; :mod:`beamcrawl.core.warc_revisit`) with its request record, instead of a
  second response. An exact copy sent with other wire bytes (another Content-Encoding) is
  not an identical payload and gets an ordinary response record;
- a near copy gets no record at all: its content is its original's for every purpose the
  archive serves, and the page event says whose (``duplicate_of``);
- a 304 to a conditional request (a revisit that found the page unchanged) becomes a
  ``revisit`` record of profile server-not-modified, its block the 304's headers, referring
  to the URL's stored copy by URI and date (WARC 1.1 §6.7.2).

Encodings are recorded as they were on the wire, as far as the wire can be recorded:

- Content-Encoding is kept, with the body exactly as the server compressed it (the HTTP
  client does not decompress), so the payload digest is that of the bytes sent;
- Transfer-Encoding is undone by the HTTP client, so its header is renamed
  ``X-Crawler-Transfer-Encoding`` rather than left claiming chunks that are not there;
- header bytes are written back as received (the client decodes them as latin-1), not
  percent-encoded as warcio would do for non-ASCII values.

Beside ``part-X.warc.gz`` the writer puts ``part-X.cdxj``: one line per response or revisit
record (:mod:`beamcrawl.core.cdxj`), sorted by SURT key then timestamp, built from the
offsets and lengths the writer knows, so no file is read back. The page event's ``blob`` is
``<file relative to OUT>@<offset>`` of the response (or revisit) record, pointing at its
committed location; None for a near copy. Bodies stop here: the page event carries no bytes.

Governed by: ``warc_max_bytes`` (rotation size), --user-agent (recorded in warcinfo).
"""

from __future__ import annotations

import datetime as dt
import io
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator
from urllib.parse import urlsplit

import apache_beam as beam
from apache_beam.metrics import Metrics
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from beamcrawl import DEFAULT_USER_AGENT, __version__
from beamcrawl.core import cdxj, files
from beamcrawl.core.outputs import RoundOutputs, part_name
from beamcrawl.core.conditional import is_conditional, revisit_warc_headers
from beamcrawl.core.warc_revisit import is_identical_payload, revisit_record
from beamcrawl.schemas.arrow import PAGES_HEADER_COLUMNS, signed64
from beamcrawl.schemas.records import ParsedPage

__all__ = [
    "ArchivedFetch",
    "WriteWarc",
    "archive_fetch",
    "capture_kind",
    "page_event",
    "warcinfo_bytes",
    "write_fetch_records",
    "write_revisit_records",
]

HOP_BY_HOP_RENAMED = {"transfer-encoding": "X-Crawler-Transfer-Encoding"}
WARC_VERSION = "1.1"

WriterFactory = Callable[[BinaryIO], WARCWriter]


def _new_writer(out: BinaryIO) -> WARCWriter:
    return WARCWriter(out, gzip=True, warc_version=WARC_VERSION)


class _WireHeaders(StatusAndHeaders):
    """HTTP headers serialised as the bytes that were received.

    The HTTP client decodes header bytes as latin-1, so encoding them as latin-1 gives the
    original bytes back; warcio's default would percent-encode any non-ASCII value.
    """

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        try:
            self.headers_buff = self.to_str(header_filter).encode("latin-1") + b"\r\n"
        except UnicodeEncodeError:  # a value that did not come off the wire: warcio's way
            super().compute_headers_buffer(header_filter)


# WARC named fields in the order most tools write them (the standard allows any order, but
# some readers and people look for WARC-Type first).
_FIELD_ORDER = {
    name.lower(): i
    for i, name in enumerate(
        ("WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI", "WARC-IP-Address",
         "WARC-Concurrent-To", "WARC-Truncated", "WARC-Warcinfo-ID")
    )
}


def _conventional_order(record: ArcWarcRecord) -> None:
    record.rec_headers.headers.sort(key=lambda h: _FIELD_ORDER.get(h[0].lower(), len(_FIELD_ORDER)))


def _iso(epoch: float) -> str:
    return str(datetime_to_iso_date(dt.datetime.fromtimestamp(epoch, dt.timezone.utc).replace(tzinfo=None), use_micros=True))


def capture_kind(page: ParsedPage) -> str | None:
    """How a fetched page is archived: ``"response"``, ``"revisit"``, ``"not_modified"`` or
    None (not at all).

    A 304 answering a conditional request is ``"not_modified"``: the server said the stored
    copy stands (a 304 to an unconditional request is a fault, archived as it came).
    New content gets a response record. An exact copy whose payload digest is its
    original's gets a revisit record: the identical-payload-digest profile promises exactly
    that, so a copy with other wire bytes (another Content-Encoding of the same payload) or
    without its original's digest and date gets a response instead. A near copy is not
    archived: its original stands for it.
    """
    f = page.fetch
    if f.status == 304 and is_conditional(f.request_headers):
        return "not_modified"
    if page.duplicate_of is None:
        return "response"
    if page.duplicate_kind == "near":
        return None
    if page.original_fetched_at is not None and is_identical_payload(page, page.original_digest):
        return "revisit"
    return "response"


def _request_record(writer: WARCWriter, page: ParsedPage) -> ArcWarcRecord:
    """The request record of a fetch: what the client sent."""
    f = page.fetch
    parts = urlsplit(f.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    req_headers = [("Host", parts.netloc)] + list(f.request_headers)
    return writer.create_warc_record(
        f.url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=_WireHeaders(f"GET {target} HTTP/1.1", req_headers, is_http_request=True),
        warc_headers_dict={"WARC-Date": _iso(f.fetched_at)},
    )


def _write_with_request(writer: WARCWriter, capture: ArcWarcRecord, request: ArcWarcRecord) -> int:
    """Writes ``capture``, then ``request`` linked to it; returns the bytes ``capture`` took.

    The capture first: it is what the blob points at, and readers expect it first.
    """
    start = writer.out.tell()
    writer.write_record(capture)
    length = writer.out.tell() - start
    request.rec_headers.add_header("WARC-Concurrent-To", capture.rec_headers.get_header("WARC-Record-ID"))
    _conventional_order(request)
    writer.write_record(request)
    return length


def write_fetch_records(writer: WARCWriter, page: ParsedPage) -> tuple[ArcWarcRecord, int]:
    """Writes a fetch's response record, then its request record, to ``writer.out``.

    Returns the response record (its digests now set) and the number of bytes it took.
    ``writer.out`` must have ``tell()`` (callers write to a ``BytesIO``).
    """
    f = page.fetch
    request = _request_record(writer, page)
    headers = [(HOP_BY_HOP_RENAMED.get(k.lower(), k), v) for k, v in f.response_headers]
    warc_headers = {"WARC-Date": _iso(f.fetched_at)}
    if f.ip:
        warc_headers["WARC-IP-Address"] = f.ip
    if f.truncated:
        warc_headers["WARC-Truncated"] = f.truncated
    response = writer.create_warc_record(
        f.url,
        "response",
        payload=io.BytesIO(f.raw_body),
        length=len(f.raw_body),
        http_headers=_WireHeaders(f"{f.status} {f.reason}".strip(), headers, protocol=f"HTTP/{f.http_version}"),
        warc_headers_dict=warc_headers,
    )
    _conventional_order(response)
    return response, _write_with_request(writer, response, request)


def write_revisit_records(writer: WARCWriter, page: ParsedPage) -> tuple[ArcWarcRecord, int]:
    """Writes an exact copy's revisit record, then its request record, to ``writer.out``.

    The revisit holds the copy's own status line and response headers (as received) and
    refers to the original by URL, date and payload digest; the payload stays with the
    original's response record.

    Returns:
        The revisit record and the number of bytes it took.

    Raises:
        ValueError: The page is not an exact copy with its original's digest and date.
    """
    if page.duplicate_of is None or page.original_digest is None or page.original_fetched_at is None:
        raise ValueError("a revisit needs the original's URL, digest and fetch time")
    request = _request_record(writer, page)
    revisit = revisit_record(
        writer,
        page,
        page.duplicate_of,
        page.original_fetched_at,
        page.original_digest,
        headers_class=_WireHeaders,
    )
    return revisit, _write_with_request(writer, revisit, request)


def write_not_modified_records(writer: WARCWriter, page: ParsedPage) -> tuple[ArcWarcRecord, int]:
    """Writes a 304's revisit record (profile server-not-modified), then its request record.

    The record's block is the 304's status line and headers, with no payload; it refers to
    the URL's stored copy: ``WARC-Refers-To-Target-URI`` the URL itself and
    ``WARC-Refers-To-Date`` the fetch time of the copy held (from the URL's revisit state,
    when known).
    """
    f = page.fetch
    request = _request_record(writer, page)
    headers = [(HOP_BY_HOP_RENAMED.get(k.lower(), k), v) for k, v in f.response_headers]
    stored_at = (page.revisit or {}).get("stored_at") or ((f.entry.revisit or {}).get("stored_at"))
    warc_headers = {"WARC-Date": _iso(f.fetched_at)}
    if f.ip:
        warc_headers["WARC-IP-Address"] = f.ip
    refers = revisit_warc_headers(f.url, _iso(stored_at) if stored_at else "")
    if not stored_at:
        del refers["WARC-Refers-To-Date"]
    warc_headers.update(refers)
    revisit = writer.create_warc_record(
        f.url,
        "revisit",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=_WireHeaders(f"{f.status} {f.reason}".strip(), headers, protocol=f"HTTP/{f.http_version}"),
        warc_headers_dict=warc_headers,
    )
    revisit.rec_headers.remove_header("WARC-Payload-Digest")  # no payload: nothing to digest
    _conventional_order(revisit)
    return revisit, _write_with_request(writer, revisit, request)


@dataclass(frozen=True)
class ArchivedFetch:
    """A fetch serialised as WARC records, ready to append to a file."""

    data: bytes  # the capture (response or revisit) then the request record, each one gzip member
    response: ArcWarcRecord  # the capture record: what the blob and the CDXJ line point at
    response_length: int  # bytes of the capture record at the start of ``data``


def archive_fetch(
    page: ParsedPage, make_writer: WriterFactory = _new_writer, *, revisit: bool | None = None, kind: str | None = None
) -> ArchivedFetch:
    """Serialises a fetch's records in memory (pure: no file is touched).

    Args:
        page: The fetch (the caller leaves near copies out).
        make_writer: Makes the WARC writer over the in-memory buffer.
        revisit: Whether to write a revisit record rather than a response; None decides by
            :func:`capture_kind` (which hashes the payload: callers that know pass it).
        kind: :func:`capture_kind`'s answer, if the caller has it (overrides ``revisit``).
    """
    if kind is None:
        kind = capture_kind(page) if revisit is None else ("revisit" if revisit else "response")
    buf = io.BytesIO()
    write = {"revisit": write_revisit_records, "not_modified": write_not_modified_records}.get(kind, write_fetch_records)
    record, length = write(make_writer(buf), page)
    return ArchivedFetch(buf.getvalue(), record, length)


def warcinfo_bytes(
    filename: str, user_agent: str, is_part_of: str, make_writer: WriterFactory = _new_writer
) -> bytes:
    """The ``warcinfo`` record that heads every file (IIPC's recommended fields)."""
    buf = io.BytesIO()
    writer = make_writer(buf)
    info = writer.create_warcinfo_record(
        filename,
        {
            "software": f"beamcrawl/{__version__} (warcio)",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "http-header-user-agent": user_agent,
            "robots": "obey",
            "isPartOf": is_part_of,
        },
    )
    writer.write_record(info)
    return buf.getvalue()


def _headers_joined(headers: list[tuple[str, str]]) -> dict[str, str]:
    """The published response headers by column, repeated headers joined HTTP-style."""
    found: dict[str, list[str]] = {}
    for name, value in headers:
        column = PAGES_HEADER_COLUMNS.get(name.lower())
        if column is not None:
            found.setdefault(column, []).append(value.strip())
    return {column: ", ".join(values) for column, values in found.items()}


def _changed(page: ParsedPage) -> bool | None:
    """Whether the fetch found new content: True for a first visit or a change, False for
    an unchanged page (a 304, or the same checksum), None when it says nothing (errors,
    redirects, gone pages, or no schedule)."""
    observed = (page.schedule or {}).get("observed")
    if observed in ("first", "changed"):
        return True
    if observed == "unchanged":
        return False
    return None if page.schedule is not None else True


def page_event(page: ParsedPage, blob: str | None, note: str | None = None) -> dict[str, Any]:
    """The fetch event of DESIGN.md §1 step 6, as a pages/ Parquet row (its round is the
    folder it is written to, ``pages/round=N/``).

    Args:
        page: The parsed fetch.
        blob: ``file@offset`` of its response (or revisit) record, or None when nothing was
            archived.
        note: Why a fetched page was not archived (goes to ``error``).
    """
    f = page.fetch
    fetched = f.outcome == "fetched"
    headers = _headers_joined(f.response_headers) if fetched else {}
    event: dict[str, Any] = {
        "url": f.url,
        "url_fp": signed64(f.entry.fp),
        "host": f.entry.host,
        "final_url": f.final_url or None,
        "status": f.status if fetched else None,
        "outcome": f.outcome,
        "fetched_at": dt.datetime.fromtimestamp(f.fetched_at, dt.timezone.utc) if f.fetched_at else None,
        "elapsed_ms": round(f.elapsed * 1000, 3) if fetched else None,
        "waited_ms": round(f.waited * 1000, 3) if f.outcome in ("fetched", "error") else None,
        "content_type": f.content_type or None,
        "content_length": len(f.body) if fetched else None,
        "truncated": f.truncated,
        "changed": _changed(page) if fetched else None,
        "checksum": page.checksum,
        "simhash": page.simhash,
        "duplicate_of": page.duplicate_of,
        "duplicate_kind": page.duplicate_kind,
        "duplicate_distance": page.duplicate_distance,
        "blob": blob,
        "out_links": len(page.links),
        "title": page.title,
        "meta_noindex": page.meta_noindex,
        "meta_nofollow": page.meta_nofollow,
        "ip": f.ip,
        "error": f.error or note,
        "depth": f.entry.depth,
        "source": f.entry.source,
    }
    for column in PAGES_HEADER_COLUMNS.values():
        event[column] = headers.get(column)
    return event


class _MetricsCollector:
    """The store stage's metrics: received, success, error, latency, files and records."""

    def __init__(self) -> None:
        ns = "store"
        self.received = Metrics.counter(ns, "received")
        self.success = Metrics.counter(ns, "success")
        self.error = Metrics.counter(ns, "error")
        self.not_fetched = Metrics.counter(ns, "no_response")  # event only: nothing to archive
        self.skipped = Metrics.counter(ns, "skipped")  # no request made: no event either
        self.latency_us = Metrics.distribution(ns, "latency_us")
        self.records = Metrics.counter(ns, "warc_records")
        self.files = Metrics.counter(ns, "warc_files")
        self.file_bytes = Metrics.distribution(ns, "warc_file_bytes")
        self.cdxj_lines = Metrics.counter(ns, "cdxj_lines")
        self.revisits = Metrics.counter(ns, "revisits")  # exact copies archived as revisit records
        self.not_modified = Metrics.counter(ns, "not_modified")  # 304s archived as revisit records
        self.near_copies = Metrics.counter(ns, "near_copies")  # event only: the original stands for it


class _WriteWarcFn(beam.DoFn):
    """Appends fetched pages to this bundle's WARC file, indexes them, yields page events."""

    def __init__(self, outputs: RoundOutputs, max_bytes: int, user_agent: str = DEFAULT_USER_AGENT) -> None:
        self.outputs = outputs
        self.max_bytes = max_bytes
        self.user_agent = user_agent
        self.metrics: _MetricsCollector | None = None

    def setup(self) -> None:
        self.metrics = _MetricsCollector()

    def start_bundle(self) -> None:
        self.fh: BinaryIO | None = None
        self.offset = 0
        self.name = ""
        self.rel = ""
        self.index: list[cdxj.CdxjEntry] = []

    def _open(self) -> None:
        assert self.metrics is not None
        self.name = part_name(".warc.gz")
        self.rel = f"{self.outputs.final_rel('warc')}/{self.name}"
        self.fh = files.open_write(files.join(self.outputs.staged("warc"), self.name))
        head = warcinfo_bytes(self.name, self.user_agent, f"beamcrawl {self.outputs.label}")
        self.fh.write(head)
        self.offset = len(head)
        self.index = []
        self.metrics.files.inc()
        self.metrics.records.inc()

    def _close(self) -> None:
        if self.fh is None:
            return
        assert self.metrics is not None
        self.fh.close()
        self.fh = None
        self.metrics.file_bytes.update(self.offset)
        stem = self.name[: -len(".warc.gz")]
        lines = cdxj.write_cdxj(files.join(self.outputs.staged("cdxj"), f"{stem}.cdxj"), self.index)
        self.metrics.cdxj_lines.inc(lines)
        self.index = []

    def process(self, page: ParsedPage) -> Iterator[dict[str, Any]]:
        assert self.metrics is not None
        self.metrics.received.inc()
        if page.fetch.outcome in ("deferred", "robots_disallowed"):
            self.metrics.skipped.inc()
            return iter(())  # no request was made: nothing to archive, no fetch event
        return iter((self._store(page),))

    def _store(self, page: ParsedPage) -> dict[str, Any]:
        assert self.metrics is not None
        if page.fetch.outcome != "fetched":
            self.metrics.not_fetched.inc()
            return page_event(page, None)
        kind = capture_kind(page)
        if kind is None:
            self.metrics.near_copies.inc()
            return page_event(page, None)
        started = time.perf_counter()
        try:
            archived = archive_fetch(page, kind=kind)
        except (ValueError, UnicodeError) as exc:  # a response warcio cannot represent
            self.metrics.error.inc()
            note = f"not archived: {type(exc).__name__}: {exc}"[:300]
            return page_event(page, None, note)
        if self.fh is None or self.offset >= self.max_bytes:
            self._close()
            self._open()
        assert self.fh is not None
        offset = self.offset
        self.fh.write(archived.data)
        self.offset += len(archived.data)
        entry = cdxj.entry_for_record(archived.response, offset, archived.response_length, self.rel)
        if entry is not None:
            self.index.append(entry)
        self.metrics.records.inc(2)
        self.metrics.success.inc()
        if kind == "revisit":
            self.metrics.revisits.inc()
        elif kind == "not_modified":
            self.metrics.not_modified.inc()
        self.metrics.latency_us.update(int((time.perf_counter() - started) * 1e6))
        return page_event(page, f"{self.rel}@{offset}")

    def finish_bundle(self) -> None:
        self._close()


class WriteWarc(beam.PTransform[beam.PCollection[ParsedPage], beam.PCollection[dict[str, Any]]]):
    """``ParsedPage`` → page event dicts, archiving each fetched page in a WARC file and
    indexing it in the CDXJ file beside it."""

    def __init__(self, outputs: RoundOutputs, max_bytes: int, user_agent: str = DEFAULT_USER_AGENT) -> None:
        super().__init__()
        self.outputs = outputs
        self.max_bytes = max_bytes
        self.user_agent = user_agent

    def expand(self, pages: beam.PCollection[ParsedPage]) -> beam.PCollection[dict[str, Any]]:
        return pages | "Append to WARC" >> beam.ParDo(_WriteWarcFn(self.outputs, self.max_bytes, self.user_agent))
