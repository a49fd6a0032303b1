"""The crawl's settings as one small picklable value, handed to every stage.

The command line (``cli/args.py``) is parsed into one; stages receive a :class:`CrawlConfig`
so they can be built and tested without options plumbing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlsplit

from beamcrawl import DEFAULT_USER_AGENT, PRODUCT_TOKEN
from beamcrawl.core.policy.budget_rules import BudgetRules
from beamcrawl.core.policy.change_rate import ChangeModel, SchedulePolicy
from beamcrawl.core.urls.urlshape import ShapeRules

MiB = 1024 * 1024


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
    # Politeness (docs/ARCHITECTURE.md §3): delay = max(min_delay, crawl-delay capped, factor × response time).
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
    # Slow-drip servers (core/net/transfer.py): after ``transfer_grace`` seconds a body must have
    # averaged ``min_transfer_rate`` bytes/s (0 = off), and never be silent for
    # ``stall_timeout`` seconds (0 = off); else it is cut and recorded as WARC-Truncated: time.
    min_transfer_rate: float = 1024.0
    transfer_grace: float = 5.0
    stall_timeout: float = 10.0
    # Content-Encoding is undone into at most this many bytes (gzip, deflate, brotli bombs).
    max_decoded_bytes: int = 4 * MiB
    # Response header lines beyond this refuse the response (aiohttp also caps each line).
    max_response_headers: int = 128
    # URL shape (core/urls/urlshape.py): links failing a rule are never offered to the seen check.
    max_url_length: int = 2048
    max_url_depth: int = 16
    max_segment_repeats: int = 3
    fetch_documents: bool = False  # PDFs and office files are skipped by extension unless set
    # Budgets tied to reputation (core/policy/budget_rules.py, IRLbot's STAR and BEAST). A registered
    # domain may be fetched base + per_linker × (other domains linking to it) times per
    # period, seeded domains counting seed_domain_credit linkers more; URLs over it are
    # deferred by defer_base, doubling up to defer_max, never deleted.
    domain_budgets: bool = True
    domain_budget_base: int = 100
    domain_budget_per_linker: int = 10
    domain_budget_cap: int = 100_000
    seed_domain_credit: int = 100
    budget_period: float = 86400.0
    defer_base: float = 86400.0
    defer_max: float = 30 * 86400.0
    # Containment: never-fetched URLs per host per round, and new host names per registered
    # domain per round and in all (wildcard DNS). 0 = no cap.
    max_new_urls_per_host: int = 1000
    max_new_hosts_per_domain: int = 20
    max_hosts_per_domain: int = 1000
    # Parallelism.
    fetch_shards: int = 16
    max_hosts_in_flight: int = 1000
    seen_bucket_bits: int = 4
    warc_max_bytes: int = 1024 * 1024 * 1024
    max_urls_per_host: int = 0  # 0 = only the round window limits a host's slots
    # Freshness (core/policy/change_rate.py). A fetched URL is due again once it has probably changed
    # (its change rate λ, estimated from its visits), never sooner than min_revisit_interval
    # nor later than max_revisit_interval; among due URLs, slot assignment ranks revisits by
    # the freshness a fetch buys (revisit_horizon sets that scale against new URLs). A URL
    # gone (404/410) this many times in a row is dropped. "uniform" is the textbook baseline:
    # every page due again after min_revisit_interval, revisited oldest first.
    revisit_policy: str = "adaptive"  # adaptive | uniform
    min_revisit_interval: float = 3600.0
    max_revisit_interval: float = 60 * 86400.0
    revisit_horizon: float = 86400.0
    prior_change_interval: float = 7 * 86400.0
    max_gone_misses: int = 3
    # Sitemaps and feeds are read up to this many bytes (sitemaps.org's 50 MB limit).
    max_sitemap_bytes: int = 50 * MiB
    # Web Bot Auth (core/net/botauth.py): the Ed25519 key file (a path or gs:// URL, read by each
    # fetch loop, so the key never travels in the job's options) and the Signature-Agent URL.
    # Both or neither; with them every request is signed.
    signing_key: str | None = None
    signature_agent: str | None = None
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
        problems.extend(self._limit_problems())
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
        """What is wrong with the fetch limits, shape rules and budgets (one phrase each)."""
        problems = []
        at_least = {
            "--min-transfer-rate": (self.min_transfer_rate, 0),
            "--transfer-grace": (self.transfer_grace, 0),
            "--stall-timeout": (self.stall_timeout, 0),
            "--max-decoded-bytes": (self.max_decoded_bytes, 1),
            "--max-response-headers": (self.max_response_headers, 1),
            "--max-url-length": (self.max_url_length, 0),
            "--max-url-depth": (self.max_url_depth, 0),
            "--max-segment-repeats": (self.max_segment_repeats, 0),
            "--domain-budget-base": (self.domain_budget_base, 0),
            "--domain-budget-per-linker": (self.domain_budget_per_linker, 0),
            "--seed-domain-credit": (self.seed_domain_credit, 0),
            "--max-new-urls-per-host": (self.max_new_urls_per_host, 0),
            "--max-new-hosts-per-domain": (self.max_new_hosts_per_domain, 0),
            "--max-hosts-per-domain": (self.max_hosts_per_domain, 0),
        }
        for flag, (value, minimum) in at_least.items():
            if not value >= minimum:  # "not >=" also catches NaN
                problems.append(f"{flag} must be >= {minimum}, got {value}")
        if self.max_segment_repeats == 1:
            problems.append("--max-segment-repeats must be 0 (off) or >= 2, got 1")
        if self.domain_budget_cap < self.domain_budget_base:
            problems.append(
                f"--domain-budget-cap ({self.domain_budget_cap}) must be >= "
                f"--domain-budget-base ({self.domain_budget_base})"
            )
        if self.revisit_policy not in ("adaptive", "uniform"):
            problems.append(f"--revisit-policy must be adaptive or uniform, got {self.revisit_policy!r}")
        if not 0 < self.min_revisit_interval <= self.max_revisit_interval:
            problems.append(
                f"need 0 < --min-revisit-interval ({self.min_revisit_interval}) <= "
                f"--max-revisit-interval ({self.max_revisit_interval})"
            )
        if not self.revisit_horizon > 0:
            problems.append(f"--revisit-horizon must be > 0, got {self.revisit_horizon}")
        if not self.prior_change_interval > 0:
            problems.append(f"--prior-change-interval must be > 0, got {self.prior_change_interval}")
        if self.max_gone_misses < 1:
            problems.append(f"--max-gone-misses must be >= 1, got {self.max_gone_misses}")
        if self.max_sitemap_bytes < 1:
            problems.append(f"--max-sitemap-bytes must be >= 1, got {self.max_sitemap_bytes}")
        if not self.budget_period > 0:
            problems.append(f"--budget-period must be > 0, got {self.budget_period}")
        if not 0 < self.defer_base <= self.defer_max:
            problems.append(
                f"need 0 < --defer-base ({self.defer_base}) <= --defer-max ({self.defer_max})"
            )
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
