"""robots.txt rules matched as RFC 9309 §2.2.2 says (core/policy/robots_match.py).

The matcher is checked against an oracle written another way: the same normal form built
from ``urllib.parse`` and regular expressions, and every rule tried with a backtracking regex,
the most octets winning. A whole file allows what both that reading and protego's allow. And
the crawler agrees with the simweb audit's reference rules (the server's side) on the plain
ASCII both read the same way.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections import Counter
from collections.abc import Iterator
from unittest import mock
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protego import Protego
from protego._urlpattern import _URLPattern

from beamcrawl.core.policy import robots, robots_match
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.policy.robots_match import RuleMatcher, match_form
from beamcrawl.simweb.audit import ReferenceRobotsRules

_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _oracle_form(text: str) -> str:
    text = re.sub(r"%(?![0-9A-Fa-f]{2})", "%25", text)
    text = re.sub(
        r"%([0-9A-Fa-f]{2})",
        lambda m: chr(int(m[1], 16)) if chr(int(m[1], 16)) in _UNRESERVED else f"%{m[1].upper()}",
        text,
    )
    return quote(text, safe=":/?#[]@!&'()+,;=%")


def _oracle(rules: list[tuple[bool, str]], target: str) -> bool:
    form = _oracle_form(target)
    best: tuple[int, bool] | None = None
    for allow, path in rules:
        if not path:
            continue
        anchored = path.endswith("$")
        runs = [_oracle_form(run) for run in (path[:-1] if anchored else path).split("*")]
        regex = ".*".join(map(re.escape, runs)) + ("$" if anchored else "")
        if re.match(regex, form, re.DOTALL):
            octets = len("*".join(runs)) + anchored
            if best is None or (octets, allow) > best:
                best = (octets, allow)
    return True if best is None else best[1]


# Characters that matter to the matching: the two specials, reserved ones and their escapes
# in both cases, escaped unreserved ones, a lone "%", a space, non-ASCII.
_PIECES = ["a", "b", "/", "?", "=", "&", "*", "$", ".", "~", "%3F", "%3f", "%26", "%3D", "%2A", "%24", "%7E"]
_PIECES += ["%7e", "%61", "%2F", "%", "%zz", " ", "ä", "%C3%A4", "%c3%a4", "|", "{"]
_text = st.lists(st.sampled_from(_PIECES), max_size=7).map("".join)
_rules = st.lists(st.tuples(st.booleans(), _text.map(lambda t: "/" + t) | _text), min_size=1, max_size=5)


@settings(max_examples=2000, deadline=None)
@given(rules=_rules, target=_text.map(lambda t: "/" + t))
def test_the_matcher_decides_as_the_oracle(rules, target):
    assert RuleMatcher(rules).allowed(target) == _oracle(rules, target)


@settings(max_examples=500, deadline=None)
@given(rules=_rules, target=_text.map(lambda t: "/" + t))
def test_a_file_allows_what_both_readings_allow(rules, target):
    """Through the whole reading of a file (our group, the values stripped): a target is
    fetched when RFC 9309's reading (the oracle) and protego's both allow it, and only then.
    The lines are also read as the RFC's grammar is written, where a pattern starts with
    ``/``: there a rule that does not is no rule, and that reading must allow the target too."""
    rules = [(allow, path.strip()) for allow, path in rules]
    text = "User-agent: other\nDisallow: /\n\nUser-agent: *\n"
    text += "".join(f"{'Allow' if allow else 'Disallow'}: {path}\n" for allow, path in rules)
    url = f"http://h.test{target}"
    grammar = [(allow, path) for allow, path in rules if not path or path.startswith("/")]
    both = _oracle(rules, target) and _oracle(grammar, target) and Protego.parse(text).can_fetch(url, "beamcrawl")
    assert RobotsRules.parse(text, "beamcrawl").allowed(url) == both


_ascii = st.lists(st.sampled_from(list("ab/?=&.-_")), max_size=7).map("".join)


@settings(max_examples=1000, deadline=None)
@given(
    rules=st.lists(
        st.tuples(st.booleans(), st.lists(st.sampled_from(list("ab/?=&.-_*$")), max_size=6).map("".join)),
        min_size=1,
        max_size=4,
    ),
    target=_ascii.map(lambda t: "/" + t),
)
def test_the_crawler_and_the_audit_agree(rules, target):
    """On plain ASCII, RFC 9309's reading allows exactly what the server-side audit allows,
    and the crawler never allows what the audit forbids (it also asks protego, which may be
    stricter)."""
    text = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: /{p}\n" for a, p in rules)
    audit = ReferenceRobotsRules.parse(text, "beamcrawl").allowed(target)
    assert RuleMatcher((a, f"/{p}") for a, p in rules).allowed(target) == audit
    ours = RobotsRules.parse(text, "beamcrawl").allowed(f"http://h.test{target}")
    assert not ours or audit


def _matcher(robots: str) -> RuleMatcher:
    lines = [line.split(": ", 1) for line in robots.splitlines()]
    return RuleMatcher((field == "Allow", path) for field, path in lines)


@pytest.mark.parametrize(
    ("robots", "target", "expected"),
    [
        # An Allow with a "?" or "&" counted its escapes (4, 6 octets) and beat a longer Disallow.
        ("Disallow: /*/\nAllow: /?", "/?/baa", False),
        ("Disallow: /***\nAllow: /&", "/&-=&=.?", False),
        ("Disallow: /**\nAllow: /?", "/?/", False),
        ("Disallow: /*x\nAllow: /?", "/?x", False),
        # "?" and "%3F" are different characters: Allow: /a? does not reach /a%3Fb.
        ("Disallow: /a\nAllow: /a?", "/a%3Fb", False),
        ("Disallow: /a\nAllow: /a?", "/a?b", True),
        ("Disallow: /p%3Fq", "/p?q", True),
        ("Disallow: /p%3Fq", "/p%3fq", False),
        ("Disallow: /p?q", "/p%3Fq", True),
        ("Disallow: /a?x=1&y", "/a?x=1%26y", True),
        # A "$" inside a rule is a "$"; a final one anchors, and is no "$" of the target.
        # (RFC 9309's own examples, escapes among them, are test_robots_rules.py's table.)
        ("Disallow: /a$b", "/a$b", False),
        ("Disallow: /a$", "/a$", True),
        ("Allow: /a$\nDisallow: /", "/a?", False),
        ("Allow: /a$\nDisallow: /", "/a$b", False),
        # A rule written twice is kept once, where it first decides: the Allow, before an
        # as long Disallow (which the Disallow written again must not move ahead of it).
        ("Allow: /a\nDisallow: /*\nDisallow: /a", "/a", True),
        ("Disallow: /*\nDisallow: /a\nAllow: /a\nAllow: /*", "/a", True),
    ],
)
def test_rfc_9309s_reading(robots, target, expected):
    assert _matcher(robots).allowed(target) is expected


@pytest.mark.parametrize(
    ("robots", "target"),
    [
        # RFC 9309's reading allows each; protego's forbids it, and the stricter stands.
        ("Disallow: /p%3Fq", "/p?q"),
        ("Disallow: /p?q", "/p%3Fq"),
        ("Disallow: /a?x=1&y", "/a?x=1%26y"),
        ("Disallow: /a$", "/a$"),
        # a Disallow with reserved characters outweighing a longer Allow, in protego's counting
        ("Allow: /a*bcd\nDisallow: /a?&", "/a?&bcd"),
    ],
)
def test_where_the_readings_differ_the_stricter_stands(robots, target):
    assert _matcher(robots).allowed(target)
    assert not RobotsRules.parse(f"User-agent: *\n{robots}\n", "beamcrawl").allowed(target)


@pytest.mark.parametrize(
    ("robots", "target"),
    [
        ("Disallow: /*/\nAllow: /?", "/?/baa"),
        ("Disallow: /*x\nAllow: /?", "/?x"),
        ("Disallow: /a\nAllow: /a?", "/a%3Fb"),
        ("Disallow: /", "/robots.txt?x=1"),
    ],
)
def test_what_protego_alone_let_through_is_forbidden(robots, target):
    assert Protego.parse(f"User-agent: *\n{robots}\n").can_fetch(f"http://h.test{target}", "beamcrawl")
    assert not RobotsRules.parse(f"User-agent: *\n{robots}\n", "beamcrawl").allowed(target)


def test_the_normal_form():
    assert match_form("/%7ejoe/%2f/%3f?q=%3d&x") == "/~joe/%2F/%3F?q=%3D&x"
    assert match_form("/a b/ä/|/%/%g1/*$") == "/a%20b/%C3%A4/%7C/%25/%25g1/%2A%24"
    assert match_form("/plain/path?q=1&b=2") == "/plain/path?q=1&b=2"


def test_a_hostile_pattern_costs_its_length_times_the_target():
    """Thousands of stars against a long target: no backtracking (a regex with nested
    ``.*`` would take exponential time on the anchored case)."""
    matcher = RuleMatcher([(False, "/" + "a*" * 2000 + "b$")])
    assert matcher.allowed("/" + "a" * 5000)
    assert not matcher.allowed("/" + "a" * 2000 + "b")


@contextlib.contextmanager
def _sieve_all() -> Iterator[None]:
    """Every group sieved, however few its rules, so small drawn groups test the sieve."""
    with mock.patch.object(robots_match, "SIEVE_FROM", 0), mock.patch.object(robots, "SIEVE_FROM", 0):
        yield


@settings(max_examples=2000, deadline=None)
@given(rules=_rules, target=_text.map(lambda t: "/" + t))
def test_a_sieved_matcher_decides_as_the_oracle(rules, target):
    with _sieve_all():
        matcher = RuleMatcher(rules)
    assert matcher._sieve is not None
    assert matcher.allowed(target) == _oracle(rules, target)


@settings(max_examples=500, deadline=None)
@given(rules=_rules, target=_text.map(lambda t: "/" + t))
def test_a_sieved_file_allows_what_both_readings_allow(rules, target):
    text = "User-agent: *\n" + "".join(f"{'Allow' if allow else 'Disallow'}: {path.strip()}\n" for allow, path in rules)
    url = f"http://h.test{target}"
    with _sieve_all():
        parsed = RobotsRules.parse(text, "beamcrawl")
        answer = parsed.allowed(url)
        asked = parsed._protego_asked()
    protego = Protego.parse(text).can_fetch(url, "beamcrawl")
    assert isinstance(asked, robots._SievedProtego) or not any(path.strip() for _, path in rules)
    assert asked.can_fetch(url, "beamcrawl") == protego
    rfc = _oracle([(a, p.strip()) for a, p in rules], target)
    grammar = [(a, p.strip()) for a, p in rules if not p.strip() or p.strip().startswith("/")]
    assert answer == (rfc and _oracle(grammar, target) and protego)


@contextlib.contextmanager
def _tries() -> Iterator[Counter[str]]:
    """How many rules were tried, ours and protego's."""
    tries: Counter[str] = Counter()
    ours, protegos = robots_match._Rule.matches, _URLPattern.match

    def count_ours(rule, target):
        tries["ours"] += 1
        return ours(rule, target)

    def count_protegos(pattern, url):
        tries["protego"] += 1
        return protegos(pattern, url)

    with (
        mock.patch.object(robots_match._Rule, "matches", count_ours),
        mock.patch.object(_URLPattern, "match", count_protegos),
    ):
        yield tries


