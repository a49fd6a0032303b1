"""The operator's seeds are not capped like discovered hosts: 33 seed hosts under one
registered domain are all fetched in round 1 (``--max-new-hosts-per-domain`` is 20), while
host names the crawl discovers under that domain stay capped.

One in-process round per store (embedded and the Bigtable emulator) against a loopback
server that answers for every host name.
"""

from __future__ import annotations

import contextlib
import io

import pytest
from aiohttp import web

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.crawl import crawl
from loopback import LoopbackServer, serving  # noqa: E402  (tests/loopback.py)

SEED_HOSTS = [f"dept{i}.uni.test" for i in range(33)]


class AnyHost(LoopbackServer):
    """Answers every host: its root links to a discovered host of the same domain."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        host = request.host.split(":")[0]
        self.log.append((host, request.path))
        if request.path == "/robots.txt":
            return web.Response(status=404)
        found = f"http://found-{host.split('.')[0]}.uni.test:{self.port}/"
        return web.Response(text=f"<html><body><a href='{found}'>x</a></body></html>", content_type="text/html")


def any_host() -> contextlib.AbstractContextManager[AnyHost]:
    return serving(AnyHost())


@pytest.fixture
def store_uri(both_stores: str) -> str:
    return both_stores


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
