"""Politeness fenced across failures (issue #28): a host's clock is in the store before each
request, and a fetch loop whose round attempt has ended, lost the crawl's lease or been
superseded sends nothing more after FENCE_INTERVAL.

The fetch loops here are the real ones (core/net/fetcher.py) against a raw loopback server
that logs when each request arrived, on both stores; the pure parts (the fence's verdict, the
clock's merge) are checked with generated rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.fetcher import FetchRunner
from beamcrawl.core.policy import politeness
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.lease import RoundLease
from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import FrontierEntry, HostPolicy, HostRecord
from beamcrawl.state import fence as fence_module
from beamcrawl.state.fence import (
    ATTEMPT_CELL,
    ATTEMPT_KEY,
    CLAIM_CELL,
    FENCE_INTERVAL,
    LEASE_CELL,
    LEASE_KEY,
    StoreFence,
    attempt_token,
    claim_key,
    end_attempt,
    fence_verdict,
    start_attempt,
)
from beamcrawl.state.host_clock import CLOCK_AHEAD, CLOCK_CELL, clock_cells, merge_clock, read_host
from beamcrawl.stores.base import open_store
from beamcrawl.stores.interface import Mutation
from beamcrawl.transforms.assign_slots import plan_host
from loopback import RawLoopbackServer, read_head  # tests/loopback.py


class LoggingWeb(RawLoopbackServer):
    """Raw HTTP/1.1 on loopback: an allow-all robots.txt and a small page at every other
    path; logs ``(path, arrival)`` of every request."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, float]] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader, writer)
        if head is None:
            return
        path = head.split(b" ", 2)[1].decode("latin-1")
        self.log.append((path, time.time()))
        body = b"<html><body>page</body></html>"
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()


def config(store: str, min_delay: float) -> CrawlConfig:
    return CrawlConfig(
        out="/tmp/unused",
        store=store,
        min_delay=min_delay,
        round_window=60,
        allow_private_networks=True,
        resolve=(("*.test", "127.0.0.1"),),
        total_timeout=5.0,
    )


def entries(slot: str, n: int) -> list[FrontierEntry]:
    return [FrontierEntry(url=f"http://{slot}/p{i}", fp=i + 1, host=slot, due_ms=0) for i in range(n)]


def known_robots(slot: str) -> HostRecord:
    record = HostRecord(host=slot)
    record.robots = RobotsRules.parse("User-agent: *\nAllow: /\n", "beamcrawl").to_dict()
    record.robots_fetched_at = time.time()
    record.robots_scheme = "http"
    return record


def wait_for(predicate, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def results_of(runner: FetchRunner) -> list:
    return [v for k, v in runner.drain(wait=True) if k == "result"]


# --- the fence's verdict, from generated rows ---------------------------------------------


def _rows(attempt: str | None, owner: str | None, lease_owner: str | None, expires: float, claims: dict[int, str]):
    rows: dict[bytes, dict[str, bytes]] = {}
    if attempt is not None:
        rows[ATTEMPT_KEY] = {ATTEMPT_CELL: json.dumps({"token": attempt, "owner": owner}).encode()}
    if lease_owner is not None:
        rows[LEASE_KEY] = {LEASE_CELL: json.dumps({"owner": lease_owner, "expires": expires}).encode()}
    for shard, claim in claims.items():
        rows[claim_key(shard)] = {CLAIM_CELL: json.dumps({"claim": claim}).encode()}
    return rows


names = st.sampled_from(["a", "b", "c"])


@settings(max_examples=200, deadline=None)
@given(
    attempt=st.none() | names,
    owner=names,
    lease_owner=st.none() | names,
    expired=st.booleans(),
    mine=st.dictionaries(st.integers(0, 5), names, max_size=4),
    held=st.dictionaries(st.integers(0, 5), names, max_size=4),
)
def test_a_loop_goes_on_only_while_its_attempt_lease_and_claims_are_all_current(
    attempt, owner, lease_owner, expired, mine, held
):
    now = 1000.0
    rows = _rows(attempt, owner, lease_owner, now - 1 if expired else now + 60, held)
    stop, lost = fence_verdict(rows, "a", mine, now)
    current = attempt == "a" and lease_owner == owner and not expired
    assert (stop is None) == current
    assert set(lost) == {s for s, c in mine.items() if held.get(s) != c}
    # A round run outside the crawl loop (no token) is fenced by its claims alone.
    assert fence_verdict(rows, None, mine, now)[0] is None


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([ATTEMPT_KEY, LEASE_KEY, claim_key(0)]),
        st.dictionaries(st.sampled_from([ATTEMPT_CELL, LEASE_CELL, CLAIM_CELL]), st.binary(max_size=40)),
        max_size=3,
    )
)
def test_rows_that_do_not_decode_fence_the_loop_and_never_raise(rows):
    stop, lost = fence_verdict(rows, "tok", {0: "c"}, 1000.0)
    assert stop is not None or rows.get(ATTEMPT_KEY, {}).get(ATTEMPT_CELL) is not None
    assert lost == {} or lost == {0: "fetch shard 0 was claimed by another attempt"}


