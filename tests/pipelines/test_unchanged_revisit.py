"""Store once across rounds: a page without validators, fetched again unchanged, is archived
as a revisit of its own first capture, never as a second copy of its payload.

Such a page is revisited with a plain GET (there is nothing to make it conditional), so the
server sends the whole body again. The crawl keeps, in the URL's revisit state, when its
copy was stored and that copy's payload digest; a later 200 with the same digest becomes an
identical-payload-digest revisit record naming the URL itself. A page whose bytes change
gets a new response, and the revisits after it refer to that one.

The server here is the test's own (loopback), serving exactly the shapes under test:
``/static`` (never changes, no ETag or Last-Modified), ``/changes`` (a new body on its
third visit), ``/flips`` (a new body on every visit) and ``/cut`` (a body larger than the
crawl's body cap, so each capture is truncated the same way).

Everything runs on both set-ups (``tests/crawl_setups.py``): the embedded store in
process, and the Bigtable emulator with Flink's local mini-cluster, each with a loopback
site of its own (the visits are counted per path). Besides the WARC records, the revisit
state each round carried to the next is read from the store: what the visits saw (visits,
changes counted across rounds, outcomes, the evidence of the change-rate estimate, the
content's checksum), the copy kept (the WARC response it names), the last check and the
next visit. A second, two-round crawl under the adaptive policy checks that a page seen
to change is due again sooner than one seen unchanged.
"""

from __future__ import annotations

import glob
import math
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pyarrow.parquet as pq
import pytest
from aiohttp import web
from crawl_setups import crawl_store, runner_args  # tests/crawl_setups.py
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.archive.warc_revisit import REVISIT_PROFILE_1_1
from beamcrawl.core.policy.change_rate import OUTCOME_CODES, RevisitState
from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.freshness import UNIFORM_PRIORITY
from loopback import LoopbackServer, serving  # noqa: E402  (tests/loopback.py)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # whole crawls: `pytest -m "not slow and not e2e"` leaves it out

ROUNDS = 3
BODY_CAP = 4096
PAGES = ("/static", "/changes", "/flips", "/cut")
MIN_REVISIT = 0.001  # --min-revisit-interval: under the uniform policy, every page is due again at once
# The adaptive crawl: two rounds, its pages' change rate assumed one change per PRIOR_INTERVAL
# seconds before their visits tell (--prior-change-interval). Both fall due again ln 2 ·
# PRIOR_INTERVAL (0.035 s) after their first fetch, before round 1 has even committed the
# rows (a quarter of a second after its last fetch, in process, at the fastest), so round 2
# revisits both whatever the order and spacing of the fetches.
ADAPTIVE_ROUNDS = 2
PRIOR_INTERVAL = 0.05
# Times are epoch seconds in floats (a step of 2.4e-7 s at today's dates): two computed ones
# agree to within this, far below MIN_REVISIT.
TIME_TOLERANCE = 1e-5


class _Site(LoopbackServer):
    """A loopback server for four pages, counting visits per path; ``/changes`` serves its
    new version from visit ``change_at`` on."""

    def __init__(self, change_at: int = 3) -> None:
        super().__init__()
        self.change_at = change_at
        self.visits: dict[str, int] = defaultdict(int)

    def _page(self, path: str) -> bytes:
        n = self.visits[path]
        if path == "/static":
            return b"<html><body><p>the same words every time</p></body></html>"
        if path == "/changes":
            version = 1 if n >= self.change_at else 0
            return f"<html><body><p>version {version}</p></body></html>".encode()
        if path == "/flips":
            return f"<html><body><p>edition {n}</p></body></html>".encode()
        return b"<html><body><p>" + b"long text " * (BODY_CAP // 5) + b"</p></body></html>"

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        if path == "/robots.txt":
            return web.Response(status=404)
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)
            return web.Response(body=f"<html><body>{links}</body></html>".encode(), content_type="text/html")
        self.visits[path] += 1
        return web.Response(body=self._page(path), content_type="text/html")


@dataclass
class Crawl:
    site: _Site
    out: Path
    entries: dict[str, FrontierEntry]  # by URL path: its next visit's frontier row (source "revisit")
    states: dict[str, RevisitState]  # by URL path: that row's revisit state


def _crawl(request: pytest.FixtureRequest, work: Path, site: _Site, pages: tuple[str, ...], args: list[str]) -> Crawl:
    """Crawls ``pages`` of ``site`` through the CLI on the set-up ``request.param`` and reads
    the revisit rows the crawl left in the store."""
    out = work / "out"
    with crawl_store(request, request.param, out) as store:
        base = f"http://127.0.0.1:{site.port}"
        seeds = work / "seeds.txt"
        seeds.write_text("".join(f"{base}{p}\n" for p in pages))
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl",
            "--seeds", str(seeds), "--out", str(out), "--store", store,
            "--allow-private-networks", "--min-delay", "0.05", "--round-window", "2",
            "--min-revisit-interval", str(MIN_REVISIT), "--max-body-bytes", str(BODY_CAP),
            *args, *runner_args(request.param),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with open_store(store) as s:
            rows = [FrontierEntry.from_cells(cells) for _, cells in s.read_range("frontier")]
    entries = {e.url[len(base) :]: e for e in rows if e.source == "revisit"}
    return Crawl(site, out, entries, {p: RevisitState.from_dict(e.revisit) for p, e in entries.items()})


