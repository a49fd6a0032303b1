"""WARC/1.1 records as bytes: the record of one fetch, built and gzipped in a few calls.

A fetch is stored as two or three small records (a response or revisit, and its request),
each its own gzip member. warcio's writer builds such a record through several layers of
Python objects (``StatusAndHeaders``, header buffers, digests fed from streams, a gzip
wrapper fed piece by piece); on a 2.5 KB page that machinery cost as much CPU as the
compression itself. Everything a record holds is already in memory as strings and bytes, so
here it is written out directly, with hashlib and zlib-ng doing the work:

- the named fields come first, in the order the caller gives, then ``WARC-Block-Digest``,
  ``Content-Type`` and ``Content-Length``, as warcio writes them (the records are the same
  ones warcio wrote for us before, field for field; tests compare them);
- the named fields are encoded as UTF-8 (WARC 1.1 §4 allows UTF-8 field values, and a
  target URI may be an IRI), the HTTP header block as latin-1, which gives back the bytes
  the HTTP client received (it decodes header bytes as latin-1), not percent-encoded as
  warcio's ``StatusAndHeaders`` would; the status line's reason phrase too is written as
  the bytes received (:func:`status_line`), whatever they are (``200 Успешно``), or, when
  no status line could hold them (a control character), as the standard phrase;
- ``WARC-Block-Digest`` is the SHA-1 of the block (the HTTP header block and whatever of
  the payload the record holds), in base 32 with a ``sha1:`` prefix, as warcio writes it;
  ``Content-Length`` is the block's exact length, and the block is followed by CRLF CRLF;
- the base 32 of a digest is table-driven (:func:`b32`): the 160 bits of a SHA-1 digest are
  sixteen 10-bit groups, each one lookup of a character pair, joined once, where
  ``base64.b32encode`` slices and converts 5 bytes at a time into a bytearray and then
  decodes it (half the cost, ``bench/per_page_costs.py``); the text is the same, character
  for character;
- each record is compressed alone, as one gzip member, so a reader can start at any
  record's offset; at level 6 (:data:`GZIP_LEVEL`), not warcio's 9: chosen by measurement
  (``bench/per_page_costs.py``, bench/README.md "Per-page Python (issue #25)"). On real HTML
  level 9 cost 1.5 times the CPU of level 6 for 0.3% fewer bytes, on simweb's pages the same
  bytes; level 3 saved half the CPU again but wrote 12% more bytes, which at archive prices
  costs more than the CPU within a month of keeping them. Readers do not see the level;
- the compressor is zlib-ng's (``zlib_ng``, the same API and the same gzip format as the
  standard ``zlib``, made for speed): at level 6 it wrote within 0.6% of zlib's bytes in
  40-60% of its CPU, on simweb's pages and on real HTML alike. Its window is sized to the
  record (:func:`window_bits`): a deflate stream never refers back further than its own
  length, so a window just larger than the record gives the same bytes, and setting up a
  32 KiB window and its tables was most of the cost of a small record.

warcio stays the reader (and writes the ``warcinfo`` record at the head of each file, once
per file, where its cost does not matter). Pure functions: no I/O, no Beam.
"""

from __future__ import annotations

import base64
import hashlib
import http
import os
from typing import Sequence

from zlib_ng import zlib_ng

__all__ = [
    "GZIP_LEVEL",
    "REQUEST_CONTENT_TYPE",
    "RESPONSE_CONTENT_TYPE",
    "b32",
    "first_fields",
    "gzip_member",
    "http_head",
    "new_record_id",
    "record_id_of",
    "record",
    "status_code",
    "status_line",
    "window_bits",
]

#: The gzip level of every record (and of the spooled response records, which become the WARC
#: file's bytes): measured, see the module docstring. Files written before used warcio's 9;
#: both read the same.
GZIP_LEVEL = 6
_LOOKAHEAD = 262  # deflate's MIN_LOOKAHEAD: a match starts at least this far from the window's end
_GZIP_WRAPPER = 16  # added to the window bits: a gzip header and trailer, not zlib's
RESPONSE_CONTENT_TYPE = "application/http; msgtype=response"  # response and revisit records
REQUEST_CONTENT_TYPE = "application/http; msgtype=request"

