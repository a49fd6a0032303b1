"""Freshness: importance, change-rate estimates, revisit priority, due times, and how status
codes steer the schedule after a fetch."""

from __future__ import annotations

import dataclasses
import email.utils
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy import change_rate as f
from beamcrawl.core.policy.change_rate import DAY, HOUR, FetchOutcome, RevisitState, SchedulePolicy

NOW = 1_700_000_000.0
POLICY = SchedulePolicy()

rates = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
times = st.floats(min_value=0.0, max_value=400 * DAY, allow_nan=False)
weights = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)


# --- importance ---------------------------------------------------------------------------


def test_importance_orders_sources_and_depths():
    assert f.importance(0, "seed", 0) == 1.0
    assert f.importance(0, "seed", 0) >= f.importance(0, "feed", 0) >= f.importance(0, "sitemap", 0)
    # Without in-links, a link's importance is the old breadth-first priority (0.5 ** depth).
    for depth in range(1, 8):
        assert f.importance(0, "link", depth) == pytest.approx(0.5**depth)
    assert f.importance(0, "link", 30) == f.MIN_IMPORTANCE
    assert f.importance(0, "mystery", 0) == f.UNKNOWN_SOURCE_WEIGHT


def test_inlinks_from_many_hosts_make_a_deep_page_important():
    assert f.importance(f.INLINK_SATURATION, "link", 12) == pytest.approx(1.0)
    assert f.importance(50, "link", 6) > f.importance(1, "link", 6) > f.importance(0, "link", 6)


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(sorted(f.SOURCE_WEIGHT)), st.integers(0, 40))
def test_importance_bounded_and_monotone_in_inlinks(a, b, source, depth):
    lo, hi = sorted((a, b))
    assert f.MIN_IMPORTANCE <= f.importance(lo, source, depth) <= f.importance(hi, source, depth) <= 1.0
    assert f.importance(lo, source, depth + 1) <= f.importance(lo, source, depth)


def test_submit_priority_levels():
    assert f.submit_priority("high") > 1.0 >= f.submit_priority("normal") > f.submit_priority("low") > 0
    with pytest.raises(ValueError, match="high, normal or low"):
        f.submit_priority("urgent")


# --- priority, due time, freshness --------------------------------------------------------


@given(weights, weights, rates, times, times, st.floats(min_value=1.0, max_value=100 * DAY))
def test_revisit_priority_monotone_in_importance_and_time(i1, i2, lam, t1, t2, horizon):
    lo_i, hi_i = sorted((i1, i2))
    lo_t, hi_t = sorted((t1, t2))
    for p in (lambda i, t: f.revisit_priority(i, lam, t, horizon), lambda i, t: f.change_priority(i, lam, t)):
        assert 0.0 <= p(lo_i, lo_t) <= p(hi_i, lo_t)
        assert p(lo_i, lo_t) <= p(lo_i, hi_t) * (1 + 1e-12) + 1e-300
        assert p(lo_i, hi_t) <= lo_i


def test_revisit_priority_values():
    assert f.change_priority(0.8, 1 / DAY, DAY) == pytest.approx(0.8 * (1 - math.exp(-1)))
    # The index: importance x (1 - (1 + x) e^-x) / (lam x horizon), x = lam t.
    assert f.revisit_priority(0.8, 1 / DAY, DAY, horizon=2 * DAY) == pytest.approx(0.8 * (1 - 2 * math.exp(-1)) / 2)
    assert f.revisit_priority(0.8, 1 / DAY, -5.0) == 0.0
    assert f.revisit_priority(0.8, 0.0, DAY) == 0.0
    # Small lam t: about lam t^2 / 2 horizon, computed without cancellation.
    assert f.revisit_priority(1.0, 1e-12, DAY) == pytest.approx(1e-12 * DAY / 2, rel=1e-3)
    # Capped at the importance: a revisit never outranks a new page as important.
    assert f.revisit_priority(0.5, 1 / (365 * DAY), 3 * 365 * DAY) == 0.5


