r"""robots.txt per RFC 9309: the file read here, its rules matched by ``robots_match.py``.

Each line is read here, comments and unrecognised records are dropped, and the file becomes
canonical ``field: value`` lines (:func:`_filtered`), from which our group's ``Allow`` and
``Disallow`` rules are taken (:func:`group_rules`) and matched by :class:`RuleMatcher`
(longest match wins, allow wins ties, ``*`` and ``$``, percent-encoding compared as RFC 9309
§2.2.2 says). protego reads the same lines for ``Crawl-delay`` and ``Sitemap``, and for the
rules too: a target is fetched only when both readings allow it (:meth:`RobotsRules.allowed`).
protego alone let through what RFC 9309 forbids: it counts a pattern's reserved characters as
their escapes (``robots_match.py``). Where protego's reading of a file departs from RFC 9309,
the canonical lines are what fixes it:

* An unknown record (``Noindex:``, ``Request-rate:``, typos) no longer ends a group. RFC 9309
  §2.2.4: other records "MUST NOT interfere" with the protocol's own; protego ends the group
  on any non-``User-agent`` line.
* ``Crawl-delay`` is honoured but, being such an "other record", no longer ends a group
  either, as in Google's parser. So in ``User-agent: a / Crawl-delay: 5 / User-agent: b /
  Disallow: /x`` both agents share one group (protego would give ``a`` no rules at all):
  reading groups this way never applies fewer rules to us than protego's reading. When a group
  sets several delays the largest is used (protego keeps the last).
* ``User-agent`` values are reduced to their product token and compared exactly
  (case-insensitively) with ours. protego also matches a group's token inside a longer name
  (``User-agent: beam`` would apply to ``beamcrawl``), and misses ``User-agent: beamcrawl/1.0``.
* A byte-order mark is stripped; protego reads ``\ufeffUser-agent`` as an unknown line.
* Lines end only at CR, LF or CRLF (RFC 9309 §2.2); protego's ``str.splitlines`` also splits
  at U+0085, U+2028, form feed and others, turning the rest of a pattern into a new line.
* Each line is read twice: leniently, as protego and Google read it (Python's whitespace, a
  missing colon, ``User agent`` and misspelt names, a pattern not starting with ``/``), and
  strictly, as RFC 9309's grammar is written (§2.2: a space or a tab for whitespace, the
  record's name and a colon, a path-pattern starting with ``/``). A target must be allowed by
  our rules in both (:meth:`RobotsRules.allowed`), and the longer Crawl-delay stands. Taken
  alone, the lenient reading allowed more: ``Allow: /a`` + U+00A0 is the path ``/a%C2%A0``
  to the RFC, where the stripped ``/a`` let ``/ab`` through ``Disallow: /``, and ``Allow /x``
  (no colon) is no line at all to it. What only the lenient reading forbids still stands:
  ``Disallow /x`` and ``Disallow: /a`` + U+00A0 keep ``/x/y`` and ``/a/x`` out.
* At most 500 KiB is parsed, cut at the last line boundary (a half line could turn a long
  ``Allow`` into a short one).

The fetch outcome decides before any parsing (RFC 9309 §2.3.1): a 2xx answer is parsed, but
a 206 (a part of the file, from anywhere in it: we ask for no range) counts as unreachable; 4xx
("unavailable") allows everything, except 429, which Google (and we) treat like a server
error; 5xx or no answer ("unreachable") disallows everything; an unresolved 3xx (more than
five redirects) counts as unavailable.

429 is a deliberate deviation: RFC 9309 lists it with the other 4xx ("crawl freely"), but a
site answering 429 for robots.txt is asking us to slow down, and reading that as "no rules"
would turn its request for less traffic into more. Google reads it as a server error too.

An unreachable robots.txt is retried on a doubling schedule (5 minutes after the first failure,
then 10, 20, 40, and hourly from then on: :func:`retry_unreachable_at`); until then the host
gets no requests at all. After 24 hours of nothing but unreachable answers, the last good copy
(a 2xx file or a 4xx "no rules") is used instead, as long as that copy is at most 30 days old
(RFC 9309 §2.4 lets a crawler keep using a cached copy while the file is unreachable; Google
does the same). See :func:`rules_in_force`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlparse

from protego import Protego

from beamcrawl.core.policy.robots_match import CAPPED, SIEVE_FROM, RuleMatcher, Sieve, check_work, first_match

_protego_target: Callable[[str], str] | None
try:
    from protego._utils import _quote_path as _protego_target
except ImportError:  # another protego: it is asked as it is (_SievedProtego.of gives None)
    _protego_target = None

__all__ = [
    "FALLBACK_AFTER",
    "FALLBACK_MAX_AGE",
    "MAX_ROBOTS_BYTES",
    "RobotsKind",
    "RobotsRules",
    "cached_rules",
    "group_lines",
    "group_rules",
    "is_robots_txt",
    "product_token",
    "retry_unreachable_at",
    "rules_in_force",
    "whole_lines",
]

RobotsKind = Literal["parsed", "allow_all", "disallow_all"]

#: RFC 9309 §2.5: crawlers must parse at least 500 KiB; anything after that is ignored.
MAX_ROBOTS_BYTES = 500 * 1024

#: After this long with only unreachable answers, the last good copy may stand in.
FALLBACK_AFTER = 24 * 3600.0
#: ... but only while that copy is at most this old (counted from when it was fetched).
FALLBACK_MAX_AGE = 30 * 24 * 3600.0
#: Shortest and longest wait before asking an unreachable robots.txt again.
RETRY_MIN = 300.0
RETRY_MAX = 3600.0

_TOKEN = re.compile(r"[A-Za-z0-9_\-]+")
_STARS = re.compile(r"\*+").sub
# Group selection is done here, so protego only ever sees three agent names: ours, "*", and
# this one for every other agent. It cannot be a substring of a product token, so protego's
# substring matching cannot pick it for us.
_OTHER_AGENT = "~other~"

# Record names, with the spellings and misspellings protego itself accepts.
_FIELD_ALIASES = {
    "user-agent": "user-agent",
    "useragent": "user-agent",
    "user agent": "user-agent",
    "allow": "allow",
    "disallow": "disallow",
    "dissallow": "disallow",
    "dissalow": "disallow",
    "disalow": "disallow",
    "diasllow": "disallow",
    "disallaw": "disallow",
    "crawl-delay": "crawl-delay",
    "crawl delay": "crawl-delay",
    "sitemap": "sitemap",
    "sitemaps": "sitemap",
    "site-map": "sitemap",
}
_MAX_FIELD_WORDS = 2

# Characters str.splitlines() breaks at that RFC 9309 does not. They are written as their
# UTF-8 percent-escapes, which protego's matching treats as the same character.
_EXTRA_LINE_BREAKS = {
    ord(c): "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
}
_HAS_EXTRA_LINE_BREAK = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]").search

# RFC 9309's whitespace is a space or a tab (WS = %x20 / %x09). Python's str.strip() and
# str.split() take these characters for whitespace too; to RFC 9309 each is a character of the
# line (in a path, one to match: "Allow: /a\xa0" allows /a%C2%A0 only).
_RFC_WS = " \t"
# The records of RFC 9309's grammar (§2.2), and those it lets a crawler read (§2.2.4), as the
# strict reading takes them: the name as written, then a colon.
_RFC_FIELDS = frozenset({"user-agent", "allow", "disallow", "crawl-delay", "sitemap"})


def product_token(agent: str) -> str:
    """Validates a crawler's robots.txt product token (RFC 9309 §2.2.1).

    Args:
        agent: The product token, e.g. ``"beamcrawl"``, not the whole User-Agent header.

    Returns:
        The token, lower-cased.

    Raises:
        ValueError: ``agent`` is not a single token of letters, digits, ``_`` and ``-``.
    """
    token = agent.strip()
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"not a robots.txt product token: {agent!r} (letters, digits, '_' and '-' only)")
    return token.lower()


def _cap(body: bytes) -> bytes:
    """The first MAX_ROBOTS_BYTES of ``body``, cut after the last complete line."""
    if len(body) <= MAX_ROBOTS_BYTES:
        return body
    if body[MAX_ROBOTS_BYTES : MAX_ROBOTS_BYTES + 1] in (b"\n", b"\r"):
        return body[:MAX_ROBOTS_BYTES]  # the last line's terminator is the first byte past the limit
    return whole_lines(body[:MAX_ROBOTS_BYTES])


def whole_lines(body: bytes) -> bytes:
    """``body`` up to and with its last line terminator: what of a file cut short is whole
    lines. A half line could turn a long ``Allow: /private-ok`` into ``Allow: /pr``, which
    allows more than the file does."""
    return body[: max(body.rfind(b"\n"), body.rfind(b"\r")) + 1]


def _decode(body: bytes | str) -> str:
    """Body to text: at most 500 KiB of it, UTF-8 with replacement, without a BOM."""
    if isinstance(body, str):
        # surrogatepass: a str built from bad bytes must not make parsing raise.
        body = body.encode("utf-8", "surrogatepass")
    text = _cap(body).decode("utf-8", "replace")
    return text[1:] if text.startswith("\ufeff") else text


def _split_record(line: str, strict: bool = False) -> tuple[str, str] | None:
    """A comment-free line as (canonical field, value), or None.

    None means the line is not a record this crawler uses. Read leniently (the default), as
    protego (and Google) read it: whitespace is every character ``str.split()`` takes,
    ``Field value`` without a colon, ``User agent`` with a space and misspellings are
    accepted. Read strictly (``strict``), as RFC 9309's grammar (§2.2) is written: whitespace is a
    space or a tab, the name is one of :data:`_RFC_FIELDS` followed by a colon, and an
    ``Allow`` or ``Disallow`` value is empty or a path-pattern, which starts with ``/``.
    """
    if strict:
        name, colon, value = line.strip(_RFC_WS).partition(":")
        field = name.rstrip(_RFC_WS).lower()
        value = value.strip(_RFC_WS)
        if not colon or field not in _RFC_FIELDS:
            return None
        if field in ("allow", "disallow") and value and not value.startswith("/"):
            return None
        return field, value
    line = line.strip()
    name, colon, value = line.partition(":")
    if colon:
        lenient = _FIELD_ALIASES.get(" ".join(name.lower().split()))
        if lenient is not None:
            return lenient, value.strip()
    words = line.split(None, _MAX_FIELD_WORDS)
    for count in range(1, min(_MAX_FIELD_WORDS, len(words)) + 1):
        lenient = _FIELD_ALIASES.get(" ".join(words[:count]).lower())
        if lenient is not None:
            return lenient, " ".join(words[count:])
    return None


def _agent_name(value: str, token: str) -> str:
    """The name protego gets for a ``User-agent`` value: ``token``, ``*`` or ``_OTHER_AGENT``.

    As in Google's parser, the value's product token is its leading run of token characters
    (``beamcrawl/1.0`` names ``beamcrawl``), and it must equal ours case-insensitively.
    """
    if value == "*" or value.startswith(("* ", "*\t")):
        return "*"
    match = _TOKEN.match(value)
    if match and match.group().lower() == token:
        return token
    return _OTHER_AGENT


def _delay_value(value: str) -> float | None:
    """A Crawl-delay value in seconds, or None when it is not a usable number."""
    try:
        delay = float(value)
    except ValueError:
        return None
    return delay if math.isfinite(delay) and delay >= 0 else None


def _filtered(text: str, token: str, strict: bool = False) -> str:
    """The robots.txt text rewritten as the canonical records protego should see.

    ``strict``: each line read as RFC 9309's grammar is written (see :func:`_split_record`).
    """
    out: list[str] = []
    # A group's Crawl-delay values are held back and written as one line (the largest) where
    # the group ends: protego would end the group at a Crawl-delay line written among its
    # User-agent lines, and would keep only the last of several.
    delays: list[float] = []
    in_agents = False  # True while a group's User-agent lines are being read
    seen_agent = False  # records before the first User-agent line belong to no group

    def end_group() -> None:
        if delays:
            out.append(f"crawl-delay: {max(delays)!r}")
            delays.clear()

    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.partition("#")[0]
        if not line.strip(_RFC_WS if strict else None):
            continue
        record = _split_record(line, strict)
        if record is None:
            continue  # unknown records must not end a group (RFC 9309 §2.2.4)
        field, value = record
        if _HAS_EXTRA_LINE_BREAK(value):
            value = value.translate(_EXTRA_LINE_BREAKS)
        if field == "user-agent":
            if not in_agents:  # a User-agent line after rules starts a new group
                end_group()
                in_agents = seen_agent = True
            out.append(f"user-agent: {_agent_name(value, token)}")
        elif field == "sitemap":
            out.append(f"sitemap: {value}")  # site-wide: protego keeps it out of grouping
        elif field == "crawl-delay":
            delay = _delay_value(value)
            if delay is not None and seen_agent:
                delays.append(delay)
        else:
            in_agents = False
            out.append(f"{field}: {value}")
    end_group()
    return "\n".join(out)


def group_lines(text: str, token: str, fields: tuple[str, ...], strict: bool = False) -> list[tuple[str, str]]:
    """The ``fields`` records of the groups that apply to ``token``, in file order.

    The groups are read exactly as :func:`_filtered` reads them for protego (the same line
    ends, comments, User-agent matching, and records other than Allow and Disallow do not end
    a group's User-agent lines), so that a record sits in the group whose Allow and Disallow
    rules we obey. The groups naming ``token`` apply, else the ``*`` groups (RFC 9309
    §2.2.1; several matching groups are combined).

    Args:
        text: The decoded robots.txt text (:attr:`RobotsRules.text`).
        token: Our product token.
        fields: Lower-case record names, e.g. ``("content-usage",)``; only ``Name: value``
            lines count.
        strict: Each line read as RFC 9309's grammar is written (:func:`_split_record`),
            spaces and tabs alone taken for whitespace; else leniently.

    Returns:
        ``(field, value)`` pairs, the value stripped (comments already removed).
    """
    token = product_token(token)
    groups: list[tuple[set[str], list[tuple[str, str]]]] = []
    in_agents = False
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        ws = _RFC_WS if strict else None
        line = raw.partition("#")[0].strip(ws)
        if not line:
            continue
        name, colon, value = line.partition(":")
        field = name.rstrip(ws).lower() if strict else " ".join(name.lower().split())
        if colon and field in fields:
            if groups:  # before the first User-agent line a record belongs to no group
                groups[-1][1].append((field, value.strip(ws)))
            continue
        record = _split_record(line, strict)
        if record is None:
            continue
        if record[0] == "user-agent":
            if not in_agents:
                groups.append((set(), []))
                in_agents = True
            groups[-1][0].add(_agent_name(record[1], token))
        elif record[0] in ("allow", "disallow"):
            in_agents = False
    mine = [lines for agents, lines in groups if token in agents]
    if not mine:
        mine = [lines for agents, lines in groups if "*" in agents]
    return [pair for lines in mine for pair in lines]


def _request_target(url_or_path: str) -> str:
    """The path and query of a URL (or a path), which is all rules match against."""
    target = url_or_path
    if not target.startswith("/"):
        scheme_end = target.find("://")
        if scheme_end >= 0:
            start = scheme_end + 3
            ends = [i for i in (target.find("/", start), target.find("?", start)) if i >= 0]
            target = target[min(ends) :] if ends else "/"
    target = target.partition("#")[0]
    if not target.startswith("/"):
        target = f"/{target}"
    return target


def group_rules(filtered: str, token: str) -> list[tuple[bool, str]]:
    """Our group's ``(allow, path)`` rules, in file order, from :func:`_filtered`'s records.

    The groups naming ``token`` apply, else the ``*`` groups, several combined (RFC 9309
    §2.2.1). A group is a run of ``User-agent`` lines and the rules after them; ``Sitemap``
    and ``Crawl-delay`` neither start nor end one (``_filtered`` writes a group's delay
    after its rules). Rules before the first ``User-agent`` line belong to no group.
    """
    groups: list[tuple[set[str], list[tuple[bool, str]]]] = []
    in_agents = False
    for line in filtered.split("\n"):
        field, _, value = line.partition(": ")
        if field == "user-agent":
            if not in_agents:
                groups.append((set(), []))
                in_agents = True
            groups[-1][0].add(value)
        elif field in ("allow", "disallow"):
            in_agents = False
            if groups:
                groups[-1][1].append((field == "allow", value))
    mine = [rules for agents, rules in groups if token in agents]
    if not mine:
        mine = [rules for agents, rules in groups if "*" in agents]
    return [rule for rules in mine for rule in rules]


def is_robots_txt(url_or_path: str) -> bool:
    """Whether a URL (or path with optional query) is its host's ``/robots.txt``, which
    RFC 9309 §2.2.2 allows whatever the rules say.

    Only that URI: ``/robots.txt?x=1`` (an empty query's ``/robots.txt?`` too) is another
    request target, one a link may lead to, and the rules decide it like any other: a
    server's audit that reads §2.2.2 to the letter counts it against ``Disallow: /``.
    """
    return _request_target(url_or_path) == "/robots.txt"


class _SievedProtego:
    """protego's rules for one agent, sieved (:class:`Sieve`), so a target is tried only
    against those it could match: protego tries each in turn, and 27,000 ``Disallow:
    /*x{i}`` (500 KB) made it read a 2 KB target 27,000 times, ~35 ms a check on the fetch
    loop. The answer is protego's own: the first of its rules, in its order, whose
    ``match`` takes the target as protego puts it; a rule written again after itself is
    dropped (the first always answers for it). A check takes the steps ours takes at most
    (:func:`first_match`); past them it answers "disallowed", counted in :attr:`capped`.
    Built only for the many rules a sieve pays for, and only from a protego whose rules
    read as this one's do.
    """

    __slots__ = ("_literal", "_parser", "_rules", "_runs", "_sieve", "capped", "steps")

    def __init__(self, parser: Protego, rules: list[Any]) -> None:
        self._parser = parser
        first: dict[str, Any] = {}
        for rule in rules:
            first.setdefault(rule.value._pattern, rule)
        self._rules = list(first.values())
        patterns = [rule.value._pattern for rule in self._rules]
        anchored = [p.endswith("$") for p in patterns]
        # The runs protego searches: it reads "**" as "*".
        self._runs = [_STARS("*", p[:-1] if a else p).split("*") for p, a in zip(patterns, anchored)]
        self._literal = [sum(map(len, runs)) for runs in self._runs]
        self._sieve = Sieve(zip(self._runs, anchored))
        self.steps = 0
        self.capped = 0

    @classmethod
    def of(cls, parser: Protego, token: str) -> _SievedProtego | None:
        """The sieved rules protego applies to ``token``, or None where there are few (or
        protego's rules are not read as expected): then protego is asked as it is."""
        if _protego_target is None:
            return None
        try:
            rule_set = parser._get_matching_rule_set(token)
            rules = [] if rule_set is None else list(rule_set._rules)
            if len(rules) < SIEVE_FROM or not all(
                isinstance(rule.value._pattern, str) and rule.field in ("allow", "disallow") for rule in rules
            ):
                return None
        except AttributeError:
            return None
        return cls(parser, rules)

    def can_fetch(self, url: str, token: str) -> bool:
        """``Protego.can_fetch(url, token)``."""
        if "/robots.txt" in url and urlparse(url).path == "/robots.txt":
            return self._parser.can_fetch(url, token)
        assert _protego_target is not None
        target = _protego_target(url)
        rules, runs, literal, size = self._rules, self._runs, self._literal, len(target)

        def attempt(index: int) -> int:
            parts = runs[index]
            if literal[index] > size or not target.startswith(parts[0]):
                return 0
            return -len(parts) if rules[index].value.match(target) else len(parts)

        index, steps = first_match(self._sieve.candidates(target), attempt, check_work(target))
        self.steps += steps
        if index is None:
            return True
        if index == CAPPED:
            self.capped += 1
            return False
        return bool(rules[index].field == "allow")


class RobotsRules:
    """The robots.txt rules of one host, for one product token.

    Attributes:
        kind: ``"parsed"`` (a 2xx answer, possibly empty), ``"allow_all"`` (no usable file:
            4xx, too many redirects) or ``"disallow_all"`` (5xx, 429 or no answer).
        token: The product token the rules were selected for (lower-case).
        text: The decoded robots.txt text (at most 500 KiB) for ``"parsed"``, else None.
        status: The HTTP status it came with, if known (informational).
    """

    __slots__ = ("_matcher", "_parser", "_sieved", "_strict", "kind", "status", "text", "token")

    def __init__(self, kind: RobotsKind, token: str, text: str | None = None, status: int | None = None) -> None:
        """Builds rules directly; prefer :meth:`parse`, :meth:`from_fetch` or :meth:`from_dict`.

        Raises:
            ValueError: Unknown ``kind``, or ``token`` is not a product token.
        """
        if kind not in ("parsed", "allow_all", "disallow_all"):
            raise ValueError(f"unknown robots kind {kind!r}")
        self.kind: RobotsKind = kind
        self.token = product_token(token)
        self.text = (text or "") if kind == "parsed" else None
        self.status = status
        self._parser: Protego | None = None
        self._sieved: _SievedProtego | Protego | None = None  # what protego is asked
        self._matcher: RuleMatcher | None = None
        self._strict: RuleMatcher | Literal[False] | None = None  # False: the same records as _matcher's

    @classmethod
    def parse(cls, body: bytes | str, token: str, status: int | None = 200) -> RobotsRules:
        """Rules from a robots.txt body (as served with a 2xx answer).

        Args:
            body: The raw file; bytes are decoded as UTF-8 with replacement.
            token: Our product token, e.g. ``"beamcrawl"`` (not the whole User-Agent).
            status: The status it was served with, kept for the record.
        """
        return cls("parsed", token, _decode(body), status)

    @classmethod
    def from_fetch(cls, status: int | None, body: bytes | None, token: str) -> RobotsRules:
        """Rules from the outcome of fetching ``/robots.txt`` (after following redirects).

        Args:
            status: The final HTTP status, or None when the fetch failed (DNS, connection,
                timeout).
            body: The response body, if any.
            token: Our product token.
        """
        if status is None:
            return cls("disallow_all", token)
        if status == 206:
            # Partial Content answers a range (RFC 9110 §15.3.7), and we ask for none: its body
            # is some part of the file, from anywhere in it, not the file (unreachable).
            return cls("disallow_all", token, status=status)
        if 200 <= status < 300:
            return cls.parse(body or b"", token, status)
        if status == 429 or 500 <= status < 600:
            return cls("disallow_all", token, status=status)
        if 300 <= status < 500:
            return cls("allow_all", token, status=status)
        # 1xx as a final answer, or nonsense: the server is not answering sensibly.
        return cls("disallow_all", token, status=status)

    @property
    def disallow_all(self) -> bool:
        """True when nothing but /robots.txt may be fetched from the host."""
        return self.kind == "disallow_all"

    def _protego(self) -> Protego:
        # Parsed on first use, so loading many host records costs nothing until they are used.
        if self._parser is None:
            self._parser = Protego.parse(_filtered(self.text or "", self.token))
        return self._parser

    def _protego_asked(self) -> _SievedProtego | Protego:
        """protego, or its rules for us sieved where it has many (:class:`_SievedProtego`)."""
        if self._sieved is None:
            parser = self._protego()
            self._sieved = _SievedProtego.of(parser, self.token) or parser
        return self._sieved

    def _rules(self) -> RuleMatcher:
        """Our rules read leniently; the strict reading's are set beside them (:meth:`_strict_rules`)."""
        if self._matcher is None:
            text = self.text or ""
            lenient, strict = _filtered(text, self.token), _filtered(text, self.token, strict=True)
            self._matcher = RuleMatcher(group_rules(lenient, self.token))
            self._strict = False if strict == lenient else RuleMatcher(group_rules(strict, self.token))
        return self._matcher

    def _strict_rules(self) -> RuleMatcher | None:
        """Our rules with each line read as RFC 9309's grammar is written (:func:`_split_record`),
        or None when that reading gives the lenient one's records."""
        self._rules()
        return None if self._strict is False else self._strict

    def allowed(self, url_or_path: str) -> bool:
        """Whether our crawler may fetch the URL (or path with optional query).

        ``/robots.txt`` itself is always allowed (RFC 9309 §2.2.2), without a query only
        (:func:`is_robots_txt`). Otherwise the target must be allowed by the rules as RFC
        9309 matches them (:class:`RuleMatcher`), with the file's lines read both leniently
        and as the RFC's grammar is written (:func:`_split_record`), *and* as protego reads
        them, which is how Scrapy, and many a server's audit, read them. Where the two differ, the stricter
        stands: protego takes ``%3F`` for ``?`` and ``%26`` for ``&``, so ``Disallow: /p%3Fq``
        forbids ``/p?q`` there, and its longest match counts a reserved character as three
        octets, so a ``Disallow`` holding several can outweigh a longer ``Allow``. Politeness
        is not traded for a page: nothing is fetched that either reading forbids, and nothing
        that protego alone allowed before is fetched unless the RFC's reading allows it too.
        """
        if self.kind == "allow_all":
            return True
        target = _request_target(url_or_path)
        if target == "/robots.txt":  # is_robots_txt
            return True
        if self.kind == "disallow_all":
            return False
        matcher, strict = self._rules(), self._strict_rules()
        if not matcher and not strict:  # no rule for us: every reading allows everything
            return True
        if not matcher.allowed(target) or (strict is not None and not strict.allowed(target)):
            return False
        if target.startswith("//"):
            # protego would read "//x" as an authority; give it a URL with an empty-ish one.
            target = f"http://robots.invalid{target}"
        return self._protego_asked().can_fetch(target, self.token)

    @property
    def checks_capped(self) -> int:
        """How many checks so far reached their work's bound and answered "disallowed" for it
        (:class:`RuleMatcher`): a file whose rules no index sorts out cheaply."""
        asked = [self._matcher, self._strict or None, self._sieved]
        return sum(getattr(a, "capped", 0) for a in asked if a is not None)

    def crawl_delay(self) -> float | None:
        """The Crawl-delay of our group in seconds, if it sets a valid one (caller caps it).

        Where the strict reading of the lines (:func:`_split_record`) finds other records, the
        longer of its delay and the lenient reading's: a ``User-agent`` line the one reading
        does not take puts the delay in another group than the other reading does.
        """
        if self.kind != "parsed":
            return None
        delay = self._protego().crawl_delay(self.token)
        if self._strict_rules() is None:  # the same records either way
            return delay
        strict = Protego.parse(_filtered(self.text or "", self.token, strict=True)).crawl_delay(self.token)
        return max((d for d in (delay, strict) if d is not None), default=None)

    def sitemaps(self) -> list[str]:
        """Sitemap URLs the file lists (site-wide, whatever the group), first-seen order."""
        if self.kind != "parsed":
            return []
        return list(dict.fromkeys(self._protego().sitemaps))

    def group_lines(self, fields: tuple[str, ...]) -> list[tuple[str, str]]:
        """Our group's records named ``fields`` (see :func:`group_lines`); none unless parsed."""
        if self.kind != "parsed":
            return []
        return group_lines(self.text or "", self.token, fields)

    def strict_group_lines(self, fields: tuple[str, ...]) -> list[tuple[str, str]] | None:
        """:meth:`group_lines` with each line read as RFC 9309's grammar is written, or None
        when that reading gives the same records (a caller then has one reading to apply)."""
        if self.kind != "parsed":
            return None
        strict = group_lines(self.text or "", self.token, fields, strict=True)
        return None if strict == self.group_lines(fields) else strict

    def to_dict(self) -> dict[str, Any]:
        """A small JSON-able form for the host record (the body is parsed again on load)."""
        out: dict[str, Any] = {"kind": self.kind, "token": self.token, "status": self.status}
        if self.kind == "parsed":
            out["text"] = self.text
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], token: str | None = None) -> RobotsRules:
        """Inverse of :meth:`to_dict`.

        Args:
            data: What :meth:`to_dict` returned.
            token: The product token to select groups for; by default the one the rules were
                stored for. The file's text is kept, so a crawl under another token (one
                deployment, two purposes) reads the same cached file for its own group.
        """
        return cls(data["kind"], token or data["token"], data.get("text"), data.get("status"))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RobotsRules):
            return NotImplemented
        return (self.kind, self.token, self.text, self.status) == (
            other.kind,
            other.token,
            other.text,
            other.status,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable parse cache; equality is by value

    def __repr__(self) -> str:
        size = f", {len(self.text)} chars" if self.text is not None else ""
        return f"RobotsRules({self.kind!r}, token={self.token!r}, status={self.status}{size})"


def rules_in_force(
    current: RobotsRules,
    last_good: RobotsRules | None,
    *,
    last_good_at: float,
    failing_since: float,
    now: float,
) -> RobotsRules:
    """The rules to obey now: the latest answer, or the last good copy while it is unreachable.

    An unreachable robots.txt (5xx, 429, no answer) means "disallow everything". Once it has
    been unreachable for :data:`FALLBACK_AFTER` (24 h) without a break, the last good copy is
    used instead, for as long as that copy is at most :data:`FALLBACK_MAX_AGE` (30 days) old;
    after that it is "disallow everything" again until the file comes back.

    Args:
        current: The latest answer.
        last_good: The last answer that was not "unreachable", if any.
        last_good_at: Epoch seconds when ``last_good`` was fetched.
        failing_since: Epoch seconds of the first unreachable answer of the current run
            (0 when the latest answer was good).
        now: Epoch seconds to judge at (explicit, so the rule is testable).
    """
    if current.kind != "disallow_all" or last_good is None or last_good.kind == "disallow_all":
        return current
    if failing_since <= 0 or now - failing_since < FALLBACK_AFTER:
        return current  # not failing long enough: keep off the host while it recovers
    if now - last_good_at > FALLBACK_MAX_AGE:
        return current  # the copy is too old to speak for the site any more
    return last_good


def cached_rules(
    robots: dict[str, Any] | None,
    good: dict[str, Any] | None,
    *,
    good_at: float,
    failing_since: float,
    token: str,
    now: float,
) -> RobotsRules | None:
    """:func:`rules_in_force` over a host record's stored robots fields (None = no answer yet).

    Args:
        robots: The stored latest answer (:meth:`RobotsRules.to_dict`).
        good: The stored last good answer.
        good_at: When ``good`` was fetched.
        failing_since: Start of the current run of unreachable answers (0 = none).
        token: The crawl's product token (groups are selected for it, whatever was stored).
        now: Epoch seconds.
    """
    if robots is None:
        return None
    current = RobotsRules.from_dict(robots, token)
    last_good = RobotsRules.from_dict(good, token) if good else None
    return rules_in_force(current, last_good, last_good_at=good_at, failing_since=failing_since, now=now)


def retry_unreachable_at(fetched_at: float, failing_since: float) -> float:
    """When an unreachable robots.txt may be asked again.

    The wait is as long as the file had been failing when it was last asked, within
    [:data:`RETRY_MIN`, :data:`RETRY_MAX`]: 5 minutes after the first failure, then doubling to
    hourly. A struggling server is not asked every round, and a file that comes back is
    noticed within the hour.

    Args:
        fetched_at: Epoch seconds of the last (unreachable) answer.
        failing_since: Epoch seconds of the first unreachable answer of the run.
    """
    failing_for = max(0.0, fetched_at - failing_since) if failing_since > 0 else 0.0
    return fetched_at + min(max(failing_for, RETRY_MIN), RETRY_MAX)
