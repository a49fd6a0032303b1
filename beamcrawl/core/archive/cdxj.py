"""CDXJ index lines for WARC records, in the form Common Crawl publishes.

A CDXJ line is ``<SURT key> <14-digit timestamp> <JSON>``, the JSON holding ``url``, ``mime``,
``status``, ``digest``, ``length``, ``offset`` and ``filename`` (all strings), plus
``redirect`` for a 3xx with a Location and ``truncated`` for a record marked
``WARC-Truncated``. A file of them, sorted by key then timestamp, lets replay tools such as
pywb find a capture by binary search and read exactly ``length`` bytes at ``offset`` of
``filename``.

Conventions, each chosen to match what replay tools and Common Crawl's index expect:

- the key is ``surt.surt(url)`` with its default canonicalisation, the same function pywb
  and cdxj-indexer apply to the URL being looked up (a key made any other way would not be
  found), taken the short way for the URLs where that is the same (:mod:`surt_key`);
- ``digest`` is the payload digest without its ``sha1:`` prefix (Common Crawl's form);
- ``mime`` is the HTTP Content-Type up to the first ``;`` or space, as sent and read back
  from the record (:func:`as_read`; ``warc/revisit`` for revisits); it is omitted when the
  response had none;
- ``filename`` is the WARC file's path relative to the crawl's output folder, the same path
  as in the page events' ``blob``;
- ``length`` is the record's compressed length (its gzip member), so ``offset`` and
  ``length`` select one whole gzip member.

The WARC writer builds entries as it writes, from what it knows then (offsets, lengths,
digests, headers: a :class:`Capture`), without reading or re-parsing a record;
:func:`index_warc` builds the same entries by reading a file back, for files written
without an index. Both go through :func:`entry_for_capture`. Nothing here imports Beam.
"""

from __future__ import annotations

import heapq
import json
import re
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable, NamedTuple
from urllib.parse import urljoin

from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_timestamp

from beamcrawl.core.archive.surt_key import surt_key

__all__ = [
    "INDEXED_RECORDS",
    "Capture",
    "CdxjEntry",
    "SortedIndex",
    "as_read",
    "entry_for_capture",
    "entry_for_record",
    "index_warc",
    "mime_of",
    "pack",
    "surt_key",
    "timestamp_of",
    "write_cdxj",
    "write_packed",
]

# What a replay tool looks up; requests and warcinfo are not captures of a URL.
INDEXED_RECORDS = ("response", "revisit", "resource")
REDIRECTS = (301, 302, 303, 307, 308)
_MIME_END = re.compile(r"[;\s]")


@dataclass(frozen=True, order=True)
class CdxjEntry:
    """One CDXJ line; entries order by key, then timestamp, then offset."""

    key: str
    timestamp: str
    offset: int
    fields: dict[str, str] = field(compare=False)

    def line(self) -> str:
        """The line as written (no newline)."""
        return f"{self.key} {self.timestamp} {json.dumps(self.fields)}"


class Capture(NamedTuple):
    """What an index line says about a record, whoever knows it: the writer as it writes the
    record (:mod:`beamcrawl.transforms.warc_io`), or :func:`entry_for_record` reading it back.
    Both build lines with :func:`entry_for_capture`, so a file's index is the same either way.
    """

    url: str  # WARC-Target-URI
    timestamp: str  # 14 digits, from WARC-Date
    mime: str | None = None  # already cut (:func:`mime_of`); "warc/revisit" for revisits
    status: str | None = None  # the HTTP status code as written in the status line
    digest: str | None = None  # WARC-Payload-Digest, with its "sha1:" prefix
    location: str | None = None  # the first Location header of the HTTP block
    truncated: str | None = None  # WARC-Truncated


def as_read(value: str | None) -> str | None:
    """A header value of a record's HTTP block as warcio reads it back, from the value the
    block was written with (its bytes as latin-1 text, as the HTTP client decodes them).

    warcio decodes each header line as UTF-8 when it is UTF-8 (else as latin-1) and strips
    the value's whitespace at both ends, as Python counts it (a vertical tab, the separator
    controls, NEL and the no-break space too). The writer's index line is made from the
    values so read, so that it is the line :func:`entry_for_record` (and cdxj-indexer)
    makes reading the record back: a Location sent as the bytes ``/caf`` C3 A9 redirects to
    ``/café``, not to ``/cafÃ©``.
    """
    if value is None:
        return None
    try:
        value = value.encode("latin-1").decode("utf-8")
    except UnicodeError:  # latin-1 text that is no UTF-8 (or, encoded by warcio, ASCII already)
        pass
    return value.strip()