def test_fast_changing_pages_rank_below_ones_a_fetch_keeps_fresh():
    """A page changing every minute is "surely changed" after an hour, but a fetch keeps it
    fresh for a minute; a daily page, a day. change_priority ranks them the wrong way."""
    assert f.change_priority(1.0, 1 / 60, HOUR) > f.change_priority(1.0, 1 / DAY, HOUR * 20)
    assert f.revisit_priority(1.0, 1 / 60, HOUR) < f.revisit_priority(1.0, 1 / DAY, HOUR * 20)


@given(
    st.floats(min_value=0, max_value=2e9),
    st.one_of(st.just(0.0), st.floats(min_value=1e-12, max_value=10.0)),
    st.floats(min_value=0, max_value=10 * DAY),
    st.floats(min_value=0, max_value=400 * DAY),
    st.floats(min_value=0.01, max_value=0.99),
)
def test_next_due_always_within_bounds(now, lam, a, b, target):
    lo, hi = sorted((a, b))
    due = f.next_due(now, lam, lo, hi, target)
    assert now + lo - 1e-6 <= due <= now + hi + 1e-6


def test_next_due_values_and_errors():
    assert f.next_due(NOW, 1 / DAY, HOUR, 60 * DAY) == pytest.approx(NOW + math.log(2) * DAY)
    assert f.next_due(NOW, 0.0, HOUR, 60 * DAY) == NOW + 60 * DAY  # never seen to change
    assert f.next_due(NOW, 1.0, HOUR, 60 * DAY) == NOW + HOUR  # faster than we may visit
    with pytest.raises(ValueError):
        f.next_due(NOW, 1.0, HOUR, 60 * DAY, target=1.0)
    with pytest.raises(ValueError):
        f.next_due(NOW, 1.0, 2 * HOUR, HOUR)


def test_expected_freshness_matches_the_design_notes():
    """Daily visits keep a weekly-changing page 93% fresh and an hourly one 4%; for a
    daily-changing page four fetches a day instead of one buy 63% -> 88%."""
    assert f.expected_freshness(1 / (7 * DAY), DAY) == pytest.approx(0.93, abs=0.005)
    assert f.expected_freshness(1 / HOUR, DAY) == pytest.approx(0.04, abs=0.005)
    assert f.expected_freshness(1 / DAY, DAY) == pytest.approx(0.63, abs=0.005)
    assert f.expected_freshness(1 / DAY, DAY / 4) == pytest.approx(0.88, abs=0.005)
    assert f.expected_freshness(0.0, DAY) == 1.0


# --- the change-rate estimator ------------------------------------------------------------


def test_no_history_gives_the_prior():
    assert f.estimate_rate([]) == pytest.approx(f.DEFAULT_MODEL.prior_rate)
    assert f.estimate_rate([], prior_rate=1 / HOUR) == pytest.approx(1 / HOUR)


def test_one_visit_moves_the_estimate_a_bounded_factor():
    """A new page's first revisit must not send λ to 0 or infinity."""
    prior = f.DEFAULT_MODEL.prior_rate
    changed = f.estimate_rate([(HOUR, True)])
    unchanged = f.estimate_rate([(HOUR, False)])
    assert prior < changed < 100 * prior
    assert prior / 2 < unchanged < prior


def _poisson_history(lam: float, rng: random.Random, visits: int, mean_gap: float) -> list[tuple[float, bool]]:
    """Visits at irregular gaps (0.5x to 1.5x the mean) to a Poisson(lam) page."""
    out = []
    for _ in range(visits):
        gap = mean_gap * rng.uniform(0.5, 1.5)
        out.append((gap, rng.random() < -math.expm1(-lam * gap)))
    return out


