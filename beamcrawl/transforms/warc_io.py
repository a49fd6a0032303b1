"""Store pages once: WARC/1.1 files with a CDXJ index beside each, and each fetch's page event.

A writer DoFn owns one gzipped WARC file per bundle (rotated by size) and starts it with a
``warcinfo`` record. Each fetch becomes a response record followed by its request record
(``WARC-Concurrent-To`` links them), each its own gzip member, with block and payload
digests, ``WARC-IP-Address`` and, when the body cap cut the body, ``WARC-Truncated: length``.
The records are built as bytes by :mod:`beamcrawl.core.archive.warc_records` (warcio's writer cost
as much CPU per page as the compression; it still writes each file's ``warcinfo``, and
warcio reads the files back in the tests). A fetch is serialised in memory first and
appended whole, so a record that cannot be built never leaves half a gzip member in the file.

Copies, as the content-seen stage marked them (``transforms/content_seen.py``), are not
stored again (:func:`capture_kind`):

- an exact copy whose payload is byte for byte its original's becomes a ``revisit`` record
  (profile identical-payload-digest, ``WARC-Refers-To-Target-URI`` and ``-Date`` naming the
  original; :mod:`beamcrawl.core.archive.warc_revisit`) with its request record, instead of a
  second response. An exact copy sent with other wire bytes (another Content-Encoding) is
  not an identical payload and gets an ordinary response record;
- a near copy gets no record at all: its content is its original's for every purpose the
  archive serves, and the page event says whose (``duplicate_of``);
- a 304 to a conditional request (a revisit that found the page unchanged) becomes a
  ``revisit`` record of profile server-not-modified, its block the 304's headers, referring
  to the URL's stored copy by URI and date (WARC 1.1 §6.7.2);
- a 200 to a plain GET (a page without validators) whose payload is byte for byte the
  URL's own stored capture becomes an identical-payload-digest ``revisit`` of that capture,
  by the URL, fetch time and digest its revisit state keeps; it is not stored again.

Encodings are recorded as they were on the wire, as far as the wire can be recorded:

- Content-Encoding is kept, with the body exactly as the server compressed it (the HTTP
  client does not decompress), so the payload digest is that of the bytes sent;
- Transfer-Encoding is undone (``chunked`` by the HTTP client, any other coding by the
  fetcher), so the record holds the entity (WARC 1.1 §5.9: the payload of an application/http
  block is its entity-body, and the payload digest is of it) and the header is renamed
  ``X-Crawler-Transfer-Encoding`` rather than left claiming codings that are not there. A
  transfer coding that cannot be undone is a fetch error, not a record;
- header bytes are written back as received (the client decodes them as latin-1), not
  percent-encoded as warcio would do for non-ASCII values.

Beside ``part-X.warc.gz`` the writer puts ``part-X.cdxj``: one line per response or revisit
record (:mod:`beamcrawl.core.archive.cdxj`), sorted by SURT key then timestamp, built from the
offsets, lengths, digests and headers the writer knows as it writes, so no file or record
is read back. The page event's ``blob`` is ``<file relative to OUT>@<offset>`` of the
response (or revisit) record, pointing at its committed location; None for a near copy.
Bodies stop here: the page event carries no bytes. Pages come as content seen's batches
(``PageBatch``), one DoFn call per batch, and a batch's events go on as one list.

The index of the open file is held until the file closes (it is written sorted), about 830
bytes an entry: a file is also rotated once its index holds ``INDEX_ENTRIES`` entries, so that
small records (revisits, redirects) cannot make a 1 GiB file's index hold a million entries.
At the default rotation size a file of ordinary captures (about 20 KB a page) closes by size
first.

Governed by: --warc-max-bytes (rotation size), --user-agent (recorded in warcinfo).
"""

from __future__ import annotations

import datetime as dt
import io
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator, Sequence
from urllib.parse import urlsplit

import apache_beam as beam
from apache_beam.metrics import Metrics
from warcio.warcwriter import WARCWriter

