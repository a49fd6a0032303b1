"""A test's own HTTP server on loopback, in a thread: subclass :class:`LoopbackServer`,
write ``handle``, and ``with serving(MyServer()) as server:`` (``server.port`` is free)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import TypeVar

from aiohttp import web

S = TypeVar("S", bound="LoopbackServer")


class LoopbackServer:
    """Serves every method and path on 127.0.0.1 at a free port with :meth:`handle`."""

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
        site = web.TCPSite(runner, "127.0.0.1", 0)
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
