"""Freshness: how fast each page changes, how much a revisit is worth, and when it is due.

Each page's changes are modelled as a Poisson process with rate λ (changes per second). The
chance that a page changed in the ``t`` seconds since the last visit is ``1 − e^(−λt)``, and
the design notes rank revisits by ``importance × (1 − e^(−λt))``. That spends a tight budget
on pages that change faster than any budget can follow, so :func:`revisit_priority` ranks by
the freshness a fetch buys instead (the Lagrangian index of the fixed-budget freshness
problem; its docstring has the formula and the measurements). New URLs sit on the same
scale at their importance (all of their content is new to us), so revisits and discoveries
compete in one priority order in slot assignment.

The change-rate estimator (and why this one)
-------------------------------------------
A crawler never sees changes, only visits that found the page different from last time: the
history is *incomplete* (Cho & Garcia-Molina, "Estimating frequency of change", 2003). Two
tempting estimators fail here:

* ``changes / elapsed time`` (or a Gamma prior on λ updated with (changes, exposure)) counts
  several changes within one interval as one, so it underestimates λ for pages that change
  faster than they are visited; the scheduler then visits them even less often, and the
  bias feeds itself.
* Cho & Garcia-Molina's bias-reduced estimator ``−ln((n − X + 0.5)/(n + 0.5)) / I`` assumes
  one regular interval ``I``, which a priority-driven scheduler never has, and still gives
  λ = 0 (visit never again) after any number of unchanged visits.

So we use the likelihood their irregular-interval estimator maximises — each visit after an
interval ``Δ`` found a change with probability ``1 − e^(−λΔ)``, none with ``e^(−λΔ)`` — and
add a prior, taking the posterior mode of ``u = ln λ``::

    L(u) = Σ_changed w·ln(1 − e^(−Δ·e^u)) − Σ_unchanged w·Δ·e^u − (u − ln λ₀)² / 2σ²

The prior is log-normal (normal on ``ln λ``) rather than Gamma because a Gamma prior's
weight is measured in seconds of exposure: a prior worth days swamps a page visited hourly,
and one worth minutes means nothing to a page visited monthly. A prior on ``ln λ`` says only
"rates spread over orders of magnitude, a typical page changes about weekly" and a handful
of visits at any frequency overcome it, while a new page's first visit (changed or not) moves
the estimate by a bounded factor instead of to 0 or ∞. ``L`` is strictly concave in ``u``
(each term is), so a safeguarded Newton iteration finds the unique mode in a few steps of
pure arithmetic — cheap enough to run per fetch.

The evidence is the last :attr:`ChangeModel.history` intervals, the newest weighted 1 and each
older one by a further factor :attr:`ChangeModel.forget`, so the estimate follows pages whose
habits change (a blog that goes quiet, a product page that starts updating prices).

A response's ``Last-Modified`` is evidence too (Cho & Garcia-Molina's estimator with
last-modified dates): a first visit learns that the content has not changed since then (up
to the longest revisit interval back), and a visit that finds a change dated after the last
one is a dated change, ``ln λ − λ·age`` in the likelihood (the age of the latest change is
what a visit samples of a Poisson process: an unbiased view of pages that change many times
between visits, which "changed in the interval" is not). A site whose pages
carry no Last-Modified, or a future one, gives no such evidence.

Status codes steer the schedule (:func:`after_fetch`): 200 (changed or not, by checksum),
304 (unchanged, keep the copy), 404/410 and other 4xx (re-check less and less often, drop
after repeated misses), 301/308 (the record moves: source marked, target queued with the
source's importance), 302/303/307 (target queued, source keeps its schedule), 5xx/429 and
network errors (keep the old copy, retry with back-off, honour Retry-After).

Pure functions: no I/O, no Beam. Times are epoch seconds (floats), rates are per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Mapping, Sequence

from beamcrawl.core.net.conditional import parse_http_date

__all__ = [
    "DAY",
    "DEFAULT_MODEL",
    "DEFAULT_POLICY",
    "HOUR",
    "SOURCE_WEIGHT",
    "SUBMIT_PRIORITY",
    "ChangeModel",
    "FetchOutcome",
    "RevisitState",
    "Schedule",
    "SchedulePolicy",
    "after_fetch",
    "change_priority",
    "change_probability",
    "estimate_rate",
    "expected_freshness",
    "importance",
    "next_due",
    "priority_now",
    "redirect_allowed",
    "revisit_priority",
    "revisit_state_for",
    "submit_priority",
]

MINUTE = 60.0
HOUR = 3600.0
# A history entry's kind for a change Last-Modified dates (see estimate_rate).
DATED = 2
DAY = 86400.0

# --- importance -------------------------------------------------------------------------

# How much a URL's way in says about its worth, before depth and links. A URL someone asked
# for (seed, submit) is worth the most; a feed item is news the site announces; a sitemap
# entry is a page the site vouches for, but sitemaps list everything; a link's worth comes
# from its depth and in-links. A redirect target inherits its source's importance (the caller
# passes it), so its weight is the link's.
SOURCE_WEIGHT: dict[str, float] = {
    "seed": 1.0,
    "submit": 1.0,
    "feed": 0.9,
    "sitemap": 0.8,
    "link": 1.0,
    "redirect": 1.0,
}
UNKNOWN_SOURCE_WEIGHT = 0.5
# Each hop from an entry point halves the worth (the crawl's breadth-first default,
# url_seen.link_priority), so the new scale equals the old one for a link without in-links.
DEPTH_DECAY = 0.5
# In-links from this many distinct other hosts make a page as important as a seed.
INLINK_SATURATION = 1000
MIN_IMPORTANCE = 1e-3

# Priorities of submitted work (``beamcrawl submit --priority``, the control API). "high" is
# above every computed priority (those are at most 1), so urgent recrawls go first;
# "normal" equals a seed; "low" is about a link two hops deep.
SUBMIT_PRIORITY: dict[str, float] = {"high": 2.0, "normal": 1.0, "low": 0.25}


def submit_priority(level: str) -> float:
    """The frontier priority of submitted work.

    Raises:
        ValueError: ``level`` is not high, normal or low.
    """
    try:
        return SUBMIT_PRIORITY[level]
    except KeyError:
        raise ValueError(f"priority must be high, normal or low, got {level!r}") from None


def importance(inlink_hosts: int, source: str, depth: int) -> float:
    """A page's importance in [MIN_IMPORTANCE, 1].

    Two signals, combined like independent chances (either one can make a page important):
    the way in (``SOURCE_WEIGHT[source] × DEPTH_DECAY ** depth``) and the in-links, as
    ``ln(1 + hosts) / ln(1 + INLINK_SATURATION)`` capped at 1.

    Args:
        inlink_hosts: Distinct hosts *other than the page's own* that link to it (links
            within a site are free to make, so they are not a vote; counted in the URL-seen
            combine).
        source: How the URL came in: seed, submit, feed, sitemap, link, redirect.
        depth: Hops from the entry point (0 for seeds and URLs listed in sitemaps or feeds).
    """
    base = SOURCE_WEIGHT.get(source, UNKNOWN_SOURCE_WEIGHT) * DEPTH_DECAY ** max(0, depth)
    links = min(1.0, math.log1p(max(0, inlink_hosts)) / math.log1p(INLINK_SATURATION))
    value = 1.0 - (1.0 - base) * (1.0 - links)
    return min(1.0, max(MIN_IMPORTANCE, value))


# --- change probability, priority, due time ---------------------------------------------


def change_probability(lam: float, t_since: float) -> float:
    """``1 − e^(−λt)``: the chance a Poisson(λ) page changed within ``t`` seconds."""
    if lam <= 0 or t_since <= 0:
        return 0.0
    return -math.expm1(-lam * t_since)


def change_priority(importance: float, lam: float, t_since: float) -> float:
    """``importance × (1 − e^(−λ·t))``: importance times the chance the page changed.

    The design notes' revisit priority, kept for reports and comparisons but not used to
    rank: it spends a tight budget on pages that change faster than they can be revisited
    (always "probably changed", yet a fetch keeps them fresh only minutes). On the simulated
    budgets of tests/core/test_freshness.py it loses to plain round-robin by up to 40%.
    """
    return max(0.0, importance) * change_probability(lam, t_since)


def _index_shape(x: float) -> float:
    """``1 − (1 + x)·e^(−x)``, accurate for small ``x`` (where it is about x²/2)."""
    if x < 1e-4:
        return x * x * (0.5 - x / 3.0 + x * x / 8.0)
    return -math.expm1(-x) - x * math.exp(-x)


def revisit_priority(importance: float, lam: float, t_since: float, horizon: float = DAY) -> float:
    """The worth of revisiting a page now, on the crawl's one priority scale.

    ``min(importance, importance × (1 − (1 + λt)·e^(−λt)) / (λ·horizon))``: the Lagrangian
    index of the freshness problem (maximise Σ importance × freshness for a fixed number
    of fetches, changes Poisson). Revisiting every ``I`` keeps a page fresh a share
    ``(1 − e^(−λI)) / (λI)`` of the time; the budget is spent best when every page is
    revisited at the ``I`` where this index reaches one common threshold, so ranking pages
    by their index at ``t`` since the last visit, and fetching from the top, approaches the
    optimum without knowing the threshold. It grows with ``t`` (about ``λt²/2`` early on)
    and, unlike ``importance × (1 − e^(−λt))`` (:func:`change_priority`), saturates at
    ``importance / (λ·horizon)`` for pages changing faster than they can be revisited.
    Measured on simulated budgets (tests/core/test_freshness.py): 3–11% more
    importance-weighted freshness than round-robin at every budget tried.

    The index is a time (seconds of freshness per fetch); dividing by ``horizon`` puts it on
    the scale of new URLs, whose priority is their importance, and the cap keeps a revisit
    from outranking a new page of the same importance (or an urgent submission): capping
    changed nothing measurable in the simulation.

    Args:
        importance: The page's importance (see :func:`importance`).
        lam: Its change rate, per second.
        t_since: Seconds since the last visit that saw its content (negative counts as 0).
        horizon: Seconds of freshness worth a new page of the same importance (about the
            revisit interval the budget affords); sets the scale, not the order.
    """
    if lam <= 0 or t_since <= 0 or importance <= 0:
        return 0.0
    value = importance * _index_shape(lam * t_since) / (lam * horizon)
    return min(importance, value)


def next_due(now: float, lam: float, min_interval: float, max_interval: float, target: float = 0.5) -> float:
    """When a page is next due: once it has changed with probability ``target``, bounded.

    The interval is ``−ln(1 − target) / λ`` (the median time to the next change for
    ``target`` = 0.5), clamped to ``[min_interval, max_interval]``; a page never seen to
    change (λ = 0) gets ``max_interval``. Being due makes a URL *eligible*; among due URLs
    :func:`revisit_priority` decides which ones a round's budget buys.

    Raises:
        ValueError: ``target`` outside (0, 1), or the bounds out of order or negative.
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be in (0, 1), got {target}")
    if min_interval < 0 or max_interval < min_interval:
        raise ValueError(f"need 0 <= min_interval <= max_interval, got {min_interval}, {max_interval}")
    if lam <= 0 or math.isnan(lam):
        return now + max_interval
    interval = -math.log1p(-target) / lam
    return now + min(max_interval, max(min_interval, interval))


