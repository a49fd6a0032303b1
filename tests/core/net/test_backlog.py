"""The fetch loop's bound on unparsed responses (core/net/backlog.py): the loop waits before a
request while the stage is behind, so what waits stays near the bound however fast pages
come; nothing is lost and no host is asked sooner than its clock says."""

from __future__ import annotations

import asyncio
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.backlog import RESULT_OVERHEAD, Backlog, result_bytes
from beamcrawl.core.net.fetcher import FetchRunner
from beamcrawl.schemas.records import FetchResult, FrontierEntry

from test_fetcher import cfg, mock_server, plan  # noqa: E402  (tests/core/net/test_fetcher.py)


def test_a_result_holds_its_bodies_once_each():
    entry = FrontierEntry(url="http://a.test/", fp=1, host="a.test", due_ms=0)
    same = b"x" * 1000
    assert result_bytes(FetchResult(entry=entry, outcome="fetched", url=entry.url, raw_body=same, body=same)) == (
        RESULT_OVERHEAD + 1000
    )
    coded = FetchResult(entry=entry, outcome="fetched", url=entry.url, raw_body=b"z" * 300, body=b"y" * 5000)
    assert result_bytes(coded) == RESULT_OVERHEAD + 5300
    assert result_bytes(FetchResult(entry=entry, outcome="deferred", url=entry.url)) == RESULT_OVERHEAD


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 50_000), min_size=1, max_size=120),
    requesters=st.integers(1, 12),
    limit=st.integers(1, 200_000),
    pace=st.sampled_from([0.0, 0.0005, 0.002]),
)
def test_requests_wait_while_the_backlog_is_full_and_every_one_goes_out(sizes, requesters, limit, pace):
    """Requesters that each take a response of a drawn size, against a consumer slower or
    faster than they are: every response is taken in the end (no request waits forever), a
    request never starts while more than the limit is held, and what is ever held is at most
    the limit plus one response per requester (those already on the wire)."""

    async def scenario() -> tuple[int, list[int], int]:
        backlog = Backlog(limit, poll=0.001)
        queue: asyncio.Queue[int] = asyncio.Queue()
        work = list(sizes)
        held_at_start: list[int] = []

        async def requester() -> None:
            while work:
                size = work.pop()
                waited = await backlog.room()
                # Without a wait the backlog is within the limit; after one it was worked down
                # to half, though others woken together may have added theirs since.
                if not waited:
                    held_at_start.append(backlog.held())
                await asyncio.sleep(0)  # the request is on the wire
                backlog.put(size)
                queue.put_nowait(size)

        async def consumer() -> int:
            taken = 0
            while taken < len(sizes):
                size = await queue.get()
                await asyncio.sleep(pace)  # parsing it
                backlog.took(size)
                taken += 1
            return taken

        taken, *_ = await asyncio.wait_for(
            asyncio.gather(consumer(), *(requester() for _ in range(requesters))), timeout=30
        )
        return taken, held_at_start, backlog.peak

    taken, held_at_start, peak = asyncio.run(scenario())
    assert taken == len(sizes)
    assert all(held <= limit for held in held_at_start)
    assert peak <= limit + requesters * max(sizes)


def test_a_backlog_within_its_limit_never_waits():
    async def scenario() -> tuple[float, int]:
        backlog = Backlog(10_000)
        waited = 0.0
        for _ in range(20):
            waited += await backlog.room()
            backlog.put(500)
        return waited, backlog.waits

    assert asyncio.run(scenario()) == (0.0, 0)


def _slow_stage(limit: int, hosts_in_flight: int) -> tuple[list, FetchRunner, list[dict]]:
    """Many pages on many hosts fetched faster than a stage that takes 15 ms a result."""
    config = cfg(min_delay=0.02, max_unparsed_bytes=limit, max_hosts_in_flight=hosts_in_flight)
    with mock_server() as server:
        plans = [plan(server, f"h{i}.test", [f"/big/{j}" for j in range(12)], delay=0.02) for i in range(10)]
        runner = FetchRunner(config)
        results = []
        try:
            for p in plans:
                runner.submit(p)
            for kind, value in runner.drain(wait=True):
                if kind == "result":
                    time.sleep(0.015)  # the parse
                    results.append(value)
        finally:
            runner.close()
        return results, runner, server.log


def test_a_slow_stage_holds_the_bound_and_still_gets_every_page_politely():
    page = RESULT_OVERHEAD + 10_000  # /big is cut at max_body_bytes (10,000)
    limit, in_flight = 3 * page, 4
    results, runner, log = _slow_stage(limit, in_flight)
    pages = [r for r in results if r.entry.source != "robots" and r.outcome == "fetched"]
    assert len(pages) == 120  # the bound delays requests; it loses none
    assert runner.backlog.waits > 0
    assert runner.backlog.peak <= limit + in_flight * page
    by_host: dict[str, list[dict]] = {}
    for req in log:
        by_host.setdefault(req["host"], []).append(req)
    for reqs in by_host.values():
        reqs.sort(key=lambda r: r["start"])
        for prev, nxt in zip(reqs, reqs[1:]):
            assert nxt["start"] - prev["end"] >= 0.019  # the host's gap, from the server's side


def test_without_a_tight_bound_the_same_stage_falls_behind():
    """The same crawl with a bound it never reaches: the backlog grows past what the bound
    above allowed (so that test measures the bound, not a stage that kept up)."""
    page = RESULT_OVERHEAD + 10_000
    results, runner, _log = _slow_stage(10**9, 4)
    assert len([r for r in results if r.outcome == "fetched"]) >= 120
    assert runner.backlog.waits == 0
    assert runner.backlog.peak > 3 * page + 4 * page
