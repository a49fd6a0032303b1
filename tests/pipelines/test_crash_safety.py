"""Nothing lost: kill a crawl at chosen points, rerun it, and check that nothing was lost.

Each scenario runs the real CLI as a subprocess against simweb and kills it with SIGKILL
(no clean-up of any kind) either from inside, at a named crash point
(``BEAMCRAWL_CRASH_AT``, see ``beamcrawl/core/runtime/faults.py``), or from outside, mid-fetch,
once the server has answered a few requests, on the embedded store, on the Bigtable
emulator, and on Flink (its local mini-cluster, in the job server the crawl starts) with the
emulator. Nothing the killed crawl started may live on: on Flink its job server, which would
otherwise run on as an orphan JVM. The killed crawl leaves its round lease
held by a dead process; the rerun must take it over at once and finish the round. Then,
from the committed outputs and the store (docs/ARCHITECTURE.md §3, "Nothing lost"):

- every URL that a committed page links to (followably) is in the seen set, and either
  has a frontier row or has been fetched (a committed fetch event) or refused by robots;
- every URL in the seen set is queued, fetched (committed) or refused by robots;
- every page the server served is committed or still queued (to be fetched again).

Links the crawl refuses by their shape (core/urls/urlshape.py: PDFs, repeated segments ...) and
links of pages recorded as copies are never offered to the seen set, so they are not
expected there.

A multi-round crawl is also killed at seeded random moments, three times, then run to the
end: on top of the above, every response record in the committed WARC files has its fetch
event, and a URL stored twice was fetched by a killed attempt (a repeat the invariant allows,
never a loss).

The lease itself is checked directly too: a dead local owner's lease is taken over at
once, a live owner's is respected, and a reused pid is not mistaken for the owner.
"""

from __future__ import annotations

from collections import Counter

import glob
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.urls.urlnorm import fingerprint, normalize
from beamcrawl.core.urls.urlshape import check as shape_check
from beamcrawl.pipelines.crawl_errors import CrawlError
from beamcrawl.pipelines.lease import RoundLease
from beamcrawl.schemas.records import FrontierEntry, UrlState, key_fp
from beamcrawl.simweb.testing import SimwebHandle, running_simweb
from beamcrawl.stores.base import Mutation, open_store
from crawl_setups import IN_PROCESS, runner_args  # noqa: E402  (tests/crawl_setups.py)

HOSTS = 6
PAGES = 12
MASK = (1 << 64) - 1  # Parquet keeps fingerprints as signed int64

# (crash point or "mid-fetch", store backend). The seeds are queued by the same function
# as discovered URLs, so its first hit is the seeds and the second the URL-seen stage.
SCENARIOS = [
    ("url_seen.after_frontier_write@1", "embedded"),
    ("url_seen.after_frontier_write@2", "embedded"),
    ("mid-fetch", "embedded"),
    ("compact.merged", "threads-embedded"),
    ("commit.before", "embedded"),
    ("commit.after_files", "embedded"),
    ("commit.after_requeue", "embedded"),
    ("commit.after_frontier_deletes", "embedded"),
    ("url_seen.after_frontier_write@2", "bigtable"),
    ("commit.after_files", "bigtable"),
    # On Flink (its local mini-cluster in the job server the crawl starts, the SDK workers in
    # the crawl's process): a kill inside a stage, from outside mid-fetch, and in the commit.
    ("url_seen.after_frontier_write@2", "flink-bigtable"),
    ("mid-fetch", "flink-bigtable"),
    ("commit.after_requeue", "flink-bigtable"),
]


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory):
    with running_simweb(str(tmp_path_factory.mktemp("crashweb")), hosts=HOSTS, seed=9, pages_per_host=PAGES) as w:
        yield w


def _command(
    web: SimwebHandle,
    work: Path,
    store: str,
    rounds: int = 1,
    min_delay: float = 0.05,
    window: float = 2.0,
    runner: Sequence[str] = IN_PROCESS,
) -> list[str]:
    seeds = work / "seeds.txt"
    seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
    return [
        sys.executable, "-m", "beamcrawl.cli.main", "crawl",
        "--seeds", str(seeds), "--out", str(work / "out"), "--store", store, "--rounds", str(rounds),
        "--resolve", "*=127.0.0.1", "--allow-private-networks",
        "--min-delay", str(min_delay), "--round-window", str(window), *runner,
    ]  # fmt: skip


