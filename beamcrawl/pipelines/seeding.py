"""Work in: seed files read and checked line by line, and URLs queued (seeds and operator
submissions), never-seen ones with one batched key-set read, known ones requeued on request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlsplit

from beamcrawl.core.runtime import files
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, host_of, normalize
from beamcrawl.core.urls.urlshape import ShapeRules
from beamcrawl.pipelines.crawl_errors import CrawlError
from beamcrawl.schemas.records import (
    PRIORITY_SEED,
    Candidate,
    FrontierEntry,
    UrlState,
    fp_key,
)
from beamcrawl.state.domains import credit_seed_domains
from beamcrawl.state.frontier import held_until, queue_new_urls, scheduled_key
from beamcrawl.stores.base import Mutation, Store


@dataclass
class SeedReport:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, str]] = field(default_factory=list)


class SeedsError(CrawlError):
    """Bad lines in a seeds file: ``lines`` holds one message per bad line (capped)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def read_seeds(
    path: str,
    shape: ShapeRules | None = None,
    *,
    allow_private: bool = False,
    resolve: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """Seed URLs from a file: one per line; blank lines and ``#`` comments (at the start of a
    line or after whitespace) skipped (core/urls/seedfile.py).

    Args:
        path: The file (local or any Beam filesystem such as ``gs://``; not a web address:
            seeds are the operator's own list, not something fetched from the web).
        shape: The crawl's URL-shape rules (default: the default rules). A seed failing one
            would never be crawled, so it is refused like a malformed one.
        allow_private: ``--allow-private-networks``: else a seed on a loopback or private
            IP address is refused (a link-local one always is).
        resolve: The ``--resolve`` rules; a seed host they map is judged by that address.

    Raises:
        SeedsError: Naming the file and line of every bad seed (up to a cap), or saying the
            file holds no URL.
        CrawlError: The file cannot be read, or ``path`` is a web address.
    """
    from beamcrawl.core.net.netpolicy import ResolveRules
    from beamcrawl.core.urls.seedfile import BadLine, check_url, report_lines, url_lines

    rules = shape or ShapeRules()
    if urlsplit(path).scheme.lower() in ("http", "https", "ftp"):
        raise CrawlError(
            f"--seeds takes a file, not a URL: {path}; download it first (curl -o seeds.txt '{path}') "
            "and give --seeds seeds.txt"
        )
    try:
        with files.open_read(path) as fh:
            lines = fh.read().decode("utf-8").splitlines()
    except FileNotFoundError:
        raise CrawlError(f"seeds file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CrawlError(f"cannot read seeds file {path}: {exc}") from None
    mapping = ResolveRules(resolve)
    seeds, bad = [], []
    for number, text in url_lines(lines):
        norm, reason, refused = check_url(text, rules, allow_private, mapping)
        if norm is None:
            bad.append(BadLine(path, number, text, reason or "", refused))
        else:
            seeds.append(text)
    if bad:
        raise SeedsError(report_lines(bad))
    if not seeds:
        raise SeedsError([f"seeds file {path} holds no URL (only blank lines and comments); nothing to crawl"])
    return seeds


# Paths that name a sitemap or feed rather than a page (``submit --kind auto``).
_DOCUMENT_SUFFIXES = (".xml", ".xml.gz", ".rss", ".atom", ".rdf", "/feed", "/rss", "/atom")


def document_kind(url: str) -> str:
    """``sitemap`` when a URL's path looks like a sitemap or feed, else ``page``. A guess
    that costs nothing when wrong: an HTML answer to a sitemap fetch is parsed as a page."""
    path = urlsplit(url).path.lower().rstrip("/") or "/"
    return "sitemap" if path.endswith(_DOCUMENT_SUFFIXES) or "sitemap" in path.rsplit("/", 1)[-1] else "page"


def submit_urls(
    store: Store,
    urls: Iterable[str],
    now_ms: int,
    priority: float = PRIORITY_SEED,
    source: str = "seed",
    *,
    reason: str = "",
    kind: str = "page",
    requeue_known: bool = False,
) -> SeedReport:
    """Queues URLs never seen before (one batched key-set read, then frontier-then-seen
    writes); with ``requeue_known``, URLs the crawl knows are queued again too, now, with
    their stored revisit state (so the fetch is conditional): an urgent recrawl. A known URL
    a redirect's Retry-After still holds (``u:hold``) is queued due when the hold ends, not
    before: the server asked for the wait, and an operator's hurry does not lift it.

    Args:
        kind: ``page``, ``sitemap`` (a sitemap or feed, read for URLs) or ``auto``
            (:func:`document_kind` by path).
        reason: Why, kept on the frontier row and the seen-set row.
    """
    report = SeedReport()
    offered: dict[int, Candidate] = {}
    for url in urls:
        try:
            norm = normalize(url)
        except InvalidURL as exc:
            report.rejected.append({"url": url, "reason": str(exc)})
            continue
        fp = fingerprint(norm)
        if fp in offered:
            report.duplicates += 1
            continue
        what = document_kind(norm) if kind == "auto" else kind
        offered[fp] = Candidate(
            fp=fp, url=norm, host=host_of(norm), depth=0, priority=priority, source=source, inlinks=0, kind=what
        )
    known = store.read_keys("urls", [fp_key(fp) for fp in offered], keys_only=not requeue_known)
    new = [c for fp, c in sorted(offered.items()) if fp_key(fp) not in known]
    report.duplicates += len(offered) - len(new)
    if source == "seed":
        # The operator vouches for a seed's site: its domain's budget counts extra linkers.
        credit_seed_domains(store, {c.host for c in offered.values()})
    queue_new_urls(store, new, now_ms, reason=reason)
    report.accepted = len(new)
    if requeue_known and known:
        again = [
            _requeued(offered[fp], known[fp_key(fp)], now_ms, reason) for fp in sorted(offered) if fp_key(fp) in known
        ]
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in again])  # the store batches
        store.mutate(
            "urls", [Mutation.set(fp_key(e.fp), {"u:reason": json.dumps(reason or None).encode()}) for e in again]
        )
        report.accepted += len(again)
        report.duplicates -= len(again)
    return report


def _requeued(cand: Candidate, cells: dict[str, bytes], now_ms: int, reason: str) -> FrontierEntry:
    """A known URL queued again by hand, with what the seen set knows of it: due now, or when
    the hold its row notes ends (a redirect's Retry-After, where its held visit is: the same
    key, so that visit is this one)."""

    try:
        known = UrlState.from_cells(cells)
    except (ValueError, TypeError):  # a row written by something else: queue it afresh
        known = UrlState(url=cand.url)
    revisit = known.revisit if isinstance(known.revisit, dict) else None
    depth = known.depth
    # Its scheduled visit is replaced, not doubled: that row goes when this one is done.
    scheduled = scheduled_key(cand.fp, revisit, now_ms)
    return FrontierEntry(
        url=cand.url, fp=cand.fp, host=cand.host, due_ms=max(now_ms, held_until(cells) or 0), priority=cand.priority,
        depth=depth if isinstance(depth, int) else 0, source=cand.source, kind=cand.kind, reason=reason,
        revisit=revisit, also_keys=[scheduled.hex()] if scheduled else [],
    )  # fmt: skip
