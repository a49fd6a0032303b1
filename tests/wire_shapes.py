"""A raw HTTP/1.1 server on loopback that breaks the wire in chosen ways, and logs what it served.

Raw asyncio, in a thread, keep-alive: each connection answers requests one after another
until a shape closes it. The path names the shape of the answer:

- ``/page-*``: a plain 200 whose body names the host and path (unique per URL);
- ``/smuggle-now-*``: the page, and an unrequested second response in the same write;
- ``/smuggle-split-*``: the page, then the second response in a write of its own;
- ``/smuggle-late-*``: the page, then the second response :data:`LATE` seconds later (the
  trial's shape: kept-alive, the next request not yet written);
- ``/smuggle-head-*``: the page, then, later, only the head of a response (bytes before the
  next request, which would swallow the next answer as its body);
- ``/smuggle-junk-*``: the page, then later a few bytes that are no HTTP at all;
- ``/lost-rsthdr-*``: part of a status line and headers, then a reset (RST);
- ``/lost-close-*``: the connection closed before any byte of an answer;
- ``/lost-1xx-*``: ``100 Continue``, then a close;
- ``/te-*``: the page gzipped as ``Transfer-Encoding: gzip, chunked``;
- shapes the client already held against, which must keep holding: ``/held-1xx-*`` (two
  interim answers, then the page), ``/held-http09-*`` (a body without a status line, then
  a close), ``/held-tls-*`` (TLS handshake bytes on the plain port), ``/held-headers-*``
  (20,000 header lines), ``/held-longline-*`` (a 200 KB header line);
- ``/robots.txt``: allows everything.

Every request is logged (``requests``: connection number, host, path), with the body the
server sent as *its* answer (``served``), so a test can tell what each URL was really
served. A stray answer's body says ``SMUGGLED`` and links to ``/evil``.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loopback import RawLoopbackServer  # tests/loopback.py

if TYPE_CHECKING:
    from beamcrawl.core.runtime.config import CrawlConfig

LATE = 0.3  # seconds between an answer and the stray bytes of a "late" shape
SMUGGLED = b'<html><body>SMUGGLED <a href="/evil">evil</a></body></html>'


def loopback_config(**overrides: object) -> CrawlConfig:
    """A crawl's settings for a fetch against this server: every ``*.test`` name on loopback,
    private addresses allowed, short delays and a window longer than any test's fetch."""
    from beamcrawl.core.runtime.config import CrawlConfig

    settings: dict[str, object] = {
        "out": "/tmp/o",
        "store": "sqlite:///tmp/o",
        "min_delay": 0.02,
        "round_window": 20,
        "allow_private_networks": True,
        "resolve": (("*.test", "127.0.0.1"),),
        "total_timeout": 5.0,
    }
    return CrawlConfig(**{**settings, **overrides})  # type: ignore[arg-type]


def page(path: str, host: str) -> bytes:
    """The body a plain page of ``path`` on ``host`` is served with (unique to the URL, so
    no two are copies; it links to ``path``-next)."""
    return f'<html><body><p>page {path} of {host}</p><a href="{path}-next">next</a></body></html>'.encode()


def response(body: bytes, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: text/html\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def field_lines(items: list[str], cuts: list[bool]) -> list[list[str]]:
    """A field's list ``items`` sent over several field lines, a new line before each item
    whose ``cuts`` entry (one for each item but the first) is true (RFC 9110 §5.3: the same
    list as one comma-joined line)."""
    lines, line = [], [items[0]]
    for item, cut in zip(items[1:], cuts):
        if cut:
            lines.append(line)
            line = []
        line.append(item)
    lines.append(line)
    return lines


def chunked(body: bytes) -> bytes:
    return b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"


STRAY = {
    "now": response(SMUGGLED),
    "split": response(SMUGGLED),
    "late": response(SMUGGLED),
    "head": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 300\r\n\r\n",
    "junk": b"\x00\xffnot http\r\n",
}


HELD = {
    "http09": b"<html><body>no status line</body></html>",
    "tls": bytes.fromhex("160303002a020000260303") + bytes(32) + b"\x00\x13\x01\x00",
    "headers": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(20_000)) + b"\r\nbody",
    "longline": b"HTTP/1.1 200 OK\r\nX-Long: " + b"v" * 200_000 + b"\r\nContent-Length: 4\r\n\r\nbody",
}