@pytest.mark.parametrize("period, gap", [(HOUR, 2 * HOUR), (DAY, DAY / 2), (DAY, 2 * DAY), (7 * DAY, 3 * DAY)])
def test_estimate_recovers_the_true_rate(period, gap):
    """Irregular visits, incomplete history: the median estimate is within 2x of the truth,
    also for a page changing faster than it is visited."""
    lam = 1 / period
    rng = random.Random(7)
    estimates = sorted(f.estimate_rate(_poisson_history(lam, rng, 16, gap)) for _ in range(60))
    median = estimates[len(estimates) // 2]
    assert lam / 2 < median < lam * 2, median * period


def test_beats_the_naive_estimator_on_fast_pages():
    """Every hourly visit found a change: changes/time says 1/h; the page may change far more."""
    history = [(HOUR, True)] * 16
    assert f.estimate_rate(history) > 1.5 / HOUR


@settings(max_examples=200)
@given(st.lists(st.tuples(st.floats(min_value=-10, max_value=1e8, allow_nan=False), st.booleans()), max_size=40))
def test_estimate_bounded(history):
    m = f.DEFAULT_MODEL
    lam = f.estimate_rate(history)
    assert m.min_rate * (1 - 1e-9) <= lam <= m.max_rate * (1 + 1e-9)


def _mode_by_bisection(history: list[tuple[float, int]], model: f.ChangeModel = f.DEFAULT_MODEL) -> float:
    """The posterior mode found the slow, sure way: 200 bisections of L' on the bounds."""
    mu = math.log(model.prior_rate)
    inv_var = 1 / model.prior_sigma**2
    changed, exposure, dated, weight = [], 0.0, 0.0, 1.0
    for interval, kind in reversed(history[-model.history :]):
        if kind == f.DATED:
            dated += weight
            exposure += weight * interval
        elif kind:
            changed.append((weight, interval))
        else:
            exposure += weight * interval
        weight *= model.forget

    def slope(u: float) -> float:
        rate = math.exp(u)
        return dated - exposure * rate - (u - mu) * inv_var + sum(w * f._h(t * rate) for w, t in changed)

    lo, hi = math.log(model.min_rate), math.log(model.max_rate)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
    return math.exp(lo)


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.floats(min_value=1, max_value=1e7), st.sampled_from([0, 1, f.DATED])), min_size=1, max_size=16
    )
)
def test_the_estimate_is_the_posterior_mode(history):
    """Newton's steps are only a shortcut: the answer is the mode a plain bisection finds.
    (Newton alone once bounced between its bracket's ends and stopped at 3.9e-5 for a mode
    of 2.3e-4, so that two changes seen an hour apart gave a lower rate than one.)"""
    assert f.estimate_rate(history) == pytest.approx(_mode_by_bisection(history), rel=1e-6)


def test_two_changes_an_hour_apart_find_the_mode():
    history = [(3520.0, True), (3618.0, True)]
    assert f.estimate_rate(history) == pytest.approx(_mode_by_bisection(history), rel=1e-6)
    assert f.estimate_rate(history) >= f.estimate_rate([(3520.0, False), (3618.0, True)])


@given(st.lists(st.tuples(st.floats(min_value=1, max_value=1e7), st.booleans()), min_size=1, max_size=16), st.data())
def test_more_changes_never_lower_the_estimate(history, data):
    i = data.draw(st.integers(0, len(history) - 1))
    flipped = list(history)
    flipped[i] = (history[i][0], True)
    assert f.estimate_rate(flipped) >= f.estimate_rate(history) * (1 - 1e-6)


def test_old_evidence_fades():
    """A page that changed hourly and then went quiet is soon estimated as slow."""
    busy = [(HOUR, True)] * 16
    quiet = busy + [(DAY, False)] * 8
    assert f.estimate_rate(quiet) < f.estimate_rate(busy) / 10


def test_estimate_is_cheap():
    import time

    history = [(HOUR, True), (2 * HOUR, False)] * 8
    start = time.process_time()
    for _ in range(2000):
        f.estimate_rate(history)
    per_call = (time.process_time() - start) / 2000
    assert per_call < 500e-6  # measured ~40 µs; generous for loaded CI machines