# --- the clock written ahead, merged on the next read --------------------------------------

times = st.floats(0, 2e9, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(end=times, not_before=times, delay=st.floats(0, 3600), at=times, clock_delay=st.floats(0, 3600),
       clock_nb=times)  # fmt: skip
def test_a_merged_record_never_allows_a_request_before_the_clocks_delay_from_the_last_sent(
    end, not_before, delay, at, clock_delay, clock_nb
):
    written = HostRecord(host="h", last_fetch_end=0.0, delay=clock_delay, not_before=clock_nb)
    cells = {"r:json": HostRecord(host="h", last_fetch_end=end, delay=delay, not_before=not_before).to_cells()[
        "r:json"
    ]} | clock_cells(written, at, clock_delay)  # fmt: skip
    record = read_host("h", cells)
    nxt = politeness.next_allowed(record.last_fetch_end, record.delay, record.not_before)
    # Never earlier than the record alone allowed ...
    assert nxt >= politeness.next_allowed(end, delay, not_before)
    # ... and, for a request the record does not know of, never before its delay from it.
    if at > end:
        assert nxt >= at + clock_delay and nxt >= clock_nb


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=60)
    | st.builds(
        lambda d: json.dumps(d).encode(),
        st.dictionaries(
            st.sampled_from(["at", "end", "delay", "not_before", "x"]), st.none() | st.text(max_size=3) | times
        ),
    )
)
def test_a_clock_cell_that_does_not_decode_leaves_the_record_as_it_was(raw):
    record = HostRecord(host="h", last_fetch_end=5.0, delay=1.0)
    merged = merge_clock(record, {CLOCK_CELL: raw})
    assert merged.last_fetch_end >= 5.0 and merged.delay >= 1.0


def _json_clock(at: float, end: float, delay: float, not_before: float) -> bytes:
    """The clock cell as versions before the binary cell wrote it."""
    return json.dumps({"at": at, "end": end, "delay": delay, "not_before": not_before}, separators=(",", ":")).encode()


any_float = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**1100), 2**1100)


@settings(max_examples=400, deadline=None)
@given(end=times, not_before=times, delay=st.floats(0, 3600), at=any_float, c_end=any_float, c_delay=any_float,
       c_nb=any_float)  # fmt: skip
def test_a_clock_cell_merges_as_its_json_written_before_did(end, not_before, delay, at, c_end, c_delay, c_nb):
    """The binary cell and the JSON one of the same values merge into the same record, for
    any values at all: NaN, infinities and ints past a float's range are ignored by both."""
    written = HostRecord(host="h", last_fetch_end=c_end, delay=0.0, not_before=c_nb)
    raw = clock_cells(written, at, c_delay)[CLOCK_CELL]
    values = (at, c_end, max(c_delay, 0.0), c_nb)  # the delay written is the larger of the two
    fits = all(isinstance(v, float) or abs(v) < 2**1000 for v in values)
    assert cellfmt.is_binary(raw) == fits and (len(raw) == 33) == fits
    old = _json_clock(*values)

    def record() -> HostRecord:
        return HostRecord(host="h", last_fetch_end=end, delay=delay, not_before=not_before)

    new_r, old_r = merge_clock(record(), {CLOCK_CELL: raw}), merge_clock(record(), {CLOCK_CELL: old})
    assert (new_r.last_fetch_end, new_r.delay, new_r.not_before) == (
        old_r.last_fetch_end,
        old_r.delay,
        old_r.not_before,
    )


