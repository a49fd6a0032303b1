"""Freshness of a crawl, measured from the server's side (pure: no I/O but the file helpers).

With the change model on, every page changes at seeded, known times (``changes.py``) and the
request log says which version each response carried (``"version"``, see ``server.py``). So the
share of time a crawler's stored copy of a page matched the live page follows from the log and
the truth alone, exactly:

* requests count when their User-Agent contains ``token`` (case-insensitively, as in
  ``audit.py``), their method is GET (a missing method counts as GET) and they were written out
  whole (no ``error`` field);
* a request's time is its ``end`` (when the response had been sent) if logged, else its
  ``start``;
* a page is a URL, ``origin + path`` exactly as requested: a fetch of ``/p/3.html?print=1``
  stores a copy of that URL, not of ``/p/3.html``;
* after a 200, the stored copy is the version served (the log's ``version``; without one, the
  version live at the request's ``start``); after a 304 it is the version the server said the
  client holds (the log's ``version``, which the server took at ``start``; without one, the
  version live at the request's time); any other status leaves the stored copy as it was;
* the freshness of a page over ``[start, end]`` is the time during which a copy was stored and
  its version equalled the live version (``version_at``), divided by ``end - start``: computed
  from the change times, not sampled. Time before the page's first fetch counts as stale, and
  fetches before ``start`` set the copy the window starts with.

The pages measured are, by default, every page in the change model that the truth describes
(ordinary HTML pages and sitemap-only pages, without ``?print=1`` copies; never robots.txt,
sitemaps or feeds), including pages robots.txt keeps a polite crawler from: narrow them with
``pages`` (see :func:`truth_pages`). The report's mean is unweighted over pages.
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from beamcrawl.simweb.changes import CHANGE_CLASSES, SeededChanges, PageKey

if TYPE_CHECKING:
    from beamcrawl.simweb.site import SimWeb

__all__ = [
    "FreshnessReport",
    "PageFreshness",
    "main",
    "measure",
    "measure_from_files",
    "page_freshness",
    "truth_pages",
]

Truth = Mapping[str, Mapping[str, Any]]


@dataclass
class PageFreshness:
    """One page's result.

    Attributes:
        url: The page's absolute URL.
        change_class: Its change class.
        freshness: Share of ``[start, end]`` its stored copy was the live version.
        fresh_seconds: That time in seconds.
        fetches_200: 200 responses to the crawler for it (before ``end``).
        fetches_304: 304 responses to the crawler for it (before ``end``).
        first_fetch: Time of its first 200 or 304, or None.
        changes: Live changes in ``(start, end]``.
    """

    url: str
    change_class: str
    freshness: float = 0.0
    fresh_seconds: float = 0.0
    fetches_200: int = 0
    fetches_304: int = 0
    first_fetch: float | None = None
    changes: int = 0


@dataclass
class FreshnessReport:
    """What :func:`measure` found.

    Attributes:
        token: The User-Agent token measured.
        start: Start of the window.
        end: End of the window.
        pages: Pages measured.
        fetched_pages: Pages with at least one 200 or 304 before ``end``.
        mean: Mean freshness over the pages (0 when there are none).
        by_class: Mean freshness per change class (classes with pages only).
        pages_by_class: Pages per change class.
        fetches_200: 200 responses for measured pages (before ``end``).
        fetches_304: 304 responses for measured pages (before ``end``).
        requests: Requests of the token in the log, any path, any time.
        by_page: Per-page details, by URL.
    """

    token: str
    start: float
    end: float
    pages: int = 0
    fetched_pages: int = 0
    mean: float = 0.0
    by_class: dict[str, float] = field(default_factory=dict)
    pages_by_class: dict[str, int] = field(default_factory=dict)
    fetches_200: int = 0
    fetches_304: int = 0
    requests: int = 0
    by_page: dict[str, PageFreshness] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: the mean, per class, and the fetch counts."""
        classes = " ".join(
            f"{c}={self.by_class[c]:.3f}/{self.pages_by_class[c]}" for c in CHANGE_CLASSES if c in self.by_class
        )
        return (
            f"freshness[{self.token}] {self.mean:.3f} over {self.pages} pages "
            f"({self.fetched_pages} fetched) in {self.end - self.start:.1f}s; {classes}; "
            f"200s={self.fetches_200} 304s={self.fetches_304} requests={self.requests}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return asdict(self)


class _Pages:
    """URL -> (change key, class), host -> origin, and the change model: from a SimWeb or a
    truth."""

    def __init__(self, source: Union[SimWeb, Truth]) -> None:
        self.web: SimWeb | None = None
        self.truth: Truth | None = None
        self.known: dict[str, tuple[tuple[int, PageKey], str]] = {}
        if hasattr(source, "change_key") and hasattr(source, "names"):
            web: SimWeb = source  # type: ignore[assignment]
            if web.changes is None:
                raise ValueError("this simweb has no change model (change_scale is 0)")
            self.web = web
            self.model: SeededChanges = web.changes
            self.origins = {name: web.origin(i) for i, name in enumerate(web.names)}
            return
        self.truth = source  # type: ignore[assignment]
        cm = next((rec.get("change_model") for rec in self.truth.values() if rec.get("change_model")), None)
        if cm is None:
            raise ValueError("the truth has no change model (written with change_scale 0?)")
        mix = cm.get("mix")
        self.model = SeededChanges(
            int(cm["seed"]),
            float(cm["change_scale"]),
            float(cm["epoch"]),
            tuple((c, float(mix[c])) for c in CHANGE_CLASSES) if isinstance(mix, dict) else None,
        )
        self.origins = {str(h).lower(): str(rec["origin"]) for h, rec in self.truth.items()}
        for rec in self.truth.values():
            for target, entry in rec["pages"].items():
                if entry.get("change_class") and entry.get("change_key") is not None:
                    key = (int(entry["change_key"][0]), entry["change_key"][1])
                    self.known[rec["origin"] + target] = (key, entry["change_class"])

    def default_urls(self) -> list[str]:
        if self.truth is not None:
            return [url for url in self.known if "?" not in url[len("http://") :]]
        from beamcrawl.simweb.truth import DEFAULT_TRUTH_PAGES

        web = self.web
        assert web is not None
        out = []
        for hi in range(web.hosts):
            count = min(web.pages_per_host, DEFAULT_TRUTH_PAGES)
            paths = [web.page_path(hi, j) for j in range(count)] + web.sitemap_only_paths(hi)
            out.extend(web.url(hi, p) for p in paths if web.change_key(hi, p) is not None)
        return out

    def lookup(self, url: str) -> tuple[tuple[int, PageKey], str] | None:
        found = self.known.get(url)
        if found is not None or self.web is None:
            return found
        rest = url.split("://", 1)[-1]
        hostport, slash, path = rest.partition("/")
        hi = self.web.index.get(hostport.rsplit(":", 1)[0].lower())
        if hi is None or self.web.origin(hi) + "/" + path != url:
            return None
        key = self.web.change_key(hi, "/" + path)
        if key is None:
            return None
        found = (key, self.model.change_class(*key))
        self.known[url] = found
        return found


def page_freshness(change_times: list[float], fetches: Iterable[tuple[float, int]], start: float, end: float) -> float:
    """Seconds in ``[start, end]`` during which the stored version equalled the live one.

    Args:
        change_times: Ascending times of the page's changes (the live version at ``t`` is the
            number of them ``<= t``); times after ``end`` are ignored.
        fetches: ``(time, stored version from then on)``, in any order; fetches after ``end``
            are ignored, those before ``start`` set the copy the window starts with.
        start: Window start.
        end: Window end.
    """
    stored: int | None = None
    events = sorted(f for f in fetches if f[0] <= end)
    i = 0
    while i < len(events) and events[i][0] <= start:
        stored = events[i][1]
        i += 1
    live = bisect.bisect_right(change_times, start)
    c = live  # index of the next change to apply
    t = start
    fresh = 0.0
    while True:
        next_change = change_times[c] if c < len(change_times) and change_times[c] <= end else None
        next_fetch = events[i][0] if i < len(events) else None
        candidates = [x for x in (next_change, next_fetch) if x is not None]
        nxt = min(candidates) if candidates else end
        if stored is not None and stored == live:
            fresh += nxt - t
        t = nxt
        if not candidates:
            break
        # Apply every event at this instant (changes first: a fetch logs its own version).
        while c < len(change_times) and change_times[c] <= t and change_times[c] <= end:
            c += 1
            live += 1
        while i < len(events) and events[i][0] <= t:
            stored = events[i][1]
            i += 1
    return fresh


def measure(
    requests: list[dict[str, Any]],
    web_or_truth: Union[SimWeb, Truth],
    token: str,
    start: float,
    end: float,
    pages: set[str] | None = None,
) -> FreshnessReport:
    """Measure one crawler's freshness over ``[start, end]`` (see the module docstring).

    Args:
        requests: Request log records (``testing.read_request_log``, ``SimwebHandle.requests()``).
        web_or_truth: The :class:`~beamcrawl.simweb.site.SimWeb` (with its change model) or its
            truth (``{host: record}`` as ``load_truth`` returns).
        token: User-Agent substring of the crawler measured (case-insensitive).
        start: Window start, epoch seconds.
        end: Window end, after ``start``.
        pages: Absolute URLs to measure (``origin + path``); None: every change-model page the
            truth describes (with a SimWeb: the pages a default truth would describe).

    Returns:
        The report.

    Raises:
        ValueError: If ``end <= start``, there is no change model, or a URL in ``pages`` is not
            a change-model page.
    """
    if not end > start:
        raise ValueError("end must be after start")
    src = _Pages(web_or_truth)
    urls = sorted(src.default_urls() if pages is None else pages)
    targets: dict[str, tuple[tuple[int, PageKey], str]] = {}
    for url in urls:
        found = src.lookup(url)
        if found is None:
            raise ValueError(f"{url} is not a page in the change model")
        targets[url] = found
    report = FreshnessReport(token=token, start=start, end=end)
    results = {url: PageFreshness(url, cls) for url, (_, cls) in targets.items()}
    fetches: dict[str, list[tuple[float, int]]] = {url: [] for url in targets}
    needle = token.lower()
    model = src.model
    for rec in requests:
        if needle not in str(rec.get("ua", "")).lower():
            continue
        report.requests += 1
        origin = src.origins.get(str(rec.get("host", "")).lower())
        if origin is None or rec.get("method", "GET") != "GET" or rec.get("error"):
            continue
        url = origin + str(rec.get("path", ""))
        if url not in targets:
            continue
        status = rec.get("status")
        if status not in (200, 304):
            continue
        t = float(rec.get("end", rec["start"]))
        if t > end:
            continue
        key = targets[url][0]
        version = rec.get("version")
        if version is None:
            version = model.version_at(*key, float(rec["start"]) if status == 200 else t)
        fetches[url].append((t, int(version)))
        res = results[url]
        if status == 200:
            res.fetches_200 += 1
            report.fetches_200 += 1
        else:
            res.fetches_304 += 1
            report.fetches_304 += 1
        res.first_fetch = t if res.first_fetch is None else min(res.first_fetch, t)
    span = end - start
    sums: dict[str, float] = {}
    for url, (key, cls) in targets.items():
        times = model.change_times(*key, end)
        res = results[url]
        res.fresh_seconds = page_freshness(times, fetches[url], start, end)
        res.freshness = res.fresh_seconds / span
        res.changes = len(times) - bisect.bisect_right(times, start)
        sums[cls] = sums.get(cls, 0.0) + res.freshness
        report.pages_by_class[cls] = report.pages_by_class.get(cls, 0) + 1
        report.fetched_pages += res.first_fetch is not None
    report.pages = len(targets)
    report.mean = sum(r.freshness for r in results.values()) / len(results) if results else 0.0
    report.by_class = {c: sums[c] / report.pages_by_class[c] for c in CHANGE_CLASSES if c in sums}
    report.pages_by_class = {c: report.pages_by_class[c] for c in CHANGE_CLASSES if c in sums}
    report.by_page = results
    return report


def truth_pages(
    truth: Truth,
    *,
    allowed_only: bool = False,
    hosts: Iterable[str] | None = None,
    sitemap_only: bool | None = None,
    classes: Iterable[str] | None = None,
) -> set[str]:
    """URLs of change-model pages in a truth (no ``?print=1`` copies), for ``measure(pages=...)``.

    Args:
        truth: ``{host: record}`` written with the change model.
        allowed_only: Only pages robots.txt allows to ``beamcrawl`` (the truth's ``allowed``).
        hosts: Only these hosts.
        sitemap_only: True: only sitemap-only pages; False: none of them; None: both.
        classes: Only these change classes.
    """
    wanted_hosts = None if hosts is None else {h.lower() for h in hosts}
    wanted_classes = None if classes is None else set(classes)
    out: set[str] = set()
    for host, rec in truth.items():
        if wanted_hosts is not None and host.lower() not in wanted_hosts:
            continue
        for target, entry in rec["pages"].items():
            cls = entry.get("change_class")
            if not cls or "?" in target:
                continue
            if allowed_only and not entry.get("allowed", True):
                continue
            if sitemap_only is not None and bool(entry.get("sitemap_only")) != sitemap_only:
                continue
            if wanted_classes is not None and cls not in wanted_classes:
                continue
            out.add(rec["origin"] + target)
    return out


def measure_from_files(
    log_path: str | Path,
    truth_path: str | Path,
    token: str,
    start: float,
    end: float,
    pages: set[str] | None = None,
) -> FreshnessReport:
    """:func:`measure` on a request log file and a truth file (the change model's parameters
    come from the truth)."""
    from beamcrawl.simweb.server import read_request_log
    from beamcrawl.simweb.truth import load_truth

    return measure(read_request_log(log_path), load_truth(truth_path), token, start, end, pages)


def main(argv: list[str] | None = None) -> int:
    """``python -m beamcrawl.simweb.freshness_audit --log L --truth T --token beamcrawl [--start S]
    [--end E] [--json]``: print the report's summary (or the report as JSON). The window
    defaults to the token's first and last request."""
    p = argparse.ArgumentParser(prog="simweb-freshness", description=__doc__.split("\n", 1)[0])
    p.add_argument("--log", required=True)
    p.add_argument("--truth", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--start", type=float, default=None)
    p.add_argument("--end", type=float, default=None)
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = p.parse_args(argv)
    from beamcrawl.simweb.server import read_request_log
    from beamcrawl.simweb.truth import load_truth

    requests = read_request_log(args.log)
    mine = [r for r in requests if args.token.lower() in str(r.get("ua", "")).lower()]
    if not mine and (args.start is None or args.end is None):
        print(f"no requests of {args.token!r} in {args.log}", file=sys.stderr)
        return 1
    start = args.start if args.start is not None else min(float(r["start"]) for r in mine)
    end = args.end if args.end is not None else max(float(r.get("end", r["start"])) for r in mine)
    report = measure(requests, load_truth(args.truth), args.token, start, end)
    print(json.dumps(report.to_dict()) if args.json else report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
