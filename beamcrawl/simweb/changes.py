"""The change model of the synthetic web: pages that change at known rates.

Opt-in (``SimWeb(change_scale=S)`` with ``S > 0``, ``--change-scale S``): every ordinary HTML
page (the root, ``/p/``, ``/docs/``, ``/private/`` pages and the sitemap-only ``/s/`` pages; not
PDFs, robots.txt, sitemaps, feeds, redirects, errors, ``/news.html`` or the calendar trap) gets a
**change class** and changes as a seeded Poisson process.

Classes, chosen per page by a seeded draw (:data:`CHANGE_MIX`), and their mean interval between
changes in units of ``change_scale`` seconds (:data:`CHANGE_MULTIPLIERS`):

==========  =======  ==========================
class       share    mean interval
==========  =======  ==========================
``static``  40%      never changes
``slow``    25%      64 x change_scale
``medium``  20%      8 x change_scale
``fast``    15%      1 x change_scale
==========  =======  ==========================

A page is identified by its *change key* ``(host, page)``: ``host`` is a host index and ``page``
a page number (``int``) or a string for pages outside the numbered space (``"s3"`` is the
sitemap-only page ``/s/3.html``). Copies share their original's key (see ``site.py``), so a
mirror serves its original's bytes at every moment. Everything below is a pure function of
``(seed, change_scale, epoch, key)``:

* the class: ``random.Random(f"simweb-change-class|{seed}|{host}|{page}").random()`` against the
  cumulative shares of :data:`CHANGE_MIX`;
* the change times: exponential gaps with mean ``multiplier * change_scale`` drawn from
  ``random.Random(f"simweb-changes|{seed}|{host}|{page}")``, the first counted from the
  **epoch** (a float, epoch seconds: the server's start time unless given), each the previous
  time plus a gap (``t_1 = epoch + g_1``, ``t_k = t_(k-1) + g_k``), so they are strictly after
  the epoch;
* the version at time ``t``: the number of changes in ``(epoch, t]`` (0 before the first);
* the last change at ``t``: the time of the latest change ``<= t``; for version 0 of a static
  page it is :attr:`SeededChanges.version0_time`, the epoch rounded down to the second minus 30
  days (:data:`VERSION0_AGE`); for version 0 of a changing page, the epoch (to the second)
  minus an exponential age of the page's own mean interval (its own stream, at least 1 s):
  the web was changing before it started, so a page's Last-Modified never says "unchanged for
  a month" of a page that changes every minute.

Change times are generated lazily and cached per page (extended when a later time is asked for),
so ``version_at`` is a dictionary look-up and a bisection. The cache holds every change up to the
latest time asked: about ``horizon / change_scale`` floats per fast page.

Also here, because the server and the tests share them: HTTP-date and W3C datetime formatting,
HTTP-date parsing, and the conditional-request decision (:func:`not_modified`, RFC 9110
§13.2.2).
"""

from __future__ import annotations

import bisect
import email.utils
import math
import random
import re
import time
from typing import Union

__all__ = [
    "CHANGE_CLASSES",
    "CHANGE_MIX",
    "CHANGE_MULTIPLIERS",
    "VERSION0_AGE",
    "SeededChanges",
    "PageKey",
    "etag_matches",
    "parse_mix",
    "http_date",
    "not_modified",
    "parse_http_date",
    "w3c_datetime",
]

PageKey = Union[int, str]

# (class, share); shares sum to 1. The order fixes how the seeded draw maps to a class.
CHANGE_MIX: tuple[tuple[str, float], ...] = (
    ("static", 0.40),
    ("slow", 0.25),
    ("medium", 0.20),
    ("fast", 0.15),
)
# Mean interval between changes, in units of change_scale; None: never changes.
CHANGE_MULTIPLIERS: dict[str, float | None] = {
    "static": None,
    "slow": 64.0,
    "medium": 8.0,
    "fast": 1.0,
}
CHANGE_CLASSES: tuple[str, ...] = tuple(name for name, _ in CHANGE_MIX)
VERSION0_AGE = 30 * 86400  # version 0 was last modified this long before the epoch


def _cumulative(mix: tuple[tuple[str, float], ...]) -> tuple[tuple[float, str], ...]:
    return tuple((sum(share for _, share in mix[: i + 1]), name) for i, (name, _) in enumerate(mix))