Fields = Sequence[tuple[str, str]]

_B32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # RFC 4648 §6, as base64.b32encode
_B32_PAIRS = [a + b for a in _B32_ALPHABET for b in _B32_ALPHABET]  # 10 bits → 2 characters


def b32(data: bytes) -> str:
    """``base64.b32encode(data).decode("ascii")``, the same text, faster for a SHA-1 digest.

    A 20-byte digest (every WARC digest field) is read as two 80-bit integers, each cut into
    eight 10-bit groups, one lookup each in a table of character pairs (8 KB, so it stays in
    cache; a 15-bit table of triples measured no faster on distinct digests), joined once.
    Any other length goes through ``base64.b32encode`` (padding and all): no per-page caller
    has one.
    """
    if len(data) != 20:
        return base64.b32encode(data).decode("ascii")
    t = _B32_PAIRS
    a, b = divmod(int.from_bytes(data, "big"), 1 << 80)
    return "".join(
        (
            t[a >> 70],
            t[(a >> 60) & 0x3FF],
            t[(a >> 50) & 0x3FF],
            t[(a >> 40) & 0x3FF],
            t[(a >> 30) & 0x3FF],
            t[(a >> 20) & 0x3FF],
            t[(a >> 10) & 0x3FF],
            t[a & 0x3FF],
            t[b >> 70],
            t[(b >> 60) & 0x3FF],
            t[(b >> 50) & 0x3FF],
            t[(b >> 40) & 0x3FF],
            t[(b >> 30) & 0x3FF],
            t[(b >> 20) & 0x3FF],
            t[(b >> 10) & 0x3FF],
            t[b & 0x3FF],
        )
    )


# A random (version 4) UUID's fixed bits (RFC 9562 §5.4): the version nibble and the variant.
_V4_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
_V4_SET = (0x4000 << 64) | (0x8000 << 48)


def record_id_of(random16: bytes) -> str:
    """The ``WARC-Record-ID`` of the version 4 UUID made of 16 random bytes: what
    ``f"<urn:uuid:{uuid.UUID(bytes=random16, version=4)}>"`` writes, at half its cost (two
    records a page)."""
    value = int.from_bytes(random16, "big") & _V4_KEEP | _V4_SET
    h = f"{value:032x}"
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


def new_record_id() -> str:
    """A fresh ``WARC-Record-ID``: a random UUID URN in angle brackets (WARC 1.1 §5.2)."""
    return record_id_of(os.urandom(16))


def first_fields(kind: str, record_id: str, date: str, url: str, ip: str | None) -> list[tuple[str, str]]:
    """The fields a capture record starts with, in the order most tools write them (the
    standard allows any, but some readers and people look for WARC-Type first); the fields of
    the record's kind follow, and :func:`record` adds the block digest, Content-Type and
    Content-Length last."""
    fields = [("WARC-Type", kind), ("WARC-Record-ID", record_id), ("WARC-Date", date), ("WARC-Target-URI", url)]
    if ip:
        fields.append(("WARC-IP-Address", ip))
    return fields


def status_line(http_version: str, status: int, reason: str) -> str:
    """A response record's status line, its reason phrase the bytes the server sent.

    HTTP/1.1 lets a reason phrase hold any byte from 0x80 up (obs-text); the HTTP client
    gives it decoded as UTF-8 with undecodable bytes escaped (``surrogateescape``), so
    encoding it back so gives the bytes received, and the line is returned as their latin-1
    text, which :func:`http_head` writes back as those bytes. A phrase that is not such text,
    or holds a byte no status line may (a control character other than HTAB), is replaced by
    the standard phrase of the code (none for an unknown code): the record is written either
    way. Spaces and tabs around it are dropped, and a line without a phrase is just the code,
    which is written as its three digits (:func:`status_code`).

    Args:
        http_version: ``1.1``, ``1.0``.
        status: The status code.
        reason: The reason phrase as the HTTP client decoded it.
    """
    try:
        raw = reason.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = b"\x00"  # not from the wire: replaced below
    if any((byte < 0x20 and byte != 0x09) or byte == 0x7F for byte in raw):
        try:
            raw = http.HTTPStatus(status).phrase.encode("ascii")
        except ValueError:
            raw = b""
    phrase = raw.decode("latin-1").strip(" \t")
    code = status_code(status)
    return f"HTTP/{http_version} {code} {phrase}" if phrase else f"HTTP/{http_version} {code}"


