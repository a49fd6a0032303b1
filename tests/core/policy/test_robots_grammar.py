"""robots.txt files read against RFC 9309 §2.2's grammar, byte class by byte class.

The oracle here is written from the RFC's text, not from ``robots.py``: a line is a record
only as the grammar writes it (``*WS field *WS ":" *WS value``, where ``WS`` is a space or a
tab, nothing else), lines end at CR, LF or CRLF, ``#`` starts a comment, a leading byte-order
mark is no character of the file; groups are runs of ``User-agent`` lines and the rules after
them, ours (case-insensitively) combined, else ``*``'s (§2.2.1); the rule with the most octets
decides, ``Allow`` on a tie (§2.2.2), ``*`` and a final ``$`` as §2.2.3 says. Where the grammar
is silent the oracle reads as the crawler documents it reads: a ``User-agent`` value names the
product token it starts with. Generated files must never let the crawler fetch what the
oracle forbids (the crawler may forbid more: protego is asked too).
"""

from __future__ import annotations

import re
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.robots import RobotsRules

TOKEN = "beamcrawl"

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_RESERVED_KEPT = frozenset(":/?#[]@!&'()+,;=")  # RFC 3986 gen-delims and sub-delims, less * and $
_RECORD = re.compile(r"[ \t]*(user-agent|allow|disallow)[ \t]*:[ \t]*(.*?)[ \t]*", re.IGNORECASE | re.DOTALL)
_IDENTIFIER = re.compile(r"[A-Za-z_-]+")  # identifier = 1*(%x2D / %x41-5A / %x5F / %x61-7A)


