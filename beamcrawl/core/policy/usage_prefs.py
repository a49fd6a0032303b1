"""Usage preferences: what a site says its content may be used for, per purpose of the crawl.

Fetching is robots.txt's question (``Allow``/``Disallow``, core/policy/robots.py); use is
this module's. Three statements are read, all optional:

* ``Content-Signal: search=yes, ai-input=yes, ai-train=no`` lines in the robots.txt group that
  applies to our token (else ``*``), as contentsignals.org defines them: comma-separated
  ``key=value`` entries, values ``yes``/``no``, for the whole site. Keys and values are
  compared case-insensitively; an entry that is not ``key=yes|no`` for a known key is ignored
  (it states nothing).
* ``Content-Usage: PATH PREFERENCE`` rules in the same group (draft-ietf-aipref-attach): the
  path is matched as ``Allow``/``Disallow`` are by RFC 9309's reading (``robots_match.py``:
  ``*`` and ``$``, longest path in octets wins; rules with the longest matching path are
  combined), the preference is a structured-field dictionary of
  draft-ietf-aipref-vocab labels (``train-ai=n, search=y``; tokens ``y``/``n``; unknown keys
  and parameters ignored; case-sensitive; a dictionary that does not parse states nothing).
  A rule whose path does not start with ``/`` or whose preference does not parse is no rule
  at all (counted as bad): it cannot shadow a shorter rule's refusal. That is stricter than
  the draft, which would let it make the shorter rule's preference unknown. At most
  :data:`MAX_RULES` rules of a group are kept, and paths are matched in time linear in the
  pattern times the path (a hostile pattern of many ``*`` cannot make matching explode).
* The ``Content-Usage`` HTTP response header of each page, the same dictionary (several
  header lines are joined with ``,``, as RFC 9110 §5.3 combines them). A header that does not
  parse states nothing and is counted; it never grants anything.

The purposes of a crawl (``--purpose``) map onto both vocabularies:

=========  ====================  =================
purpose    Content-Signal key    aipref-vocab label
=========  ====================  =================
search     ``search``            ``search``
ai-input   ``ai-input``          ``ai-use``
ai-train   ``ai-train``          ``train-ai``
=========  ====================  =================

The vocabulary draft as it stands defines these three categories side by side, with no
hierarchy between them (earlier drafts' broader ``tdm``/``ai``/``genai``/``bots`` labels are
gone, so they are unknown labels and ignored); :data:`BROADER` is empty and the lookup that
would climb it is kept for when the vocabulary adds one.

Per purpose, every statement that applies to a URL is combined as the vocabulary's
"Combining Preferences" says: any refusal wins, else any permission, else the preference is
unstated (absent means unstated: nothing is inferred). That settles both disagreements, between
robots.txt and the header and between the two vocabularies: the stricter wins.

A crawl with several purposes gets the strictest answer any of them earns (one token doing
several jobs): :func:`crawl_refusal` says a URL is refused for the crawl as soon as one of its
purposes is refused. docs/ARCHITECTURE.md §3 and the README ("Identity and site preferences")
say what the crawl then does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Literal

from beamcrawl.core.policy.robots_match import PathPattern, match_form, rule_matches

if TYPE_CHECKING:
    from beamcrawl.core.policy.robots import RobotsRules

__all__ = [
    "AIPREF_LABELS",
    "ALLOWED",
    "BROADER",
    "MAX_RULES",
    "PURPOSES",
    "REFUSED",
    "SIGNAL_KEYS",
    "UNSTATED",
    "Preference",
    "UsageRules",
    "aipref_preferences",
    "combine",
    "crawl_refusal",
    "decide",
    "header_preferences",
    "parse_dictionary",
    "parse_purposes",
    "path_matches",
    "record_of",
    "robots_preferences",
    "signal_preferences",
    "site_refuses",
]

Decision = Literal["allowed", "refused", "unstated"]
ALLOWED: Decision = "allowed"
REFUSED: Decision = "refused"
UNSTATED: Decision = "unstated"

#: What a crawl may declare it fetches for, in this order everywhere.
PURPOSES = ("search", "ai-input", "ai-train")
#: Purpose -> contentsignals.org key.
SIGNAL_KEYS = {"search": "search", "ai-input": "ai-input", "ai-train": "ai-train"}
#: Purpose -> draft-ietf-aipref-vocab label.
AIPREF_LABELS = {"search": "search", "ai-input": "ai-use", "ai-train": "train-ai"}
#: Content-Usage rules kept from one group (later ones are counted as bad and ignored).
MAX_RULES = 1000
#: aipref label -> the more general label whose preference applies when it has none.
BROADER: dict[str, str] = {}

_SIGNAL_VALUES: dict[str, Decision] = {"yes": ALLOWED, "no": REFUSED}
_RANK = {REFUSED: 2, ALLOWED: 1, UNSTATED: 0}


@dataclass(frozen=True)
class Preference:
    """One purpose's answer for one URL.

    Attributes:
        decision: ``"allowed"``, ``"refused"`` or ``"unstated"``.
        evidence: The statement that decided it (``robots.txt Content-Usage: / train-ai=n``,
            ``header Content-Usage: train-ai=n``), None when unstated.
    """

    decision: Decision = UNSTATED
    evidence: str | None = None


def parse_purposes(values: str | Iterable[str]) -> tuple[str, ...]:
    """The purposes named by ``--purpose`` values (repeatable, each a comma list).

    Returns:
        The distinct purposes in :data:`PURPOSES` order; ``()`` for none.

    Raises:
        ValueError: A name that is not a purpose.
    """
    if isinstance(values, str):
        values = [values]
    named = {word.strip().lower() for value in values for word in value.split(",") if word.strip()}
    unknown = sorted(named - set(PURPOSES))
    if unknown:
        raise ValueError(f"--purpose must be {', '.join(PURPOSES)} (one or more), got {', '.join(unknown)}")
    return tuple(p for p in PURPOSES if p in named)


# -- RFC 9651 structured-field dictionaries (parsing only, enough to tell tokens apart) --------

_KEY_START = re.compile(r"[a-z*]")
_KEY = re.compile(r"[a-z*][a-z0-9_\-.*]*")
_TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_BASE64 = re.compile(r"[A-Za-z0-9+/=]*")


class _Bad(ValueError):
    """The bytes are not a structured-field dictionary."""


@dataclass(frozen=True)
class Token:
    """A structured-field Token (``y``, ``n``), kept apart from a String ``"n"``."""

    value: str


class _Reader:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_sp(self) -> None:
        while self.peek() == " ":
            self.i += 1

    def skip_ows(self) -> None:
        while self.peek() in (" ", "\t") and self.peek():
            self.i += 1

    def match(self, pattern: re.Pattern[str]) -> str:
        m = pattern.match(self.s, self.i)
        if m is None:
            raise _Bad(f"unexpected {self.peek()!r} at {self.i}")
        self.i = m.end()
        return m.group()

    def key(self) -> str:
        if not _KEY_START.match(self.peek()):
            raise _Bad(f"key expected at {self.i}")
        return self.match(_KEY)

    def bare_item(self) -> object:
        c = self.peek()
        if c == "-" or c.isdigit():
            text = self.match(_NUMBER)
            whole = text.lstrip("-").partition(".")
            if len(whole[0]) > (12 if whole[1] else 15) or len(whole[2]) > 3:
                raise _Bad("number too long")
            return float(text) if whole[1] else int(text)
        if c == '"':
            return self.string()
        if c == ":":
            self.i += 1
            data = self.match(_BASE64)
            if self.peek() != ":":
                raise _Bad("unterminated byte sequence")
            self.i += 1
            return data.encode()
        if c == "?":
            self.i += 1
            flag = self.peek()
            if flag not in ("0", "1"):
                raise _Bad("bad boolean")
            self.i += 1
            return flag == "1"
        if c == "@":
            self.i += 1
            text = self.match(_NUMBER)
            if "." in text or len(text.lstrip("-")) > 15:
                raise _Bad("bad date")
            return int(text)
        if c == "%":
            self.i += 1
            if self.peek() != '"':
                raise _Bad("bad display string")
            return self.string(display=True)
        if c and (c.isalpha() or c == "*") and c.isascii():
            return Token(self.match(_TOKEN))
        raise _Bad(f"item expected at {self.i}")

    def string(self, display: bool = False) -> str:
        self.i += 1  # the opening quote
        out: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise _Bad("unterminated string")
            self.i += 1
            if c == '"':
                text = "".join(out)
                if display:
                    try:
                        return text.encode("latin-1").decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Bad("display string is not UTF-8") from None
                return text
            if c == "\\" and not display:
                nxt = self.peek()
                if nxt not in ('"', "\\"):
                    raise _Bad("bad escape")
                self.i += 1
                out.append(nxt)
            elif not (" " <= c <= "~"):
                raise _Bad("bad character in string")
            elif display and c == "%":
                hexes = self.s[self.i : self.i + 2]
                if not re.fullmatch(r"[0-9a-f]{2}", hexes):
                    raise _Bad("bad display string escape")
                self.i += 2
                out.append(chr(int(hexes, 16)))  # a byte, decoded as UTF-8 below
            else:
                out.append(c)

    def parameters(self) -> dict[str, object]:
        params: dict[str, object] = {}
        while self.peek() == ";":
            self.i += 1
            self.skip_sp()
            name = self.key()
            value: object = True
            if self.peek() == "=":
                self.i += 1
                value = self.bare_item()
            params[name] = value
        return params

    def member(self) -> tuple[object, dict[str, object]]:
        if self.peek() == "(":  # an inner list: not a preference, but valid syntax
            self.i += 1
            items: list[tuple[object, dict[str, object]]] = []
            while True:
                self.skip_sp()
                if self.peek() == ")":
                    self.i += 1
                    return tuple(items), self.parameters()
                items.append((self.bare_item(), self.parameters()))
                if self.peek() not in (" ", ")"):
                    raise _Bad("bad inner list")
        return self.bare_item(), self.parameters()


def parse_dictionary(data: str | bytes) -> dict[str, tuple[object, dict[str, object]]] | None:
    """An RFC 9651 §4.2.2 dictionary: key -> (value, parameters); None when it does not parse.

    A Token value is a :class:`Token`; a key without a value is ``True``. As the RFC says, a
    repeated key keeps its last value.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("ascii")
        except UnicodeDecodeError:
            return None
    if not data.isascii():
        return None
    r = _Reader(data)
    out: dict[str, tuple[object, dict[str, object]]] = {}
    try:
        r.skip_sp()
        while r.peek():
            name = r.key()
            if r.peek() == "=":
                r.i += 1
                value, params = r.member()
            else:
                value, params = True, r.parameters()
            out.pop(name, None)  # the last one wins, in its own place
            out[name] = (value, params)
            r.skip_ows()
            if not r.peek():
                break
            if r.peek() != ",":
                raise _Bad(f"',' expected at {r.i}")
            r.i += 1
            r.skip_ows()
            if not r.peek():
                raise _Bad("trailing ','")
        r.skip_sp()
    except _Bad:
        return None
    return out