@pytest.fixture(scope="module", params=["embedded", "flink-bigtable"])
def crawl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    """ROUNDS rounds, uniform policy: every page revisited every round."""
    work = tmp_path_factory.mktemp(f"unchanged-{request.param}")
    with serving(_Site()) as site:
        args = ["--rounds", str(ROUNDS), "--revisit-policy", "uniform"]
        yield _crawl(request, work, site, ("/", *PAGES), args)


@pytest.fixture(scope="module", params=["embedded", "flink-bigtable"])
def adaptive(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    """ADAPTIVE_ROUNDS rounds, adaptive policy: ``/changes`` has its new version on visit 2."""
    work = tmp_path_factory.mktemp(f"adaptive-{request.param}")
    with serving(_Site(change_at=2)) as site:
        args = ["--rounds", str(ADAPTIVE_ROUNDS), "--revisit-policy", "adaptive"]
        args += ["--prior-change-interval", str(PRIOR_INTERVAL)]
        yield _crawl(request, work, site, ("/static", "/changes"), args)


def _captures(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Per URL path, its capture records (response or revisit) in round order."""
    by_path: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(glob.glob(str(out / "warc" / "round=*" / "*.warc.gz"))):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type not in ("response", "revisit"):
                    continue
                h = rec.rec_headers
                uri = h.get_header("WARC-Target-URI")
                by_path[uri.split("/", 3)[3] if uri.count("/") >= 3 else ""].append(
                    {
                        "type": rec.rec_type,
                        "date": h.get_header("WARC-Date"),
                        "uri": uri,
                        "digest": h.get_header("WARC-Payload-Digest"),
                        "profile": h.get_header("WARC-Profile"),
                        "refers_uri": h.get_header("WARC-Refers-To-Target-URI"),
                        "refers_date": h.get_header("WARC-Refers-To-Date"),
                        "truncated": h.get_header("WARC-Truncated"),
                    }
                )
    for records in by_path.values():
        records.sort(key=lambda r: r["date"])
    return by_path


def test_an_unchanged_page_is_one_response_and_then_revisits_of_it(crawl: Crawl) -> None:
    assert crawl.site.visits["/static"] == ROUNDS  # fetched whole every round: no validators
    records = _captures(crawl.out)["static"]
    assert [r["type"] for r in records] == ["response", "revisit", "revisit"]
    first = records[0]
    for r in records[1:]:
        assert r["profile"] == REVISIT_PROFILE_1_1
        assert r["refers_uri"] == first["uri"] and r["refers_date"] == first["date"]
        assert r["digest"] == first["digest"]


def test_a_changed_page_is_stored_again_and_later_revisits_refer_to_the_new_copy(crawl: Crawl) -> None:
    records = _captures(crawl.out)["changes"]
    # visits 1 and 2 serve version 0, visit 3 version 1
    assert [r["type"] for r in records] == ["response", "revisit", "response"]
    assert records[1]["refers_date"] == records[0]["date"]
    assert records[2]["digest"] != records[0]["digest"]


def test_a_truncated_body_is_stored_once(crawl: Crawl) -> None:
    records = _captures(crawl.out)["cut"]
    assert [r["type"] for r in records] == ["response", "revisit", "revisit"]
    assert records[0]["truncated"] == "length"
    assert all(r["refers_date"] == records[0]["date"] for r in records[1:])


def test_warcio_check_accepts_every_file(crawl: Crawl) -> None:
    files = sorted(glob.glob(str(crawl.out / "warc" / "round=*" / "*.warc.gz")))
    assert files
    check = subprocess.run(
        [str(Path(sys.executable).parent / "warcio"), "check", "-v", *files], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    assert "digest present but not checked (revisit)" in check.stdout


def _epoch(warc_date: str) -> float:
    return datetime.fromisoformat(warc_date.replace("Z", "+00:00")).timestamp()


def test_a_page_changed_every_visit_is_stored_every_time(crawl: Crawl) -> None:
    assert crawl.site.visits["/flips"] == ROUNDS
    records = _captures(crawl.out)["flips"]
    assert [r["type"] for r in records] == ["response"] * ROUNDS
    assert len({r["digest"] for r in records}) == ROUNDS


def _checksums(out: Path) -> dict[str, list[str]]:
    """Per URL path, the content checksum of each 2xx fetch event, in round order."""
    by_path: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for path in glob.glob(str(out / "pages" / "round=*" / "*.parquet")):
        round_no = int(Path(path).parent.name.split("=", 1)[1])
        for e in pq.read_table(path).to_pylist():
            if e["outcome"] == "fetched" and e["status"] == 200:
                by_path[urlsplit(e["url"]).path].append((round_no, e["checksum"]))
    return {p: [c for _, c in sorted(rows)] for p, rows in by_path.items()}


def test_the_revisit_state_carried_across_rounds_is_what_the_visits_saw(crawl: Crawl) -> None:
    """The store holds, for each page's next visit, what its visits saw: every visit counted,
    the changes seen (carried from round to round: ``/flips`` changed on two visits), one
    outcome letter a visit, the estimator's evidence (an interval a revisit, 1 where it
    found a change), the content's checksum, the copy kept (the WARC response later
    revisits refer to), the last check and a next visit."""
    first, unchanged, changed = (OUTCOME_CODES[k] for k in ("first", "unchanged", "changed"))
    captures, checksums = _captures(crawl.out), _checksums(crawl.out)
    static, changes, flips = (crawl.states[p] for p in ("/static", "/changes", "/flips"))
    expected = {  # page: (changes seen, outcome letters, one flag a revisit)
        "/static": (0, first + unchanged + unchanged, [0, 0]),
        "/cut": (0, first + unchanged + unchanged, [0, 0]),
        "/changes": (1, first + unchanged + changed, [0, 1]),
        "/flips": (ROUNDS - 1, first + changed + changed, [1, 1]),
    }
    for path, (n_changes, outcomes, flags) in expected.items():
        state, records = crawl.states[path], captures[path[1:]]
        assert state.visits == ROUNDS and state.status == 200, path
        assert (state.changes, state.outcomes) == (n_changes, outcomes), path
        assert [flag for _, flag in state.history] == flags, path
        assert all(interval > 0 for interval, _ in state.history), path
        # The content it holds is the last visit's; the copy held is the WARC's last
        # response of the URL, the one its later revisits refer to.
        assert state.checksum == checksums[path][-1], path
        held = [r for r in records if r["type"] == "response"][-1]
        assert state.digest == held["digest"], path
        assert abs(state.stored_at - _epoch(held["date"])) < 1.0, path
        assert all(r["refers_date"] == held["date"] for r in records[records.index(held) + 1 :]), path
        # Checked at the last visit, due again MIN_REVISIT later (the uniform policy), and
        # the frontier row is that visit: same time, the uniform priority.
        assert abs(state.checked_at - _epoch(records[-1]["date"])) < 1.0, path
        assert state.next_due == pytest.approx(state.checked_at + MIN_REVISIT, abs=TIME_TOLERANCE), path
        entry = crawl.entries[path]
        assert entry.due_ms == int(state.next_due * 1000) and entry.priority == UNIFORM_PRIORITY, path
        assert entry.reason == f"revisit: {'changed' if outcomes[-1] == changed else 'unchanged'}", path
    # The copy held is the capture the WARC has as a response: the first for the static page,
    # the third (version 1) for the changed one.
    for state, record in ((static, captures["static"][0]), (changes, captures["changes"][2])):
        assert record["type"] == "response"
        assert state.digest == record["digest"]
        assert abs(state.stored_at - _epoch(record["date"])) < 1.0
    # /changes holds its new version; the checksum it had after the first visits is gone.
    assert checksums["/changes"][0] == checksums["/changes"][1] != checksums["/changes"][2]
    assert changes.checksum != static.checksum and changes.changed_at > static.changed_at
    assert flips.changed_at == flips.checked_at and static.changed_at == static.stored_at < static.checked_at
    # A change seen makes the estimated change rate higher than none seen, two higher still.
    assert flips.lam > changes.lam > static.lam


def test_the_adaptive_policy_revisits_a_changed_page_sooner(adaptive: Crawl) -> None:
    """Both pages start from the same prior (one change per PRIOR_INTERVAL) and are visited
    twice; ``/changes`` had a new version on its second visit, ``/static`` did not. Seeing
    no change lowers the estimated rate; seeing one does not (a change in an interval many
    times PRIOR_INTERVAL long is what the prior expected, so it leaves the rate at the
    prior, or a little above): the changed page is due again sooner, each at its median
    time to the next change (``ln 2 / λ``, between --min-revisit-interval and the default
    longest interval), where the uniform policy would make both due MIN_REVISIT later."""
    first, unchanged, changed = (OUTCOME_CODES[k] for k in ("first", "unchanged", "changed"))
    assert dict(adaptive.site.visits) == {"/static": ADAPTIVE_ROUNDS, "/changes": ADAPTIVE_ROUNDS}
    static, changes = adaptive.states["/static"], adaptive.states["/changes"]
    assert (static.changes, static.outcomes, [f for _, f in static.history]) == (0, first + unchanged, [0])
    assert (changes.changes, changes.outcomes, [f for _, f in changes.history]) == (1, first + changed, [1])
    prior = 1 / PRIOR_INTERVAL
    assert static.lam < prior / 2 and changes.lam >= prior * (1 - 1e-9)
    waits = {}
    for path, state in adaptive.states.items():
        wait = state.next_due - state.checked_at
        assert wait == pytest.approx(math.log(2) / state.lam, abs=TIME_TOLERANCE), path
        assert MIN_REVISIT < wait < 86400, path
        assert adaptive.entries[path].due_ms == int(state.next_due * 1000), path
        waits[path] = wait
    assert waits["/changes"] < waits["/static"]
