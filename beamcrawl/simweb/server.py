"""The simweb HTTP server: one aiohttp process serving every virtual host on one port.

One handler answers every method and path (aiohttp's low-level server, or a single catch-all
route via :func:`make_app`); the pure model in ``site.py`` decides what to send.

Requests are dispatched on the ``Host`` header (port stripped, case folded). Every request is
logged as one JSON line::

    {"start": 1700000000.123456, "end": 1700000000.124001, "host": "site0001.com",
     "path": "/p/3.html?x=1", "ua": "Mozilla/5.0 (compatible; beamcrawl/0.1.0; ...)",
     "status": 200, "bytes": 2817, "method": "GET"}

A signed request (Web Bot Auth) adds ``"sig": {"Host": ..., "Signature-Agent": ...,
"Signature-Input": ..., "Signature": ...}``, the headers a site verifies it with.

``start`` is taken when the handler starts and ``end`` after the response has been fully
written (so a slow host's delay lies between them); ``bytes`` is the body length sent (0 for HEAD
and 304). With the change model on (``--change-scale``), responses of changing pages (200 and
304 alike) add ``"version": V``, the page version served (or, for a 304, the version the client
was told it holds), chosen at ``start``; and the log's first line, written when the server
starts, is a header that no reader should take for a request::

    {"simweb_log_header": 1, "epoch": 1700000000.0, "change_scale": 0.2, "seed": 1,
     "hosts": 50, "pages_per_host": 40, "port": 8123, "started": 1700000000.01}

(``testing.read_request_log`` skips it; ``read_log_header`` returns it.) Conditional requests of
changing pages follow RFC 9110 §13.2.2 (see ``changes.not_modified``); other pages keep the fixed
validators, where only an exact echo of ``Last-Modified`` or a listed ETag gets a 304.

Each line is written with one unbuffered ``os.write`` on an ``O_APPEND`` descriptor right after
the response's last byte has been handed to the socket. A client may see the response a few
microseconds before its line is in the file; ``GET /_simweb/sync`` (see :func:`make_handler`,
used by ``SimwebHandle.requests()``) closes that window.

Usage::

    python -m beamcrawl.simweb --port 0 --hosts 200 --log req.jsonl --truth truth.jsonl

prints ``simweb listening on http://127.0.0.1:PORT hosts=200`` (plus `` epoch=E`` with the
change model) once it serves (after the truth file is written) and stops cleanly on SIGTERM or
SIGINT. ``--change-scale S`` turns the change model on; ``--epoch E`` fixes its epoch (default:
the server's start time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from beamcrawl.simweb.changes import not_modified, parse_mix
from beamcrawl.simweb.site import COPY_HOSTS_FROM, SimResponse, SimWeb
from beamcrawl.simweb.truth import DEFAULT_TRUTH_PAGES, write_truth

__all__ = [
    "LOG_HEADER_KEY",
    "SYNC_PATH",
    "RequestLog",
    "SimwebServer",
    "build_parser",
    "main",
    "make_app",
    "make_handler",
    "read_log_header",
]

LOG_HEADER_KEY = "simweb_log_header"


def read_log_header(path: str | Path) -> dict[str, Any] | None:
    """Return the header line of a request log written with the change model on (the last one,
    if a restarted server appended another), or None."""
    header = None
    p = Path(path)
    if not p.exists():
        return None
    with p.open(encoding="utf-8") as f:
        for line in f:
            if LOG_HEADER_KEY in line and line.endswith("\n"):
                rec = json.loads(line)
                if rec.get(LOG_HEADER_KEY):
                    header = rec
    return header


def read_request_log(path: str | Path) -> list[dict[str, Any]]:
    """Parse a simweb request log, skipping a partly written last line and the change model's
    header line (:func:`read_log_header` reads it)."""
    out: list[dict[str, Any]] = []
    p = Path(path)
    if not p.exists():
        return out
    with p.open(encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                rec = json.loads(line)
                if not rec.get(LOG_HEADER_KEY):
                    out.append(rec)
    return out


_SERVER_HEADER = "simweb"


class RequestLog:
    """Append-only JSON-lines request log.

    Args:
        path: File to append to (created if missing), or None to log nothing.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._fd: int | None = None
        if self.path is not None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as one line (a single write: lines never interleave)."""
        if self._fd is not None:
            os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    def flush(self) -> None:
        """Push written lines to stable storage (they are already visible to readers)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Flush and close the log; further writes are dropped."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.fsync(fd)
            os.close(fd)


