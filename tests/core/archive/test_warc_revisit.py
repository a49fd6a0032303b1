"""Revisit records for exact copies: written after a response warcio wrote, in a real WARC
file, checked with ``warcio check`` and read back."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from beamcrawl.core.archive import cdxj, warc_revisit
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.core.archive.warc_records import RESPONSE_CONTENT_TYPE, gzip_member, http_head, new_record_id, record
from beamcrawl.core.archive.warc_revisit import (
    REVISIT_PROFILE_1_1,
    is_identical_payload,
    payload_digest,
    revisit_fields,
    warc_date,
)
from beamcrawl.schemas.records import FetchResult, FrontierEntry, ParsedPage

BODY = b"<html><body><p>The same story, served twice.</p></body></html>\n"
HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(BODY))), ("Server", "simweb")]


def _page(url: str, at: float) -> ParsedPage:
    entry = FrontierEntry(url=url, fp=fingerprint(url), host=url.split("/")[2], due_ms=0)
    fetch = FetchResult(
        entry=entry,
        outcome="fetched",
        url=url,
        final_url=url,
        status=200,
        reason="OK",
        fetched_at=at,
        ip="127.0.0.1",
        response_headers=list(HEADERS),
        body=BODY,
        raw_body=BODY,
    )
    return ParsedPage(fetch=fetch)


def _warcio() -> str:
    return os.path.join(os.path.dirname(sys.executable), "warcio")


def test_revisit_after_its_original_passes_warcio_check(tmp_path):
    original = _page("http://site.com/story", 1_700_000_000.25)
    copy = _page("http://mirror.org/story?print=1", 1_700_000_100.5)
    path = tmp_path / "part-0.warc.gz"
    with open(path, "wb") as out:
        writer = WARCWriter(out, gzip=True, warc_version="1.1")
        response = writer.create_warc_record(
            original.fetch.url,
            "response",
            payload=io.BytesIO(BODY),
            length=len(BODY),
            http_headers=StatusAndHeaders("200 OK", list(HEADERS), protocol="HTTP/1.1"),
            warc_headers_dict={"WARC-Date": warc_date(original.fetch.fetched_at)},
        )
        writer.write_record(response)
        digest = response.rec_headers.get_header("WARC-Payload-Digest")
        assert digest == payload_digest(BODY)
        assert is_identical_payload(copy, digest)
        fields = revisit_fields(copy, original.fetch.url, original.fetch.fetched_at, digest, new_record_id())
        head, _ = http_head("HTTP/1.1 200 OK", HEADERS)
        out.write(gzip_member(record(fields, head, content_type=RESPONSE_CONTENT_TYPE)))

    check = subprocess.run([_warcio(), "check", "-v", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest present but not checked (revisit)" in check.stdout
    assert "digest pass" in check.stdout  # the response's digests

    with open(path, "rb") as f:
        records = list(
            (r.rec_type, r.rec_headers, r.http_headers, r.content_stream().read()) for r in ArchiveIterator(f)
        )
    (_, resp_headers, _, resp_body), (rec_type, headers, http, block) = records
    assert resp_body == BODY
    assert rec_type == "revisit"
    names = [name.lower() for name, _ in headers.headers]
    for field in (
        "warc-profile",
        "warc-refers-to-target-uri",
        "warc-refers-to-date",
        "warc-payload-digest",
        "warc-truncated",
    ):
        assert names.count(field) == 1, field
    assert headers.get_header("WARC-Profile") == REVISIT_PROFILE_1_1
    assert headers.get_header("WARC-Target-URI") == copy.fetch.url
    assert headers.get_header("WARC-Refers-To-Target-URI") == original.fetch.url
    assert headers.get_header("WARC-Refers-To-Date") == resp_headers.get_header("WARC-Date")
    assert headers.get_header("WARC-Date") == warc_date(copy.fetch.fetched_at)
    assert headers.get_header("WARC-Payload-Digest") == resp_headers.get_header("WARC-Payload-Digest")
    assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
    assert http.get_statuscode() == "200" and http.get_header("Server") == "simweb"
    assert block == b""  # headers only: the payload stays with the original

    # The CDXJ index lists the revisit as replay tools expect, with the original's digest.
    with open(path, "rb") as f:
        entries = cdxj.index_warc(f, "part-0.warc.gz")
    revisit = [e for e in entries if e.fields.get("mime") == "warc/revisit"]
    assert len(entries) == 2 and len(revisit) == 1
    assert revisit[0].fields["url"] == copy.fetch.url
    assert revisit[0].fields["digest"] == digest.split(":", 1)[1]


def test_a_differently_encoded_copy_is_not_an_identical_payload():
    copy = _page("http://mirror.org/story", 1.0)
    assert not is_identical_payload(copy, payload_digest(b"gzip bytes of the same text"))
    assert not is_identical_payload(copy, None)
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"


@settings(max_examples=1000, deadline=None)
@given(
    epochs=st.lists(
        st.one_of(
            st.floats(0, 4_102_444_800, allow_nan=False),  # to 2100
            st.integers(0, 4_102_444_800).map(float),  # whole seconds: no fraction written
            st.integers(0, 4_102_444_800 * 10**6).map(lambda us: us / 10**6),
            # a hair under a whole second, or on a half microsecond: rounded as datetime does
            st.tuples(st.integers(1, 4_102_444_800), st.sampled_from([4e-7, 5e-7, 6e-7])).map(lambda t: t[0] - t[1]),
            st.integers(0, 4_102_444_800 * 10**6).map(lambda us: (us + 0.5) / 10**6),
            st.floats(-2_000_000_000, 0, allow_nan=False),  # before 1970
        ),
        min_size=1,
        max_size=4,
    )
)
def test_warc_date_is_what_warcio_writes_for_the_moment(epochs: list[float]) -> None:
    for epoch in [*epochs, *epochs]:  # asked again: the kept answer is the same
        moment = dt.datetime.fromtimestamp(epoch, dt.timezone.utc).replace(tzinfo=None)
        assert warc_revisit.warc_date(epoch) == datetime_to_iso_date(moment, use_micros=True)


@pytest.mark.parametrize("epoch", [253_402_300_800.0, 1e13, float("inf")])
def test_warc_date_refuses_a_moment_datetime_cannot_hold(epoch: float) -> None:
    with pytest.raises((ValueError, OverflowError, OSError)):
        dt.datetime.fromtimestamp(epoch, dt.timezone.utc)
    with pytest.raises((ValueError, OverflowError, OSError)):
        warc_revisit.warc_date(epoch)
