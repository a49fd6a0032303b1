"""Crawl budgets tied to reputation, with deferral instead of deletion (IRLbot's STAR and BEAST).

Why budgets. URL-shape rules (core/urls/urlshape.py) stop traps that look like traps; many do not.
A calendar's ``/cal/2024/01.html`` links to ``/cal/2024/02.html`` for ever, faceted search is
shallow and wide, and wildcard DNS mints host names without end. Of the known answers, a global
depth limit is *bad*, per-host caps are *good* (but a hard cap cannot tell a trap from a
genuinely huge site), and *great* is IRLbot's pair:

* **STAR** (Spam Tracking and Avoidance through Reputation): every registered (pay-level)
  domain gets a page budget that grows with the number of *other domains* linking to it. That
  in-degree is "an asset spammers must pay for, unlike pages and subdomains": a spammer can
  mint a billion pages and hosts for free, but each linking domain costs a registration. In
  IRLbot's run most domains got 10 pages and the top 10,000 between 10 and 10,000.
* **BEAST** (Budget Enforcement with Anti-Spam Tactics): an over-budget URL is never deleted.
  It is set aside and looked at again at exponentially longer intervals, "so spam cannot
  snowball, yet a domain that gains reputation gets its URLs back".

Here the frontier is ordered by due time, so BEAST's queues re-read at growing intervals are
simply later due times: a deferred URL stays a frontier row, its due time moved forward by
:func:`defer_until` (1 period, then 2, 4, ... up to a ceiling). Nothing is ever dropped; every
function here that splits URLs returns all of them, on one side or the other.

Two containment rules sit beside the budget: a cap on *new* pages per host per round (so one
host's sudden million fresh links cannot crowd out its revisits or take a whole window), and a
cap on *new host names* per registered domain, per round and in total (wildcard DNS: each new
host name costs a DNS lookup and a robots.txt fetch that no page budget counts).

How many domains link to a domain is counted with :class:`LinkingDomains`, a small mergeable
sketch (exact up to 64 linkers, then a 1 KiB HyperLogLog, ~3 % error) so the count can live in
one store cell per domain, and merging the same edges twice (a rerun after a crash) changes
nothing.

Everything here is a pure function of its arguments: no clock, no store, no Beam.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import mmh3

__all__ = [
    "BudgetPlan",
    "BudgetRules",
    "HostAdmission",
    "LinkingDomains",
    "cap_new_pages",
    "defer_until",
    "domain_budget",
    "new_hosts_cap",
    "period_usage",
    "plan_budget",
]

T = TypeVar("T")

DAY = 86400.0


@dataclass(frozen=True)
class BudgetRules:
    """The budget settings of a crawl (the proposed ``--domain-budget-*`` options).

    Attributes:
        base: Pages per period for a domain nobody links to (IRLbot's floor was 10; ours is
            higher because our crawls start from few seeds, so most domains begin unlinked).
        per_domain: Extra pages per period for each other registered domain linking to it.
        cap: Most pages per period for any domain.
        seed_credit: Linking domains credited to a domain that holds a seed URL: the operator
            vouching for a site counts as that many independent linkers.
        period: Length of a budget period, seconds.
        defer_base: First deferral, seconds: one period, when the budget refills.
        defer_max: Longest deferral, seconds: a domain that gains reputation gets its URLs back
            within this long.
        new_pages_per_host: Most never-fetched URLs one host gets per round (0 = no cap).
        new_hosts_per_round: Most new host names a domain admits per round (0 = no cap).
        max_hosts: Most host names a domain ever admits (0 = no cap).
    """

    base: int = 100
    per_domain: int = 10
    cap: int = 100_000
    seed_credit: int = 100
    period: float = DAY
    defer_base: float = DAY
    defer_max: float = 30 * DAY
    new_pages_per_host: int = 1000
    new_hosts_per_round: int = 20
    max_hosts: int = 1000

    def __post_init__(self) -> None:
        problems = []
        for name in (
            "base",
            "per_domain",
            "seed_credit",
            "new_pages_per_host",
            "new_hosts_per_round",
            "max_hosts",
        ):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.cap < self.base:
            problems.append(f"cap ({self.cap}) must be >= base ({self.base})")
        if not self.period > 0:
            problems.append(f"period must be > 0, got {self.period}")
        if not 0 < self.defer_base <= self.defer_max:
            problems.append(f"need 0 < defer_base ({self.defer_base}) <= defer_max ({self.defer_max})")
        if problems:
            raise ValueError("; ".join(problems))

    def budget(self, linking_domains: int, seeded: bool = False) -> int:
        """:func:`domain_budget` with these settings (``seeded`` adds :attr:`seed_credit`)."""
        credit = self.seed_credit if seeded else 0
        return domain_budget(linking_domains + credit, self.base, self.per_domain, self.cap)

    def defer(self, now: float, times_deferred: int, spread_key: int | None = None) -> float:
        """:func:`defer_until` with these settings."""
        return defer_until(now, times_deferred, base=self.defer_base, ceiling=self.defer_max, spread_key=spread_key)


# --- STAR: the budget -------------------------------------------------------------------------


def domain_budget(linking_domains: int, base: int, per_domain: int, cap: int) -> int:
    """Pages a registered domain may be fetched per budget period.

    ``min(cap, base + per_domain × linking_domains)``: linear in the number of distinct *other*
    registered domains that link to it, as IRLbot's STAR makes it (a page budget in proportion
    to the number of other domains linking to it), from a floor that lets an
    unknown domain be sampled, to a ceiling that bounds any one domain's share of the crawl.
    Linear, not logarithmic: reputation is bought one registration at a time, so each linker
    is worth the same; the cap, not a curve, limits the giants.

    Args:
        linking_domains: Distinct other registered domains linking to it (negative counts as 0).
        base: Budget of a domain nobody links to.
        per_domain: Pages added per linking domain.
        cap: Largest budget (a value below ``base`` is raised to ``base``).
    """
    linkers = max(0, int(linking_domains))
    return max(0, min(max(cap, base), base + per_domain * linkers))


# --- BEAST: deferral --------------------------------------------------------------------------


def defer_until(
    now: float,
    times_deferred: int,
    *,
    base: float = DAY,
    ceiling: float = 30 * DAY,
    spread_key: int | None = None,
    spread: float = 0.25,
) -> float:
    """When a deferred URL is due again: ``now + min(ceiling, base × 2^times_deferred)``.

    Exponentially growing, as BEAST re-reads its queues at exponentially longer intervals, so
    a trap's backlog costs ever less attention (a URL deferred ``k`` times has been rewritten
    ``k`` times in ``base × (2^k − 1)`` seconds), and bounded, so a domain whose reputation
    grows gets its URLs back within ``ceiling``.

    Args:
        now: The time of the decision (epoch seconds).
        times_deferred: How often the URL was deferred before (0 the first time).
        base: First interval; one budget period, since the budget refills no sooner.
        ceiling: Longest interval.
        spread_key: A stable integer per URL (its fingerprint). When given, the interval is
            lengthened by up to ``spread`` of itself, so that a trap's thousands of deferred
            URLs come back spread over rounds, not all in one.
        spread: Largest extra fraction of the interval.
    """
    times = max(0, int(times_deferred))
    # 2**times overflows nothing, but is pointless past the ceiling: stop doubling there.
    interval = base
    for _ in range(times):
        if interval >= ceiling:
            break
        interval *= 2
    interval = min(interval, ceiling)
    if spread_key is not None and spread > 0:
        interval *= 1 + spread * ((spread_key & 0xFFFF) / 0x10000)
    return now + interval


@dataclass
class BudgetPlan(Generic[T]):
    """What a budget allows now and what it sets aside (with the time each is due again)."""

    allowed: list[T] = field(default_factory=list)
    deferred: list[tuple[T, float]] = field(default_factory=list)


def plan_budget(
    queued: Sequence[T],
    used: int,
    budget: int,
    now: float,
    *,
    times_deferred: Callable[[T], int] = lambda _item: 0,
    defer: Callable[[float, int, T], float] | None = None,
) -> BudgetPlan[T]:
    """Splits a domain's (or host's) queued URLs into those the budget allows and those deferred.

    The first ``budget − used`` of ``queued`` are allowed (so pass them best first), the rest
    deferred with a due time; none is dropped: ``len(allowed) + len(deferred) == len(queued)``.

    Args:
        queued: The due URLs, highest priority first.
        used: Pages already fetched from it this budget period (:func:`period_usage`).
        budget: Its budget for the period (:func:`domain_budget`).
        now: The time of the decision.
        times_deferred: How often an item was deferred before (drives the growing interval).
        defer: ``(now, times_deferred, item) -> due time``; by default :func:`defer_until`
            with its default intervals.
    """
    room = max(0, budget - max(0, used))
    plan: BudgetPlan[T] = BudgetPlan(allowed=list(queued[:room]))
    for item in queued[room:]:
        times = times_deferred(item)
        due = defer(now, times, item) if defer is not None else defer_until(now, times)
        plan.deferred.append((item, due))
    return plan


def period_usage(period_start: float, used: int, now: float, period: float) -> tuple[float, int]:
    """The current budget period's start and the pages fetched in it so far.

    Periods are aligned to multiples of ``period`` since the epoch, so every worker and every
    round agrees on them without coordination; a stored count from an older period is 0 now.

    Args:
        period_start: Start of the period the stored count belongs to (0 = none yet).
        used: The stored count.
        now: Epoch seconds.
        period: Period length, seconds.
    """
    current = math.floor(now / period) * period
    if period_start >= current:
        return period_start, max(0, used)
    return current, 0


# --- containment caps -------------------------------------------------------------------------


def cap_new_pages(queued: Sequence[T], is_new: Callable[[T], bool], cap: int) -> tuple[list[T], list[T]]:
    """At most ``cap`` never-fetched URLs per host per round; revisits are not capped.

    Args:
        queued: The host's URLs for the round, highest priority first.
        is_new: Whether an item was never fetched (a discovered URL, not a revisit).
        cap: Most new ones kept (0 = no cap).

    Returns:
        ``(kept, over)``, both in the input order; together they are ``queued``.
    """
    if cap <= 0:
        return list(queued), []
    kept: list[T] = []
    over: list[T] = []
    fresh = 0
    for item in queued:
        if is_new(item):
            if fresh >= cap:
                over.append(item)
                continue
            fresh += 1
        kept.append(item)
    return kept, over


@dataclass
class HostAdmission:
    """A domain's host names this round: which may be crawled and which wait.

    Attributes:
        admitted: Candidates that may be crawled: the known ones, then the new ones let in.
        new: The new names among ``admitted`` (to be added to the domain's known hosts).
        deferred: New names over the cap; their URLs are deferred, never dropped.
    """

    admitted: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)


def new_hosts_cap(
    candidates: Iterable[str],
    known: Collection[str],
    *,
    per_round: int,
    max_hosts: int,
) -> HostAdmission:
    """Contains wildcard DNS: how many *new* host names of one registered domain get crawled.

    A wildcard DNS zone answers for any name, so a trap can link to ``a1.spam.example``,
    ``a2.spam.example``, ... for ever; each new name costs a DNS lookup and a robots.txt
    fetch that no page budget counts, so a per-domain cap on new host names contains them.
    Known hosts are always admitted; new ones up to ``per_round`` this round and up to
    ``max_hosts`` known in all.

    Args:
        candidates: The domain's host names with URLs due, best first (for instance by the
            in-links of their URLs); duplicates are ignored.
        known: Host names the domain admitted before (kept in its record; at most
            ``max_hosts`` of them, which bounds the record).
        per_round: Most new names admitted now (0 = no cap).
        max_hosts: Most names known in all (0 = no cap).
    """
    out = HostAdmission()
    room_total = (max_hosts - len(known)) if max_hosts > 0 else math.inf
    room = min(per_round if per_round > 0 else math.inf, max(0, room_total))
    for host in dict.fromkeys(candidates):
        if host in known:
            out.admitted.append(host)
        elif len(out.new) < room:
            out.admitted.append(host)
            out.new.append(host)
        else:
            out.deferred.append(host)
    return out


# --- counting linking domains -----------------------------------------------------------------

_EXACT_MAX = 64  # linkers kept exactly (8 bytes each) before switching to the sketch
_P = 10  # HyperLogLog precision: 2^10 one-byte registers, standard error 1.04/32 ≈ 3.3 %
_M = 1 << _P
_ALPHA = 0.7213 / (1 + 1.079 / _M)
_EXACT_TAG = b"E"
_HLL_TAG = b"H"


def _hash(domain: str) -> int:
    return mmh3.hash64(domain.encode("utf-8"), seed=0x5EED, x64arch=True, signed=False)[0]


class LinkingDomains:
    """How many distinct registered domains link to one domain: a mergeable, idempotent count.

    Exact (a set of 64-bit hashes) up to 64 linkers, where a budget is most sensitive to each
    one; past that a HyperLogLog of 1,024 registers (1 KiB, ~3.3 % standard error). Adding a
    linker twice, or merging a sketch into itself, changes nothing, so a round that is rerun
    after a crash does not inflate anyone's budget.

    Serialised with :meth:`to_bytes` (at most 1 KiB + 1 byte) for one store cell per domain.
    """

    __slots__ = ("_exact", "_registers")

    def __init__(self) -> None:
        self._exact: set[int] | None = set()
        self._registers: bytearray | None = None

    # building
    def add(self, domain: str) -> None:
        """Counts ``domain`` (a registered domain, not the one being linked to) as a linker."""
        self._add_hash(_hash(domain))

    def _add_hash(self, h: int) -> None:
        if self._exact is not None:
            self._exact.add(h)
            if len(self._exact) > _EXACT_MAX:
                self._to_sketch()
            return
        assert self._registers is not None
        index = h >> (64 - _P)
        rest = h & ((1 << (64 - _P)) - 1)
        rank = (64 - _P) - rest.bit_length() + 1
        if rank > self._registers[index]:
            self._registers[index] = rank

    def _to_sketch(self) -> None:
        hashes = self._exact or set()
        self._exact = None
        self._registers = bytearray(_M)
        for h in hashes:
            self._add_hash(h)

    def merge(self, other: LinkingDomains) -> None:
        """Adds every linker ``other`` counted (a union: merging twice is merging once)."""
        if other._exact is not None:
            for h in other._exact:
                self._add_hash(h)
            return
        if self._exact is not None:
            self._to_sketch()
        assert self._registers is not None and other._registers is not None
        self._registers = bytearray(max(a, b) for a, b in zip(self._registers, other._registers, strict=True))

    # reading
    def count(self) -> int:
        """The number of distinct linkers: exact up to 64, estimated past that."""
        if self._exact is not None:
            return len(self._exact)
        assert self._registers is not None
        zeros = self._registers.count(0)
        estimate = _ALPHA * _M * _M / sum(2.0**-r for r in self._registers)
        if estimate <= 2.5 * _M and zeros:
            estimate = _M * math.log(_M / zeros)  # linear counting for the small range
        return max(_EXACT_MAX + 1, round(estimate))  # it held more than 64 when it switched

    def __len__(self) -> int:
        return self.count()

    # storing
    def to_bytes(self) -> bytes:
        """A compact, deterministic encoding (equal sketches give equal bytes)."""
        if self._exact is not None:
            return _EXACT_TAG + b"".join(h.to_bytes(8, "big") for h in sorted(self._exact))
        assert self._registers is not None
        return _HLL_TAG + bytes(self._registers)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> LinkingDomains:
        """Inverse of :meth:`to_bytes`; empty or None is an empty count.

        Raises:
            ValueError: The bytes are not a sketch (a corrupt cell).
        """
        out = cls()
        if not data:
            return out
        tag, body = data[:1], data[1:]
        if tag == _EXACT_TAG and len(body) % 8 == 0 and len(body) <= 8 * _EXACT_MAX:
            out._exact = {int.from_bytes(body[i : i + 8], "big") for i in range(0, len(body), 8)}
            return out
        if tag == _HLL_TAG and len(body) == _M and max(body) <= 64 - _P + 1:
            out._exact = None
            out._registers = bytearray(body)
            return out
        raise ValueError(f"not a linking-domains sketch ({len(data)} bytes, tag {tag!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LinkingDomains):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        kind = "exact" if self._exact is not None else "sketch"
        return f"LinkingDomains({kind}, count={self.count()})"
