"""A test's own HTTP server on loopback, in a thread: subclass :class:`LoopbackServer`,
write ``handle``, and ``with serving(MyServer()) as server:`` (``server.port`` is free).
A server that must control every byte on the wire subclasses :class:`RawLoopbackServer`
(asyncio streams, no HTTP library) and writes ``_serve``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TypeVar

from aiohttp import web

S = TypeVar("S", bound="LoopbackServer")
R = TypeVar("R", bound="RawLoopbackServer")


class LoopbackServer:
    """Serves every method and path on 127.0.0.1 (or another loopback ``address``) at a free
    port with :meth:`handle`."""

    address = "127.0.0.1"

    def __init__(self) -> None:
        self.port = 0
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    def run(self) -> None:
        loop = self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, self.address, 0)
        loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()


@contextlib.contextmanager
def serving(server: S) -> Iterator[S]:
    """Runs ``server`` in a daemon thread for the block, then stops it."""
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.ready.wait(10), "the test server did not start"
    try:
        yield server
    finally:
        assert server.loop is not None
        server.loop.call_soon_threadsafe(server.loop.stop)
        thread.join(10)


async def read_head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float = 10) -> bytes | None:
    """A raw server's read of one request head (up to the blank line), or None, with the
    connection closed, when the client sent none in ``timeout`` s, too long a one, or left."""
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
        writer.close()
        return None


def head_target(head: bytes) -> tuple[str, str]:
    """``(host, path)`` of a request head: the Host field's name, lowercased and without its
    port and final dot (one host however the client spelled it), and the request target."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    path = parts[1] if len(parts) > 1 else "/"
    host = next((v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:]) if k.lower() == "host"), "")
    return host.rsplit(":", 1)[0].lower().rstrip("."), path


async def answer_and_close(writer: asyncio.StreamWriter, status: int, headers: list[str], body: bytes) -> None:
    """Sends one whole answer (``Content-Length``, ``Connection: close``), then closes."""
    out = [f"HTTP/1.1 {status} X", *headers, f"Content-Length: {len(body)}", "Connection: close"]
    try:
        writer.write("\r\n".join(out).encode("latin-1") + b"\r\n\r\n" + body)
        await writer.drain()
    except ConnectionError:
        pass
    writer.close()


class RawLoopbackServer:
    """A raw asyncio stream server on 127.0.0.1 at a free port, in a daemon thread, for the
    ``with`` block: subclasses write ``_serve(reader, writer)`` and own every byte sent."""

    def __init__(self) -> None:
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())

    def __enter__(self: R) -> R:
        self._thread.start()
        assert self._ready.wait(10), f"{type(self).__name__} did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class AnsweringServer(RawLoopbackServer):
    """A raw server that answers each request whole and closes: subclasses write
    ``_answer(host, path) -> (status, header lines, body)``. Every request is logged as
    ``(host, path, start, end)`` in :attr:`log`, the host as :func:`head_target` reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str, float, float]] = []

    def _answer(self, host: str, path: str) -> tuple[int, list[str], bytes]:
        raise NotImplementedError

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader, writer)
        if head is None:
            return
        start = time.time()
        host, path = head_target(head)
        await answer_and_close(writer, *self._answer(host, path))
        self.log.append((host, path, start, time.time()))
