"""The crawl's command-line arguments, defined once (no Beam import here).

The same definitions serve the ``beamcrawl crawl`` command line and the ``CrawlOptions``
PipelineOptions view (pipelines/options.py) used by templates and cluster runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from beamcrawl import DEFAULT_USER_AGENT, PRODUCT_TOKEN

if TYPE_CHECKING:
    from beamcrawl.core.config import CrawlConfig


def _number(kind: type, name: str, minimum: float | None = None) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{name} must be finite, got {text!r}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {text!r}")
        return value

    return parse


def _resolve_rule(text: str) -> str:
    from beamcrawl.core.netpolicy import parse_resolve_rule

    try:
        parse_resolve_rule(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_crawl_arguments(parser: Any) -> None:
    """Adds the crawl's own options to an argparse parser (or Beam's _BeamArgumentParser)."""
    parser.add_argument("--out", help="Output folder: warc/, pages/, links/, reports/ (DESIGN.md §2).")
    parser.add_argument(
        "--store",
        default=None,
        help="State store URI: sqlite:///PATH, a folder, or bigtable://PROJECT/INSTANCE[/PREFIX]. "
        "Default: the embedded store under --out.",
    )
    parser.add_argument(
        "--min-delay",
        dest="min_delay",
        type=_number(float, "--min-delay", 0),
        default=1.0,
        help="Politeness floor: seconds between the end of one response and the next request "
        "to the same host (like Scrapy's DOWNLOAD_DELAY). Default 1.",
    )
    parser.add_argument(
        "--max-delay",
        dest="max_delay",
        type=_number(float, "--max-delay", 0),
        default=120.0,
        help="Ceiling of the adaptive per-host delay and cap on robots.txt Crawl-delay. Default 120.",
    )
    parser.add_argument(
        "--round-window",
        dest="round_window",
        type=_number(float, "--round-window", 0.001),
        default=60.0,
        help="Seconds a round spends fetching; a host gets at most round_window / delay URLs. Default 60.",
    )
    parser.add_argument(
        "--user-agent",
        dest="user_agent",
        default=DEFAULT_USER_AGENT,
        help="User-Agent header (product token, version and contact URL).",
    )
    parser.add_argument(
        "--robots-token",
        dest="robots_token",
        default=PRODUCT_TOKEN,
        help=f"Product token matched against robots.txt User-agent lines (default {PRODUCT_TOKEN}).",
    )
    parser.add_argument(
        "--resolve",
        action="append",
        default=[],
        type=_resolve_rule,
        metavar="HOSTGLOB=IP",
        help="Map host names matching a glob to an address, like curl's --resolve. Repeatable.",
    )
    parser.add_argument(
        "--allow-private-networks",
        dest="allow_private_networks",
        action="store_true",
        default=False,
        help="Allow loopback and private addresses (tests, the demo, intranet crawls). "
        "Link-local addresses are refused always.",
    )
    parser.add_argument(
        "--fetch-shards",
        dest="fetch_shards",
        type=_number(int, "--fetch-shards", 1),
        default=16,
        help="Fetch shards; each host (its clock) is owned by exactly one. Default 16.",
    )
    parser.add_argument(
        "--max-hosts-in-flight",
        dest="max_hosts_in_flight",
        type=_number(int, "--max-hosts-in-flight", 1),
        default=1000,
        help="Hosts crawled at once by one fetch loop (like Scrapy's CONCURRENT_REQUESTS). Default 1000.",
    )
    parser.add_argument(
        "--connect-timeout",
        dest="connect_timeout",
        type=_number(float, "--connect-timeout", 0.001),
        default=10.0,
        help="Seconds to establish a connection. Default 10.",
    )
    parser.add_argument(
        "--total-timeout",
        dest="total_timeout",
        type=_number(float, "--total-timeout", 0.001),
        default=30.0,
        help="Seconds for a whole request and response (like Scrapy's DOWNLOAD_TIMEOUT). Default 30.",
    )
    parser.add_argument(
        "--max-body-bytes",
        dest="max_body_bytes",
        type=_number(int, "--max-body-bytes", 1),
        default=2 * 1024 * 1024,
        help="Bodies are cut at this size and recorded as truncated (like DOWNLOAD_MAXSIZE). Default 2 MiB.",
    )
    parser.add_argument(
        "--seen-bucket-bits",
        dest="seen_bucket_bits",
        type=_number(int, "--seen-bucket-bits", 0),
        default=4,
        help="The URL-seen join uses 2^bits fingerprint buckets (key ranges). Default 4.",
    )


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line and exits 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def config_from_args(args: Any) -> "CrawlConfig":
    """Builds the stages' CrawlConfig from parsed arguments (an argparse namespace or a
    CrawlOptions view: both carry the attributes defined above). Raises ValueError."""
    import os

    from beamcrawl.core.config import CrawlConfig
    from beamcrawl.core.netpolicy import parse_resolve_rule

    if not args.out:
        raise ValueError("--out is required")
    out = args.out if "://" in args.out else os.path.abspath(args.out)
    return CrawlConfig(
        out=out,
        store=args.store or f"sqlite:///{out}/store.sqlite",
        user_agent=args.user_agent,
        robots_token=args.robots_token,
        min_delay=args.min_delay,
        max_delay=args.max_delay,
        round_window=args.round_window,
        allow_private_networks=args.allow_private_networks,
        resolve=tuple(parse_resolve_rule(r) for r in (args.resolve or [])),
        connect_timeout=args.connect_timeout,
        total_timeout=args.total_timeout,
        max_body_bytes=args.max_body_bytes,
        fetch_shards=args.fetch_shards,
        max_hosts_in_flight=args.max_hosts_in_flight,
        seen_bucket_bits=args.seen_bucket_bits,
    )