def test_the_clock_written_before_each_request_is_one_binary_cell_under_half_its_json():
    written = HostRecord(host="h", last_fetch_end=1_700_000_000.25, delay=1.5, not_before=1_700_000_030.0)
    raw = clock_cells(written, 1_700_000_001.123456, 2.0)[CLOCK_CELL]
    assert cellfmt.decode_clock(raw) == (1_700_000_001.123456, 1_700_000_000.25, 2.0, 1_700_000_030.0)
    assert len(raw) * 2 < len(_json_clock(1_700_000_001.123456, 1_700_000_000.25, 2.0, 1_700_000_030.0))
    merged = read_host("h", {CLOCK_CELL: raw})
    assert (merged.last_fetch_end, merged.delay, merged.not_before) == (1_700_000_001.123456, 2.0, 1_700_000_030.0)


# --- real fetch loops, both stores ---------------------------------------------------------


def test_a_loop_that_lost_the_lease_sends_nothing_after_the_fence_interval(both_stores):
    """The lease taken over mid-fetch: the loop's last request arrives within FENCE_INTERVAL
    of the takeover, and the host's other URLs go back to the frontier, deferred."""
    with LoggingWeb() as web, open_store(both_stores) as store, RoundLease(store, ttl=120) as lease:
        slot = f"fenced.test:{web.port}"
        token = attempt_token(1, time.time())
        start_attempt(store, token, lease.owner)
        cfg = config(both_stores, min_delay=0.1)
        plan = plan_host(slot, entries(slot, 60), known_robots(slot), None, cfg, time.time())
        fence = StoreFence(both_stores, token)
        fence.claim(plan.shard)
        runner = FetchRunner(cfg, fence)
        try:
            runner.submit(plan)
            wait_for(lambda: len(web.log) >= 3)
            held = store.read_keys("meta", [LEASE_KEY])[LEASE_KEY][LEASE_CELL]
            other = json.dumps({"owner": "elsewhere:1:x", "acquired": time.time(), "expires": time.time() + 60})
            assert store.check_and_set("meta", LEASE_KEY, LEASE_CELL, held, other.encode())
            taken = time.time()
            results = results_of(runner)
        finally:
            runner.close()
            fence.close()
        late = [t - taken for _, t in web.log if t > taken + FENCE_INTERVAL]
        assert late == [], f"requests after the fence interval: {late}"
        fenced = [r for r in results if r.outcome == "deferred" and "fenced" in (r.error or "")]
        assert fenced and "lease was taken by elsewhere:1:x" in fenced[0].error
        assert len(results) == 60


def test_a_rerun_after_a_failure_mid_host_keeps_the_delay_from_the_last_request_sent(both_stores):
    """A round fails while a host is mid-fetch (its attempt ended; its host record never
    written): the rerun plans the host from the store, and its first request comes no sooner
    than the host's delay after the last request the failed attempt actually sent."""
    delay = 0.5
    with LoggingWeb() as web, open_store(both_stores) as store:
        slot = f"rerun.test:{web.port}"
        cfg = config(both_stores, min_delay=delay)
        first = attempt_token(1, time.time())
        start_attempt(store, first, None)
        plan = plan_host(slot, entries(slot, 3), known_robots(slot), None, cfg, time.time())
        fence = StoreFence(both_stores, first)
        fence.claim(plan.shard)
        runner = FetchRunner(cfg, fence)
        try:
            runner.submit(plan)
            wait_for(lambda: len(web.log) >= 2)
            end_attempt(store, first)  # the job failed: its launcher ends the attempt
            failed = results_of(runner)
        finally:
            runner.close()
            fence.close()
        assert [r.outcome for r in failed].count("fetched") == 2  # the third was fenced
        sent = len(web.log)
        last_sent = web.log[-1][1]

        # The rerun: the host as select reads it (record and clock), planned and fetched anew.
        second = attempt_token(1, time.time())
        start_attempt(store, second, None)
        record = read_host(slot, store.read_keys("hosts", [slot.encode()]).get(slot.encode()))
        plan = plan_host(slot, entries(slot, 1), record, None, cfg, time.time())
        assert plan is not None and plan.fetch_robots  # the failed round's robots answer was lost too
        fence = StoreFence(both_stores, second)
        fence.claim(plan.shard)
        runner = FetchRunner(cfg, fence)
        try:
            runner.submit(plan)
            again = results_of(runner)
        finally:
            runner.close()
            fence.close()
        assert [r.outcome for r in again] == ["fetched", "fetched"]  # robots.txt, then the page
        gap = web.log[sent][1] - last_sent
        assert gap >= delay, f"the rerun asked {gap:.3f}s after the last request sent (delay {delay}s)"