def expected_freshness(lam: float, interval: float) -> float:
    """The share of time a copy revisited every ``interval`` matches the live page:
    ``(1 − e^(−λI)) / (λI)`` (1 when λI is 0)."""
    x = lam * interval
    if x <= 1e-12:
        return 1.0
    return -math.expm1(-x) / x


# --- change-rate estimation -------------------------------------------------------------


@dataclass(frozen=True)
class ChangeModel:
    """Settings of the change-rate estimator (see the module docstring).

    Attributes:
        prior_rate: Prior median λ (per second): a typical page changes about weekly.
        prior_sigma: Prior spread of ``ln λ`` (2.0: one standard deviation is a factor 7.4).
        forget: Weight of each older observation relative to the next newer one.
        history: Observations kept per URL (older ones have little weight anyway).
        min_rate: Lowest λ the estimate may take (once in 10 years).
        max_rate: Highest λ the estimate may take (once a minute).
    """

    prior_rate: float = 1.0 / (7 * DAY)
    prior_sigma: float = 2.0
    forget: float = 0.9
    history: int = 16
    min_rate: float = 1.0 / (3650 * DAY)
    max_rate: float = 1.0 / MINUTE


DEFAULT_MODEL = ChangeModel()


def _h(s: float) -> float:
    """``s / (e^s − 1)``: d/du of ln(1 − e^(−Δe^u)) with s = Δe^u."""
    if s < 1e-8:
        return 1.0 - s / 2.0
    if s > 700.0:
        return 0.0
    return s / math.expm1(s)


