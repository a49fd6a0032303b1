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
older versions did not (notes/pitfalls.md). :func:`revisit_fields` lists every field itself,
each exactly once, and :mod:`beamcrawl.core.archive.warc_records` writes them as given.

The identical-payload-digest profile promises the payload digest is the original's. The
crawl finds copies by a checksum of the *decoded* body; a copy sent with another
Content-Encoding has a different payload on the wire, so the caller checks
:func:`payload_digest` of the copy against the original's digest and writes an ordinary
response record when they differ (:func:`is_identical_payload`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import time

from beamcrawl.core.archive.warc_records import b32, first_fields
from beamcrawl.schemas.records import FetchResult, ParsedPage

__all__ = ["REVISIT_PROFILE_1_1", "is_identical_payload", "payload_digest", "revisit_fields", "warc_date"]

REVISIT_PROFILE_1_1 = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def payload_digest(raw_body: bytes) -> str:
    """The WARC payload digest of a body as transferred: ``sha1:`` + base32, as warcio writes it."""
    return "sha1:" + b32(hashlib.sha1(raw_body).digest())


def fetch_digest(f: FetchResult) -> str:
    """A fetch's payload digest: the one taken when its body was set aside, else computed."""
    return f.digest if f.digest is not None else payload_digest(f.raw_body)


def is_identical_payload(page: ParsedPage, original_digest: str | None) -> bool:
    """Whether ``page``'s payload is byte for byte the original's (a revisit may stand in)."""
    return original_digest is not None and fetch_digest(page.fetch) == original_digest


def warc_date(epoch: float) -> str:
    """A ``WARC-Date`` value (UTC, microseconds) for epoch seconds: what warcio's
    ``datetime_to_iso_date(..., use_micros=True)`` writes (``2026-12-02T19:42:04.123456Z``, no
    fraction at a whole second). The microseconds are rounded as ``datetime.fromtimestamp``
    rounds them (half to even, into the next second at the top); a second's text is made once
    and kept while the fetches of that second ask for it (a fetch's records ask for its date in
    turn, and a loop's pages come a thousand a second)."""
    global _last_second
    fraction, whole = math.modf(epoch)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1.0, micros - 1_000_000
    if micros < 0 or not 0 <= whole < _YEAR_10000:  # before 1970 or past 9999: as datetime does
        return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat()[:-6] + "Z"
    last = _last_second
    if last[0] != whole:
        last = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
        _last_second = last  # one reference swapped: a reader sees a whole pair
    return last[1] + "Z" if micros == 0 else f"{last[1]}.{micros:06d}Z"


_last_second: tuple[float | None, str] = (None, "")
_YEAR_10000 = 253_402_300_800.0  # datetime's limit: 9999-12-31T23:59:59 is the last second


def revisit_fields(
    page: ParsedPage, original_url: str, original_date: float | str, digest: str, record_id: str
) -> list[tuple[str, str]]:
    """The named fields of an exact copy's revisit record, in the conventional order (type,
    id, date, URI and IP first, as warc_io orders every record; then the revisit's own).

    The record's block is the copy's HTTP status line and response headers, with no payload
    (``WARC-Truncated: length``); :func:`beamcrawl.core.archive.warc_records.record` adds the block
    digest, ``Content-Type`` and ``Content-Length`` after these.

    Args:
        page: The copy: its URL, fetch time and IP.
        original_url: ``WARC-Refers-To-Target-URI``: the URL whose response holds the payload.
        original_date: ``WARC-Refers-To-Date``: epoch seconds of the original's fetch, or
            its ``WARC-Date`` string.
        digest: ``WARC-Payload-Digest`` (``sha1:<base32>``), the original's and the copy's.
        record_id: The record's ``WARC-Record-ID`` (``<urn:uuid:...>``).
    """
    f = page.fetch
    return first_fields("revisit", record_id, warc_date(f.fetched_at), f.url, f.ip) + [
        ("WARC-Profile", REVISIT_PROFILE_1_1),
        ("WARC-Refers-To-Target-URI", original_url),
        ("WARC-Refers-To-Date", original_date if isinstance(original_date, str) else warc_date(original_date)),
        ("WARC-Payload-Digest", digest),
        ("WARC-Truncated", "length"),
    ]
