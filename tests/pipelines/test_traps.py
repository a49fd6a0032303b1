"""Traps contained, nothing deleted: three rounds of simweb with its calendar trap.

The calendar (``/cal/YYYY/MM.html``, each month linking to the next and the previous) passes
every URL-shape rule; what bounds it is its domain's budget. Nobody vouches for the trap's
domain (it is reached by a link, not seeded), so it gets the base budget, while the seeded
domains get the operator's credit and go on being crawled. Checked from the store and the
committed files: the trap domain never fetches more than its budget, its over-budget URLs are
still in the frontier (deferred, due later), links of a bad shape (simweb's PDFs) were never
offered to the seen set, and every URL the crawl ever saw is fetched or still queued.
"""

from __future__ import annotations

import glob
import io
import math
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.urls.urlnorm import fingerprint, host_of, normalize
from beamcrawl.core.urls.urlshape import check
from beamcrawl.pipelines.crawl import crawl
from beamcrawl.schemas.records import OUTCOME_CELL, QUEUED_CELL, Candidate, FrontierEntry, UrlState, key_fp
from beamcrawl.simweb.site import TRAP_ENTRY
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.budgets import domain_of, read_domains
from beamcrawl.state.frontier import queue_new_urls

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
]  # a crawl of a trap web: `pytest -m "not slow and not e2e"` leaves it out

BASE = 2  # the trap domain's budget per period, before linkers
PER_LINKER = 1
MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def trap_crawl(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("traps")
    out = work / "out"
    with running_simweb(str(work), hosts=12, seed=2, pages_per_host=20, latency_scale=0) as web:
        truth = web.truth()
        (trap,) = [h for h in web.hosts if truth[h]["trap"]]
        trap_domain = truth[trap]["registered_domain"]
        seeded = [h for h in web.hosts[:5] if truth[h]["registered_domain"] != trap_domain]
        cfg = CrawlConfig(
            out=str(out), store=f"sqlite:///{out}/store.sqlite", min_delay=0.05, round_window=2.0,
            allow_private_networks=True, resolve=(("*", "127.0.0.1"),), fetch_shards=4,
            domain_budget_base=BASE, domain_budget_per_linker=PER_LINKER, seed_domain_credit=100,
        )  # fmt: skip
        # The trap's entry, as if a page elsewhere had linked to it (so no seed credit).
        entry = normalize(web.url(trap, TRAP_ENTRY))
        started = time.time()
        with open_store(cfg.store) as store:
            queue_new_urls(store, [Candidate(fp=fingerprint(entry), url=entry, host=host_of(entry), depth=1,
                                             priority=0.5)], int(started * 1000))  # fmt: skip
        reports = crawl(cfg, 3, [web.base_url(h) for h in seeded], ["--runner=FnApiRunner"], out=io.StringIO())
        requests = [r for r in web.requests() if "beamcrawl" in r.get("ua", "")]
    return {"cfg": cfg, "out": out, "trap": trap, "trap_domain": trap_domain, "seeded": seeded,
            "reports": reports, "requests": requests, "started": started}  # fmt: skip


def _pages(out: Path) -> list[dict]:
    """Committed fetch events, each with the round of its partition."""
    rows: list[dict] = []
    for path in sorted(glob.glob(str(out / "pages" / "round=*" / "*.parquet"))):
        round_no = int(path.split("round=")[1].split("/")[0])
        rows.extend({**row, "round": round_no} for row in pq.read_table(path).to_pylist())
    return rows


def test_the_trap_domain_gets_its_budget_and_no_more(trap_crawl: dict) -> None:
    cfg, trap = trap_crawl["cfg"], trap_crawl["trap"]
    with open_store(cfg.store) as store:
        state = read_domains(store, [trap_crawl["trap_domain"]])[trap_crawl["trap_domain"]]
    budget = BASE + PER_LINKER * state.linkers.count()  # its linkers can only have grown
    served = [r for r in trap_crawl["requests"] if r["host"] == trap and not r["path"].startswith("/robots")]
    calendar = [r for r in served if r["path"].startswith("/cal/")]
    assert calendar, "the trap was never entered"
    assert len(served) <= budget, (len(served), budget, [r["path"] for r in served])
    assert state.used == len(served)
    over = sum(r["metrics"].get("budgets/urls_over_budget", 0) for r in trap_crawl["reports"])
    assert over > 0, "the trap never reached its budget: the test shows nothing"


def test_over_budget_urls_are_deferred_not_deleted(trap_crawl: dict) -> None:
    cfg = trap_crawl["cfg"]
    with open_store(cfg.store) as store:
        seen = {key_fp(k): c for k, c in store.read_range("urls")}
        frontier = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
    fetched = {row["url_fp"] & MASK for row in _pages(trap_crawl["out"])}
    queued = {e.fp for e in frontier}
    refused = {fp for fp, c in seen.items() if UrlState.from_cells(c).state == "robots_disallowed"}
    lost = [UrlState.from_cells(c).url for fp, c in seen.items() if fp not in queued | fetched | refused]
    assert not lost, f"seen but neither fetched nor queued: {lost[:5]}"
    # A deferred URL comes back no sooner than its domain's budget refills: the start of the
    # next budget period after the rounds began (periods are aligned to the epoch, so when
    # the test runs shortly before one begins, that is minutes away, not a whole period).
    rules = cfg.budget_rules()
    refill = (math.floor(trap_crawl["started"] / rules.defer_base) + 1) * rules.defer_base
    deferred = [e for e in frontier if e.deferrals > 0]
    assert deferred and all(e.due_ms >= refill * 1000 for e in deferred), (
        refill,
        sorted(e.due_ms for e in deferred)[:3],
    )
    # Unseeded domains reached by links share the trap's small budget; seeded ones have room.
    deferred_domains = {domain_of(e.host) for e in deferred}
    assert trap_crawl["trap_domain"] in deferred_domains
    assert not deferred_domains & {domain_of(h) for h in trap_crawl["seeded"]}
    assert any("/cal/" in e.url for e in deferred)


def test_normal_pages_keep_being_crawled(trap_crawl: dict) -> None:
    seeded = set(trap_crawl["seeded"])
    per_round = [r["metrics"].get("fetch/success", 0) for r in trap_crawl["reports"]]
    assert len(per_round) == 3 and all(n > 0 for n in per_round), per_round
    rows = _pages(trap_crawl["out"])
    third = [r for r in rows if r["round"] == 3 and r["host"].split(":")[0] in seeded and r["outcome"] == "fetched"]
    assert len(third) >= len(seeded), "the seeded sites stopped being crawled"


def test_links_of_a_bad_shape_never_reach_the_seen_set(trap_crawl: dict) -> None:
    refused = sum(r["metrics"].get("url_seen/shape_binary_extension", 0) for r in trap_crawl["reports"])
    assert refused > 0  # simweb's /files/N.pdf links
    with open_store(trap_crawl["cfg"].store) as store:
        # Queued URLs carry theirs in the discovery cell (u:q), fetched ones in u:o too.
        urls = [UrlState.from_cells(c).url for _, c in store.read_range("urls") if {QUEUED_CELL, OUTCOME_CELL} & set(c)]
    assert urls and all(check(u) is None for u in urls)