# --- after_fetch: status codes steer the schedule ----------------------------------------


def _fresh(importance: float = 0.8) -> RevisitState:
    return (
        f.revisit_state_for(inlink_hosts=0, source="seed", depth=0)
        if importance == 1.0
        else RevisitState(importance=importance)
    )


def _ok(checksum: str, etag: str | None = '"v1"', lm: str | None = None) -> FetchOutcome:
    return FetchOutcome(200, checksum=checksum, simhash="00000000000000ff", etag=etag, last_modified=lm)


def test_first_200_stores_validators_and_schedules_by_prior():
    state, sched = f.after_fetch(_fresh(), _ok("c1", lm="Mon, 01 Jan 2024 00:00:00 GMT"), NOW)
    assert sched.action == "revisit" and sched.observed == "first" and sched.keep_copy
    assert (state.etag, state.last_modified, state.checksum) == ('"v1"', "Mon, 01 Jan 2024 00:00:00 GMT", "c1")
    assert state.visits == 1 and state.changes == 0 and state.history == [] and state.outcomes == "F"
    assert state.checked_at == state.stored_at == NOW
    assert sched.due == state.next_due == pytest.approx(NOW + math.log(2) * 7 * DAY)
    assert 0 < sched.priority <= state.importance


def test_200_changed_and_unchanged_by_checksum():
    s1, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    s2, d2 = f.after_fetch(s1, _ok("c1"), NOW + DAY)
    assert d2.observed == "unchanged" and s2.changes == 0 and s2.history == [[DAY, 0]]
    assert s2.stored_at == NOW  # the copy we hold is still the first one
    s3, d3 = f.after_fetch(s2, _ok("c2", etag='"v2"'), NOW + 2 * DAY)
    assert d3.observed == "changed" and s3.changes == 1 and s3.history[-1] == [DAY, 1]
    assert s3.checksum == "c2" and s3.etag == '"v2"' and s3.stored_at == NOW + 2 * DAY
    assert s3.outcomes == "FUC"
    assert s3.lam > s2.lam  # a change raised the estimate


def test_the_held_copys_digest_follows_the_bytes_archived():
    """The state names the capture an unchanged 200 may revisit: its fetch time and digest."""
    d1, d2 = "sha1:AAAA", "sha1:BBBB"
    s1, _ = f.after_fetch(_fresh(), FetchOutcome(200, checksum="c1", digest=d1), NOW)
    assert (s1.stored_at, s1.digest) == (NOW, d1)
    s2, d = f.after_fetch(s1, FetchOutcome(200, checksum="c1", digest=d1), NOW + DAY)
    assert d.observed == "unchanged" and (s2.stored_at, s2.digest) == (NOW, d1)  # revisit the first
    # the same content in other wire bytes (another Content-Encoding): archived whole, held now
    s3, d = f.after_fetch(s2, FetchOutcome(200, checksum="c1", digest=d2), NOW + 2 * DAY)
    assert d.observed == "unchanged" and (s3.stored_at, s3.digest) == (NOW + 2 * DAY, d2)
    s4, _ = f.after_fetch(s3, FetchOutcome(304), NOW + 3 * DAY)
    assert (s4.stored_at, s4.digest) == (NOW + 2 * DAY, d2)  # a 304 keeps the copy held
    s5, d = f.after_fetch(s4, FetchOutcome(200, checksum="c2", digest=d1), NOW + 4 * DAY)
    assert d.observed == "changed" and (s5.stored_at, s5.digest) == (NOW + 4 * DAY, d1)


def test_200_without_validators_clears_the_stored_ones():
    s1, _ = f.after_fetch(_fresh(), _ok("c1", lm="Mon, 01 Jan 2024 00:00:00 GMT"), NOW)
    s2, _ = f.after_fetch(s1, _ok("c1", etag=None), NOW + DAY)
    assert s2.etag is None and s2.last_modified is None


