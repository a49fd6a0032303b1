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
"""

from __future__ import annotations

import glob
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.archive.warc_revisit import REVISIT_PROFILE_1_1
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


@pytest.fixture(scope="module")
def site() -> Iterator[_Site]:
    with serving(_Site()) as s:
        yield s


@pytest.fixture(scope="module")
def crawl(site: _Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("unchanged")
    base = f"http://127.0.0.1:{site.port}"
    seeds = work / "seeds.txt"
    seeds.write_text("".join(f"{base}{p}\n" for p in ("/", "/static", "/changes", "/cut")))
    out = work / "out"
    cmd = [
        sys.executable, "-m", "beamcrawl.cli.main", "crawl",
        "--seeds", str(seeds), "--out", str(out), "--rounds", str(ROUNDS), "--allow-private-networks",
        "--min-delay", "0.05", "--round-window", "2", "--runner", "FnApiRunner",
        "--revisit-policy", "uniform", "--min-revisit-interval", "0.001", "--max-body-bytes", str(BODY_CAP),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


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


def test_an_unchanged_page_is_one_response_and_then_revisits_of_it(site: _Site, crawl: Path) -> None:
    assert site.visits["/static"] == ROUNDS  # fetched whole every round: no validators
    records = _captures(crawl)["static"]
    assert [r["type"] for r in records] == ["response", "revisit", "revisit"]
    first = records[0]
    for r in records[1:]:
        assert r["profile"] == REVISIT_PROFILE_1_1
        assert r["refers_uri"] == first["uri"] and r["refers_date"] == first["date"]
        assert r["digest"] == first["digest"]


def test_a_changed_page_is_stored_again_and_later_revisits_refer_to_the_new_copy(site: _Site, crawl: Path) -> None:
    records = _captures(crawl)["changes"]
    # visits 1 and 2 serve version 0, visit 3 version 1
    assert [r["type"] for r in records] == ["response", "revisit", "response"]
    assert records[1]["refers_date"] == records[0]["date"]
    assert records[2]["digest"] != records[0]["digest"]


def test_a_truncated_body_is_stored_once(site: _Site, crawl: Path) -> None:
    records = _captures(crawl)["cut"]
    assert [r["type"] for r in records] == ["response", "revisit", "revisit"]
    assert records[0]["truncated"] == "length"
    assert all(r["refers_date"] == records[0]["date"] for r in records[1:])


def test_warcio_check_accepts_every_file(crawl: Path) -> None:
    files = sorted(glob.glob(str(crawl / "warc" / "round=*" / "*.warc.gz")))
    assert files
    check = subprocess.run(
        [str(Path(sys.executable).parent / "warcio"), "check", "-v", *files], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    assert "digest present but not checked (revisit)" in check.stdout
