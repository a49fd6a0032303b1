"""Conditional GETs: validators in, ``If-None-Match`` / ``If-Modified-Since`` out, 304 read.

A revisit is cheap when the server can answer "not modified" without a body. The crawler
keeps the two validators a response carries (``ETag`` and ``Last-Modified``, RFC 9110 §8.8)
in the URL's state and sends them back on its next visit (§13.1.1, §13.1.3). A server that
has the same representation answers 304 with no body; the crawler then keeps its stored copy,
writes a WARC ``revisit`` record with the ``server-not-modified`` profile, and counts the
visit as "unchanged" in the change history (core/policy/change_rate.py).

Rules kept here, each with its reason:

* Both validators are sent when both are known. RFC 9110 §13.1.3 makes a server ignore
  ``If-Modified-Since`` when ``If-None-Match`` is present, so sending both costs nothing and
  helps servers that honour only one of them.
* Validators are echoed byte for byte, as received. Servers compare ETags as opaque strings,
  and many compare ``If-Modified-Since`` with their ``Last-Modified`` as a string, so any
  rewriting (re-quoting an ETag, re-formatting a date) would turn every revisit into a full
  download.
* A ``Last-Modified`` that is not a valid HTTP-date, or lies in the future (beyond the
  response's ``Date``, or the crawler's clock when ``Date`` is missing, plus a small skew), is
  not kept: a server must ignore an invalid ``If-Modified-Since`` (§13.1.3), and a future date
  would make a date-comparing server answer 304 until that date passes, hiding changes. Nor
  is one with a byte no HTTP-date holds (a control character, obs-text), which the date
  parser reads past: the HTTP client refuses to write a control character, or obs-text that
  is not UTF-8 (core/net/wire.client_headers), so every revisit of the URL failed before
  its request went out; a stored one is not sent either.
* A 304 is only "not modified" when the request was conditional. A 304 to an unconditional
  request is a server fault, reported as such so the URL is retried rather than trusted.

Pure functions: no I/O, no Beam.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import re
from dataclasses import dataclass
from typing import Iterable, Literal

__all__ = [
    "CLOCK_SKEW",
    "REVISIT_PROFILE_NOT_MODIFIED",
    "Validators",
    "classify_not_modified",
    "conditional_headers",
    "freshen",
    "is_conditional",
    "parse_etag",
    "parse_http_date",
    "parse_last_modified",
    "revisit_warc_headers",
    "validators_from_headers",
]

# WARC 1.1 §6.7.2: the profile of a revisit record written for a 304 answer. (warcio's own
# revisit helper writes the 1.0 identical-payload-digest profile; set this one explicitly.)
REVISIT_PROFILE_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

# Seconds a Last-Modified may lie ahead of the reference clock before it is distrusted
# (clocks on either side drift; a minute covers ordinary NTP-less servers).
CLOCK_SKEW = 60.0

# Long enough for every real ETag seen (hashes, inode-size-mtime triples, base64 digests)
# while keeping one hostile header from bloating every URL row that stores it.
MAX_ETAG_LENGTH = 256

# RFC 9110 §8.8.3: entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / obs-text.
_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"')
# Unquoted tags are a common misconfiguration; they are kept (echoed verbatim) when they
# are at least one visible token without quotes, commas or spaces.
_LOOSE_ETAG = re.compile(r"(?:W/)?[\x21\x23-\x2b\x2d-\x7e\x80-\xff]+")


@dataclass(frozen=True)
class Validators:
    """The validators of one stored response.

    Attributes:
        etag: The ``ETag`` value as received (``"abc"`` or ``W/"abc"``), or None.
        last_modified: The ``Last-Modified`` value as received, or None when missing,
            invalid or in the future.
        last_modified_at: ``last_modified`` as epoch seconds (None with it).
    """

    etag: str | None = None
    last_modified: str | None = None
    last_modified_at: float | None = None

    def __bool__(self) -> bool:
        return self.etag is not None or self.last_modified is not None


def parse_etag(value: str | None) -> str | None:
    """The ETag to keep from an ``ETag`` header value, or None.

    A well-formed entity-tag is kept as it is; an unquoted token (a misconfigured server) is
    kept verbatim too, since the server compares its own spelling. Empty values, several
    tags, control characters and overlong values are dropped.

    Args:
        value: The header value, or None when the header is missing.

    Returns:
        The value to store and echo in ``If-None-Match``, or None.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > MAX_ETAG_LENGTH:
        return None
    if not (_ETAG.fullmatch(text) or _LOOSE_ETAG.fullmatch(text)):
        return None
    if not text.isascii():
        # obs-text: the value is the header's bytes read as latin-1. It is echoed byte for
        # byte only when those bytes are UTF-8, which the HTTP client can write
        # (core/net/wire.client_headers); any other is dropped: a full GET, not a wrong tag.
        try:
            text.encode("latin-1").decode("utf-8")
        except UnicodeError:
            return None
    return text


