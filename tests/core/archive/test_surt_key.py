"""The short way to a SURT key gives the surt library's key whenever it answers, and answers
for the URLs the crawler archives (``core/archive/surt_key.py``)."""

from __future__ import annotations

import re

import pytest
import surt
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beamcrawl.core.archive import surt_key as sk
from beamcrawl.core.urls.urlnorm import normalize

# Pieces inside the short grammar and just outside it: uppercase, '%', parentheses, spaces,
# empty and dot segments, default and odd ports, www labels, session ids, '=' and '&' in
# every position.
_LABEL = st.one_of(
    st.from_regex(r"[a-z0-9_-]{1,8}", fullmatch=True),
    st.sampled_from(["www", "www2", "WWW", "xn--bcher-kva", "a", "0", "123", "-"]),
)
_HOST = st.lists(_LABEL, min_size=1, max_size=4).map(".".join) | st.sampled_from(["a..b", ".a", "a.", "A.b"])
_PORT = st.one_of(
    st.just(""),
    st.sampled_from([":80", ":443", ":8000", ":0", ":08000", ":65535", ":65536", ":99999", ":"]),
    st.integers(1, 70000).map(lambda n: f":{n}"),
)
_SEGMENT = st.one_of(
    st.text(alphabet="aZ09-._~!$&'*+,;=:@()% ", max_size=6),
    st.sampled_from([".", "..", "", "x.aspx", "(s(abcdefghijklmnopqrstuvwx))"]),
)
_PATH = st.lists(_SEGMENT, max_size=4).map(lambda segs: "/" + "/".join(segs))
_ARG = st.one_of(
    st.text(alphabet="aZ09-._~!$'()*+,;:@/?%=", max_size=6),
    st.sampled_from(["jsessionid=" + "A" * 32, "sid=" + "0" * 32, "cfid=1&cftoken=2", "b", "a=", "=a", ""]),
)
_QUERY = st.one_of(st.just(""), st.lists(_ARG, max_size=4).map(lambda args: "?" + "&".join(args)))
_URL = st.builds(
    lambda scheme, host, port, path, query, frag: f"{scheme}://{host}{port}{path}{query}{frag}",
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    _HOST,
    _PORT,
    _PATH,
    _QUERY,
    st.sampled_from(["", "", "", "#f"]),
)
_NUMERIC_HOST = re.compile(r"[0-9.]*")  # the library asks the resolver about these


@settings(max_examples=1000, deadline=None)
@given(url=_URL)
@example("http://www.a.test/")
@example("https://www3.a.test:443/A/B/?Z=1&a&jsessionid=" + "0" * 32)
@example("http://a.test/x/..")
@example("http://a.test/x/./y")
@example("http://a.test/?")
def test_the_short_key_is_the_librarys_whenever_it_answers(url: str) -> None:
    short = sk.short_key(url)
    host = re.match(r"[^:]*://([^/:?#]*)", url)
    if host is not None and _NUMERIC_HOST.fullmatch(host.group(1).rsplit(".", 1)[-1]):
        assert short is None  # an IP address form, or a host whose last label is a number
        return
    if short is not None:
        assert short == surt.surt(url)
    try:
        expected = surt.surt(url)
    except (ValueError, IndexError, TypeError, AttributeError):
        expected = url
    assert sk.surt_key(url) == expected


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://www.example.com/", "com,example)/"),
        ("https://shop.example.co.uk:8443/Cart/Items/", "uk,co,example,shop:8443)/cart/items"),
        ("http://example.com:80/a?b=2&a=1", "com,example)/a?a=1&b=2"),
        ("http://example.com/a?jsessionid=" + "A" * 32 + "&x=1", "com,example)/a?x=1"),
        ("http://example.com/a?jsessionid=" + "A" * 32, "com,example)/a"),
    ],
)
def test_archived_urls_take_the_short_way(url: str, key: str) -> None:
    assert sk.short_key(url) == key == surt.surt(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/",  # an IP address: the library's own forms
        "http://example.com/%41",  # escapes: the library unescapes them
        "http://example.com/a//b",  # an empty segment: the library drops it
        "http://example.com/(s(abcdefghijklmnopqrstuvwx))/x.aspx",  # a path session id
        "http://user@example.com/",
        "http://Example.com/",
        "http://example.com/#f",
        "mailto:a@example.com",
    ],
)
def test_urls_outside_the_grammar_go_to_the_library(url: str) -> None:
    assert sk.short_key(url) is None


@settings(max_examples=300, deadline=None)
@given(
    host=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True), min_size=2, max_size=3).map(".".join),
    path=st.lists(st.from_regex(r"[A-Za-z0-9._~-]{1,8}", fullmatch=True), max_size=3).map("/".join),
)
def test_normalised_urls_of_plain_names_and_paths_take_the_short_way(host: str, path: str) -> None:
    url = normalize(f"http://{host}/{path}")
    assert url is not None
    if not re.search(r"(^|/)\.\.?(/|$)", path):
        assert sk.short_key(url) == surt.surt(url)


@settings(max_examples=600, deadline=None)
@given(url=st.from_regex(sk._SHORT, fullmatch=True))
def test_every_url_of_the_grammar_gets_the_librarys_key(url: str) -> None:
    short = sk.short_key(url)
    if short is not None:  # None: a dot segment, or a port past 65535
        assert short == surt.surt(url)
    else:
        assert re.search(r"/\.\.?(/|\?|$)", url) or int(re.search(r":([0-9]+)", url[6:]).group(1)) > 65535
