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


def _add(parser: Any, flag: str, **kwargs: Any) -> None:
    """Adds an option under its dashed name and, hidden, under its underscore spelling."""
    kwargs.setdefault("dest", flag.lstrip("-").replace("-", "_"))
    parser.add_argument(flag, **kwargs)
    alias = "--" + flag[2:].replace("-", "_")
    if alias != flag:
        hidden = {k: v for k, v in kwargs.items() if k not in ("help", "default")}
        # SUPPRESS: the alias sets nothing unless given, so the dashed option's default stands.
        parser.add_argument(alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **hidden)


def add_crawl_arguments(parser: Any) -> None:
    """Adds the crawl's own options to an argparse parser (or Beam's _BeamArgumentParser).

    Each ``--dashed-name`` is also accepted, unlisted in help, as ``--dashed_name``: Dataflow
    Flex Template parameters are passed as ``--name=value`` with underscores.
    """
    _add(parser, "--out", help="Output folder: warc/, pages/, links/, reports/ (DESIGN.md §2).")
    _add(parser, 
        "--store",
        default=None,
        help="State store URI: sqlite:///PATH, a folder, or bigtable://PROJECT/INSTANCE[/PREFIX]. "
        "Default: the embedded store under --out.",
    )
    _add(parser, 
        "--min-delay",
        dest="min_delay",
        type=_number(float, "--min-delay", 0),
        default=1.0,
        help="Politeness floor: seconds between the end of one response and the next request "
        "to the same host (like Scrapy's DOWNLOAD_DELAY). Default 1.",
    )
    _add(parser, 
        "--max-delay",
        dest="max_delay",
        type=_number(float, "--max-delay", 0),
        default=120.0,
        help="Ceiling of the adaptive per-host delay and cap on robots.txt Crawl-delay. Default 120.",
    )
    _add(parser, 
        "--ip-delay",
        dest="ip_delay",
        type=_number(float, "--ip-delay", 0),
        default=0.0,
        help="Per server IP: seconds between the end of one response on an IP and the next "
        "request to it, whatever the host; one request at a time per IP when set. Default 0 "
        "(off: the per-host delay still applies). Set it (e.g. 0.5) for webs with much shared "
        "hosting; it throttles every host behind one CDN address together.",
    )
    _add(parser, 
        "--dns-ttl",
        dest="dns_ttl",
        type=_number(float, "--dns-ttl", 0),
        default=300.0,
        help="Seconds a host's DNS answer (or failure) is kept in its host record. Default 300.",
    )
    _add(parser, 
        "--blocklist",
        default=None,
        metavar="FILE",
        help="Hosts that get no fetches: host names or globs (*.example.com), one per line. "
        "Their URLs stay queued; the round report counts them (assign_slots/hosts_blocklisted).",
    )
    _add(parser, 
        "--round-window",
        dest="round_window",
        type=_number(float, "--round-window", 0.001),
        default=60.0,
        help="Seconds a round spends fetching; a host gets at most round_window / delay URLs. Default 60.",
    )
    _add(parser, 
        "--user-agent",
        dest="user_agent",
        default=DEFAULT_USER_AGENT,
        help="User-Agent header (product token, version and contact URL).",
    )
    _add(parser, 
        "--robots-token",
        dest="robots_token",
        default=PRODUCT_TOKEN,
        help=f"Product token matched against robots.txt User-agent lines (default {PRODUCT_TOKEN}).",
    )
    _add(parser, 
        "--resolve",
        action="append",
        default=[],
        type=_resolve_rule,
        metavar="HOSTGLOB=IP",
        help="Map host names matching a glob to an address, like curl's --resolve. Repeatable.",
    )
    _add(parser, 
        "--allow-private-networks",
        dest="allow_private_networks",
        action="store_true",
        default=False,
        help="Allow loopback and private addresses (tests, the demo, intranet crawls). "
        "Link-local addresses are refused always.",
    )
    _add(parser, 
        "--fetch-shards",
        dest="fetch_shards",
        type=_number(int, "--fetch-shards", 1),
        default=16,
        help="Fetch shards; each host (its clock) is owned by exactly one. Default 16.",
    )
    _add(parser, 
        "--max-hosts-in-flight",
        dest="max_hosts_in_flight",
        type=_number(int, "--max-hosts-in-flight", 1),
        default=1000,
        help="Hosts crawled at once by one fetch loop (like Scrapy's CONCURRENT_REQUESTS). Default 1000.",
    )
    _add(parser, 
        "--connect-timeout",
        dest="connect_timeout",
        type=_number(float, "--connect-timeout", 0.001),
        default=10.0,
        help="Seconds to establish a connection. Default 10.",
    )
    _add(parser, 
        "--total-timeout",
        dest="total_timeout",
        type=_number(float, "--total-timeout", 0.001),
        default=30.0,
        help="Seconds for a whole request and response (like Scrapy's DOWNLOAD_TIMEOUT). Default 30.",
    )
    _add(parser, 
        "--max-body-bytes",
        dest="max_body_bytes",
        type=_number(int, "--max-body-bytes", 1),
        default=2 * 1024 * 1024,
        help="Bodies are cut at this size and recorded as truncated (like DOWNLOAD_MAXSIZE). Default 2 MiB.",
    )
    _add(parser, 
        "--seen-bucket-bits",
        dest="seen_bucket_bits",
        type=_number(int, "--seen-bucket-bits", 0),
        default=4,
        help="The URL-seen join uses at least 2^bits fingerprint buckets (key ranges of the seen "
        "set); more as the seen set grows. Default 4.",
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
    blocklist = _read_blocklist(args.blocklist) if getattr(args, "blocklist", None) else ()
    return CrawlConfig(
        out=out,
        store=args.store or f"sqlite:///{out}/store.sqlite",
        user_agent=args.user_agent,
        robots_token=args.robots_token,
        min_delay=args.min_delay,
        max_delay=args.max_delay,
        ip_delay=getattr(args, "ip_delay", 0.0),
        dns_ttl=getattr(args, "dns_ttl", 300.0),
        blocklist=blocklist,
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


def _read_blocklist(path: str) -> tuple[str, ...]:
    """The ``--blocklist`` file's patterns (a local path, or any Beam filesystem URL such as
    gs://, read once when the crawl starts). Raises ValueError naming the problem."""
    from beamcrawl.core.config import parse_blocklist

    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # only for remote files

        try:
            with FileSystems.open(path) as fh:
                text = fh.read().decode("utf-8")
        except Exception as exc:  # Beam wraps every filesystem's errors differently
            raise ValueError(f"cannot read blocklist file {path}: {exc}") from None
        return parse_blocklist(text.splitlines(), path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ValueError(f"blocklist file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read blocklist file {path}: {exc}") from None
    return parse_blocklist(text.splitlines(), path)