from beamcrawl import DEFAULT_USER_AGENT, __version__
from beamcrawl.core.archive import cdxj, warc_records
from beamcrawl.core.archive.spool import SpoolReader
from beamcrawl.core.archive.warc_records import (
    REQUEST_CONTENT_TYPE,
    RESPONSE_CONTENT_TYPE,
    first_fields,
    gzip_member,
    http_head,
    record,
    status_code,
    status_line,
)
from beamcrawl.core.archive.warc_revisit import (
    fetch_digest,
    is_identical_payload,
    payload_digest,
    revisit_fields,
    warc_date,
)
from beamcrawl.core.net.conditional import is_conditional, revisit_warc_headers
from beamcrawl.core.policy.usage_prefs import PURPOSES
from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import RoundOutputs, part_name
from beamcrawl.core.urls.urlnorm import InvalidURL, host_of
from beamcrawl.schemas.arrow import PAGES_HEADER_COLUMNS, signed64
from beamcrawl.schemas.records import Batched, FetchResult, PageBatch, ParsedPage, Spooled
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = [
    "ArchivedFetch",
    "WriteWarc",
    "archive_fetch",
    "capture_kind",
    "held_copy",
    "page_event",
    "request_member",
    "warcinfo_bytes",
]

HOP_BY_HOP_RENAMED = {"transfer-encoding": "X-Crawler-Transfer-Encoding"}
WARC_VERSION = "1.1"
EMPTY_PAYLOAD_DIGEST = payload_digest(b"")  # a request's: GETs send no body
# A WARC file closes at this many CDXJ index entries (or at its size in bytes); its index is
# held cdxj.RUN_ENTRIES at a time, the rest in sorted runs on local disk (cdxj.SortedIndex).
INDEX_ENTRIES = 50_000

WriterFactory = Callable[[BinaryIO], WARCWriter]


def _new_writer(out: BinaryIO) -> WARCWriter:
    return WARCWriter(out, gzip=True, warc_version=WARC_VERSION)


def capture_kind(page: ParsedPage) -> str | None:
    """How a fetched page is archived: ``"response"``, ``"revisit"``, ``"unchanged"``,
    ``"not_modified"`` or None (not at all).

    A 304 answering a conditional request is ``"not_modified"``: the server said the stored
    copy stands (a 304 to an unconditional request is a fault, archived as it came).
    New content gets a response record. An exact copy whose payload digest is its
    original's gets a revisit record: the identical-payload-digest profile promises exactly
    that, so a copy with other wire bytes (another Content-Encoding of the same payload) or
    without its original's digest and date gets a response instead. A near copy is not
    archived: its original stands for it. A 200 that repeats the URL's own stored capture
    byte for byte is ``"unchanged"``: a revisit record of that capture (:func:`held_copy`).
    """
    f = page.fetch
    if f.status == 304 and is_conditional(f.request_headers):
        return "not_modified"
    if page.duplicate_of is None:
        return "unchanged" if held_copy(page) is not None else "response"
    if page.duplicate_kind == "near":
        return None
    if page.original_fetched_at is not None and is_identical_payload(page, page.original_digest):
        return "revisit"
    return "response"


def held_copy(page: ParsedPage) -> tuple[float, str] | None:
    """``(fetch time, payload digest)`` of the URL's own stored capture, when this 2xx
    fetch repeats it byte for byte; else None.

    A page without validators is revisited with a plain GET, and an unchanged one comes
    back whole. Its bytes are already archived under its own URL (the URL's revisit state
    says when, and with which digest), so the fetch is an identical-payload-digest revisit
    of that capture rather than a second copy of the payload.
    """
    f = page.fetch
    state = page.revisit
    if not state or not 200 <= f.status < 300:
        return None
    stored_at, digest = state.get("stored_at"), state.get("digest")
    if stored_at is None or digest is None or stored_at >= f.fetched_at:
        return None  # nothing held yet, or this very fetch is the copy held
    if not is_identical_payload(page, digest):
        return None
    return stored_at, digest


def _request_record(f: FetchResult, date: str, concurrent_to: str, record_id: str) -> bytes:
    """The request record of a fetch (what the client sent), linked to its capture record."""
    parts = urlsplit(f.url)
    # The target as the client sent it (core/net/wire.request_url): an empty query keeps its "?".
    target = (parts.path or "/") + (f"?{parts.query}" if "?" in f.url.partition("#")[0] else "")
    head, _ = http_head(f"GET {target} HTTP/1.1", [("Host", parts.netloc), *f.request_headers])
    fields = [
        ("WARC-Type", "request"),
        ("WARC-Record-ID", record_id),
        ("WARC-Date", date),
        ("WARC-Target-URI", f.url),
        ("WARC-Concurrent-To", concurrent_to),
        ("WARC-Payload-Digest", EMPTY_PAYLOAD_DIGEST),
    ]
    return record(fields, head, content_type=REQUEST_CONTENT_TYPE)


