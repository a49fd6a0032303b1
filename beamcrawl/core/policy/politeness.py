"""How long to wait before the next request to a host: pure functions, no clock, no I/O.

The rule (docs/ARCHITECTURE.md §3): delay = max(floor, crawl-delay capped at the ceiling, factor × last
response time), kept within [floor, ceiling]; an operator's minimum delay wins over the
ceiling. A 429 or 503 at least doubles the delay and honours Retry-After; a run of server
errors or connection failures pushes the host's next allowed time back exponentially. The
gap is counted from the end of the previous response on the host, so a slow response or a
late request never lets the next one reach the server early.
"""

from __future__ import annotations

import email.utils
from dataclasses import dataclass

from beamcrawl.core.runtime.config import CrawlConfig

RETRY_AFTER_CAP = 24 * 3600.0  # honour Retry-After up to a day; beyond that it is a pause
BACKOFF_AFTER_ERRORS = 3
BACKOFF_CAP = 3600.0
# We see a response end when its last byte arrives; the server books it a moment later.
# A few milliseconds of margin keep the gap the server measures at or above the delay.
SAFETY_MARGIN = 0.02


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None
    for a value that is neither; never raises, whatever the header's bytes.

    delay-seconds are ASCII digits (RFC 9110 §10.2.3): ``str.isdigit`` also takes latin-1's
    superscript digits (the byte B2 is ``²``), which ``float`` refuses, and a date's zone
    may be millions of hours off, which overflows; either error escaped the fetch loop's
    booking of the response, and the host's other URLs were given back as an internal error.
    """
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), RETRY_AFTER_CAP)
    try:
        when = email.utils.parsedate_to_datetime(value)
        at = when.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None
    return max(0.0, min(at - now, RETRY_AFTER_CAP))


def base_delay(
    cfg: CrawlConfig,
    crawl_delay: float | None,
    response_time: float,
    policy_min_delay: float | None = None,
) -> float:
    """The steady-state delay for a host from its robots.txt and its speed."""
    delay = max(cfg.min_delay, min(crawl_delay or 0.0, cfg.max_delay))
    delay = max(delay, min(cfg.response_time_factor * response_time, cfg.max_delay))
    if policy_min_delay is not None:
        delay = max(delay, policy_min_delay)  # the operator's word beats the ceiling
    return delay


@dataclass(frozen=True)
class DelayDecision:
    delay: float
    not_before: float  # epoch seconds; 0 = no extra hold
    consecutive_errors: int


def after_response(
    cfg: CrawlConfig,
    *,
    current_delay: float,
    steady_delay: float,
    status: int | None,
    retry_after: str | None,
    end: float,
    consecutive_errors: int,
) -> DelayDecision:
    """Updates a host's delay after one response (status None = connection failure).

    Args:
        current_delay: the delay in force before this response.
        steady_delay: :func:`base_delay` for this host now.
        status: the HTTP status, or None when no response came.
        retry_after: the Retry-After header, if any.
        end: epoch seconds when the response ended.
        consecutive_errors: server errors or failures in a row before this response.
    """
    if status in (429, 503):
        delay = min(max(steady_delay, 2 * current_delay), max(cfg.max_delay, steady_delay))
        wait = parse_retry_after(retry_after, end)
        not_before = end + wait if wait is not None else 0.0
        return DelayDecision(delay, not_before, consecutive_errors + 1)
    # A status code outside 100-599 is invalid: a client SHOULD process it as a 5xx (RFC
    # 9110 §15). 600 and up fall in with the 5xx below; ``HTTP/1.1 099`` too.
    if status is None or status >= 500 or status < 100:
        errors = consecutive_errors + 1
        not_before = 0.0
        if errors >= BACKOFF_AFTER_ERRORS:
            hold = min(steady_delay * 2 ** (errors - BACKOFF_AFTER_ERRORS + 1), BACKOFF_CAP)
            not_before = end + hold
        return DelayDecision(max(steady_delay, current_delay), not_before, errors)
    # A good answer: recover towards the steady delay, halving any slow-down per response.
    delay = max(steady_delay, current_delay / 2) if current_delay > steady_delay else steady_delay
    return DelayDecision(delay, 0.0, 0)


def redirect_hold(status: int | None, retry_after: str | None, end: float) -> float:
    """Earliest epoch second at which a redirect answered at ``end`` may be followed: a
    Retry-After sent with a 3xx is the least time the client is asked to wait before issuing
    the redirected request (RFC 9110 §10.2.3); 0 when there is nothing to wait for."""
    if status is None or not 300 <= status < 400:
        return 0.0
    wait = parse_retry_after(retry_after, end)
    return end + wait if wait else 0.0


def next_allowed(last_fetch_end: float, delay: float, not_before: float) -> float:
    """Earliest epoch second at which the host may get its next request."""
    return max(last_fetch_end + delay + SAFETY_MARGIN, not_before)
