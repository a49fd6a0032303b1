"""WARC files as archivists expect them, checked by reading them back with warcio, and
their CDXJ indexes checked against an independent indexer (cdxj-indexer).

Fetches are built by hand (no network), with pinned record ids and dates where bytes are
compared, so every check is deterministic.
"""

from __future__ import annotations

import base64
import dataclasses
import glob
import gzip
import hashlib
import io
import itertools
import json
import os
import zlib

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import example, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.warcwriter import WARCWriter

from beamcrawl.core.archive import cdxj
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.core.urls.urlnorm import fingerprint, host_of
from beamcrawl.schemas.records import FetchResult, FrontierEntry, PageBatch, ParsedPage
from beamcrawl.transforms import warc_io
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.warc_io import WriteWarc, archive_fetch, page_event, warcinfo_bytes

FETCHED_AT = 1_767_225_600.125  # 2026-01-01T00:00:00.125Z
HTML = b"<html><head><title>A</title></head><body><a href='/b'>b</a></body></html>"


def _fetch(
    url: str,
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    raw: bytes = HTML,
    body: bytes | None = None,
    truncated: str | None = None,
    ip: str | None = "127.0.0.1",
    reason: str = "OK",
    offset_s: float = 0.0,
    source: str = "link",
) -> ParsedPage:
    norm = url
    entry = FrontierEntry(url=norm, fp=fingerprint(norm), host=host_of(norm), due_ms=0, source=source)
    result = FetchResult(
        entry=entry,
        outcome="fetched",
        url=norm,
        final_url=norm,
        status=status,
        fetched_at=FETCHED_AT + offset_s,
        elapsed=0.05,
        ip=ip,
        reason=reason,
        request_headers=[("User-Agent", "beamcrawl-test/1"), ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate")],
        response_headers=headers if headers is not None else [("Content-Type", "text/html; charset=utf-8")],
        raw_body=raw,
        body=raw if body is None else body,
        truncated=truncated,
    )
    return ParsedPage(fetch=result, checksum="00" * 8)


def _sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _fixed_ids(start: int = 0):
    """Pinned record ids for ``archive_fetch(new_id=...)``, so bytes are the same on every run."""
    ids = itertools.count(start)
    return lambda: f"<urn:uuid:00000000-0000-0000-0000-{next(ids):012d}>"


class _FixedWriter(WARCWriter):
    """Pins record ids and dates of warcio's writer (the warcinfo record; the reference below)."""

    ids = itertools.count()

    def __init__(self, out: io.BytesIO) -> None:
        super().__init__(out, gzip=True, warc_version="1.1")

    @classmethod
    def _make_warc_id(cls) -> str:
        return f"<urn:uuid:00000000-0000-0000-0000-{next(cls.ids):012d}>"

    @classmethod
    def _make_warc_date(cls, use_micros: bool = False) -> str:
        return "2026-01-01T00:00:00.000000Z"


def _records(data: bytes) -> list:
    """(record, headers, http headers, payload, offset, length) of every record."""
    out = []
    it = ArchiveIterator(io.BytesIO(data), check_digests="raise")
    for record in it:
        payload = record.content_stream().read() if record.rec_type != "response" else record.raw_stream.read()
        out.append(
            (
                record.rec_type,
                record.rec_headers,
                record.http_headers,
                payload,
                it.get_record_offset(),
                it.get_record_length(),
            )
        )
    return out


# --- records of one fetch ------------------------------------------------------------------


def test_response_then_request_linked_with_ip_and_digests():
    page = _fetch("http://a.test/x?y=1")
    archived = archive_fetch(page, new_id=_fixed_ids())
    recs = _records(archived.data)
    assert [r[0] for r in recs] == ["response", "request"]
    resp, req = recs
    assert resp[1].get_header("WARC-IP-Address") == "127.0.0.1"
    assert resp[1].get_header("WARC-Target-URI") == "http://a.test/x?y=1"
    assert resp[1].get_header("WARC-Date") == "2026-01-01T00:00:00.125000Z"
    assert resp[1].get_header("WARC-Payload-Digest") == _sha1_b32(HTML)
    assert resp[1].get_header("WARC-Truncated") is None
    assert resp[1].get_header("Content-Type") == "application/http; msgtype=response"
    assert req[1].get_header("WARC-Concurrent-To") == resp[1].get_header("WARC-Record-ID")
    assert req[1].get_header("Content-Type") == "application/http; msgtype=request"
    assert req[2].protocol == "GET" and req[2].statusline == "/x?y=1 HTTP/1.1"
    assert req[2].get_header("Host") == "a.test"
    assert req[2].get_header("User-Agent") == "beamcrawl-test/1"
    assert resp[2].get_statuscode() == "200"
    # each record is its own gzip member: the response is exactly the first response_length bytes
    assert archived.response_length == resp[5]
    assert resp[4] == 0 and req[4] == archived.response_length
    assert len(gzip.decompress(archived.data[: archived.response_length])) > len(HTML)


def test_pinned_ids_give_the_same_bytes_every_time():
    page = _fetch("http://a.test/")
    one = archive_fetch(page, new_id=_fixed_ids()).data
    two = archive_fetch(page, new_id=_fixed_ids()).data
    assert one == two
    text = gzip.decompress(one).decode("latin-1")
    assert text.startswith("WARC/1.1\r\nWARC-Type: response\r\n")
    assert "WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000000>\r\n" in text
    assert "\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" in text


def test_capped_body_is_marked_truncated():
    raw = b"x" * 1000
    archived = archive_fetch(
        _fetch(
            "http://a.test/big",
            raw=raw,
            truncated="length",
            headers=[("Content-Type", "text/plain"), ("Content-Length", "5000")],
        )
    )
    resp = _records(archived.data)[0]
    assert resp[1].get_header("WARC-Truncated") == "length"
    # the server's Content-Length is kept as sent; the record holds what was read
    assert resp[2].get_header("Content-Length") == "5000"
    assert resp[3] == raw
    assert resp[1].get_header("WARC-Payload-Digest") == _sha1_b32(raw)


def test_transfer_and_content_encodings_recorded_honestly():
    html = b"<html>" + b"hello " * 200 + b"</html>"
    compressed = gzip.compress(html, mtime=0)
    page = _fetch(
        "http://a.test/gz",
        raw=compressed,
        body=html,
        headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")],
    )
    resp = _records(archive_fetch(page).data)[0]
    http = resp[2]
    # chunks were undone by the client: the header must not claim them
    assert http.get_header("Transfer-Encoding") is None
    assert http.get_header("X-Crawler-Transfer-Encoding") == "chunked"
    # the body is as the server compressed it, and the digest is of those bytes
    assert http.get_header("Content-Encoding") == "gzip"
    assert resp[3] == compressed
    assert resp[1].get_header("WARC-Payload-Digest") == _sha1_b32(compressed)
    assert zlib.decompress(resp[3], 47) == html


def test_header_bytes_are_written_as_received():
    # the HTTP client decodes header bytes as latin-1; "caf\xe9" is the byte e9 on the wire
    page = _fetch("http://a.test/h", headers=[("Content-Type", "text/html"), ("X-Name", "caf\xe9")])
    archived = archive_fetch(page)
    assert b"\r\nX-Name: caf\xe9\r\n\r\n" in gzip.decompress(archived.data[: archived.response_length])
    assert _records(archived.data)[0][2].get_header("X-Name") == "caf\xe9"  # readers get it back


def test_no_ip_no_header():
    resp = _records(archive_fetch(_fetch("http://a.test/", ip=None)).data)[0]
    assert resp[1].get_header("WARC-IP-Address") is None


def test_warcinfo_names_the_file_and_the_crawler():
    data = warcinfo_bytes("part-1.warc.gz", "beamcrawl-test/1 (+http://x)", "beamcrawl round=3", _FixedWriter)
    ((rec_type, headers, _http, payload, offset, _length),) = _records(data)
    assert rec_type == "warcinfo" and offset == 0
    assert headers.protocol == "WARC/1.1"
    assert headers.get_header("WARC-Filename") == "part-1.warc.gz"
    assert headers.get_header("Content-Type") == "application/warc-fields"
    fields = dict(line.split(": ", 1) for line in payload.decode().strip().split("\r\n"))
    assert fields["http-header-user-agent"] == "beamcrawl-test/1 (+http://x)"
    assert fields["format"] == "WARC File Format 1.1"
    assert fields["robots"] == "obey"
    assert fields["isPartOf"] == "beamcrawl round=3"
    assert fields["software"].startswith("beamcrawl/")


# --- page events ---------------------------------------------------------------------------


def test_page_event_publishes_the_headers_that_matter():
    page = _fetch(
        "http://a.test/r",
        status=301,
        reason="Moved",
        headers=[
            ("Location", "/s"),
            ("ETag", '"abc"'),
            ("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"),
            ("Server", "simweb"),
            ("X-Robots-Tag", "noarchive"),
            ("x-robots-tag", "otherbot: noindex"),
            ("Retry-After", "120"),
            ("Content-Language", "en"),
        ],
    )
    page.fetch.waited = 0.25
    event = page_event(page, "warc/round=4/p.warc.gz@0")
    assert event["location"] == "/s" and event["etag"] == '"abc"'
    assert event["last_modified"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert event["server"] == "simweb" and event["retry_after"] == "120" and event["content_language"] == "en"
    assert event["x_robots_tag"] == "noarchive, otherbot: noindex"
    assert event["content_encoding"] is None
    assert event["waited_ms"] == 250.0 and event["source"] == "link" and event["blob"].endswith("@0")


@settings(max_examples=200, deadline=None)
@given(
    source=st.sampled_from(["src.test", "SRC.test:8080", "a.example", "[::1]:81"]),
    target=st.sampled_from(["ok.test", "ok.test:8080", "src.test:81", "127.0.0.2", "[::1]", "xn--bcher-kva.example"]),
    scheme=st.sampled_from(["http", "https"]),
    path=st.sampled_from(["/robots.txt", "/r1", "/robots.txt?x=1"]),
)
def test_a_robots_redirect_hops_event_names_the_host_it_was_sent_to(source, target, scheme, path):
    """A robots.txt redirect hop is a request to the Location's host, made for the source
    host's file: its pages/ row's host is the host of its url (the column's meaning), not
    the source's. Before, src.test's hop to ok.test was published as a request to src.test."""
    url = f"{scheme}://{target}{path}"
    page = _fetch(url, status=301, headers=[("Location", "/next")], source="robots")
    page.fetch.entry = dataclasses.replace(page.fetch.entry, host=host_of(f"http://{source}/"))
    assert page_event(page, None)["host"] == host_of(url)


def test_an_unfollowed_robots_hops_event_keeps_the_source_host():
    """A hop not made (its Location no URL) holds the Location as given for its url: its host
    is the source's, the only host the result knows."""
    page = _fetch("http://src.test/robots.txt", source="robots")
    page.fetch.url = "http://[::1/robots.txt"
    page.fetch.outcome = "error"
    assert page_event(page, None)["host"] == "src.test"


# --- the writer DoFn and the transform -------------------------------------------------------


def _pages() -> list[ParsedPage]:
    pages = [
        _fetch("http://b.test/", offset_s=1),
        _fetch("http://a.test/2", offset_s=2),
        _fetch("http://a.test/1", offset_s=3),
        _fetch("http://a.test/1", offset_s=0.5),  # same URL earlier: sorts before by timestamp
        _fetch("http://www.c.test:8080/p?b=2&a=1", offset_s=4, headers=[]),  # no Content-Type
        _fetch("http://a.test/old", status=301, reason="Moved", headers=[("Location", "/new")], raw=b"", offset_s=5),
        _fetch(
            "http://a.test/big",
            raw=b"y" * 300,
            truncated="length",
            offset_s=6,
            headers=[("Content-Type", "application/pdf")],
        ),
        _fetch(
            "http://a.test/robots.txt",
            headers=[("Content-Type", "text/plain")],
            raw=b"User-agent: *\n",
            source="robots",
        ),
    ]
    failed = FetchResult(
        entry=pages[0].fetch.entry, outcome="error", url="http://b.test/e", fetched_at=FETCHED_AT, error="timeout"
    )
    deferred = FetchResult(entry=pages[0].fetch.entry, outcome="deferred", url="http://b.test/d")
    return [*pages, ParsedPage(fetch=failed), ParsedPage(fetch=deferred)]


def _write_round(tmp_path, pages, max_bytes=1 << 30, **kw) -> tuple[RoundOutputs, list[dict]]:
    outputs = RoundOutputs(str(tmp_path / "out"), 3)
    outputs.prepare()
    with TestPipeline(runner="FnApiRunner") as p:
        _ = (
            p
            | beam.Create([PageBatch(pages)])
            | WriteWarc(outputs, max_bytes, "beamcrawl-test/1", **kw)
            | beam.FlatMap(lambda events: [json.dumps(e, default=str) for e in events])
            | beam.io.WriteToText(str(tmp_path / "events"), shard_name_template="")
        )
        assert_that(collected(p), equal_to([]), label="No dead letters")
    events = [json.loads(line) for line in open(tmp_path / "events")]
    outputs.commit_files()
    return outputs, events


def test_writer_archives_indexes_and_points_blobs(tmp_path):
    outputs, events = _write_round(tmp_path, _pages())
    out = outputs.out
    warcs = sorted(glob.glob(f"{out}/warc/round=3/*.warc.gz"))
    assert len(warcs) == 1
    assert os.path.exists(warcs[0][: -len(".warc.gz")] + ".cdxj")
    assert len(events) == 9  # the deferred one makes no event
    by_url = {e["url"]: e for e in events if e["blob"]}
    assert len(by_url) == 7
    for event in events:
        if event["outcome"] != "fetched":
            assert event["blob"] is None
            continue
        rel, offset = event["blob"].rsplit("@", 1)
        with open(os.path.join(out, rel), "rb") as fh:
            fh.seek(int(offset))
            record = next(iter(ArchiveIterator(fh)))
            assert record.rec_type == "response"
            assert record.rec_headers.get_header("WARC-Target-URI") == event["url"]
    with open(warcs[0], "rb") as fh:
        types = [r.rec_type for r in ArchiveIterator(fh, check_digests="raise")]
    assert types[0] == "warcinfo" and types.count("warcinfo") == 1
    assert types[1:] == ["response", "request"] * 8


def test_rotation_starts_each_file_with_warcinfo_and_its_own_index(tmp_path):
    outputs, events = _write_round(tmp_path, _pages(), max_bytes=1500)
    warcs = sorted(glob.glob(f"{outputs.out}/warc/round=3/*.warc.gz"))
    assert len(warcs) >= 3
    indexed = 0
    for path in warcs:
        with open(path, "rb") as fh:
            assert next(iter(ArchiveIterator(fh))).rec_type == "warcinfo"
        with open(path[: -len(".warc.gz")] + ".cdxj") as fh:
            lines = fh.read().splitlines()
        rel = os.path.relpath(path, outputs.out)
        assert all(json.loads(line.split(" ", 2)[2])["filename"] == rel for line in lines)
        indexed += len(lines)
    assert indexed == 8


@pytest.mark.parametrize("max_index", [1, 3])
def test_a_file_rotates_once_its_index_holds_max_index_entries(tmp_path, max_index):
    """Small records cannot make one file's index (held until the file closes) grow with the
    round: a file closes at ``max_index`` entries, each index is its own file's, none is lost."""
    outputs, events = _write_round(tmp_path, _pages(), max_index=max_index)
    warcs = sorted(glob.glob(f"{outputs.out}/warc/round=3/*.warc.gz"))
    assert len(warcs) == -(-8 // max_index)
    blobs = set()
    for path in warcs:
        with open(path[: -len(".warc.gz")] + ".cdxj") as fh:
            lines = fh.read().splitlines()
        assert 1 <= len(lines) <= max_index
        rel = os.path.relpath(path, outputs.out)
        for line in lines:
            fields = json.loads(line.split(" ", 2)[2])
            assert fields["filename"] == rel
            blobs.add(f"{rel}@{fields['offset']}")
        with open(path, "rb") as fh:
            types = [r.rec_type for r in ArchiveIterator(fh, check_digests="raise")]
        assert types[0] == "warcinfo" and types[1:] == ["response", "request"] * len(lines)
    assert blobs == {e["blob"] for e in events if e["blob"]} and len(blobs) == 8


def test_cdxj_is_sorted_by_surt_then_timestamp(tmp_path):
    outputs, _ = _write_round(tmp_path, _pages())
    (path,) = glob.glob(f"{outputs.out}/warc/round=3/*.cdxj")
    lines = open(path).read().splitlines()
    keys = [(line.split(" ")[0], line.split(" ")[1]) for line in lines]
    assert keys == sorted(keys)
    assert keys[0][0].startswith("test,a)/1") and keys[0][1] < keys[1][1]
    fields = {json.loads(line.split(" ", 2)[2])["url"]: json.loads(line.split(" ", 2)[2]) for line in lines}
    assert fields["http://a.test/old"]["redirect"] == "http://a.test/new"
    assert fields["http://a.test/big"]["truncated"] == "length"
    assert "mime" not in fields["http://www.c.test:8080/p?b=2&a=1"]
    assert [line.split(" ")[0] for line in lines if "c.test" in line] == ["test,c:8080)/p?a=1&b=2"]


def _indexer_lines(paths: list[str], root: str) -> list[str]:
    from cdxj_indexer.main import CDXJIndexer

    out = io.StringIO()
    indexer = CDXJIndexer(out, paths, dir_root=root, sort=True)
    indexer.process_all()
    return out.getvalue().splitlines()


COMMON_FIELDS = ("url", "mime", "status", "length", "offset", "filename")


def compare_with_cdxj_indexer(out: str) -> int:
    """Compares every .cdxj beside a WARC under ``out`` with cdxj-indexer's index of the
    WARC, field by field; returns the number of lines compared."""
    compared = 0
    for warc in sorted(glob.glob(f"{out}/warc/round=*/*.warc.gz")):
        with open(warc[: -len(".warc.gz")] + ".cdxj", encoding="utf-8") as fh:
            ours = fh.read().splitlines()
        theirs = _indexer_lines([warc], out)
        assert len(ours) == len(theirs), warc
        for mine, other in zip(ours, theirs):
            m_key, m_ts, m_json = mine.split(" ", 2)
            t_key, t_ts, t_json = other.split(" ", 2)
            assert (m_key, m_ts) == (t_key, t_ts)
            m, t = json.loads(m_json), json.loads(t_json)
            for name in COMMON_FIELDS:
                assert m.get(name) == t.get(name), (name, mine, other)
            # Common Crawl's digest form: cdxj-indexer keeps the "sha1:" prefix, we drop it
            assert "sha1:" + m["digest"] == t["digest"]
            assert set(t) <= set(m) | {"digest"}
            compared += 1
    return compared


def test_cdxj_matches_cdxj_indexer_field_by_field(tmp_path):
    outputs, _ = _write_round(tmp_path, _pages(), max_bytes=1500)
    assert compare_with_cdxj_indexer(outputs.out) == 8


@pytest.mark.parametrize("run_entries", [1, 3, None])
def test_read_back_index_equals_the_writers(tmp_path, monkeypatch, run_entries):
    """Whether the writer's index was held whole or sorted into runs of 1 or 3 entries on
    disk, its lines are the file's own, in order."""
    if run_entries is not None:
        monkeypatch.setattr(cdxj, "RUN_ENTRIES", run_entries)
    outputs, _ = _write_round(tmp_path, _pages())
    (warc,) = glob.glob(f"{outputs.out}/warc/round=3/*.warc.gz")
    rel = os.path.relpath(warc, outputs.out)
    with open(warc, "rb") as fh:
        read_back = sorted(cdxj.index_warc(fh, rel))
    with open(warc[: -len(".warc.gz")] + ".cdxj") as fh:
        assert [e.line() for e in read_back] == fh.read().splitlines()


def test_a_page_warcio_cannot_write_is_counted_and_published_without_blob(tmp_path, monkeypatch):
    outputs = RoundOutputs(str(tmp_path / "out"), 1)
    outputs.prepare()
    fn = warc_io._WriteWarcFn(outputs, 1 << 30, "ua")
    fn.setup()
    fn.start_bundle()

    def broken(page, **_kw):
        raise ValueError("bad header")

    monkeypatch.setattr(warc_io, "archive_fetch", broken)
    ((event,),) = list(fn.process(PageBatch([_fetch("http://a.test/")])))
    fn.finish_bundle()
    assert event["blob"] is None and event["error"] == "not archived: ValueError: bad header"
    assert glob.glob(f"{outputs.staged('warc')}/*") == []  # no file was opened for nothing


@pytest.mark.parametrize("url", ["http://a.test/", "http://www.a.test:81/x?b=1&a=2"])
def test_surt_key_is_the_lookup_key_of_replay_tools(url):
    import surt

    assert cdxj.surt_key(url) == surt.surt(url)


# --- copies: revisit records, and nothing for a near copy ------------------------------------


def _copy_of(
    original: ParsedPage, url: str, kind: str = "exact", raw: bytes | None = None, offset_s: float = 10.0
) -> ParsedPage:
    """A fetch of ``url`` marked a copy of ``original`` (as content_seen marks it)."""
    page = _fetch(
        url,
        raw=original.fetch.raw_body if raw is None else raw,
        offset_s=offset_s,
        headers=[("Content-Type", "text/html; charset=utf-8"), ("Server", "mirror")],
    )
    page.duplicate_of = original.fetch.url
    page.duplicate_kind = kind
    page.duplicate_distance = 0 if kind == "exact" else 2
    if kind == "exact":
        page.original_fetched_at = original.fetch.fetched_at
        page.original_digest = _sha1_b32(original.fetch.raw_body)
    return page


def test_capture_kind_stores_new_content_and_exact_copies_of_identical_payloads_only():
    original = _fetch("http://a.test/")
    assert warc_io.capture_kind(original) == "response"
    assert warc_io.capture_kind(_copy_of(original, "http://b.test/")) == "revisit"
    assert warc_io.capture_kind(_copy_of(original, "http://b.test/", kind="near", raw=HTML + b" ")) is None
    # The same payload sent gzipped: another payload on the wire, so no identical-digest revisit.
    assert warc_io.capture_kind(_copy_of(original, "http://b.test/", raw=zlib.compress(HTML))) == "response"
    without_date = _copy_of(original, "http://b.test/")
    without_date.original_fetched_at = None
    assert warc_io.capture_kind(without_date) == "response"


def test_capture_kind_revisits_the_urls_own_capture_only_when_the_bytes_repeat():
    first = _fetch("http://a.test/")
    held = {"stored_at": first.fetch.fetched_at, "digest": _sha1_b32(first.fetch.raw_body)}
    again = _fetch("http://a.test/", offset_s=10.0)
    again.revisit = dict(held)
    assert warc_io.capture_kind(again) == "unchanged"
    assert warc_io.held_copy(again) == (held["stored_at"], held["digest"])
    first.revisit = dict(held)  # the fetch that is the copy held: a response
    assert warc_io.capture_kind(first) == "response"
    gzipped = _fetch("http://a.test/", raw=zlib.compress(HTML), offset_s=10.0)
    gzipped.revisit = dict(held)  # same content, other wire bytes: stored whole
    assert warc_io.capture_kind(gzipped) == "response"
    for missing in ("stored_at", "digest"):
        partial = _fetch("http://a.test/", offset_s=10.0)
        partial.revisit = {k: v for k, v in held.items() if k != missing}
        assert warc_io.capture_kind(partial) == "response"
    error = _fetch("http://a.test/", offset_s=10.0, status=500)
    error.revisit = dict(held)
    assert warc_io.capture_kind(error) == "response"


def test_an_unchanged_fetch_is_a_revisit_of_its_own_first_capture():
    first = _fetch("http://a.test/")
    again = _fetch("http://a.test/", offset_s=10.0)
    again.revisit = {"stored_at": first.fetch.fetched_at, "digest": _sha1_b32(first.fetch.raw_body)}
    archived = warc_io.archive_fetch(again)
    (capture, request) = list(ArchiveIterator(io.BytesIO(archived.data)))
    h = capture.rec_headers
    assert capture.rec_type == "revisit" and request.rec_type == "request"
    assert h.get_header("WARC-Profile") == REVISIT_PROFILE_1_1
    assert h.get_header("WARC-Refers-To-Target-URI") == "http://a.test/"
    assert h.get_header("WARC-Refers-To-Date") == warc_date(first.fetch.fetched_at)
    assert h.get_header("WARC-Payload-Digest") == _sha1_b32(first.fetch.raw_body)
    assert capture.content_stream().read() == b"" and archived.capture.mime == "warc/revisit"  # no payload


def test_an_exact_copy_is_a_revisit_then_its_request():
    original = _fetch("http://a.test/")
    copy = _copy_of(original, "http://b.test/x?print=1")
    archived = archive_fetch(copy, new_id=_fixed_ids())
    recs = _records(archived.data)
    assert [r[0] for r in recs] == ["revisit", "request"]
    revisit, request = recs
    h = revisit[1]
    assert h.get_header("WARC-Target-URI") == "http://b.test/x?print=1"
    assert h.get_header("WARC-Refers-To-Target-URI") == "http://a.test/"
    assert h.get_header("WARC-Refers-To-Date") == "2026-01-01T00:00:00.125000Z"
    assert h.get_header("WARC-Date") == "2026-01-01T00:00:10.125000Z"
    assert h.get_header("WARC-Payload-Digest") == _sha1_b32(HTML)
    assert h.get_header("WARC-Profile") == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert h.get_header("WARC-IP-Address") == "127.0.0.1"
    assert revisit[2].get_header("Server") == "mirror" and revisit[3] == b""  # headers only
    assert request[1].get_header("WARC-Concurrent-To") == h.get_header("WARC-Record-ID")
    assert archived.response_length == revisit[5]


def test_copies_in_a_round_are_stored_once_and_pass_warcio_check(tmp_path):
    import subprocess
    import sys

    original = _fetch("http://a.test/", offset_s=1)
    exact = _copy_of(original, "http://b.test/", offset_s=2)
    near = _copy_of(original, "http://c.test/", kind="near", raw=HTML.replace(b"A", b"B"), offset_s=3)
    outputs, events = _write_round(tmp_path, [original, exact, near])
    by_url = {e["url"]: e for e in events}
    assert by_url["http://c.test/"]["blob"] is None and by_url["http://c.test/"]["error"] is None
    assert (
        by_url["http://c.test/"]["duplicate_of"],
        by_url["http://c.test/"]["duplicate_kind"],
        by_url["http://c.test/"]["duplicate_distance"],
    ) == ("http://a.test/", "near", 2)
    assert (by_url["http://b.test/"]["duplicate_of"], by_url["http://b.test/"]["duplicate_kind"]) == (
        "http://a.test/",
        "exact",
    )
    assert by_url["http://a.test/"]["duplicate_of"] is None
    (warc,) = glob.glob(f"{outputs.out}/warc/round=3/*.warc.gz")
    with open(warc, "rb") as fh:
        records = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in ArchiveIterator(fh)]
    captures = sorted((t, u) for t, u in records if t in ("response", "revisit"))
    assert captures == [("response", "http://a.test/"), ("revisit", "http://b.test/")]
    rel, offset = by_url["http://b.test/"]["blob"].rsplit("@", 1)
    with open(os.path.join(outputs.out, rel), "rb") as fh:
        fh.seek(int(offset))
        assert next(iter(ArchiveIterator(fh))).rec_type == "revisit"
    warcio = os.path.join(os.path.dirname(sys.executable), "warcio")
    check = subprocess.run([warcio, "check", "-v", warc], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest present but not checked (revisit)" in check.stdout
    (index,) = glob.glob(f"{outputs.out}/warc/round=3/*.cdxj")
    lines = [json.loads(line.split(" ", 2)[2]) for line in open(index).read().splitlines()]
    assert sorted((f["url"], f.get("mime")) for f in lines) == [
        ("http://a.test/", "text/html"),
        ("http://b.test/", "warc/revisit"),
    ]
    assert compare_with_cdxj_indexer(outputs.out) == 2


# --- the records are the ones warcio's writer made of the same fetch --------------------------
#
# Records used to be built with warcio's WARCWriter; they are now built as bytes
# (core/archive/warc_records.py). The reference below builds them the old way, with warcio, for the
# same fetch and the same pinned ids, and the tests hold the two to the same bytes once
# decompressed, the same headers and payloads read back, and the same index line.

from urllib.parse import urlsplit  # noqa: E402

from warcio.statusandheaders import StatusAndHeaders  # noqa: E402

from beamcrawl.core.net.conditional import revisit_warc_headers  # noqa: E402
from beamcrawl.core.archive.warc_revisit import REVISIT_PROFILE_1_1, warc_date  # noqa: E402

CAPTURE_ID = "<urn:uuid:00000000-0000-0000-0000-000000000000>"
REQUEST_ID = "<urn:uuid:00000000-0000-0000-0000-000000000001>"

# The named fields in the order the old writer left them, by record kind.
_ORDER = {
    "response": [
        "WARC-Type",
        "WARC-Record-ID",
        "WARC-Date",
        "WARC-Target-URI",
        "WARC-IP-Address",
        "WARC-Truncated",
        "WARC-Payload-Digest",
    ],
    "revisit": [
        "WARC-Type",
        "WARC-Record-ID",
        "WARC-Date",
        "WARC-Target-URI",
        "WARC-IP-Address",
        "WARC-Profile",
        "WARC-Refers-To-Target-URI",
        "WARC-Refers-To-Date",
        "WARC-Payload-Digest",
        "WARC-Truncated",
    ],
    "not_modified": [
        "WARC-Type",
        "WARC-Record-ID",
        "WARC-Date",
        "WARC-Target-URI",
        "WARC-IP-Address",
        "WARC-Profile",
        "WARC-Refers-To-Target-URI",
        "WARC-Refers-To-Date",
    ],
    "request": [
        "WARC-Type",
        "WARC-Record-ID",
        "WARC-Date",
        "WARC-Target-URI",
        "WARC-Concurrent-To",
        "WARC-Payload-Digest",
    ],
}


class _Latin1Headers(StatusAndHeaders):
    """Header bytes as received (latin-1), warcio's percent-encoding for anything else."""

    def compute_headers_buffer(self, header_filter=None):
        try:
            self.headers_buff = self.to_str(header_filter).encode("latin-1") + b"\r\n"
        except UnicodeEncodeError:
            super().compute_headers_buffer(header_filter)


def _warcio_reference(page: ParsedPage, kind: str):
    """(capture record read back as written, bytes of the capture, bytes of the request) as
    warcio's writer makes them."""
    f = page.fetch
    writer = WARCWriter(io.BytesIO(), gzip=True, warc_version="1.1")
    date = warc_date(f.fetched_at)
    renamed = [(warc_io.HOP_BY_HOP_RENAMED.get(k.lower(), k), v) for k, v in f.response_headers]
    http = _Latin1Headers(f"{f.status} {f.reason}".strip(), renamed, protocol=f"HTTP/{f.http_version}")
    warc = {"WARC-Record-ID": CAPTURE_ID, "WARC-Date": date}
    if f.ip:
        warc["WARC-IP-Address"] = f.ip
    if kind == "response":
        if f.truncated:
            warc["WARC-Truncated"] = f.truncated
        capture = writer.create_warc_record(
            f.url,
            "response",
            payload=io.BytesIO(f.raw_body),
            length=len(f.raw_body),
            http_headers=http,
            warc_headers_dict=warc,
        )
    elif kind == "revisit":
        capture = writer.create_revisit_record(
            f.url,
            page.original_digest,
            page.duplicate_of,
            warc_date(page.original_fetched_at),
            http_headers=http,
            warc_headers_dict=warc,
        )
        capture.rec_headers.replace_header("WARC-Profile", REVISIT_PROFILE_1_1)
        capture.rec_headers.add_header("WARC-Truncated", "length")
    else:
        stored_at = (page.revisit or {}).get("stored_at") or (f.entry.revisit or {}).get("stored_at")
        refers = revisit_warc_headers(f.url, warc_date(stored_at) if stored_at else "")
        if not stored_at:
            del refers["WARC-Refers-To-Date"]
        capture = writer.create_warc_record(
            f.url, "revisit", payload=io.BytesIO(b""), length=0, http_headers=http, warc_headers_dict={**warc, **refers}
        )
    parts = urlsplit(f.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = writer.create_warc_record(
        f.url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=_Latin1Headers(
            f"GET {target} HTTP/1.1", [("Host", parts.netloc), *f.request_headers], is_http_request=True
        ),
        warc_headers_dict={"WARC-Record-ID": REQUEST_ID, "WARC-Date": date, "WARC-Concurrent-To": CAPTURE_ID},
    )
    out = []
    for record, order in ((capture, _ORDER[kind]), (request, _ORDER["request"])):
        record.rec_headers.headers.sort(key=lambda h: order.index(h[0]))
        writer.out = io.BytesIO()
        writer.write_record(record)
        out.append(writer.out.getvalue())
    (read,) = [r for r in ArchiveIterator(io.BytesIO(out[0]))]
    return read, out[0], out[1]


def _members(data: bytes) -> list[bytes]:
    """Each gzip member of ``data``, decompressed."""
    out = []
    while data:
        d = zlib.decompressobj(zlib.MAX_WBITS + 16)
        out.append(d.decompress(data))
        assert d.eof
        data = d.unused_data
    return out


def _read_back(data: bytes) -> list[tuple]:
    """(type, WARC fields, status line, HTTP headers, payload) of each record, digests checked."""
    out = []
    for rec in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
        http = rec.http_headers
        out.append(
            (
                rec.rec_type,
                rec.rec_headers.headers,
                http.protocol + " " + http.statusline,
                http.headers,
                rec.raw_stream.read(),
            )
        )
    return out


def _exact_copy(url: str, **kw) -> ParsedPage:
    page = _copy_of(_fetch("http://a.test/orig"), url, **kw)
    return page


def _not_modified(stored_at: float | None, on_entry: bool = False) -> ParsedPage:
    page = _fetch("http://a.test/nm", status=304, reason="Not Modified", raw=b"", headers=[("ETag", '"v1"')])
    page.fetch.request_headers = [("User-Agent", "beamcrawl-test/1"), ("If-None-Match", '"v1"')]
    if on_entry:
        page.fetch.entry.revisit = {"stored_at": stored_at}
    else:
        page.revisit = {"stored_at": stored_at}
    return page


REFERENCE_CASES = {
    "plain": ("response", lambda: _fetch("http://a.test/x?y=1")),
    "iri": ("response", lambda: _fetch("http://a.test/caf\u00e9/\u00fc?q=\u00e9")),
    "idn host": ("response", lambda: _fetch("http://b\u00fccher.test/")),
    "latin-1 header": (
        "response",
        lambda: _fetch("http://a.test/h", headers=[("Content-Type", "text/html"), ("X-Name", "caf\xe9")]),
    ),
    "non-latin-1 header": (
        "response",
        lambda: _fetch(
            "http://a.test/e",
            headers=[
                ("Content-Type", "text/html"),
                ("Content-Disposition", 'attachment; filename="\u20ac.txt"'),
                ("X-Euro", "\u20ac5"),
            ],
        ),
    ),
    "latin-1 request header": ("response", lambda: _req(_fetch("http://a.test/c"), [("Cookie", "n=\xe9")])),
    "non-latin-1 request header": ("response", lambda: _req(_fetch("http://a.test/c"), [("Cookie", "n=\u20ac")])),
    "empty body": ("response", lambda: _fetch("http://a.test/empty", raw=b"")),
    "no headers": ("response", lambda: _fetch("http://a.test", headers=[])),
    "redirect": (
        "response",
        lambda: _fetch("http://a.test/old", status=301, reason="Moved", headers=[("location", " /new ")], raw=b""),
    ),
    "big truncated": ("response", lambda: _fetch("http://a.test/big", raw=os.urandom(40_000), truncated="length")),
    "truncated by time": ("response", lambda: _fetch("http://a.test/slow", truncated="time")),
    "no ip, no reason, HTTP/1.0": ("response", lambda: _v10(_fetch("http://a.test/", ip=None, reason=""))),
    "transfer-encoding": (
        "response",
        lambda: _fetch(
            "http://a.test/gz",
            raw=gzip.compress(HTML, mtime=0),
            headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")],
        ),
    ),
    "whole second": ("response", lambda: _fetch("http://a.test/s", offset_s=-0.125)),
    "exact copy": ("revisit", lambda: _exact_copy("http://b.test/x?print=1")),
    "exact copy, iri, no ip": ("revisit", lambda: _exact_copy("http://b.test/\u00e9t\u00e9")),
    "not modified": ("not_modified", lambda: _not_modified(FETCHED_AT - 86400.5)),
    "not modified, date on the entry": ("not_modified", lambda: _not_modified(FETCHED_AT - 60, on_entry=True)),
    "not modified, no stored date": ("not_modified", lambda: _not_modified(None)),
}


def _req(page: ParsedPage, headers: list[tuple[str, str]]) -> ParsedPage:
    page.fetch.request_headers = headers
    return page


def _v10(page: ParsedPage) -> ParsedPage:
    page.fetch.http_version = "1.0"
    return page


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_records_are_the_ones_warcio_wrote(case):
    kind, make = REFERENCE_CASES[case]
    page = make()
    if case == "exact copy, iri, no ip":
        page.fetch.ip = None
    ids = iter([CAPTURE_ID, REQUEST_ID])
    ours = archive_fetch(page, kind=kind, new_id=lambda: next(ids))
    theirs, capture, request = _warcio_reference(page, kind)
    # the same records, byte for byte, each one gzip member; the capture first
    assert _members(ours.data) == [gzip.decompress(capture), gzip.decompress(request)]
    assert _members(ours.data[: ours.response_length]) == [gzip.decompress(capture)]
    # read back alike, digests checked (warcio checks the response's and request's)
    assert _read_back(ours.data) == _read_back(capture + request)
    # the block digest recomputed (warcio does not check a revisit's)
    (record,) = _members(ours.data[: ours.response_length])
    header, block = record.split(b"\r\n\r\n", 1)
    fields = dict(line.split(": ", 1) for line in header.decode("utf-8").split("\r\n")[1:])
    assert block.endswith(b"\r\n\r\n") and int(fields["Content-Length"]) == len(block) - 4
    assert fields["WARC-Block-Digest"] == _sha1_b32(block[:-4])
    if kind == "response":
        assert fields["WARC-Payload-Digest"] == _sha1_b32(page.fetch.raw_body)
    # the index line made while writing is the one made by reading the record back
    mine = cdxj.entry_for_capture(ours.capture, 1234, ours.response_length, "warc/x.warc.gz")
    read = cdxj.entry_for_record(theirs, 1234, ours.response_length, "warc/x.warc.gz")
    assert (mine.key, mine.timestamp, mine.offset, mine.line()) == (read.key, read.timestamp, read.offset, read.line())


@pytest.mark.parametrize(
    "url, headers, error",
    [
        ("http://a.test/\u4e2d", [], UnicodeEncodeError),  # a request line that is not latin-1
        ("http://a.test/", [("X-\u20ac", "v")], UnicodeEncodeError),  # a header name that is not ASCII
        ("http://a.test/\udc80", [], UnicodeEncodeError),  # not text
        ("http://[::1/", [], ValueError),  # a URL that does not split
    ],
)
def test_what_warcio_could_not_write_is_refused_the_same_way(url, headers, error):
    page = _fetch("http://a.test/", headers=headers)
    page.fetch.url = url
    with pytest.raises(error):
        archive_fetch(page)
    with pytest.raises(error):
        _warcio_reference(page, "response")


def test_every_index_line_points_at_its_own_gzip_member(tmp_path):
    original = _fetch("http://a.test/", offset_s=1)
    pages = [*_pages()[:8], original, _copy_of(original, "http://b.test/", offset_s=2), _not_modified(FETCHED_AT - 9)]
    outputs, _ = _write_round(tmp_path, pages, max_bytes=2500)
    checked = 0
    for index in glob.glob(f"{outputs.out}/warc/round=3/*.cdxj"):
        for line in open(index, encoding="utf-8").read().splitlines():
            key, timestamp, text = line.split(" ", 2)
            f = json.loads(text)
            with open(os.path.join(outputs.out, f["filename"]), "rb") as fh:
                fh.seek(int(f["offset"]))
                member = fh.read(int(f["length"]))
                following = fh.read(2)
            d = zlib.decompressobj(zlib.MAX_WBITS + 16)
            record = d.decompress(member)
            assert d.eof and d.unused_data == b""  # exactly one whole member
            assert following in (b"", b"\x1f\x8b")  # and the next starts right after it
            (rec,) = _read_back(gzip.compress(record))
            fields = dict(rec[1])
            assert fields["WARC-Target-URI"] == f["url"] and rec[0] in ("response", "revisit")
            assert cdxj.timestamp_of(fields["WARC-Date"]) == timestamp and cdxj.surt_key(f["url"]) == key
            digest = fields.get("WARC-Payload-Digest")  # none on a 304's revisit
            assert f.get("digest") == (digest.split(":", 1)[1] if digest else None)
            checked += 1
    assert checked == 11  # 8 pages, an original, its exact copy and a 304


# Header values as the fetcher holds them: any bytes the HTTP client lets through in a field
# value (not CR, LF or NUL), read as latin-1; UTF-8 obs-text, controls, Unicode's whitespace.
_FIELD_BYTES = st.one_of(
    st.binary(max_size=16),
    st.lists(st.sampled_from([b"text/html", b"/caf\xc3\xa9", b"\xe9", b";", b" ", b"\t", b"\x0b", b"\x1c", b"\xc2\x85",
                              b"\xc2\xa0", b"\xa0", b"\x85", b"\x01", b"a", b"\xe2\x82\xac"]), max_size=6).map(b"".join),
).filter(lambda b: not {0, 10, 13} & set(b)).map(lambda b: b.decode("latin-1"))  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(status=st.sampled_from([200, 301, 302, 308, 404]), content_type=_FIELD_BYTES, location=_FIELD_BYTES)
@example(status=301, content_type="text/html", location="/caf\xc3\xa9")
@example(status=200, content_type="text/\xc3\xa9html", location="")
def test_the_writers_index_line_is_the_one_read_back(status, content_type, location):
    """The CDXJ line the writer makes as it writes a record is the line :func:`cdxj.index_warc`
    (and so cdxj-indexer, both through warcio) makes reading the record back, whatever the
    bytes of its Content-Type and Location. warcio reads a header line as UTF-8 when it is
    UTF-8; the writer took the bytes as latin-1, so a Location of ``/caf`` C3 A9 was indexed
    as redirecting to ``/cafÃ©``, and ``mime`` was other text than cdxj-indexer's."""
    headers = [("Content-Type", content_type), ("Location", location)]
    page = _fetch("http://a.test/p", status=status, headers=headers, raw=b"")
    archived = archive_fetch(page, kind="response", new_id=_fixed_ids())
    written = cdxj.entry_for_capture(archived.capture, 0, archived.response_length, "f.warc.gz")
    (read_back,) = cdxj.index_warc(io.BytesIO(archived.data), "f.warc.gz")
    assert written.line() == read_back.line()


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["Location", "ETag", "Server", "Content-Language", "X-Robots-Tag", "Content-Type"]),
    text=st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=12),
)
@example(name="Location", text="/café")
@example(name="Server", text="Apache/2 (Débian)")
@example(name="Content-Type", text="text/html; charset=é")
def test_a_header_column_holds_the_bytes_sent_when_they_are_text(name, text):
    """A pages/ header column is the header "as the server sent it", in a column of UTF-8
    text: a value sent as UTF-8 bytes is that text, its bytes the bytes sent (read as
    latin-1, ``/caf`` C3 A9 was published as ``/cafÃ©``, other bytes, and another Location
    than the CDXJ line's ``redirect`` and the URL the crawler follows)."""
    held = text.encode("utf-8").decode("latin-1")  # as the fetcher reads a header
    event = page_event(_fetch("http://a.test/r", status=301, headers=[(name, held)], raw=b""), None)
    column = name.lower().replace("-", "_")
    assert event[column].encode("utf-8") == text.encode("utf-8")


def test_a_header_column_of_bytes_that_are_no_utf8_reads_them_as_latin1():
    event = page_event(_fetch("http://a.test/r", status=301, headers=[("Location", "/caf\xe9")], raw=b""), None)
    assert event["location"] == "/caf\xe9"