# -- statements -> preferences ------------------------------------------------------------------


def _label_decision(parsed: dict[str, tuple[object, dict[str, object]]], label: str) -> Decision:
    seen: set[str] = set()
    while label not in seen:  # climbs BROADER while the label states nothing
        seen.add(label)
        value = parsed.get(label, (None, {}))[0]
        if isinstance(value, Token) and value.value in ("y", "n"):
            return ALLOWED if value.value == "y" else REFUSED
        if label not in BROADER:
            break
        label = BROADER[label]
    return UNSTATED


def aipref_preferences(expression: str | bytes, purposes: Iterable[str] = PURPOSES) -> dict[str, Decision] | None:
    """An aipref-vocab preference expression's decision per purpose; None when it does not parse."""
    parsed = parse_dictionary(expression)
    if parsed is None:
        return None
    return {p: _label_decision(parsed, AIPREF_LABELS[p]) for p in purposes}


def signal_preferences(value: str, purposes: Iterable[str] = PURPOSES) -> dict[str, Decision]:
    """A ``Content-Signal`` value's decision per purpose (entries it cannot read state nothing)."""
    stated: dict[str, Decision] = {}
    for entry in value.split(","):
        key, eq, word = entry.partition("=")
        decision = _SIGNAL_VALUES.get(word.strip().lower()) if eq else None
        if decision is not None:
            key = key.strip().lower()
            stated[key] = _stricter(stated.get(key, UNSTATED), decision)
    return {p: stated.get(SIGNAL_KEYS[p], UNSTATED) for p in purposes}