#: The WARC field that carries the usage preferences that applied to a capture, e.g.
#: ``search=unstated, ai-train=allowed`` (a purpose of the crawl each; SCHEMAS.md).
USAGE_HEADER = "WARC-Usage-Preferences"


def usage_field(usage: dict[str, str]) -> str:
    """A capture's usage preferences as its WARC field's value."""
    return ", ".join(f"{purpose}={decision}" for purpose, decision in usage.items())


def _capture_fields(kind: str, page: ParsedPage, record_id: str, date: str) -> list[tuple[str, str]]:
    """The named fields of a fetch's capture record, up to its block digest.

    - ``"response"``: ``WARC-Truncated`` when the body cap cut the body, and the digest of
      the body as transferred;
    - ``"revisit"`` (an exact copy): :func:`beamcrawl.core.archive.warc_revisit.revisit_fields`;
    - ``"unchanged"`` (a 200 repeating the URL's own stored capture): the same fields,
      referring to that capture by the URL itself, its fetch time and digest;
    - ``"not_modified"`` (a 304): profile server-not-modified, referring to the URL's stored
      copy: ``WARC-Refers-To-Target-URI`` the URL itself and ``WARC-Refers-To-Date`` the
      fetch time of the copy held (from the URL's revisit state, when known). No payload,
      so no payload digest.

    Raises:
        ValueError: A revisit of a page that is not an exact copy with its original's
            digest and date.
    """
    f = page.fetch
    if kind == "unchanged":
        state = page.revisit or {}
        if state.get("stored_at") is None or state.get("digest") is None:
            raise ValueError("an unchanged revisit needs the URL's stored capture's digest and fetch time")
        return revisit_fields(page, f.url, state["stored_at"], state["digest"], record_id)
    if kind == "revisit":
        if page.duplicate_of is None or page.original_digest is None or page.original_fetched_at is None:
            raise ValueError("a revisit needs the original's URL, digest and fetch time")
        return revisit_fields(page, page.duplicate_of, page.original_fetched_at, page.original_digest, record_id)
    fields = first_fields("revisit" if kind == "not_modified" else "response", record_id, date, f.url, f.ip)
    if kind == "not_modified":
        stored_at = (page.revisit or {}).get("stored_at") or ((f.entry.revisit or {}).get("stored_at"))
        refers = revisit_warc_headers(f.url, warc_date(stored_at) if stored_at else "")
        if not stored_at:
            del refers["WARC-Refers-To-Date"]
        fields.extend(refers.items())
        return fields
    if f.truncated:
        fields.append(("WARC-Truncated", f.truncated))
    fields.append(("WARC-Payload-Digest", fetch_digest(f)))
    return fields


def _first_header(headers: Sequence[tuple[str, str]], wanted: str) -> str | None:
    for name, value in headers:
        if name.lower() == wanted:
            return value
    return None


@dataclass(frozen=True)
class CaptureRecord:
    """A fetch's capture record (response or revisit), serialised, with its id and index."""

    member: bytes  # one gzip member
    record_id: str
    index: cdxj.Capture  # what the CDXJ line of the record says


@dataclass(frozen=True)
class ArchivedFetch:
    """A fetch serialised as WARC records, ready to append to a file."""

    data: bytes  # the capture (response or revisit) then the request record, each one gzip member
    response_length: int  # bytes of the capture record at the start of ``data``
    capture: cdxj.Capture  # what the CDXJ line of the capture record says


