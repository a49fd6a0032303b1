"""Serving an aiohttp application from a command until it is stopped: ``beamcrawl api`` and
``beamcrawl keys serve`` bind, announce the address they got (a port of 0 is the kernel's
choice) and run until SIGINT or SIGTERM, then close their connections."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any, TextIO

__all__ = ["serve_until_stopped"]


async def serve_until_stopped(
    app: Any, bind: str, port: int, out: TextIO, announce: str, access_log: logging.Logger | None = None
) -> None:
    """Serves ``app`` on ``bind``:``port`` until SIGINT or SIGTERM.

    Args:
        app: The ``aiohttp.web.Application``.
        bind: The address to listen on.
        port: The port (0: any free one).
        out: Where the announcement goes, flushed, once listening.
        announce: The line to print, with ``{url}`` where ``http://HOST:PORT`` of the bound
            socket goes, e.g. ``"beamcrawl api listening on {url}"``.
        access_log: The logger of the access log, or None for none.
    """
    from aiohttp import web

    runner = web.AppRunner(app, access_log=access_log)
    await runner.setup()
    try:
        site = web.TCPSite(runner, bind, port)
        await site.start()
        host, bound = runner.addresses[0][:2]
        shown = f"[{host}]" if ":" in host else host
        print(announce.format(url=f"http://{shown}:{bound}"), file=out, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
