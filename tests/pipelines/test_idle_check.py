"""``pipelines/idle.check_idle`` on a real embedded store: whether a round would have work,
when the next URL falls due and why the rest waits (no runner, no server)."""

from __future__ import annotations

import io
import time

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.idle import check_idle, wait_until_due
from beamcrawl.schemas.records import FrontierEntry, HostPolicy, HostRecord
from beamcrawl.stores.base import Mutation, open_store

NOW = 1_800_000_000.0


def _store(tmp_path):
    return open_store(str(tmp_path / "store"))


def _queue(store, *entries: FrontierEntry) -> None:
    store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in entries])


def _entry(n: int, due: float, host: str = "a.example", **kw) -> FrontierEntry:
    return FrontierEntry(url=f"http://{host}/{n}", fp=1000 + n, host=host, due_ms=int(due * 1000), **kw)


def _cfg(tmp_path) -> CrawlConfig:
    return CrawlConfig(out=str(tmp_path / "out"), store=str(tmp_path / "store"), round_window=10.0)


def test_a_due_url_on_a_free_host_means_a_round(tmp_path):
    with _store(tmp_path) as store:
        _queue(store, _entry(1, NOW - 5), _entry(2, NOW + 3600, deferrals=1))
        assert check_idle(store, _cfg(tmp_path), NOW) is None


def test_nothing_due_names_the_next_due_time_and_the_reasons(tmp_path):
    with _store(tmp_path) as store:
        _queue(
            store,
            _entry(1, NOW + 90, deferrals=2),
            _entry(2, NOW + 3600, deferrals=1),
            _entry(3, NOW + 7200, source="revisit", revisit={"visits": 1}),
            _entry(4, NOW + 600, reason="retry: 503"),
        )
        idle = check_idle(store, _cfg(tmp_path), NOW)
    assert idle is not None and idle.wake_at == NOW + 90
    line = idle.message()
    assert "next URL falls due at " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + 90)) + " (in 1m30s)" in line
    assert "2 URLs deferred by domain budgets or host caps" in line
    assert "1 revisits scheduled" in line and "1 URLs backing off after errors" in line


def test_due_urls_whose_hosts_are_all_held_wait_for_the_earliest_release(tmp_path):
    with _store(tmp_path) as store:
        _queue(store, _entry(1, NOW - 1, host="paused.example"), _entry(2, NOW - 1, host="backoff.example"),
               _entry(3, NOW - 1, host="blocked.example"), _entry(4, NOW + 86400))  # fmt: skip
        store.mutate("policies", [
            Mutation.set(b"paused.example", HostPolicy("paused.example", pause_until=NOW + 300).to_cells()),
            Mutation.set(b"blocked.example", HostPolicy("blocked.example", blocked=True).to_cells()),
        ])  # fmt: skip
        record = HostRecord(host="backoff.example", delay=1.0, not_before=NOW + 100)
        store.mutate("hosts", [Mutation.set(b"backoff.example", record.to_cells())])
        idle = check_idle(store, _cfg(tmp_path), NOW)
        assert idle is not None
        # Held while its next request lies past the round window (10 s): free from NOW + 90.
        assert idle.wake_at is not None and abs(idle.wake_at - (NOW + 90)) < 0.5
        line = idle.message()
        assert "1 due URLs on hosts paused by policy" in line and "1 due URLs on hosts blocked by policy" in line
        assert "1 due URLs on hosts held off by Retry-After or back-off" in line
        # Once the hold lifts, a round has work.
        assert check_idle(store, _cfg(tmp_path), NOW + 95) is None


def test_only_blocked_hosts_or_an_empty_frontier_end_the_crawl(tmp_path):
    with _store(tmp_path) as store:
        out = io.StringIO()
        assert wait_until_due(store, _cfg(tmp_path), out) is False
        assert "the frontier is empty" in out.getvalue()
        _queue(store, _entry(1, time.time() - 1, host="blocked.example"))
        store.mutate(
            "policies", [Mutation.set(b"blocked.example", HostPolicy("blocked.example", blocked=True).to_cells())]
        )
        out = io.StringIO()
        assert wait_until_due(store, _cfg(tmp_path), out, label="round 4: ") is False
        assert out.getvalue().startswith(
            "round 4: nothing due, and nothing will fall due by itself; waiting: 1 due URLs on hosts blocked"
        )


def test_an_unreadable_due_row_is_left_to_the_round(tmp_path):
    """The round counts a bad row (select/bad_rows); the idle check must not hide it."""
    with _store(tmp_path) as store:
        bad_key = _entry(1, NOW - 1).key
        store.mutate("frontier", [Mutation.set(bad_key, {"r:json": b"{not json"})])
        _queue(store, _entry(2, NOW + 60))
        assert check_idle(store, _cfg(tmp_path), NOW) is None


def test_due_urls_on_hosts_that_refused_us_wait_for_their_recheck(tmp_path):
    """#29: a host held by a refusal is idle work (no empty round), due again at its recheck:
    the end of a status back-off, or its robots.txt's next fetch for a robots.txt refusal."""
    from beamcrawl.core.policy import refusals

    me = refusals.Identity("beamcrawl")
    status = HostRecord(host="s.example", robots_fetched_at=NOW - 60,
                        refusals=refusals.note([], "status", me, {"status": 403}, NOW - 3600))  # fmt: skip
    token = HostRecord(host="t.example", robots_fetched_at=NOW - 60,
                       refusals=refusals.note([], "token", me, {"lines": []}, NOW - 60))  # fmt: skip
    with _store(tmp_path) as store:
        _queue(store, _entry(1, NOW - 1, host="s.example"), _entry(2, NOW - 1, host="t.example"))
        store.mutate("hosts", [Mutation.set(r.host.encode(), r.to_cells()) for r in (status, token)])
        cfg = _cfg(tmp_path)
        idle = check_idle(store, cfg, NOW)
        assert idle is not None and "2 due URLs on hosts that refused the crawler" in idle.message()
        assert idle.wake_at == min(NOW - 3600 + 86400, NOW - 60 + cfg.robots_max_age)
        assert check_idle(store, cfg, NOW + cfg.robots_max_age) is None  # t.example's robots.txt is due


def test_the_wait_calls_meanwhile_between_its_slices(tmp_path):
    """The crawl loop's charts catch up while it waits (``meanwhile``), before the round runs."""
    with _store(tmp_path) as store:
        _queue(store, _entry(1, time.time() + 0.3))
        calls: list[float] = []
        assert wait_until_due(store, _cfg(tmp_path), io.StringIO(), meanwhile=lambda: calls.append(time.time()))
        assert len(calls) >= 1
        assert check_idle(store, _cfg(tmp_path), time.time()) is None
