"""A crawl with ``--purpose ai-train`` through the real CLI obeys the sites' usage preferences.

Three hosts on one loopback server: one refuses ai-train in robots.txt (Content-Usage, except
under ``/open/``), one refuses it in the Content-Usage header of its pages, one allows it
(Content-Signal; one of its pages sends a header that does not parse). One round, and then
what the server was asked for, the pages Parquet, the WARC records, the links, the report, the
summary and crawl.json.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from loopback import LoopbackServer, serving  # tests/loopback.py

CLI = [sys.executable, "-m", "beamcrawl.cli.main"]

ROBOTS = {
    "refuse-robots.test": "User-agent: *\nAllow: /\nContent-Usage: / train-ai=n\nContent-Usage: /open/ train-ai=y\n",
    "refuse-header.test": "User-agent: *\nAllow: /\n",
    # and one line that states nothing (no path): counted, ignored
    "allow.test": "User-agent: *\nContent-Signal: search=yes, ai-train=yes\nContent-Usage: train-ai=n\nAllow: /\n",
}


class _Sites(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        host = request.host.partition(":")[0]
        self.asked.append((host, request.path))
        if request.path == "/robots.txt":
            return web.Response(text=ROBOTS[host], content_type="text/plain")
        headers = {}
        if host == "refuse-header.test":
            headers["Content-Usage"] = "train-ai=n, search=y"
        if host == "allow.test" and request.path == "/bad":
            headers["Content-Usage"] = "train-ai=n,,("  # does not parse: says nothing
        body = f"<html><head><title>{host}{request.path}</title></head><body><a href='/next'>next</a> <a href='/bad'>b</a></body></html>"
        return web.Response(text=body, content_type="text/html", headers=headers)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    work = tmp_path_factory.mktemp("usage")
    out = work / "out"
    with serving(_Sites()) as server:
        port = server.port
        seeds = work / "seeds.txt"
        urls = [
            f"http://refuse-robots.test:{port}/",
            f"http://refuse-robots.test:{port}/open/page",
            f"http://refuse-header.test:{port}/",
            f"http://allow.test:{port}/",
            f"http://allow.test:{port}/bad",
        ]
        seeds.write_text("\n".join(urls) + "\n")
        proc = subprocess.run(
            [
                *CLI,
                "crawl",
                "--seeds",
                str(seeds),
                "--out",
                str(out),
                "--rounds",
                "1",
                "--purpose",
                "ai-train",
                "--resolve",
                "*=127.0.0.1",
                "--allow-private-networks",
                "--min-delay",
                "0",
                "--round-window",
                "2",
                "--runner",
                "FnApiRunner",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        asked = list(server.asked)
    pages = pq.read_table(str(out / "pages")).to_pylist()
    links = pq.read_table(str(out / "links")).to_pylist()
    warc = {}
    for path in glob.glob(str(out / "warc" / "*" / "*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    warc[rec.rec_headers.get_header("WARC-Target-URI")] = rec.rec_headers.get_header(
                        "WARC-Usage-Preferences"
                    )
    report = json.load(open(sorted(glob.glob(str(out / "reports" / "round-*.json")))[-1]))
    return {
        "port": port,
        "asked": asked,
        "pages": {(r["host"].partition(":")[0], r["url"].split(str(port), 1)[1]): r for r in pages},
        "links": links,
        "warc": warc,
        "report": report,
        "console": proc.stdout + proc.stderr,
        "identity": json.loads((out / "crawl.json").read_text()),
    }


@pytest.mark.e2e
def test_a_purpose_refused_in_robots_txt_is_never_requested(crawled):
    asked = set(crawled["asked"])
    assert ("refuse-robots.test", "/robots.txt") in asked
    assert ("refuse-robots.test", "/") not in asked  # Content-Usage: / train-ai=n
    assert ("refuse-robots.test", "/open/page") in asked  # the longer rule allows it
    assert crawled["report"]["usage_refused"] == 1
    assert ("refuse-robots.test", "/") not in crawled["pages"]  # no request, no event


@pytest.mark.e2e
def test_a_purpose_refused_by_the_header_is_not_archived_or_parsed(crawled):
    row = crawled["pages"][("refuse-header.test", "/")]
    assert row["outcome"] == "fetched" and row["status"] == 200
    assert row["blob"] is None and row["usage_ai_train"] == "refused"
    assert row["usage_refused"].startswith("ai-train refused by header Content-Usage: train-ai=n")
    port = crawled["port"]
    assert f"http://refuse-header.test:{port}/" not in crawled["warc"]
    assert not [link for link in crawled["links"] if link["src_host"].startswith("refuse-header.test")]
    assert crawled["report"]["usage_header_refused"] == 1


@pytest.mark.e2e
def test_allowed_pages_carry_the_preferences_in_parquet_and_warc(crawled):
    port = crawled["port"]
    for host, path in [("allow.test", "/"), ("refuse-robots.test", "/open/page")]:
        row = crawled["pages"][(host, path)]
        assert row["blob"] is not None and row["usage_ai_train"] == "allowed", row
        assert row["usage_search"] is None  # not a purpose of this crawl
        assert crawled["warc"][f"http://{host}:{port}{path}"] == "ai-train=allowed"
    assert [link for link in crawled["links"] if link["src_host"].startswith("allow.test")]
    # a header that does not parse says nothing: robots.txt's ai-train=yes stands, counted
    assert crawled["pages"][("allow.test", "/bad")]["usage_ai_train"] == "allowed"
    assert crawled["report"]["usage_bad_header"] == 1
    assert crawled["report"]["usage_bad_robots_lines"] == 1


@pytest.mark.e2e
def test_the_purpose_is_the_crawls_identity_and_shown(crawled):
    assert crawled["identity"]["purposes"] == ["ai-train"]
    assert crawled["report"]["purposes"] == ["ai-train"]
    assert "purposes ai-train: refused by the sites' usage preferences 1 not fetched" in crawled["console"]