# --- live progress from the fetch loops' rows (a runner that reports metrics only at the end) ---


def test_the_fetch_loops_progress_rows_are_summed_and_cleared_with_the_attempt(both_stores):
    from beamcrawl.state.fence import read_progress

    with open_store(both_stores) as store:
        token = attempt_token(3, time.time())
        start_attempt(store, token, None)
        loops = [StoreFence(both_stores, token) for _ in range(2)]
        try:
            loops[0].publish("a", {"fetch/success": 3, "fetch/received": 4})
            loops[1].publish("b", {"fetch/success": 2, "fetch/received": 2, "fetch/bytes": 100})
            loops[0].publish("a", {"fetch/success": 5, "fetch/received": 6})  # a later count replaces
            other = attempt_token(4, time.time())
            StoreFence(both_stores, other).publish("c", {"fetch/success": 50})
            assert read_progress(store, token) == {"fetch/success": 7, "fetch/received": 8, "fetch/bytes": 100}
            end_attempt(store, token)
            assert read_progress(store, token) == {}
            assert read_progress(store, other) == {"fetch/success": 50}
        finally:
            for fence in loops:
                fence.close()


def test_a_poll_shows_the_workers_counts_when_the_runner_reports_none_yet():
    import io

    from beamcrawl.pipelines.live import ProgressDisplay, ProgressPoller
    from beamcrawl.pipelines.progress import Progress

    stream = io.StringIO()
    progress = Progress(window=60, started=time.time())
    display = ProgressDisplay(1, progress, stream, "plain")
    side = {"fetch/success": 12, "fetch/received": 14, "fetch/robots_fetches": 2}
    poller = ProgressPoller(display, source=lambda: {}, side=lambda: side)
    poller._poll()
    assert progress.fields(time.time())["fetched"] == 12


# --- a loop or a store too slow for the clock's margin -----------------------------------------


def _slowed(fence: StoreFence, latency: list[float]) -> None:
    """Makes every write of the fence's store take ``latency[0]`` seconds (changeable)."""
    fence.open()
    store = fence.store
    assert store is not None
    write = store.mutate

    def slow(table, mutations):
        time.sleep(latency[0])
        return write(table, mutations)

    store.mutate = slow  # type: ignore[method-assign]


def _requests(fence: StoreFence, hosts: int, busy: float, timeout: float) -> list[tuple[str | None, float]]:
    """``hosts`` requests asked of the fence at once, each holding the loop ``busy`` seconds
    once let through (what a loop of many hosts does between its requests); each one's answer
    and the time it would have gone out."""

    async def one(i: int) -> tuple[str | None, float]:
        refused = await fence.before_request(HostRecord(host=f"h{i}.test"), 0, 1.0)
        sent = time.time()
        time.sleep(busy)  # blocks every other request's resuming, as the loop's work does
        return refused, sent

    async def run() -> list[tuple[str | None, float]]:
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(hosts))), timeout)

    return asyncio.run(run())


def _written_at(store_uri: str, hosts: int) -> list[float]:
    with open_store(store_uri) as store:
        keys = [f"h{i}.test".encode() for i in range(hosts)]
        rows = store.read_keys("hosts", keys)
    return [cellfmt.decode_clock(rows[k][CLOCK_CELL])[0] for k in keys]


