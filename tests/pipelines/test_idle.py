"""A crawl with nothing due waits (or, with --exit-when-idle, exits) instead of running
empty rounds; the wait is not counted as a round (pipelines/idle.py).

Through the real CLI against simweb on loopback: the frontier is queued with ``beamcrawl
submit``, then its rows are moved a few seconds into the future (or their host paused with
``beamcrawl hosts set-policy``), so nothing is due when the crawl starts.
"""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beamcrawl.pipelines.commit import next_round
from beamcrawl.pipelines.seeding import submit_urls
from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import Mutation, open_store

CLI = [sys.executable, "-m", "beamcrawl.cli.main"]
FETCH = ["--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.1", "--round-window", "2",
         "--runner", "FnApiRunner"]  # fmt: skip


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def _queue(out: Path, urls: list[str]) -> None:
    """Queues URLs as a crawl's seeds would be (the crawl's own embedded store)."""
    out.mkdir(parents=True, exist_ok=True)
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        assert submit_urls(store, urls, int(time.time() * 1000)).accepted == len(urls)


def _postpone_frontier(store_uri: str, due: float) -> int:
    """Moves every frontier row to fall due at ``due`` (epoch seconds); returns how many."""
    with open_store(store_uri) as store:
        rows = list(store.read_range("frontier"))
        moved = []
        for _key, cells in rows:
            entry = FrontierEntry.from_cells(cells)
            entry.due_ms = int(due * 1000)
            moved.append(entry)
        store.mutate("frontier", [Mutation.delete_row(k) for k, _ in rows])
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in moved])
    return len(moved)


def _reports(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "reports").glob("round-*.json"))]


def _rounds_counted(store_uri: str) -> int:
    with open_store(store_uri) as store:
        return next_round(store) - 1


@pytest.fixture
def web(tmp_path: Path):
    with running_simweb(str(tmp_path / "web"), hosts=2, seed=3, pages_per_host=5, latency_scale=0) as handle:
        yield handle


def test_nothing_due_waits_until_the_next_url_falls_due_then_runs_one_round(web, tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = f"sqlite:///{out}/store.sqlite"
    seeds = [web.base_url(h) for h in web.hosts]
    _queue(out, seeds)
    due = time.time() + 20.0  # past the CLI's start-up, even on a busy machine
    assert _postpone_frontier(store, due) == len(seeds)
    (tmp_path / "seeds.txt").write_text("\n".join(seeds) + "\n")

    proc = _run("crawl", "--seeds", str(tmp_path / "seeds.txt"), "--out", str(out), "--rounds", "1", *FETCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"falls due at {time.strftime('%Y-%m-%dT%H:%M', time.gmtime(due))}" in proc.stdout, proc.stdout
    assert "2 URLs queued for later" in proc.stdout, proc.stdout
    # It waited: the one round ran after the URLs fell due, and fetched them ...
    reports = _reports(out)
    assert [r["round"] for r in reports] == [1], reports
    assert calendar.timegm(time.strptime(reports[0]["started_at"], "%Y-%m-%dT%H:%M:%SZ")) >= int(due), reports[0]
    assert reports[0]["responses"] > 0, reports[0]
    web.sync()
    fetched = [r for r in web.requests() if "beamcrawl" in r.get("ua", "")]
    assert fetched and min(r["start"] for r in fetched) >= due - 0.01, fetched[:3]
    # ... and the wait was not a round.
    assert _rounds_counted(store) == 1


def test_exit_when_idle_says_why_and_runs_no_round(web, tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = f"sqlite:///{out}/store.sqlite"
    host = web.hosts[0]
    _queue(out, [web.base_url(host)])
    policy = _run("hosts", "set-policy", web.base_url(host), "--pause-until", "1h", "--crawl", str(out))
    assert policy.returncode == 0, policy.stderr

    proc = _run("crawl", "--out", str(out), "--rounds", "1000", "--exit-when-idle", *FETCH, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "nothing due now" in proc.stdout and "1 due URLs on hosts paused by policy" in proc.stdout, proc.stdout
    assert "exiting (--exit-when-idle)" in proc.stdout, proc.stdout
    assert "(in 59m" in proc.stdout or "(in 1h" in proc.stdout, proc.stdout  # the pause's end
    assert "running" not in proc.stdout, proc.stdout
    assert _reports(out) == []
    assert _rounds_counted(store) == 0
    web.sync()
    assert not [r for r in web.requests() if "beamcrawl" in r.get("ua", "")]