def capture_record(page: ParsedPage, kind: str, record_id: str, level: int = warc_records.GZIP_LEVEL) -> CaptureRecord:
    """Serialises a fetch's capture record of ``kind`` (see :func:`capture_kind`); pure.

    Its block is the status line and the response headers as received (Transfer-Encoding
    renamed, as the fetch undid it), then, for a response, the entity (content codings kept).

    Raises:
        ValueError: The fetch cannot be written (a URL that does not split, or a revisit
            without its original).
        UnicodeError: A header or URL that cannot be encoded.
    """
    f = page.fetch
    date = warc_date(f.fetched_at)
    fields = _capture_fields(kind, page, record_id, date)
    if f.usage:  # the site's usage preferences at fetch time (core/policy/usage_prefs.py)
        fields.append((USAGE_HEADER, usage_field(f.usage)))
    headers = [(HOP_BY_HOP_RENAMED.get(k.lower(), k), v) for k, v in f.response_headers]
    head, written = http_head(status_line(f.http_version, f.status, f.reason), headers)
    payload = f.raw_body if kind == "response" else b""  # a revisit's payload stays with its original
    member = gzip_member(record(fields, head, payload, content_type=RESPONSE_CONTENT_TYPE), level)
    named = dict(fields)  # the index line says what the record says, as a reader reads it
    index = cdxj.Capture(
        url=f.url,
        timestamp=cdxj.timestamp_of(date),
        mime=cdxj.mime_of(cdxj.as_read(_first_header(written, "content-type")))
        if kind == "response"
        else "warc/revisit",
        status=status_code(f.status),  # as the record's status line has it
        digest=named.get("WARC-Payload-Digest"),
        location=cdxj.as_read(_first_header(written, "location")),
        truncated=named.get("WARC-Truncated"),
    )
    return CaptureRecord(member, record_id, index)


def spooled_index(f: FetchResult, spooled: Spooled) -> cdxj.Capture:
    """The index line of a response record written in the fetch stage (what
    :func:`capture_record` said of it then)."""
    return cdxj.Capture(
        url=f.url,
        timestamp=cdxj.timestamp_of(warc_date(f.fetched_at)),
        mime=spooled.mime,
        status=status_code(f.status),  # as the record's status line has it
        digest=fetch_digest(f),
        location=spooled.location,
        truncated=f.truncated,
    )


def archive_fetch(
    page: ParsedPage,
    *,
    revisit: bool | None = None,
    kind: str | None = None,
    capture: CaptureRecord | None = None,
    request: bytes | None = None,
    new_id: Callable[[], str] = warc_records.new_record_id,
    level: int = warc_records.GZIP_LEVEL,
) -> ArchivedFetch:
    """Serialises a fetch's records in memory (pure: no file is touched).

    The capture record (response, or revisit for a copy or a 304) comes first: it is what the
    blob and the index point at, and readers expect it first. Its request record follows,
    ``WARC-Concurrent-To`` naming the capture.

    Args:
        page: The fetch (the caller leaves near copies out).
        revisit: Whether to write a revisit record rather than a response; None decides by
            :func:`capture_kind` (which hashes the payload: callers that know pass it).
        kind: :func:`capture_kind`'s answer, if the caller has it (overrides ``revisit``).
        capture: The capture record when it is already serialised (a response written in
            the fetch stage, read back from its spool file).
        request: The request record's member when it is already serialised (spooled after
            that response; ``WARC-Concurrent-To`` names ``capture``).
        new_id: Makes record ids (tests pin them).
        level: The gzip level of each record.

    Raises:
        ValueError: The fetch cannot be written (a URL that does not split, or a revisit
            without its original).
        UnicodeError: A header or URL that cannot be encoded.
    """
    if capture is None:
        if kind is None:
            kind = capture_kind(page) if revisit is None else ("revisit" if revisit else "response")
        capture = capture_record(page, kind, new_id(), level)
    if request is None:
        request = request_member(page.fetch, capture.record_id, new_id(), level)
    return ArchivedFetch(capture.member + request, len(capture.member), capture.index)


def request_member(f: FetchResult, concurrent_to: str, record_id: str, level: int = warc_records.GZIP_LEVEL) -> bytes:
    """A fetch's request record, one gzip member, ``WARC-Concurrent-To`` its capture record.

    Raises:
        ValueError: A URL that does not split.
        UnicodeError: A header or URL that cannot be encoded.
    """
    return gzip_member(_request_record(f, warc_date(f.fetched_at), concurrent_to, record_id), level)


def warcinfo_bytes(filename: str, user_agent: str, is_part_of: str, make_writer: WriterFactory = _new_writer) -> bytes:
    """The ``warcinfo`` record that heads every file (IIPC's recommended fields).

    Written with warcio: once per file, its cost does not matter.
    """
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
    """The published response headers by column, repeated headers joined HTTP-style, each
    value read as the WARC record's readers read it (:func:`cdxj.as_read`): bytes sent as
    UTF-8 are that text, and a column of UTF-8 text then holds the bytes sent (read as
    latin-1, ``/caf`` C3 A9 was published as ``/cafÃ©``)."""
    found: dict[str, list[str]] = {}
    for name, value in headers:
        column = PAGES_HEADER_COLUMNS.get(name.lower())
        if column is not None:
            found.setdefault(column, []).append(cdxj.as_read(value) or "")
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


