"""Set bodies aside: the page store's first half, in the fetch stage's bundle.

A fetched page's body is needed by parse (fused to the fetch, before this) and by its WARC
response record, and by nothing after. So each fetched page's response record is
serialised here, where the body is, and appended to the bundle's spool file
(:mod:`beamcrawl.core.archive.spool`), its request record right after it (built here too,
so that the page store, after the fetch, only copies the two); the page goes on without
``body`` and ``raw_body``, carrying their size, the payload digest, and the records' place
(``FetchResult.spooled``). Content seen, the schedule, the page store, the Parquet tables
and the store's rows then see pages of a few hundred bytes plus their links, whatever the
bodies weighed: the round's memory and the bytes between its stages no longer grow with
page size.

The record is written before the round knows whether the page is kept (content seen comes
after): the page store copies a kept response's member into the round's WARC file byte for
byte and skips the others (copies become revisit records, near copies none), so what the
archive holds is what it held when the body travelled with the page.

A page keeps its body when a later stage would still need it: a 304 to a conditional
request (archived as a revisit: no payload, nothing to spool, nothing to keep), a fetch
whose checksum or simhash parse did not take (its content-seen probe computes them), and
a response a WARC record cannot represent (the page store says so in its event, as before).

Governed by: nothing to set (the spool lives and dies with the round's staging folder).
"""

from __future__ import annotations

from typing import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamcrawl.core.archive import warc_records
from beamcrawl.core.archive.spool import SpoolWriter
from beamcrawl.core.archive.warc_revisit import payload_digest
from beamcrawl.core.net.conditional import is_conditional
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.schemas.records import ParsedPage, Spooled, evolve
from beamcrawl.transforms.dead_letter import is_infrastructure
from beamcrawl.transforms.parse import PARSED_KINDS, body_kind
from beamcrawl.transforms.warc_io import capture_record, request_member

__all__ = ["SetBodiesAside", "body_still_needed"]


def body_still_needed(page: ParsedPage) -> bool:
    """Whether a stage after this one would read the fetched body itself: content seen, when
    parse left the checksum (a parse that failed early) or an HTML page's simhash untaken."""
    f = page.fetch
    if page.checksum is None:
        return True
    return (
        200 <= f.status < 300
        and f.entry.source != "robots"
        and page.simhash is None
        and page.body_kind is None
        and page.parse_error is None
        and body_kind(f) in PARSED_KINDS
    )


class _SetBodiesAsideFn(beam.DoFn):
    """Spools each fetched page's response record; passes the page on without its body."""

    def __init__(self, outputs: RoundOutputs, level: int = warc_records.GZIP_LEVEL) -> None:
        self.outputs = outputs
        self.level = level
        self.spooled = Metrics.counter("spool", "records")
        self.spooled_bytes = Metrics.counter("spool", "bytes")
        self.kept_whole = Metrics.counter("spool", "kept_whole")

    def start_bundle(self) -> None:
        self.writer = SpoolWriter(self.outputs)

    def process(self, page: ParsedPage) -> Iterator[ParsedPage]:
        f = page.fetch
        if f.outcome != "fetched" or f.spooled is not None or f.usage_refused:
            yield page  # a page the site refused our purpose for keeps no body to set aside
            return
        digest = f.digest or payload_digest(f.raw_body)
        if body_still_needed(page):
            self.kept_whole.inc()
            yield evolve(page, fetch=evolve(f, digest=digest))
            return
        spooled: Spooled | None = None
        if not (f.status == 304 and is_conditional(f.request_headers)):
            try:
                capture = capture_record(page, "response", warc_records.new_record_id(), self.level)
                request = request_member(f, capture.record_id, warc_records.new_record_id(), self.level)
            except Exception as exc:  # a response no record can hold: the page store says so
                if is_infrastructure(exc):
                    raise
                self.kept_whole.inc()
                yield evolve(page, fetch=evolve(f, digest=digest))
                return
            path, offset = self.writer.append(capture.member + request)
            index = capture.index
            spooled = Spooled(
                path, offset, len(capture.member), capture.record_id, index.mime, index.location, len(request)
            )
            self.spooled.inc()
            self.spooled_bytes.inc(len(capture.member) + len(request))
        light = evolve(f, body=b"", raw_body=b"", body_size=len(f.body), digest=digest, spooled=spooled)
        yield evolve(page, fetch=light)

    def finish_bundle(self) -> None:
        self.writer.close()


class SetBodiesAside(beam.PTransform):
    """``ParsedPage`` → ``ParsedPage`` without its body, its response record spooled."""

    def __init__(self, outputs: RoundOutputs, level: int = warc_records.GZIP_LEVEL) -> None:
        super().__init__()
        self.outputs = outputs
        self.level = level

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        return pages | "Spool response records" >> beam.ParDo(_SetBodiesAsideFn(self.outputs, self.level))