def _octets(text: str) -> str:
    """``text`` as the octets §2.2.2 compares: non-ASCII and reserved-but-kept characters as
    they must be written, escapes of unreserved characters decoded, other escapes upper-cased."""
    out, i = [], 0
    while i < len(text):
        hexes = text[i + 1 : i + 3]
        if text[i] == "%" and len(hexes) == 2 and all(c in "0123456789abcdefABCDEF" for c in hexes):
            char = chr(int(hexes, 16))
            out.append(char if char in _UNRESERVED else "%" + hexes.upper())
            i += 3
            continue
        char = text[i]
        if char in _UNRESERVED or char in _RESERVED_KEPT:
            out.append(char)
        else:  # "%" starting no escape, "*", "$", a space, a control, anything not ASCII
            out.extend(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


def rfc_rules(body: bytes) -> list[tuple[bool, str]]:
    """Our group's ``(allow, pattern)`` rules as RFC 9309 §2.2 and §2.2.1 read ``body``."""
    text = body.decode("utf-8")
    text = text[1:] if text.startswith("\ufeff") else text
    groups: list[tuple[set[str], list[tuple[bool, str]]]] = []
    after_agent = False
    for line in re.split(r"\r\n|\r|\n", text):
        record = _RECORD.fullmatch(line.split("#", 1)[0])
        if record is None:
            continue  # not a line of the grammar: no record
        field, value = record.group(1).lower(), record.group(2)
        if field == "user-agent":
            if not after_agent:
                groups.append((set(), []))
                after_agent = True
            named = _IDENTIFIER.match(value)
            star = value == "*" or value.startswith(("* ", "*\t"))
            groups[-1][0].add("*" if star else named.group().lower() if named else "")
        else:
            after_agent = False
            if groups:  # a rule before any User-agent line is in no group
                groups[-1][1].append((field == "allow", value))
    ours = [rules for agents, rules in groups if TOKEN in agents]
    chosen = ours or [rules for agents, rules in groups if "*" in agents]
    return [rule for rules in chosen for rule in rules]


def rfc_allows(rules: list[tuple[bool, str]], target: str) -> bool:
    """§2.2.2 and §2.2.3: the matching rule with the most octets decides, Allow on a tie."""
    if target == "/robots.txt":
        return True
    subject = _octets(target)
    best: tuple[int, bool] | None = None
    for allow, pattern in rules:
        if not pattern:
            continue
        anchored = pattern.endswith("$")
        runs = [_octets(run) for run in (pattern[:-1] if anchored else pattern).split("*")]
        if re.match(".*".join(map(re.escape, runs)) + ("$" if anchored else ""), subject, re.DOTALL):
            length = len("*".join(runs)) + anchored
            best = max(best or (length, allow), (length, allow))
    return best is None or best[1]


# --- what the files are made of -----------------------------------------------------------------

# Characters Python takes for whitespace (str.strip, str.split) that RFC 9309 does not: in a
# path each is a character to match (U+0085 and up are UTF8-2/3 characters of a path-pattern).
OTHER_SPACE = "\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"
_PATH_PIECES = ["a", "b", "/", "?", "=", "*", "$", "%41", "%2F", "é", "\u200b", *(c for c in OTHER_SPACE if c > "\x7f")]
_paths = st.lists(st.sampled_from(_PATH_PIECES), max_size=4).map(lambda parts: "/" + "".join(parts))
_rfc_ws = st.sampled_from(["", " ", "\t", "  ", " \t"])
# Now and then (one place in ten) another whitespace character where a space or tab may stand.
_mostly_rfc_ws = st.tuples(st.integers(0, 9), st.sampled_from(OTHER_SPACE), _rfc_ws).map(
    lambda t: t[1] if t[0] == 0 else t[2]
)
_agents = st.sampled_from([TOKEN, TOKEN.upper(), "BeamCrawl", "*", "other", "beam", "beamcrawlx"])
_spellings = {
    "user-agent": ["User-agent", "user-agent", "USER-AGENT"],
    "allow": ["Allow", "allow", "ALLOW"],
    "disallow": ["Disallow", "disallow", "DISALLOW"],
}


@st.composite
def _lines(draw: st.DrawFn, space: st.SearchStrategy[str]) -> str:
    kind = draw(st.sampled_from(["user-agent", "allow", "disallow", "user-agent", "allow", "empty", "other"]))
    if kind == "empty":
        return draw(space) + draw(st.sampled_from(["", "# a comment", "#Disallow: /"]))
    if kind == "other":
        return draw(st.sampled_from(["Sitemap: http://h.test/s.xml", "Crawl-delay: 2", "Noindex: /a"]))
    value = draw(_agents if kind == "user-agent" else _paths)
    comment = draw(st.sampled_from(["", "#c", " # c\xa0"]))
    name = draw(st.sampled_from(_spellings[kind]))
    return draw(space) + name + draw(space) + ":" + draw(space) + value + draw(space) + comment


def _files(space: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    lines = st.lists(st.tuples(_lines(space), st.sampled_from(["\n", "\r\n", "\r"])), max_size=9)
    # A BOM, and half the time a first group forbidding everything that the lines go on.
    head = st.sampled_from(["", "\ufeff"]).flatmap(lambda b: st.sampled_from([b, b + "User-agent: *\nDisallow: /\n"]))
    return st.builds(lambda h, ls: (h + "".join(line + eol for line, eol in ls)).encode("utf-8"), head, lines)


def _targets(body: bytes) -> st.SearchStrategy[str]:
    """Targets near the file's own paths (a path, cut or extended), and unrelated ones."""
    named = [m.group(1) for m in re.finditer(r"(/[^\r\n#]*)", body.decode("utf-8"))]
    near = [re.sub(r"[*$]", "", p).strip(" \t") for p in named] or ["/"]
    return st.one_of(
        _paths,
        st.tuples(st.sampled_from(near), st.integers(0, 12), st.sampled_from(["", "b", "x/y", "\xa0"])).map(
            lambda t: (t[0][: t[1]] or "/") + t[2]
        ),
    )


def _never_allows_what_rfc_forbids(body: bytes, data: st.DataObject) -> None:
    rules = RobotsRules.parse(body, TOKEN)
    expected = rfc_rules(body)
    for target in data.draw(st.lists(_targets(body), min_size=1, max_size=6)):
        if rules.allowed(target):
            assert rfc_allows(expected, target), (body, target, expected)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_files(_rfc_ws), data=st.data())
def test_a_file_of_the_grammar_never_lets_through_what_rfc_9309_forbids(body: bytes, data: st.DataObject) -> None:
    """Files RFC 9309's grammar accepts as they are: a path may hold and end in U+00A0,
    U+3000, U+2028 (characters of a path-pattern); comments, CR/CRLF/LF mixed, a BOM."""
    _never_allows_what_rfc_forbids(body, data)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_files(_mostly_rfc_ws), data=st.data())
def test_other_whitespace_in_a_line_never_lets_through_what_rfc_9309_forbids(body: bytes, data: st.DataObject) -> None:
    """Where a space or a tab may stand, a character Python calls whitespace (form feed,
    U+00A0, U+3000, ...): to RFC 9309 the line is no record then."""
    _never_allows_what_rfc_forbids(body, data)


# Lines the lenient reading takes (as protego and Google do) and RFC 9309's grammar does not:
# no colon, a name with a space or misspelt, a pattern not starting with "/".
_LENIENT_ONLY = st.tuples(
    st.sampled_from(["Allow", "allow", "Disallow", "Dissallow", "Useragent:", "User agent:", "User-agent"]),
    st.sampled_from([" ", "\t", "  "]),
    st.sampled_from(["/a", "/", "/b*", "*a", "a", "beamcrawl", "*", "$"]),
).map("".join)


