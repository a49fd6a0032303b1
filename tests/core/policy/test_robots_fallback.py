"""robots.txt while it is unreachable: disallow all, retried on a schedule, and after 24 h of
failures the last good copy for as long as it is at most 30 days old. Pure, explicit ``now``."""

from __future__ import annotations

import pytest

from beamcrawl.core.net.fetcher import store_robots_answer
from beamcrawl.core.policy.robots import (
    FALLBACK_AFTER,
    FALLBACK_MAX_AGE,
    RobotsRules,
    cached_rules,
    retry_unreachable_at,
    rules_in_force,
)
from beamcrawl.schemas.records import HostRecord

HOUR = 3600.0
DAY = 24 * HOUR
T0 = 1_800_000_000.0  # the last good fetch
GOOD = RobotsRules.parse("User-agent: *\nDisallow: /private/\n", "beamcrawl")
DOWN = RobotsRules.from_fetch(503, b"", "beamcrawl")


def in_force(now: float, failing_since: float, good: RobotsRules | None = GOOD, good_at: float = T0) -> RobotsRules:
    return rules_in_force(DOWN, good, last_good_at=good_at, failing_since=failing_since, now=now)


def test_a_good_answer_is_always_what_is_in_force():
    assert rules_in_force(GOOD, None, last_good_at=0, failing_since=0, now=T0) is GOOD
    four_oh_four = RobotsRules.from_fetch(404, b"", "beamcrawl")
    assert rules_in_force(four_oh_four, GOOD, last_good_at=T0, failing_since=0, now=T0).kind == "allow_all"


@pytest.mark.parametrize("failing_for", [0.0, 1.0, HOUR, 23 * HOUR, FALLBACK_AFTER - 1])
def test_unreachable_for_less_than_24h_disallows_everything(failing_for):
    failing_since = T0 + HOUR
    rules = in_force(failing_since + failing_for, failing_since)
    assert rules.disallow_all
    assert not rules.allowed("http://a.com/public") and rules.allowed("http://a.com/robots.txt")


@pytest.mark.parametrize("failing_for", [FALLBACK_AFTER, FALLBACK_AFTER + 1, 10 * DAY])
def test_after_24h_of_failures_the_last_good_copy_is_used(failing_for):
    failing_since = T0 + HOUR
    rules = in_force(failing_since + failing_for, failing_since)
    assert rules is GOOD
    assert rules.allowed("http://a.com/public") and not rules.allowed("http://a.com/private/x")


def test_the_fallback_expires_when_the_copy_is_30_days_old():
    failing_since = T0 + HOUR
    assert in_force(T0 + FALLBACK_MAX_AGE, failing_since) is GOOD
    assert in_force(T0 + FALLBACK_MAX_AGE + 1, failing_since).disallow_all
    assert in_force(T0 + 90 * DAY, failing_since).disallow_all


def test_a_copy_already_too_old_when_failures_begin_is_never_used():
    # Host not visited for two months, then its robots.txt fails for a day and more.
    failing_since = T0 + 60 * DAY
    assert in_force(failing_since + 2 * DAY, failing_since).disallow_all


def test_no_good_copy_means_disallow_all_however_long_it_fails():
    assert in_force(T0 + 5 * DAY, T0, good=None).disallow_all


@pytest.mark.parametrize("status", [None, 429, 500, 503, 599])
def test_429_5xx_and_no_answer_are_unreachable(status):
    assert RobotsRules.from_fetch(status, b"User-agent: *\nAllow: /\n", "beamcrawl").disallow_all


def test_retry_schedule_doubles_from_5_minutes_to_hourly():
    t = T0
    failing_since = T0
    waits = []
    for _ in range(8):
        nxt = retry_unreachable_at(t, failing_since)
        waits.append(nxt - t)
        t = nxt
    assert waits == [300.0, 300.0, 600.0, 1200.0, 2400.0, 3600.0, 3600.0, 3600.0]


def test_host_record_keeps_the_last_good_copy_apart_through_a_timeline():
    record = HostRecord("a.com")
    store_robots_answer(record, GOOD, 200, T0)
    assert record.robots_good is None and record.robots_failing_since == 0  # not stored twice

    # robots.txt goes down an hour later and stays down; retried hourly.
    t = T0 + HOUR
    store_robots_answer(record, DOWN, 503, t)
    assert record.robots_good == GOOD.to_dict() and record.robots_good_at == T0
    assert record.robots_failing_since == t and record.robots["kind"] == "disallow_all"

    def rules_at(now: float) -> RobotsRules:
        found = cached_rules(
            record.robots,
            record.robots_good,
            good_at=record.robots_good_at,
            failing_since=record.robots_failing_since,
            token="beamcrawl",
            now=now,
        )
        assert found is not None
        return found

    for hour in range(2, 25):
        store_robots_answer(record, DOWN, None, T0 + hour * HOUR)
    assert record.robots_failing_since == T0 + HOUR  # one run, not restarted by each failure
    assert rules_at(T0 + 24 * HOUR).disallow_all  # 23 h of failures
    assert rules_at(T0 + 25 * HOUR) == GOOD  # 24 h of failures: the good copy stands in
    assert rules_at(T0 + 30 * DAY).kind == "parsed"
    assert rules_at(T0 + 30 * DAY + 1).disallow_all  # the copy is too old now

    # It comes back: the new answer is the good copy and the run is over.
    back = RobotsRules.parse("User-agent: *\nDisallow: /\n", "beamcrawl")
    store_robots_answer(record, back, 200, T0 + 2 * DAY)
    assert record.robots_good is None and record.robots_failing_since == 0
    assert rules_at(T0 + 2 * DAY) == back


def test_failing_from_the_very_first_fetch_has_no_copy_to_fall_back_to():
    record = HostRecord("a.com")
    store_robots_answer(record, DOWN, 503, T0)
    store_robots_answer(record, DOWN, 503, T0 + 2 * DAY)
    assert record.robots_failing_since == T0 and record.robots_good is None
    found = cached_rules(
        record.robots,
        record.robots_good,
        good_at=record.robots_good_at,
        failing_since=record.robots_failing_since,
        token="beamcrawl",
        now=T0 + 3 * DAY,
    )
    assert found is not None and found.disallow_all


def test_a_cached_file_is_read_for_the_crawls_own_token():
    text = "User-agent: beamcrawl\nDisallow: /\n\nUser-agent: otherbot\nDisallow: /only-otherbot/\n"
    stored = RobotsRules.parse(text, "beamcrawl").to_dict()
    as_other = RobotsRules.from_dict(stored, "otherbot")
    assert as_other.token == "otherbot"
    assert as_other.allowed("http://a.com/x") and not as_other.allowed("http://a.com/only-otherbot/1")
    assert not RobotsRules.from_dict(stored).allowed("http://a.com/x")
