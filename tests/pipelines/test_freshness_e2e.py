"""Freshness end to end: the adaptive revisit policy against the uniform baseline, side by
side on one simweb whose pages change at known rates, measured from the server's side.

Both crawls run at once, each with its own store and output, told apart by their
User-Agent; both get the same fetch budget (the same hosts, delay and round window, so the
same number of slots a round) and the same seeds: every page robots.txt allows, except the
sitemap-only ones. Freshness (``simweb/freshness.py``) is the share of time the copy a
crawler holds matches the live page, computed exactly from the versions simweb served and
the change times it drew. It is compared in the steady state, from the moment both crawls
have fetched every seeded page once (before that both are busy with the same first pass),
over the pages that change at all (a static page is fresh under any policy once fetched).

The web: simweb's change model with a mix of half static pages, a quarter that change
faster than any polite budget can follow, a fifth that change every ~20 s and a few slow
ones (``CHANGE_MIX``). The budget is tight on purpose (about 12 slots a round per host for
about 100 pages): that is where a revisit policy matters. The crawls' time constants are
scaled to the web's: revisits from 1 s to 10 min, a prior of one change per 30 s, and a
horizon of 10 s (the test seeds every page, so what discovery finds is junk: a short horizon
puts revisits before it).

Also checked on the adaptive crawl: unchanged revisits transfer no body (the log shows 304s
with 0 bytes), each 304 is a server-not-modified revisit record in the WARC, the
sitemap-only pages were discovered and fetched, and neither crawl broke politeness.
"""

from __future__ import annotations

import glob
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.conditional import REVISIT_PROFILE_NOT_MODIFIED
from beamcrawl.simweb.audit import audit
from beamcrawl.simweb.freshness import measure, truth_pages
from beamcrawl.simweb.testing import running_simweb

HOSTS = 6
PAGES = 100
CHANGE_SCALE = 2.5  # fast 2.5 s, medium 20 s, slow 160 s
CHANGE_MIX = "static=0.5,slow=0.05,medium=0.2,fast=0.25"
DELAY = 0.5
WINDOW = 6
ROUNDS = 40
POLICIES = ("adaptive", "uniform")
TARGET = 1.5  # the bar: adaptive at least 1.5x fresher than uniform


def _crawl(policy: str, work: Path, seeds: Path) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "beamcrawl.pipelines.cli", "crawl",
        "--seeds", str(seeds), "--out", str(work / policy), "--rounds", str(ROUNDS),
        "--resolve", "*=127.0.0.1", "--allow-private-networks",
        "--min-delay", str(DELAY), "--round-window", str(WINDOW), "--runner", "FnApiRunner",
        "--user-agent", f"Mozilla/5.0 (compatible; beamcrawl/0.1; {policy}-run)",
        "--revisit-policy", policy,
        "--min-revisit-interval", "1", "--max-revisit-interval", "600",
        "--prior-change-interval", "30", "--revisit-horizon", "10",
        "--domain-budgets=false",
    ]  # fmt: skip
    log = open(work / f"{policy}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("freshness")
    with running_simweb(
        str(work / "web"), hosts=HOSTS, pages_per_host=PAGES, seed=11, latency_scale=0,
        change_scale=CHANGE_SCALE, change_mix=CHANGE_MIX,
    ) as web:  # fmt: skip
        truth = web.truth()
        pages = truth_pages(truth, allowed_only=True, sitemap_only=False)
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(sorted(pages)) + "\n")
        started = time.time()
        procs = {policy: _crawl(policy, work, seeds) for policy in POLICIES}
        for policy, proc in procs.items():
            assert proc.wait(timeout=1500) == 0, (work / f"{policy}.log").read_text()[-3000:]
        ended = time.time()
        web.sync()
        requests = web.requests()
    return {"work": work, "truth": truth, "pages": pages, "requests": requests, "start": started, "end": ended}