def _dh(s: float) -> float:
    """``s · h'(s)``: the second derivative term (≤ 0), written in e^(−s) to avoid overflow."""
    if s > 700.0:
        return 0.0
    if s < 1e-4:
        # 1 − e^(−s) − s = −s²/2 + s³/6 − …; the ratio tends to −s/2.
        return -s / 2.0 + s * s / 3.0
    q = math.exp(-s)
    one_minus_q = -math.expm1(-s)
    return s * q * (one_minus_q - s) / (one_minus_q * one_minus_q)


def estimate_rate(
    history: Sequence[tuple[float, bool]] | Sequence[Sequence[Any]],
    model: ChangeModel = DEFAULT_MODEL,
    prior_rate: float | None = None,
) -> float:
    """The change rate λ (per second): the posterior mode of ``ln λ``.

    Args:
        history: ``(interval seconds, changed)`` per visit, oldest first: the time since the
            previous visit that saw the content, and whether this visit found it changed
            (0 or False: unchanged, 1 or True: changed, :data:`DATED` (2): a change dated by
            Last-Modified that many seconds ago, and none since, which adds ``ln λ − λ·a``).
            Only the last ``model.history`` are used; non-positive intervals are skipped.
        model: Prior and forgetting settings.
        prior_rate: A per-URL prior median (e.g. from a sitemap's changefreq), instead of
            ``model.prior_rate``.

    Returns:
        λ in ``[model.min_rate, model.max_rate]``; the prior median with no history.
    """
    mu = math.log(prior_rate if prior_rate and prior_rate > 0 else model.prior_rate)
    inv_var = 1.0 / (model.prior_sigma * model.prior_sigma)
    lo, hi = math.log(model.min_rate), math.log(model.max_rate)
    mu = min(hi, max(lo, mu))
    recent = list(history)[-model.history :]
    changed: list[tuple[float, float]] = []  # (weight, interval)
    unchanged_exposure = 0.0
    dated = 0.0  # weight of changes dated by Last-Modified (each adds ln λ)
    weight = 1.0
    for interval, kind in reversed(recent):
        if interval > 0:
            if kind == DATED:
                dated += weight
                unchanged_exposure += weight * float(interval)
            elif kind:
                changed.append((weight, float(interval)))
            else:
                unchanged_exposure += weight * float(interval)
        weight *= model.forget
    if not changed and unchanged_exposure == 0.0:
        return math.exp(mu)

    def slope(u: float) -> tuple[float, float]:
        """L'(u) and L''(u)."""
        rate = math.exp(u)
        g = dated - unchanged_exposure * rate - (u - mu) * inv_var
        dg = -unchanged_exposure * rate - inv_var
        for w, interval in changed:
            s = interval * rate
            g += w * _h(s)
            dg += w * _dh(s)
        return g, dg

    # L' is strictly decreasing: the mode is where it crosses 0, or a bound.
    g_lo, _ = slope(lo)
    if g_lo <= 0:
        return math.exp(lo)
    g_hi, _ = slope(hi)
    if g_hi >= 0:
        return math.exp(hi)
    u = min(hi, max(lo, mu))
    previous = math.inf
    for _ in range(200):
        g, dg = slope(u)
        if g > 0:
            lo = u
        else:
            hi = u
        if abs(g) < 1e-10 or hi - lo < 1e-9:
            break
        step = u - g / dg if dg < 0 else (lo + hi) / 2
        # Newton inside the bracket while it at least halves |L'|, else bisect: fast near the
        # mode, safe far from it. (Newton alone could bounce between the bracket's two ends,
        # shrinking it a little each time, and stop 60 steps later far from the mode: a 6x
        # error for two changes seen an hour apart.)
        u = step if lo < step < hi and abs(g) <= 0.5 * previous else (lo + hi) / 2
        previous = abs(g)
    return math.exp(u)