@settings(max_examples=6, deadline=None)
@given(
    latency=st.sampled_from([0.0, 0.2, 0.6, 0.9]),
    busy=st.sampled_from([0.0, 0.003, 0.008]),
    hosts=st.integers(1, 120),
)
def test_a_clock_written_late_is_written_further_ahead_and_the_loop_goes_on(tmp_path_factory, latency, busy, hosts):
    """However slow the store's writes and however many hosts wait on the loop's turn, every
    request is let through, and before the time its host's clock says (the written time is
    never earlier than the request). With the margin fixed at CLOCK_AHEAD, a write slower
    than it sent nothing, ever, and the loop outlived its window."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('fence')}/store.sqlite"
    fence = StoreFence(uri, None)
    try:
        _slowed(fence, [latency])
        answers = _requests(fence, hosts, busy, timeout=60)
    finally:
        fence.close()
    assert [refused for refused, _ in answers] == [None] * hosts
    for (_, sent), at in zip(answers, _written_at(uri, hosts)):
        assert sent < at, f"a request at {sent:.3f} after its clock's written time {at:.3f}"


def test_the_margin_comes_back_once_writes_are_quick_and_a_loop_past_the_largest_stops(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    latency = [0.7]
    fence = StoreFence(uri, None)
    try:
        _slowed(fence, latency)
        assert [r for r, _ in _requests(fence, 3, 0.0, timeout=30)] == [None] * 3
        assert fence.ahead >= 1.0  # written further ahead than CLOCK_AHEAD (0.5 s)
        latency[0] = 0.0
        for _ in range(40):
            _requests(fence, 1, 0.0, timeout=30)
        assert fence.ahead == CLOCK_AHEAD
        # A loop that cannot resume a request within the largest margin stops its shard.
        monkeypatch.setattr(fence_module, "MAX_CLOCK_AHEAD", 1.0)
        latency[0] = 1.2
        ((refused, _),) = _requests(fence, 1, 0.0, timeout=30)
    finally:
        fence.close()
    assert refused is not None and "could not be recorded ahead of the request" in refused


class _SlowGuard:
    """A guard whose clock write lands after the round's window has ended."""

    def __init__(self, until: float) -> None:
        self.until = until

    async def before_request(self, record: HostRecord, shard: int, delay: float) -> str | None:
        await asyncio.sleep(max(0.0, self.until - time.time()))
        return None


def test_a_request_whose_clock_landed_after_the_window_is_not_sent(tmp_path):
    with LoggingWeb() as web:
        slot = f"late.test:{web.port}"
        cfg = dataclasses.replace(config(f"sqlite:///{tmp_path}/s.sqlite", 0.1), round_window=0.5)
        plan = plan_host(slot, entries(slot, 3), known_robots(slot), None, cfg, time.time())
        runner = FetchRunner(cfg, _SlowGuard(time.time() + 1.0))
        try:
            runner.submit(plan)
            results = results_of(runner)
        finally:
            runner.close()
    assert web.log == []  # nothing went out after the window
    assert [r.outcome for r in results] == ["deferred"] * 3
    assert {r.error for r in results} == {"round window ended"}