def test_304_is_unchanged_keeps_the_copy_and_freshens_validators():
    s1, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    s2, d2 = f.after_fetch(s1, FetchOutcome(304), NOW + DAY)
    assert d2.observed == "unchanged" and d2.action == "revisit" and d2.keep_copy
    assert s2.checksum == "c1" and s2.etag == '"v1"' and s2.stored_at == NOW
    assert s2.visits == 2 and s2.changes == 0 and s2.history == [[DAY, 0]] and s2.outcomes == "FN"
    s3, _ = f.after_fetch(s2, FetchOutcome(304, etag='"v1b"'), NOW + 2 * DAY)
    assert s3.etag == '"v1b"'


def test_304_to_an_unconditional_request_is_an_error():
    s1, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    s2, d2 = f.after_fetch(s1, FetchOutcome(304, conditional=False), NOW + DAY)
    assert d2.action == "retry" and d2.observed == "error" and s2.visits == 1


def test_near_duplicate_content_counts_as_unchanged_when_asked():
    policy = SchedulePolicy(near_bits=3)
    s1, _ = f.after_fetch(_fresh(), FetchOutcome(200, checksum="a", simhash="ff00ff00ff00ff00"), NOW, policy)
    _, d_near = f.after_fetch(s1, FetchOutcome(200, checksum="b", simhash="ff00ff00ff00ff03"), NOW + DAY, policy)
    _, d_far = f.after_fetch(s1, FetchOutcome(200, checksum="b", simhash="00ff00ff00ff00ff"), NOW + DAY, policy)
    assert (d_near.observed, d_far.observed) == ("unchanged", "changed")
    _, d_default = f.after_fetch(s1, FetchOutcome(200, checksum="b", simhash="ff00ff00ff00ff03"), NOW + DAY)
    assert d_default.observed == "changed"


def test_404_backs_off_then_drops():
    s, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    waits = []
    t = NOW
    for _ in range(POLICY.max_misses - 1):
        t += DAY
        s, d = f.after_fetch(s, FetchOutcome(404), t)
        assert d.action == "revisit" and d.observed == "gone" and not d.keep_copy
        waits.append(d.due - t)
        assert d.priority < s.importance
    assert waits == [POLICY.gone_interval * 2**i for i in range(len(waits))]
    s, d = f.after_fetch(s, FetchOutcome(404), t + DAY)
    assert d.action == "drop" and d.due is None and s.next_due is None and s.misses == POLICY.max_misses


def test_410_drops_sooner_and_a_200_resets_misses():
    s, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    s, d = f.after_fetch(s, FetchOutcome(410), NOW + DAY)
    assert s.misses == 2 and d.action == "revisit"
    back, _ = f.after_fetch(s, _ok("c1"), NOW + 2 * DAY)
    assert back.misses == 0
    s, d = f.after_fetch(s, FetchOutcome(410), NOW + 3 * DAY)
    assert d.action == "drop"


@pytest.mark.parametrize("status", [301, 308])
def test_permanent_redirect_moves_the_record(status):
    s, _ = f.after_fetch(_fresh(0.9), _ok("c1"), NOW)
    s2, d = f.after_fetch(s, FetchOutcome(status, location="https://new.example/a"), NOW + DAY)
    assert d.action == "moved" and d.observed == "moved" and not d.keep_copy
    assert d.redirect_to == s2.moved_to == "https://new.example/a"
    assert d.target_importance == 0.9
    assert d.due == NOW + DAY + POLICY.max_interval  # re-checked rarely: moves can be undone
    s3, d3 = f.after_fetch(
        s, FetchOutcome(status, location="https://new.example/a"), NOW + DAY, SchedulePolicy(recheck_moved=False)
    )
    assert d3.due is None and s3.next_due is None