def _stricter(a: Decision, b: Decision) -> Decision:
    return a if _RANK[a] >= _RANK[b] else b


def combine(*answers: dict[str, Preference]) -> dict[str, Preference]:
    """Per purpose, the strictest of several answers (refused > allowed > unstated); the first
    statement of the winning kind is its evidence."""
    out: dict[str, Preference] = {}
    for answer in answers:
        for purpose, pref in answer.items():
            held = out.get(purpose)
            if held is None or _RANK[pref.decision] > _RANK[held.decision]:
                out[purpose] = pref
    return out


# -- robots.txt rules ---------------------------------------------------------------------------


def path_matches(path: str, target: str) -> bool:
    """Whether a robots.txt path pattern (``*``, a final ``$``) matches a path and query, as
    Allow and Disallow match as RFC 9309 reads them (``robots_match.py``: a prefix unless it
    ends in ``$``, escaped unreserved characters decoded, ``?`` and ``%3F`` different)."""
    return rule_matches(path, target)


@dataclass(frozen=True)
class UsageRule:
    """One ``Content-Usage`` rule of our group."""

    path: str
    expression: str
    prefs: dict[str, Decision]

    @cached_property
    def pattern(self) -> PathPattern:
        """The path, ready to match (read once, not once for each URL)."""
        return PathPattern(self.path)

    @property
    def length(self) -> int:
        return self.pattern.octets