def _mine(requests: list[dict[str, Any]], policy: str) -> list[dict[str, Any]]:
    return [r for r in requests if f"{policy}-run" in r.get("ua", "")]


def test_adaptive_is_fresher_than_uniform_under_the_same_budget(side_by_side: dict[str, Any]) -> None:
    s = side_by_side
    whole = {p: measure(s["requests"], s["truth"], f"{p}-run", s["start"], s["end"], s["pages"]) for p in POLICIES}
    for policy, report in whole.items():
        assert report.fetched_pages == len(s["pages"]), f"{policy} never fetched some seeded pages"
    # Steady state: from when both crawls hold a copy of every seeded page.
    steady = max(page.first_fetch for report in whole.values() for page in report.by_page.values())
    assert s["end"] - steady > 120, "too little steady state to compare: the first pass took the run"
    changing = {u for u, page in whole["adaptive"].by_page.items() if page.change_class != "static"}
    fresh = {p: measure(s["requests"], s["truth"], f"{p}-run", steady, s["end"], changing) for p in POLICIES}
    every = {p: measure(s["requests"], s["truth"], f"{p}-run", steady, s["end"], s["pages"]) for p in POLICIES}
    budget = {p: len([r for r in _mine(s["requests"], p) if r["start"] >= steady]) for p in POLICIES}
    figures = {
        p: f"changing pages {fresh[p].mean:.3f} (by class {({k: round(v, 3) for k, v in fresh[p].by_class.items()})}), "
        f"all pages {every[p].mean:.3f}, requests {budget[p]}"
        for p in POLICIES
    }
    print(f"\nsteady state {s['end'] - steady:.0f} s of {s['end'] - s['start']:.0f} s:", figures)
    # The same budget (the same slots a round): about as many requests as the baseline (the
    # counts differ only by how 5xx back-off held each crawl's hosts).
    assert budget["adaptive"] <= budget["uniform"] * 1.1, figures
    ratio = fresh["adaptive"].mean / max(fresh["uniform"].mean, 1e-9)
    assert ratio >= TARGET, f"adaptive/uniform freshness {ratio:.2f} < {TARGET}: {figures}"
    assert every["adaptive"].mean > every["uniform"].mean, figures


def test_unchanged_revisits_transfer_no_body_and_are_archived_as_revisits(side_by_side: dict[str, Any]) -> None:
    s = side_by_side
    mine = _mine(s["requests"], "adaptive")
    not_modified = [r for r in mine if r["status"] == 304]
    assert len(not_modified) > 50, Counter(r["status"] for r in mine)
    assert all(r["bytes"] == 0 for r in not_modified)
    profiles: Counter[str] = Counter()
    for path in glob.glob(str(s["work"] / "adaptive" / "warc" / "round=*" / "*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "revisit":
                    profiles[record.rec_headers.get_header("WARC-Profile")] += 1
    assert profiles[REVISIT_PROFILE_NOT_MODIFIED] == len(not_modified), profiles


def test_sitemap_only_pages_are_discovered(side_by_side: dict[str, Any]) -> None:
    s = side_by_side
    hidden = truth_pages(s["truth"], allowed_only=True, sitemap_only=True)
    assert hidden, "the web has no sitemap-only pages to find"
    port = next(iter(hidden)).rsplit(":", 1)[1].split("/", 1)[0]
    fetched = {f"http://{r['host']}:{port}{r['path']}" for r in _mine(s["requests"], "adaptive") if r["status"] == 200}
    assert hidden <= fetched, f"sitemap-only pages never fetched: {sorted(hidden - fetched)[:5]}"


def test_both_crawls_stayed_polite(side_by_side: dict[str, Any]) -> None:
    s = side_by_side
    for policy in POLICIES:
        report = audit(_mine(s["requests"], policy), s["truth"], agent_token="beamcrawl", min_delay=DELAY)
        assert report.violations == 0, f"{policy}: {report.summary()}"
