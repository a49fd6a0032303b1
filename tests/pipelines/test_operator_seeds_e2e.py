"""The operator's seeds are not capped like discovered hosts: 33 seed hosts under one
registered domain are all fetched in round 1 (``--max-new-hosts-per-domain`` is 20), while
host names the crawl discovers under that domain stay capped.

One in-process round per store (embedded and the Bigtable emulator) against a loopback
server that answers for every host name.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from beamcrawl.core.config import CrawlConfig
from beamcrawl.pipelines import store_admin
from beamcrawl.pipelines.crawl import crawl
from beamcrawl.stores.emulator import scratch_store

SEED_HOSTS = [f"dept{i}.uni.test" for i in range(33)]


class AnyHost:
    """Answers every host: its root links to a discovered host of the same domain."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.port = 0
        self._ready = threading.Event()

    async def handle(self, request: web.Request) -> web.Response:
        host = request.host.split(":")[0]
        self.log.append((host, request.path))
        if request.path == "/robots.txt":
            return web.Response(status=404)
        found = f"http://found-{host.split('.')[0]}.uni.test:{self.port}/"
        return web.Response(text=f"<html><body><a href='{found}'>x</a></body></html>", content_type="text/html")

    def run(self) -> None:
        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(runner.cleanup())
        self.loop.close()


@contextlib.contextmanager
def any_host() -> Iterator[AnyHost]:
    server = AnyHost()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server._ready.wait(10)
    try:
        yield server
    finally:
        server.loop.call_soon_threadsafe(server.loop.stop)
        thread.join(10)


@pytest.fixture(params=["embedded", "bigtable"])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "embedded":
        yield f"sqlite:///{tmp_path}/out/store.sqlite"
        return
    request.getfixturevalue("bigtable_emulator")
    with scratch_store(init=False) as uri:
        assert store_admin.main(["init", "--store", uri]) == 0
        yield uri


def test_33_seed_hosts_of_one_domain_are_all_fetched_in_round_1(tmp_path, store_uri, connect_log):
    with any_host() as server:
        cfg = CrawlConfig(
            out=str(tmp_path / "out"), store=store_uri, min_delay=0.05, round_window=4.0, fetch_shards=2,
            resolve=(("*.test", "127.0.0.1"),), allow_private_networks=True,
            max_new_hosts_per_domain=20,
        )  # fmt: skip
        printed = io.StringIO()
        seeds = [f"http://{h}:{server.port}/" for h in SEED_HOSTS]
        (first,) = crawl(cfg, 1, seeds, ["--runner=FnApiRunner"], out=printed)
        round_1 = list(server.log)
        (second,) = crawl(cfg, 1, [], ["--runner=FnApiRunner"], out=io.StringIO())
        log = list(server.log)
    assert {h for h, p in round_1 if p == "/"} == set(SEED_HOSTS)
    assert first["deferred_by_budgets"] == 0 and first["operator_urls_deferred"] == 0
    assert "seeds and submissions among them 0" in printed.getvalue()
    # The 33 hosts the seeds link to are discovered, not given: 20 new names a round.
    found = {h for h, p in log if p == "/" and h.startswith("found-")}
    assert len(found) == 20
    assert second["deferred_by_budgets"] == 13 and second["operator_urls_deferred"] == 0