@dataclass(frozen=True)
class UsageRules:
    """The usage statements of one robots.txt for our token: what :func:`decide` reads.

    Attributes:
        signals: Each ``Content-Signal`` value of our group.
        rules: Each valid ``Content-Usage`` rule of our group.
        bad: Lines of either kind that state nothing (counted, never obeyed as a permission).
        strict: The statements of the same file with its lines read as RFC 9309's grammar is
            written (``robots.RobotsRules.strict_group_lines``), where that reading finds
            others: a ``User agent:`` line (a space for the hyphen) or a U+00A0 puts them in
            another group. Both readings are applied, and any refusal wins (:func:`combine`).
    """

    signals: tuple[str, ...] = ()
    rules: tuple[UsageRule, ...] = ()
    bad: int = 0
    strict: UsageRules | None = None

    @classmethod
    def from_lines(cls, lines: Iterable[tuple[str, str]]) -> UsageRules:
        """From ``(field, value)`` records (robots.py's :func:`group_lines`)."""
        signals: list[str] = []
        rules: list[UsageRule] = []
        bad = 0
        for field, value in lines:
            if field == "content-signal":
                if not any(d != UNSTATED for d in signal_preferences(value).values()):
                    bad += 1
                signals.append(value)
                continue
            path, _, expression = value.replace("\t", " ").partition(" ")
            expression = expression.strip()
            # A path and a preference (the attach draft's ABNF): without either, no rule.
            prefs = aipref_preferences(expression) if path.startswith("/") and expression else None
            if prefs is None:
                bad += 1
                continue
            if len(rules) >= MAX_RULES:
                bad += 1  # past the cap: each URL is matched against every rule
                continue
            rules.append(UsageRule(path, expression, prefs))
        return cls(tuple(signals), tuple(rules), bad)

    @classmethod
    def from_robots(cls, robots: RobotsRules | None) -> UsageRules:
        """The statements of a host's robots rules (none unless it served a file)."""
        if robots is None:
            return cls()
        fields = ("content-signal", "content-usage")
        strict = robots.strict_group_lines(fields)
        lenient = cls.from_lines(robots.group_lines(fields))
        return lenient if strict is None else replace(lenient, strict=cls.from_lines(strict))

    @classmethod
    def from_text(cls, text: str, token: str) -> UsageRules:
        """The statements of a robots.txt text for ``token``."""
        from beamcrawl.core.policy.robots import group_lines

        fields = ("content-signal", "content-usage")
        lenient, strict = group_lines(text, token, fields), group_lines(text, token, fields, strict=True)
        return (
            cls.from_lines(lenient)
            if strict == lenient
            else replace(cls.from_lines(lenient), strict=cls.from_lines(strict))
        )

    def matching(self, target: str) -> list[UsageRule]:
        """The longest-path ``Content-Usage`` rules matching a path (and query).

        The target is put in the matching form once, and each path was when first matched:
        for each rule both were read again, a character at a time in Python where they hold an
        escape or a non-ASCII character, and 1,000 rules (a 33 KB robots.txt) cost each URL of
        2,000 characters 0.2 to 0.5 s, on the fetch loop."""
        form = match_form(target)
        hits = [r for r in self.rules if r.pattern.matches(form)]
        if not hits:
            return []
        longest = max(r.length for r in hits)
        return [r for r in hits if r.length == longest]


def _target(url: str) -> str:
    """The path and query of a URL (or a path)."""
    if url.startswith("/"):
        return url.partition("#")[0]
    _, sep, rest = url.partition("://")
    if not sep:
        return "/"
    cut = [i for i in (rest.find("/"), rest.find("?")) if i >= 0]
    target = rest[min(cut) :] if cut else "/"
    target = target.partition("#")[0]
    return target if target.startswith("/") else "/" + target


