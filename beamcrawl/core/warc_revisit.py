"""WARC ``revisit`` records for exact copies (identical-payload-digest profile, WARC 1.1 §6.7.2).

A page whose payload the crawl already keeps is archived as a revisit record instead of a
second response record: its own URL and date, the HTTP response headers it got (the record
block, without the payload), and where the payload is:

============================  ===========================================================
``WARC-Type``                 ``revisit``
``WARC-Target-URI``           the copy's URL
``WARC-Date``                 when the copy was fetched
``WARC-Profile``              ``http://netpreserve.org/warc/1.1/revisit/identical-payload-digest``
``WARC-Refers-To-Target-URI`` the original's URL
``WARC-Refers-To-Date``       the original's ``WARC-Date`` (when it was fetched)
``WARC-Payload-Digest``       the payload digest, equal to the original's
``WARC-Truncated``            ``length``: the payload is left out on purpose (as Heritrix
                              writes it; the block holds the headers only)
``WARC-IP-Address``           the server's address, when known
============================  ===========================================================

WARC 1.1 requires ``WARC-Profile`` on a revisit; the IIPC recommends both ``WARC-Refers-To-*``
fields (replay tools look the original up by URL and date, not by record id). warcio's
``create_revisit_record`` adds the profile and, in recent versions, the two refers-to fields;
older versions did not (notes/pitfalls.md), so :func:`revisit_record` makes sure each field is
there exactly once whichever warcio builds it.

The identical-payload-digest profile promises the payload digest is the original's. The
crawl finds copies by a checksum of the *decoded* body; a copy sent with another
Content-Encoding has a different payload on the wire, so the caller checks
:func:`payload_digest` of the copy against the original's digest and writes an ordinary
response record when they differ (:func:`is_identical_payload`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from typing import Sequence

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from beamcrawl.schemas.records import ParsedPage

__all__ = ["REVISIT_PROFILE_1_1", "is_identical_payload", "payload_digest", "revisit_record", "warc_date"]

REVISIT_PROFILE_1_1 = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
_RENAMED = {"transfer-encoding": "X-Crawler-Transfer-Encoding"}  # as warc_io records responses


def payload_digest(raw_body: bytes) -> str:
    """The WARC payload digest of a body as transferred: ``sha1:`` + base32, as warcio writes it."""
    return "sha1:" + base64.b32encode(hashlib.sha1(raw_body).digest()).decode("ascii")


def is_identical_payload(page: ParsedPage, original_digest: str | None) -> bool:
    """Whether ``page``'s payload is byte for byte the original's (a revisit may stand in)."""
    return original_digest is not None and payload_digest(page.fetch.raw_body) == original_digest


def warc_date(epoch: float) -> str:
    """A ``WARC-Date`` value (UTC, microseconds) for epoch seconds."""
    moment = dt.datetime.fromtimestamp(epoch, dt.timezone.utc).replace(tzinfo=None)
    return str(datetime_to_iso_date(moment, use_micros=True))


# WARC named fields in the order most tools write them (any order is valid; people and some
# readers look for WARC-Type first), as warc_io orders response records.
_ORDER = {
    name.lower(): i
    for i, name in enumerate(
        ("WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI", "WARC-IP-Address", "WARC-Profile",
         "WARC-Refers-To-Target-URI", "WARC-Refers-To-Date", "WARC-Payload-Digest", "WARC-Truncated")
    )
}


def _set_once(record: ArcWarcRecord, name: str, value: str) -> None:
    record.rec_headers.remove_header(name)
    record.rec_headers.add_header(name, value)


def revisit_record(
    writer: WARCWriter,
    page: ParsedPage,
    original_url: str,
    original_date: float | str,
    digest: str,
    *,
    http_headers: Sequence[tuple[str, str]] | None = None,
    headers_class: type[StatusAndHeaders] = StatusAndHeaders,
) -> ArcWarcRecord:
    """Builds (does not write) the revisit record of an exact copy.

    Args:
        writer: The WARC writer (a WARC/1.1 one: the profile URI names 1.1).
        page: The copy: its URL, fetch time, IP, status line and response headers.
        original_url: ``WARC-Refers-To-Target-URI``: the URL whose response holds the payload.
        original_date: ``WARC-Refers-To-Date``: epoch seconds of the original's fetch, or
            its ``WARC-Date`` string.
        digest: ``WARC-Payload-Digest`` (``sha1:<base32>``), the original's and the copy's.
        http_headers: Response headers to record instead of ``page.fetch.response_headers``.
        headers_class: How the headers are serialised (warc_io passes its ``_WireHeaders``,
            which writes them back as the bytes received).

    Returns:
        The record; write it with ``writer.write_record(record)``.
    """
    f = page.fetch
    headers = [(_RENAMED.get(k.lower(), k), v) for k, v in (http_headers if http_headers is not None else f.response_headers)]
    status = headers_class(f"{f.status} {f.reason}".strip(), headers, protocol=f"HTTP/{f.http_version}")
    warc_headers = {"WARC-Date": warc_date(f.fetched_at)}
    if f.ip:
        warc_headers["WARC-IP-Address"] = f.ip
    refers_date = original_date if isinstance(original_date, str) else warc_date(original_date)
    record = writer.create_revisit_record(
        f.url, digest, original_url, refers_date, http_headers=status, warc_headers_dict=warc_headers
    )
    _set_once(record, "WARC-Profile", REVISIT_PROFILE_1_1)
    _set_once(record, "WARC-Refers-To-Target-URI", original_url)
    _set_once(record, "WARC-Refers-To-Date", refers_date)
    _set_once(record, "WARC-Payload-Digest", digest)
    _set_once(record, "WARC-Truncated", "length")
    record.rec_headers.headers.sort(key=lambda h: _ORDER.get(h[0].lower(), len(_ORDER)))
    return record
