"""The real web can't break a round: a round over a hostile little web completes.

A server in the test (raw asyncio on 127.0.0.1, so that it can send what no well-behaved
HTTP library would: non-UTF-8 and empty ``Location`` headers, header lines without a colon,
duplicated headers, a bad ``Content-Length``) serves five virtual hosts whose pages,
redirects, robots.txt files and sitemaps use hostile shapes: IPv6-literal links (among them
``http://[::1]:PORT/``, whose registered domain was once empty and failed every round),
IPv4 in decimal, octal, hex and short forms, backslashes, invalid punycode, dot segments,
``javascript:``/``data:``/``mailto:``/``file:`` links, a page of 10,000 links, duplicated
attributes, and ``Location`` headers of every shape.

One round runs through the CLI. Only seeds and robots.txt files (and robots.txt redirects,
all to this server) are fetched in a first round, so the test never connects anywhere but
loopback: links to ``[2001:db8::1]`` and the like are only parsed and queued.

Checked: the round completes; every good page is stored (its WARC response read back with
warcio, its row in pages/ with pyarrow); every seed is accounted for (a page event, a dead
letter, or its frontier row kept); the sitemaps submitted (hostile entries, entities, a
false gzip, a malformed index) are read for what they hold; every dead letter in errors/
names its stage, exception and message, and the round report counts exactly as many.
"""

from __future__ import annotations

import asyncio
import glob
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.pipelines.seeding import submit_urls
from beamcrawl.stores.base import open_store
from loopback import read_head  # tests/loopback.py

HOSTS = ("a.hostile.test", "b.hostile.test", "c.hostile.test", "d.hostile.test", "e.hostile.test")


def _html(body: str) -> bytes:
    return (
        f"<!doctype html><html><head><title>t</title></head><body>{body}<p>{'words ' * 40}</p></body></html>".encode()
    )


def _links(hrefs: list[str]) -> bytes:
    return _html("".join(f'<a href="{h}">x</a>\n' for h in hrefs))


class HostileWeb:
    """Raw HTTP/1.1 on loopback: ``pages[(host, path)] = (status, [(name, value bytes)], body)``."""

    def __init__(self) -> None:
        self.pages: dict[tuple[str, str], tuple[int, list[tuple[bytes, bytes]], bytes]] = {}
        self.raw: dict[tuple[str, str], bytes] = {}  # whole responses, sent as they are
        self.requests: list[tuple[str, str]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._server = server
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())

    def __enter__(self) -> "HostileWeb":
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader, writer)
        if head is None:
            return
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
        host = next((v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "host"), "")
        host = host.rsplit(":", 1)[0].lower()
        self.requests.append((host, path))
        raw = self.raw.get((host, path))
        if raw is None:
            status, headers, body = self.pages.get((host, path), (404, [(b"Content-Type", b"text/plain")], b"not here"))
            out = [f"HTTP/1.1 {status} X".encode()]
            out += [name + b": " + value for name, value in headers]
            if not any(name.lower() == b"content-length" for name, _ in headers):
                out.append(b"Content-Length: " + str(len(body)).encode())
            out.append(b"Connection: close")
            raw = b"\r\n".join(out) + b"\r\n\r\n" + body
        try:
            writer.write(raw)
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"


HTML = [(b"Content-Type", b"text/html; charset=utf-8")]