class HeldHop(RawLoopbackServer):
    """src.test's robots.txt moves to ok.test's, which answers ``status`` with a Retry-After of
    ``wait`` seconds (delta-seconds, or an HTTP date with ``date``); logs ``(host, path,
    arrival)`` and when the hop's answer ended."""

    def __init__(self, status: int, wait: int, date: bool) -> None:
        super().__init__()
        self.status, self.wait, self.date = status, wait, date
        self.log: list[tuple[str, str, float]] = []
        self.held_until = 0.0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader, writer)
        if head is None:
            return
        path = head.split(b" ", 2)[1].decode("latin-1")
        host = next(
            (
                line.split(b":", 1)[1].strip().decode("latin-1")
                for line in head.split(b"\r\n")
                if line[:5].lower() == b"host:"
            ),
            "",
        ).rsplit(":", 1)[0]
        self.log.append((host, path, time.time()))
        if host == "src.test":
            answer = b"301 Moved\r\nLocation: http://ok.test:%d/robots.txt" % self.port
        else:
            now = time.time()
            if self.date:
                self.held_until = float(int(now + self.wait))
                value = email.utils.formatdate(self.held_until, usegmt=True)
            else:
                self.held_until = now + self.wait
                value = str(self.wait)
            answer = b"%d Busy\r\nRetry-After: %s" % (self.status, value.encode())
        writer.write(b"HTTP/1.1 " + answer + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()


def _round_of_one_url(store_uri: str, src: str) -> list:
    """A round of one URL of ``src`` (its robots.txt first), fetched through a StoreFence over
    the store: one fetch shard, a 5 s window. The results."""
    cfg = dataclasses.replace(config(store_uri, 0.1), fetch_shards=1, round_window=5)
    plan = plan_host(src, entries(src, 1), HostRecord(host=src), None, cfg, time.time())
    fence = StoreFence(store_uri, None)
    fence.claim(plan.shard)
    runner = FetchRunner(cfg, fence)
    try:
        runner.submit(plan)
        return results_of(runner)
    finally:
        runner.close()
        fence.close()


@settings(max_examples=6, deadline=None)
@given(status=st.sampled_from([429, 503]), wait=st.integers(min_value=30, max_value=86400), date=st.booleans())
def test_a_retry_after_answered_to_a_robots_hop_holds_the_next_rounds_requests_to_its_host(
    tmp_path_factory, status, wait, date
):
    """src.test's robots.txt moves to ok.test, which answers the hop with a Retry-After; ok.test
    has no plan this round, so no host record of it is written. The next round reads ok.test
    from the store and plans nothing for it before the Retry-After ends. Before, the hold lived
    only in the loop's memory: the clock written before the hop has no answer in it, and the
    next round could ask ok.test as soon as its delay passed."""
    store_uri = f"sqlite:///{tmp_path_factory.mktemp('hop')}/s.sqlite"
    with HeldHop(status, wait, date) as web, open_store(store_uri) as store:
        src, ok = f"src.test:{web.port}", f"ok.test:{web.port}"
        _round_of_one_url(store_uri, src)
        assert [(h, p) for h, p, _ in web.log] == [("src.test", "/robots.txt"), ("ok.test", "/robots.txt")]
        record = read_host(ok, store.read_keys("hosts", [ok.encode()]).get(ok.encode()))
    held = politeness.next_allowed(record.last_fetch_end, record.delay, record.not_before)
    assert held >= web.held_until - 1.0, (
        f"ok.test may be asked {web.held_until - held:.0f}s before its Retry-After ends"
    )


@settings(max_examples=4, deadline=None)
@given(held=st.booleans(), delay=st.floats(min_value=1.0, max_value=2.0))
def test_a_robots_hop_to_a_host_with_no_plan_keeps_the_clock_the_store_has_for_it(tmp_path_factory, held, delay):
    """ok.test has no plan this round, but the store has its clock: its last request a moment
    ago under a delay (a Crawl-delay, a slow-down) of ``delay`` s, or a Retry-After that holds
    it past the window (``held``). src.test's robots.txt moves to ok.test: the hop waits for
    that clock, or is not made this round. Before, the loop started ok.test's clock afresh
    (--min-delay, no request known, no hold) and the hop went at once."""
    store_uri = f"sqlite:///{tmp_path_factory.mktemp('stored')}/s.sqlite"
    with HeldHop(200, 0, False) as web, open_store(store_uri) as store:
        src, ok = f"src.test:{web.port}", f"ok.test:{web.port}"
        stored = HostRecord(host=ok, delay=delay, last_fetch_end=time.time())
        if held:
            stored.not_before = time.time() + 3600
        store.mutate("hosts", [Mutation.set(ok.encode(), stored.to_cells())])
        results = _round_of_one_url(store_uri, src)
    hops = [at for host, _, at in web.log if host == "ok.test"]
    if held:
        assert hops == [], "the hop went to a host held past the window"
        assert [r.outcome for r in results if r.entry.source != "robots"] == ["deferred"]
    else:
        assert len(hops) == 1 and hops[0] >= stored.last_fetch_end + delay, (hops, stored)


@settings(max_examples=8, deadline=None)
@given(kind=st.sampled_from(["blocked", "paused", "min_delay", "none"]), bare=st.booleans())
def test_a_robots_hop_to_a_host_with_no_plan_keeps_the_operators_policy_for_it(tmp_path_factory, kind, bare):
    """The operator blocked ok.test, paused it for an hour, or set it a minimum delay of 1.5 s
    (on its slot, or on its bare name, which covers its ports); ok.test has no plan this round
    (a blocked or paused host gets none). src.test's robots.txt moves to ok.test: the hop is
    not made to a blocked or paused host (the file counts as unreachable) and keeps the
    minimum delay. Before, the policy was read only by the planner: the hop went at once."""
    store_uri = f"sqlite:///{tmp_path_factory.mktemp('policy')}/s.sqlite"
    with HeldHop(200, 0, False) as web, open_store(store_uri) as store:
        src, ok = f"src.test:{web.port}", f"ok.test:{web.port}"
        last = time.time()
        store.mutate(
            "hosts", [Mutation.set(ok.encode(), HostRecord(host=ok, delay=0.1, last_fetch_end=last).to_cells())]
        )
        key = "ok.test" if bare else ok
        policy = HostPolicy(
            host=key,
            blocked=kind == "blocked",
            pause_until=time.time() + 3600 if kind == "paused" else None,
            min_delay_ms=1500 if kind == "min_delay" else None,
        )
        if kind != "none":
            store.mutate("policies", [Mutation.set(key.encode(), policy.to_cells())])
        results = _round_of_one_url(store_uri, src)
    hops = [at for host, _, at in web.log if host == "ok.test"]
    if kind in ("blocked", "paused"):
        assert hops == [], f"the hop went to a {kind} host"
        assert [r.error for r in results if r.entry.source != "robots"] == ["robots.txt unavailable"]
    else:
        assert len(hops) == 1
        if kind == "min_delay":
            assert hops[0] >= last + 1.5, "the operator's minimum delay was not kept"


@settings(max_examples=3, deadline=None)
@given(status=st.sampled_from([500, 502, 504, 599]))
def test_a_robots_hop_answered_with_a_server_error_every_round_is_backed_off_more(tmp_path_factory, status):
    """src.test's robots.txt moves to ok.test, which answers every hop with a 5xx; ok.test has
    no plan, so only its clock cell is written. Its errors in a row count up across rounds
    as a planned host's do, and from the BACKOFF_AFTER_ERRORS-th the host is held off.
    Before, the cell kept the hold but not the count: every round started ok.test at no
    error, and a host failing every round was never backed off."""
    store_uri = f"sqlite:///{tmp_path_factory.mktemp('errors')}/s.sqlite"
    with HeldHop(status, 0, False) as web, open_store(store_uri) as store:
        src, ok = f"src.test:{web.port}", f"ok.test:{web.port}"
        for rounds in range(1, politeness.BACKOFF_AFTER_ERRORS + 1):
            record = read_host(ok, store.read_keys("hosts", [ok.encode()]).get(ok.encode()))
            time.sleep(
                max(0.0, politeness.next_allowed(record.last_fetch_end, record.delay, record.not_before) - time.time())
            )
            _round_of_one_url(store_uri, src)
            assert sum(host == "ok.test" for host, _, _ in web.log) == rounds
            record = read_host(ok, store.read_keys("hosts", [ok.encode()]).get(ok.encode()))
            assert record.consecutive_errors == rounds, f"round {rounds}: {record}"
    assert record.not_before > record.last_fetch_end, "a host failing every round is not backed off"


@settings(max_examples=300, deadline=None)
@given(
    errors=st.one_of(st.integers(0, 10), st.integers(0, 2**70)),
    stored=st.integers(0, 10),
    after_answer=st.booleans(),
)
def test_a_clock_cell_carries_the_hosts_errors_in_a_row(errors, stored, after_answer):
    """The clock cell holds the host's errors in a row (binary, or JSON past 64 bits). One
    written after an answer (a robots.txt hop's) is the count now; one written before a
    request is the count before it, and the record's count stands."""
    end = 1_700_000_000.25
    written = HostRecord(host="h", last_fetch_end=end, delay=1.0, consecutive_errors=errors)
    at = end if after_answer else end + CLOCK_AHEAD
    cell = clock_cells(written, at, 1.0)
    record = HostRecord(host="h", last_fetch_end=end - 10, consecutive_errors=stored)
    merged = merge_clock(record, cell)
    assert merged.consecutive_errors == (errors if after_answer else stored)
    assert read_host("h", cell).consecutive_errors == (errors if after_answer else 0)
