"""Store pages once: WARC/1.1 request and response records, and each fetch's page event.

A writer DoFn owns one gzipped WARC file per bundle (rotated by size), starts it with a
``warcinfo`` record, writes each fetch as a request/response pair with payload digests
(warcio computes them) and ``WARC-IP-Address``, and marks capped bodies with
``WARC-Truncated``. The page event's ``blob`` is ``<file relative to OUT>@<offset>`` of the
response record, pointing at its committed location. Bodies stop here: the page event
carries no bytes.

Transfer-Encoding is undone by the HTTP client, so the recorded header is renamed
(``X-Crawler-Transfer-Encoding``) rather than left claiming chunks that are not there;
Content-Encoding is kept, with the body exactly as the server compressed it.
"""

from __future__ import annotations

import datetime as dt
import io
import os
from typing import Any, BinaryIO, Iterator
from urllib.parse import urlsplit

import apache_beam as beam
from apache_beam.metrics import Metrics
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from beamcrawl import DEFAULT_USER_AGENT, __version__
from beamcrawl.core.outputs import RoundOutputs, part_name
from beamcrawl.schemas.arrow import signed64
from beamcrawl.schemas.records import ParsedPage

__all__ = ["WriteWarc", "page_event", "write_fetch_records"]

HOP_BY_HOP_RENAMED = {"transfer-encoding": "X-Crawler-Transfer-Encoding"}


class _CountingFile:
    """A write-only file wrapper that knows its offset (blob references need it)."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.offset = 0

    def write(self, data: bytes) -> int:
        n = self.fh.write(data)
        self.offset += len(data)
        return n

    def flush(self) -> None:
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def _iso(epoch: float) -> str:
    return datetime_to_iso_date(dt.datetime.fromtimestamp(epoch, dt.timezone.utc).replace(tzinfo=None), use_micros=True)


def write_fetch_records(writer: WARCWriter, page: ParsedPage) -> None:
    """Writes a fetch's request and response records (offset bookkeeping is the caller's)."""
    f = page.fetch
    parts = urlsplit(f.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    req_headers = [("Host", parts.netloc)] + list(f.request_headers)
    request = writer.create_warc_record(
        f.url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=StatusAndHeaders(f"GET {target} HTTP/1.1", req_headers, is_http_request=True),
        warc_headers_dict={"WARC-Date": _iso(f.fetched_at)},
    )
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
        http_headers=StatusAndHeaders(
            f"{f.status} {f.reason}".strip(), headers, protocol=f"HTTP/{f.http_version}"
        ),
        warc_headers_dict=warc_headers,
    )
    # The response first: it is what the blob points at, and readers expect it first.
    writer.write_record(response)
    request.rec_headers.add_header("WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID"))
    writer.write_record(request)


def page_event(page: ParsedPage, round_no: int, blob: str | None) -> dict[str, Any]:
    """The fetch event of DESIGN.md §1 step 6, as a pages/ Parquet row."""
    f = page.fetch
    fetched = f.outcome == "fetched"
    return {
        "url": f.url,
        "url_fp": signed64(f.entry.fp),
        "host": f.entry.host,
        "final_url": f.final_url or None,
        "status": f.status if fetched else None,
        "outcome": f.outcome,
        "fetched_at": dt.datetime.fromtimestamp(f.fetched_at, dt.timezone.utc) if f.fetched_at else None,
        "elapsed_ms": round(f.elapsed * 1000, 3) if fetched else None,
        "content_type": f.content_type or None,
        "content_length": len(f.body) if fetched else None,
        "truncated": f.truncated,
        "changed": True if fetched else None,  # revisits (a later issue) compare checksums
        "checksum": page.checksum,
        "simhash": page.simhash,
        "duplicate_of": None,
        "blob": blob,
        "out_links": len(page.links),
        "title": page.title,
        "meta_noindex": page.meta_noindex,
        "meta_nofollow": page.meta_nofollow,
        "ip": f.ip,
        "error": f.error,
        "depth": f.entry.depth,
        "round": round_no,
    }


class _WriteWarcFn(beam.DoFn):
    """Appends fetched pages to this bundle's WARC file and yields their page events."""

    def __init__(self, outputs: RoundOutputs, max_bytes: int, user_agent: str = DEFAULT_USER_AGENT) -> None:
        self.outputs = outputs
        self.max_bytes = max_bytes
        self.user_agent = user_agent
        self.records = Metrics.counter("store", "warc_records")
        self.files = Metrics.counter("store", "warc_files")
        self.bytes = Metrics.distribution("store", "warc_file_bytes")

    def start_bundle(self) -> None:
        self.fh: _CountingFile | None = None
        self.writer: WARCWriter | None = None
        self.rel = ""

    def _open(self) -> None:
        name = part_name(".warc.gz")
        path = os.path.join(self.outputs.staged("warc"), name)
        self.rel = f"{self.outputs.final_rel('warc')}/{name}"
        self.fh = _CountingFile(open(path, "wb"))
        self.writer = WARCWriter(self.fh, gzip=True, warc_version="1.1")
        info = self.writer.create_warcinfo_record(
            name,
            {
                "software": f"beamcrawl/{__version__} (warcio)",
                "format": "WARC File Format 1.1",
                "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
                "http-header-user-agent": self.user_agent,
                "isPartOf": f"beamcrawl {self.outputs.label}",
            },
        )
        self.writer.write_record(info)
        self.files.inc()

    def _close(self) -> None:
        if self.fh is not None:
            self.bytes.update(self.fh.offset)
            self.fh.close()
        self.fh = None
        self.writer = None

    def process(self, page: ParsedPage) -> Iterator[dict[str, Any]]:
        if page.fetch.outcome in ("deferred", "robots_disallowed"):
            return iter(())  # no request was made: nothing to archive, no fetch event
        return iter((self._store(page),))

    def _store(self, page: ParsedPage) -> dict[str, Any]:
        blob = None
        if page.fetch.outcome == "fetched":
            if self.fh is None or self.fh.offset >= self.max_bytes:
                self._close()
                self._open()
            assert self.fh is not None and self.writer is not None
            offset = self.fh.offset
            write_fetch_records(self.writer, page)
            self.records.inc(2)
            blob = f"{self.rel}@{offset}"
        return page_event(page, self.outputs.round_no, blob)

    def finish_bundle(self) -> None:
        self._close()


class WriteWarc(beam.PTransform):
    """``ParsedPage`` → page event dicts, archiving each fetched page in a WARC file."""

    def __init__(self, outputs: RoundOutputs, max_bytes: int, user_agent: str = DEFAULT_USER_AGENT) -> None:
        super().__init__()
        self.outputs = outputs
        self.max_bytes = max_bytes
        self.user_agent = user_agent

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        return pages | "Append to WARC" >> beam.ParDo(_WriteWarcFn(self.outputs, self.max_bytes, self.user_agent))

