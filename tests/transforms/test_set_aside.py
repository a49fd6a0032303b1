"""Set bodies aside (transforms/set_aside.py, core/archive/spool.py): each fetched page's response record
is written where the page was fetched, the page goes on without its body, and the page store
archives exactly what it archived when the body travelled with the page.

The same pages are archived twice, through the spool and without it, and the WARC files are
read back with warcio and compared record by record (every named field and every block byte,
the record ids aside: they are random per record).
"""

from __future__ import annotations

import base64
import glob
import gzip
import hashlib
import io
import json
import os
import zlib

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.core.archive.spool import SPOOL, SpoolReader
from beamcrawl.core.urls.urlnorm import fingerprint, host_of
from beamcrawl.schemas.records import FetchResult, FrontierEntry, PageBatch, ParsedPage
from beamcrawl.transforms import set_aside as spool
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.set_aside import SetBodiesAside, body_still_needed
from beamcrawl.transforms.warc_io import WriteWarc, capture_record, request_member

FETCHED_AT = 1_767_225_600.125
HTML = b"<html><head><title>A</title></head><body><p>%s</p><a href='/b'>b</a></body></html>"


def _sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _fetch(
    url,
    status=200,
    headers=None,
    raw=None,
    body=None,
    truncated=None,
    offset_s=0.0,
    source="link",
    request_headers=None,
) -> FetchResult:
    raw = HTML % url.encode() if raw is None else raw
    entry = FrontierEntry(url=url, fp=fingerprint(url), host=host_of(url), due_ms=0, source=source)
    return FetchResult(
        entry=entry,
        outcome="fetched",
        url=url,
        final_url=url,
        status=status,
        fetched_at=FETCHED_AT + offset_s,
        elapsed=0.05,
        ip="127.0.0.1",
        reason="OK",
        request_headers=request_headers or [("User-Agent", "beamcrawl-test/1"), ("Accept-Encoding", "gzip")],
        response_headers=headers if headers is not None else [("Content-Type", "text/html; charset=utf-8")],
        raw_body=raw,
        body=raw if body is None else body,
        truncated=truncated,
    )


def _copy(original: ParsedPage, url: str, kind: str, offset_s: float) -> ParsedPage:
    raw = original.fetch.raw_body if kind == "exact" else original.fetch.raw_body.replace(b"<p>", b"<p>x")
    page = parse_fetch(_fetch(url, raw=raw, offset_s=offset_s), "beamcrawl")
    page.duplicate_of, page.duplicate_kind = original.fetch.url, kind
    page.duplicate_distance = 0 if kind == "exact" else 2
    if kind == "exact":
        page.original_fetched_at = original.fetch.fetched_at
        page.original_digest = _sha1_b32(original.fetch.raw_body)
    return page


def _round_pages() -> list[ParsedPage]:
    """A round's worth of kinds: new pages, a gzip-encoded one, a truncated PDF, a redirect,
    a 404 with a body, robots.txt, an exact and a near copy, a 304, an error."""
    original = parse_fetch(_fetch("http://a.test/"), "beamcrawl")
    gz = gzip.compress(HTML % b"zipped", mtime=0)
    fetches = [
        _fetch("http://a.test/2", offset_s=1),
        _fetch(
            "http://b.test/z",
            headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
            raw=gz,
            body=HTML % b"zipped",
            offset_s=2,
        ),
        _fetch(
            "http://a.test/big.pdf",
            headers=[("Content-Type", "application/pdf")],
            raw=b"%PDF" + b"y" * 3000,
            truncated="length",
            offset_s=3,
        ),
        _fetch("http://a.test/old", status=301, headers=[("Location", "/new")], raw=b"moved", offset_s=4),
        _fetch("http://a.test/gone", status=404, headers=[("Content-Type", "text/html")], raw=b"<p>no</p>", offset_s=5),
        _fetch(
            "http://a.test/robots.txt",
            headers=[("Content-Type", "text/plain")],
            raw=b"User-agent: *\n",
            source="robots",
            offset_s=6,
        ),
        _fetch(
            "http://a.test/same",
            status=304,
            raw=b"",
            offset_s=7,
            request_headers=[("User-Agent", "beamcrawl-test/1"), ("If-None-Match", '"v1"')],
        ),
    ]
    pages = [original, *(parse_fetch(f, "beamcrawl") for f in fetches)]
    pages.append(_copy(original, "http://c.test/", "exact", 8))
    pages.append(_copy(original, "http://d.test/", "near", 9))
    failed = FetchResult(
        entry=original.fetch.entry, outcome="error", url="http://e.test/", fetched_at=FETCHED_AT, error="timeout"
    )
    return [*pages, ParsedPage(fetch=failed)]