def parse_mix(text: str) -> tuple[tuple[str, float], ...]:
    """A class mix from ``"static=0.5,slow=0.05,medium=0.2,fast=0.25"`` (``--change-mix``):
    every class of :data:`CHANGE_CLASSES` once, shares >= 0 summing to 1 (within 1e-6), in
    the order of :data:`CHANGE_MIX` (which fixes how the seeded draw maps to a class).

    Raises:
        ValueError: An unknown or missing class, a bad number, or shares not summing to 1.
    """
    shares: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name not in CHANGE_CLASSES or name in shares:
            raise ValueError(
                f"change mix: expected class=share for each of {', '.join(CHANGE_CLASSES)}, got {part.strip()!r}"
            )
        try:
            shares[name] = float(value)
        except ValueError:
            raise ValueError(f"change mix: {name} share is not a number: {value!r}") from None
        if not 0 <= shares[name] <= 1:
            raise ValueError(f"change mix: {name} share must be in [0, 1], got {value}")
    missing = [c for c in CHANGE_CLASSES if c not in shares]
    if missing:
        raise ValueError(f"change mix: no share for {', '.join(missing)}")
    if abs(sum(shares.values()) - 1.0) > 1e-6:
        raise ValueError(f"change mix: shares must sum to 1, got {sum(shares.values())}")
    return tuple((c, shares[c]) for c in CHANGE_CLASSES)


_CUMULATIVE: tuple[tuple[float, str], ...] = _cumulative(CHANGE_MIX)


class _Stream:
    """The change times of one page, generated on demand."""

    __slots__ = ("rng", "mean", "times", "_start")

    def __init__(self, rng: random.Random | None, mean: float | None, epoch: float) -> None:
        self.rng = rng
        self.mean = mean
        self.times: list[float] = []
        self._start = epoch

    def extend(self, until: float) -> list[float]:
        """Make sure every change ``<= until`` is generated; return the list of times."""
        if self.rng is None or self.mean is None:
            return self.times
        times = self.times
        last = times[-1] if times else self._start
        rate = 1.0 / self.mean
        expo = self.rng.expovariate
        while last <= until:
            last = last + expo(rate)
            times.append(last)
        return times


class SeededChanges:
    """Seeded change processes of a web's pages (pure: no clock is read).

    Args:
        seed: The web's seed.
        change_scale: Seconds per unit of :data:`CHANGE_MULTIPLIERS`; must be > 0.
        epoch: When changes start being counted, epoch seconds.
        mix: The classes' shares (:func:`parse_mix`); default :data:`CHANGE_MIX`.
    """

    def __init__(
        self, seed: int, change_scale: float, epoch: float, mix: tuple[tuple[str, float], ...] | None = None
    ) -> None:
        if not change_scale > 0 or not math.isfinite(change_scale):
            raise ValueError("change_scale must be a positive number of seconds")
        if not math.isfinite(epoch):
            raise ValueError("epoch must be finite")
        self.seed = seed
        self.change_scale = float(change_scale)
        self.epoch = float(epoch)
        self.version0_time = float(math.floor(self.epoch) - VERSION0_AGE)
        self.mix = tuple(mix) if mix is not None else CHANGE_MIX
        self._cumulative = _cumulative(self.mix)
        self._classes: dict[tuple[int, PageKey], str] = {}
        self._origins: dict[tuple[int, PageKey], float] = {}
        self._streams: dict[tuple[int, PageKey], _Stream] = {}

    def describe(self) -> dict[str, object]:
        """The parameters as a JSON-ready object (the truth's ``change_model``)."""
        return {
            "seed": self.seed,
            "change_scale": self.change_scale,
            "epoch": self.epoch,
            "version0_time": self.version0_time,
            "mix": {name: share for name, share in self.mix},
            "multipliers": dict(CHANGE_MULTIPLIERS),
        }

    def change_class(self, host: int, page: PageKey) -> str:
        """The class of a page (an entry of :data:`CHANGE_CLASSES`)."""
        key = (host, page)
        cls = self._classes.get(key)
        if cls is None:
            r = random.Random(f"simweb-change-class|{self.seed}|{host}|{page}").random()
            cls = next((name for bound, name in self._cumulative if r < bound), self.mix[-1][0])
            self._classes[key] = cls
        return cls

    def mean_interval(self, host: int, page: PageKey) -> float | None:
        """Mean seconds between changes of a page; None for a static page."""
        mult = CHANGE_MULTIPLIERS[self.change_class(host, page)]
        return None if mult is None else mult * self.change_scale

    def _stream(self, host: int, page: PageKey) -> _Stream:
        key = (host, page)
        stream = self._streams.get(key)
        if stream is None:
            mean = self.mean_interval(host, page)
            rng = None if mean is None else random.Random(f"simweb-changes|{self.seed}|{host}|{page}")
            stream = _Stream(rng, mean, self.epoch)
            self._streams[key] = stream
        return stream

    def change_times(self, host: int, page: PageKey, until: float) -> list[float]:
        """Times of the page's changes in ``(epoch, until]``, ascending (a new list)."""
        times = self._stream(host, page).extend(until)
        return times[: bisect.bisect_right(times, until)]

    def version_at(self, host: int, page: PageKey, t: float) -> int:
        """Number of changes of the page in ``(epoch, t]`` (0 for ``t`` before the epoch)."""
        return bisect.bisect_right(self._stream(host, page).extend(t), t)

    def version0_changed(self, host: int, page: PageKey) -> float:
        """When a page's version 0 was last modified: a static page, :attr:`version0_time`;
        a changing one, as its own process would have it (the age of a Poisson process's
        latest change at any moment is exponential with the same mean: the web was changing
        before the epoch), drawn from a stream of its own and at least a second back."""
        mean = self.mean_interval(host, page)
        if mean is None:
            return self.version0_time
        key = (host, page)
        when = self._origins.get(key)
        if when is None:
            age = random.Random(f"simweb-age0|{self.seed}|{host}|{page}").expovariate(1.0 / mean)
            when = self._origins[key] = float(math.floor(self.epoch) - max(1, math.ceil(age)))
        return when

    def change_time(self, host: int, page: PageKey, version: int) -> float:
        """When the page became ``version``: the version-th change, or for version 0
        :meth:`version0_changed`."""
        if version <= 0:
            return self.version0_changed(host, page)
        stream = self._stream(host, page)
        if stream.mean is None:
            raise ValueError("a static page has only version 0")
        times = stream.times
        while len(times) < version:
            stream.extend(times[-1] if times else self.epoch)
        return times[version - 1]

    def last_change(self, host: int, page: PageKey, t: float) -> float:
        """Time of the latest change ``<= t`` (:meth:`version0_changed` while at version 0)."""
        return self.change_time(host, page, self.version_at(host, page, t))


