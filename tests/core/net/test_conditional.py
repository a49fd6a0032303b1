"""Conditional GETs: validators parsed from responses, echoed as If-None-Match / If-Modified-Since,
304 read, and the WARC revisit record's header fields."""

from __future__ import annotations

import email.utils
import io

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from beamcrawl.core.net import conditional as c

NOW = 1_700_000_000.0
IMF = email.utils.formatdate(NOW - 86400, usegmt=True)  # a day before NOW


@pytest.mark.parametrize(
    "value, expected",
    [
        ('"abc"', '"abc"'),
        ('W/"abc"', 'W/"abc"'),
        ('  "a-b_c.1"  ', '"a-b_c.1"'),
        ('""', '""'),  # an empty opaque tag is valid
        ("5f1c-3a2b", "5f1c-3a2b"),  # unquoted (misconfigured): echoed as the server spells it
        ("", None),
        (None, None),
        ('"a", "b"', None),  # two tags in one header: not one validator
        ('"a"\r\nX-Evil: 1', None),
        ('"' + "x" * 300 + '"', None),
        # obs-text, as read off the wire (latin-1): kept when its bytes are UTF-8, which the
        # client can echo byte for byte; dropped otherwise (a full GET, not a wrong tag)
        ('"caf\xc3\xa9"', '"caf\xc3\xa9"'),
        ('"caf\xe9"', None),
        ('"\xc3"', None),
    ],
)
def test_parse_etag(value, expected):
    assert c.parse_etag(value) == expected


@pytest.mark.parametrize(
    "value",
    ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"],
)
def test_http_date_accepts_the_three_forms(value):
    assert c.parse_http_date(value) == 784111777.0


@pytest.mark.parametrize("value", [None, "", "yesterday", "2024-01-01", "Mon, 99 Foo 2024 00:00:00 GMT"])
def test_http_date_rejects_garbage(value):
    assert c.parse_http_date(value) is None


def test_last_modified_kept_verbatim_and_in_the_past():
    assert c.parse_last_modified(f"  {IMF} ", NOW) == (IMF, NOW - 86400)


def test_future_last_modified_is_not_kept():
    future = email.utils.formatdate(NOW + 3600, usegmt=True)
    assert c.parse_last_modified(future, NOW) is None
    # The server's own Date decides when it sends one: its clock may be ahead of ours.
    server_date = email.utils.formatdate(NOW + 7200, usegmt=True)
    assert c.parse_last_modified(future, NOW, server_date) == (future, NOW + 3600)
    # Within the clock skew allowance: kept.
    near = email.utils.formatdate(NOW + 30, usegmt=True)
    assert c.parse_last_modified(near, NOW) is not None


def test_validators_from_headers_case_insensitive_first_wins():
    headers = [("etag", '"v1"'), ("ETag", '"v2"'), ("LAST-MODIFIED", IMF), ("Content-Type", "text/html")]
    v = c.validators_from_headers(headers, NOW)
    assert v == c.Validators(etag='"v1"', last_modified=IMF, last_modified_at=NOW - 86400)
    assert v
    assert not c.validators_from_headers([("Content-Type", "text/html")], NOW)


def test_conditional_headers():
    assert c.conditional_headers('"v1"', IMF) == [("If-None-Match", '"v1"'), ("If-Modified-Since", IMF)]
    assert c.conditional_headers('W/"v1"', None) == [("If-None-Match", 'W/"v1"')]
    assert c.conditional_headers(None, IMF) == [("If-Modified-Since", IMF)]
    assert c.conditional_headers(None, "not a date") == []
    assert c.conditional_headers(None, None) == []


def test_classify_not_modified():
    cond = [("User-Agent", "x"), ("If-None-Match", '"v1"')]
    assert c.classify_not_modified(304, cond) == "not_modified"
    assert c.classify_not_modified(304, [("If-Modified-Since", IMF)]) == "not_modified"
    assert c.classify_not_modified(304, [("User-Agent", "x")]) == "unexpected_304"
    assert c.classify_not_modified(200, cond) == "other"
    assert c.classify_not_modified(None, cond) == "other"