# --- URL state and the schedule ---------------------------------------------------------

# One letter per visit in RevisitState.outcomes, newest last.
OUTCOME_CODES = {
    "first": "F",  # first 200: content now known
    "changed": "C",  # 200 with different content
    "unchanged": "U",  # 200 with the same content
    "not_modified": "N",  # 304: unchanged, no body transferred
    "gone": "G",  # 404, 410, other 4xx
    "moved": "M",  # 301, 308
    "redirect": "R",  # 302, 303, 307
    "error": "E",  # 5xx, 429, no response, a 304 nobody asked for
}
MAX_OUTCOMES = 16

Action = Literal["revisit", "retry", "drop", "moved"]


@dataclass
class RevisitState:
    """What the crawler keeps per URL to revisit it well (to merge into ``UrlState``).

    Attributes:
        importance: From :func:`importance` when the URL was queued; moved records pass it on.
        lam: The change-rate estimate (per second) after the last visit.
        prior_rate: A per-URL prior median for λ (from a sitemap's changefreq), or None.
        status: HTTP status of the last response (None: no response).
        etag: Stored ``ETag`` (echoed as ``If-None-Match``).
        last_modified: Stored ``Last-Modified`` (echoed as ``If-Modified-Since``).
        checksum: Checksum of the content we hold.
        simhash: Simhash of the content we hold.
        visits: Responses that told us the content's state (200 or 304).
        changes: Visits that found the content changed.
        history: ``[interval seconds, 0 unchanged / 1 changed / 2 dated change]`` per visit,
            oldest first, at most ``ChangeModel.history``: the estimator's evidence.
        outcomes: One letter per fetch, newest last (:data:`OUTCOME_CODES`), at most 16.
        checked_at: When a visit last saw the content (200 or 304).
        changed_at: When a visit last found the content new or changed.
        stored_at: Fetch time of the copy we hold (a 304's WARC-Refers-To-Date).
        digest: WARC payload digest of the copy we hold (``sha1:<base32>``): an unchanged
            200 with this digest is archived as a revisit of that copy, not stored again.
        misses: 404/410/4xx answers in a row.
        errors: 5xx/429/no-response answers in a row.
        moved_to: Target of a permanent redirect (301/308), or None.
        next_due: When the URL is next due (None: dropped).
        lastmod_agree: Visits a sitemap's or feed's lastmod claim was checked by and agreed
            with (changed when it said changed, unchanged when it said not).
        lastmod_disagree: Visits it was checked by and wrong.
    """

    importance: float = 0.5
    lam: float = DEFAULT_MODEL.prior_rate
    prior_rate: float | None = None
    status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    checksum: str | None = None
    simhash: str | None = None
    visits: int = 0
    changes: int = 0
    history: list[list[float]] = field(default_factory=list)
    outcomes: str = ""
    checked_at: float | None = None
    changed_at: float | None = None
    stored_at: float | None = None
    digest: str | None = None
    misses: int = 0
    errors: int = 0
    moved_to: str | None = None
    next_due: float | None = None
    lastmod_agree: float = 0.0
    lastmod_disagree: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for a frontier row or the URL's cells), in field order."""
        values = self.__dict__
        return {name: values[name] for name in _REVISIT_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "RevisitState":
        """Inverse of :meth:`to_dict`; unknown keys (written by a newer version) are dropped."""
        if not data:
            return cls()
        return cls(**{k: v for k, v in data.items() if k in _REVISIT_NAMES})

    def copied(self) -> "RevisitState":
        """A copy with its own history lists (what a fetch updates), the other values shared:
        ``dataclasses.replace`` without reading every field's metadata (a quarter of its cost;
        the class's ``__init__`` only assigns its fields)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.history = [list(h) for h in self.history]
        return new


# The fields of RevisitState in order, once (fields() reads every field's metadata a call).
_REVISIT_FIELDS = tuple(f.name for f in fields(RevisitState))
_REVISIT_NAMES = frozenset(_REVISIT_FIELDS)


@dataclass(frozen=True)
class FetchOutcome:
    """What one fetch told us, in the terms the schedule needs.

    Attributes:
        status: HTTP status, or None when no response came (network error, timeout).
        checksum: Content checksum of a 2xx body (None otherwise or unknown).
        simhash: Simhash of a 2xx body (hex), if computed.
        etag: The response's ETag (``conditional.validators_from_headers``).
        last_modified: The response's valid Last-Modified.
        location: Absolute, normalised redirect target of a 3xx, if any.
        retry_after: Seconds the server asked to wait (429/503 ``Retry-After``), if any.
        conditional: Whether the request carried validators (a 304 is trusted only then).
        digest: WARC payload digest of a 2xx body as transferred (None otherwise).
    """

    status: int | None
    checksum: str | None = None
    simhash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    location: str | None = None
    retry_after: float | None = None
    conditional: bool = True
    digest: str | None = None


@dataclass(frozen=True)
class SchedulePolicy:
    """How status codes steer the schedule (the knobs of ``after_fetch``).

    Attributes:
        min_interval: Shortest revisit interval (seconds).
        max_interval: Longest revisit interval (seconds).
        target: Change probability at which a page falls due (see :func:`next_due`).
        gone_interval: Wait before re-checking a URL after its first 404/410 (doubles per miss).
        max_misses: Misses in a row after which a URL is dropped (a 410 counts as 2).
        retry_base: First retry delay after a 5xx/429/no response (doubles per error).
        retry_cap: Longest retry delay.
        max_errors: Errors in a row after which retries stop and the normal interval applies.
        near_bits: Content whose simhash differs in at most this many bits counts as
            unchanged (0 = off: any checksum difference is a change).
        recheck_moved: Re-check a permanently moved URL after ``max_interval`` (a move can
            be undone) instead of retiring it.
        horizon: Seconds of freshness worth a new page of the same importance, for
            :func:`revisit_priority` (sets the scale against new URLs, not the order).
        model: The change-rate estimator's settings.
    """

    min_interval: float = HOUR
    max_interval: float = 60 * DAY
    target: float = 0.5
    gone_interval: float = DAY
    max_misses: int = 3
    retry_base: float = MINUTE
    retry_cap: float = 6 * HOUR
    max_errors: int = 5
    near_bits: int = 0
    recheck_moved: bool = True
    horizon: float = DAY
    model: ChangeModel = DEFAULT_MODEL

    def __post_init__(self) -> None:
        if not 0 <= self.min_interval <= self.max_interval:
            raise ValueError("need 0 <= min_interval <= max_interval")
        if not 0.0 < self.target < 1.0:
            raise ValueError("target must be in (0, 1)")
        if self.max_misses < 1 or self.max_errors < 0:
            raise ValueError("max_misses must be >= 1 and max_errors >= 0")
        if self.horizon <= 0:
            raise ValueError("horizon must be positive")


DEFAULT_POLICY = SchedulePolicy()


@dataclass(frozen=True)
class Schedule:
    """The decision after one fetch.

    Attributes:
        action: ``revisit`` (due again per its change rate), ``retry`` (error back-off),
            ``drop`` (no more visits: gone), ``moved`` (permanent redirect; the source is
            re-checked rarely if ``recheck_moved``, else ``due`` is None).
        due: Epoch seconds the URL is next due, or None for no further visit.
        priority: Its priority when it falls due (``revisit_priority`` at ``due``), for the
            frontier row; slot assignment may recompute it at its own clock.
        observed: What this fetch saw: first, changed, unchanged, gone, moved, redirect, error.
        keep_copy: Whether the stored copy still stands for the URL (False once it is gone
            or has moved).
        redirect_to: The redirect target to queue (3xx), or None.
        target_importance: Importance to give that target (a moved record takes its own).
        reason: A few words for logs and the fetch event.
    """

    action: Action
    due: float | None
    priority: float
    observed: str
    keep_copy: bool
    redirect_to: str | None = None
    target_importance: float | None = None
    reason: str = ""


def _hamming_hex(a: str, b: str) -> int | None:
    try:
        return bin(int(a, 16) ^ int(b, 16)).count("1")
    except (TypeError, ValueError):
        return None


def _content_changed(state: RevisitState, outcome: FetchOutcome, near_bits: int) -> bool | None:
    """Whether a 2xx body differs from the stored one (None: cannot tell)."""
    if outcome.checksum is not None and state.checksum is not None:
        if outcome.checksum == state.checksum:
            return False
        if near_bits > 0 and outcome.simhash and state.simhash:
            distance = _hamming_hex(outcome.simhash, state.simhash)
            if distance is not None and distance <= near_bits:
                return False
        return True
    # No checksums to compare: fall back on the validators (a strong ETag names one
    # representation; a Last-Modified names its last change).
    if outcome.etag and state.etag and not outcome.etag.startswith("W/") and not state.etag.startswith("W/"):
        return outcome.etag != state.etag
    if outcome.last_modified and state.last_modified:
        return outcome.last_modified != state.last_modified
    return None


def _modified_at(outcome: FetchOutcome, now: float) -> float | None:
    """The response's Last-Modified as epoch seconds, if it is a date in the past."""
    when = parse_http_date(outcome.last_modified)
    return when if when is not None and when <= now else None


def _push(state: RevisitState, code: str) -> str:
    return (state.outcomes + code)[-MAX_OUTCOMES:]


def _revisit(state: RevisitState, now: float, policy: SchedulePolicy) -> tuple[float, float]:
    """Due time and priority of the next ordinary revisit."""
    due = next_due(now, state.lam, policy.min_interval, policy.max_interval, policy.target)
    since = state.checked_at if state.checked_at is not None else now
    return due, revisit_priority(state.importance, state.lam, due - since, policy.horizon)


def after_fetch(
    state: RevisitState,
    outcome: FetchOutcome,
    now: float,
    policy: SchedulePolicy = DEFAULT_POLICY,
) -> tuple[RevisitState, Schedule]:
    """Updates a URL's state after one fetch and decides its next visit.

    Args:
        state: The URL's state before this fetch (``RevisitState()`` for a new URL, with its
            importance set).
        outcome: What the fetch saw.
        now: Epoch seconds of the fetch.
        policy: Intervals, back-off and drop rules.

    Returns:
        ``(new state, schedule)``; ``new_state.next_due == schedule.due``.
    """
    s = state.copied()
    status = outcome.status

    # 304 to a conditional request: unchanged, keep the copy; anything else that is 304 is
    # a server fault and falls through to the error branch.
    if status == 304 and outcome.conditional:
        return _seen_content(s, outcome, now, policy, changed=False, not_modified=True)
    if status is not None and 200 <= status < 300:
        changed = _content_changed(s, outcome, policy.near_bits) if s.visits else None
        return _seen_content(s, outcome, now, policy, changed=changed, not_modified=False)
    if status in (301, 308) and outcome.location:
        s.status, s.moved_to, s.misses, s.errors = status, outcome.location, 0, 0
        s.outcomes = _push(s, OUTCOME_CODES["moved"])
        due = now + policy.max_interval if policy.recheck_moved else None
        s.next_due = due
        priority = (
            revisit_priority(s.importance, s.lam, policy.max_interval, policy.horizon) if due is not None else 0.0
        )
        return s, Schedule(
            "moved",
            due,
            priority,
            "moved",
            keep_copy=False,
            redirect_to=outcome.location,
            target_importance=s.importance,
            reason=f"{status} moved permanently",
        )
    if status in (302, 303, 307) and outcome.location:
        # A temporary redirect: the URL stays the name to revisit; its target is queued
        # as a new URL of the source's importance. No evidence about change.
        s.status, s.misses, s.errors = status, 0, 0
        s.outcomes = _push(s, OUTCOME_CODES["redirect"])
        due, priority = _revisit(s, now, policy)
        s.next_due = due
        return s, Schedule(
            "revisit",
            due,
            priority,
            "redirect",
            keep_copy=True,
            redirect_to=outcome.location,
            target_importance=s.importance,
            reason=f"{status} temporary redirect",
        )
    if status is not None and 400 <= status < 500 and status != 429:
        s.status, s.errors, s.moved_to = status, 0, None
        s.misses += 2 if status == 410 else 1
        s.outcomes = _push(s, OUTCOME_CODES["gone"])
        if s.misses >= policy.max_misses:
            s.next_due = None
            return s, Schedule(
                "drop", None, 0.0, "gone", keep_copy=False, reason=f"{status}, {s.misses} misses: dropped"
            )
        wait = min(policy.max_interval, policy.gone_interval * 2 ** (s.misses - 1))
        s.next_due = now + wait
        # A missing page is worth a re-check only as much as it was worth, times the
        # chance it came back: rank it low.
        priority = s.importance * 0.5**s.misses * change_probability(s.lam, wait)
        return s, Schedule(
            "revisit", s.next_due, priority, "gone", keep_copy=False, reason=f"{status}, miss {s.misses}"
        )

    # 5xx, 429, no response, unexpected 304, a 3xx without Location, 1xx: keep the old copy.
    s.status = status
    s.errors += 1
    s.outcomes = _push(s, OUTCOME_CODES["error"])
    what = "no response" if status is None else ("unexpected 304" if status == 304 else str(status))
    if s.errors > policy.max_errors:
        due, priority = _revisit(s, now, policy)
        s.next_due = due
        return s, Schedule(
            "revisit", due, priority, "error", keep_copy=True, reason=f"{what}: {s.errors} errors, normal interval"
        )
    wait = min(policy.retry_cap, policy.retry_base * 2 ** (s.errors - 1))
    if outcome.retry_after is not None and outcome.retry_after > 0:
        wait = max(wait, min(outcome.retry_after, policy.max_interval))
    s.next_due = now + wait
    # A retry is worth what the visit was worth; the error did not change that.
    since = s.checked_at if s.checked_at is not None else None
    priority = (
        s.importance if since is None else revisit_priority(s.importance, s.lam, s.next_due - since, policy.horizon)
    )
    return s, Schedule("retry", s.next_due, priority, "error", keep_copy=True, reason=f"{what}: retry {s.errors}")


def _seen_content(
    s: RevisitState,
    outcome: FetchOutcome,
    now: float,
    policy: SchedulePolicy,
    *,
    changed: bool | None,
    not_modified: bool,
) -> tuple[RevisitState, Schedule]:
    """The 200/304 branch: update validators, evidence and λ, schedule the revisit."""
    first = s.visits == 0 and not not_modified
    modified = _modified_at(outcome, now) if not not_modified else None
    if s.checked_at is not None and changed is not None:
        interval = now - s.checked_at
        if changed and modified is not None and s.checked_at < modified:
            # Last-Modified dates the change: one at that moment and none since. Its age is
            # what the visit saw of the change process (a sample of it, unlike "changed
            # somewhere in the interval", which cannot tell one change from ten).
            s.history.append([round(max(now - modified, 1e-3), 3), DATED])
        elif interval > 0:
            s.history.append([round(interval, 3), 1 if changed else 0])
    elif first and modified is not None:
        # A first visit learns the content's age: unchanged since Last-Modified (as far back
        # as the longest revisit interval; older evidence would outweigh every later visit).
        s.history.append([round(min(now - modified, policy.max_interval), 3), 0])
    s.history = [h for h in s.history if h[0] > 0][-policy.model.history :]
    s.visits += 1
    s.status = outcome.status
    s.misses = s.errors = 0
    s.moved_to = None
    if not_modified:
        # Freshen validators the 304 repeats; keep the stored copy and its checksum.
        s.etag = outcome.etag or s.etag
        s.last_modified = outcome.last_modified or s.last_modified
        observed, code = "unchanged", OUTCOME_CODES["not_modified"]
    else:
        # A 200 replaces the validators, also with None: a validator the server no longer
        # sends must not be sent back.
        s.etag, s.last_modified = outcome.etag, outcome.last_modified
        if first or changed is None:
            observed, code = ("first", OUTCOME_CODES["first"]) if first else ("changed", OUTCOME_CODES["changed"])
        elif changed:
            observed, code = "changed", OUTCOME_CODES["changed"]
        else:
            observed, code = "unchanged", OUTCOME_CODES["unchanged"]
        if observed != "unchanged":
            s.checksum, s.simhash = outcome.checksum, outcome.simhash
            s.stored_at, s.digest = now, outcome.digest
            s.changed_at = now
        elif outcome.digest is not None and outcome.digest != s.digest:
            # The same content in other bytes on the wire (another Content-Encoding), or a
            # state kept before digests were: this fetch is archived whole, and becomes the
            # copy held that the next unchanged visit refers to.
            s.stored_at, s.digest = now, outcome.digest
    if changed:
        s.changes += 1
    s.outcomes = _push(s, code)
    s.checked_at = now
    s.lam = estimate_rate([(h[0], int(h[1])) for h in s.history], policy.model, s.prior_rate)
    due, priority = _revisit(s, now, policy)
    s.next_due = due
    return s, Schedule("revisit", due, priority, observed, keep_copy=True, reason=observed)


def redirect_allowed(hops: int, max_hops: int = 5) -> bool:
    """Whether a redirect target ``hops`` redirects from the original URL may be queued.

    Each hop is queued as a URL of its own (through robots.txt and politeness like any
    other), carrying its hop count; the chain stops after ``max_hops`` (RFC 9309 and
    Google both follow at least five).
    """
    return 0 <= hops <= max_hops


def revisit_state_for(
    inlink_hosts: int, source: str, depth: int, prior_rate: float | None = None, model: ChangeModel = DEFAULT_MODEL
) -> RevisitState:
    """The state of a URL about to be fetched for the first time."""
    return RevisitState(
        importance=importance(inlink_hosts, source, depth),
        lam=estimate_rate((), model, prior_rate),
        prior_rate=prior_rate,
    )


def priority_now(state: RevisitState, now: float, policy: SchedulePolicy = DEFAULT_POLICY) -> float:
    """A queued URL's priority at ``now`` (slot assignment's ordering, recomputed at the
    round's clock): its importance if never seen (all of its content is new), else
    :func:`revisit_priority` since its last check; halved per failure in a row."""
    # Each failure in a row (5xx, no answer, 404/410) halves what the next try is worth: a
    # URL that keeps failing must not crowd out revisits that return content.
    failing = 0.5 ** (state.errors + state.misses)
    if state.checked_at is None:
        return state.importance * failing
    return failing * revisit_priority(state.importance, state.lam, now - state.checked_at, policy.horizon)
