"""The floor reference: a minimal polite crawler, as fast as asyncio and aiohttp go.

It does the least a polite crawler must do and nothing else, so its pages per second say what
Python on this machine can do at all under the same politeness rules as beamcrawl:

- per-host queues, one request in flight per host (one coroutine per host);
- the same fixed delay between requests to a host, counted from the *end* of the previous
  response (so the server never sees two request starts closer than the delay), raised to the
  host's robots.txt ``Crawl-delay`` for the product token when that is larger;
- robots.txt first on every host, per RFC 9309: up to five redirects followed, 2xx parsed
  with protego, 4xx means no rules, 5xx or no answer means nothing may be fetched;
- links from HTML pages with selectolax (``<base href>`` honoured, ``rel=nofollow`` and
  meta robots ``nofollow`` respected), fragments dropped, redirects' ``Location`` queued;
- a seen set per process; no storage, no parsing beyond links, no retries.

It runs as one process per core (``--processes``, default ``os.cpu_count()``); hosts are
partitioned between the processes by CRC-32 of the host name, each process crawls only the
hosts it owns and drops links to the others (every host's root is a seed, so no host is
missed). The parent runs partition 0 itself and forks the others.

Usage (the benchmark runs it for you)::

    python bench/floor_crawler.py --seeds seeds.txt --window 60 --delay 0.5 \\
        --resolve-all 127.0.0.1 --user-agent "... beamcrawl ..." --stats-out floor.json

Needs aiohttp, protego and selectolax (all beamcrawl dependencies); it imports nothing from
beamcrawl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import socket
import sys
import time
import zlib
from collections import deque
from dataclasses import asdict, dataclass, field
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from protego import Protego
from selectolax.lexbor import LexborHTMLParser

__all__ = ["FloorCrawler", "FloorStats", "extract_links", "main", "normalise", "owner_of"]

HTML_TYPES = ("text/html", "application/xhtml+xml")
MAX_ROBOTS_REDIRECTS = 5
MAX_BODY_BYTES = 2 * 1024 * 1024
REDIRECTS = (301, 302, 303, 307, 308)


class FixedResolver(AbstractResolver):
    """Resolves every host name to one address (simweb's names do not exist in DNS)."""

    def __init__(self, address: str) -> None:
        self.address = address

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Answer ``address`` for any ``host``."""
        fam = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        return [
            {
                "hostname": host,
                "host": self.address,
                "port": port,
                "family": fam,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        """Nothing to release."""


def owner_of(host: str, processes: int) -> int:
    """The process (``0..processes-1``) that owns ``host``: stable across processes."""
    return zlib.crc32(host.encode()) % processes


def normalise(url: str) -> tuple[str, str] | None:
    """Return ``(host, url)`` with the fragment dropped and the host lower-cased.

    Returns None for anything but an http(s) URL with a host.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    netloc = host if port is None else f"{host}:{port}"
    path = parts.path or "/"
    query = f"?{parts.query}" if parts.query else ""
    return host, f"{parts.scheme}://{netloc}{path}{query}"


def extract_links(body: bytes, url: str) -> list[str]:
    """Absolute link targets of an HTML page (``<base href>`` honoured, nofollow skipped)."""
    tree = LexborHTMLParser(body)
    for meta in tree.css("meta[name]"):
        attrs = meta.attributes
        if (attrs.get("name") or "").strip().lower() == "robots":
            content = (attrs.get("content") or "").lower()
            if "nofollow" in content or "none" in content:
                return []
    base = url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        href = (base_node.attributes.get("href") or "").strip()
        if href:
            base = urljoin(url, href)
    out: list[str] = []
    for node in tree.css("a[href]"):
        attrs = node.attributes
        rel = attrs.get("rel")
        if rel and "nofollow" in rel.lower():
            continue
        href = (attrs.get("href") or "").strip()
        if not href or href.startswith(("#", "javascript:", "mailto:", "tel:", "data:")):
            continue
        out.append(urljoin(base, href))
    return out


@dataclass
class FloorStats:
    """What one process (or, summed, the whole crawl) did.

    Attributes:
        processes: Processes that contributed.
        hosts: Hosts owned.
        requests: HTTP requests answered (robots.txt and redirects included).
        errors: Requests that got no HTTP answer.
        robots_requests: robots.txt requests (redirect hops included).
        robots_disallowed: URLs skipped because robots.txt forbids them.
        hosts_disallow_all: Hosts whose robots.txt was unreachable (nothing fetched).
        bytes: Body bytes received.
        links: Links extracted.
        statuses: Count per HTTP status.
        seconds: Wall seconds of the crawl loop.
    """

    processes: int = 1
    hosts: int = 0
    requests: int = 0
    errors: int = 0
    robots_requests: int = 0
    robots_disallowed: int = 0
    hosts_disallow_all: int = 0
    bytes: int = 0
    links: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, other: FloorStats) -> None:
        """Add another process's counts to these."""
        self.processes += other.processes
        for name in (
            "hosts",
            "requests",
            "errors",
            "robots_requests",
            "robots_disallowed",
            "hosts_disallow_all",
            "bytes",
            "links",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n
        self.seconds = max(self.seconds, other.seconds)


@dataclass
class _Host:
    """One host's queue and clock."""

    name: str
    origin: str
    queue: deque[str] = field(default_factory=deque)
    last_end: float = 0.0
    delay: float = 0.0
    rules: Protego | None = None
    mode: str = ""  # "" (robots not fetched yet), "rules", "allow_all", "disallow_all"
    running: bool = False


@dataclass(frozen=True)
class FloorConfig:
    """Settings of one crawl process."""

    delay: float
    window: float
    user_agent: str
    robots_token: str
    address: str
    partition: int = 0
    processes: int = 1
    timeout: float = 15.0


class FloorCrawler:
    """Crawls the hosts of one partition politely until the window ends."""

    def __init__(self, cfg: FloorConfig) -> None:
        self.cfg = cfg
        self.hosts: dict[str, _Host] = {}
        self.seen: set[str] = set()
        self.stats = FloorStats()
        self.deadline = 0.0
        self.session: aiohttp.ClientSession | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.headers = {"User-Agent": cfg.user_agent, "Accept": "text/html,*/*;q=0.8"}

    # ------------------------------------------------------------------------------ frontier

    def offer(self, url: str) -> None:
        """Queue a URL if this process owns its host and has not seen it."""
        norm = normalise(url)
        if norm is None:
            return
        host, url = norm
        if self.cfg.processes > 1 and owner_of(host, self.cfg.processes) != self.cfg.partition:
            return
        if url in self.seen:
            return
        self.seen.add(url)
        h = self.hosts.get(host)
        if h is None:
            parts = urlsplit(url)
            h = self.hosts[host] = _Host(host, f"{parts.scheme}://{parts.netloc}")
            h.delay = self.cfg.delay
        h.queue.append(url)
        if not h.running and time.time() < self.deadline:
            h.running = True
            task = asyncio.get_running_loop().create_task(self._crawl_host(h))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    # --------------------------------------------------------------------------------- hosts

    async def _wait_turn(self, h: _Host) -> bool:
        """Sleep until the host may be asked again; False when the window ends first."""
        at = h.last_end + h.delay
        if at >= self.deadline:
            return False
        gap = at - time.time()
        if gap > 0:
            await asyncio.sleep(gap)
        return time.time() < self.deadline

    async def _get(self, url: str) -> tuple[int, str, str, bytes] | None:
        """One GET, no redirects followed: ``(status, content type, location, body)``."""
        assert self.session is not None
        try:
            async with self.session.get(url, headers=self.headers, allow_redirects=False) as resp:
                body = await resp.content.read(MAX_BODY_BYTES)
                result = (
                    resp.status,
                    resp.headers.get("Content-Type", ""),
                    resp.headers.get("Location", ""),
                    body,
                )
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
            self.stats.errors += 1
            return None
        self.stats.requests += 1
        self.stats.bytes += len(result[3])
        key = str(result[0])
        self.stats.statuses[key] = self.stats.statuses.get(key, 0) + 1
        return result

    async def _robots(self, h: _Host) -> None:
        """Fetch robots.txt per RFC 9309 and set the host's mode, rules and delay."""
        url = f"{h.origin}/robots.txt"
        for _hop in range(MAX_ROBOTS_REDIRECTS + 1):
            if not await self._wait_turn(h):
                h.mode = "disallow_all"
                return
            answer = await self._get(url)
            h.last_end = time.time()
            self.stats.robots_requests += 1
            if answer is None:
                break
            status, _ctype, location, body = answer
            if status in REDIRECTS and location:
                url = urljoin(url, location)
                continue
            if 200 <= status < 300:
                h.rules = Protego.parse(body.decode("utf-8", errors="replace"))
                h.mode = "rules"
                crawl_delay = h.rules.crawl_delay(self.cfg.robots_token)
                if crawl_delay:
                    h.delay = max(h.delay, float(crawl_delay))
                return
            if 400 <= status < 500:
                h.mode = "allow_all"
                return
            break  # 5xx: unreachable
        else:
            h.mode = "allow_all"  # more than five redirects: "unavailable"
            return
        h.mode = "disallow_all"
        self.stats.hosts_disallow_all += 1

    def _allowed(self, h: _Host, url: str) -> bool:
        if h.mode == "allow_all":
            return True
        if h.mode == "rules" and h.rules is not None:
            return h.rules.can_fetch(url, self.cfg.robots_token)
        return False

    async def _crawl_host(self, h: _Host) -> None:
        try:
            if not h.mode:
                await self._robots(h)
            while h.queue:
                url = h.queue.popleft()
                if not self._allowed(h, url):
                    self.stats.robots_disallowed += 1
                    continue
                if not await self._wait_turn(h):
                    h.queue.appendleft(url)
                    return
                answer = await self._get(url)
                h.last_end = time.time()
                if answer is None:
                    continue
                status, ctype, location, body = answer
                if status in REDIRECTS and location:
                    self.offer(urljoin(url, location))
                elif 200 <= status < 300 and ctype.split(";", 1)[0].strip().lower() in HTML_TYPES:
                    links = extract_links(body, url)
                    self.stats.links += len(links)
                    for link in links:
                        self.offer(link)
        finally:
            h.running = False

    # ----------------------------------------------------------------------------------- run

    async def run(self, seeds: list[str]) -> FloorStats:
        """Crawl from ``seeds`` until the window ends; return the counts."""
        started = time.time()
        self.deadline = started + self.cfg.window
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=1, resolver=FixedResolver(self.cfg.address), ssl=False)
        timeout = aiohttp.ClientTimeout(total=self.cfg.timeout, sock_connect=self.cfg.timeout)
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=True,
        ) as session:
            self.session = session
            for seed in seeds:
                self.offer(seed)
            while self.tasks and time.time() < self.deadline:
                await asyncio.wait(set(self.tasks), timeout=max(0.0, self.deadline - time.time()))
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        self.stats.hosts = len(self.hosts)
        self.stats.seconds = time.time() - started
        return self.stats


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _run_partition(cfg: FloorConfig, seeds: list[str], stats_path: str | None) -> FloorStats:
    _raise_fd_limit()
    stats = asyncio.run(FloorCrawler(cfg).run(seeds))
    if stats_path:
        with open(stats_path, "w", encoding="utf-8") as fh:
            json.dump(asdict(stats), fh)
    return stats