def test_freshen_after_304():
    stored = c.Validators('"v1"', IMF, NOW - 86400)
    assert c.freshen(stored, c.Validators()) == stored
    newer = email.utils.formatdate(NOW - 60, usegmt=True)
    assert c.freshen(stored, c.Validators('"v2"', newer, NOW - 60)) == c.Validators('"v2"', newer, NOW - 60)
    assert c.freshen(stored, c.Validators(etag='"v2"')) == c.Validators('"v2"', IMF, NOW - 86400)


def test_revisit_record_reads_back_with_warcio():
    """The fields produce a WARC 1.1 revisit record that web-archive tools read."""
    fields = c.revisit_warc_headers(
        "http://example.com/a.html", "2026-05-01T10:00:00Z", "<urn:uuid:12345678-1234-5678-1234-567812345678>"
    )
    assert fields["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True, warc_version="1.1")
    http = StatusAndHeaders("304 Not Modified", [("ETag", '"v1"')], protocol="HTTP/1.1")
    record = writer.create_warc_record(
        "http://example.com/a.html",
        "revisit",
        payload=io.BytesIO(b""),
        length=0,
        http_headers=http,
        warc_headers_dict={"WARC-Date": "2026-05-02T10:00:00Z"},
    )
    # warcio sets its own (1.0, identical-payload-digest) profile on revisits: replace it.
    record.rec_headers.replace_header("WARC-Profile", fields["WARC-Profile"])
    for name in ("WARC-Refers-To-Target-URI", "WARC-Refers-To-Date", "WARC-Refers-To"):
        record.rec_headers.add_header(name, fields[name])
    writer.write_record(record)
    buf.seek(0)
    (read,) = list(ArchiveIterator(buf))
    assert read.rec_type == "revisit"
    assert read.rec_headers.get_header("WARC-Profile") == c.REVISIT_PROFILE_NOT_MODIFIED
    assert read.rec_headers.get_header("WARC-Refers-To-Date") == "2026-05-01T10:00:00Z"
    assert read.http_headers.get_statuscode() == "304"


def _by_email_utils(text: str) -> float | None:
    """What parse_http_date answered before its IMF-fixdate reading: email.utils' parse of
    the stripped text, within the same length bound."""
    text = text.strip()
    return c._email_date(text) if text and len(text) <= 64 else None


# IMF-fixdates and their near misses: impossible days and times, two-digit or 0-led years,
# other zones, lowercase names, one-digit days, extra spaces.
_DATES = st.builds(
    "{}, {} {} {} {}:{}:{} {}".format,
    st.sampled_from(["Mon", "Sun", "Fri", "mon", "Xyz"]),
    st.one_of(st.integers(0, 40).map("{:02d}".format), st.sampled_from(["6", "006", " 6"])),
    st.sampled_from(["Jan", "Feb", "Apr", "Dec", "jan", "Foo"]),
    st.one_of(st.integers(1000, 9999).map(str), st.sampled_from(["0099", "99", "1969", "2038", "0000"])),
    st.integers(0, 25).map("{:02d}".format),
    st.integers(0, 61).map("{:02d}".format),
    st.integers(0, 61).map("{:02d}".format),
    st.sampled_from(["GMT", "UTC", "+0100", "gmt", "GMT ", ""]),
)


@settings(max_examples=1500, deadline=None)
@given(text=_DATES)
@example("Sun, 06 Nov 1994 08:49:37 GMT")
@example("Tue, 29 Feb 2000 00:00:00 GMT")
@example("Tue, 29 Feb 2001 00:00:00 GMT")
@example("Sun, 06 Nov 1994 24:00:00 GMT")
def test_an_imf_fixdate_reads_as_email_utils_reads_it(text: str) -> None:
    assert c.parse_http_date(text) == _by_email_utils(text)


@settings(max_examples=500, deadline=None)
@given(
    text=st.from_regex(
        r"(Mon|Sun), [0-3][0-9] (Jan|Feb|Jun|Dec) [1-9][0-9]{3} [0-2][0-9]:[0-6][0-9]:[0-6][0-9] GMT", fullmatch=True
    )
)
def test_every_imf_fixdate_shape_reads_as_email_utils_reads_it(text: str) -> None:
    assert c.parse_http_date(text) == _by_email_utils(text)