def _host_of(header: str) -> str:
    host = header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    if ":" in host:
        host = host.rsplit(":", 1)[0]
    return host.rstrip(".")


def _not_modified(request: web.BaseRequest, sim: SimResponse) -> bool:
    if sim.etag is None:
        return False
    if sim.version is not None and sim.modified is not None:
        return not_modified(
            request.headers.get("If-None-Match"),
            request.headers.get("If-Modified-Since"),
            sim.etag,
            sim.modified,
            sim.previous_modified,
        )
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        return inm.strip() == "*" or sim.etag in inm
    ims = request.headers.get("If-Modified-Since")
    # The simweb's Last-Modified is one fixed date, so an exact echo of it is the only
    # If-Modified-Since a crawler sends back; anything else is answered in full.
    return ims is not None and ims.strip() == sim.last_modified


Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]

SYNC_PATH = "/_simweb/sync"
# The seed list: every virtual host's root, one URL a line (``GET /seeds.txt`` on the
# server's own address), so a crawl of simweb can start from all of it.
SEEDS_PATH = "/seeds.txt"


def seed_list(sim_web: SimWeb, port: int) -> str:
    """Every virtual host's root URL on ``port``, one a line, in the web's own order."""
    return "".join(f"http://{name}:{port}/\n" for name in sim_web.names)


def make_handler(sim_web: SimWeb, log: RequestLog) -> Handler:
    """Build the request handler that answers every request from ``sim_web``.

    Besides the web itself it answers two control requests on a host name that is not a
    simweb host (``127.0.0.1:PORT``), neither of them logged: ``GET /_simweb/sync`` returns
    once no other request is being handled (at most 5 s), so every response a client has
    received is in the log; ``GET /seeds.txt`` returns the seed list (:func:`seed_list`).

    Args:
        sim_web: The model answering requests.
        log: Where each request is recorded.

    Returns:
        An aiohttp handler for any method and path.
    """
    inflight = 0

    async def sync() -> web.StreamResponse:
        deadline = time.monotonic() + 5.0
        while inflight > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        return web.Response(text=f"ok inflight={inflight}\n")

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        nonlocal inflight
        start = time.time()
        host = _host_of(request.headers.get("Host", ""))
        target = request.raw_path
        if target == SYNC_PATH and host not in sim_web.index:
            return await sync()
        if target == SEEDS_PATH and host not in sim_web.index:
            sockname = request.transport.get_extra_info("sockname") if request.transport else None
            port = sockname[1] if sockname else 80
            return web.Response(text=seed_list(sim_web, port), content_type="text/plain")
        inflight += 1
        try:
            return await serve(request, start, host, target)
        finally:
            inflight -= 1

    async def serve(request: web.BaseRequest, start: float, host: str, target: str) -> web.StreamResponse:
        method = request.method
        if method in ("GET", "HEAD"):
            sim = sim_web.respond(host, target, start)
        else:
            sim = SimResponse(405, b"Method Not Allowed\n", "text/plain", {"Allow": "GET, HEAD"})
        if sim.delay > 0:
            await asyncio.sleep(sim.delay)
        status, body = sim.status, sim.body
        headers = {"Content-Type": sim.content_type, "Server": _SERVER_HEADER}
        if sim.headers:
            headers.update(sim.headers)
        if sim.etag is not None:
            headers["ETag"] = sim.etag
            if sim.last_modified is not None:
                headers["Last-Modified"] = sim.last_modified
            if _not_modified(request, sim):
                status, body = 304, b""
                del headers["Content-Type"]
        resp = web.Response(status=status, body=body, headers=headers)
        error = None
        try:
            # Write the response here rather than after returning, so "end" is taken once the
            # last byte has been handed to the socket.
            await resp.prepare(request)
            await resp.write_eof()
        except ConnectionError as exc:
            error = type(exc).__name__
        record: dict[str, Any] = {
            "start": start,
            "end": time.time(),
            "host": host,
            "path": target,
            "ua": request.headers.get("User-Agent", ""),
            "status": status,
            "bytes": 0 if method == "HEAD" else len(body),
            "method": method,
        }
        if sim.version is not None:
            record["version"] = sim.version
        if "Signature" in request.headers:
            # Web Bot Auth: what a site needs to verify the signature (tests check it).
            record["sig"] = {
                name: request.headers.get(name, "")
                for name in ("Host", "Signature-Agent", "Signature-Input", "Signature")
            }
        if error is not None:
            record["error"] = error
        log.write(record)
        return resp

    return handle