@pytest.mark.parametrize("status", [302, 303, 307])
def test_temporary_redirect_queues_target_and_keeps_schedule(status):
    s, _ = f.after_fetch(_fresh(0.9), _ok("c1"), NOW)
    s2, d = f.after_fetch(s, FetchOutcome(status, location="https://ex.com/tmp"), NOW + DAY)
    assert d.action == "revisit" and d.observed == "redirect" and d.keep_copy
    assert d.redirect_to == "https://ex.com/tmp" and d.target_importance == 0.9
    assert s2.moved_to is None and s2.history == s.history  # no evidence about change


@pytest.mark.parametrize("status", [500, 502, 503, 429, None])
def test_server_errors_keep_the_copy_and_back_off(status):
    s, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    waits = []
    t = NOW
    for _ in range(POLICY.max_errors):
        t += HOUR
        s, d = f.after_fetch(s, FetchOutcome(status), t)
        assert d.action == "retry" and d.keep_copy and d.observed == "error"
        waits.append(d.due - t)
    assert s.checksum == "c1" and s.etag == '"v1"'  # the old copy stands
    assert waits == [min(POLICY.retry_cap, POLICY.retry_base * 2**i) for i in range(POLICY.max_errors)]
    # After max_errors: "dead until the next cycle": the ordinary interval.
    s, d = f.after_fetch(s, FetchOutcome(status), t + HOUR)
    assert d.action == "revisit" and d.due - (t + HOUR) >= POLICY.min_interval
    s, d = f.after_fetch(s, _ok("c1"), t + DAY)
    assert s.errors == 0


def test_retry_after_is_honoured_and_capped():
    s, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    _, d = f.after_fetch(s, FetchOutcome(429, retry_after=7200.0), NOW + HOUR)
    assert d.due == NOW + HOUR + 7200.0
    _, d = f.after_fetch(s, FetchOutcome(503, retry_after=10 * 365 * DAY), NOW + HOUR)
    assert d.due == NOW + HOUR + POLICY.max_interval


def test_history_and_outcomes_are_capped():
    s = _fresh()
    for i in range(40):
        s, _ = f.after_fetch(s, _ok(f"c{i % 3}"), NOW + i * DAY)
    assert len(s.history) == f.DEFAULT_MODEL.history
    assert len(s.outcomes) == f.MAX_OUTCOMES
    assert s.visits == 40


def test_state_round_trips_and_ignores_unknown_fields():
    s, _ = f.after_fetch(_fresh(), _ok("c1"), NOW)
    data = s.to_dict()
    assert RevisitState.from_dict(data) == s
    assert RevisitState.from_dict({**data, "added_later": 1}) == s
    assert RevisitState.from_dict(None) == RevisitState()


OUTCOMES = st.one_of(
    st.builds(FetchOutcome, st.just(200), checksum=st.sampled_from(["a", "b"]), etag=st.sampled_from([None, '"e"'])),
    st.builds(FetchOutcome, st.just(304), conditional=st.booleans()),
    st.builds(
        FetchOutcome, st.sampled_from([301, 302, 303, 307, 308]), location=st.sampled_from([None, "https://x.example/"])
    ),
    st.builds(FetchOutcome, st.sampled_from([400, 403, 404, 410, 451])),
    st.builds(FetchOutcome, st.sampled_from([429, 500, 503, None]), retry_after=st.one_of(st.none(), times)),
    st.builds(FetchOutcome, st.sampled_from([100, 204, 300, 399])),
)


