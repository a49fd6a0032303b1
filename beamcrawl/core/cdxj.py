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
  found);
- ``digest`` is the payload digest without its ``sha1:`` prefix (Common Crawl's form);
- ``mime`` is the HTTP Content-Type up to the first ``;`` or space, as sent
  (``warc/revisit`` for revisits); it is omitted when the response had none;
- ``filename`` is the WARC file's path relative to the crawl's output folder, the same path
  as in the page events' ``blob``;
- ``length`` is the record's compressed length (its gzip member), so ``offset`` and
  ``length`` select one whole gzip member.

The WARC writer builds entries as it writes (it knows offsets and lengths);
:func:`index_warc` builds the same entries by reading a file back, for files written
without an index. Nothing here imports Beam.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable
from urllib.parse import urljoin

import surt
from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_timestamp

__all__ = ["INDEXED_RECORDS", "CdxjEntry", "entry_for_record", "index_warc", "surt_key", "write_cdxj"]

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


def surt_key(url: str) -> str:
    """The SURT sort key of a URL, as pywb computes it for a lookup.

    Falls back to the URL itself when surt cannot parse it (as cdxj-indexer does), so one
    odd URL never costs a whole index.
    """
    try:
        key: str = surt.surt(url)
    except (ValueError, IndexError, TypeError, AttributeError):  # surt's failure modes on bad input
        return url
    return key


def _mime(record: Any) -> str | None:
    if record.rec_type == "revisit":
        return "warc/revisit"
    if record.rec_type == "response":
        value = record.http_headers.get_header("Content-Type") if record.http_headers else None
    else:
        value = record.rec_headers.get_header("Content-Type")
    if not value:
        return None
    return _MIME_END.split(value, 1)[0].strip() or None


def entry_for_record(record: Any, offset: int, length: int, filename: str) -> CdxjEntry | None:
    """The index entry of a warcio record, or None for records that are not indexed.

    Args:
        record: A warcio ``ArcWarcRecord``, freshly written or read back (its payload digest
            must be set: warcio's writer sets it, and our files carry it).
        offset: Where the record starts in the file (compressed bytes).
        length: The record's length in the file (compressed bytes).
        filename: The file's path as replay tools should see it.
    """
    if record.rec_type not in INDEXED_RECORDS:
        return None
    url = record.rec_headers.get_header("WARC-Target-URI") or ""
    fields: dict[str, str] = {"url": url}
    mime = _mime(record)
    if mime:
        fields["mime"] = mime
    status: int | None = None
    if record.rec_type in ("response", "revisit") and record.http_headers:
        code = record.http_headers.get_statuscode()
        if code:
            fields["status"] = code
            status = int(code) if code.isdigit() else None
    digest = record.rec_headers.get_header("WARC-Payload-Digest")
    if digest:
        fields["digest"] = digest.split(":", 1)[-1]
    fields["length"] = str(length)
    fields["offset"] = str(offset)
    fields["filename"] = filename
    if status in REDIRECTS and record.http_headers:
        location = record.http_headers.get_header("Location")
        if location:
            fields["redirect"] = urljoin(url, location.strip())
    truncated = record.rec_headers.get_header("WARC-Truncated")
    if truncated:
        fields["truncated"] = truncated
    date = record.rec_headers.get_header("WARC-Date") or ""
    return CdxjEntry(surt_key(url), iso_date_to_timestamp(date), offset, fields)


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


def write_cdxj(path: str, entries: Iterable[CdxjEntry]) -> int:
    """Writes entries sorted by SURT key then timestamp to ``path`` (via a temporary name);
    returns the number of lines."""
    from beamcrawl.core import files

    lines = [entry.line() for entry in sorted(entries)]
    files.write_bytes(path, "".join(f"{line}\n" for line in lines).encode("utf-8"))
    return len(lines)
