"""Ground truth of the synthetic web, as Python objects or a JSON-lines file.

One record per host::

    {
      "host": "blog.site0003.co.uk",
      "index": 2,
      "origin": "http://blog.site0003.co.uk:PORT",
      "registered_domain": "site0003.co.uk",
      "slow_ms": 0, "trap": false, "changing": false,
      "role": null, "copy_of": null,          # "mirror" | "near" | "template"; a copy's original host
      "robots": {
        "kind": "private", "status": 200, "text": "User-agent: *\\n...",
        "crawl_delay_for_beamcrawl": null, "sitemaps": [],
        "location": "...", "final_status": 200          # only when robots.txt redirects
      },
      "pages": {
        "/p/17.html": {
          "status": 200, "allowed": true, "kind": "p", "content_type": "text/html; charset=utf-8",
          "links": ["http://site0042.com:PORT/p/3.html", ...],   # sorted, unique, absolute
          "nofollow_links": [...],                              # subset with rel=nofollow
          "nofollow_page": false, "noindex": false,
          "canonical": null, "duplicate_of": null, "near_duplicate_of": null,
          "template": null, "lookalike_of": null
        },
        "/r/5": {"status": 301, "allowed": true, "location": "/p/5.html",
                 "target": "http://host:PORT/p/5.html"},
        "/err/3.html": {"status": 500, "allowed": true},
        "/missing/7.html": {"status": 404, "allowed": true},
        ...
      }
    }

``pages`` holds the host's first ``max_pages`` pages (all of them when the host has fewer) and
every same-host target linked from them that is not a page (redirects, 404s, 500s, ``?print=1``
copies, ``/news.html``, the calendar trap entry) plus ``/sitemap.xml`` where robots.txt names it.
Links are what a correct parser extracts from the served HTML: resolved against the page URL or
its ``<base href>``, fragment removed, host lower-cased, port kept. ``allowed`` says whether the
``beamcrawl`` token may fetch the path (robots 5xx: nothing; 4xx: everything). ``?print=1``
entries are exact duplicates of their page (``duplicate_of``), changing and trap pages are flagged
``changing`` / ``trap``.

Copies. ``duplicate_of`` names the page whose bytes this one repeats and ``near_duplicate_of`` the
page this one nearly repeats (same text but for a word, or a timestamp, counter and ad slot): a
path on the same host, or an absolute URL on another host (mirror and near-copy hosts). Either
may itself be a copy; following the pointers ends at the first page of a group, and pages that
end at the same page are copies of each other (``urljoin(origin + "/", value)`` reads both
forms). ``template`` names the shared template of a look-alike page and ``lookalike_of`` another
page in it: same chrome and boilerplate, a different article, so *not* a copy.

The change model (``SimWeb(change_scale=S)``, ``--change-scale S``). Only then, each host record
also holds::

      "change_model": {"seed": 1, "change_scale": 0.2, "epoch": 1700000000.0,
                       "version0_time": 1697408000.0, "mix": {...}, "multipliers": {...}},
      "sitemap_index": "http://host:PORT/sitemap_index.xml",   # or null: not a sitemap host
      "sitemap_files": ["http://host:PORT/sitemaps/pages-1.xml.gz", ".../pages-2.xml"],
      "lastmod_honest": true,                  # false: every lastmod is the serving time
      "sitemap_only": ["/s/0.html", ...],      # pages listed only in the sitemaps
      "feeds": ["http://host:PORT/feed.rss"],  # feeds served (rss and/or atom)

every page in the change model (HTML pages, ``?print=1`` copies included, and the sitemap-only
pages, which are always described) adds::

      "change_class": "fast", "mean_interval": 0.2,   # seconds; null for static
      "change_key": [3, 17],                          # (site, source), see site.py
      "sitemap_only": false

(a PDF has ``"change_class": null``), and the published resources have entries::

      "/sitemap_index.xml": {"status": 200, "content_type": "application/xml",
                             "sitemap": "index", "sitemaps": [absolute child URLs]},
      "/sitemaps/pages-1.xml.gz": {"status": 200, "content_type": "application/gzip",
                                   "sitemap": "urlset", "gzip": true, "links": [URLs listed]},
      "/feed.rss": {"status": 200, "content_type": "application/rss+xml", "feed": "rss",
                    "max_items": 20, "links": [URLs it may list]}

Versions, change times and last changes follow from ``change_model`` and a page's
``change_key`` alone: ``SeededChanges(seed, change_scale, epoch).version_at(*change_key, t)``.
Sitemap ``lastmod`` and feed dates are the last change at serving time (``lastmod_honest``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from beamcrawl.simweb.audit import HostRobots, host_policy
from beamcrawl.simweb.names import registered_domain
from beamcrawl.simweb.site import (
    COPY_HOSTS_FROM,
    FEED_ITEMS,
    FEED_PATHS,
    FEED_TYPES,
    GZIP_TYPE,
    HTML,
    SITEMAP_FILES,
    SITEMAP_INDEX,
    XML_TYPE,
    SimWeb,
)

__all__ = [
    "DEFAULT_TRUTH_PAGES",
    "build_truth",
    "describe",
    "host_truth",
    "iter_truth",
    "load_truth",
    "web_truth",
    "write_truth",
]

DEFAULT_TRUTH_PAGES = 100


def describe(web: SimWeb, hi: int, target: str, policy: HostRobots) -> dict[str, Any]:
    """Return the truth entry of one request target on one host.

    Args:
        web: The simweb model.
        hi: Host index.
        target: Path with optional query.
        policy: The host's robots policy for the token (decides ``allowed``).

    Returns:
        The entry (see the module docstring). The changing page's entry describes its links,
        which do not change; its text does.
    """
    what, args = web.classify(hi, target)
    entry: dict[str, Any] = {"status": 404, "allowed": policy.allows(target)}
    if what == "page":
        model = web.page_model(hi, args[0])
        duplicate_of = model.duplicate_of
        if duplicate_of is None and "?" in target:
            duplicate_of = model.path  # the query is ignored: same bytes as the page itself
        entry.update(
            status=200,
            kind=model.kind,
            content_type="application/pdf" if model.kind == "pdf" else HTML,
            links=sorted({link.url for link in model.links}),
            nofollow_links=sorted({link.url for link in model.links if link.nofollow}),
            nofollow_page=model.nofollow_page,
            noindex=model.noindex,
            canonical=model.canonical,
            duplicate_of=duplicate_of,
            near_duplicate_of=model.near_duplicate_of,
            template=model.template,
            lookalike_of=model.lookalike_of,
        )
        if web.changes is not None:
            _add_change(web, hi, target, entry, sitemap_only=False)
    elif what == "sitemap_only":
        model = web.sitemap_only_model(hi, args[0])
        entry.update(
            status=200,
            kind=model.kind,
            content_type=HTML,
            links=sorted({link.url for link in model.links}),
            nofollow_links=[],
            nofollow_page=False,
            noindex=False,
            canonical=None,
            duplicate_of=None,
            near_duplicate_of=None,
            template=None,
            lookalike_of=None,
        )
        _add_change(web, hi, target, entry, sitemap_only=True)
    elif what == "sitemap_index":
        children = [web.url(hi, child) for child in web.sitemap_entries(hi)]
        entry.update(status=200, content_type=XML_TYPE, sitemap="index", sitemaps=children)
    elif what == "sitemap_file":
        child = SITEMAP_FILES[args[0]]
        gz = child.endswith(".gz")
        links = [web.url(hi, p) for p in web.sitemap_entries(hi)[child]]
        entry.update(status=200, content_type=GZIP_TYPE if gz else XML_TYPE, sitemap="urlset", gzip=gz, links=links)
    elif what == "feed":
        links = sorted(web.url(hi, p) for p in web.listed_pages(hi))
        entry.update(status=200, content_type=FEED_TYPES[args[0]], feed=args[0], max_items=FEED_ITEMS, links=links)
    elif what == "redirect":
        location, url = web.redirect_target(hi, args[0])
        entry.update(status=301, location=location, target=url)
    elif what == "error":
        entry["status"] = 500
    elif what == "sitemap":
        entry.update(status=200, content_type="application/xml", links=web.sitemap_links(hi))
    elif what == "news":
        entry.update(status=200, changing=True, links=sorted(web.news_links(hi)))
    elif what == "cal":
        entry.update(status=200, trap=True, links=sorted(web.cal_links(hi, *args)))
    elif what in ("robots", "robots_real"):
        entry["status"] = web.host(hi).robots.status if what == "robots" else 200
    return entry


def _add_change(web: SimWeb, hi: int, target: str, entry: dict[str, Any], sitemap_only: bool) -> None:
    key = web.change_key(hi, target)
    entry.update(
        change_class=web.change_class(hi, target),
        mean_interval=web.mean_interval(hi, target),
        change_key=list(key) if key is not None else None,
        sitemap_only=sitemap_only,
    )


def host_truth(
    web: SimWeb, hi: int, max_pages: int | None = DEFAULT_TRUTH_PAGES, token: str = "beamcrawl"
) -> dict[str, Any]:
    """Return the truth record of one host.

    Args:
        web: The simweb model.
        hi: Host index.
        max_pages: Describe pages ``0 .. max_pages-1`` only (None: all pages; beware huge K).
        token: Product token for ``allowed``.

    Returns:
        The host's record (see the module docstring).
    """
    info = web.host(hi)
    robots = info.robots.to_truth()
    policy = host_policy(robots, token)
    count = web.pages_per_host if max_pages is None else min(web.pages_per_host, max_pages)
    pages: dict[str, dict[str, Any]] = {}
    for j in range(count):
        pages[web.page_path(hi, j)] = describe(web, hi, web.page_path(hi, j), policy)
    prefix = info.origin + "/"
    extra: list[str] = []
    for entry in list(pages.values()):
        for url in entry.get("links", ()):
            if url.startswith(prefix):
                target = url[len(info.origin) :]
                if target not in pages:
                    extra.append(target)
    if info.robots.sitemaps and web.changes is None:
        extra.append("/sitemap.xml")
    if web.changes is not None:
        if info.sitemap_index:
            extra.extend([SITEMAP_INDEX, *SITEMAP_FILES, *web.sitemap_only_paths(hi)])
        extra.extend(FEED_PATHS[f] for f in info.feeds)
    for target in extra:
        if target in pages:
            continue
        what, args = web.classify(hi, target)
        if what == "page" and args[0] >= count:
            continue  # beyond the described range, like every page there
        pages[target] = describe(web, hi, target, policy)
    record: dict[str, Any] = {
        "host": info.name,
        "index": hi,
        "origin": info.origin,
        "registered_domain": registered_domain(info.name),
        "slow_ms": info.slow_ms,
        "trap": info.trap,
        "changing": info.changing,
        "role": info.role,
        "copy_of": web.origin(info.copy_of) if info.copy_of is not None else None,
        "robots": robots,
        "pages": pages,
    }
    if web.changes is not None:
        record["change_model"] = web.changes.describe()
        record["sitemap_index"] = info.origin + SITEMAP_INDEX if info.sitemap_index else None
        record["sitemap_files"] = [info.origin + p for p in SITEMAP_FILES] if info.sitemap_index else []
        record["lastmod_honest"] = info.lastmod_honest
        record["sitemap_only"] = web.sitemap_only_paths(hi)
        record["feeds"] = [info.origin + FEED_PATHS[f] for f in info.feeds]
    return record


def iter_truth(
    web: SimWeb, max_pages: int | None = DEFAULT_TRUTH_PAGES, token: str = "beamcrawl"
) -> Iterator[dict[str, Any]]:
    """Yield the truth record of every host, in host order."""
    for hi in range(web.hosts):
        yield host_truth(web, hi, max_pages, token)


def web_truth(
    web: SimWeb, max_pages: int | None = DEFAULT_TRUTH_PAGES, token: str = "beamcrawl"
) -> dict[str, dict[str, Any]]:
    """Return the truth of a whole web as ``{host: record}``."""
    return {rec["host"]: rec for rec in iter_truth(web, max_pages, token)}


def build_truth(
    hosts: int,
    seed: int = 1,
    pages_per_host: int = 40,
    port: int = 80,
    max_pages: int | None = DEFAULT_TRUTH_PAGES,
    copy_hosts_from: int | None = COPY_HOSTS_FROM,
    change_scale: float = 0.0,
    epoch: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Return the truth of the simweb with these parameters, without a server or a file.

    Args:
        hosts: Number of hosts.
        seed: The seed.
        pages_per_host: Pages per host.
        port: The port links carry (the truth of a running server needs its port).
        max_pages: Pages described per host.
        copy_hosts_from: First host that may be a mirror, near-copy or template host.
        change_scale: The change model's scale (0: off).
        epoch: The change model's epoch (pass the server's to match its truth).

    Returns:
        ``{host: record}``, equal to what ``--truth`` writes for the same parameters.
    """
    web = SimWeb(
        hosts,
        seed=seed,
        pages_per_host=pages_per_host,
        port=port,
        copy_hosts_from=copy_hosts_from,
        change_scale=change_scale,
        epoch=epoch,
    )
    return web_truth(web, max_pages)


def write_truth(web: SimWeb, path: str | Path, max_pages: int | None = DEFAULT_TRUTH_PAGES) -> int:
    """Write the truth as JSON lines, one host per line; return the number of hosts written."""
    n = 0
    tmp = Path(f"{path}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for rec in iter_truth(web, max_pages):
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1
    # Readers never see a half-written file.
    tmp.replace(path)
    return n


def load_truth(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a truth file written by :func:`write_truth` into ``{host: record}``."""
    out: dict[str, dict[str, Any]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                out[rec["host"]] = rec
    return out