def make_app(sim_web: SimWeb, log: RequestLog) -> web.Application:
    """Build an aiohttp application with a single catch-all route, for embedding simweb.

    The standalone server skips the application layer (router, middlewares) and runs the handler
    on aiohttp's low-level :class:`aiohttp.web.Server`, which serves about 50% more requests per
    CPU-second; the behaviour is the same.
    """
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", make_handler(sim_web, log))
    return app


class SimwebServer:
    """The simweb server, runnable inside an existing asyncio loop.

    Args:
        hosts: Number of virtual hosts.
        seed: Seed of the web.
        pages_per_host: Pages per host.
        port: Port to listen on (0 picks a free one; see :attr:`port` after :meth:`start`).
        bind: Address to bind.
        latency_scale: Multiplier of slow hosts' delays (0 disables them).
        log_path: Request log file, or None.
        truth_path: Where to write the truth on start, or None.
        truth_max_pages: Pages per host described in the truth file.
        cache_size: Page bodies kept in memory.
        copy_hosts_from: First host index that may be a mirror, near-copy or template host
            (-1 for none).
        change_scale: Seconds per unit of the change model's intervals; 0 turns it off.
        epoch: The change model's epoch; None: the time :meth:`start` is called.
    """

    def __init__(
        self,
        hosts: int = 50,
        seed: int = 1,
        pages_per_host: int = 40,
        port: int = 0,
        bind: str = "127.0.0.1",
        latency_scale: float = 1.0,
        log_path: str | Path | None = None,
        truth_path: str | Path | None = None,
        truth_max_pages: int | None = DEFAULT_TRUTH_PAGES,
        cache_size: int = 4096,
        copy_hosts_from: int = COPY_HOSTS_FROM,
        change_scale: float = 0.0,
        epoch: float | None = None,
        change_mix: str | None = None,
    ) -> None:
        self.hosts = hosts
        self.change_scale = change_scale
        self.change_mix = change_mix
        self.epoch = epoch
        self.seed = seed
        self.pages_per_host = pages_per_host
        self.requested_port = port
        self.bind = bind
        self.latency_scale = latency_scale
        self.log_path = log_path
        self.truth_path = truth_path
        self.truth_max_pages = truth_max_pages
        self.cache_size = cache_size
        self.copy_hosts_from = copy_hosts_from
        self.port = 0
        self.web: SimWeb | None = None
        self._runner: web.ServerRunner | None = None
        self._log: RequestLog | None = None

    @property
    def url(self) -> str:
        """``http://ADDR:PORT`` of the listening socket."""
        addr = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{addr}:{self.port}"

    async def start(self) -> None:
        """Bind, write the truth file if asked, and start serving."""
        family = socket.AF_INET6 if ":" in self.bind else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.bind, self.requested_port))
        # The port is known before anything is generated: absolute links carry it.
        self.port = sock.getsockname()[1]
        started = time.time()
        if self.change_scale > 0 and self.epoch is None:
            self.epoch = started
        self.web = SimWeb(
            self.hosts,
            seed=self.seed,
            pages_per_host=self.pages_per_host,
            port=self.port,
            latency_scale=self.latency_scale,
            cache_size=self.cache_size,
            copy_hosts_from=self.copy_hosts_from if self.copy_hosts_from >= 0 else None,
            change_scale=self.change_scale,
            epoch=self.epoch,
            change_mix=self.change_mix,
        )
        if self.truth_path is not None:
            write_truth(self.web, self.truth_path, self.truth_max_pages)
        self._log = RequestLog(self.log_path)
        if self.web.changes is not None:
            self._log.write(
                {
                    LOG_HEADER_KEY: 1,
                    "epoch": self.web.epoch,
                    "change_scale": self.change_scale,
                    "seed": self.seed,
                    "hosts": self.hosts,
                    "pages_per_host": self.pages_per_host,
                    "port": self.port,
                    "started": started,
                }
            )
        handler = make_handler(self.web, self._log)
        # No access log: the JSON request log replaces it, and formatting a second line per
        # request would cost a third of the throughput. No Application either (see make_app).
        low_level = web.Server(handler, access_log=None)
        self._runner = web.ServerRunner(low_level, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        # A crawl of thousands of hosts opens thousands of connections at once.
        site = web.SockSite(self._runner, sock, backlog=4096)
        await site.start()

    async def stop(self) -> None:
        """Stop serving and close the log (idempotent)."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._log is not None:
            log, self._log = self._log, None
            log.close()

    async def __aenter__(self) -> SimwebServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of ``python -m beamcrawl.simweb``."""
    p = argparse.ArgumentParser(prog="beamcrawl simweb", description="Serve a deterministic synthetic web on one port.")
    p.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one")
    p.add_argument("--hosts", type=int, default=50, help="number of virtual hosts (default 50)")
    p.add_argument("--log", default=None, help="append one JSON line per request to this file")
    p.add_argument("--truth", default=None, help="write the ground truth (JSON lines) here")
    p.add_argument("--seed", type=int, default=1, help="seed of everything (default 1)")
    p.add_argument("--pages-per-host", type=int, default=40, help="pages per host (default 40)")
    p.add_argument("--bind", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--latency-scale",
        type=float,
        default=1.0,
        help="multiplier of slow hosts' 50-300 ms delays; 0 disables them (default 1)",
    )
    p.add_argument(
        "--truth-max-pages",
        type=int,
        default=DEFAULT_TRUTH_PAGES,
        help=f"pages per host described in the truth file (default {DEFAULT_TRUTH_PAGES})",
    )
    p.add_argument("--cache-size", type=int, default=4096, help="rendered pages kept in memory (default 4096)")
    p.add_argument(
        "--copy-hosts-from",
        type=int,
        default=COPY_HOSTS_FROM,
        help="first host index that may be a mirror, near-copy or template host; -1 for none "
        f"(default {COPY_HOSTS_FROM})",
    )
    p.add_argument(
        "--change-scale",
        type=float,
        default=0.0,
        help="turn on the change model: pages change at known rates, mean intervals in units of "
        "this many seconds (fast 1x, medium 8x, slow 64x, static never); sitemap indexes, "
        "sitemap-only pages and feeds appear; 0 (default) keeps it off",
    )
    p.add_argument(
        "--change-mix",
        default=None,
        help="the change classes' shares, e.g. static=0.5,slow=0.05,medium=0.2,fast=0.25 "
        "(default static=0.4,slow=0.25,medium=0.2,fast=0.15)",
    )
    p.add_argument(
        "--epoch",
        type=float,
        default=None,
        help="epoch seconds from which the change model counts changes (default: start time)",
    )
    return p


def _raise_fd_limit() -> None:
    # Thousands of concurrent crawler connections need more than the usual 1,024 descriptors.
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


async def _serve(args: argparse.Namespace) -> int:
    server = SimwebServer(
        hosts=args.hosts,
        seed=args.seed,
        pages_per_host=args.pages_per_host,
        port=args.port,
        bind=args.bind,
        latency_scale=args.latency_scale,
        log_path=args.log,
        truth_path=args.truth,
        truth_max_pages=args.truth_max_pages,
        cache_size=args.cache_size,
        copy_hosts_from=args.copy_hosts_from,
        change_scale=args.change_scale,
        epoch=args.epoch,
        change_mix=args.change_mix,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    try:
        extra = f" epoch={server.epoch!r}" if args.change_scale > 0 else ""
        print(f"simweb listening on {server.url} hosts={args.hosts}{extra}", flush=True)
        await stop.wait()
    finally:
        await server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the simweb server until SIGTERM or SIGINT.

    Args:
        argv: Command-line arguments (without the program name); None means ``sys.argv[1:]``.

    Returns:
        The process exit status.
    """
    args = build_parser().parse_args(argv)
    if args.hosts < 1 or args.pages_per_host < 1:
        print("simweb: --hosts and --pages-per-host must be >= 1", file=sys.stderr)
        return 2
    if not args.change_scale >= 0:
        print("simweb: --change-scale must be >= 0", file=sys.stderr)
        return 2
    if args.change_mix is not None:
        try:
            parse_mix(args.change_mix)
        except ValueError as exc:
            print(f"simweb: --change-mix: {exc}", file=sys.stderr)
            return 2
    _raise_fd_limit()
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