def _files_with_lenient_lines() -> st.SearchStrategy[bytes]:
    line = st.one_of(_lines(_rfc_ws), _LENIENT_ONLY)
    lines = st.lists(st.tuples(line, st.sampled_from(["\n", "\r\n"])), max_size=9)
    head = st.sampled_from(["", "User-agent: *\nDisallow: /\n", "User-agent: beamcrawl\nDisallow: /a\n"])
    return st.builds(lambda h, ls: (h + "".join(x + eol for x, eol in ls)).encode("utf-8"), head, lines)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_files_with_lenient_lines(), data=st.data())
def test_a_line_only_a_lenient_reader_takes_never_lets_through_what_rfc_9309_forbids(
    body: bytes, data: st.DataObject
) -> None:
    """``Allow /x`` without its colon, ``User agent: beamcrawl``, ``Allow: *a``: protego and
    Google take these, RFC 9309's grammar does not. Taken, an ``Allow`` so written let through
    what a reader of the RFC forbids; a ``User-agent`` so written moved the rules after it into
    another group. Each file is read both ways, and a target must be allowed by both."""
    _never_allows_what_rfc_forbids(body, data)


def test_a_lenient_only_allow_does_not_open_what_a_disallow_closes() -> None:
    for line, target in [("Allow /x", "/x"), ("Allow\t/x", "/x"), ("Allow: *foo", "/xfoo"), ("Allow: x", "/x")]:
        rules = RobotsRules.parse(f"User-agent: *\nDisallow: /\n{line}\n", TOKEN)
        assert not rules.allowed(target), line
    # What the lenient reading forbids still stands: a Disallow without its colon forbids.
    assert not RobotsRules.parse("User-agent: *\nDisallow /x\n", TOKEN).allowed("/x/y")


def test_the_longer_crawl_delay_of_the_two_readings_stands() -> None:
    """``User agent: beamcrawl`` (a space for the hyphen) is our group to a lenient reader,
    which finds no Crawl-delay in it; to RFC 9309's grammar it is no line, and the ``*``
    group's 10 s applies to us. A server reading the RFC expects 10 s between requests."""
    text = "User-agent: *\nDisallow: /x\nCrawl-delay: 10\n\nUser agent: beamcrawl\nDisallow: /private\n"
    assert RobotsRules.parse(text, TOKEN).crawl_delay() == 10
    text = "User-agent: *\nDisallow: /x\nCrawl-delay: 1\n\nUser agent: beamcrawl\nCrawl-delay: 7\nDisallow: /p\n"
    assert RobotsRules.parse(text, TOKEN).crawl_delay() == 7
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: 3\n", TOKEN).crawl_delay() == 3


def test_an_allow_ending_in_a_no_break_space_allows_only_that_path() -> None:
    """``Allow: /public\\xa0`` is the path-pattern ``/public`` + U+00A0 (§2.2: UTF8-2 is a
    path character, only SP and HTAB are whitespace): it must not widen into ``/public``."""
    rules = RobotsRules.parse("User-agent: *\nDisallow: /\nAllow: /public\xa0\n".encode(), TOKEN)
    assert not rules.allowed("/public/page")
    assert not rules.allowed("/public")
    assert rules.allowed("/public%C2%A0")


def test_a_disallow_ending_in_other_whitespace_still_forbids_its_stripped_path() -> None:
    """The lenient reading (Python's whitespace stripped) stands beside RFC 9309's: the
    stricter wins, so ``Disallow: /private\\x0c`` keeps /private/x out, as before."""
    for space in OTHER_SPACE:
        rules = RobotsRules.parse(f"User-agent: *\nDisallow: /private{space}\n", TOKEN)
        assert not rules.allowed("/private/x"), repr(space)


def test_no_character_python_strips_makes_an_allow_shorter() -> None:
    """Every character ``str.strip()`` takes but RFC 9309's space and tab: an ``Allow`` path
    ending in it allows that path only, never the stripped one's other targets."""
    python_space = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()} - set(" \t\r\n")
    assert len(python_space) > 20
    for space in sorted(python_space):
        rules = RobotsRules.parse(f"User-agent: *\nDisallow: /\nAllow: /a{space}\n", TOKEN)
        assert not rules.allowed("/ab"), repr(space)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_files(_rfc_ws), start=st.integers(0, 200), size=st.integers(0, 400), data=st.data())
def test_a_part_of_the_file_sent_as_206_never_lets_through_what_the_file_forbids(
    body: bytes, start: int, size: int, data: st.DataObject
) -> None:
    """206 Partial Content answers a range (RFC 9110 §15.3.7); the crawler asks for none, so
    a 206 carries some part of the file, from anywhere in it: not the file. Read as the file,
    a part from the start lost the rules after it, and a part from the middle began with
    any line at all."""
    rules = RobotsRules.from_fetch(206, body[start : start + size], TOKEN)
    expected = rfc_rules(body)
    for target in data.draw(st.lists(_targets(body), min_size=1, max_size=6)):
        if rules.allowed(target):
            assert rfc_allows(expected, target), (body[start : start + size], target, expected)
