"""robots.txt variants of the synthetic web, built from a structured spec.

Each host gets one *kind* of robots.txt. The spec carries the HTTP behaviour (status, redirect),
the groups and rules, and the crawl delay that applies to the ``beamcrawl`` product token, so the
truth is known without parsing the text. The text is rendered from the same spec, with varied but
legal formatting (comments, blank lines, CRLF line ends, mixed-case directives and agent names) so
the crawler's parser is exercised.

The kinds, and what a correct crawler must do on each:

==================  ==========================================================================
``none``            robots.txt answers 404: no rules, everything allowed.
``forbidden``       robots.txt answers 403: "unavailable" per RFC 9309, everything allowed.
``unavailable``     robots.txt answers 503: "unreachable", nothing else may be fetched.
``allow_all``       an empty ``Disallow:`` in the ``*`` group.
``private``         ``Disallow: /private/``.
``private_sitemap`` as ``private`` plus a ``Sitemap:`` line (``/sitemap.xml`` is served).
``agent_group``     a group for ``BeamCrawl`` (shared with another agent) that disallows
                    ``/docs/`` and ``/files/``; the ``*`` group disallows only ``/private/``, which
                    is therefore *allowed* for beamcrawl. A group for ``otherbot`` disallows all.
``wildcard``        ``Disallow: /*.pdf$`` and ``Disallow: /docs/*/draft``, CRLF line ends.
``allow_override``  longest match wins (``Allow: /p/`` vs ``Disallow: /p/2.html``, ``Allow:
                    /docs/public/`` vs ``Disallow: /docs/``) and allow wins a tie
                    (``Allow: /private/5`` vs ``Disallow: /private/5``).
``crawl_delay``     ``Crawl-delay: 1`` in the ``*`` group.
``crawl_delay_agent`` ``Crawl-delay: 2`` in a ``beamcrawl`` group, none in ``*``.
``redirect``        robots.txt answers 301 to ``/robots-real.txt``, which holds the rules.
==================  ==========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["ROBOTS_CYCLE", "ROBOTS_REDIRECT_TARGET", "ROBOTS_TEXT_KINDS", "RobotsSpec", "robots_spec"]

# Hosts take their kind from this cycle (rotated by a seed-derived offset), so any 20 consecutive
# hosts cover every kind: a 50-host test web has each variant at least twice.
ROBOTS_CYCLE: tuple[str, ...] = (
    "allow_all",
    "private",
    "none",
    "agent_group",
    "wildcard",
    "allow_override",
    "private_sitemap",
    "crawl_delay",
    "none",
    "forbidden",
    "unavailable",
    "private",
    "redirect",
    "wildcard",
    "agent_group",
    "allow_all",
    "private_sitemap",
    "crawl_delay_agent",
    "private",
    "allow_override",
)

ROBOTS_REDIRECT_TARGET = "/robots-real.txt"


@dataclass(frozen=True)
class RobotsSpec:
    """The structured truth about one host's robots.txt.

    Attributes:
        kind: One of the kinds in :data:`ROBOTS_CYCLE`.
        status: HTTP status of ``GET /robots.txt``.
        text: The rules text (the body of the final 200 response; empty when there is none).
        crawl_delay_for_beamcrawl: Crawl-delay in seconds in the group that applies to the
            ``beamcrawl`` token, or None.
        location: ``Location`` of the robots.txt redirect, for the ``redirect`` kind.
        final_status: Status of the redirect target, for the ``redirect`` kind.
        sitemaps: Absolute sitemap URLs named in the file.
        body: The exact bytes served for ``/robots.txt`` (error bodies for non-200 statuses).
    """

    kind: str
    status: int
    text: str
    crawl_delay_for_beamcrawl: float | None = None
    location: str | None = None
    final_status: int | None = None
    sitemaps: tuple[str, ...] = field(default_factory=tuple)
    body: bytes = b""

    def to_truth(self) -> dict[str, object]:
        """Return the JSON-ready ``robots`` object of the truth file."""
        out: dict[str, object] = {
            "kind": self.kind,
            "status": self.status,
            "text": self.text,
            "crawl_delay_for_beamcrawl": self.crawl_delay_for_beamcrawl,
            "sitemaps": list(self.sitemaps),
        }
        if self.location is not None:
            out["location"] = self.location
            out["final_status"] = self.final_status
        return out


def _lines(*lines: str, newline: str = "\n") -> str:
    return newline.join(lines) + newline


ROBOTS_TEXT_KINDS: frozenset[str] = frozenset(k for k in ROBOTS_CYCLE if k not in ("none", "forbidden", "unavailable"))
"""Kinds whose robots.txt has a text (so it can carry ``Sitemap:`` lines)."""


def robots_spec(kind: str, host: str, origin: str, sitemaps: tuple[str, ...] | None = None) -> RobotsSpec:
    """Build the robots.txt spec of one host.

    Args:
        kind: The robots kind (see the module docstring).
        host: The host name, used in comments.
        origin: ``http://host:port`` of the host, for absolute Sitemap and redirect URLs.
        sitemaps: None for the classic file (only ``private_sitemap`` names ``/sitemap.xml``).
            Otherwise (the change model) the absolute URLs the file names in ``Sitemap:``
            lines, at its top before any group, instead; ignored by kinds without a text.

    Returns:
        The spec, including the exact body to serve.
    """
    spec = _classic_spec(kind, host, origin)
    if sitemaps is None or kind not in ROBOTS_TEXT_KINDS:
        return spec
    newline = "\r\n" if "\r\n" in spec.text else "\n"
    lines = spec.text.split(newline)
    if kind == "private_sitemap":
        lines = [line for line in lines if not line.startswith("Sitemap:")]
    at = 1 if lines and lines[0].startswith("#") else 0
    lines[at:at] = [f"Sitemap: {url}" for url in sitemaps]
    text = newline.join(lines)
    return replace(spec, text=text, sitemaps=tuple(sitemaps), body=text.encode())


def _classic_spec(kind: str, host: str, origin: str) -> RobotsSpec:
    if kind == "none":
        return RobotsSpec(kind, 404, "", body=b"Not Found\n")
    if kind == "forbidden":
        return RobotsSpec(kind, 403, "", body=b"Forbidden\n")
    if kind == "unavailable":
        return RobotsSpec(kind, 503, "", body=b"Service Unavailable\n")
    if kind == "allow_all":
        text = _lines("User-agent: *", "Disallow:")
        return RobotsSpec(kind, 200, text, body=text.encode())
    if kind in ("private", "private_sitemap"):
        sitemaps: tuple[str, ...] = ()
        head = [f"# robots.txt for {host}"]
        if kind == "private_sitemap":
            sitemaps = (f"{origin}/sitemap.xml",)
            head.append(f"Sitemap: {sitemaps[0]}")
        text = _lines(*head, "", "User-agent: *", "Disallow: /private/")
        return RobotsSpec(kind, 200, text, sitemaps=sitemaps, body=text.encode())
    if kind == "agent_group":
        text = _lines(
            "User-agent: otherbot",
            "Disallow: /",
            "",
            "User-agent: examplebot",
            "User-agent: BeamCrawl  # our own group: the * group does not apply to us",
            "Disallow: /docs/",
            "disallow: /files/",
            "",
            "User-agent: *",
            "Disallow: /private/",
        )
        return RobotsSpec(kind, 200, text, body=text.encode())
    if kind == "wildcard":
        text = _lines(
            "User-Agent: *",
            "Disallow: /*.pdf$",
            "Disallow: /docs/*/draft",
            "Disallow: /private/",
            newline="\r\n",
        )
        return RobotsSpec(kind, 200, text, body=text.encode())
    if kind == "allow_override":
        text = _lines(
            "User-agent: *",
            "Allow: /p/",
            "Disallow: /p/2.html",
            "Disallow: /docs/",
            "Allow: /docs/public/",
            "Allow: /private/5",
            "Disallow: /private/5",
            "Disallow: /private/",
        )
        return RobotsSpec(kind, 200, text, body=text.encode())
    if kind == "crawl_delay":
        text = _lines("User-agent: *", "Crawl-delay: 1", "Disallow: /private/")
        return RobotsSpec(kind, 200, text, crawl_delay_for_beamcrawl=1.0, body=text.encode())
    if kind == "crawl_delay_agent":
        text = _lines(
            "User-agent: *",
            "Disallow: /private/",
            "",
            "User-agent: beamcrawl",
            "Crawl-delay: 2",
            "Disallow: /private/",
            "Disallow: /files/",
        )
        return RobotsSpec(kind, 200, text, crawl_delay_for_beamcrawl=2.0, body=text.encode())
    if kind == "redirect":
        text = _lines("User-agent: *", "Disallow: /private/", "Disallow: /docs/")
        return RobotsSpec(
            kind,
            301,
            text,
            location=f"{origin}{ROBOTS_REDIRECT_TARGET}",
            final_status=200,
            body=text.encode(),
        )
    raise ValueError(f"unknown robots kind {kind!r}")