def _event_host(f: FetchResult) -> str:
    """The host a fetch's request went to (host[:port] of its url). A robots.txt redirect hop
    is made for its source host's file (its entry's host) but sent to the Location's host; a
    hop not made holds the Location as given, no URL, and keeps the source's."""
    if f.entry.source == "robots":
        try:
            return host_of(f.url)
        except InvalidURL:
            pass
    return f.entry.host


def page_event(page: ParsedPage, blob: str | None, note: str | None = None) -> dict[str, Any]:
    """The fetch event of docs/ARCHITECTURE.md §1 step 9, as a pages/ Parquet row (its round is the
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
        "host": _event_host(f),
        "final_url": f.final_url or None,
        "status": f.status if fetched else None,
        "outcome": f.outcome,
        "fetched_at": dt.datetime.fromtimestamp(f.fetched_at, dt.timezone.utc) if f.fetched_at else None,
        "elapsed_ms": round(f.elapsed * 1000, 3) if fetched else None,
        "waited_ms": round(f.waited * 1000, 3) if f.outcome in ("fetched", "error") else None,
        "content_type": cdxj.as_read(f.content_type) or None,  # as the header columns below
        "content_length": f.payload_size if fetched else None,
        "truncated": f.truncated,
        "changed": _changed(page) if fetched else None,
        "checksum": page.checksum,
        "simhash": page.simhash,
        "duplicate_of": page.duplicate_of,
        "duplicate_kind": page.duplicate_kind,
        "duplicate_distance": page.duplicate_distance,
        "blob": blob,
        "out_links": len(page.links),
        "parse_truncated": page.parse_truncated,
        "title": page.title,
        "meta_noindex": page.meta_noindex,
        "meta_nofollow": page.meta_nofollow,
        "ip": f.ip,
        "error": f.error or note,
        "depth": f.entry.depth,
        "source": f.entry.source,
        **_usage_columns(f),
    }
    for column in PAGES_HEADER_COLUMNS.values():
        event[column] = headers.get(column)
    return event


def _usage_columns(f: FetchResult) -> dict[str, str | None]:
    """The pages/ ``usage_*`` columns: each purpose's decision, and why the page was refused."""
    usage = f.usage or {}
    columns: dict[str, str | None] = {f"usage_{p.replace('-', '_')}": usage.get(p) for p in PURPOSES}
    columns["usage_refused"] = f.usage_refused
    return columns


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
    """Appends fetched pages to this bundle's WARC file, indexes them, yields each batch's
    page events as one list."""

    def __init__(
        self,
        outputs: RoundOutputs,
        max_bytes: int,
        user_agent: str = DEFAULT_USER_AGENT,
        max_index: int = INDEX_ENTRIES,
    ) -> None:
        self.outputs = outputs
        self.max_bytes = max_bytes
        self.user_agent = user_agent
        self.max_index = max_index
        self.metrics: _MetricsCollector | None = None
        self.dead = Outlet("store")

    def setup(self) -> None:
        self.metrics = _MetricsCollector()

    def start_bundle(self) -> None:
        self.fh: BinaryIO | None = None
        self.offset = 0
        self.name = ""
        self.rel = ""
        self.index = cdxj.SortedIndex()  # this file's, until it closes
        self.spools = SpoolReader(self.outputs)

    def _open(self) -> None:
        assert self.metrics is not None
        self.name = part_name(".warc.gz")
        self.rel = f"{self.outputs.final_rel('warc')}/{self.name}"
        self.fh = files.open_write(files.join(self.outputs.staged("warc"), self.name))
        head = warcinfo_bytes(self.name, self.user_agent, f"beamcrawl {self.outputs.label}")
        self.fh.write(head)
        self.offset = len(head)
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
        lines = self.index.write(files.join(self.outputs.staged("cdxj"), f"{stem}.cdxj"))
        self.metrics.cdxj_lines.inc(lines)

    def process(self, batch: PageBatch) -> Iterator[Any]:
        """Archives a batch's pages in order; yields their events as one list (a page
        that fails is its own dead letter)."""
        assert self.metrics is not None
        events: list[dict[str, Any]] = []
        for page in batch.pages:
            self.metrics.received.inc()
            if page.fetch.outcome in ("deferred", "robots_disallowed", "usage_refused"):
                self.metrics.skipped.inc()
                continue  # no request was made: nothing to archive, no fetch event
            try:
                self.dead.check(page)
                events.append(self._store(page))
            except Exception as exc:  # the file system's failures are re-raised: they fail the round
                self.metrics.error.inc()
                yield self.dead.tagged(exc, page)
        if events:
            yield Batched(events)

    def _store(self, page: ParsedPage) -> dict[str, Any]:
        assert self.metrics is not None
        if page.fetch.outcome != "fetched":
            self.metrics.not_fetched.inc()
            return page_event(page, None)
        if page.fetch.usage_refused:  # its body was dropped in the fetch stage
            self.metrics.not_fetched.inc()
            return page_event(page, None, f"not archived: {page.fetch.usage_refused}"[:300])
        kind = capture_kind(page)
        if kind is None:
            self.metrics.near_copies.inc()
            return page_event(page, None)
        started = time.perf_counter()
        spooled = page.fetch.spooled
        # A response written in the fetch stage is copied as it was written, with its
        # request record; any other kind is built now (it has no payload: the body is not
        # needed), its request record with it.
        capture = request = None
        if kind == "response" and spooled is not None:
            data = self.spools.read(spooled)
            capture = CaptureRecord(data[: spooled.length], spooled.record_id, spooled_index(page.fetch, spooled))
            request = data[spooled.length :] if spooled.request_length else None
        try:
            archived = archive_fetch(page, kind=kind, capture=capture, request=request)
        except (ValueError, UnicodeError) as exc:  # a response a WARC record cannot represent
            self.metrics.error.inc()
            note = f"not archived: {type(exc).__name__}: {exc}"[:300]
            return page_event(page, None, note)
        # Everything that can fail on the page's own fields is done before a byte is written:
        # a page that becomes a dead letter leaves no record in the file (a later round that
        # fetches it again would archive it twice, and no pages/ row would point at this one).
        event = page_event(page, None)
        if self.fh is None or self.offset >= self.max_bytes or len(self.index) >= self.max_index:
            self._close()
            self._open()
        assert self.fh is not None
        offset = self.offset
        line = cdxj.pack(cdxj.entry_for_capture(archived.capture, offset, archived.response_length, self.rel))
        self.fh.write(archived.data)
        self.offset += len(archived.data)
        self.index.add(line)
        event["blob"] = f"{self.rel}@{offset}"
        self.metrics.records.inc(2)
        self.metrics.success.inc()
        if kind in ("revisit", "unchanged"):
            self.metrics.revisits.inc()
        elif kind == "not_modified":
            self.metrics.not_modified.inc()
        self.metrics.latency_us.update(int((time.perf_counter() - started) * 1e6))
        return event

    def finish_bundle(self) -> None:
        self._close()
        self.spools.close()

    def teardown(self) -> None:
        index = getattr(self, "index", None)
        if index is not None:
            index.close()  # a bundle that failed: its runs on disk go now, not at exit


class WriteWarc(beam.PTransform[beam.PCollection[PageBatch], beam.PCollection[list[dict[str, Any]]]]):
    """``PageBatch`` → one list of page event dicts per batch, archiving each fetched page
    in a WARC file and indexing it in the CDXJ file beside it; a file rotates at
    ``max_bytes`` or at ``max_index`` index entries, whichever comes first."""

    def __init__(
        self,
        outputs: RoundOutputs,
        max_bytes: int,
        user_agent: str = DEFAULT_USER_AGENT,
        max_index: int = INDEX_ENTRIES,
    ) -> None:
        super().__init__()
        self.outputs = outputs
        self.max_bytes = max_bytes
        self.user_agent = user_agent
        self.max_index = max_index

    def expand(self, pages: beam.PCollection[PageBatch]) -> beam.PCollection[list[dict[str, Any]]]:
        out = pages | "Append to WARC" >> beam.ParDo(
            _WriteWarcFn(self.outputs, self.max_bytes, self.user_agent, self.max_index)
        ).with_output_types(Batched).with_outputs(ERRORS, main="events")
        collect(out[ERRORS])
        return out.events
