"""Tests for beamcrawl.core.urls.urlshape: the URL-shape rules against traps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.urls.urlnorm import InvalidURL, normalize
from beamcrawl.core.urls.urlshape import DOCUMENT_EXTENSIONS, REASONS, ShapeRules, check


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://example.com/", None),
        ("https://example.com", None),
        ("https://example.com?q=/a/a/a/a", None),
        ("https://example.com/news/2024/05/17/article.html", None),
        ("https://example.com/shop?color=red&size=42", None),
        ("https://example.com/index.php?id=7", None),
        # length: 2,048 is in, 2,049 is out
        ("https://example.com/" + "a" * (2048 - 20), None),
        ("https://example.com/" + "a" * (2049 - 20), "too_long"),
        # depth: 16 segments in, 17 out; a trailing slash adds no level
        ("https://example.com/" + "/".join(f"s{i}" for i in range(16)), None),
        ("https://example.com/" + "/".join(f"s{i}" for i in range(16)) + "/", None),
        ("https://example.com/" + "/".join(f"s{i}" for i in range(17)), "too_deep"),
        # a segment twice is fine, three times anywhere is a trap
        ("https://example.com/a/b/a/c", None),
        ("https://example.com/a/b/a/b/a/", "repeated_segment"),
        ("https://example.com/a/b/a/b/a/b/c.html", "repeated_segment"),
        ("https://example.com/x/x/x", "repeated_segment"),
        ("https://example.com/x//y//z//", "repeated_segment"),
        ("https://example.com/x//y/", None),
        # the query is not part of the path
        ("https://example.com/a?x=/a/a/a", None),
        # schemes
        ("ftp://example.com/a", "bad_scheme"),
        ("javascript:alert(1)", "bad_scheme"),
        ("example.com/a", "bad_scheme"),
        # binary extensions, case-insensitively, path parameters ignored
        ("https://example.com/img/photo.JPG", "binary_extension"),
        ("https://example.com/v/clip.mp4", "binary_extension"),
        ("https://example.com/a.png;v=2", "binary_extension"),
        ("https://example.com/dl/setup.exe?x=1", "binary_extension"),
        ("https://example.com/fonts/a.woff2", "binary_extension"),
        ("https://example.com/static/app.js", "binary_extension"),
        ("https://example.com/files/report.pdf", "binary_extension"),
        ("https://example.com/a.tar.gz", "binary_extension"),
        # ... but not what is only part of a name, or a directory, or an ambiguous extension
        ("https://example.com/png", None),
        ("https://example.com/photo.jpg/", None),
        ("https://example.com/a.pngx", None),
        ("https://example.com/sitemap.xml", None),
        ("https://example.com/v1.2.3", None),
        ("https://example.com/segment.ts", None),
        ("https://example.com/a.verylongextension", None),
    ],
)
def test_default_rules(url: str, reason: str | None) -> None:
    assert check(url) == reason


def test_reasons_are_the_documented_ones() -> None:
    samples = [
        "ftp://a/",
        "https://a/" + "x" * 3000,
        "https://a/" + "b/" * 20 + "c",
        "https://a/q/q/q/",
        "https://a/b.gif",
    ]
    assert {check(u) for u in samples} == set(REASONS)


def test_documents_can_be_let_through() -> None:
    rules = ShapeRules(skip_documents=False)
    assert rules.check("https://example.com/files/report.pdf") is None
    assert rules.check("https://example.com/slides.PPTX") is None
    assert rules.check("https://example.com/photo.png") == "binary_extension"
    assert "pdf" in DOCUMENT_EXTENSIONS


def test_limits_are_configurable_and_zero_turns_them_off() -> None:
    rules = ShapeRules(
        max_length=0, max_depth=0, max_segment_repeats=0, binary_extensions=frozenset(), skip_documents=False
    )
    assert rules.check("https://a.example/" + "/".join(["x"] * 40) + "/f.png") is None
    strict = ShapeRules(max_length=40, max_depth=2, max_segment_repeats=2, schemes=frozenset({"https"}))
    assert strict.check("http://a.example/") == "bad_scheme"
    assert strict.check("https://a.example/a/b/c") == "too_deep"
    assert strict.check("https://a.example/a/a") == "repeated_segment"
    assert strict.check("https://a.example/" + "x" * 40) == "too_long"
    custom = ShapeRules(binary_extensions=frozenset({".DAT"}))
    assert custom.check("https://a.example/f.dat") == "binary_extension"
    assert custom.check("https://a.example/f.png") is None


@pytest.mark.parametrize(
    "kwargs", [{"max_length": -1}, {"max_depth": -2}, {"max_segment_repeats": 1}, {"schemes": frozenset()}]
)
def test_bad_settings_are_refused_with_a_message(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        ShapeRules(**kwargs)


def test_rules_pickle() -> None:
    import pickle

    rules = ShapeRules(max_depth=5)
    again = pickle.loads(pickle.dumps(rules))
    assert again == rules and again.check("https://a.example/1/2/3/4/5/6") == "too_deep"
    # Its settings travel, not the compiled check: a worker uses its own build, or none.
    assert b"_urlshape" not in pickle.dumps(rules)
    assert again._compiled is not None


def test_session_id_trap_collapses_in_normalisation() -> None:
    """The issue's "session-id parameters dropped by normalisation", verified: a trap that
    mints a session id per visit offers one URL, not one per visit."""
    visits = [
        "http://shop.example/cart;jsessionid=ABC123?item=7",
        "http://shop.example/cart;jsessionid=XYZ999?item=7",
        "http://shop.example/cart?item=7&PHPSESSID=4f3a",
        "http://shop.example/cart?sid=1&item=7",
        "http://shop.example/cart?item=7&sessionid=q&utm_source=x",
        "http://shop.example/cart?ASPSESSIONIDQQ=zz&item=7",
    ]
    assert {normalize(v) for v in visits} == {"http://shop.example/cart?item=7"}


def test_relative_link_trap_is_caught_within_a_few_hops() -> None:
    """A server that answers any path with a page linking to "a/b/": the URL grows by two
    segments per hop, and the repeat rule stops it at the third hop."""
    url = "http://trap.example/"
    hops = 0
    while check(url) is None:
        url = normalize("a/b/", url)
        hops += 1
        assert hops < 10
    assert hops == 3 and check(url) == "repeated_segment"


_segment = st.sampled_from(["a", "b", "c", "", "x.html", "img.png", "2024", "%2F"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_segment, max_size=24), st.booleans(), st.sampled_from(["", "?q=1", "?a/a/a"]))
def test_property_verdict_matches_a_plain_reading(segments: list[str], trailing: bool, query: str) -> None:
    """Against a slow, obvious reading of the rules."""
    path = "/" + "/".join(segments) + ("/" if trailing and segments else "")
    url = f"https://h.example{path}{query}"
    got = check(url)
    parts = path[1:].split("/")
    if parts and parts[-1] == "":
        parts = parts[:-1]
    expected = None
    if len(url) > 2048:
        expected = "too_long"
    elif len(parts) > 16:
        expected = "too_deep"
    elif any(parts.count(p) >= 3 for p in parts):
        expected = "repeated_segment"
    elif not path.endswith("/") and parts and parts[-1].endswith(".png"):
        expected = "binary_extension"
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_property_never_raises_and_only_documented_reasons(text: str) -> None:
    for candidate in (text, f"https://h.example/{text}", f"http://{text}"):
        assert check(candidate) in (None, *REASONS)
        try:
            normal = normalize(candidate)
        except InvalidURL:
            continue
        # Normalising never makes an acceptable URL's shape unacceptable by length or scheme.
        assert check(normal) not in ("too_long", "bad_scheme")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=10))
def test_property_prefix_closed(segments: list[str]) -> None:
    """Depth and repeats only get worse as a path grows: if a path is rejected for them, so is
    every path that extends it (so a trap is cut once, not re-admitted deeper)."""
    rules = ShapeRules(binary_extensions=frozenset(), skip_documents=False)
    verdicts = [rules.check("https://h.example/" + "/".join(segments[: i + 1])) for i in range(len(segments))]
    first_bad = next((i for i, v in enumerate(verdicts) if v is not None), None)
    if first_bad is not None:
        assert all(v is not None for v in verdicts[first_bad:])


# --- the compiled check (_urlshape.c) gives the Python rules' answers ---

from beamcrawl.core.urls import urlshape  # noqa: E402


def test_the_compiled_check_is_built_and_used() -> None:
    """``make install`` builds it (a C compiler is part of the machine's setup): a test
    run without it would compare the Python rules with themselves."""
    assert urlshape._compiled_check is not None
    assert ShapeRules()._compiled is not None


_url_chars = st.sampled_from(list("aZ09/./;?#:%-_~@") + ["//", "://", ".png", ".PnG", ".html", ";v=1", "é", "\u212a"])
_schemes = st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "", "h", "http:", "javascript"])


def _rules_strategy() -> st.SearchStrategy[ShapeRules]:
    return st.builds(
        ShapeRules,
        max_length=st.sampled_from([0, 10, 40, 2048]),
        max_depth=st.sampled_from([0, 1, 3, 16]),
        max_segment_repeats=st.sampled_from([0, 2, 3, 5]),
        schemes=st.sampled_from([frozenset({"http", "https"}), frozenset({"HTTP"}), frozenset({"ftp", "x"})]),
        binary_extensions=st.sampled_from([frozenset({"png", "gz"}), frozenset(), frozenset({"K", "mkv", "a;b"})]),
        skip_documents=st.booleans(),
    )


@settings(max_examples=1500, deadline=None)
@given(
    _rules_strategy(),
    _schemes,
    st.text(alphabet=st.characters(max_codepoint=0x80), max_size=8),
    st.lists(_url_chars, max_size=30),
)
def test_property_compiled_answers_as_the_python_rules(
    rules: ShapeRules, scheme: str, host: str, pieces: list[str]
) -> None:
    """Every outcome, on URLs built around each step's edges: schemes in every case and
    missing, "://" twice, "?" and "#" before and after the first "/", empty and repeated
    segments, extensions in any case and cut at ";", a KELVIN SIGN whose lower case is
    "k" (left to the Python rules with the other non-ASCII URLs), lengths across the limit."""
    for url in (f"{scheme}://{host}{''.join(pieces)}", f"{scheme}:{host}{''.join(pieces)}", "".join(pieces)):
        assert rules.check(url) == rules.check_python(url), url


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_property_compiled_answers_as_the_python_rules_on_any_text(text: str) -> None:
    rules = ShapeRules()
    for url in (text, f"http://h.example/{text}", f"https://{text}"):
        assert rules.check(url) == rules.check_python(url)


def test_compiled_leaves_what_it_does_not_read_to_python() -> None:
    """Non-ASCII URLs and paths of more than 256 segments are the Python rules' (-2); the
    answers are the same either way."""
    rules = ShapeRules(max_depth=0)
    assert rules._compiled is not None
    many = "http://h.example/" + "/".join(f"s{i}" for i in range(300)) + "/s7/s7"
    assert rules._compiled(many) == -2
    assert rules.check(many) == rules.check_python(many) == "repeated_segment"
    kelvin = "http://h.example/movie.m\u212av"  # "mkv" once lower-cased
    assert rules._compiled(kelvin) == -2
    assert rules.check(kelvin) == "binary_extension"
    assert rules._compiled("http://h.example/a.png") == REASONS.index("binary_extension")
    assert rules._compiled("http://h.example/a.html") == -1


def test_compiled_refuses_bad_arguments_without_crashing() -> None:
    compiled = urlshape._compiled_check
    assert compiled is not None
    with pytest.raises(TypeError):
        compiled(1, 2, 3, frozenset(), frozenset())
    with pytest.raises(TypeError):
        compiled(1, 2, 3, {"http"}, frozenset(), "http://a/")
    with pytest.raises(TypeError):
        compiled(1, 2, 3, frozenset(), frozenset(), b"http://a/")
    with pytest.raises(ValueError):
        compiled(-1, 2, 3, frozenset(), frozenset(), "http://a/")


def test_without_the_extension_the_rules_are_pythons() -> None:
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        sys.modules["beamcrawl.core.urls._urlshape"] = None  # as if it was not built
        from beamcrawl.core.urls import urlshape
        assert urlshape._compiled_check is None and urlshape.ShapeRules()._compiled is None
        print([urlshape.check(u) for u in ("http://a.example/x.png", "http://a.example/a/a/a/", "ftp://a/")])
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "['binary_extension', 'repeated_segment', 'bad_scheme']"