# ------------------------------------------------------------------------------ dates, validators


def http_date(t: float) -> str:
    """IMF-fixdate of ``t`` rounded down to the second (``Sun, 06 Nov 1994 08:49:37 GMT``)."""
    return email.utils.formatdate(math.floor(t), usegmt=True)


def parse_http_date(value: str | None) -> float | None:
    """Epoch seconds of an HTTP-date (IMF-fixdate, RFC 850 or asctime), None if invalid."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_tz(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    try:
        return float(email.utils.mktime_tz(parsed))
    except (OverflowError, ValueError):
        return None


def w3c_datetime(t: float) -> str:
    """W3C datetime (the sitemap ``lastmod`` / Atom format) of ``t`` in UTC, truncated to the
    millisecond: ``2026-11-30T03:40:12.345Z``."""
    ms = math.floor(t * 1000.0)
    secs, frac = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:03d}Z"


_ETAG_RE = re.compile(r'\s*(W/)?("[^"]*")\s*(?:,|$)')


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` value matches ``etag`` by weak comparison (RFC 9110 §8.8.3.2):
    ``*`` matches any current representation; ``W/`` prefixes are ignored on both sides."""
    value = if_none_match.strip()
    if value == "*":
        return True
    opaque = etag[2:] if etag.startswith("W/") else etag
    pos = 0
    while pos < len(value):
        m = _ETAG_RE.match(value, pos)
        if m is None:
            return False  # malformed list: no match (the full response is always safe)
        if m.group(2) == opaque:
            return True
        pos = m.end()
    return False


def not_modified(
    if_none_match: str | None,
    if_modified_since: str | None,
    etag: str,
    modified: float,
    previous_modified: float | None,
) -> bool:
    """Decide a conditional GET/HEAD of a changing page (RFC 9110 §13.2.2): True means 304.

    If-None-Match, when present, decides alone (weak comparison, ``*`` matches). Otherwise a valid
    If-Modified-Since gets a 304 when the page's Last-Modified (its last change rounded down to
    the second, as sent) is not later than the date given; an invalid date is ignored. One
    refinement, which RFC 9110 allows (it says SHOULD): when the current version's Last-Modified
    second is also the previous version's, the date cannot tell the two apart, so the answer is
    a full 200, never a 304 that would claim a stale copy current.

    Args:
        if_none_match: The header value, or None.
        if_modified_since: The header value, or None.
        etag: The current representation's ETag.
        modified: Exact time of the current version's change (or the version-0 time).
        previous_modified: Exact time of the previous version's change; None at version 0.
    """
    if if_none_match is not None:
        return etag_matches(if_none_match, etag)
    since = parse_http_date(if_modified_since)
    if since is None:
        return False
    last = math.floor(modified)
    if previous_modified is not None and math.floor(previous_modified) >= last:
        return False
    return since >= last
