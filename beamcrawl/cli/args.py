"""The crawl's command-line arguments, defined once (no Beam import here).

The same definitions serve the ``beamcrawl crawl`` command line and the ``CrawlOptions``
PipelineOptions view (pipelines/options.py) used by templates and cluster runs.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, Callable

from beamcrawl import DEFAULT_USER_AGENT, PRODUCT_TOKEN

if TYPE_CHECKING:
    from beamcrawl.core.runtime.config import CrawlConfig


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


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _boolean(name: str) -> Callable[[str], bool]:
    """A switch that also takes a value: ``--name`` alone is true, ``--name=false`` is not
    (Flex Template parameters always arrive as ``--name=value``)."""

    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise argparse.ArgumentTypeError(f"{name} must be true or false, got {text!r}")

    return parse


def _resolve_rule(text: str) -> str:
    from beamcrawl.core.net.netpolicy import parse_resolve_rule

    try:
        parse_resolve_rule(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _add(parser: Any, flag: str, alias: str | None = None, **kwargs: Any) -> None:
    """Adds an option under its dashed name and, hidden, under its underscore spelling
    (or ``alias`` where the plain spelling is taken by one of Beam's own options)."""
    kwargs.setdefault("dest", flag.lstrip("-").replace("-", "_"))
    parser.add_argument(flag, **kwargs)
    alias = alias or "--" + flag[2:].replace("-", "_")
    if alias != flag:
        hidden = {k: v for k, v in kwargs.items() if k not in ("help", "default")}
        # SUPPRESS: the alias sets nothing unless given, so the dashed option's default stands.
        parser.add_argument(alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **hidden)


def add_crawl_arguments(parser: Any) -> None:
    """Adds the crawl's own options to an argparse parser (or Beam's _BeamArgumentParser).

    Each ``--dashed-name`` is also accepted, unlisted in help, as ``--dashed_name``: Dataflow
    Flex Template parameters are passed as ``--name=value`` with underscores.
    """
    _add(parser, "--out", help="Output folder: warc/, pages/, links/, reports/ (docs/ARCHITECTURE.md §2).")
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
        # Beam's SetupOptions owns --user_agent (the agent it reports to Google APIs): a
        # distinct dest and underscore spelling keep the two from colliding in one parser.
        alias="--crawler_user_agent",
        dest="crawler_user_agent",
        metavar="UA",
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
    _add_limit_arguments(parser)
    _add(parser,
        "--signing-key",
        default=None,
        metavar="FILE",
        help="Web Bot Auth: sign every request (RFC 9421) with this Ed25519 private key (PEM; "
        "make one with 'beamcrawl keys generate'). A path or gs:// URL. Needs --signature-agent.",
    )
    _add(parser,
        "--signature-agent",
        default=None,
        metavar="URL",
        help="Web Bot Auth: the https URL sent as Signature-Agent, under which the key directory "
        "(beamcrawl keys directory) is published. Needs --signing-key.",
    )
    _add(parser, 
        "--seen-bucket-bits",
        dest="seen_bucket_bits",
        type=_number(int, "--seen-bucket-bits", 0),
        default=4,
        help="The URL-seen join uses at least 2^bits fingerprint buckets (key ranges of the seen "
        "set); more as the seen set grows. Default 4.",
    )


def _add_limit_arguments(parser: Any) -> None:
    """Bounded work per input (docs/ARCHITECTURE.md §3): transfer limits, URL shape, budgets."""
    _add(parser,
        "--min-transfer-rate",
        type=_number(float, "--min-transfer-rate", 0),
        default=1024.0,
        help="Slow-drip servers: after --transfer-grace seconds a body must average at least "
        "this many bytes/s, else it is cut and recorded as WARC-Truncated: time. 0 = off. Default 1024.",
    )
    _add(parser,
        "--transfer-grace",
        type=_number(float, "--transfer-grace", 0),
        default=5.0,
        help="Seconds of a body's transfer before --min-transfer-rate is judged. Default 5.",
    )
    _add(parser,
        "--stall-timeout",
        type=_number(float, "--stall-timeout", 0),
        default=10.0,
        help="Seconds a body may go without a single byte before it is cut (WARC-Truncated: "
        "time). 0 = off. Default 10.",
    )
    _add(parser,
        "--max-decoded-bytes",
        type=_number(int, "--max-decoded-bytes", 1),
        default=4 * 1024 * 1024,
        help="Content-Encoding (gzip, deflate, br) is undone into at most this many bytes, so a "
        "compression bomb costs at most this much memory (what is parsed is cut there; the "
        "record keeps the bytes as sent, up to --max-body-bytes). Default 4 MiB.",
    )
    _add(parser,
        "--max-response-headers",
        type=_number(int, "--max-response-headers", 1),
        default=128,
        help="A response with more header lines is refused (an error, not a page). Each line "
        "is also capped at 16 KiB. Default 128.",
    )
    _add(parser,
        "--max-url-length",
        type=_number(int, "--max-url-length", 0),
        default=2048,
        help="Discovered URLs longer than this (characters) are not followed. 0 = no limit "
        "(normalisation still refuses URLs over 2048). Default 2048.",
    )
    _add(parser,
        "--max-url-depth",
        type=_number(int, "--max-url-depth", 0),
        default=16,
        help="Discovered URLs with more path segments are not followed. 0 = no limit. Default 16.",
    )
    _add(parser,
        "--max-segment-repeats",
        type=_number(int, "--max-segment-repeats", 0),
        default=3,
        help="Discovered URLs whose path repeats one segment this often (/a/b/a/b/a/) are not "
        "followed. 0 = off. Default 3.",
    )
    _add(parser,
        "--fetch-documents",
        type=_boolean("--fetch-documents"),
        nargs="?",
        const=True,
        default=False,
        help="Also follow links to PDFs and office documents (skipped by extension by default; "
        "images, video, audio, archives and executables always are).",
    )
    _add(parser,
        "--domain-budgets",
        type=_boolean("--domain-budgets"),
        nargs="?",
        const=True,
        default=True,
        help="Per registered domain page budgets tied to how many other domains link to it "
        "(IRLbot's STAR); over-budget URLs are deferred, never deleted. --domain-budgets=false "
        "turns them off. Default on.",
    )
    _add(parser,
        "--domain-budget-base",
        type=_number(int, "--domain-budget-base", 0),
        default=100,
        help="Pages per budget period for a domain nobody links to. Default 100.",
    )
    _add(parser,
        "--domain-budget-per-linker",
        type=_number(int, "--domain-budget-per-linker", 0),
        default=10,
        help="Extra pages per period for each other registered domain linking to it. Default 10.",
    )
    _add(parser,
        "--domain-budget-cap",
        type=_number(int, "--domain-budget-cap", 0),
        default=100_000,
        help="Most pages per period for any one domain. Default 100000.",
    )
    _add(parser,
        "--seed-domain-credit",
        type=_number(int, "--seed-domain-credit", 0),
        default=100,
        help="Linking domains credited to a domain that holds a seed URL. Default 100.",
    )
    _add(parser,
        "--budget-period",
        type=_number(float, "--budget-period", 1),
        default=86400.0,
        help="Seconds of a budget period (budgets refill at each multiple of it). Default 86400.",
    )
    _add(parser,
        "--defer-base",
        type=_number(float, "--defer-base", 1),
        default=86400.0,
        help="An over-budget URL is set aside until the next multiple of this many seconds "
        "(when a day-long budget refills); each further deferral doubles the wait. Default 86400.",
    )
    _add(parser,
        "--defer-max",
        type=_number(float, "--defer-max", 1),
        default=30 * 86400.0,
        help="Longest deferral, seconds (a domain that gains reputation gets its URLs back "
        "within this long). Default 2592000 (30 days).",
    )
    _add(parser,
        "--max-new-urls-per-host",
        type=_number(int, "--max-new-urls-per-host", 0),
        default=1000,
        help="Most never-fetched URLs one host gets per round (revisits are not capped). 0 = "
        "no cap. Default 1000.",
    )
    _add(parser,
        "--max-new-hosts-per-domain",
        type=_number(int, "--max-new-hosts-per-domain", 0),
        default=20,
        help="Most new host names one registered domain admits per round (wildcard DNS); the "
        "others' URLs are deferred. 0 = no cap. Default 20.",
    )
    _add(parser,
        "--max-hosts-per-domain",
        type=_number(int, "--max-hosts-per-domain", 0),
        default=1000,
        help="Most host names one registered domain admits in all. 0 = no cap. Default 1000.",
    )
    _add(parser,
        "--revisit-policy",
        choices=("adaptive", "uniform"),
        default="adaptive",
        help="How fetched pages are revisited: adaptive (due once probably changed, ranked by "
        "the freshness a fetch buys) or uniform (every page again after "
        "--min-revisit-interval, oldest first; a baseline). Default adaptive.",
    )
    _add(parser,
        "--min-revisit-interval",
        type=_number(float, "--min-revisit-interval", 0.001),
        default=3600.0,
        help="Shortest time, seconds, before a fetched page is fetched again. Default 3600.",
    )
    _add(parser,
        "--max-revisit-interval",
        type=_number(float, "--max-revisit-interval", 0.001),
        default=5184000.0,
        help="Longest time, seconds, a fetched page waits for its next visit, even if it never "
        "changed. Default 5184000 (60 days).",
    )
    _add(parser,
        "--revisit-horizon",
        type=_number(float, "--revisit-horizon", 0.001),
        default=86400.0,
        help="Seconds of freshness worth one new page of the same importance: how revisits and "
        "new URLs share a round (smaller favours revisits). Default 86400.",
    )
    _add(parser,
        "--prior-change-interval",
        type=_number(float, "--prior-change-interval", 0.001),
        default=604800.0,
        help="How often a page is assumed to change before its visits tell (the change-rate "
        "prior's median), seconds. Default 604800 (a week).",
    )
    _add(parser,
        "--max-gone-misses",
        type=_number(int, "--max-gone-misses", 1),
        default=3,
        help="404/410 answers in a row (a 410 counts twice) after which a URL is dropped. Default 3.",
    )
    _add(parser,
        "--max-sitemap-bytes",
        type=_number(int, "--max-sitemap-bytes", 1),
        default=50 * 1024 * 1024,
        help="Largest sitemap or feed read, bytes (decompressed; sitemaps.org's limit is 50 MB). "
        "Default 52428800.",
    )

# CrawlConfig fields set from the options of _add_limit_arguments, by the same name.
LIMIT_FIELDS = (
    "min_transfer_rate",
    "transfer_grace",
    "stall_timeout",
    "max_decoded_bytes",
    "max_response_headers",
    "max_url_length",
    "max_url_depth",
    "max_segment_repeats",
    "fetch_documents",
    "domain_budgets",
    "domain_budget_base",
    "domain_budget_per_linker",
    "domain_budget_cap",
    "seed_domain_credit",
    "budget_period",
    "defer_base",
    "defer_max",
    "max_new_urls_per_host",
    "max_new_hosts_per_domain",
    "max_hosts_per_domain",
    "revisit_policy",
    "min_revisit_interval",
    "max_revisit_interval",
    "revisit_horizon",
    "prior_change_interval",
    "max_gone_misses",
    "max_sitemap_bytes",
)


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line and exits 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def config_from_args(args: Any) -> "CrawlConfig":
    """Builds the stages' CrawlConfig from parsed arguments (an argparse namespace or a
    CrawlOptions view: both carry the attributes defined above). Raises ValueError."""
    import os

    from beamcrawl.core.runtime.config import CrawlConfig
    from beamcrawl.core.net.netpolicy import parse_resolve_rule

    if not args.out:
        raise ValueError("--out is required")
    out = args.out if "://" in args.out else os.path.abspath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {args.out} is a file, not a folder")
    if args.store:
        from beamcrawl.stores.base import StoreError, check_store_uri

        try:
            check_store_uri(args.store)
        except StoreError as exc:
            raise ValueError(f"--store: {exc}") from None
    blocklist = _read_blocklist(args.blocklist) if getattr(args, "blocklist", None) else ()
    # getattr: a namespace built elsewhere (tests, older callers) may lack the newer options.
    limits = {name: getattr(args, name) for name in LIMIT_FIELDS if getattr(args, name, None) is not None}
    return CrawlConfig(
        out=out,
        store=args.store or f"sqlite:///{out}/store.sqlite",
        user_agent=args.crawler_user_agent,
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
        **_signing(args),
        **limits,
    )


def _signing(args: Any) -> dict[str, str]:
    """The signing settings, the key read and checked now: a bad key is one line at launch,
    not an error in every fetch loop. Raises ValueError."""
    key, agent = getattr(args, "signing_key", None), getattr(args, "signature_agent", None)
    if not key and not agent:
        return {}
    if not key or not agent:
        raise ValueError("--signing-key and --signature-agent go together: give both or neither")
    from beamcrawl.core.net.botauth import Signer, read_key_file

    Signer.create(read_key_file(key), agent, source=key)
    return {"signing_key": key if "://" in key else os.path.abspath(key), "signature_agent": agent}


def _read_blocklist(path: str) -> tuple[str, ...]:
    """The ``--blocklist`` file's patterns (a local path, or any Beam filesystem URL such as
    gs://, read once when the crawl starts). Raises ValueError naming the problem."""
    from beamcrawl.core.runtime.config import parse_blocklist

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