def robots_preferences(rules: UsageRules, url: str, purposes: Iterable[str]) -> dict[str, Preference]:
    """Per purpose, what robots.txt says about using ``url``."""
    purposes = tuple(purposes)
    answers = _answers(rules, url, purposes)
    if rules.strict is not None:
        answers += _answers(rules.strict, url, purposes)
    out = combine(*answers)
    return {p: out.get(p, Preference()) for p in purposes}


def _answers(rules: UsageRules, url: str, purposes: tuple[str, ...]) -> list[dict[str, Preference]]:
    """What each statement of one reading of robots.txt says about using ``url``."""
    answers = []
    for value in rules.signals:
        decided = signal_preferences(value, purposes)
        answers.append(
            {p: Preference(d, f"robots.txt Content-Signal: {value}") for p, d in decided.items() if d != UNSTATED}
        )
    for rule in rules.matching(_target(url)):
        answers.append(
            {
                p: Preference(rule.prefs[p], f"robots.txt Content-Usage: {rule.path} {rule.expression}")
                for p in purposes
                if rule.prefs[p] != UNSTATED
            }
        )
    return answers


def header_preferences(values: Iterable[str], purposes: Iterable[str]) -> tuple[dict[str, Preference], bool]:
    """Per purpose, what a response's ``Content-Usage`` header lines say.

    Returns:
        The answers, and whether a header was present but did not parse (then it says nothing).
    """
    purposes = tuple(purposes)
    lines = [v for v in values]
    if not lines:
        return {p: Preference() for p in purposes}, False
    joined = ", ".join(lines)
    decided = aipref_preferences(joined.encode("utf-8", "replace"), purposes)
    if decided is None:
        return {p: Preference() for p in purposes}, True
    return {
        p: Preference(d, f"header Content-Usage: {joined}"[:300]) if d != UNSTATED else Preference()
        for p, d in decided.items()
    }, False


def decide(rules: UsageRules, url: str, purposes: Iterable[str], header: Iterable[str] = ()) -> dict[str, Preference]:
    """The decision per purpose for ``url``: robots.txt's statements and the response's
    ``Content-Usage`` header lines (none before the fetch), the strictest winning."""
    purposes = tuple(purposes)
    from_header, _bad = header_preferences(header, purposes)
    out = combine(robots_preferences(rules, url, purposes), from_header)
    return {p: out.get(p, Preference()) for p in purposes}


def crawl_refusal(decisions: dict[str, Preference]) -> str | None:
    """Why the crawl may not use a URL (a purpose refused, with its evidence), or None.

    One refused purpose refuses the crawl: a crawl's pages feed all of its purposes, so the
    strictest answer applies to all of them (seed 004: one token doing several jobs).
    """
    for purpose in PURPOSES:
        pref = decisions.get(purpose)
        if pref is not None and pref.decision == REFUSED:
            return f"{purpose} refused by {pref.evidence}"
    return None


def site_refuses(rules: RobotsRules | UsageRules | None, purposes: Iterable[str]) -> str | None:
    """Whether the site's robots.txt refuses one of ``purposes`` for the whole site.

    Whole site: refused at ``/`` and at the path of every ``Content-Usage`` rule of our group
    (no rule grants or leaves unstated a part of the site). The header is per page and not
    consulted.

    Args:
        rules: The host's robots rules (or their usage statements already read); None or a
            file without statements refuses nothing.
        purposes: The crawl's purposes (``CrawlConfig.purposes``).

    Returns:
        The evidence, e.g. ``"ai-train refused by robots.txt Content-Usage: / train-ai=n"``,
        or None.
    """
    purposes = tuple(purposes)
    if not purposes:
        return None
    usage = rules if isinstance(rules, UsageRules) else UsageRules.from_robots(rules)
    rules_read = usage.rules + (usage.strict.rules if usage.strict is not None else ())
    paths = ["/", *(r.path.rstrip("$").replace("*", "") or "/" for r in rules_read)]
    for purpose in PURPOSES:
        if purpose not in purposes:
            continue
        answers = [robots_preferences(usage, path, (purpose,))[purpose] for path in paths]
        if all(a.decision == REFUSED for a in answers):
            return f"{purpose} refused by {answers[0].evidence}"
    return None


def record_of(decisions: dict[str, Preference]) -> dict[str, str]:
    """The decisions as stored with a page (pages/ Parquet, the WARC header): purpose -> decision."""
    return {p: decisions[p].decision for p in PURPOSES if p in decisions}