@settings(max_examples=10, deadline=None)
@given(
    count=st.integers(2_000, 6_000),
    shape=st.sampled_from(["/*x{i}", "/*x{i}$", "/a*b{i}*c", "/{i}*y", "/*%7e{i}", "/*?q={i}&"]),
    filler=st.sampled_from(["a", "ab/", "x", "x1", "%41", "ä"]),
    hit=st.booleans(),
)
def test_a_group_of_thousands_of_rules_tries_only_those_a_target_could_match(count, shape, filler, hit):
    # Each rule was tried in turn, by us and by protego: 27,000 "Disallow: /*x{i}" (500 KB,
    # a size RFC 9309 says to parse) read a 2 KB target 54,000 times, ~150 ms a check on the
    # fetch loop. The sieve gives each target the few rules holding a piece it holds.
    rules = [shape.format(i=i) for i in range(count)]
    text = "User-agent: *\n" + "".join(f"Disallow: {rule}\n" for rule in rules) + "Allow: /\n"
    parsed = RobotsRules.parse(text, "beamcrawl")
    target = "/" + filler * (2000 // len(filler))
    if hit:
        target += shape.format(i=count // 2).replace("*", "-").rstrip("$")
    url = f"http://h.test{target}"
    expected = _oracle([(False, rule) for rule in rules] + [(True, "/")], target)
    expected = expected and Protego.parse(text).can_fetch(url, "beamcrawl")
    assert parsed.allowed(url) == expected  # built: the tries below are the check's own
    with _tries() as tries:
        assert parsed.allowed(url) == expected
    assert tries["ours"] <= 200 and tries["protego"] <= 200, tries


# Groups of many rules drawn from few pieces: repeats, shared pieces, "$", several "*".
_piece = st.sampled_from(["a", "b", "ab", "ba", "?", "=", "%61", "%3F", "ä", "/"])
_pattern = (
    st.lists(_piece, min_size=1, max_size=4)
    .flatmap(
        lambda pieces: st.tuples(
            st.just(pieces),
            st.lists(st.sampled_from(["", "*", "**"]), min_size=len(pieces), max_size=len(pieces)),
            st.booleans(),
        )
    )
    .map(lambda t: "/" + "".join(star + piece for piece, star in zip(t[0], t[1])) + ("$" if t[2] else ""))
)


@settings(max_examples=300, deadline=None)
@given(
    rules=st.lists(st.tuples(st.booleans(), _pattern), min_size=1, max_size=60),
    target=st.lists(_piece, max_size=12).map(lambda t: "/" + "".join(t)),
)
def test_a_group_of_many_repeated_and_anchored_rules_decides_as_the_oracle(rules, target):
    """Sieved or not: rules written again are kept once, an anchored rule filed under its
    last run, a rule under its first: the answers are the oracle's, none of them capped."""
    with _sieve_all():
        sieved = RuleMatcher(rules)
    plain = RuleMatcher(rules)
    expected = _oracle(rules, target)
    assert sieved.allowed(target) == expected
    assert plain.allowed(target) == expected
    assert sieved.capped == plain.capped == 0


def _searched(rules: list[tuple[bool, str]], target: str) -> bool:
    """:func:`_oracle`, each rule's runs searched leftmost in turn instead of by a regex (which
    backtracks for minutes on thousands of ``/.*x.*y.*z`` against 2 KB), every rule tried."""
    form = _oracle_form(target)
    best: tuple[int, bool] | None = None
    for allow, path in rules:
        anchored = path.endswith("$")
        runs = [_oracle_form(run) for run in (path[:-1] if anchored else path).split("*")]
        pos = len(runs[0]) if form.startswith(runs[0]) else -1
        for run in runs[1:-1] if len(runs) > 1 else ():
            found = form.find(run, pos) if pos >= 0 else -1
            pos = found + len(run) if found >= 0 else -1
        if pos >= 0 and len(runs) > 1:
            last = runs[-1]
            end = len(form) - len(last)
            pos = pos if (end >= pos and form.endswith(last)) or (not anchored and form.find(last, pos) >= 0) else -1
        elif pos >= 0 and anchored:
            pos = pos if form == runs[0] else -1
        if pos >= 0:
            octets = len("*".join(runs)) + anchored
            if best is None or (octets, allow) > best:
                best = (octets, allow)
    return True if best is None else best[1]


@st.composite
def _hostile(draw):
    """A group of thousands of distinct rules whose pieces are all in the target, most in
    an order none matches: ``/*x*y`` with every ``x`` after every ``y``, anchored ones,
    three pieces with the last before the others, pieces written as escapes, hundreds of
    ``*`` a rule, and one rule written again and again."""
    first = draw(st.text("abcdefgh", min_size=300, max_size=1000))
    second = draw(st.text("ijklmnop", min_size=300, max_size=1000))
    target = "/" + first + second
    size = draw(st.integers(1, 4))
    early = sorted({first[i : i + size] for i in range(len(first) - size + 1)})
    late = sorted({second[i : i + size] for i in range(len(second) - size + 1)})
    shape = draw(st.sampled_from(["x*y", "x*y$", "u*v$", "x*y*z", "%x*y", "stars", "repeated"]))
    count = draw(st.integers(2_000, 6_000))
    pairs = list(itertools.islice(itertools.product(late, early), count))
    enc = lambda s: "".join(f"%{ord(c):02x}" for c in s)  # noqa: E731
    if shape == "x*y":
        rules = [f"/*{x}*{y}" for x, y in pairs]
    elif shape == "x*y$":
        rules = [f"/*{x}*{y}$" for x, y in pairs]
    elif shape == "u*v$":  # the last run in the target, not at its end
        rules = [f"/*{y}*{x}$" for x, y in pairs]
    elif shape == "x*y*z":
        rules = [f"/*{y}*{x}*{y[::-1]}{x}" for x, y in pairs]
    elif shape == "%x*y":
        rules = [f"/*{enc(x)}*{enc(y)}" for x, y in pairs]
    elif shape == "stars":
        rules = ["/" + "*a" * (1 + i % 100) + "*i" * (1 + i // 100) + f"*{early[0]}$" for i in range(count // 8)]
    else:
        rules = [f"/*{early[0]}*{late[0]}$"] * count
    return rules, target


@settings(max_examples=12, deadline=None)
@given(hostile=_hostile(), allow_last=st.booleans())
def test_no_group_of_rules_makes_a_check_cost_more_than_its_bound(hostile, allow_last):
    """Whatever the group: a check tries at most as many rules as its bound has steps, ours
    and protego's, and answers as the oracle does, or "disallowed" where it reached the
    bound, counted. Each hostile rule was tried in turn, by us and by protego: 13,530
    ``Disallow: /*u*v$`` (284 KB) took 29 ms a check on a 671-character target, and a
    2 KB target with 25,600 ``Disallow: /*x*y`` in the wrong order 126 ms."""
    rules, target = hostile
    rules = [(False, rule) for rule in rules] + [(allow_last, "/")]
    text = "User-agent: *\n" + "".join(f"{'Allow' if a else 'Disallow'}: {p}\n" for a, p in rules)
    assert len(text) <= robots.MAX_ROBOTS_BYTES
    parsed = RobotsRules.parse(text, "beamcrawl")
    url = f"http://h.test{target}"
    parsed.allowed(url)  # built: the tries below are the check's own
    bound = (robots_match.CHECK_WORK + len(target)) // 2 + 1  # a rule tried is two steps or more
    with _tries() as tries:
        answer = parsed.allowed(url)
    assert tries["ours"] <= bound and tries["protego"] <= bound, tries
    capped = parsed.checks_capped
    if capped:
        assert not answer
    else:
        expected = _searched(rules, target) and Protego.parse(text).can_fetch(url, "beamcrawl")
        assert answer == expected


def test_the_named_case_is_answered_as_before_without_trying_each_rule():
    """13,530 ``Disallow: /*u*v$`` (284 KB): each ``u`` and ``v`` in a 671-character target,
    no ``v`` at its end. Allowed, as before, from the few rules whose last run ends it."""
    first = "".join(map("".join, itertools.product("abcdefghijklm", repeat=3)))[:335]
    second = "".join(map("".join, itertools.product("nopqrstuvwxyz", repeat=3)))[:335]
    target = "/" + first + second
    us = [second[i : i + 3] for i in range(0, len(second) - 3, 3)]
    vs = [first[i : i + 3] for i in range(0, len(first) - 3, 3)]
    text = "User-agent: *\n" + "".join(f"Disallow: /*{u}*{v}$\n" for v, u in itertools.product(vs, us))
    parsed = RobotsRules.parse(text, "beamcrawl")
    url = f"http://h.test{target}"
    assert parsed.allowed(url)
    with _tries() as tries:
        assert parsed.allowed(url)
    assert tries["ours"] <= 200 and tries["protego"] <= 200, tries
    assert parsed.checks_capped == 0


@pytest.mark.parametrize(
    "lines",
    [
        "Allow: /a\nDisallow: /*\nDisallow: /a",
        "Disallow: /*\nDisallow: /a\nAllow: /a\nAllow: /*",
        "Disallow: /a\nAllow: /*\nAllow: /a\nDisallow: /*",
    ],
)
@pytest.mark.parametrize("target", ["/a", "/b", "/ab"])
def test_rules_written_again_decide_as_once(lines, target):
    """Ours and protego's sieved rules, each rule kept once where it first decides."""
    text = f"User-agent: *\n{lines}\n"
    url = f"http://h.test{target}"
    with _sieve_all():
        parsed = RobotsRules.parse(text, "beamcrawl")
        asked = parsed._protego_asked()
        matcher = _matcher(lines)
    assert isinstance(asked, robots._SievedProtego)
    assert asked.can_fetch(url, "beamcrawl") == Protego.parse(text).can_fetch(url, "beamcrawl")
    rules = [(line.startswith("Allow"), line.split(": ", 1)[1]) for line in lines.splitlines()]
    assert matcher.allowed(target) == _oracle(rules, target)


def test_a_check_past_its_bound_answers_disallowed_and_is_counted():
    """25,600 ``Disallow: /*x*y``, every ``x`` after every ``y``: no rule matches, and no
    index tells which without trying them; the check stops at its bound, polite."""
    first = "".join(map("".join, itertools.product("abcdefghijklm", repeat=3)))[:1000]
    second = "".join(map("".join, itertools.product("nopqrstuvwxyz", repeat=3)))[:1000]
    target = "/" + first + second
    xs = [second[i : i + 3] for i in range(0, 999, 3)]
    ys = [first[i : i + 3] for i in range(0, 999, 3)]
    rules = [f"/*{x}*{y}" for y, x in itertools.islice(itertools.product(ys, xs), 20_000)]
    matcher = RuleMatcher((False, rule) for rule in rules)
    assert not matcher.allowed(target)
    assert matcher.capped == 1
    assert matcher.steps <= robots_match.check_work(target) + len(target) + 1
    assert _oracle([(False, rule) for rule in rules[:50]], target)  # none of them matches
