"""The crawl's settings: one table of every setting, and the small picklable value built from it.

Each :class:`CrawlConfig` field that is a ``beamcrawl crawl`` option carries its
:class:`Option` (flag, help, bound, unit) as field metadata. That table is the one place a
setting is written: ``cli/args.py`` builds the argparse options (and so the help and the
Flex Template's flags) from it, the README's option list is generated from it, and
``__post_init__`` checks each bound, once, for the command line and for code alike. Stages
receive a :class:`CrawlConfig` so they can be built and tested without options plumbing.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Iterable
from urllib.parse import urlsplit

from beamcrawl import CONTACT_URL, DEFAULT_USER_AGENT, PRODUCT_TOKEN, __version__
from beamcrawl.core.content.htmlparse import MAX_LINKS
from beamcrawl.core.content.sitemaps import MAX_BYTES as MAX_SITEMAP_BYTES
from beamcrawl.core.policy.budget_rules import BudgetRules
from beamcrawl.core.policy.change_rate import ChangeModel, SchedulePolicy
from beamcrawl.core.policy.usage_prefs import PURPOSES
from beamcrawl.core.urls.urlnorm import MAX_URL_LENGTH
from beamcrawl.core.urls.urlshape import ShapeRules

MiB = 1024 * 1024
# Redirect hops followed for robots.txt (RFC 9309 asks for at least five) and queued for a
# page's redirect chain.
MAX_REDIRECTS = 5


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
class Option:
    """How one :class:`CrawlConfig` setting is given on the command line: the one place its
    flag, help, bound and unit are written (``cli/args.py`` builds argparse options from it,
    the README's option list is generated from it, ``__post_init__`` checks the bound).

    Attributes:
        help: What the option does; the default is appended ("Default 1.").
        flag: The dashed flag; ``--`` and the field name with dashes by default.
        dest: The argparse attribute, when it cannot be the field name.
        alias: The hidden second spelling; the flag with underscores by default (Flex
            Template parameters arrive as ``--name=value``).
        minimum: The value must be ``>=`` this (and finite).
        maximum: The value must be ``<=`` this.
        unit: ``"s"`` or ``"bytes"``: how the default reads in help.
        metavar: The value's name in help.
        choices: The only values allowed.
        switch: A flag without a value (``store_true``); other booleans take an optional
            ``true``/``false``.
        repeat: The flag may be given more than once (a list of values).
        shown: How the default reads in help, where the value itself would not do.
    """

    help: str
    flag: str = ""
    dest: str = ""
    alias: str = ""
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    switch: bool = False
    repeat: bool = False
    shown: str = ""


def _setting(default: Any = MISSING, help: str = "", **option: Any) -> Any:
    """A CrawlConfig field with its command-line :class:`Option`."""
    meta = {"option": Option(help=help, **option)}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def option_fields() -> list[tuple[Field[Any], Option]]:
    """The settings that are options, in the table's order, each with its :class:`Option`."""
    return [(f, f.metadata["option"]) for f in fields(CrawlConfig) if "option" in f.metadata]


def flag_of(f: Field[Any], opt: Option) -> str:
    """The dashed flag of a setting (``--min-delay`` for ``min_delay``)."""
    return opt.flag or "--" + f.name.replace("_", "-")


def _bound_problems(cfg: CrawlConfig) -> list[str]:
    """Each setting outside its option's bound or choices, one phrase each (NaN and infinity
    are out of bounds too)."""
    problems = []
    for f, opt in option_fields():
        value, flag = getattr(cfg, f.name), flag_of(f, opt)
        if opt.choices and value not in opt.choices:
            problems.append(f"{flag} must be {' or '.join(opt.choices)}, got {value!r}")
        if opt.minimum is None and opt.maximum is None:
            continue
        low = -math.inf if opt.minimum is None else opt.minimum
        high = math.inf if opt.maximum is None else opt.maximum
        if not low <= value <= high:  # "not <=" also catches NaN
            if opt.maximum is None:
                problems.append(f"{flag} must be >= {_number_text(low)}, got {value}")
            else:
                problems.append(f"{flag} must be in {_number_text(low)}..{_number_text(high)}, got {value}")
        elif not math.isfinite(value):
            problems.append(f"{flag} must be finite, got {value}")
    return problems


def _number_text(value: float) -> str:
    """A bound as written in a message: ``0``, ``0.001``, ``16``."""
    return f"{value:g}"


@dataclass(frozen=True)
class CrawlConfig:
    """Settings of a crawl; every politeness knob has a documented default.

    Each field made with ``_setting`` is a ``beamcrawl crawl`` option (and a Flex Template
    parameter): its flag, help, bound and unit are written here and nowhere else.
    """

    out: str = _setting(help="Output folder: warc/, pages/, links/, reports/ (docs/ARCHITECTURE.md §2).", metavar="DIR")
    store: str = _setting(
        help="State store URI: sqlite:///PATH, a folder, or bigtable://PROJECT/INSTANCE[/PREFIX]. "
        "Default: the embedded store under --out.",
        metavar="URI",
    )
    user_agent: str = _setting(
        DEFAULT_USER_AGENT,
        "User-Agent header (product token, version and contact URL; printable ASCII).",
        # Beam's SetupOptions owns --user_agent (the agent it reports to Google APIs): a
        # distinct dest and underscore spelling keep the two from colliding in one parser.
        dest="crawler_user_agent",
        alias="--crawler_user_agent",
        metavar="UA",
        # The help and the README name no version, so they stay true from release to release.
        shown=DEFAULT_USER_AGENT.replace(__version__, "VERSION").replace(CONTACT_URL, "CONTACT"),
    )
    robots_token: str = _setting(
        PRODUCT_TOKEN, "Product token matched against robots.txt User-agent lines.", metavar="TOKEN"
    )
    # What the crawl's pages are for (core/policy/usage_prefs.py): the site's usage preferences
    # for these purposes are obeyed, the strictest of them for the whole crawl. None: not read.
    purposes: tuple[str, ...] = _setting(
        (),
        "What the crawl is for: search, ai-input, ai-train (repeatable, or a comma list). "
        "The sites' usage preferences for them (robots.txt Content-Signal and Content-Usage, the "
        "Content-Usage header) are obeyed: a URL refused for any of them is not fetched, a page "
        "refused by its header is not archived or parsed. Default: none (preferences not read).",
        flag="--purpose",
        alias="--purposes",
        metavar="PURPOSE",
        repeat=True,
    )
    # Politeness (docs/ARCHITECTURE.md §3): delay = max(min_delay, crawl-delay capped, factor × response time).
    min_delay: float = _setting(
        1.0,
        "Politeness floor: seconds between the end of one response and the next request "
        "to the same host (like Scrapy's DOWNLOAD_DELAY).",
        minimum=0,
        unit="s",
    )
    max_delay: float = _setting(
        120.0,
        "Ceiling of the adaptive per-host delay and cap on robots.txt Crawl-delay, seconds.",
        minimum=0,
        unit="s",
    )
    response_time_factor: float = 10.0
    robots_max_age: float = 24 * 3600.0
    round_window: float = _setting(
        60.0,
        "Seconds a round spends fetching; a host gets at most round_window / delay URLs.",
        minimum=0.001,
        unit="s",
    )
    # Per server IP: the minimum gap from the end of one response on an IP to the next
    # request to it, whichever host it is for. 0 = off (see README: a CDN or a test web puts
    # many unrelated hosts on one address, and the per-host delay already applies).
    ip_delay: float = _setting(
        0.0,
        "Per server IP: seconds between the end of one response on an IP and the next "
        "request to it, whatever the host; one request at a time per IP when set. 0 = off "
        "(the per-host delay still applies). Set it (e.g. 0.5) for webs with much shared "
        "hosting; it throttles every host behind one CDN address together.",
        minimum=0,
        unit="s",
    )
    # How long a DNS answer (or a failure to get one) is kept in the host record. The system
    # resolver (getaddrinfo) reports no TTL, so this stands in for it.
    dns_ttl: float = _setting(
        300.0, "Seconds a host's DNS answer (or failure) is kept in its host record.", minimum=0, unit="s"
    )
    # Operator steering: host names or globs that get no fetches (their URLs stay queued).
    blocklist: tuple[str, ...] = _setting(
        (),
        "Hosts that get no fetches: host names or globs (*.example.com), one per line. "
        "Their URLs stay queued; the round report counts them (assign_slots/hosts_blocklisted).",
        metavar="FILE",
    )
    # Safety.
    allow_private_networks: bool = _setting(
        False,
        "Allow loopback and private addresses (tests, the demo, intranet crawls). "
        "Link-local addresses are refused always.",
        switch=True,
    )
    resolve: tuple[tuple[str, str], ...] = _setting(
        (),
        "Map host names matching a glob to an address, like curl's --resolve. Repeatable.",
        metavar="HOSTGLOB=IP",
        repeat=True,
    )
    # Bounded work per fetch.
    connect_timeout: float = _setting(10.0, "Seconds to establish a connection.", minimum=0.001, unit="s")
    total_timeout: float = _setting(
        30.0,
        "Seconds for a whole request and response (like Scrapy's DOWNLOAD_TIMEOUT).",
        minimum=0.001,
        unit="s",
    )
    max_body_bytes: int = _setting(
        2 * MiB,
        "Bodies are cut at this size and recorded as truncated (like DOWNLOAD_MAXSIZE); a robots.txt is read to at least 500 KiB, as RFC 9309 asks.",
        minimum=1,
        unit="bytes",
    )
    max_redirects: int = MAX_REDIRECTS
    # Slow-drip servers (core/net/transfer.py): after ``transfer_grace`` seconds a body must have
    # averaged ``min_transfer_rate`` bytes/s (0 = off), and never be silent for
    # ``stall_timeout`` seconds (0 = off); else it is cut and recorded as WARC-Truncated: time.
    min_transfer_rate: float = _setting(
        1024.0,
        "Slow-drip servers: after --transfer-grace seconds a body must average at least "
        "this many bytes/s, else it is cut and recorded as WARC-Truncated: time. 0 = off.",
        minimum=0,
    )
    transfer_grace: float = _setting(
        5.0, "Seconds of a body's transfer before --min-transfer-rate is judged.", minimum=0, unit="s"
    )
    stall_timeout: float = _setting(
        10.0,
        "Seconds a body may go without a single byte before it is cut (WARC-Truncated: time). 0 = off.",
        minimum=0,
        unit="s",
    )
    # Content-Encoding is undone into at most this many bytes (gzip, deflate, brotli bombs).
    max_decoded_bytes: int = _setting(
        4 * MiB,
        "Content-Encoding (gzip, deflate, br) is undone into at most this many bytes, so a "
        "compression bomb costs at most this much memory (what is parsed is cut there; the "
        "record keeps the bytes as sent, up to --max-body-bytes).",
        minimum=1,
        unit="bytes",
    )
    # Response header lines beyond this refuse the response (aiohttp also caps each line).
    max_response_headers: int = _setting(
        128,
        "A response with more header lines is refused (an error, not a page). Each line is also capped at 16 KiB.",
        minimum=1,
    )
    # URL shape (core/urls/urlshape.py): links failing a rule are never offered to the seen check.
    max_url_length: int = _setting(
        MAX_URL_LENGTH,
        "Discovered URLs longer than this (characters) are not followed. 0 = no limit "
        f"(normalisation still refuses URLs over {MAX_URL_LENGTH}).",
        minimum=0,
    )
    max_url_depth: int = _setting(
        16, "Discovered URLs with more path segments are not followed. 0 = no limit.", minimum=0
    )
    max_segment_repeats: int = _setting(
        3,
        "Discovered URLs whose path repeats one segment this often (/a/b/a/b/a/) are not followed. 0 = off.",
        minimum=0,
    )
    fetch_documents: bool = _setting(
        False,
        "Also follow links to PDFs and office documents (skipped by extension by default; "
        "images, video, audio, archives and executables always are).",
    )
    # Budgets tied to reputation (core/policy/budget_rules.py, IRLbot's STAR and BEAST). A registered
    # domain may be fetched base + per_linker × (other domains linking to it) times per
    # period, seeded domains counting seed_domain_credit linkers more; URLs over it are
    # deferred by defer_base, doubling up to defer_max, never deleted.
    domain_budgets: bool = _setting(
        True,
        "Per registered domain page budgets tied to how many other domains link to it "
        "(IRLbot's STAR); over-budget URLs are deferred, never deleted. --domain-budgets=false "
        "turns them off.",
    )
    domain_budget_base: int = _setting(100, "Pages per budget period for a domain nobody links to.", minimum=0)
    domain_budget_per_linker: int = _setting(
        10, "Extra pages per period for each other registered domain linking to it.", minimum=0
    )
    domain_budget_cap: int = _setting(100_000, "Most pages per period for any one domain.", minimum=0)
    seed_domain_credit: int = _setting(100, "Linking domains credited to a domain that holds a seed URL.", minimum=0)
    budget_period: float = _setting(
        86400.0,
        "Seconds of a budget period (budgets refill at each multiple of it).",
        minimum=1,
        unit="s",
    )
    defer_base: float = _setting(
        86400.0,
        "An over-budget URL is set aside until the next multiple of this many seconds "
        "(when a day-long budget refills); each further deferral doubles the wait.",
        minimum=1,
        unit="s",
    )
    defer_max: float = _setting(
        30 * 86400.0,
        "Longest deferral, seconds (a domain that gains reputation gets its URLs back within this long).",
        minimum=1,
        unit="s",
    )
    # Containment: never-fetched URLs per host per round, and new host names per registered
    # domain per round and in all (wildcard DNS). 0 = no cap.
    max_new_urls_per_host: int = _setting(
        1000,
        "Most never-fetched URLs one host gets per round (revisits are not capped). 0 = no cap.",
        minimum=0,
    )
    max_new_hosts_per_domain: int = _setting(
        20,
        "Most new host names one registered domain admits per round (wildcard DNS); the "
        "others' URLs are deferred. 0 = no cap.",
        minimum=0,
    )
    max_hosts_per_domain: int = _setting(
        1000, "Most host names one registered domain admits in all. 0 = no cap.", minimum=0
    )
    # Parallelism.
    fetch_shards: int = _setting(16, "Fetch shards; each host (its clock) is owned by exactly one.", minimum=1)
    max_hosts_in_flight: int = _setting(
        1000,
        "Hosts crawled at once by one fetch loop (like Scrapy's CONCURRENT_REQUESTS).",
        minimum=1,
    )
    max_unparsed_bytes: int = _setting(
        64 * MiB,
        "Most bytes of fetched responses one fetch loop holds before the stage has parsed "
        "them; past it the loop sends no request until half of that is parsed (memory stays "
        "flat however long the window, when pages come faster than they are parsed).",
        minimum=1,
        unit="bytes",
    )
    seen_bucket_bits: int = _setting(
        4,
        "The URL-seen join uses at least 2^bits fingerprint buckets (key ranges of the seen "
        "set); more as the seen set grows.",
        minimum=0,
        maximum=16,
    )
    warc_max_bytes: int = _setting(
        1024 * 1024 * 1024,
        "A WARC file is closed and the next begun once it holds this many bytes (gzipped; the "
        "capture that passes the size ends the file). Each writer task writes its own files.",
        minimum=16 * 1024,
        unit="bytes",
    )
    max_urls_per_host: int = 0  # 0 = only the round window limits a host's slots
    # Freshness (core/policy/change_rate.py). A fetched URL is due again once it has probably changed
    # (its change rate λ, estimated from its visits), never sooner than min_revisit_interval
    # nor later than max_revisit_interval; among due URLs, slot assignment ranks revisits by
    # the freshness a fetch buys (revisit_horizon sets that scale against new URLs). A URL
    # gone (404/410) this many times in a row is dropped. "uniform" is the textbook baseline:
    # every page due again after min_revisit_interval, revisited oldest first.
    revisit_policy: str = _setting(
        "adaptive",
        "How fetched pages are revisited: adaptive (due once probably changed, ranked by "
        "the freshness a fetch buys) or uniform (every page again after "
        "--min-revisit-interval, oldest first; a baseline).",
        choices=("adaptive", "uniform"),
    )
    min_revisit_interval: float = _setting(
        3600.0,
        "Shortest time, seconds, before a fetched page is fetched again.",
        minimum=0.001,
        unit="s",
    )
    max_revisit_interval: float = _setting(
        60 * 86400.0,
        "Longest time, seconds, a fetched page waits for its next visit, even if it never changed.",
        minimum=0.001,
        unit="s",
    )
    revisit_horizon: float = _setting(
        86400.0,
        "Seconds of freshness worth one new page of the same importance: how revisits and "
        "new URLs share a round (smaller favours revisits).",
        minimum=0.001,
        unit="s",
    )
    prior_change_interval: float = _setting(
        7 * 86400.0,
        "How often a page is assumed to change before its visits tell (the change-rate prior's median), seconds.",
        minimum=0.001,
        unit="s",
    )
    max_gone_misses: int = _setting(
        3, "404/410 answers in a row (a 410 counts twice) after which a URL is dropped.", minimum=1
    )
    # Sitemaps and feeds are read up to this many bytes (sitemaps.org's 50 MB limit).
    max_sitemap_bytes: int = _setting(
        MAX_SITEMAP_BYTES,
        "Largest sitemap or feed read, bytes (decompressed; sitemaps.org's limit is 50 MB).",
        minimum=1,
        unit="bytes",
    )
    # An HTML page gives at most this many links, the first in document order; the parse reads
    # no link element past the one that passes it (core/content/htmlparse.py page_links).
    max_links_per_page: int = _setting(
        MAX_LINKS,
        "Most links one HTML page gives, the first in document order (like Heritrix's "
        "max-outlinks, 6,000 there); the others are not read, the page is marked "
        "parse_truncated=links and counted (parse/truncated_links). Far above any real page "
        "the tests read (359 links at most). 0 = no cap.",
        minimum=0,
    )
    # Web Bot Auth (core/net/botauth.py): the Ed25519 key file (a path or gs:// URL, read by each
    # fetch loop, so the key never travels in the job's options) and the Signature-Agent URL.
    # Both or neither; with them every request is signed.
    signing_key: str | None = _setting(
        None,
        "Web Bot Auth: sign every request (RFC 9421) with this Ed25519 private key (PEM; "
        "make one with 'beamcrawl keys generate'), or with the newest key of this key folder "
        "able to sign ('beamcrawl keys rotate'). A path or gs:// URL (a folder's ends in /). "
        "Needs --signature-agent.",
        metavar="FILE|DIR",
    )
    signature_agent: str | None = _setting(
        None,
        "Web Bot Auth: the https URL sent as Signature-Agent, under which the key directory "
        "(beamcrawl keys directory) is published. Needs --signing-key.",
        metavar="URL",
    )
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = _bound_problems(self)
        if self.max_delay < self.min_delay:
            problems.append(f"--max-delay ({self.max_delay}) must be >= --min-delay ({self.min_delay})")
        if not self.user_agent or not all(" " <= c <= "~" for c in self.user_agent):
            # A request header goes out as its bytes: only visible ASCII and spaces are the same
            # bytes to every reader (RFC 9110 §5.5), on the wire and in the WARC request record.
            problems.append(f"--user-agent must be printable ASCII, got {self.user_agent!r}")
        if not self.robots_token or any(c.isspace() or c == "/" for c in self.robots_token):
            problems.append(f"--robots-token must be a product token, got {self.robots_token!r}")
        problems.extend(self._limit_problems())
        if not isinstance(self.purposes, tuple) or any(p not in PURPOSES for p in self.purposes):
            problems.append(f"--purpose must be {', '.join(PURPOSES)} (one or more), got {self.purposes!r}")
        if (self.signing_key is None) != (self.signature_agent is None):
            problems.append("--signing-key and --signature-agent go together: give both or neither")
        elif self.signature_agent is not None:
            from beamcrawl.core.net.botauth import BotAuthError, check_agent

            try:
                check_agent(self.signature_agent)
            except BotAuthError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("; ".join(problems))

    def _limit_problems(self) -> list[str]:
        """What is wrong between the limits, shape rules and budgets (one phrase each); each
        setting's own bound is its option's (``_bound_problems``)."""
        problems = []
        if self.max_segment_repeats == 1:
            problems.append("--max-segment-repeats must be 0 (off) or >= 2, got 1")
        if self.domain_budget_cap < self.domain_budget_base:
            problems.append(
                f"--domain-budget-cap ({self.domain_budget_cap}) must be >= "
                f"--domain-budget-base ({self.domain_budget_base})"
            )
        if not self.min_revisit_interval <= self.max_revisit_interval:
            problems.append(
                f"need --min-revisit-interval ({self.min_revisit_interval}) <= "
                f"--max-revisit-interval ({self.max_revisit_interval})"
            )
        if not self.defer_base <= self.defer_max:
            problems.append(f"need --defer-base ({self.defer_base}) <= --defer-max ({self.defer_max})")
        return problems

    def shape_rules(self) -> ShapeRules:
        """The URL-shape rules these settings ask for (core/urls/urlshape.py)."""
        return ShapeRules(
            max_length=self.max_url_length,
            max_depth=self.max_url_depth,
            max_segment_repeats=self.max_segment_repeats,
            skip_documents=not self.fetch_documents,
        )

    def schedule_policy(self) -> SchedulePolicy:
        """The revisit schedule these settings ask for (core/policy/change_rate.py). The estimator's
        prior median is one change per ``prior_change_interval``, and its ceiling one per
        ``min_revisit_interval`` (or per minute, if that is longer): a faster page cannot be
        followed anyway."""
        model = ChangeModel(
            prior_rate=1.0 / self.prior_change_interval,
            min_rate=min(ChangeModel.min_rate, 1.0 / self.max_revisit_interval),
            max_rate=max(ChangeModel.max_rate, 1.0 / self.min_revisit_interval),
        )
        return SchedulePolicy(
            min_interval=self.min_revisit_interval,
            max_interval=self.max_revisit_interval,
            gone_interval=min(SchedulePolicy.gone_interval, self.max_revisit_interval),
            retry_base=min(SchedulePolicy.retry_base, self.min_revisit_interval),
            retry_cap=min(SchedulePolicy.retry_cap, self.max_revisit_interval),
            max_misses=self.max_gone_misses,
            horizon=self.revisit_horizon,
            model=model,
        )

    def budget_rules(self) -> BudgetRules:
        """The budget and containment settings (core/policy/budget_rules.py). With ``domain_budgets`` off
        the page budget is unbounded; the host caps still apply."""
        base, cap = self.domain_budget_base, self.domain_budget_cap
        if not self.domain_budgets:
            base = cap = UNLIMITED
        return BudgetRules(
            base=base,
            per_domain=self.domain_budget_per_linker,
            cap=cap,
            seed_credit=self.seed_domain_credit,
            period=self.budget_period,
            defer_base=self.defer_base,
            defer_max=self.defer_max,
            new_pages_per_host=self.max_new_urls_per_host,
            new_hosts_per_round=self.max_new_hosts_per_domain,
            max_hosts=self.max_hosts_per_domain,
        )


# A page budget no domain reaches (budgets off): 2^62 pages.
UNLIMITED = 1 << 62