@settings(max_examples=300)
@given(st.lists(st.tuples(OUTCOMES, st.floats(min_value=1.0, max_value=30 * DAY)), min_size=1, max_size=25))
def test_schedule_invariants_over_any_sequence(steps):
    s, t = RevisitState(importance=0.7), NOW
    for outcome, gap in steps:
        t += gap
        s, d = f.after_fetch(s, outcome, t)
        assert s.next_due == d.due
        assert 0.0 <= d.priority <= s.importance + 1e-12
        if d.due is None:
            assert d.action in ("drop", "moved")
            break  # dropped: never fetched again
        wait = d.due - t
        if d.action == "retry":
            assert POLICY.retry_base <= wait <= max(POLICY.retry_cap, POLICY.max_interval)
        elif d.action == "moved":
            assert wait == POLICY.max_interval
        elif d.observed == "gone":
            assert POLICY.gone_interval <= wait <= POLICY.max_interval
        else:
            assert POLICY.min_interval - 1e-6 <= wait <= POLICY.max_interval + 1e-6
        assert f.DEFAULT_MODEL.min_rate * 0.999 <= s.lam <= f.DEFAULT_MODEL.max_rate * 1.001
        assert len(s.history) <= f.DEFAULT_MODEL.history


def test_redirect_hops_are_limited():
    assert f.redirect_allowed(0) and f.redirect_allowed(5)
    assert not f.redirect_allowed(6)
    assert not f.redirect_allowed(2, max_hops=1)


# --- the budget: priority buys freshness --------------------------------------------------


def _simulate(rank: str, seed: int, pages: int = 120, budget: int = 5, days: int = 14) -> float:
    """Importance-weighted freshness of a simulated crawl that may fetch ``budget`` pages an
    hour, with change rates estimated by after_fetch (not known), measured after a week."""
    rng = random.Random(seed)
    lam = [math.exp(rng.uniform(math.log(1 / (60 * DAY)), math.log(2 / HOUR))) for _ in range(pages)]
    imp = [rng.uniform(0.05, 1.0) for _ in range(pages)]
    next_change = [rng.expovariate(x) for x in lam]
    version, held = [0] * pages, [-1] * pages
    states = [RevisitState(importance=i) for i in imp]
    total, samples, turn = 0.0, 0, 0

    def score(i: int, now: float) -> float:
        s = states[i]
        if s.checked_at is None:
            return s.importance
        if rank == "change-probability":
            return f.change_priority(s.importance, s.lam, now - s.checked_at)
        return f.priority_now(s, now)

    for hour in range(days * 24):
        now = hour * HOUR
        for i in range(pages):
            while next_change[i] <= now:
                version[i] += 1
                next_change[i] += rng.expovariate(lam[i])
        if rank == "round-robin":
            chosen = [(turn + k) % pages for k in range(budget)]
            turn = (turn + budget) % pages
        else:
            chosen = sorted(range(pages), key=lambda i: -score(i, now))[:budget]
        for i in chosen:
            states[i], _ = f.after_fetch(states[i], FetchOutcome(200, checksum=str(version[i])), now)
            held[i] = version[i]
        if hour >= 7 * 24:
            total += sum(w for w, h, v in zip(imp, held, version) if h == v) / sum(imp)
            samples += 1
    return total / samples


def test_priority_spends_the_budget_where_it_buys_freshness():
    """Ranking by revisit_priority beats visiting in turn; ranking by importance x change
    probability loses to both, chasing pages that change faster than any budget can follow
    (measured, seed 1: 0.61 vs 0.55 vs 0.45; see revisit_priority for other budgets)."""
    for seed in (1, 2):
        ours = _simulate("index", seed)
        turns = _simulate("round-robin", seed)
        plain = _simulate("change-probability", seed)
        assert ours > turns * 1.02 and turns > plain, (ours, turns, plain)


