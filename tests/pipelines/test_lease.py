"""The crawl's lease holds for the whole round: renewed while the round runs, checked again
before the commit; a round that lost it does not commit. Both stores (embedded, emulator).
"""

from __future__ import annotations

import glob
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.lease import LeaseHeld, LeaseLost, RoundLease
from beamcrawl.pipelines.crawl import crawl
from beamcrawl.pipelines.commit import next_round
from beamcrawl.stores.base import Mutation, open_store
from loopback import LoopbackServer, serving  # noqa: E402  (tests/loopback.py)


@pytest.fixture(params=["embedded", "bigtable"])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "bigtable":
        return request.getfixturevalue("bigtable_uri")
    return f"sqlite:///{tmp_path}/out/store.sqlite"


def _steal(store: Any, owner: str = "thief-host:4242:stolen") -> None:
    now = time.time()
    value = json.dumps({"owner": owner, "acquired": now, "expires": now + 3600}).encode()
    store.mutate("meta", [Mutation.set(b"lease", {"m:lease": value})])


def _holder(store: Any) -> str | None:
    raw = store.read_keys("meta", [b"lease"]).get(b"lease", {}).get("m:lease")
    return json.loads(raw)["owner"] if raw else None


def test_a_long_round_keeps_its_lease_past_its_ttl(store_uri: str, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir(exist_ok=True)
    with open_store(store_uri) as store:
        with RoundLease(store, ttl=0.5, renew_every=0.1) as lease:
            time.sleep(1.5)  # three times the ttl
            lease.check("round 1")  # still ours
            with pytest.raises(LeaseHeld):
                RoundLease(store).acquire()
        assert _holder(store) is None  # released at the end


def test_a_lease_left_unrenewed_expires_and_is_lost(store_uri: str, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir(exist_ok=True)
    with open_store(store_uri) as store:
        with RoundLease(store, ttl=0.3, renew_every=3600) as lease:
            time.sleep(0.5)
            with pytest.raises(LeaseLost, match=r"^round 1 not committed: the crawl's lease was lost \(it expired"):
                lease.check("round 1 not committed")


def test_the_renewer_notices_a_stolen_lease_and_leaves_the_thiefs_row(store_uri: str, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir(exist_ok=True)
    with open_store(store_uri) as store:
        with RoundLease(store, ttl=5.0, renew_every=0.05) as lease:
            _steal(store)
            deadline = time.monotonic() + 10
            while lease.lost is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert lease.lost == "taken by thief-host:4242:stolen"
            with pytest.raises(LeaseLost, match="taken by thief-host"):
                lease.check("round 3 not committed")
        assert _holder(store) == "thief-host:4242:stolen"


class _StealingServer(LoopbackServer):
    """A loopback server whose first request has the crawl's lease taken by another owner."""

    def __init__(self, store_uri: str) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.stolen = threading.Event()

    async def handle(self, request: web.Request) -> web.Response:
        if not self.stolen.is_set():
            with open_store(self.store_uri) as store:
                _steal(store)
            self.stolen.set()
        if request.path == "/robots.txt":
            return web.Response(status=404)
        return web.Response(text="<html><a href='/next'>n</a></html>", content_type="text/html")


def test_a_round_whose_lease_is_stolen_mid_round_does_not_commit(store_uri: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with serving(_StealingServer(store_uri)) as server:
        cfg = CrawlConfig(
            out=str(out), store=store_uri, min_delay=0.05, round_window=1.5,
            resolve=(("*.test", "127.0.0.1"),), allow_private_networks=True,
        )  # fmt: skip
        with pytest.raises(LeaseLost) as caught:
            crawl(cfg, 1, [f"http://a.test:{server.port}/"], ["--runner=FnApiRunner"], out=io.StringIO())
    assert server.stolen.is_set()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("round 1 not committed: the crawl's lease was lost (taken by thief-host:4242:stolen)")
    with open_store(store_uri) as store:
        assert next_round(store) == 1  # the round counter did not move
        assert _holder(store) == "thief-host:4242:stolen"  # and the thief's lease stands
        frontier = list(store.read_range("frontier"))
    # The seed's row is still queued: nothing was finished (new URLs are queued as found).
    assert f"http://a.test:{server.port}/" in {FrontierEntry.from_cells(cells).url for _, cells in frontier}
    assert glob.glob(str(out / "pages" / "round=*" / "*.parquet")) == []
    assert glob.glob(str(out / "warc" / "round=*" / "*.warc.gz")) == []
    assert not (out / "reports" / "round-000001.json").exists()
