"""Store once across rounds: a page without validators, fetched again unchanged, is archived
as a revisit of its own first capture, never as a second copy of its payload.

Such a page is revisited with a plain GET (there is nothing to make it conditional), so the
server sends the whole body again. The crawl keeps, in the URL's revisit state, when its
copy was stored and that copy's payload digest; a later 200 with the same digest becomes an
identical-payload-digest revisit record naming the URL itself. A page whose bytes change
gets a new response, and the revisits after it refer to that one.

The server here is the test's own (loopback), serving exactly the shapes under test:
``/static`` (never changes, no ETag or Last-Modified), ``/changes`` (a new body on its
third visit) and ``/cut`` (a body larger than the crawl's body cap, so each capture is
truncated the same way).

The crawl runs on both set-ups (``tests/crawl_setups.py``): the embedded store in process,
and the Bigtable emulator with Flink's local mini-cluster. Besides the WARC records, the
revisit state each round carried to the next is read from the store: what each visit saw
(visits, changes, outcomes, the evidence of the change-rate estimate), the copy it keeps
(the WARC capture it names) and its next visit.
"""

from __future__ import annotations

import glob
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
from aiohttp import web
from crawl_setups import crawl_store, runner_args  # tests/crawl_setups.py
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.archive.warc_revisit import REVISIT_PROFILE_1_1
from beamcrawl.core.policy.change_rate import OUTCOME_CODES, RevisitState
from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.stores.base import open_store
from loopback import LoopbackServer, serving  # noqa: E402  (tests/loopback.py)

pytestmark = pytest.mark.e2e

ROUNDS = 3
BODY_CAP = 4096


class _Site(LoopbackServer):
    """A loopback server for three pages, counting visits per path."""

    def __init__(self) -> None:
        super().__init__()
        self.visits: dict[str, int] = defaultdict(int)

    def _page(self, path: str) -> bytes:
        n = self.visits[path]
        if path == "/static":
            return b"<html><body><p>the same words every time</p></body></html>"
        if path == "/changes":
            version = 1 if n >= 3 else 0
            return f"<html><body><p>version {version}</p></body></html>".encode()
        return b"<html><body><p>" + b"long text " * (BODY_CAP // 5) + b"</p></body></html>"

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        if path == "/robots.txt":
            return web.Response(status=404)
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in ("/static", "/changes", "/cut"))
            return web.Response(body=f"<html><body>{links}</body></html>".encode(), content_type="text/html")
        self.visits[path] += 1
        return web.Response(body=self._page(path), content_type="text/html")


@dataclass
class Crawl:
    site: _Site
    out: Path
    states: dict[str, RevisitState]  # by URL path: the revisit state of its next visit's row


@pytest.fixture(scope="module", params=["embedded", "flink-bigtable"])
def crawl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    work = tmp_path_factory.mktemp(f"unchanged-{request.param}")
    out = work / "out"
    with serving(_Site()) as site, crawl_store(request, request.param, out) as store:
        base = f"http://127.0.0.1:{site.port}"
        seeds = work / "seeds.txt"
        seeds.write_text("".join(f"{base}{p}\n" for p in ("/", "/static", "/changes", "/cut")))
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl",
            "--seeds", str(seeds), "--out", str(out), "--store", store, "--rounds", str(ROUNDS),
            "--allow-private-networks", "--min-delay", "0.05", "--round-window", "2",
            "--revisit-policy", "uniform", "--min-revisit-interval", "0.001", "--max-body-bytes", str(BODY_CAP),
            *runner_args(request.param),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with open_store(store) as s:
            entries = [FrontierEntry.from_cells(cells) for _, cells in s.read_range("frontier")]
        states = {e.url[len(base) :]: RevisitState.from_dict(e.revisit) for e in entries if e.source == "revisit"}
        yield Crawl(site, out, states)


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


def test_the_revisit_state_carried_across_rounds_is_what_the_visits_saw(crawl: Crawl) -> None:
    """The store holds, for each page's next visit, what its visits saw: every visit counted,
    the one change seen (only by the page that changed), one outcome letter a visit, the
    estimator's evidence (an interval a revisit, 1 where it found a change), the copy kept
    (the WARC capture later revisits refer to) and a next visit."""
    first, unchanged, changed = (OUTCOME_CODES[k] for k in ("first", "unchanged", "changed"))
    captures = _captures(crawl.out)
    static, changes = crawl.states["/static"], crawl.states["/changes"]
    for state in (static, changes):
        assert state.visits == ROUNDS and state.status == 200 and state.next_due is not None
        assert [flag for _, flag in state.history] == [0, 1 if state is changes else 0]
        assert all(interval > 0 for interval, _ in state.history)
    assert static.changes == 0 and static.outcomes == first + unchanged + unchanged
    assert changes.changes == 1 and changes.outcomes == first + unchanged + changed
    # The copy held is the capture the WARC has as a response: the first for the static page,
    # the third (version 1) for the changed one.
    for state, record in ((static, captures["static"][0]), (changes, captures["changes"][2])):
        assert record["type"] == "response"
        assert state.digest == record["digest"]
        assert abs(state.stored_at - _epoch(record["date"])) < 1.0
    assert changes.checksum != static.checksum and changes.changed_at > static.changed_at
    # A change seen makes the estimated change rate higher than none seen.
    assert changes.lam > static.lam