def test_last_modified_dates_the_content_and_its_changes():
    from beamcrawl.core.net.conditional import parse_http_date

    policy = SchedulePolicy(min_interval=1, max_interval=10 * DAY)
    now = parse_http_date("Tue, 01 Sep 2026 00:00:00 GMT")
    old = FetchOutcome(status=200, checksum="a", last_modified="Sat, 01 Aug 2026 00:00:00 GMT")
    fresh = FetchOutcome(status=200, checksum="a", last_modified="Mon, 31 Aug 2026 23:59:00 GMT")
    blind = FetchOutcome(status=200, checksum="a")
    aged, _ = f.after_fetch(RevisitState(), old, now, policy)
    young, _ = f.after_fetch(RevisitState(), fresh, now, policy)
    unknown, _ = f.after_fetch(RevisitState(), blind, now, policy)
    # A month unchanged (counted back as far as the longest interval, 10 days) says the page
    # is slow; a minute says little; none says nothing.
    assert aged.history == [[10 * DAY, 0]] and unknown.history == [] and young.history == [[60.0, 0]]
    assert aged.lam < young.lam <= unknown.lam
    # A change dated by Last-Modified: one then, none since (its age is the evidence).
    later = now + 3600
    changed = FetchOutcome(status=200, checksum="b", last_modified="Tue, 01 Sep 2026 00:30:00 GMT")
    after, schedule = f.after_fetch(unknown, changed, later, policy)
    assert schedule.observed == "changed" and after.history[-1] == [1800.0, f.DATED]
    # A Last-Modified in the future is no evidence.
    future = FetchOutcome(status=200, checksum="a", last_modified="Wed, 02 Sep 2026 00:00:00 GMT")
    assert f.after_fetch(RevisitState(), future, now, policy)[0].history == []


def test_dated_changes_follow_a_page_that_changes_many_times_between_visits():
    """A page changing every 2.5 s on average, visited every 20 s: "changed in the interval"
    cannot tell one change from eight and underestimates; the ages Last-Modified gives much
    less (they are rounded up to the second, so a little)."""
    rng = random.Random(2)
    lam, policy = (
        0.4,
        SchedulePolicy(min_interval=1, max_interval=600, model=f.ChangeModel(prior_rate=1 / 60, max_rate=1.0)),
    )
    dated, blind = RevisitState(), RevisitState()
    t, last_change, version = 1_000_000.0, 1_000_000.0, 0
    for _ in range(16):
        t += 20.0
        while True:  # the page's changes up to t
            gap = rng.expovariate(lam)
            if last_change + gap > t:
                break
            last_change += gap
            version += 1
        stamp = email.utils.formatdate(math.floor(last_change), usegmt=True)
        dated, _ = f.after_fetch(dated, FetchOutcome(status=200, checksum=str(version), last_modified=stamp), t, policy)
        blind, _ = f.after_fetch(blind, FetchOutcome(status=200, checksum=str(version)), t, policy)
    assert blind.lam < 0.2 < 0.3 < dated.lam < 0.6


_states = st.builds(
    RevisitState,
    importance=st.floats(0, 1),
    status=st.none() | st.integers(100, 599),
    etag=st.none() | st.text(max_size=5),
    visits=st.integers(0, 50),
    history=st.lists(st.tuples(st.floats(0, 1e7), st.integers(0, 2)).map(list), max_size=6),
    outcomes=st.text(alphabet="acuegm", max_size=16),
    next_due=st.none() | st.floats(0, 2e9),
)


@settings(max_examples=200, deadline=None)
@given(state=_states)
def test_a_state_copied_for_a_fetch_is_replace_with_its_own_history(state: RevisitState) -> None:
    copy = state.copied()
    assert copy == dataclasses.replace(state, history=[list(h) for h in state.history])
    assert type(copy) is RevisitState and copy is not state
    assert all(a is not b for a, b in zip(copy.history, state.history)) and copy.history is not state.history
    copy.history.append([1.0, 1])
    if copy.history[:-1]:
        copy.history[0][1] = 9
    assert all(h[1] != 9 for h in state.history)  # the original's lists are untouched


@settings(max_examples=200, deadline=None)
@given(state=_states)
def test_a_states_dict_has_every_field_in_order_and_reads_back(state: RevisitState) -> None:
    d = state.to_dict()
    assert list(d) == [fld.name for fld in dataclasses.fields(RevisitState)]
    assert d == {fld.name: getattr(state, fld.name) for fld in dataclasses.fields(RevisitState)}
    assert RevisitState.from_dict({**d, "from_a_newer_version": 1}) == state