def _build(web: HostileWeb) -> tuple[list[str], set[str]]:
    """Fills the web; returns the seed URLs and the good pages among them (200 HTML)."""
    port = web.port
    a, b, c, d, e = HOSTS
    good: dict[tuple[str, str], bytes] = {
        (a, "/"): _html('<a href="/links-ipv6">6</a>'),
        (a, "/links-ipv6"): _links(
            [
                f"http://[::1]:{port}/",
                "http://[::1]/",
                "http://[2001:db8::1]/",
                "http://[2001:db8::1]:8080/x",
                "http://[2001:4860::8888]/",
                "http://[::ffff:127.0.0.1]/",
                "http://[fe80::1%25eth0]/",
                "http://[::]/",
                "http://[1:2:3:4:5:6:7:8:9]/",
                "http://[::1/",
                "http://[]/",
                "http://[zz::1]/",
            ]
        ),
        (a, "/links-ipv4"): _links(
            [
                "http://2130706433/",
                "http://0x7f000001/",
                "http://0177.0.0.1/",
                "http://127.1/",
                "http://0x7f.1/",
                "http://1.2.3.4.5/",
                "http://256.256.256.256/",
                "http://4294967296/",
                "http://0/",
                "http://127.0.0.1.:99999/",
                "http://1.2.3.4:0/",
                "http://1.2.3.4:65535/",
                "http://%31%32%37.0.0.1/",
            ]
        ),
        (a, "/links-backslash"): _links(
            [
                "http:\\\\a.hostile.test\\foo",
                "/\\@",
                "\\\\b.hostile.test\\x",
                "http://a.hostile.test/\\@",
                "http:/\\/\\c.hostile.test",
                "..\\..\\up",
            ]
        ),
        (a, "/links-punycode"): _links(
            [
                "http://xn--/",
                "http://a.b.c.xn--pokxncvks/",
                "http://xn--a.test/",
                "http://xn--zz-.test/",
                "http://\u2603.test/",
                "http://ex\u00e4mple.test/",
                "http://" + "a" * 64 + ".test/",
                "http://a..b.test/",
                "http://.test/",
                "http://test./",
                "http://user:pw@a.hostile.test/",
                "http://a.hostile.test%00.x/",
            ]
        ),
        (a, "/links-dots"): _links(
            [
                "http://example.com////../..",
                "../../../../x",
                "./././y",
                "/a/b/../../../../z",
                "/%2e%2e/%2E/w",
                "?q=1#frag",
                "#only-a-fragment",
                "//",
                "///",
                "http:",
                "http://",
                "",
                " ",
                "\t\n/ws\n",
            ]
        ),
        (a, "/links-schemes"): _links(
            [
                "javascript:alert(1)",
                "JaVaScRiPt:void(0)",
                "data:text/html;base64,PGgxPg==",
                "mailto:a@b.test",
                "file:///etc/passwd",
                "ftp://a.hostile.test/",
                "tel:+1",
                "about:blank",
                "blob:http://a/x",
                "ws://a/",
                "vbscript:x",
                "view-source:http://a/",
            ]
        ),
        (a, "/links-10000"): _links([f"/many/{i}" for i in range(10_000)]),
        (a, "/dup-attrs"): _html(
            '<base href="/base1/" href="/base2/"><a href="/dup1" href="/dup2" rel="nofollow" rel="">d</a>'
            "<a href=/unquoted>u</a><a href='/single'>s</a><a>nohref</a><a href=\"\">empty</a>"
            '<link rel="canonical" href="/c1"><link rel="canonical" href="http://[::1]/c2">'
            '<meta name="robots" content="noindex" content="index"><meta http-equiv="refresh" content="0;url=javascript:x">'
            '<link rel="alternate" type="application/rss+xml" href="http://[2001:db8::1]/feed">'
        ),
        (b, "/"): _html('<a href="/r-relative">r</a>'),
        (c, "/"): _html("<p>c</p>"),
        (d, "/"): _html("<p>d</p>"),
    }
    for (host, path), body in good.items():
        web.pages[(host, path)] = (200, HTML, body)
    # Bytes that are no HTML at all, labelled HTML; NULs and broken UTF-8 in a page.
    web.pages[(a, "/binary")] = (200, HTML, bytes(range(256)) * 40)
    web.pages[(a, "/nul-html")] = (
        200,
        HTML,
        b"<html><body>\x00<a href='/\x00x'>\xff\xfe</a><a href='\xc3\x28'>z</a>" + b"\x00" * 100,
    )
    good[(a, "/nul-html")] = b""
    # robots.txt: a's names hostile sitemaps; b's redirects (relative, then once more);
    # c's is plain; d's is garbage; e's redirects to IPv6 loopback on this server's port (no
    # one listens there: robots.txt unreachable, so e's pages wait, as RFC 9309 says).
    web.pages[(a, "/robots.txt")] = (
        200,
        [(b"Content-Type", b"text/plain")],
        (
            "User-agent: *\nAllow: /\n"
            f"Sitemap: http://[::1]:{port}/s.xml\nSitemap: javascript:alert(1)\nSitemap: \\\\evil\\s.xml\n"
            "Sitemap: http://xn--/s.xml\nSitemap: \nSitemap: http://[2001:db8::1]/s.xml\nSitemap: ::::\n"
        ).encode(),
    )
    web.pages[(b, "/robots.txt")] = (301, [(b"Location", b"/robots-2.txt")], b"")
    web.pages[(b, "/robots-2.txt")] = (302, [(b"Location", b"//b.hostile.test:%d/robots-3.txt" % port)], b"")
    web.pages[(b, "/robots-3.txt")] = (200, [(b"Content-Type", b"text/plain")], b"User-agent: *\nDisallow:\n")
    web.pages[(c, "/robots.txt")] = (200, [(b"Content-Type", b"text/plain")], b"User-agent: *\nAllow: /\n")
    web.pages[(e, "/robots.txt")] = (301, [(b"Location", b"http://[::1]:%d/robots.txt" % port)], b"")
    web.pages[(e, "/")] = (200, HTML, _html("<p>e</p>"))
    web.pages[(d, "/robots.txt")] = (
        200,
        [(b"Content-Type", b"text/plain")],
        b"\xff\xfe\x00User-agent\x00: *\r\rDisallow: \xff\n" * 50,
    )
    # Location headers of every shape (b): each is a seed.
    locations = {
        "/r-relative": b"/target", "/r-protocol-relative": b"//c.hostile.test:%d/x" % port, "/r-garbage": b"::::%%%",
        "/r-empty": b"", "/r-long": b"/" + b"a" * 20_000, "/r-nonutf8": b"/\xff\xfe\x80\xc3\x28",
        "/r-ipv6": b"http://[::1]:%d/" % port, "/r-doc-ipv6": b"http://[2001:db8::1]/", "/r-javascript": b"javascript:alert(1)",
        "/r-backslash": b"\\\\d.hostile.test\\x", "/r-punycode": b"http://xn--/", "/r-spaces": b"   /sp ace   ",
        "/r-nul": b"/a\x00b", "/r-data": b"data:,x", "/r-self": b"/r-self",
    }  # fmt: skip
    for path, loc in locations.items():
        web.pages[(b, path)] = (301, [(b"Location", loc), (b"Content-Type", b"text/html")], b"moved")
    web.pages[(b, "/r-none")] = (302, [(b"Content-Type", b"text/html")], b"no location")
    web.pages[(b, "/r-two")] = (301, [(b"Location", b"/one"), (b"Location", b"/two")], b"")
    # Broken headers (c): each is a seed; raw responses.
    crlf = b"\r\n"
    body = _html("<p>headers</p>")
    raws = {
        "/h-no-colon": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nGarbage header without colon\r\n",
        "/h-bad-length": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: abc\r\n",
        "/h-long-header": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Long: " + b"v" * 70_000 + crlf,
        "/h-nonutf8": b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=\xff\xfe\r\nX-Robots-Tag: \xff noindex\r\n",
        "/h-dup": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Type: image/png\r\nETag: a\r\nETag: b\r\n",
        "/h-bad-status": b"HTTP/1.1 999 Whatever\r\nContent-Type: text/html\r\n",
        "/h-no-reason": b"HTTP/1.1 200\r\nContent-Type: text/html\r\n",
        "/h-http10": b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n",
        "/h-garbage-status": b"SPAM 200 OK\r\n",
        "/h-retry-after": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nRetry-After: \xff-1e999\r\nLast-Modified: never\r\n",
    }
    for path, head in raws.items():
        tail = b"Content-Length: %d\r\n" % len(body) if b"Content-Length" not in head else b""
        web.raw[(c, path)] = head + tail + b"Connection: close\r\n\r\n" + body
    seeds = [web.url(h, p) for (h, p) in sorted(good)]
    seeds += [web.url(a, "/binary")]
    seeds += [web.url(b, p) for p in (*locations, "/r-none", "/r-two")]
    seeds += [web.url(c, p) for p in raws]
    seeds += [web.url(e, "/")]
    # Sitemaps (d), submitted as sitemaps: hostile entries, entities (refused: no DTDs), a
    # lie about gzip, a malformed index.
    web.pages[(d, "/sitemap.xml")] = (
        200,
        [(b"Content-Type", b"application/xml")],
        (
            '<?xml version="1.0"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"<url><loc>http://[::1]:{port}/from-sitemap</loc><lastmod>not a date</lastmod></url>\n"
            "<url><loc>http://[2001:db8::1]/x</loc></url><url><loc>javascript:alert(1)</loc></url>\n"
            "<url><loc>http://xn--/</loc></url><url><loc>&amp;&lt;</loc></url><url><loc></loc></url>\n"
            f"<url><loc>http://d.hostile.test:{port}/listed</loc><lastmod>2026-13-45T99:99:99Z</lastmod></url>\n"
            f"<url><loc>http://d.hostile.test:{port}/\\back</loc><lastmod>99999999999999999999</lastmod></url>\n"
        ).encode(),
    )
    web.pages[(d, "/bomb.xml")] = (
        200,
        [(b"Content-Type", b"application/xml")],
        (
            '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
            '<!ENTITY c SYSTEM "file:///etc/passwd">]>\n<urlset><url><loc>&b;&c;</loc></url></urlset>'
        ).encode(),
    )
    web.pages[(d, "/sitemap.xml.gz")] = (200, [(b"Content-Type", b"application/x-gzip")], b"\x1f\x8b\x08garbage" * 10)
    web.pages[(d, "/index.xml")] = (
        200,
        [(b"Content-Type", b"text/xml")],
        (
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<sitemap><loc>http://[::1]:{port}/s{i}.xml</loc></sitemap>" for i in range(3))
            + "<sitemap><loc>file:///etc/passwd</loc></sitemap><sitemap><loc>http://[2001:db8::1]/s.xml</loc></sitemap>"
        ).encode(),
    )  # unterminated: malformed XML
    return seeds, {web.url(h, p) for (h, p) in good}


