"""Politeness audit of a crawl, from the server's side.

Reads simweb's request log (one dict per request, see ``server.py``) and the ground truth (see
``truth.py``) and checks, per host:

1. **robots** — no request for a path that the host's robots.txt disallows for the product
   token; when robots.txt answered 5xx, every request but robots.txt itself is a violation;
2. **overlaps** — never two requests to one host in flight at once;
3. **short gaps** — consecutive request starts on a host are at least the host's delay apart,
   ``max(min_delay, Crawl-delay for the token)``;
4. **robots first** — the first request to every host is for robots.txt (or the target of its
   robots.txt redirect).

The robots.txt matcher here is deliberately independent of the crawler's (which uses protego):
a bug shared by both would otherwise pass unnoticed. It follows RFC 9309: the groups naming the
product token (case-insensitively) are combined, else the ``*`` groups; the longest matching
pattern wins, ``Allow`` wins a tie; ``*`` matches any run of characters and a final ``$`` anchors
the end; ``/robots.txt`` is always allowed (without a query). Paths are compared as sent (the
simweb only links plain ASCII paths, so percent-encoding normalisation is not needed).

Only requests whose User-Agent contains the product token are audited; other traffic (a test's
own probes, another crawler) is counted as ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "AuditReport",
    "HostRobots",
    "ReferenceRobotsRules",
    "audit",
    "host_policy",
    "normalise_truth",
]

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


def _compile(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(part) for part in body.split("*"))
    return re.compile(regex + ("$" if anchored else ""), re.DOTALL)


def _agent_matches(agent: str, token: str) -> bool:
    # Agent lines sometimes carry a version ("BeamCrawl/1.0"); the product token is the part
    # before the slash, compared case-insensitively as RFC 9309 requires.
    return agent.split("/", 1)[0].strip().lower() == token.lower()


@dataclass(frozen=True)
class ReferenceRobotsRules:
    """The rules of one robots.txt that apply to one product token, as the audit reads them
    (its own reading, independent of the crawler's :class:`beamcrawl.core.policy.robots.RobotsRules`).

    Attributes:
        rules: ``(allow, pattern)`` pairs from the selected groups, in file order.
        crawl_delay: The first valid Crawl-delay in the selected groups, in seconds, or None.
    """

    rules: tuple[tuple[bool, str], ...] = ()
    crawl_delay: float | None = None
    _compiled: tuple[tuple[bool, int, re.Pattern[str]], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Compile once per file, not per request; frozen, hence object.__setattr__.
        compiled = tuple((allow, len(pat), _compile(pat)) for allow, pat in self.rules)
        object.__setattr__(self, "_compiled", compiled)

    @classmethod
    def parse(cls, text: str, token: str) -> ReferenceRobotsRules:
        """Parse robots.txt text and keep the rules for ``token``.

        Args:
            text: The robots.txt body.
            token: The crawler's product token, e.g. ``beamcrawl``.

        Returns:
            The rules of the groups naming the token, else of the ``*`` groups, else none.
        """
        groups: list[tuple[list[str], list[tuple[bool, str]], list[float]]] = []
        agents: list[str] | None = None
        in_rules = False
        for raw in _LINE_SPLIT.split(text.lstrip("\ufeff")):
            line = raw.split("#", 1)[0].strip()
            key, sep, value = line.partition(":")
            if not sep:
                continue
            key = key.strip().lower()
            value = value.strip()
            if key in ("user-agent", "useragent", "user agent"):
                # A user-agent line after rules starts a new group; consecutive user-agent lines
                # share one group.
                if agents is None or in_rules:
                    agents = []
                    groups.append((agents, [], []))
                    in_rules = False
                agents.append(value)
            elif key in ("allow", "disallow", "crawl-delay", "crawl_delay"):
                if agents is None:
                    continue  # rules before any user-agent line belong to no group
                in_rules = True
                _, rules, delays = groups[-1]
                if key == "crawl-delay" or key == "crawl_delay":
                    try:
                        delay = float(value)
                    except ValueError:
                        continue
                    if math.isfinite(delay) and delay >= 0:
                        delays.append(delay)
                elif value:
                    # An empty Disallow (or Allow) is no rule at all.
                    rules.append((key == "allow", value))
        selected = [g for g in groups if any(_agent_matches(a, token) for a in g[0])]
        if not selected:
            selected = [g for g in groups if any(a.strip() == "*" for a in g[0])]
        rules_out = tuple(r for g in selected for r in g[1])
        delays_out = [d for g in selected for d in g[2]]
        return cls.from_rules(rules_out, delays_out[0] if delays_out else None)

    @classmethod
    def from_rules(cls, rules: Iterable[tuple[bool, str]], crawl_delay: float | None = None) -> ReferenceRobotsRules:
        """Build rules from ``(allow, pattern)`` pairs."""
        return cls(tuple(rules), crawl_delay)

    def allowed(self, target: str) -> bool:
        """Say whether a path (with query) may be fetched.

        Args:
            target: Path and optional query string, as requested.

        Returns:
            True if no rule matches or the longest matching rule is an Allow (ties go to Allow).
        """
        if target == "/robots.txt":  # RFC 9309 §2.2.2: that URI, not /robots.txt?x (another target)
            return True
        best_len = -1
        best_allow = True
        for allow, length, regex in self._compiled:
            if regex.match(target) and (length > best_len or (length == best_len and allow)):
                best_len, best_allow = length, allow
        return best_allow


@dataclass(frozen=True)
class HostRobots:
    """What a host's robots.txt means for the crawler.

    Attributes:
        mode: ``rules`` (a 2xx file), ``allow_all`` (4xx, no rules) or ``disallow_all`` (5xx or
            no answer).
        rules: The parsed rules, for ``rules`` mode.
        robots_paths: Paths that count as fetching robots.txt (``/robots.txt`` and the target of
            a robots.txt redirect).
    """

    mode: str
    rules: ReferenceRobotsRules = ReferenceRobotsRules()
    robots_paths: frozenset[str] = frozenset({"/robots.txt"})

    @property
    def crawl_delay(self) -> float | None:
        """Crawl-delay for the token, if the file has one."""
        return self.rules.crawl_delay

    def is_robots(self, target: str) -> bool:
        """Whether a request target fetches robots.txt (or its redirect target)."""
        return target.split("?", 1)[0] in self.robots_paths

    def allows(self, target: str) -> bool:
        """Whether the crawler may request ``target``.

        A robots.txt fetch is always allowed: ``/robots.txt`` itself, without a query
        (RFC 9309 §2.2.2), and the targets of its redirects.
        """
        if target == "/robots.txt" or (self.is_robots(target) and not target.startswith("/robots.txt?")):
            return True
        if self.mode == "allow_all":
            return True
        if self.mode == "disallow_all":
            return False
        return self.rules.allowed(target)


def _path_of(url_or_path: str) -> str:
    if "://" in url_or_path:
        rest = url_or_path.split("://", 1)[1]
        slash = rest.find("/")
        return rest[slash:] if slash >= 0 else "/"
    return url_or_path


def host_policy(robots: Mapping[str, Any], token: str = "beamcrawl") -> HostRobots:
    """Derive a host's policy from the ``robots`` object of its truth record.

    Args:
        robots: ``{"status", "text", ...}``, with ``location`` and ``final_status`` when
            robots.txt redirects.
        token: The product token.

    Returns:
        The policy: 2xx → the rules in ``text``; 4xx → allow all; 5xx (or anything else) →
        disallow all.
    """
    status = int(robots.get("status", 404))
    paths = {"/robots.txt"}
    if 300 <= status < 400:
        location = robots.get("location")
        if location:
            paths.add(_path_of(str(location)).split("?", 1)[0])
        status = int(robots.get("final_status") or 0)
    if 200 <= status < 300:
        rules = ReferenceRobotsRules.parse(str(robots.get("text", "")), token)
        return HostRobots("rules", rules, frozenset(paths))
    if 400 <= status < 500:
        return HostRobots("allow_all", ReferenceRobotsRules(), frozenset(paths))
    return HostRobots("disallow_all", ReferenceRobotsRules(), frozenset(paths))


def normalise_truth(
    truth: Mapping[str, Any] | Iterable[Mapping[str, Any]],
) -> dict[str, Mapping[str, Any]]:
    """Return the truth as ``{host: record}``.

    Args:
        truth: Either that mapping already, or an iterable of per-host records (the lines of the
            truth file), each with a ``host`` key.

    Returns:
        Host name (lower case) to record.
    """
    if isinstance(truth, Mapping):
        return {str(h).lower(): rec for h, rec in truth.items()}
    return {str(rec["host"]).lower(): rec for rec in truth}


def _host_of(value: str) -> str:
    host = value.strip().lower().rstrip(".")
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@dataclass
class AuditReport:
    """The result of :func:`audit`.

    Counts are of audited requests (User-Agent containing the token); example lists hold at most
    ``max_examples`` entries each.
    """

    agent_token: str
    min_delay: float
    tolerance: float
    total_requests: int = 0
    ignored_requests: int = 0
    distinct_hosts: int = 0
    requests_per_host: dict[str, int] = field(default_factory=dict)
    status_counts: dict[int, int] = field(default_factory=dict)
    duration: float = 0.0
    request_rate: float = 0.0
    robots_violations: int = 0
    robots_violation_examples: list[dict[str, Any]] = field(default_factory=list)
    overlaps: int = 0
    overlap_examples: list[dict[str, Any]] = field(default_factory=list)
    short_gaps: int = 0
    short_gap_examples: list[dict[str, Any]] = field(default_factory=list)
    min_gap: float | None = None
    min_gap_host: str | None = None
    min_end_gap: float | None = None
    robots_not_first: int = 0
    robots_not_first_examples: list[dict[str, Any]] = field(default_factory=list)
    unknown_hosts: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        """Total politeness violations of all four kinds."""
        return self.robots_violations + self.overlaps + self.short_gaps + self.robots_not_first

    @property
    def ok(self) -> bool:
        """True when there is no violation."""
        return self.violations == 0

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready data (with ``violations`` included)."""
        out = asdict(self)
        out["status_counts"] = {str(k): v for k, v in self.status_counts.items()}
        out["violations"] = self.violations
        return out

    def summary(self) -> str:
        """Return a short human-readable report."""

        def fmt(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}s"

        lines = [
            f"politeness audit for '{self.agent_token}': " + ("OK" if self.ok else f"{self.violations} VIOLATION(S)"),
            f"  requests: {self.total_requests} to {self.distinct_hosts} hosts in "
            f"{self.duration:.1f}s ({self.request_rate:.1f}/s); ignored (other agents): "
            f"{self.ignored_requests}",
            f"  statuses: {dict(sorted(self.status_counts.items()))}",
            f"  robots violations: {self.robots_violations}",
            f"  overlapping requests: {self.overlaps}",
            f"  gaps below delay (min_delay={self.min_delay}s, tolerance={self.tolerance}s): "
            f"{self.short_gaps}; min start-to-start gap {fmt(self.min_gap)}"
            + (f" on {self.min_gap_host}" if self.min_gap_host else "")
            + f"; min end-to-start gap {fmt(self.min_end_gap)}",
            f"  hosts whose first request was not robots.txt: {self.robots_not_first}",
        ]
        if self.unknown_hosts:
            lines.append(f"  hosts not in the truth: {len(self.unknown_hosts)}")
        for title, examples in (
            ("robots violation", self.robots_violation_examples),
            ("overlap", self.overlap_examples),
            ("short gap", self.short_gap_examples),
            ("robots not first", self.robots_not_first_examples),
        ):
            for ex in examples[:3]:
                lines.append(f"    e.g. {title}: {ex}")
        return "\n".join(lines)


def audit(
    requests: Iterable[Mapping[str, Any]],
    truth: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    agent_token: str = "beamcrawl",
    min_delay: float = 1.0,
    tolerance: float = 0.0,
    max_examples: int = 10,
) -> AuditReport:
    """Audit a crawl's politeness from the server's request log.

    Args:
        requests: Log records with ``start``, ``end``, ``host``, ``path`` (with query), ``ua`` and
            ``status``; order does not matter.
        truth: Ground truth, ``{host: record}`` or the records themselves; only each record's
            ``robots`` object is used.
        agent_token: Product token: selects the audited requests (User-Agent containing it,
            case-insensitively) and the robots.txt group.
        min_delay: The crawler's delay floor in seconds; a host's delay is the larger of this and
            its Crawl-delay for the token.
        tolerance: Slack in seconds for clock jitter: a gap counts as short only when it is below
            ``delay - tolerance``, and requests overlap only when one starts more than
            ``tolerance`` before the previous one ended.
        max_examples: Examples kept per kind of violation.

    Returns:
        The report; ``report.violations == 0`` means the crawl was polite.
    """
    report = AuditReport(agent_token=agent_token, min_delay=min_delay, tolerance=tolerance)
    token = agent_token.lower()
    hosts = normalise_truth(truth)
    per_host: dict[str, list[tuple[float, float, str, int]]] = {}
    first_start = math.inf
    last_end = -math.inf
    for req in requests:
        if token not in str(req.get("ua") or "").lower():
            report.ignored_requests += 1
            continue
        start = float(req["start"])
        end = float(req.get("end", start))
        status = int(req.get("status", 0))
        host = _host_of(str(req["host"]))
        per_host.setdefault(host, []).append((start, end, str(req["path"]), status))
        report.total_requests += 1
        report.status_counts[status] = report.status_counts.get(status, 0) + 1
        first_start = min(first_start, start)
        last_end = max(last_end, end)

    if report.total_requests:
        report.duration = max(0.0, last_end - first_start)
        if report.duration > 0:
            report.request_rate = report.total_requests / report.duration
    report.distinct_hosts = len(per_host)

    def example(kind: list[dict[str, Any]], item: dict[str, Any]) -> None:
        if len(kind) < max_examples:
            kind.append(item)

    for host in sorted(per_host):
        reqs = sorted(per_host[host])
        report.requests_per_host[host] = len(reqs)
        record = hosts.get(host)
        policy: HostRobots | None = None
        if record is None:
            report.unknown_hosts.append(host)
        else:
            policy = host_policy(record.get("robots", {}), agent_token)
        robots_paths = policy.robots_paths if policy else frozenset({"/robots.txt"})
        delay = max(min_delay, (policy.crawl_delay if policy else None) or 0.0)

        first_path = reqs[0][2]
        if first_path.split("?", 1)[0] not in robots_paths:
            report.robots_not_first += 1
            example(
                report.robots_not_first_examples,
                {"host": host, "first_path": first_path, "start": reqs[0][0]},
            )

        max_end = -math.inf
        prev: tuple[float, float, str, int] | None = None
        for item in reqs:
            start, end, path, _ = item
            if policy is not None and not policy.allows(path):
                report.robots_violations += 1
                example(
                    report.robots_violation_examples,
                    {"host": host, "path": path, "robots": policy.mode, "start": start},
                )
            if prev is not None:
                if start < max_end - tolerance:
                    report.overlaps += 1
                    example(
                        report.overlap_examples,
                        {
                            "host": host,
                            "path": path,
                            "start": start,
                            "previous_path": prev[2],
                            "in_flight_until": max_end,
                        },
                    )
                gap = start - prev[0]
                if report.min_gap is None or gap < report.min_gap:
                    report.min_gap, report.min_gap_host = gap, host
                end_gap = start - max_end
                if report.min_end_gap is None or end_gap < report.min_end_gap:
                    report.min_end_gap = end_gap
                if gap < delay - tolerance:
                    report.short_gaps += 1
                    example(
                        report.short_gap_examples,
                        {
                            "host": host,
                            "path": path,
                            "previous_path": prev[2],
                            "gap": round(gap, 6),
                            "required": delay,
                        },
                    )
            max_end = max(max_end, end)
            prev = item
    return report