# What an HTTP-date is written with (RFC 9110 §5.6.7: letters, digits, SP, ",", ":", "-"), and
# more: visible ASCII and SP, which the HTTP client writes as they are.
_DATE_TEXT = re.compile(r"[\x20-\x7e]*")


def _sendable_date(value: str) -> bool:
    """Whether a ``Last-Modified`` value (OWS aside) holds only bytes an HTTP-date may, which
    the client echoes byte for byte in ``If-Modified-Since``."""
    return _DATE_TEXT.fullmatch(value.strip(" \t")) is not None


# RFC 9110 §5.6.7's preferred form, ``Sun, 06 Nov 1994 08:49:37 GMT``, as nearly every server
# writes it (a four-digit year not starting with 0: email.utils reads "0099" as 1999).
_IMF_FIXDATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"([1-9][0-9]{3}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)
_MONTHS = {name: i for i, name in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def parse_http_date(value: str | None) -> float | None:
    """Epoch seconds of an HTTP-date (IMF-fixdate, RFC 850 or asctime form), or None.

    RFC 9110 §5.6.7 makes recipients accept all three forms; a date without a zone (asctime)
    is GMT by definition. An IMF-fixdate is read directly (2 µs), anything else by
    ``email.utils`` (4 µs), which reads an IMF-fixdate the same way (tests compare them).
    """
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > 64:
        return None
    fixdate = _IMF_FIXDATE.fullmatch(text)
    if fixdate is not None:  # the form servers send: read without email.utils' general parser
        day, month, year, hour, minute, second = fixdate.groups()
        try:
            moment = dt.datetime(
                int(year), _MONTHS[month], int(day), int(hour), int(minute), int(second), tzinfo=dt.timezone.utc
            )
        except ValueError:  # no such day or time (31 Feb, 24:00): as email.utils refuses it
            return None
        return moment.timestamp()
    return _email_date(text)


def _email_date(text: str) -> float | None:
    """Epoch seconds of a stripped HTTP-date of any of the three forms, by ``email.utils``'
    general parser (what :func:`parse_http_date` reads an IMF-fixdate the same as), or None."""
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def parse_last_modified(value: str | None, now: float, date: str | None = None) -> tuple[str, float] | None:
    """The ``Last-Modified`` value to keep, with its epoch seconds, or None.

    Args:
        value: The ``Last-Modified`` header value.
        now: The crawler's clock when the response arrived (epoch seconds).
        date: The response's ``Date`` header, the server's own clock, if sent.

    Returns:
        ``(value as received, epoch seconds)``, or None when missing, invalid (a byte no
        HTTP-date holds, even where the date parser reads past it), or later than the
        server's ``Date`` (else ``now``) by more than :data:`CLOCK_SKEW`.
    """
    when = parse_http_date(value)
    if when is None or value is None or not _sendable_date(value):
        return None
    reference = parse_http_date(date)
    if reference is None:
        reference = now
    if when > reference + CLOCK_SKEW:
        return None
    return value.strip(), when


def _first(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers:
        if key.lower() == wanted:
            return value
    return None


def validators_from_headers(headers: Iterable[tuple[str, str]], now: float) -> Validators:
    """The validators of a response, from its header list (first occurrence of each wins).

    Args:
        headers: Response headers as ``(name, value)`` pairs (``FetchResult.response_headers``).
        now: Epoch seconds when the response arrived.
    """
    pairs = list(headers)
    etag = parse_etag(_first(pairs, "etag"))
    lm = parse_last_modified(_first(pairs, "last-modified"), now, _first(pairs, "date"))
    if lm is None:
        return Validators(etag=etag)
    return Validators(etag=etag, last_modified=lm[0], last_modified_at=lm[1])


def conditional_headers(etag: str | None, last_modified: str | None) -> list[tuple[str, str]]:
    """Request headers that make a GET conditional on the stored validators.

    Args:
        etag: The stored ETag (sent as ``If-None-Match``), or None.
        last_modified: The stored ``Last-Modified`` (sent as ``If-Modified-Since``), or None;
            not sent when it is no HTTP-date, or holds a byte none holds (one stored before
            :func:`parse_last_modified` dropped such values).

    Returns:
        Zero, one or two ``(name, value)`` pairs, ``If-None-Match`` first.
    """
    out: list[tuple[str, str]] = []
    tag = parse_etag(etag)
    if tag is not None:
        out.append(("If-None-Match", tag))
    if last_modified is not None and _sendable_date(last_modified) and parse_http_date(last_modified) is not None:
        out.append(("If-Modified-Since", last_modified.strip()))
    return out


def is_conditional(request_headers: Iterable[tuple[str, str]]) -> bool:
    """Whether a request carried a validator (so a 304 answer is meaningful)."""
    return any(name.lower() in ("if-none-match", "if-modified-since") for name, _ in request_headers)


def classify_not_modified(
    status: int | None, request_headers: Iterable[tuple[str, str]]
) -> Literal["not_modified", "unexpected_304", "other"]:
    """How to read a response's status with respect to conditional requests.

    Returns:
        ``"not_modified"`` for a 304 to a conditional request (keep the stored copy),
        ``"unexpected_304"`` for a 304 to an unconditional one (a server fault: retry, do
        not trust), ``"other"`` for every other status.
    """
    if status != 304:
        return "other"
    return "not_modified" if is_conditional(request_headers) else "unexpected_304"


def freshen(stored: Validators, answer: Validators) -> Validators:
    """The validators to keep after a 304.

    A 304 should repeat the validators (RFC 9110 §15.4.5); where it sends one, it replaces
    the stored one (the server's current spelling), where it sends none, the stored one
    stays.
    """
    lm: str | None
    if answer.last_modified is not None:
        lm, at = answer.last_modified, answer.last_modified_at
    else:
        lm, at = stored.last_modified, stored.last_modified_at
    return Validators(etag=answer.etag or stored.etag, last_modified=lm, last_modified_at=at)


def revisit_warc_headers(refers_to_uri: str, refers_to_date: str, refers_to: str | None = None) -> dict[str, str]:
    """WARC header fields of the ``revisit`` record written for a 304 answer.

    The record's block is the 304's HTTP headers (``application/http;msgtype=response``)
    with no payload. ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date`` name the
    stored response the revisit stands for (WARC 1.1 §5.11, §5.12), so replay tools find it
    by URI and date; ``WARC-Refers-To`` (its record id) is added when known.

    Args:
        refers_to_uri: The target URI of the stored response record.
        refers_to_date: Its ``WARC-Date`` (W3C-ISO8601, e.g. ``2026-05-01T10:00:00Z``).
        refers_to: Its ``WARC-Record-ID`` (``<urn:uuid:...>``), if known.
    """
    headers = {
        "WARC-Profile": REVISIT_PROFILE_NOT_MODIFIED,
        "WARC-Refers-To-Target-URI": refers_to_uri,
        "WARC-Refers-To-Date": refers_to_date,
    }
    if refers_to:
        headers["WARC-Refers-To"] = refers_to
    return headers