def _sitemaps(web: HostileWeb) -> list[str]:
    return [web.url("d.hostile.test", p) for p in ("/bomb.xml", "/sitemap.xml", "/sitemap.xml.gz", "/index.xml")]


@pytest.fixture(scope="module")
def hostile_round(tmp_path_factory) -> Iterator[dict]:
    work = tmp_path_factory.mktemp("hostile")
    out = work / "out"
    with HostileWeb() as web:
        seeds, good = _build(web)
        (work / "seeds.txt").write_text("\n".join(seeds) + "\n")
        out.mkdir()
        with open_store(f"sqlite:///{out}/store.sqlite") as store:
            submitted = submit_urls(store, _sitemaps(web), int(time.time() * 1000), kind="sitemap", source="submit")
        assert submitted.accepted == 4
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(work / "seeds.txt"),
            "--out", str(out), "--rounds", "1", "--resolve", "*=127.0.0.1", "--allow-private-networks",
            "--min-delay", "0.2", "--round-window", "20", "--runner", "FnApiRunner",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        requests = list(web.requests)
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        frontier = {FrontierEntry.from_cells(cells).url for _, cells in store.read_range("frontier")}
    yield {
        "proc": proc,
        "out": out,
        "seeds": seeds + _sitemaps(web),
        "good": good,
        "requests": requests,
        "frontier": frontier,
    }


