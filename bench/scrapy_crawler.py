"""The crawler people would pick instead: a stock Scrapy broad crawl, for the benchmark only.

Runs in its own virtualenv (``.bench-venv``, made by ``bench/compare.py``); Scrapy is never a
dependency of beamcrawl and this file imports nothing from beamcrawl.

Settings are Scrapy's documented "Broad Crawls" advice plus the benchmark's politeness rules:

- broad crawls: ``CONCURRENT_REQUESTS`` (``--concurrency``; the docs suggest starting at 100
  and tuning for 80-90% CPU; the comparison uses 100), ``REACTOR_THREADPOOL_MAXSIZE = 20``,
  ``LOG_LEVEL = "INFO"``, ``COOKIES_ENABLED = False``, ``RETRY_ENABLED = False``,
  ``DOWNLOAD_TIMEOUT = 15``, ``REDIRECT_ENABLED = False``, and
  ``SCHEDULER_PRIORITY_QUEUE = "scrapy.pqueues.DownloaderAwarePriorityQueue"``. The docs'
  ``AJAXCRAWL_ENABLED`` is gone from Scrapy 2.19 (the middleware was removed), so it is not set;
  ``RANDOMIZE_DOWNLOAD_DELAY`` is deprecated there in favour of ``DOWNLOAD_DELAY_JITTER``, which
  is set to 0 (the same meaning as ``RANDOMIZE_DOWNLOAD_DELAY = False``);
- politeness: ``DOWNLOAD_DELAY`` (0.5 s), ``CONCURRENT_REQUESTS_PER_DOMAIN = 1`` (Scrapy's
  download slot is the host name), ``ROBOTSTXT_OBEY = True`` with the product token as
  ``ROBOTSTXT_USER_AGENT``, the benchmark's ``USER_AGENT``;
- the window: ``CLOSESPIDER_TIMEOUT`` (60 s);
- name resolution: simweb's host names do not exist in DNS, so ``TWISTED_DNS_RESOLVER`` (the
  2.19 name of ``DNS_RESOLVER``) points at :class:`LoopbackResolver`, which answers one
  address for every name. The telnet console and 2.19's remote-control HTTP server are off
  (nothing of the benchmark listens but simweb).

The spider follows every ``<a href>`` of every HTML response (``response.follow_all``, which
resolves against ``<base href>``), and stores nothing.

    .bench-venv/bin/python bench/scrapy_crawler.py --seeds seeds.txt --window 60 --delay 0.5 \\
        --user-agent "... beamcrawl ..." --robots-token beamcrawl --stats-out scrapy.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import scrapy
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.http import Response, TextResponse
from twisted.internet import defer
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

__all__ = ["BroadSpider", "LoopbackResolver", "broad_crawl_settings", "main"]

# Set by main() before the crawler is built: the resolver is made by Scrapy from its class path.
_RESOLVE_TO = "127.0.0.1"


@implementer(IResolverSimple)
class LoopbackResolver:
    """A Twisted resolver that answers one fixed address for every host name."""

    def __init__(self, reactor: Any, address: str) -> None:
        self.reactor = reactor
        self.address = address

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> LoopbackResolver:
        """Build it the way Scrapy builds ``TWISTED_DNS_RESOLVER`` classes."""
        return cls(reactor, _RESOLVE_TO)

    def install_on_reactor(self) -> None:
        """Make the reactor use this resolver for every connection."""
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:  # noqa: N802
        """Answer the fixed address (Twisted's resolver interface)."""
        return defer.succeed(self.address)


class BroadSpider(scrapy.Spider):
    """Starts from the seeds and follows every link of every HTML page."""

    name = "broad"

    def __init__(self, seeds: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = seeds

    async def start(self) -> AsyncIterator[Any]:
        """The seed requests."""
        for url in self.seeds:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[scrapy.Request]:
        """Follow every anchor of an HTML page."""
        if isinstance(response, TextResponse):
            yield from response.follow_all(css="a", callback=self.parse)


def broad_crawl_settings(
    *,
    delay: float,
    window: float,
    user_agent: str,
    robots_token: str,
    concurrency: int,
    priority_queue: str = "scrapy.pqueues.DownloaderAwarePriorityQueue",
) -> dict[str, Any]:
    """The benchmark's Scrapy settings (see the module docstring for where each comes from)."""
    return {
        # Broad Crawls (Scrapy docs)
        "CONCURRENT_REQUESTS": concurrency,
        "REACTOR_THREADPOOL_MAXSIZE": 20,
        "LOG_LEVEL": "INFO",
        "COOKIES_ENABLED": False,
        "RETRY_ENABLED": False,
        "DOWNLOAD_TIMEOUT": 15,
        "REDIRECT_ENABLED": False,
        "SCHEDULER_PRIORITY_QUEUE": priority_queue,
        # Politeness, the same as the other crawlers
        "DOWNLOAD_DELAY": delay,
        "DOWNLOAD_DELAY_JITTER": 0,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "ROBOTSTXT_OBEY": True,
        "ROBOTSTXT_USER_AGENT": robots_token,
        "USER_AGENT": user_agent,
        # The window
        "CLOSESPIDER_TIMEOUT": window,
        # Loopback names; no telnet console or remote-control server listening on a port
        "TWISTED_DNS_RESOLVER": f"{__name__}.LoopbackResolver",
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
    }


def build_parser() -> argparse.ArgumentParser:
    """Command-line parser."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", required=True, help="file of seed URLs, one per line")
    p.add_argument("--window", type=float, default=60.0, help="CLOSESPIDER_TIMEOUT in seconds")
    p.add_argument("--delay", type=float, default=0.5, help="DOWNLOAD_DELAY in seconds")
    p.add_argument("--user-agent", required=True, help="USER_AGENT")
    p.add_argument("--robots-token", default="beamcrawl", help="ROBOTSTXT_USER_AGENT")
    p.add_argument("--concurrency", type=int, default=100, help="CONCURRENT_REQUESTS (0: one per seed host)")
    p.add_argument("--resolve-all", default="127.0.0.1", help="address every host resolves to")
    p.add_argument(
        "--priority-queue",
        default="scrapy.pqueues.DownloaderAwarePriorityQueue",
        help="SCHEDULER_PRIORITY_QUEUE (to compare with Scrapy's default queue)",
    )
    p.add_argument("--stats-out", default=None, help="write Scrapy's final stats here as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the broad crawl and write Scrapy's stats."""
    global _RESOLVE_TO
    args = build_parser().parse_args(argv)
    _RESOLVE_TO = args.resolve_all
    with open(args.seeds, encoding="utf-8") as fh:
        seeds = [line.strip() for line in fh if line.strip() and not line.startswith("#")]
    settings = broad_crawl_settings(
        delay=args.delay,
        window=args.window,
        user_agent=args.user_agent,
        robots_token=args.robots_token,
        concurrency=args.concurrency or len(seeds),
        priority_queue=args.priority_queue,
    )
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BroadSpider)
    process.crawl(crawler, seeds=seeds)
    process.start()
    stats = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in crawler.stats.get_stats().items()}
    if args.stats_out:
        with open(args.stats_out, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, indent=2, sort_keys=True, default=str)
    print(json.dumps({k: stats.get(k) for k in ("downloader/response_count", "finish_reason", "elapsed_time_seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