@dataclass
class Served:
    conn: int
    host: str
    path: str
    body: bytes | None  # what the server sent as this request's answer (None: no answer)
    start: float = 0.0  # when the request's head had been read (time.time())
    end: float = 0.0  # when its answer (or the loss of it) had been handed to the socket
    head: bytes = b""  # the request's head as it arrived: request line, headers, blank line


#: A site of its own on the shape server: ``(served, writer) -> keep the connection open``;
#: it sets ``served.body`` to what it sent as the answer.
Site = Callable[[Served, asyncio.StreamWriter], Awaitable[bool]]


class ShapeServer(RawLoopbackServer):
    """Serves the shapes above on 127.0.0.1 at a free port, for the ``with`` block.

    Attributes:
        requests: Every request received, in order, as :class:`Served`.
        stray_sent: Set each time a stray answer has been written (then cleared by the test).
        reasons: ``path -> raw status text`` for answers with a chosen status line.
        stray: ``path -> bytes`` to send unasked after that path's answer (as the "split"
            shape, at once), besides the named shapes.
        sites: ``host -> Site`` for hosts that answer every path themselves (``Host``
            compared as sent, port removed), instead of by the path's shape.
    """

    def __init__(self) -> None:
        self.requests: list[Served] = []
        self.reasons: dict[str, bytes] = {}
        self.stray: dict[str, bytes] = {}
        self.sites: dict[str, Site] = {}
        self.stray_sent = threading.Event()
        super().__init__()
        self._conns = 0

    def paths(self, host: str | None = None) -> list[str]:
        return [r.path for r in self.requests if host is None or r.host == host]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns += 1
        conn = self._conns
        try:
            while await self._answer(conn, reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False when the connection is to be closed."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        host = next((v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "host"), "")
        host = host.rsplit(":", 1)[0]
        served = Served(conn, host, path, None, start=time.time(), head=head)
        self.requests.append(served)
        site = self.sites.get(host)
        if site is not None:
            try:
                return await site(served, writer)
            finally:
                served.end = time.time()
        try:
            return await self._shape(served, writer)
        finally:
            served.end = served.end or time.time()

    async def _shape(self, served: Served, writer: asyncio.StreamWriter) -> bool:
        """Answers ``served`` by its path's shape (its ``end`` set before any stray bytes)."""
        host, path = served.host, served.path
        shape = path.lstrip("/").split("-")
        kind, how = shape[0], shape[1] if len(shape) > 1 else ""
        if kind == "lost":
            if how == "rsthdr":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/ht")
                await writer.drain()
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            elif how == "1xx":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            return False
        if kind == "held" and how != "1xx":
            writer.write(HELD[how])
            await writer.drain()
            return False
        if path == "/robots.txt":
            served.body = b"User-agent: *\nAllow: /\n"
            writer.write(response(served.body).replace(b"text/html", b"text/plain"))
            await writer.drain()
            return True
        served.body = page(path, host)
        if kind == "te":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                + chunked(gzip.compress(served.body))
            )
            await writer.drain()
            return True
        answer = response(served.body, self.reasons.get(path, b"200 OK"))
        if kind == "held":  # 1xx: interim answers first
            answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + answer
        if kind == "smuggle" and how == "now":
            writer.write(answer + STRAY["now"])
            await writer.drain()
            self.stray_sent.set()
            return True
        writer.write(answer)
        await writer.drain()
        served.end = time.time()
        stray = STRAY.get(how) if kind == "smuggle" else self.stray.get(path)
        if stray is not None:
            if kind == "smuggle" and how != "split":
                await asyncio.sleep(LATE)
            writer.write(stray)
            await writer.drain()
            self.stray_sent.set()
        return True
