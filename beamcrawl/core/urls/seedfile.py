"""Files of URLs an operator writes (``--seeds``, ``submit --file``): lines, comments, checks.

One URL per line (UTF-8, with or without a byte-order mark; LF or CRLF). Blank lines are skipped; ``#`` starts a comment at the start of a line or
after whitespace (``http://ok.example/ # why`` is ``http://ok.example/``). A ``#`` inside a
URL (a fragment, ``http://a.example/#top``) is part of it: only a ``#`` after a space ends
the URL, and a URL never holds a raw space. Links found in pages are not read here: they
follow the WHATWG URL rules (core/urls/urlnorm.py).

Each URL is checked when it is given, not rounds later: it must normalise, pass the crawl's
URL-shape rules, and, when its host is an IP address, a loopback name (``localhost``) or
``--resolve`` maps it to an address, that address must be one the crawler may connect to
(core/net/netpolicy.py). Every bad line is
reported with its file and line number, up to :data:`MAX_REPORTED` lines.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterable, Iterator
from urllib.parse import urlsplit

from beamcrawl.core.net.netpolicy import (
    ForbiddenAddress,
    ResolveRules,
    check_address,
    name_refusal,
)
from beamcrawl.core.urls.urlnorm import InvalidURL, normalize
from beamcrawl.core.urls.urlshape import ShapeRules

__all__ = ["MAX_REPORTED", "BadLine", "address_refusal", "check_url", "report_lines", "url_lines"]

BOM = "\ufeff"
# Bad lines reported one by one; the rest are counted in one closing line.
MAX_REPORTED = 50


@dataclass(frozen=True)
class BadLine:
    """A line that gives no usable URL: where it is, what it says, and why not."""

    path: str
    line: int
    text: str
    reason: str
    refused: bool = False  # by the address policy (else malformed or refused by shape)

    def __str__(self) -> str:
        if self.refused:
            return f"{self.path}:{self.line}: refused: {self.text!r}: {self.reason}"
        return f"{self.path}:{self.line}: bad seed {self.text!r}: {self.reason}"


def strip_comment(line: str) -> str:
    """The line without its comment and surrounding whitespace (``""`` if nothing is left)."""
    text = line.strip()
    if text.startswith("#"):
        return ""
    for i, char in enumerate(text):
        if char == "#" and text[i - 1].isspace():
            return text[:i].rstrip()
    return text


def url_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line that holds something besides a comment.

    A byte-order mark opening the file (what Excel and Notepad write) is not part of it."""
    for number, line in enumerate(lines, 1):
        if number == 1:
            line = line.removeprefix(BOM)
        text = strip_comment(line)
        if text:
            yield number, text


def address_refusal(normalized_url: str, allow_private: bool, rules: ResolveRules | None = None) -> str | None:
    """Why the crawler may not connect to a URL's host, when that is known without DNS.

    Judged are an IP-literal host, a name that is loopback by definition (``localhost``,
    ``*.localhost``) and the address a ``--resolve`` rule maps a name to; a name left to DNS
    is judged when it resolves, at the connection.

    Returns:
        The reason (``"link-local address 169.254.169.254 (cloud metadata endpoint)"``), or None.
    """
    host = urlsplit(normalized_url).hostname or ""
    by_name = name_refusal(host, allow_private)
    if by_name is not None:
        return f"{by_name} (--allow-private-networks allows it)"
    candidates = []
    try:
        candidates.append(str(ipaddress.ip_address(host.partition("%")[0])))
    except ValueError:
        mapped = rules.lookup(host) if rules else None
        if mapped is not None:
            candidates.append(mapped)
    for ip in candidates:
        try:
            check_address(ip, allow_private)
        except ForbiddenAddress as exc:
            hint = "" if allow_private or str(exc).startswith("link-local") else " (--allow-private-networks allows it)"
            return f"{exc}{hint}"
    return None


def check_url(
    text: str, shape: ShapeRules | None, allow_private: bool, rules: ResolveRules | None = None
) -> tuple[str | None, str | None, bool]:
    """Checks one URL an operator gave.

    Returns:
        ``(normalised URL, None, False)`` when usable, else ``(None, reason, refused)`` with
        ``refused`` True when the address policy is the reason.
    """
    try:
        norm = normalize(text)
    except InvalidURL as exc:
        return None, str(exc), False
    if shape is not None:
        why = shape.check(norm)
        if why is not None:
            return None, f"refused by the URL-shape rules ({why.replace('_', ' ')})", False
    refusal = address_refusal(norm, allow_private, rules)
    if refusal is not None:
        return None, refusal, True
    return norm, None, False


def report_lines(bad: list[BadLine], limit: int = MAX_REPORTED) -> list[str]:
    """One line per bad line, at most ``limit``, then ``... and N more``."""
    shown = [str(b) for b in bad[:limit]]
    if len(bad) > limit:
        shown.append(f"... and {len(bad) - limit} more bad line(s)")
    return shown