def _archive(tmp_path, name: str, pages: list[ParsedPage], spooled: bool) -> tuple[RoundOutputs, list[dict]]:
    outputs = RoundOutputs(str(tmp_path / name), 3)
    outputs.prepare()
    with TestPipeline(runner="FnApiRunner") as p:
        pcoll = p | beam.Create(pages)
        if spooled:
            pcoll = pcoll | SetBodiesAside(outputs)
        _ = (
            pcoll
            | beam.combiners.ToList()
            | beam.Map(PageBatch)  # the pages as one batch, as content seen passes them on
            | WriteWarc(outputs, 1 << 30, "beamcrawl-test/1")
            | beam.FlatMap(lambda events: [json.dumps(e, default=str) for e in events])
            | beam.io.WriteToText(str(tmp_path / f"{name}-events"), shard_name_template="")
        )
        assert_that(collected(p), equal_to([]), label="No dead letters")
    events = [json.loads(line) for line in open(tmp_path / f"{name}-events")]
    return outputs, events


def _records(outputs: RoundOutputs) -> list[tuple]:
    """Every record of the round's staged WARC files: type, named fields but the ids, block."""
    found = []
    for path in glob.glob(f"{outputs.staged('warc')}/*.warc.gz"):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh, check_digests="raise"):
                if record.rec_type == "warcinfo":
                    continue
                fields = tuple(
                    (k, v) for k, v in record.rec_headers.headers if k not in ("WARC-Record-ID", "WARC-Concurrent-To")
                )
                found.append((record.rec_type, fields, record.raw_stream.read()))
    return sorted(found)


def test_spooled_pages_are_archived_exactly_as_whole_ones(tmp_path):
    pages = _round_pages()
    whole, whole_events = _archive(tmp_path, "whole", pages, spooled=False)
    light, light_events = _archive(tmp_path, "light", pages, spooled=True)
    records = _records(light)
    assert records == _records(whole)
    kinds = sorted((t, dict(f)["WARC-Target-URI"]) for t, f, _ in records if t != "request")
    assert ("response", "http://a.test/") in kinds and ("revisit", "http://c.test/") in kinds
    assert ("revisit", "http://a.test/same") in kinds  # the 304
    assert not any(u == "http://d.test/" for _, u in kinds)  # a near copy: no record

    def stable(events):  # blobs name files with random names; the rest is the same
        return sorted(json.dumps({k: v for k, v in e.items() if k != "blob"}, sort_keys=True) for e in events)

    assert stable(light_events) == stable(whole_events)
    assert [bool(e["blob"]) for e in sorted(light_events, key=lambda e: e["url"])] == [
        bool(e["blob"]) for e in sorted(whole_events, key=lambda e: e["url"])
    ]
    # A response's request record is the one spooled with it, copied, not built again.
    spooled_ids = {r.rec_headers.get_header("WARC-Record-ID") for r in _all_records(light.staged(SPOOL))}
    archived = _all_records(light.staged("warc"))
    responses = {r.rec_headers.get_header("WARC-Record-ID") for r in archived if r.rec_type == "response"}
    requests = [
        r.rec_headers.get_header("WARC-Record-ID")
        for r in archived
        if r.rec_type == "request" and r.rec_headers.get_header("WARC-Concurrent-To") in responses
    ]
    assert requests and set(requests) <= spooled_ids and responses <= spooled_ids
    # every blob points at its own record in the file it names
    for event in light_events:
        if event["blob"]:
            rel, offset = event["blob"].rsplit("@", 1)
            name = rel.rsplit("/", 1)[1]
            with open(os.path.join(light.staged("warc"), name), "rb") as fh:
                fh.seek(int(offset))
                record = next(iter(ArchiveIterator(fh)))
                assert record.rec_headers.get_header("WARC-Target-URI") == event["url"]