def _ours(web: SimwebHandle, since: int) -> list[dict[str, Any]]:
    return [r for r in web.requests(sync=False)[since:] if "beamcrawl" in r.get("ua", "")]


def _crash(web: SimwebHandle, cmd: list[str], point: str, since: int) -> subprocess.CompletedProcess[str] | None:
    """Runs the crawl until it is killed at ``point``; returns None for an outside kill."""
    if point != "mid-fetch":
        env = dict(os.environ, BEAMCRAWL_CRASH_AT=point)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, (
            f"crash point {point} not reached (exit {proc.returncode}): {proc.stderr[-2000:]}"
        )
        return proc
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(_ours(web, since)) < HOSTS + 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # robots.txt for every host, then a few pages
    assert child.poll() is None, "the crawl ended before it could be killed mid-fetch"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    return None


def _rows(out: Path, kind: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(glob.glob(str(out / kind / "round=*" / "*.parquet"))):
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def check_nothing_lost(out: Path, store_uri: str, served: list[dict[str, Any]], port: int) -> dict[str, int]:
    """Asserts the invariants in the module docstring; returns counts for messages."""
    pages = _rows(out, "pages")
    links = _rows(out, "links")
    committed = {row["url_fp"] & MASK for row in pages}
    with open_store(store_uri) as store:
        # A URL queued by a crashed attempt but never marked seen gets just its fetch
        # outcome's cell (u:o, which holds its URL) when it is fetched.
        seen = {key_fp(k): c for k, c in store.read_range("urls")}
        entries = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
    queued = {e.fp for e in entries}
    # Every page a committed round fetched is queued for its next visit (a 2xx is never
    # dropped), with the state its conditional request needs.
    revisits = {e.fp: e for e in entries if e.source == "revisit"}
    ok_pages = {
        row["url_fp"] & MASK: row["url"]
        for row in pages
        if row["outcome"] == "fetched" and row["source"] != "robots" and 200 <= (row["status"] or 0) < 300
    }
    unscheduled = sorted(url for fp, url in ok_pages.items() if fp not in revisits)
    assert not unscheduled, f"fetched but no next visit queued: {unscheduled[:5]}"
    stateless = sorted(url for fp, url in ok_pages.items() if not (revisits[fp].revisit or {}).get("visits"))
    assert not stateless, f"next visit queued without the page's state: {stateless[:5]}"

    def done(fp: int) -> bool:
        return fp in queued or fp in committed or UrlState.from_cells(seen[fp]).state == "robots_disallowed"

    copies = {row["url"] for row in pages if row.get("duplicate_of")}  # their links are not followed
    followable = {
        e["dst_fp"] & MASK: e["dst"]
        for e in links
        if not e["nofollow"] and e["kind"] != "canonical" and e["src"] not in copies and shape_check(e["dst"]) is None
    }
    unseen = sorted(url for fp, url in followable.items() if fp not in seen)
    assert not unseen, f"linked from committed pages but never seen: {unseen[:5]}"
    lost_links = sorted(url for fp, url in followable.items() if not done(fp))
    assert not lost_links, f"linked, seen, but neither queued nor fetched: {lost_links[:5]}"
    lost_seen = sorted(UrlState.from_cells(cells).url or f"{fp:x}" for fp, cells in seen.items() if not done(fp))
    assert not lost_seen, f"seen but neither queued nor fetched: {lost_seen[:5]}"
    fetched = {
        fingerprint(normalize(f"http://{r['host']}:{port}{r['path']}"))
        for r in served
        if not r["path"].startswith("/robots")  # robots.txt and where it redirects to
    }
    lost_pages = sorted(fp for fp in fetched if fp not in committed and fp not in queued)
    by_fp = {fingerprint(normalize(f"http://{r['host']}:{port}{r['path']}")): r["path"] for r in served}
    assert not lost_pages, f"{len(lost_pages)} page(s) served but neither committed nor queued: " + ", ".join(
        by_fp[fp] for fp in lost_pages[:5]
    )
    return {"pages": len(pages), "links": len(followable), "seen": len(seen), "queued": len(queued)}


@pytest.mark.e2e  # runs whole crawl rounds (and so is slow)
@pytest.mark.parametrize(("point", "backend"), SCENARIOS, ids=[f"{p}-{b}" for p, b in SCENARIOS])
def test_killed_round_reruns_and_loses_nothing(
    web: SimwebHandle, tmp_path: Path, request: pytest.FixtureRequest, point: str, backend: str
) -> None:
    store = (
        request.getfixturevalue("bigtable_uri")
        if backend.endswith("bigtable")
        else f"sqlite:///{tmp_path}/out/store.sqlite"
    )
    cmd = _command(web, tmp_path, store, runner=runner_args(backend))
    since = len(web.requests())

    _crash(web, cmd, point, since)
    # Nothing the killed crawl started lives on (on Flink, its job server and mini-cluster).
    assert not _still_writing(tmp_path / "out" / "logs"), "a process of the killed crawl is still running"
    with open_store(store) as s:
        lease = s.read_keys("meta", [b"lease"]).get(b"lease", {})
    assert lease.get("m:lease"), "the killed crawl should leave its lease behind"

    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "round 1:" in rerun.stdout  # the interrupted round again, with its lease taken over
    with open_store(store) as s:
        assert not s.read_keys("meta", [b"lease"]).get(b"lease", {}).get("m:lease"), "lease not released"

    web.sync()
    counts = check_nothing_lost(tmp_path / "out", store, _ours(web, since), web.port)
    assert counts["pages"] > 0 and counts["seen"] > counts["pages"] // 2, counts
    # Stored once: a kill before the commit marker discards the staged files; a kill after
    # it is finished by the rerun, which does not fetch and store the same pages again.
    stored = Counter(uri for uri, _ in _stored_responses(tmp_path / "out"))
    twice = sorted(uri for uri, n in stored.items() if n > 1)
    assert not twice, f"stored twice after a kill at {point}: {twice[:5]}"


def _still_writing(logs: Path, wait: float = 30.0) -> list[int]:
    """The pids of processes that still hold a file of ``logs`` open, once ``wait`` seconds
    have let those that are ending end: what a killed crawl left running."""
    deadline = time.monotonic() + wait
    while True:
        holders = []
        for fd_dir in glob.glob("/proc/[0-9]*/fd"):
            try:
                targets = [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]
            except OSError:  # gone, or not ours to read
                continue
            if any(t.startswith(f"{logs}/") for t in targets):
                holders.append(int(fd_dir.split("/")[2]))
        if not holders or time.monotonic() > deadline:
            return holders
        time.sleep(0.2)


def _stored_responses(out: Path) -> list[tuple[str, str]]:
    """``(target URI, "warc/round=N/part…@offset")`` of every committed response record."""
    found = []
    for path in sorted(glob.glob(str(out / "warc" / "round=*" / "*.warc.gz"))):
        rel = str(Path(path).relative_to(out))
        with open(path, "rb") as fh:
            records = ArchiveIterator(fh)
            for record in records:
                if record.rec_type == "response":
                    found.append(
                        (record.rec_headers.get_header("WARC-Target-URI"), f"{rel}@{records.get_record_offset()}")
                    )
    return found


@pytest.mark.e2e  # runs whole crawl rounds (and so is slow)
def test_random_kills_across_rounds_lose_nothing(tmp_path: Path) -> None:
    """Three SIGKILLs at seeded random moments of a multi-round crawl, then a run to the end."""
    rng = random.Random(20240607)
    with running_simweb(str(tmp_path / "web"), hosts=8, seed=4, pages_per_host=60, latency_scale=0) as web:
        store = f"sqlite:///{tmp_path}/out/store.sqlite"
        # 0.25 s delay, 1.5 s window: ~5 pages a host a round, so every round has work; 8
        # rounds take well over 10 s, so each random moment falls inside a run, however
        # fast the machine is.
        cmd = _command(web, tmp_path, store, rounds=8, min_delay=0.25, window=1.5)
        killed_requests: list[dict[str, Any]] = []
        kills = 0
        for _ in range(3):
            before = len(web.requests())
            child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                child.wait(timeout=rng.uniform(3.0, 10.0))  # start-up alone takes ~3 s
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGKILL)
                child.wait(timeout=30)
                kills += 1
            killed_requests.extend(_ours(web, before))
        to_the_end = _command(web, tmp_path, store, rounds=2, min_delay=0.25, window=1.5)
        final = subprocess.run(to_the_end, capture_output=True, text=True, timeout=300)
        assert final.returncode == 0, final.stderr[-3000:]
        web.sync()
        served = _ours(web, 0)
        port = web.port

    assert kills == 3, "a random moment fell after its run had ended: that kill tested nothing"
    out = tmp_path / "out"
    counts = check_nothing_lost(out, store, served, port)
    assert counts["pages"] > 0, counts

    # Stored once, or recorded: every response record has its fetch event pointing at it ...
    responses = _stored_responses(out)
    events = {row["blob"]: row["url"] for row in _rows(out, "pages") if row.get("blob")}
    unrecorded = [(uri, blob) for uri, blob in responses if events.get(blob) != uri]
    assert not unrecorded, f"response records without their fetch event: {unrecorded[:3]}"
    # ... and a URL stored twice was fetched by an attempt that was killed (a repeat).
    by_url: dict[str, int] = {}
    for uri, _blob in responses:
        by_url[uri] = by_url.get(uri, 0) + 1
    by_killed = {f"http://{r['host']}:{port}{r['path']}" for r in killed_requests}
    twice = [u for u, n in by_url.items() if n > 1 and "robots" not in u]
    assert all(u in by_killed for u in twice), [u for u in twice if u not in by_killed][:3]


