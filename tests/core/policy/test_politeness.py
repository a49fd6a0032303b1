"""Politeness arithmetic: the delay rule, 429/503 and Retry-After, back-off, recovery."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy import politeness
from beamcrawl.core.runtime.config import CrawlConfig

CFG = CrawlConfig(out="/o", store="sqlite:///o", min_delay=1.0, max_delay=60.0)


@pytest.mark.parametrize(
    "crawl_delay, response_time, policy, expected",
    [
        (None, 0.01, None, 1.0),  # the floor
        (5.0, 0.01, None, 5.0),  # Crawl-delay
        (600.0, 0.01, None, 60.0),  # Crawl-delay capped at the ceiling
        (None, 0.5, None, 5.0),  # 10 x response time
        (None, 30.0, None, 60.0),  # capped
        (None, 0.01, 90.0, 90.0),  # the operator's minimum beats the ceiling
    ],
)
def test_base_delay(crawl_delay, response_time, policy, expected):
    assert politeness.base_delay(CFG, crawl_delay, response_time, policy) == expected


def test_429_doubles_and_honours_retry_after_seconds():
    d = politeness.after_response(
        CFG, current_delay=2.0, steady_delay=1.0, status=429, retry_after="30", end=1000.0, consecutive_errors=0
    )
    assert d.delay == 4.0
    assert d.not_before == 1030.0
    assert politeness.next_allowed(1000.0, d.delay, d.not_before) == 1030.0


def test_503_retry_after_http_date():
    date = email.utils.formatdate(1000.0 + 120, usegmt=True)
    d = politeness.after_response(
        CFG, current_delay=1.0, steady_delay=1.0, status=503, retry_after=date, end=1000.0, consecutive_errors=0
    )
    assert d.delay == 2.0
    assert d.not_before == pytest.approx(1120.0, abs=1)


def test_garbage_retry_after_is_ignored_but_slowdown_stays():
    d = politeness.after_response(
        CFG, current_delay=1.0, steady_delay=1.0, status=429, retry_after="soon", end=5.0, consecutive_errors=0
    )
    assert d.delay == 2.0 and d.not_before == 0.0


def test_run_of_failures_backs_off_exponentially():
    holds = []
    errors = 0
    for _ in range(6):
        d = politeness.after_response(
            CFG, current_delay=1.0, steady_delay=1.0, status=None, retry_after=None, end=0.0, consecutive_errors=errors
        )
        errors = d.consecutive_errors
        holds.append(d.not_before)
    assert holds[:2] == [0.0, 0.0]
    assert holds[2:] == [2.0, 4.0, 8.0, 16.0]


def test_delay_recovers_when_the_host_answers_fast_again():
    d = politeness.after_response(
        CFG, current_delay=8.0, steady_delay=1.0, status=200, retry_after=None, end=0.0, consecutive_errors=3
    )
    assert d.delay == 4.0 and d.consecutive_errors == 0
    d = politeness.after_response(
        CFG, current_delay=1.5, steady_delay=1.0, status=200, retry_after=None, end=0.0, consecutive_errors=0
    )
    assert d.delay == 1.0


def test_gap_counts_from_the_end_of_the_previous_response():
    allowed = politeness.next_allowed(last_fetch_end=100.0, delay=1.0, not_before=0.0)
    assert 101.0 < allowed <= 101.05


# Retry-After values as the fetcher holds them (the header's bytes read as latin-1): digits,
# latin-1's superscript digits (str.isdigit() says yes, float() says no), date parts, zones
# and numbers far past a date's range.
_RETRY_PARTS = ["0", "7", "120", "\xb2", "\xb3", "\xb9", " ", "GMT", "-9999999999999", "+2359", "99999999999999999999",
                "Sun, 06 Nov 1994 08:49:37 GMT", "31 Dec 9999 23:59:59", "00 Jan 1900 00:00:00", "Feb", ","]  # fmt: skip
_retry_after = st.one_of(
    st.lists(st.sampled_from(_RETRY_PARTS), min_size=1, max_size=5).map("".join),
    st.binary(min_size=1, max_size=16).map(lambda b: b.decode("latin-1")),
)


@settings(max_examples=2000, deadline=None)
@given(value=_retry_after, status=st.sampled_from([429, 503]))
@example(value="\xb2", status=503)
@example(value="31 Dec 9999 23:59:59 -9999999999990", status=429)
def test_any_retry_after_gives_a_wait_or_none_and_never_raises(value, status):
    """A 429 or 503 with any Retry-After is booked. ``²`` (the byte B2) passed
    ``str.isdigit`` and failed ``float``, and a date with a zone millions of hours off
    overflowed: the error escaped the fetch loop's booking of the response, and every
    other URL of the host was given back as an internal error (RFC 9110 §10.2.3:
    delay-seconds is ASCII digits; anything that is neither it nor a date is ignored)."""
    wait = politeness.parse_retry_after(value, 1_700_000_000.0)
    assert wait is None or 0.0 <= wait <= politeness.RETRY_AFTER_CAP
    decision = politeness.after_response(
        CFG, current_delay=1.0, steady_delay=1.0, status=status, retry_after=value, end=5.0, consecutive_errors=0
    )
    assert decision.delay >= 1.0


@settings(max_examples=300, deadline=None)
@given(
    status=st.one_of(st.integers(0, 99), st.integers(600, 999)),
    current=st.floats(1.0, 60.0),
    errors=st.integers(0, 8),
)
@example(status=99, current=8.0, errors=3)
@example(status=0, current=1.0, errors=2)
def test_an_invalid_status_code_is_booked_as_a_server_error(status, current, errors):
    """A status code outside 100-599 (``HTTP/1.1 099 X``, ``000``: three digits, which the
    client reads) is invalid, and a client SHOULD process it as a 5xx (RFC 9110 §15). One
    below 100 was booked as a good answer: the host's errors in a row were forgotten, its
    back-off lifted and its delay halved, by a server answering no valid status at all."""
    decided = politeness.after_response(
        CFG, current_delay=current, steady_delay=1.0, status=status, retry_after=None, end=50.0,
        consecutive_errors=errors,
    )  # fmt: skip
    as_500 = politeness.after_response(
        CFG, current_delay=current, steady_delay=1.0, status=500, retry_after=None, end=50.0, consecutive_errors=errors
    )
    assert decided == as_500
    assert decided.consecutive_errors == errors + 1