def _all_records(folder: str) -> list:
    """Every record of the gzipped WARC members in ``folder``'s files (their headers read)."""
    out = []
    for path in sorted(glob.glob(f"{folder}/*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                out.append(record)
                record.content_stream().read()
    return out


def _through_spool(tmp_path, page: ParsedPage) -> tuple[ParsedPage, RoundOutputs]:
    outputs = RoundOutputs(str(tmp_path / "out"), 1)
    fn = spool._SetBodiesAsideFn(outputs)
    fn.start_bundle()
    (out,) = list(fn.process(page))
    fn.finish_bundle()
    return out, outputs


def test_a_page_goes_on_without_its_body_and_its_record_waits_in_the_spool(tmp_path):
    page = parse_fetch(_fetch("http://a.test/p", raw=HTML % (b"x" * 50_000)), "beamcrawl")
    light, outputs = _through_spool(tmp_path, page)
    f = light.fetch
    assert f.body == b"" and f.raw_body == b""
    assert f.body_size == len(page.fetch.body) and f.payload_size == len(page.fetch.body)
    assert f.digest == _sha1_b32(page.fetch.raw_body)
    assert light.checksum == page.checksum and light.simhash == page.simhash and light.links == page.links
    assert page.fetch.body, "the input page is not changed in place"
    assert f.spooled is not None and os.path.exists(os.path.join(outputs.staged(SPOOL), f.spooled.name))
    spooled = SpoolReader(outputs).read(f.spooled)
    assert len(spooled) == f.spooled.length + f.spooled.request_length and f.spooled.request_length > 0
    member = spooled[: f.spooled.length]
    assert member == capture_record(page, "response", f.spooled.record_id).member
    records = [
        (
            r.rec_type,
            r.rec_headers.get_header("WARC-Concurrent-To"),
            r.http_headers.statusline,
            r.content_stream().read(),
        )
        for r in ArchiveIterator(io.BytesIO(spooled), check_digests="raise")
    ]
    # The response as the page store would have built it, then its request record, each a
    # member of its own.
    assert [(kind, to) for kind, to, _, _ in records] == [("response", None), ("request", f.spooled.record_id)]
    assert records[0][3] == page.fetch.body and (records[1][2], records[1][0]) == ("/p HTTP/1.1", "request")
    assert next(iter(ArchiveIterator(io.BytesIO(member)))).rec_type == "response"
    assert len(pickle_bytes(light)) < 1_000 and len(pickle_bytes(page)) > 50_000


def pickle_bytes(value) -> bytes:
    import pickle

    return pickle.dumps(value)


def test_a_page_whose_parse_took_nothing_keeps_its_body(tmp_path):
    result = _fetch("http://a.test/p")
    unparsed = ParsedPage(fetch=result)  # never parsed: content seen computes checksum and simhash
    assert body_still_needed(unparsed)
    light, _ = _through_spool(tmp_path, unparsed)
    assert light.fetch.body == result.body and light.fetch.spooled is None
    assert light.fetch.digest == _sha1_b32(result.raw_body)


def test_a_response_no_record_can_hold_is_left_to_the_page_store(tmp_path):
    page = parse_fetch(_fetch("http://a.test/p", headers=[("X-\u20ac", "v")]), "beamcrawl")
    light, outputs = _through_spool(tmp_path, page)
    assert light.fetch.body == page.fetch.body and light.fetch.spooled is None
    assert not glob.glob(f"{outputs.staged(SPOOL)}/*")


def test_a_missing_spool_file_fails_the_round_not_the_page(tmp_path):
    page = parse_fetch(_fetch("http://a.test/p"), "beamcrawl")
    light, outputs = _through_spool(tmp_path, page)
    os.remove(os.path.join(outputs.staged(SPOOL), light.fetch.spooled.name))
    with pytest.raises(OSError):
        SpoolReader(outputs).read(light.fetch.spooled)


_headers = st.lists(
    st.tuples(
        st.sampled_from(["Content-Type", "Server", "Location", "Content-Encoding", "X-A", "Set-Cookie"]),
        st.text(st.characters(min_codepoint=32, max_codepoint=255, blacklist_characters="\r\n"), max_size=40),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.binary(max_size=4096),
    status=st.sampled_from([200, 203, 206, 301, 404, 500]),
    headers=_headers,
    truncated=st.sampled_from([None, "length"]),
    compress=st.booleans(),
)
def test_the_spooled_record_is_the_record_the_page_store_would_write(
    tmp_path, raw, status, headers, truncated, compress
):
    wire = zlib.compress(raw) if compress else raw
    page = parse_fetch(
        _fetch("http://h.test/x?q=1", status=status, headers=headers, raw=wire, body=raw, truncated=truncated),
        "beamcrawl",
    )
    light, outputs = _through_spool(tmp_path, page)
    f = light.fetch
    assert f.digest == _sha1_b32(wire) and f.payload_size == len(raw)
    if f.spooled is None:  # a header no record can hold: the page keeps its body
        assert f.raw_body == wire
        with pytest.raises((ValueError, UnicodeError)):
            capture_record(page, "response", "<urn:uuid:x>")
        return
    expected = capture_record(page, "response", f.spooled.record_id)
    spooled = SpoolReader(outputs).read(f.spooled)
    assert spooled[: f.spooled.length] == expected.member
    # Then the request record, byte for byte what the page store would build for it.
    request_id = list(ArchiveIterator(io.BytesIO(spooled)))[1].rec_headers.get_header("WARC-Record-ID")
    assert spooled[f.spooled.length :] == request_member(page.fetch, f.spooled.record_id, request_id)
    assert len(spooled) == f.spooled.length + f.spooled.request_length
    assert (f.spooled.mime, f.spooled.location) == (expected.index.mime, expected.index.location)
