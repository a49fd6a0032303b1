"""WARC records built as bytes: checked field by field, digests recomputed, and read back
with warcio (the reader the archive tools share)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import re
import uuid
import zlib

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders

from beamcrawl.core.archive.warc_records import (
    GZIP_LEVEL,
    REQUEST_CONTENT_TYPE,
    RESPONSE_CONTENT_TYPE,
    gzip_member,
    http_head,
    new_record_id,
    record,
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
        "WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI", "WARC-Payload-Digest",
        "WARC-Block-Digest", "Content-Type", "Content-Length",
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


def test_each_record_is_one_whole_gzip_member_at_level_9():
    one, two = b"WARC/1.1\r\nfirst\r\n\r\n", b"WARC/1.1\r\nsecond" * 100
    a, b = gzip_member(one), gzip_member(two)
    assert gzip.decompress(a + b) == one + two
    d = zlib.decompressobj(zlib.MAX_WBITS + 16)
    assert d.decompress(a + b) == one and d.eof and d.unused_data == b  # ends where the next starts
    assert GZIP_LEVEL == 9 and a[8] == 2  # gzip header XFL 2: maximum compression (warcio's level)
    assert gzip_member(two, 1)[8] == 4 and gzip.decompress(gzip_member(two, 1)) == two


def test_record_ids_are_fresh_uuid4_urns():
    ids = {new_record_id() for _ in range(100)}
    assert len(ids) == 100
    for rid in ids:
        m = re.fullmatch(r"<urn:uuid:([0-9a-f-]{36})>", rid)
        assert m and uuid.UUID(m.group(1)).version == 4
