"""A crawl round over a wire that lies: every answer is archived under the request it answers.

One round through the CLI (the real fetch stage, parse, WARC and Parquet writers) against
the raw keep-alive server of tests/wire_shapes.py. Its hosts send an unrequested second
response after each page (300 ms later, at once, or only a response head), lose the
answer to a page (a reset after part of the headers, a close, ``100 Continue`` and a
close), or send a page as ``Transfer-Encoding: gzip, chunked``.

Checked from the server's log and the files the round wrote: each planned request reached
the server once; every WARC response record's payload is what the server sent for that
record's URL; the smuggled answer's link was never taken; the gzipped page's link was.
"""

from __future__ import annotations

import glob
import subprocess
import sys
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

from wire_shapes import SMUGGLED, ShapeServer  # noqa: E402  (tests/wire_shapes.py)

SEEDS = {
    # every answer followed by stray bytes, whichever order the round takes the pages in
    "late.wire.test": ["/smuggle-late-a", "/smuggle-late-b", "/smuggle-late-c"],
    "now.wire.test": ["/smuggle-now-a", "/smuggle-now-b", "/smuggle-now-c"],
    "head.wire.test": ["/smuggle-head-a", "/smuggle-head-b", "/smuggle-head-c"],
    "rsthdr.wire.test": ["/page-a", "/lost-rsthdr-b", "/page-c"],
    "close.wire.test": ["/page-a", "/lost-close-b", "/page-c"],
    "info.wire.test": ["/page-a", "/lost-1xx-b", "/page-c"],
    "te.wire.test": ["/te-a"],
}


@pytest.fixture(scope="module")
def wire_round(tmp_path_factory) -> Iterator[dict]:
    work = tmp_path_factory.mktemp("wire")
    out = work / "out"
    with ShapeServer() as server:
        seeds = [f"http://{host}:{server.port}{path}" for host, paths in SEEDS.items() for path in paths]
        (work / "seeds.txt").write_text("\n".join(seeds) + "\n")
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(work / "seeds.txt"),
            "--out", str(out), "--rounds", "1", "--resolve", "*=127.0.0.1", "--allow-private-networks",
            "--min-delay", "0.8", "--round-window", "30", "--runner", "FnApiRunner",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        requests = list(server.requests)
    yield {"proc": proc, "out": out, "requests": requests, "port": server.port}


@pytest.mark.e2e
@pytest.mark.slow
def test_the_round_completes(wire_round):
    proc = wire_round["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.e2e
@pytest.mark.slow
def test_each_planned_request_reached_the_server_once(wire_round):
    for host, paths in SEEDS.items():
        seen = [r.path for r in wire_round["requests"] if r.host == host]
        assert seen[0] == "/robots.txt" and sorted(seen[1:]) == sorted(paths), host


@pytest.mark.e2e
@pytest.mark.slow
def test_every_record_holds_what_was_served_for_its_url(wire_round):
    port = wire_round["port"]
    served = {f"http://{r.host}:{port}{r.path}": r.body for r in wire_round["requests"] if r.body is not None}
    archived = {}
    for path in glob.glob(str(wire_round["out"] / "warc" / "*" / "*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests="raise"):
                if rec.rec_type == "response":
                    archived[rec.rec_headers.get_header("WARC-Target-URI")] = rec.content_stream().read()
    pages = [f"http://{host}:{port}{p}" for host, paths in SEEDS.items() for p in paths if not p.startswith("/lost-")]
    assert set(pages) <= set(archived)
    for url, payload in archived.items():
        assert payload == served[url], url
        assert SMUGGLED not in payload


@pytest.mark.e2e
@pytest.mark.slow
def test_links_come_only_from_the_answers_pages_were_served(wire_round):
    dst = {r["dst"] for r in pq.read_table(wire_round["out"] / "links", columns=["dst"]).to_pylist()}
    assert not any(u.endswith("/evil") for u in dst)
    assert f"http://te.wire.test:{wire_round['port']}/te-a-next" in dst  # the gzip transfer coding undone
