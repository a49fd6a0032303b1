"""Tests for beamcrawl.core.policy.robots (RFC 9309 on top of protego)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protego import Protego

from beamcrawl.core.policy.robots_match import RuleMatcher, rule_matches
from beamcrawl.core.policy.robots import MAX_ROBOTS_BYTES, RobotsRules, is_robots_txt, product_token

TOKEN = "beamcrawl"


def allowed(robots: str | bytes, url: str, token: str = TOKEN) -> bool:
    return RobotsRules.parse(robots, token).allowed(url)


# --- RFC 9309's own examples -------------------------------------------------------------------

# RFC 9309 §5.1 "Simple Example".
RFC_SIMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


@pytest.mark.parametrize(
    ("token", "path", "expected"),
    [
        # "*": any crawler without a group of its own
        ("otherbot", "/", True),
        ("otherbot", "/image.gif", False),
        ("otherbot", "/a/b/image.gif", False),
        ("otherbot", "/image.gif?size=2", True),  # "$" anchors the end
        ("otherbot", "/example/", False),
        ("otherbot", "/example/page.html", False),
        ("otherbot", "/publications/", True),
        ("otherbot", "/publications/x.gif", True),  # Allow /publications/ is the longer match
        # foobot: everything disallowed except two pages
        ("foobot", "/", False),
        ("foobot", "/example/page.html", True),
        ("foobot", "/example/allowed.gif", True),
        ("foobot", "/example/other.html", False),
        ("FooBot", "/example/page.html", True),  # token matching is case-insensitive
        # barbot and bazbot share one group
        ("barbot", "/example/page.html", False),
        ("bazbot", "/example/page.html", False),
        ("barbot", "/example/other.html", True),
        ("bazbot", "/image.gif", True),  # their own group, not "*"
        # quxbot: an empty group allows everything, and "*" does not apply to it
        ("quxbot", "/example/page.html", True),
        ("quxbot", "/image.gif", True),
    ],
)
def test_rfc9309_simple_example(token: str, path: str, expected: bool) -> None:
    assert allowed(RFC_SIMPLE, path, token) is expected


def test_rfc9309_longest_match_example() -> None:
    # RFC 9309 §5.2.
    robots = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    assert allowed(robots, "/example/page/", "foobot")
    assert allowed(robots, "/example/page/x.html", "foobot")
    assert not allowed(robots, "/example/page/disallowed.gif", "foobot")


@pytest.mark.parametrize(
    ("pattern", "url", "expected_match"),
    [
        # RFC 9309 §2.2.2: percent-encoding is normalised on both sides
        ("/foo/bar?baz=quz", "https://example.com/foo/bar?baz=quz", True),
        ("/foo/bar/ツ", "https://example.com/foo/bar/%E3%83%84", True),
        ("/foo/bar/%E3%83%84", "https://example.com/foo/bar/%E3%83%84", True),
        ("/foo/bar/%62%61%7A", "https://example.com/foo/bar/baz", True),
        ("/foo/bar/%e3%83%84", "https://example.com/foo/bar/%E3%83%84", True),
        ("/%7Efoo", "https://example.com/~foo", True),
        ("/~foo", "https://example.com/%7efoo", True),
        # RFC 9309 §2.2.3: special characters matched literally when escaped
        ("/path/file-with-a-%2A.html", "https://www.example.com/path/file-with-a-*.html", True),
        ("/path/file-with-a-%2A.html", "https://www.example.com/path/file-with-a-x.html", False),
        ("/path/foo-%24", "https://www.example.com/path/foo-$", True),
        ("/this/path/exactly$", "https://example.com/this/path/exactly", True),
        ("/this/path/exactly$", "https://example.com/this/path/exactly/", False),
        ("/this/*/exactly", "https://example.com/this/any/thing/exactly", True),
        ("/this/*/exactly", "https://example.com/this/exactly", False),
        # an escaped "/" is not a "/"
        ("/a%2Fb", "https://example.com/a/b", False),
    ],
)
def test_rfc9309_pattern_matching(pattern: str, url: str, expected_match: bool) -> None:
    robots = f"User-agent: *\nDisallow: {pattern}\n"
    assert allowed(robots, url) is not expected_match
    assert rule_matches(pattern, "/" + url.split("/", 3)[3]) is expected_match  # RFC 9309's reading alone


def test_comments_are_ignored() -> None:
    # RFC 9309 §2.2.3's "#" examples.
    robots = "# comment on its own line\nUser-agent: * # the rest\nDisallow: /x # in line\n"
    assert not allowed(robots, "/x")
    assert allowed(robots, "/y")
    assert not allowed("User-agent: *\nDisallow: /a#b\n", "/a")


# --- Google's published matching examples ---------------------------------------------------

GOOGLE_PATH_EXAMPLES = {
    "/fish": (
        ["/fish", "/fish.html", "/fish/salmon.html", "/fishheads", "/fishheads/yummy.html",
         "/fish.php?id=anything"],
        ["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
    ),
    "/fish*": (
        ["/fish", "/fish.html", "/fish/salmon.html", "/fishheads", "/fishheads/yummy.html",
         "/fish.php?id=anything"],
        ["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
    ),
    "/fish/": (
        ["/fish/", "/fish/?id=anything", "/fish/salmon.htm"],
        ["/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"],
    ),
    "/*.php": (
        ["/index.php", "/filename.php", "/folder/filename.php",
         "/folder/filename.php?parameters", "/folder/any.php.file.html", "/filename.php/"],
        ["/", "/windows.PHP"],
    ),
    "/*.php$": (
        ["/filename.php", "/folder/filename.php"],
        ["/filename.php?parameters", "/filename.php/", "/filename.php5", "/windows.PHP"],
    ),
    "/fish*.php": (
        ["/fish.php", "/fishheads/catfish.php?parameters"],
        ["/Fish.PHP"],
    ),
    "/": (["/", "/anything/at/all"], []),
    "/*": (["/", "/anything/at/all"], []),
    "/$": (["/"], ["/page.html", "/?x"]),
}  # fmt: skip


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        (pattern, path, matches)
        for pattern, (yes, no) in GOOGLE_PATH_EXAMPLES.items()
        for path, matches in [(p, True) for p in yes] + [(p, False) for p in no]
    ],
)
def test_google_path_matching(pattern: str, path: str, matches: bool) -> None:
    assert allowed(f"User-agent: *\nDisallow: {pattern}\n", path) is not matches


@pytest.mark.parametrize(
    ("rules", "path", "expected"),
    [
        # Google's "order of precedence" table
        ("Allow: /p\nDisallow: /", "/page", True),
        ("Allow: /folder\nDisallow: /folder", "/folder/page", True),  # allow wins ties
        ("Disallow: /folder\nAllow: /folder", "/folder/page", True),  # whatever the order
        ("Allow: /page\nDisallow: /*.htm", "/page.htm", False),  # longer wins, wildcards count
        ("Allow: /page\nDisallow: /*.ph", "/page.php5", True),  # tie: allow
        ("Allow: /$\nDisallow: /", "/", True),
        ("Allow: /$\nDisallow: /", "/page.htm", False),
        # an empty Disallow allows everything
        ("Disallow:", "/anything", True),
        ("Disallow: \nAllow:", "/anything", True),
    ],
)
def test_precedence(rules: str, path: str, expected: bool) -> None:
    assert allowed(f"User-agent: *\n{rules}\n", path) is expected


# --- group selection ---------------------------------------------------------------------------


def test_own_group_beats_star_and_is_case_insensitive() -> None:
    robots = "User-agent: *\nDisallow: /\n\nUser-agent: BeamCrawl\nDisallow: /private\n"
    assert allowed(robots, "/public")
    assert not allowed(robots, "/private")
    assert not allowed(robots, "/public", "otherbot")


def test_empty_disallow_in_own_group_overrides_star() -> None:
    robots = "User-agent: beamcrawl\nDisallow:\n\nUser-agent: *\nDisallow: /\n"
    assert allowed(robots, "/anything")


def test_groups_for_the_same_agent_are_merged() -> None:
    # Google's example: both googlebot-news groups apply, the "*" one does not.
    robots = (
        "user-agent: googlebot-news\ndisallow: /fish\n\n"
        "user-agent: *\ndisallow: /carrots\n\n"
        "user-agent: googlebot-news\ndisallow: /shrimp\n"
    )
    assert not allowed(robots, "/fish", "googlebot-news")
    assert not allowed(robots, "/shrimp", "googlebot-news")
    assert allowed(robots, "/carrots", "googlebot-news")
    assert not allowed(robots, "/carrots")
    assert allowed(robots, "/fish")


def test_star_groups_are_merged() -> None:
    robots = "User-agent: *\nDisallow: /a\n\nUser-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /b\n"
    assert not allowed(robots, "/a")
    assert not allowed(robots, "/b")
    assert allowed(robots, "/c")


def test_no_matching_group_allows_everything() -> None:
    assert allowed("User-agent: otherbot\nDisallow: /\n", "/x")
    assert allowed("", "/x")
    assert allowed("Disallow: /\n", "/x")  # rules before any User-agent belong to no group


def test_sitemap_does_not_end_a_group() -> None:
    robots = "user-agent: a\nsitemap: https://example.com/sitemap.xml\nuser-agent: beamcrawl\ndisallow: /\n"
    assert not allowed(robots, "/x", "a")
    assert not allowed(robots, "/x")


# --- the fixes over protego (each test shows protego's own answer first) -------------------


def test_fix_unknown_record_does_not_split_a_group() -> None:
    robots = "User-agent: a\nNoindex: /secret\nUser-agent: beamcrawl\nDisallow: /\n"
    # protego ends the first group at the unknown line ...
    assert Protego.parse(robots).can_fetch("/x", "a") is True
    # ... RFC 9309 §2.2.4 says an unknown record must not interfere: both agents share the group.
    assert not allowed(robots, "/x", "a")
    assert not allowed(robots, "/x")


@pytest.mark.parametrize(
    "between",
    ["Request-rate: 1/5", "Visit-time: 0600-0845", "Host: example.com", "Clean-param: ref", "junk"],
)
def test_fix_other_records_do_not_split_a_group(between: str) -> None:
    robots = f"User-agent: a\n{between}\nUser-agent: b\nDisallow: /\n"
    assert not allowed(robots, "/x", "a")


def test_fix_crawl_delay_is_kept_but_does_not_split_a_group() -> None:
    robots = "User-agent: a\nCrawl-delay: 4\nUser-agent: beamcrawl\nDisallow: /x\n"
    assert Protego.parse(robots).can_fetch("/x", "a") is True  # protego splits here
    rules = RobotsRules.parse(robots, TOKEN)
    assert not rules.allowed("/x")
    assert rules.crawl_delay() == 4.0
    a_rules = RobotsRules.parse(robots, "a")
    assert not a_rules.allowed("/x")
    assert a_rules.crawl_delay() == 4.0


def test_crawl_delay_of_own_group_only() -> None:
    robots = (
        "User-agent: *\nDisallow: /y\nCrawl-delay: 9\n\n"
        "User-agent: beamcrawl\nDisallow: /x\nCrawl-delay: 2.5\n\n"
        "User-agent: other\nCrawl-delay: 30\n"
    )
    assert RobotsRules.parse(robots, TOKEN).crawl_delay() == 2.5
    assert RobotsRules.parse(robots, "someone").crawl_delay() == 9.0
    assert RobotsRules.parse(robots, "other").crawl_delay() == 30.0
    assert RobotsRules.parse("User-agent: *\nDisallow: /\n", TOKEN).crawl_delay() is None
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: soon\n", TOKEN).crawl_delay() is None
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: -1\n", TOKEN).crawl_delay() is None
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: inf\n", TOKEN).crawl_delay() is None
    assert RobotsRules.parse("Crawl-delay: 5\nUser-agent: *\n", TOKEN).crawl_delay() is None


def test_crawl_delay_largest_of_a_group() -> None:
    robots = "User-agent: beamcrawl\nCrawl-delay: 7\nDisallow: /x\nCrawl-delay: 3\nCrawl-delay: bad\n"
    assert Protego.parse(robots).crawl_delay(TOKEN) == 3.0  # protego keeps the last
    assert RobotsRules.parse(robots, TOKEN).crawl_delay() == 7.0


def test_crawl_delay_between_agents_joins_the_groups() -> None:
    # One group for "*" and beamcrawl (a Crawl-delay line does not end a group): the common
    # "User-agent: * / Crawl-delay: 10 / User-agent: X / Disallow: ..." file.
    robots = "User-agent: *\nCrawl-delay: 10\n\nUser-agent: beamcrawl\nDisallow: /x\nCrawl-delay: 2\n"
    rules = RobotsRules.parse(robots, TOKEN)
    assert not rules.allowed("/x")
    assert rules.crawl_delay() == 10.0
    # Reading groups this way never gives us fewer rules than protego's reading does:
    robots = "User-agent: beamcrawl\nCrawl-delay: 5\n\nUser-agent: *\nDisallow: /\n"
    assert Protego.parse(robots).can_fetch("/x", TOKEN) is True
    assert not allowed(robots, "/x")


def test_crawl_delay_held_to_the_end_of_file() -> None:
    robots = "User-agent: a\nCrawl-delay: 3\nUser-agent: beamcrawl\n"
    assert RobotsRules.parse(robots, TOKEN).crawl_delay() == 3.0


def test_fix_agent_name_must_equal_the_token() -> None:
    robots = "User-agent: beam\nDisallow: /\n"
    assert Protego.parse(robots).can_fetch("/x", TOKEN) is False  # "beam" inside "beamcrawl"
    assert allowed(robots, "/x")
    assert allowed("User-agent: crawl\nDisallow: /\n", "/x")
    assert allowed("User-agent: beamcrawler\nDisallow: /\n", "/x")
    assert allowed("User-agent: beamcrawl-news\nDisallow: /\n", "/x")


def test_fix_agent_value_is_read_as_its_product_token() -> None:
    robots = "User-agent: beamcrawl/1.0\nDisallow: /\n"
    assert Protego.parse(robots).can_fetch("/x", TOKEN) is True  # protego misses it
    assert not allowed(robots, "/x")
    assert not allowed("User-agent: BeamCrawl (+https://example.com)\nDisallow: /\n", "/x")


def test_star_needs_to_stand_alone() -> None:
    assert not allowed("User-agent: * # everyone\nDisallow: /\n", "/x")
    # "*crawl" is not a product token, so the group is no one's (Google reads it so too).
    assert allowed("User-agent: *crawl\nDisallow: /\n", "/x")


def test_fix_byte_order_mark() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n"
    assert Protego.parse(body.decode("utf-8")).can_fetch("/x", TOKEN) is True  # BOM hides it
    assert not allowed(body, "/x")
    assert not allowed(body.decode("utf-8"), "/x")


def test_fix_only_cr_and_lf_end_lines() -> None:
    robots = "User-agent: *\nDisallow: /a\x85Disallow: /b\n"
    assert Protego.parse(robots).can_fetch("/b", TOKEN) is False  # split at U+0085
    assert allowed(robots, "/b")
    assert not allowed(robots, "/a%C2%85Disallow:%20/b")


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings(eol: str) -> None:
    robots = eol.join(["User-agent: *", "Disallow: /a", "", "User-agent: beamcrawl", "Disallow: /b"])
    assert allowed(robots, "/a", "other") is False
    assert allowed(robots, "/b") is False
    assert allowed(robots, "/a") is True


@pytest.mark.parametrize(
    "line",
    [
        "user-agent: *",
        "USER-AGENT: *",
        "User agent: *",
        "Useragent: *",
        "User-agent *",
        "  User-Agent  :  *  ",
    ],
)
def test_lenient_user_agent_spellings(line: str) -> None:
    assert not allowed(f"{line}\nDisallow: /\n", "/x")


@pytest.mark.parametrize("line", ["Disallow: /x", "disallow:/x", "Dissallow: /x", "Disalow: /x", "Disallow /x"])
def test_lenient_disallow_spellings(line: str) -> None:
    assert not allowed(f"User-agent: *\n{line}\n", "/x")


# --- limits -------------------------------------------------------------------------------------


def _padded(before: str, after: str, pad_to: int) -> bytes:
    """A robots.txt whose ``after`` line starts exactly at byte ``pad_to``."""
    head = f"User-agent: *\n{before}\n".encode()
    filler_line = b"# " + b"x" * 97 + b"\n"
    body = head
    while len(body) + len(filler_line) <= pad_to:
        body += filler_line
    body += b"#" * (pad_to - len(body) - 1) + b"\n"
    assert len(body) == pad_to
    return body + f"{after}\n".encode()


def test_500_kib_cap() -> None:
    body = _padded("Disallow: /before", "Disallow: /after", MAX_ROBOTS_BYTES - 10)
    assert len(body) > MAX_ROBOTS_BYTES  # "Disallow: /after" straddles the limit
    rules = RobotsRules.parse(body, TOKEN)
    assert not rules.allowed("/before")
    assert rules.allowed("/after")  # a cut line is not a rule, not even a shorter one
    assert len(rules.text or "") <= MAX_ROBOTS_BYTES

    body = _padded("Disallow: /before", "Disallow: /after", MAX_ROBOTS_BYTES + 1000)
    rules = RobotsRules.parse(body, TOKEN)
    assert not rules.allowed("/before")
    assert rules.allowed("/after")


def test_500_kib_cap_keeps_a_line_ending_at_the_limit() -> None:
    line = b"Disallow: /last"
    body = _padded("Disallow: /before", "", MAX_ROBOTS_BYTES - len(line))[:-1] + line
    assert len(body) == MAX_ROBOTS_BYTES
    assert not RobotsRules.parse(body + b"\nDisallow: /later\n", TOKEN).allowed("/last")
    assert not RobotsRules.parse(body + b"\r\n", TOKEN).allowed("/last")
    assert RobotsRules.parse(body + b"x\n", TOKEN).allowed("/last")  # /lastx was cut


def test_a_cut_long_allow_does_not_widen() -> None:
    long_allow = "Allow: /public/" + "p" * 2000
    body = _padded("Disallow: /", long_allow, MAX_ROBOTS_BYTES - 100)
    rules = RobotsRules.parse(body, TOKEN)
    assert not rules.allowed("/public/ppp")


def test_multi_byte_characters_at_the_cut_do_not_raise() -> None:
    body = b"User-agent: *\nDisallow: /x\n" + "é".encode() * MAX_ROBOTS_BYTES
    rules = RobotsRules.parse(body, TOKEN)
    assert not rules.allowed("/x")


def test_invalid_utf8_is_replaced() -> None:
    body = b"User-agent: *\nDisallow: /caf\xe9\nDisallow: /x\n"
    rules = RobotsRules.parse(body, TOKEN)
    assert not rules.allowed("/x")
    assert "\ufffd" in (rules.text or "")


# --- fetch outcomes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, "parsed"),
        (203, "parsed"),
        (206, "disallow_all"),  # a part of the file (a range never asked for) is not the file
        (301, "allow_all"),  # unresolved after the redirect limit: "unavailable"
        (400, "allow_all"),
        (401, "allow_all"),
        (403, "allow_all"),
        (404, "allow_all"),
        (410, "allow_all"),
        (429, "disallow_all"),  # rate limiting is a server condition, as for Google
        (500, "disallow_all"),
        (503, "disallow_all"),
        (599, "disallow_all"),
        (None, "disallow_all"),
        (100, "disallow_all"),
        (999, "disallow_all"),
    ],
)
def test_from_fetch_kinds(status: int | None, kind: str) -> None:
    rules = RobotsRules.from_fetch(status, b"User-agent: *\nDisallow: /\n", TOKEN)
    assert rules.kind == kind
    assert rules.disallow_all is (kind == "disallow_all")
    assert rules.allowed("/page") is (kind == "allow_all")
    assert rules.allowed("/robots.txt")
    assert rules.status == status


def test_unavailable_allows_everything() -> None:
    rules = RobotsRules.from_fetch(404, b"<html>Not found</html>", TOKEN)
    assert rules.allowed("https://example.com/anything?x=1")
    assert rules.crawl_delay() is None
    assert rules.sitemaps() == []


def test_unreachable_disallows_everything_but_robots_txt() -> None:
    for rules in (
        RobotsRules.from_fetch(None, None, TOKEN),
        RobotsRules.from_fetch(503, b"", TOKEN),
    ):
        assert rules.disallow_all
        assert not rules.allowed("https://example.com/")
        assert not rules.allowed("/index.html")
        assert rules.allowed("https://example.com/robots.txt")
        assert rules.crawl_delay() is None
        assert rules.sitemaps() == []


def test_2xx_without_body_allows_everything() -> None:
    rules = RobotsRules.from_fetch(200, None, TOKEN)
    assert rules.kind == "parsed"
    assert rules.allowed("/x")


def test_robots_txt_is_always_allowed() -> None:
    robots = "User-agent: *\nDisallow: /\nDisallow: /robots.txt\n"
    assert allowed(robots, "/robots.txt")
    assert allowed(robots, "https://example.com/robots.txt")
    assert not allowed(robots, "/robots.txt.bak")
    assert not allowed(robots, "/dir/robots.txt")


@settings(max_examples=200, deadline=None)
@given(query=st.text(alphabet="ab=&%2F?#/", max_size=8))
def test_robots_txt_with_a_query_is_another_target(query) -> None:
    """§2.2.2 allows the URI ``/robots.txt``; ``/robots.txt?…`` is another request target (a
    link can lead there), which the rules decide. Before, any query was let through."""
    url = f"https://example.com/robots.txt?{query}"
    assert not is_robots_txt(url) and is_robots_txt(f"https://example.com/robots.txt#{query}")
    assert not allowed("User-agent: *\nDisallow: /\n", url)
    assert not allowed("User-agent: *\nDisallow: /robots.txt?\n", url)
    assert allowed("User-agent: *\nDisallow: /robots.txt?\n", "https://example.com/robots.txt")
    assert not RobotsRules.from_fetch(503, b"", TOKEN).allowed(url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com/private/x", False),
        ("https://example.com:8443/private/x", False),
        ("https://example.com?q=1", True),
        ("https://example.com", True),
        ("/private/x", False),
        ("private/x", False),  # a bare relative path is read from the root
        ("/public#/private", True),
        ("//private/x", True),  # a path starting with "//" is not an authority here
    ],
)
def test_url_or_path_forms(url: str, expected: bool) -> None:
    assert allowed("User-agent: *\nDisallow: /private\nDisallow: //private/y\n", url) is expected


# --- sitemaps and serialisation ----------------------------------------------------------------


def test_sitemaps() -> None:
    robots = (
        "Sitemap: https://example.com/a.xml\n"
        "User-agent: other\nDisallow: /\n"
        "sitemap: https://example.com/b.xml # comment\n"
        "Sitemap: https://example.com/a.xml\n"
    )
    assert RobotsRules.parse(robots, TOKEN).sitemaps() == [
        "https://example.com/a.xml",
        "https://example.com/b.xml",
    ]


@pytest.mark.parametrize(
    "rules",
    [
        RobotsRules.parse("User-agent: *\nDisallow: /x\nSitemap: https://e.com/s.xml\n", TOKEN),
        RobotsRules.from_fetch(404, b"", TOKEN),
        RobotsRules.from_fetch(None, None, TOKEN),
        RobotsRules.from_fetch(200, "\ufeffUser-agent: *\nDisallow: /y\n".encode(), TOKEN),
    ],
)
def test_dict_round_trip(rules: RobotsRules) -> None:
    data = json.loads(json.dumps(rules.to_dict()))
    again = RobotsRules.from_dict(data)
    assert again == rules
    assert again.kind == rules.kind
    for path in ("/x", "/y", "/z", "/robots.txt"):
        assert again.allowed(path) == rules.allowed(path)
    assert again.sitemaps() == rules.sitemaps()


def test_to_dict_shape() -> None:
    assert RobotsRules.from_fetch(404, b"x", TOKEN).to_dict() == {
        "kind": "allow_all",
        "token": TOKEN,
        "status": 404,
    }
    data = RobotsRules.parse(b"User-agent: *\n", TOKEN).to_dict()
    assert data["kind"] == "parsed"
    assert data["text"] == "User-agent: *\n"


def test_token_validation() -> None:
    assert product_token(" BeamCrawl ") == "beamcrawl"
    assert product_token("my_bot-2") == "my_bot-2"
    for bad in ["", "beamcrawl/1.0", "Mozilla/5.0 (compatible; beamcrawl)", "two words", "*"]:
        with pytest.raises(ValueError, match="product token"):
            product_token(bad)
        with pytest.raises(ValueError):
            RobotsRules.parse("", bad)
    with pytest.raises(ValueError, match="kind"):
        RobotsRules("maybe", TOKEN)  # type: ignore[arg-type]


# --- protego's deviations, gone since the rules are matched by robots_match.py -----------------


def test_an_anchored_rule_does_not_also_match_a_literal_dollar() -> None:
    # "Allow: /foo$" allows only "/foo"; protego also allowed "/foo$bar".
    assert not allowed("User-agent: *\nDisallow: /\nAllow: /foo$\n", "/foo$bar")


def test_escaped_reserved_characters_are_not_the_characters() -> None:
    # RFC 9309 §2.2.2 keeps reserved characters encoded: "&" and "%26" differ. protego's
    # reading takes them for one, and forbids; the stricter reading stands
    # (tests/core/policy/test_robots_match.py).
    assert RuleMatcher([(False, "/a?x=1&y")]).allowed("/a?x=1%26y")
    assert not allowed("User-agent: *\nDisallow: /a?x=1&y\n", "/a?x=1%26y")


# --- robustness --------------------------------------------------------------------------------

_REAL = RFC_SIMPLE.encode() + (
    b"User-agent: beamcrawl\r\nCrawl-delay: 2\r\nDisallow: /private/*.php$\r\n"
    b"Allow: /private/ok\r\nSitemap: https://example.com/s.xml\r\n"
)

_line = st.one_of(
    st.sampled_from(
        [
            "User-agent: *", "User-agent: beamcrawl", "User agent beamcrawl/2", "user-agent:",
            "Disallow: /", "Disallow:", "Allow: /a*b$", "Disallow: *", "Disallow: $",
            "Allow: /%", "Allow: /%zz", "Disallow: /%E3%83", "Crawl-delay: 1e999",
            "Crawl-delay: nan", "Sitemap:", "Disallow: /\x00", "# c", "\ufeff", ":",
            "Disallow: /\x85x", "Allow: /\u2028",
        ]
    ),
    st.text(max_size=30),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=400), url=st.text(max_size=30))
def test_random_bytes_never_raise(body: bytes, url: str) -> None:
    rules = RobotsRules.from_fetch(200, body, TOKEN)
    rules.allowed(url)
    rules.allowed(f"https://example.com/{url}")
    rules.crawl_delay()
    rules.sitemaps()
    assert RobotsRules.from_dict(rules.to_dict()) == rules


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(_REAL)), url=st.text(max_size=20))
def test_truncated_files_never_raise(cut: int, url: str) -> None:
    rules = RobotsRules.parse(_REAL[:cut], TOKEN)
    rules.allowed("/" + url)
    rules.crawl_delay()
    rules.sitemaps()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, max_size=12),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    url=st.text(max_size=20),
)
def test_random_robots_text_never_raises(lines: list[str], eol: str, url: str) -> None:
    rules = RobotsRules.parse(eol.join(lines), TOKEN)
    assert rules.allowed("/robots.txt")
    rules.allowed(url)
    rules.allowed("/" + url)
    delay = rules.crawl_delay()
    assert delay is None or delay >= 0
    rules.sitemaps()