# --- the round lease after a crash -------------------------------------------------------


@pytest.fixture(params=["embedded", "bigtable"])
def lease_store(request: pytest.FixtureRequest, tmp_path: Path):
    uri = request.getfixturevalue("bigtable_uri") if request.param == "bigtable" else str(tmp_path / "s")
    with open_store(uri) as store:
        yield store


def _hold(store: Any, owner: str, acquired: float, ttl: float = 3600.0) -> None:
    value = json.dumps({"owner": owner, "acquired": acquired, "expires": acquired + ttl}).encode()
    store.mutate("meta", [Mutation.set(b"lease", {"m:lease": value})])


def _exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_lease_of_a_dead_local_process_is_taken_over(lease_store: Any) -> None:
    _hold(lease_store, f"{socket.gethostname()}:{_exited_pid()}:dead", time.time())
    with RoundLease(lease_store) as lease:
        held = lease_store.read_keys("meta", [b"lease"])[b"lease"]["m:lease"]
        assert json.loads(held)["owner"] == lease.owner
    assert lease_store.read_keys("meta", [b"lease"]) == {}


def test_lease_of_a_live_process_is_respected(lease_store: Any) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        _hold(lease_store, f"{socket.gethostname()}:{sleeper.pid}:alive", time.time())
        with pytest.raises(CrawlError, match="another round of this crawl is running"):
            RoundLease(lease_store).acquire()
        # The same pid, but a process that started after the lease was taken: pid reuse.
        _hold(lease_store, f"{socket.gethostname()}:{sleeper.pid}:older", time.time() - 600)
        with RoundLease(lease_store):
            pass
    finally:
        sleeper.kill()
        sleeper.wait()


def test_lease_with_this_process_pid(lease_store: Any) -> None:
    # An earlier process with this pid (a rerun in a fresh container) is gone...
    _hold(lease_store, f"{socket.gethostname()}:{os.getpid()}:earlier", time.time())
    with RoundLease(lease_store):
        # ...but a lease this process holds now is not.
        with pytest.raises(CrawlError, match="another round"):
            RoundLease(lease_store).acquire()


def test_lease_of_another_machine_waits_for_expiry(lease_store: Any) -> None:
    _hold(lease_store, "some-other-host:1234:x", time.time())
    with pytest.raises(CrawlError, match="some-other-host"):
        RoundLease(lease_store).acquire()
    _hold(lease_store, "some-other-host:1234:x", time.time() - 7200, ttl=3600)  # expired
    with RoundLease(lease_store):
        pass
