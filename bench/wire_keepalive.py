"""What keep-alive is worth to the fetcher, and what the one-answer connection layer costs.

The crawler's session (``core/net/gate.open_session``, whose connections follow
``core/net/wire.py``) GETs pages from a raw keep-alive server in another process, each host
one request at a time as the fetch loop does, with connections reused (the crawler's
choice), with ``force_close=True`` (a new connection for every request, the alternative
#24 weighed), and through a plain aiohttp session, with and without the wire layer's
connector and middleware (what that layer alone costs). Printed: wall milliseconds and client CPU microseconds per request.

On loopback a handshake costs next to no time, so the wall figures understate what a new
connection costs on a real network: one round trip more per request (two or three with
TLS), on top of the CPU figures, which hold anywhere.

    .venv/bin/python bench/wire_keepalive.py --requests 4000 --hosts 20
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

import aiohttp

SERVER = r"""
import asyncio, sys
BODY = b"<html><body>" + b"x" * 2000 + b"</body></html>"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
async def serve(reader, writer):
    try:
        while True:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(ANSWER)
    except Exception:
        writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


async def _host(session: aiohttp.ClientSession, url: str, n: int) -> None:
    for _ in range(n):
        async with session.get(url) as resp:
            await resp.read()


async def _run(mode: str, port: int, hosts: int, per_host: int) -> tuple[float, float]:
    from beamcrawl.core.net.gate import open_session
    from beamcrawl.core.net.netpolicy import ResolveRules
    from beamcrawl.core.net.resolver import PolicyResolver
    from beamcrawl.core.net.wire import OneAnswerConnector, no_retry

    resolver = PolicyResolver(ResolveRules((("*.test", "127.0.0.1"),)), True)
    if mode == "aiohttp":
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)
    elif mode == "aiohttp+wire":
        session = aiohttp.ClientSession(
            connector=OneAnswerConnector(limit=0), auto_decompress=False, middlewares=(no_retry,)
        )
    else:
        session = open_session(resolver, True, limit=0, limit_per_host=2, force_close=mode == "force_close")
    urls = [
        f"http://{'127.0.0.1' if mode.startswith('aiohttp') else f'h{i}.test'}:{port}/p?h={i}" for i in range(hosts)
    ]
    try:
        await asyncio.gather(*(_host(session, u, 1) for u in urls))  # warm: resolver, first connections
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(_host(session, u, per_host) for u in urls))
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await session.close()
        await resolver.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="requests per mode, all hosts together")
    ap.add_argument("--hosts", type=int, default=20, help="hosts fetched at once, one request in flight each")
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        per_host = max(1, args.requests // args.hosts)
        total = per_host * args.hosts
        print(f"{total} requests, {args.hosts} hosts at once, loopback")
        for mode in ("reuse", "force_close", "aiohttp", "aiohttp+wire"):
            wall, cpu = asyncio.run(_run(mode, port, args.hosts, per_host))
            print(
                f"  {mode:12s} {wall / total * 1e3:8.3f} ms wall/request  {cpu / total * 1e6:8.1f} us client CPU/request"
                f"  ({total / wall:7.0f} requests/s)"
            )
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