def mime_of(content_type: str | None) -> str | None:
    """The ``mime`` of an index line: a Content-Type up to its first ``;`` or space."""
    if not content_type:
        return None
    return _MIME_END.split(content_type, 1)[0].strip() or None


def timestamp_of(warc_date: str) -> str:
    """The 14-digit timestamp of a ``WARC-Date`` as our writer makes it
    (``YYYY-MM-DDThh:mm:ss[.ffffff]Z``), the same as warcio's ``iso_date_to_timestamp``
    without parsing a date."""
    return warc_date[:19].replace("-", "").replace("T", "").replace(":", "")


def entry_for_capture(capture: Capture, offset: int, length: int, filename: str) -> CdxjEntry:
    """The index entry of a record.

    Args:
        capture: What the line says about the record.
        offset: Where the record starts in the file (compressed bytes).
        length: The record's length in the file (compressed bytes).
        filename: The file's path as replay tools should see it.
    """
    url = capture.url
    fields: dict[str, str] = {"url": url}
    if capture.mime:
        fields["mime"] = capture.mime
    status = capture.status
    if status:
        fields["status"] = status
    if capture.digest:
        fields["digest"] = capture.digest.split(":", 1)[-1]
    fields["length"] = str(length)
    fields["offset"] = str(offset)
    fields["filename"] = filename
    if capture.location and status and status.isdigit() and int(status) in REDIRECTS:
        fields["redirect"] = urljoin(url, capture.location.strip())
    if capture.truncated:
        fields["truncated"] = capture.truncated
    return CdxjEntry(surt_key(url), capture.timestamp, offset, fields)


def _mime(record: Any) -> str | None:
    if record.rec_type == "revisit":
        return "warc/revisit"
    if record.rec_type == "response":
        value = record.http_headers.get_header("Content-Type") if record.http_headers else None
    else:
        value = record.rec_headers.get_header("Content-Type")
    return mime_of(value)


def entry_for_record(record: Any, offset: int, length: int, filename: str) -> CdxjEntry | None:
    """The index entry of a warcio record read back, or None for records that are not indexed.

    Args:
        record: A warcio ``ArcWarcRecord`` (its payload digest must be set: our files carry
            it).
        offset: Where the record starts in the file (compressed bytes).
        length: The record's length in the file (compressed bytes).
        filename: The file's path as replay tools should see it.
    """
    if record.rec_type not in INDEXED_RECORDS:
        return None
    http = record.http_headers if record.rec_type in ("response", "revisit") and record.http_headers else None
    status = http.get_statuscode() if http else None
    capture = Capture(
        url=record.rec_headers.get_header("WARC-Target-URI") or "",
        timestamp=iso_date_to_timestamp(record.rec_headers.get_header("WARC-Date") or ""),
        mime=_mime(record),
        status=status or None,
        digest=record.rec_headers.get_header("WARC-Payload-Digest"),
        location=http.get_header("Location") if http else None,
        truncated=record.rec_headers.get_header("WARC-Truncated"),
    )
    return entry_for_capture(capture, offset, length, filename)


def index_warc(fh: BinaryIO, filename: str) -> list[CdxjEntry]:
    """Index entries of every indexed record of an open WARC file, in file order."""
    entries = []
    it = ArchiveIterator(fh)
    for record in it:
        if record.rec_type not in INDEXED_RECORDS:
            continue
        entry = entry_for_record(record, it.get_record_offset(), it.get_record_length(), filename)
        if entry is not None:
            entries.append(entry)
    return entries


# An entry as a writer holds it until its file closes: its line's key and timestamp encoded,
# its offset, and the JSON's bytes. Tuples of these order as the entries do (key, then
# timestamp, then offset: UTF-8 bytes order as their code points), compared in C.
PackedEntry = tuple[bytes, bytes, int, bytes]


def pack(entry: CdxjEntry) -> PackedEntry:
    """What a writer keeps of an entry until its file's index is written: about half the
    memory of the entry and its field strings (a WARC file holds up to ``INDEX_ENTRIES`` of
    them), and the page's URL is not kept alive by it.

    Raises:
        UnicodeEncodeError: A key that cannot be written (a lone surrogate): raised here, for
            the record being indexed, not for the whole file when it closes.
    """
    fields = json.dumps(entry.fields).encode("utf-8")
    return (entry.key.encode("utf-8"), entry.timestamp.encode("utf-8"), entry.offset, fields)


