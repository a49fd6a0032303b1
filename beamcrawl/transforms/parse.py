"""Parse: links (absolute, ``<base>``, ``rel=canonical``, nofollow), meta robots and
``X-Robots-Tag``, title and a content checksum, for every fetched page.

A redirect's ``Location`` becomes a link of kind ``redirect``, so its target goes through
the URL-seen check, robots and politeness like any other URL. Non-HTML bodies are
checksummed but not parsed.
"""

from __future__ import annotations

from typing import Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamcrawl.core.htmlparse import checksum, is_html, parse_html, robots_directives
from beamcrawl.core.urlnorm import InvalidURL, fingerprint, normalize
from beamcrawl.schemas.records import FetchResult, Link, ParsedPage

__all__ = ["ParsePages", "parse_fetch"]

REDIRECTS = (301, 302, 303, 307, 308)


def parse_fetch(result: FetchResult, token: str) -> ParsedPage:
    """What one fetch says: pure, so it is tested without a runner."""
    page = ParsedPage(fetch=result)
    if result.outcome != "fetched":
        return page
    page.checksum = checksum(result.body)
    x_robots = [v for k, v in result.response_headers if k.lower() == "x-robots-tag"]
    page.meta_noindex, page.meta_nofollow = robots_directives(x_robots, token)
    if result.entry.source == "robots":
        return page
    if result.status in REDIRECTS:
        location = result.header("location")
        if location:
            try:
                target = normalize(location.strip(), result.url)
                page.links.append(Link(url=target, fp=fingerprint(target), kind="redirect"))
            except InvalidURL:
                page.parse_error = "bad redirect location"
        return page
    if not (200 <= result.status < 300) or not is_html(result.content_type):
        return page
    found = parse_html(result.body, result.url, result.content_type, token)
    page.links = [
        Link(url=url, fp=fp, anchor=anchor, nofollow=nofollow, kind=kind)
        for url, fp, anchor, nofollow, kind in found.links
    ]
    page.canonical = found.canonical
    page.title = found.title
    page.meta_noindex |= found.meta_noindex
    page.meta_nofollow |= found.meta_nofollow
    return page


class _ParseFn(beam.DoFn):
    def __init__(self, token: str) -> None:
        self.token = token
        self.received = Metrics.counter("parse", "received")
        self.html = Metrics.counter("parse", "html_pages")
        self.links = Metrics.counter("parse", "links")
        self.error = Metrics.counter("parse", "error")

    def process(self, result: FetchResult) -> Iterator[ParsedPage]:
        self.received.inc()
        try:
            page = parse_fetch(result, self.token)
        except Exception as exc:  # one hostile page must not fail the round
            self.error.inc()
            page = ParsedPage(fetch=result, parse_error=f"{type(exc).__name__}: {exc}"[:300])
        if page.links:
            self.html.inc()
            self.links.inc(len(page.links))
        yield page


class ParsePages(beam.PTransform):
    """``FetchResult`` → ``ParsedPage``, one for one."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def expand(self, results: beam.PCollection) -> beam.PCollection:
        return results | "Parse HTML" >> beam.ParDo(_ParseFn(self.token))