def _child(cfg: FloorConfig, seeds: list[str], stats_path: str) -> None:
    _run_partition(cfg, seeds, stats_path)


def build_parser() -> argparse.ArgumentParser:
    """Command-line parser."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", required=True, help="file of seed URLs, one per line")
    p.add_argument("--window", type=float, default=60.0, help="seconds to crawl (default 60)")
    p.add_argument("--delay", type=float, default=0.5, help="per-host delay in seconds")
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="crawl processes")
    p.add_argument("--user-agent", required=True, help="User-Agent header")
    p.add_argument("--robots-token", default="beamcrawl", help="robots.txt product token")
    p.add_argument("--resolve-all", default="127.0.0.1", help="address every host resolves to")
    p.add_argument("--timeout", type=float, default=15.0, help="per-request timeout in seconds")
    p.add_argument("--stats-out", default=None, help="write the summed counts here as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the floor crawler; print and optionally write its counts."""
    args = build_parser().parse_args(argv)
    with open(args.seeds, encoding="utf-8") as fh:
        seeds = [line.strip() for line in fh if line.strip() and not line.startswith("#")]
    n = max(1, args.processes)
    configs = [
        FloorConfig(
            delay=args.delay,
            window=args.window,
            user_agent=args.user_agent,
            robots_token=args.robots_token,
            address=args.resolve_all,
            partition=i,
            processes=n,
            timeout=args.timeout,
        )
        for i in range(n)
    ]
    stats_dir = os.path.dirname(os.path.abspath(args.stats_out or "floor.json"))
    ctx = multiprocessing.get_context("fork")
    children = []
    for i in range(1, n):
        path = os.path.join(stats_dir, f".floor-part-{os.getpid()}-{i}.json")
        proc = ctx.Process(target=_child, args=(configs[i], seeds, path), daemon=False)
        proc.start()
        children.append((proc, path))
    total = _run_partition(configs[0], seeds, None)
    for proc, path in children:
        proc.join()
        try:
            with open(path, encoding="utf-8") as fh:
                total.add(FloorStats(**json.load(fh)))
            os.remove(path)
        except (OSError, ValueError) as exc:
            print(f"floor: partition result missing ({exc})", file=sys.stderr)
    summary = asdict(total)
    print(json.dumps(summary, sort_keys=True))
    if args.stats_out:
        with open(args.stats_out, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
