"""The report's breakdowns of fetch errors and deferrals: every reason lands in the fixed
vocabulary (a counter per kind, however varied the web's failures)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beamcrawl.core.net.fetcher import DEFERRED_REASONS, ERROR_KINDS, deferred_reason, error_kind


@pytest.mark.parametrize(
    "reason,kind",
    [
        ("dns: [Errno -2] Name or service not known", "dns"),
        ("refused address: 10.0.0.1 is private", "refused_address"),
        ("TimeoutError", "timeout"),
        ("ClientConnectorError: Cannot connect to host a.example:80 ssl:default [Connection refused]", "connect"),
        ("ServerDisconnectedError: Server disconnected", "connection_lost"),
        ("ClientPayloadError: Response payload is not completed", "connection_lost"),
        ("ResponseRefused: more than 128 response header lines", "bad_response"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_error_kinds(reason, kind):
    assert error_kind(reason) == kind


@pytest.mark.parametrize(
    "reason,kind",
    [("round window ended", "window_ended"), ("robots.txt unknown", "robots_unknown"),
     ("robots.txt unavailable", "robots_unavailable"), ("internal error: KeyError('x')", "internal"),
     ("held by a redirect's Retry-After", "redirect_hold"), (None, "other")],
)  # fmt: skip
def test_deferred_reasons(reason, kind):
    assert deferred_reason(reason) == kind


@given(st.one_of(st.none(), st.text()))
def test_every_reason_has_a_kind_in_the_vocabulary(reason):
    assert error_kind(reason) in ERROR_KINDS
    assert deferred_reason(reason) in DEFERRED_REASONS