def test_the_round_completes(hostile_round):
    proc = hostile_round["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "round 1:" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_only_loopback_was_asked(hostile_round):
    # Every request the crawler made reached this loopback server, as a name it was given.
    assert {host for host, _ in hostile_round["requests"]} <= set(HOSTS) | {"[::1]"}


def test_every_good_page_is_stored(hostile_round):
    out = hostile_round["out"]
    pages = pq.read_table(out / "pages").to_pylist()
    by_url = {p["url"]: p for p in pages}
    warc = set()
    for path in glob.glob(str(out / "warc" / "*" / "*.warc.gz")):
        with open(path, "rb") as fh:
            warc |= {
                r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh) if r.rec_type == "response"
            }
    for url in sorted(hostile_round["good"]):
        assert url in by_url and by_url[url]["status"] == 200, url
        assert url in warc, url
    # The page of 10,000 links gave its links to links/.
    src = [r["src"] for r in pq.read_table(out / "links", columns=["src"]).to_pylist()]
    assert sum(1 for s in src if s.endswith("/links-10000")) >= 10_000


def test_every_seed_is_accounted_for(hostile_round):
    out = hostile_round["out"]
    events = {p["url"] for p in pq.read_table(out / "pages", columns=["url"]).to_pylist()}
    letters = {e["url"] for e in _errors(out)}
    for url in hostile_round["seeds"]:
        assert url in events or url in letters or url in hostile_round["frontier"], url


def _errors(out) -> list[dict]:
    folder = out / "errors"
    return pq.read_table(folder).to_pylist() if folder.exists() else []


def test_submitted_sitemaps_were_read(hostile_round):
    pages = {p["url"]: p for p in pq.read_table(hostile_round["out"] / "pages").to_pylist()}
    bomb, sitemap, gz, index = hostile_round["seeds"][-4:]
    assert all(pages[url]["status"] == 200 for url in (bomb, sitemap, gz, index))
    dst = {r["dst"] for r in pq.read_table(hostile_round["out"] / "links", columns=["dst"]).to_pylist()}
    assert any(u.endswith("/listed") for u in dst)  # the good entry of the hostile sitemap


def test_every_dead_letter_has_its_reason_and_is_counted(hostile_round):
    out = hostile_round["out"]
    letters = _errors(out)
    for letter in letters:
        assert letter["stage"] and letter["exception"] and letter["message"] is not None, letter
        assert letter["round"] == 1
    (report_path,) = glob.glob(str(out / "reports" / "round-*.json"))
    with open(report_path) as fh:
        report = json.load(fh)
    assert report["errors"] == len(letters)
    assert sum(report["errors_by_stage"].values()) == len(letters)