def write_cdxj(path: str, entries: Iterable[CdxjEntry]) -> int:
    """Writes entries sorted by SURT key then timestamp to ``path`` (via a temporary name);
    returns the number of lines."""
    return write_packed(path, [pack(entry) for entry in entries])


def write_packed(path: str, packed: list[PackedEntry]) -> int:
    """:func:`write_cdxj` of entries already packed (:func:`pack`); sorts ``packed`` in place."""
    packed.sort()
    return _write_lines(path, packed)


# Entries a writer's index holds in memory before it sorts them into a run on local disk
# (about 1.1 KB each held: 4-5 MB), and lines joined into one write of the index file.
RUN_ENTRIES = 4_096
_WRITE_LINES = 1_024
_RUN_HEADER = struct.Struct(">IIQI")  # key, timestamp and fields lengths, the offset


class SortedIndex:
    """A WARC file's index as its writer adds entries, written sorted when the file closes,
    holding at most ``run_entries`` of them in memory: each time that many are held they
    are sorted into a *run*, an unnamed temporary file on the worker's disk (gone with the
    process however it ends), and :meth:`write` merges the runs and what is held into the
    file. A file of 50,000 entries held them all (some 55 MB for a full-size round's file,
    bench/README.md) until it closed; its lines are the same, in the same order.

    Attributes:
        run_entries: Entries held before they are sorted into a run (default
            ``RUN_ENTRIES``).
    """

    def __init__(self, run_entries: int | None = None) -> None:
        run_entries = RUN_ENTRIES if run_entries is None else run_entries
        if run_entries < 1:
            raise ValueError(f"run_entries must be >= 1, got {run_entries}")
        self.run_entries = run_entries
        self._held: list[PackedEntry] = []
        self._runs: list[BinaryIO] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def runs(self) -> int:
        """How many runs are on disk."""
        return len(self._runs)

    def add(self, entry: PackedEntry) -> None:
        """Adds one packed entry (:func:`pack`)."""
        self._held.append(entry)
        self._count += 1
        if len(self._held) >= self.run_entries:
            self._spill()

    def _spill(self) -> None:
        self._held.sort()
        run = tempfile.TemporaryFile()
        header = _RUN_HEADER.pack
        run.write(
            b"".join(
                header(len(key), len(stamp), offset, len(fields)) + key + stamp + fields
                for key, stamp, offset, fields in self._held
            )
        )
        run.seek(0)
        self._runs.append(run)
        self._held = []

    def write(self, path: str) -> int:
        """Writes every entry added, sorted, to ``path`` (appearing whole when written) and
        empties the index; returns the number of lines."""
        self._held.sort()
        try:
            lines = _write_lines(path, heapq.merge(*map(_read_run, self._runs), self._held))
        finally:
            self.close()
        return lines

    def close(self) -> None:
        """Drops every entry added and deletes the runs (an index whose file is not written)."""
        for run in self._runs:
            run.close()
        self._runs = []
        self._held = []
        self._count = 0


def _read_run(run: BinaryIO) -> Iterator[PackedEntry]:
    """The entries of one run, in its order."""
    size = _RUN_HEADER.size
    unpack = _RUN_HEADER.unpack
    read = run.read
    while head := read(size):
        key_len, stamp_len, offset, fields_len = unpack(head)
        key = read(key_len)
        stamp = read(stamp_len)
        yield key, stamp, offset, read(fields_len)


def _write_lines(path: str, packed: Iterable[PackedEntry]) -> int:
    """Writes sorted packed entries as lines to ``path``; returns how many."""
    from beamcrawl.core.runtime import files

    out = files.PiecewiseFile(path)
    lines = 0
    chunk: list[bytes] = []
    try:
        for key, stamp, _, fields in packed:
            chunk.append(b"%s %s %s\n" % (key, stamp, fields))
            if len(chunk) >= _WRITE_LINES:
                out.write(b"".join(chunk))
                lines += len(chunk)
                chunk = []
        out.write(b"".join(chunk))
        lines += len(chunk)
    except BaseException:
        out.abandon()
        raise
    out.close()
    return lines