def status_code(status: int) -> str:
    """A status code as a status line carries it, and so as a reader of the record reads it:
    three digits (RFC 9112 §4). The HTTP client reads any three, ``007`` as 7, which written
    as it is made ``HTTP/1.1 7``: no status line, and not the one received."""
    return f"{status:03d}"


def http_head(first_line: str, headers: Fields) -> tuple[bytes, Fields]:
    """The HTTP header block of a record: status or request line, headers, blank line.

    Args:
        first_line: ``HTTP/1.1 200 OK`` or ``GET /path HTTP/1.1``.
        headers: Header names and values as the HTTP client gave them (decoded as latin-1).

    Returns:
        The block's bytes, and the headers as they are in it (what an index of the record
        must read). A value that did not come off the wire (it is not latin-1) is
        percent-encoded as warcio does it, so such a record stays what it was when warcio
        wrote it; then the headers returned are the encoded ones.

    Raises:
        UnicodeEncodeError: A header that cannot be written even percent-encoded (a
            non-ASCII name); warcio failed on it too.
    """
    text = "".join([first_line, "\r\n", *[f"{name}: {value}\r\n" for name, value in headers], "\r\n"])
    try:
        return text.encode("latin-1"), headers
    except UnicodeEncodeError:
        from warcio.statusandheaders import StatusAndHeaders  # rare: warcio's own encoding

        status = StatusAndHeaders(first_line, list(headers))
        return status.to_ascii_bytes(), status.headers


def record(fields: Fields, head: bytes, payload: bytes = b"", *, content_type: str) -> bytes:
    """One WARC/1.1 record, uncompressed.

    Args:
        fields: The named fields before ``WARC-Block-Digest``, in order (``WARC-Type``,
            ``WARC-Record-ID`` … ``WARC-Payload-Digest`` when the record has one).
        head: The HTTP header block (:func:`http_head`).
        payload: The payload the record holds: the body for a response, nothing for a
            request or a revisit (a revisit's payload stays with the record it refers to).
        content_type: The record's ``Content-Type`` (what its block is).

    Returns:
        Version line, fields, ``WARC-Block-Digest``, ``Content-Type``, ``Content-Length``,
        a blank line, the block (``head`` + ``payload``), and CRLF CRLF.

    Raises:
        UnicodeEncodeError: A field value that is not text (a lone surrogate).
    """
    block = hashlib.sha1(head)
    block.update(payload)
    header = "".join(
        [
            "WARC/1.1\r\n",
            *[f"{name}: {value}\r\n" for name, value in fields],
            f"WARC-Block-Digest: sha1:{b32(block.digest())}\r\n",
            f"Content-Type: {content_type}\r\n",
            f"Content-Length: {len(head) + len(payload)}\r\n\r\n",
        ]
    )
    return b"".join((header.encode("utf-8"), head, payload, b"\r\n\r\n"))


def window_bits(size: int) -> int:
    """The smallest deflate window (9 to 15 bits) whose matches reach all of ``size`` bytes:
    deflate keeps its last 262 bytes of lookahead out of the window's reach."""
    return max(9, min(zlib_ng.MAX_WBITS, (size + _LOOKAHEAD).bit_length()))


def gzip_member(data: bytes, level: int = GZIP_LEVEL) -> bytes:
    """``data`` as one whole gzip member (what a record is in a ``.warc.gz`` file)."""
    compressor = zlib_ng.compressobj(level, zlib_ng.DEFLATED, window_bits(len(data)) + _GZIP_WRAPPER)
    return compressor.compress(data) + compressor.flush()
