"""WARC records built as bytes: checked field by field, digests recomputed, and read back
with warcio (the reader the archive tools share)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import random
import re
import uuid
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from zlib_ng import zlib_ng

from beamcrawl.core.archive.warc_records import (
    GZIP_LEVEL,
    REQUEST_CONTENT_TYPE,
    RESPONSE_CONTENT_TYPE,
    b32,
    gzip_member,
    window_bits,
    http_head,
    new_record_id,
    record,
    record_id_of,
    status_line,
)

RID = "<urn:uuid:00000000-0000-4000-8000-000000000001>"
BODY = b"<html><body>caf\xc3\xa9</body></html>"


def _sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _fields(url: str = "http://a.test/", payload: bytes = BODY) -> list[tuple[str, str]]:
    return [
        ("WARC-Type", "response"),
        ("WARC-Record-ID", RID),
        ("WARC-Date", "2026-01-01T00:00:00.125000Z"),
        ("WARC-Target-URI", url),
        ("WARC-Payload-Digest", _sha1(payload)),
    ]


def _read_one(data: bytes) -> tuple[object, bytes]:
    """The one record in ``data`` and its payload, read before the iterator moves on (which
    checks the digests warcio can check)."""
    records = []
    for rec in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
        records.append((rec, rec.content_stream().read()))
    (only,) = records
    return only


def _split(data: bytes) -> tuple[list[str], bytes, bytes]:
    """(header lines, block, tail) of one uncompressed record."""
    header, rest = data.split(b"\r\n\r\n", 1)
    return header.decode("utf-8").split("\r\n"), rest[:-4], rest[-4:]


def test_record_is_version_fields_digest_type_length_block_and_crlf_crlf():
    head, _ = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
    data = record(_fields(), head, BODY, content_type=RESPONSE_CONTENT_TYPE)
    lines, block, tail = _split(data)
    assert lines[0] == "WARC/1.1"
    assert [line.split(": ", 1)[0] for line in lines[1:]] == [
        "WARC-Type",
        "WARC-Record-ID",
        "WARC-Date",
        "WARC-Target-URI",
        "WARC-Payload-Digest",
        "WARC-Block-Digest",
        "Content-Type",
        "Content-Length",
    ]
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert block == head + BODY and tail == b"\r\n\r\n"
    assert fields["Content-Length"] == str(len(head) + len(BODY))
    assert fields["WARC-Block-Digest"] == _sha1(head + BODY)  # recomputed over the block
    assert fields["Content-Type"] == "application/http; msgtype=response"
    assert head == b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


def test_record_reads_back_with_warcio_digests_checked():
    head, _ = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html"), ("X-Name", "caf\xe9")])
    url = "http://a.test/caf\u00e9?q=\u4e2d"  # an IRI: WARC 1.1 fields are UTF-8
    data = gzip_member(record(_fields(url), head, BODY, content_type=RESPONSE_CONTENT_TYPE))
    rec, payload = _read_one(data)
    assert rec.rec_type == "response" and rec.rec_headers.protocol == "WARC/1.1"
    assert rec.rec_headers.get_header("WARC-Target-URI") == url
    assert rec.rec_headers.get_header("WARC-Record-ID") == RID
    assert rec.http_headers.get_header("X-Name") == "caf\xe9"  # the latin-1 byte e9, back as received
    assert payload == BODY
    assert rec.digest_checker.passed is True


def test_an_empty_block_tail_still_has_its_digest_and_length():
    head, _ = http_head("GET / HTTP/1.1", [])
    fields = [("WARC-Type", "request"), ("WARC-Record-ID", RID), ("WARC-Target-URI", "http://a.test/")]
    data = record(fields, head, content_type=REQUEST_CONTENT_TYPE)
    lines, block, tail = _split(data)
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert block == b"GET / HTTP/1.1\r\n\r\n" and tail == b"\r\n\r\n"
    assert fields["Content-Length"] == str(len(block)) and fields["WARC-Block-Digest"] == _sha1(block)
    rec, payload = _read_one(gzip_member(data))
    assert rec.http_headers.protocol == "GET" and payload == b"" and rec.digest_checker.passed is True


def test_http_head_writes_wire_bytes_and_percent_encodes_only_what_did_not_come_off_the_wire():
    wire = [("Content-Type", "text/html"), ("X-Name", "caf\xe9")]
    head, written = http_head("HTTP/1.1 200 OK", wire)
    assert head == b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Name: caf\xe9\r\n\r\n"
    assert written == wire
    # "€" is not latin-1, so no HTTP client decoded it from header bytes: warcio's way, as before
    odd = [("Content-Disposition", 'attachment; filename="\u20ac.txt"'), ("X-Euro", "\u20ac5")]
    head, written = http_head("HTTP/1.1 200 OK", odd)
    reference = StatusAndHeaders("200 OK", list(odd), protocol="HTTP/1.1")
    assert head == reference.to_ascii_bytes()
    assert list(written) == reference.headers
    assert dict(written)["X-Euro"] == "%E2%82%AC5"


def test_http_head_refuses_what_cannot_be_written():
    with pytest.raises(UnicodeEncodeError):
        http_head("HTTP/1.1 200 OK", [("X-\u20ac", "v")])
    with pytest.raises(UnicodeEncodeError):
        record([("WARC-Target-URI", "http://a.test/\udc80")], b"", content_type=RESPONSE_CONTENT_TYPE)


def test_each_record_is_one_whole_gzip_member_at_the_measured_level():
    one, two = b"WARC/1.1\r\nfirst\r\n\r\n", b"WARC/1.1\r\nsecond" * 100
    a, b = gzip_member(one), gzip_member(two)
    assert gzip.decompress(a + b) == one + two
    d = zlib.decompressobj(zlib.MAX_WBITS + 16)
    assert d.decompress(a + b) == one and d.eof and d.unused_data == b  # ends where the next starts
    # gzip header XFL 0: neither the fastest (4) nor the maximum (2, warcio's level 9)
    assert GZIP_LEVEL == 6 and a[8] == 0 and gzip_member(one, 9)[8] == 2
    assert gzip_member(two, 1)[8] == 4 and gzip.decompress(gzip_member(two, 1)) == two


# Records of every size, around the window sizes' edges too, of text, of bytes that repeat
# (matches as far back as the record reaches) and of bytes that do not.
_RECORD_SIZES = st.one_of(
    st.integers(0, 70_000), st.sampled_from([(1 << w) - 262 + d for w in range(9, 16) for d in (-2, -1, 0, 1, 2)])
)


@settings(max_examples=150, deadline=None)
@given(
    size=_RECORD_SIZES,
    unit=st.binary(min_size=1, max_size=600),
    level=st.sampled_from([1, 6, 9]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_window_sized_to_the_record_compresses_it_as_the_whole_window_would(size, unit, level, seed):
    noise = random.Random(seed).randbytes(size // 3)
    data = ((unit * (size // len(unit) + 1))[: size - len(noise)] + noise)[:size]
    member = gzip_member(data, level)
    whole = zlib_ng.compressobj(level, zlib_ng.DEFLATED, zlib_ng.MAX_WBITS + 16)
    assert member == whole.compress(data) + whole.flush()  # the same bytes, in less set-up
    assert zlib.decompress(member, zlib.MAX_WBITS + 16) == data == gzip.decompress(member)  # the standard zlib reads it
    assert (1 << window_bits(len(data))) > len(data) + 262 or window_bits(len(data)) == zlib.MAX_WBITS


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=20, max_size=20))
def test_b32_of_a_digest_is_base64_b32encode_character_for_character(digest):
    assert b32(digest) == base64.b32encode(digest).decode("ascii")


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=64))
def test_b32_of_any_other_length_is_base64_b32encode_too(data):
    assert b32(data) == base64.b32encode(data).decode("ascii")


def test_b32_at_the_edges_of_each_group():
    # all zeros, all ones, and one bit set at each of the 160 places (each 15-bit group edge)
    digests = [bytes(20), b"\xff" * 20] + [(1 << i).to_bytes(20, "big") for i in range(160)]
    assert [b32(d) for d in digests] == [base64.b32encode(d).decode("ascii") for d in digests]


def test_record_ids_are_fresh_uuid4_urns():
    ids = {new_record_id() for _ in range(100)}
    assert len(ids) == 100
    for rid in ids:
        m = re.fullmatch(r"<urn:uuid:([0-9a-f-]{36})>", rid)
        assert m and uuid.UUID(m.group(1)).version == 4 and uuid.UUID(m.group(1)).variant == uuid.RFC_4122


@given(st.binary(min_size=16, max_size=16))
def test_a_record_id_is_the_uuid4_of_its_random_bytes(random16):
    assert record_id_of(random16) == f"<urn:uuid:{uuid.UUID(bytes=random16, version=4)}>"


# --- status lines: the reason phrase as received ------------------------------------------

# What a reason phrase may hold on HTTP/1.1 (HTAB, SP, VCHAR, obs-text): any byte from 0x20
# to 0xFF but DEL, and HTAB; and any text a server might write, sent as UTF-8.
_PHRASE_BYTES = [0x09, *range(0x20, 0x7F), *range(0x80, 0x100)]
phrases = st.one_of(
    st.lists(st.sampled_from(_PHRASE_BYTES), max_size=60).map(bytes),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30).map(lambda t: t.encode("utf-8")),
)
# Control characters a lenient parser lets through (no CR or LF: those end the line).
_CONTROLS = [c for c in [*range(0x01, 0x20), 0x7F] if c not in (0x09, 0x0A, 0x0D)]


def as_the_client_gives_it(raw: bytes) -> str:
    """The reason phrase as aiohttp hands it over (UTF-8, undecodable bytes escaped;
    tests/core/archive/test_warc_records.py::test_a_fetched_reason_phrase_is_archived_as_sent
    checks that against a real server)."""
    return raw.decode("utf-8", "surrogateescape")


def _warcio_check(path: str) -> int:
    """``warcio check``'s own checker, in process: 0 when every record's digests pass."""
    import argparse

    from warcio.checker import Checker

    return Checker(argparse.Namespace(inputs=[path], verbose=False)).process_all()


def _archive(tmp: str, phrases_sent: list[bytes], status: int = 200) -> tuple[list[bytes], str]:
    """Writes one response record per reason phrase to a .warc.gz; returns their heads."""
    import os

    heads, members = [], []
    for i, raw in enumerate(phrases_sent):
        head, _ = http_head(status_line("1.1", status, as_the_client_gives_it(raw)), [("Content-Type", "text/html")])
        heads.append(head)
        members.append(
            gzip_member(record(_fields(f"http://a.test/{i}"), head, BODY, content_type=RESPONSE_CONTENT_TYPE))
        )
    path = os.path.join(tmp, "phrases.warc.gz")
    with open(path, "wb") as fh:
        fh.write(b"".join(members))
    return heads, path


def _check_phrases(phrases_sent: list[bytes]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        heads, path = _archive(tmp, phrases_sent)
        assert _warcio_check(path) == 0
        with open(path, "rb") as fh:
            bodies = [rec.content_stream().read() for rec in ArchiveIterator(fh, check_digests="raise")]
    assert bodies == [BODY] * len(phrases_sent)
    for raw, head in zip(phrases_sent, heads):
        phrase = raw.strip(b" \t")
        assert head.split(b"\r\n", 1)[0] == b"HTTP/1.1 200" + (b" " + phrase if phrase else b"")


@settings(max_examples=60, deadline=None)
@given(st.lists(phrases, min_size=1, max_size=8))
def test_any_reason_phrase_is_written_as_received_and_passes_warcio_check(phrases_sent):
    _check_phrases(phrases_sent)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(st.lists(phrases, min_size=1, max_size=8))
def test_any_reason_phrase_is_written_as_received_and_passes_warcio_check_many(phrases_sent):
    _check_phrases(phrases_sent)


@pytest.mark.parametrize(
    ("status", "raw", "line"),
    [
        (200, "Ünïcödé ☃".encode(), "HTTP/1.1 200 Ünïcödé ☃".encode()),
        (200, "OK ✓".encode(), "HTTP/1.1 200 OK ✓".encode()),
        (200, "Успешно".encode(), "HTTP/1.1 200 Успешно".encode()),
        (200, b"\xe9t\xe9", b"HTTP/1.1 200 \xe9t\xe9"),  # latin-1, no UTF-8
        (200, b"", b"HTTP/1.1 200"),
        (404, b"a\x01b", b"HTTP/1.1 404 Not Found"),  # a control character: the standard phrase
        (200, b"\x7f", b"HTTP/1.1 200 OK"),
        (799, b"x\x1b[31m", b"HTTP/1.1 799"),  # no standard phrase for the code: just the code
    ],
)
def test_status_line_keeps_the_phrase_or_gives_the_standard_one(status, raw, line):
    assert status_line("1.1", status, as_the_client_gives_it(raw)).encode("latin-1") == line


@given(st.lists(st.sampled_from(_CONTROLS), min_size=1, max_size=3), phrases)
def test_a_phrase_with_a_control_character_is_replaced_and_the_record_still_checks(controls, raw):
    import tempfile

    bad = raw + bytes(controls)
    with tempfile.TemporaryDirectory() as tmp:
        (head,), path = _archive(tmp, [bad], status=503)
        assert _warcio_check(path) == 0
    assert head.split(b"\r\n", 1)[0] == b"HTTP/1.1 503 Service Unavailable"
    assert status_line("1.1", 503, "x\ud800") == "HTTP/1.1 503 Service Unavailable"  # not from any wire


def _fetched_with_status_lines(host: str, lines: list[bytes]) -> list:
    """One host's pages ``/page-0``... fetched from a loopback server that answers page ``i``
    with the status line ``HTTP/1.1 `` + ``lines[i]`` (its robots.txt known: no rules); the
    results in page order."""
    import time

    from beamcrawl.core.net.fetcher import FetchRunner
    from beamcrawl.core.policy.robots import RobotsRules
    from beamcrawl.schemas.records import FrontierEntry, HostPlan, HostRecord
    from wire_shapes import ShapeServer, loopback_config  # noqa: E402  (tests/wire_shapes.py)

    with ShapeServer() as server:
        slot = f"{host}:{server.port}"
        for i, raw in enumerate(lines):
            server.reasons[f"/page-{i}"] = raw
        record = HostRecord(host=slot)
        record.robots = RobotsRules.parse("", "beamcrawl").to_dict()
        record.robots_fetched_at = time.time()
        entries = [
            FrontierEntry(url=f"http://{slot}/page-{i}", fp=i + 1, host=slot, due_ms=0) for i in range(len(lines))
        ]
        runner = FetchRunner(loopback_config())
        try:
            runner.submit(HostPlan(host=slot, shard=0, record=record, delay=0.02, fetch_robots=False, entries=entries))
            return sorted(
                (v for k, v in runner.drain(wait=True) if k == "result"), key=lambda r: int(r.url.rsplit("-", 1)[1])
            )
        finally:
            runner.close()


ISSUE_PHRASES = [
    "Ünïcödé ☃".encode(),
    "OK ✓".encode(),
    "Успешно".encode(),
    b"\xe9t\xe9 \xff\x80",
    b"OK",
    b"",
    b"a\x01b",
]


def test_a_fetched_reason_phrase_is_archived_as_sent(tmp_path):
    """Through the real fetcher and record builder: pages whose status lines carry the
    issue's phrases (and latin-1 bytes, none, a control character) are each archived, their
    status line as sent (the control character's as the standard phrase), and the file
    passes ``warcio check``."""
    import subprocess
    import sys
    from pathlib import Path

    from beamcrawl.schemas.records import ParsedPage
    from beamcrawl.transforms.warc_io import capture_record

    results = _fetched_with_status_lines("reason.test", [b"200 " + raw for raw in ISSUE_PHRASES])
    assert [r.outcome for r in results] == ["fetched"] * len(ISSUE_PHRASES)
    for result, raw in zip(results, ISSUE_PHRASES):
        assert as_the_client_gives_it(raw) == result.reason  # what as_the_client_gives_it assumes
    members = [capture_record(ParsedPage(fetch=r), "response", new_record_id()).member for r in results]
    path = tmp_path / "fetched.warc.gz"
    path.write_bytes(b"".join(members))
    warcio = Path(sys.executable).with_name("warcio")
    check = subprocess.run([str(warcio), "check", str(path)], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    lines = [gzip.decompress(m).split(b"\r\n\r\n", 1)[1].split(b"\r\n", 1)[0] for m in members]
    expected = [b"HTTP/1.1 200" + (b" " + raw if raw else b"") for raw in ISSUE_PHRASES[:-1]] + [b"HTTP/1.1 200 OK"]
    assert lines == expected


@given(status=st.integers(0, 999), raw=phrases)
def test_the_status_code_is_written_as_its_three_digits(status, raw):
    """A status-code is three digits (RFC 9112 §4), and the client reads any three: ``007``
    came as 7 and was written ``HTTP/1.1 7``, no status line, and not the one received."""
    line = status_line("1.1", status, as_the_client_gives_it(raw))
    assert line.split(" ")[1] == f"{status:03d}"
    head, _ = http_head(line, [("Content-Type", "text/html")])
    data = gzip_member(record(_fields(), head, BODY, content_type=RESPONSE_CONTENT_TYPE))
    (rec,) = list(ArchiveIterator(io.BytesIO(data), check_digests="raise"))
    assert rec.http_headers.get_statuscode() == f"{status:03d}"


def test_a_status_code_under_100_is_archived_and_indexed_as_sent():
    """Through the real fetcher, record builder and index: the status line of the record is
    the one the server sent, and the writer's index line says what reading the record back
    says (``status``: ``007``)."""
    from beamcrawl.core.archive import cdxj
    from beamcrawl.schemas.records import ParsedPage
    from beamcrawl.transforms.warc_io import capture_record

    sent = [b"000 Zero", b"007 Bond", b"099 Low", b"200 OK"]
    results = _fetched_with_status_lines("code.test", sent)
    assert [r.outcome for r in results] == ["fetched"] * len(sent)
    for result, raw in zip(results, sent):
        capture = capture_record(ParsedPage(fetch=result), "response", new_record_id())
        assert gzip.decompress(capture.member).split(b"\r\n\r\n", 1)[1].split(b"\r\n", 1)[0] == b"HTTP/1.1 " + raw
        written = cdxj.entry_for_capture(capture.index, 0, len(capture.member), "f")
        (read_back,) = cdxj.index_warc(io.BytesIO(capture.member), "f")
        assert written.line() == read_back.line()
        assert written.fields["status"] == raw[:3].decode()
