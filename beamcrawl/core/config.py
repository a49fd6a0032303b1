"""The crawl's settings as one small picklable value, handed to every stage.

PipelineOptions (pipelines/options.py) parse the command line; stages receive a
:class:`CrawlConfig` so they can be built and tested without options plumbing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlsplit

from beamcrawl import DEFAULT_USER_AGENT, PRODUCT_TOKEN


def parse_blocklist(lines: Iterable[str], source: str = "blocklist") -> tuple[str, ...]:
    """Host names or globs from a ``--blocklist`` file, lower-cased, in file order.

    One per line; blank lines and ``#`` comments are skipped. A URL stands for its host
    (``https://example.com/x`` blocks ``example.com``), a trailing dot is dropped.

    Raises:
        ValueError: A line that is no host name or glob (names the line).
    """
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.partition("#")[0].strip().lower()
        if not text:
            continue
        if "://" in text:
            text = urlsplit(text).netloc.rpartition("@")[2]
        text = text.rstrip(".")
        if not text or any(c.isspace() or c in "/\\" for c in text):
            raise ValueError(f"{source}:{number}: not a host name or glob: {line.strip()!r}")
        out.append(text)
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class CrawlConfig:
    """Settings of a crawl; every politeness knob has a documented default."""

    out: str
    store: str
    user_agent: str = DEFAULT_USER_AGENT
    robots_token: str = PRODUCT_TOKEN
    # Politeness (DESIGN.md §3): delay = max(min_delay, crawl-delay capped, factor × response time).
    min_delay: float = 1.0
    max_delay: float = 120.0
    response_time_factor: float = 10.0
    robots_max_age: float = 24 * 3600.0
    round_window: float = 60.0
    # Per server IP: the minimum gap from the end of one response on an IP to the next
    # request to it, whichever host it is for. 0 = off (see README: a CDN or a test web puts
    # many unrelated hosts on one address, and the per-host delay already applies).
    ip_delay: float = 0.0
    # How long a DNS answer (or a failure to get one) is kept in the host record. The system
    # resolver (getaddrinfo) reports no TTL, so this stands in for it.
    dns_ttl: float = 300.0
    # Operator steering: host names or globs that get no fetches (their URLs stay queued).
    blocklist: tuple[str, ...] = ()
    # Safety.
    allow_private_networks: bool = False
    resolve: tuple[tuple[str, str], ...] = ()
    # Bounded work per fetch.
    connect_timeout: float = 10.0
    total_timeout: float = 30.0
    max_body_bytes: int = 2 * 1024 * 1024
    max_redirects: int = 5
    # Parallelism.
    fetch_shards: int = 16
    max_hosts_in_flight: int = 1000
    seen_bucket_bits: int = 4
    warc_max_bytes: int = 1024 * 1024 * 1024
    max_urls_per_host: int = 0  # 0 = only the round window limits a host's slots
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.min_delay < 0:
            problems.append(f"--min-delay must be >= 0, got {self.min_delay}")
        if self.max_delay < self.min_delay:
            problems.append(
                f"--max-delay ({self.max_delay}) must be >= --min-delay ({self.min_delay})"
            )
        if self.ip_delay < 0:
            problems.append(f"--ip-delay must be >= 0, got {self.ip_delay}")
        if self.dns_ttl < 0:
            problems.append(f"--dns-ttl must be >= 0, got {self.dns_ttl}")
        if self.round_window <= 0:
            problems.append(f"--round-window must be > 0, got {self.round_window}")
        if self.fetch_shards < 1:
            problems.append(f"--fetch-shards must be >= 1, got {self.fetch_shards}")
        if not 0 <= self.seen_bucket_bits <= 16:
            problems.append(f"--seen-bucket-bits must be in 0..16, got {self.seen_bucket_bits}")
        if not self.robots_token or any(c.isspace() or c == "/" for c in self.robots_token):
            problems.append(f"--robots-token must be a product token, got {self.robots_token!r}")
        if problems:
            raise ValueError("; ".join(problems))
