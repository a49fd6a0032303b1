"""The compiled normalisation of plain links (``core/urls/_urlnorm.c``) against the Python
steps: the same URL, or the same refusal, for every reference and base, and the Python steps
alone where the extension is not built."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.urls import urlnorm
from beamcrawl.core.urls.urlnorm import InvalidURL


def _outcome(fn: object, ref: str, base: str | None) -> str:
    try:
        return "ok " + fn(ref, base)  # type: ignore[operator]
    except InvalidURL as exc:
        return f"refused {exc}"


def test_the_compiled_steps_are_built_and_used() -> None:
    """``make install`` builds them (a C compiler is part of the machine's setup): a test run
    without them would compare the Python steps with themselves."""
    assert urlnorm._compiled is not None


# Pieces around every step's edges: slashes and dots for the dot segments, "?", "#", "&" and
# "=" for the query and the fragment, the dropped parameters' names in any case and names
# that only begin like them, ";jsessionid=", ports, userinfo, escapes, characters that need
# encoding, backslashes, tabs, a space, non-ASCII, schemes in any case and the wrong ones.
_pieces = st.sampled_from(
    [*"aZ09/./?#&=:@;%-_~!$'()*+,", "//", "/..", "/.", "..", "./", "../", "%2F", "%41", "%zz", " ", "\t", "\\", "é"]
    + ["utm_source=x", "UTM_x", "gclid=1", "sidebar=2", "Sid=3", "aspsessionid", ";jsessionid=9", ";JSESSIONID=1"]
    + ["http://", "HTTPS://", "https:", "http:", "ftp://", "javascript:", "mailto:", "x:y", ":80", ":8080", ":0"]
    + ["a.example", "B.Example.", "xn--bcher-kva.example", "0x7f.1", "127.0.0.1", "[::1]", "u:p@", "*"]
)
_bases = st.sampled_from(
    [
        None,
        "http://Example.com:80/a/b/c.html?q=1",
        "https://h.example/",
        "https://h.example",
        "http://h.example?x=1",
        "HTTP://h.example:8080/dir/",
        "http://u@h.example/a/",
        "http://h.example/a/b#frag",
        "http://h.example/a b/",
        "http://h.example\\a\\",
        "ftp://h.example/a/",
        "http:///a/",
        "http:h.example/a",
        "http://[::1]:81/x/y",
        "http://h.example/é/",
        "relative/base",
    ]
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_pieces, max_size=14), _bases, st.sampled_from(["", " ", "\x00", "\n"]))
def test_property_the_compiled_steps_answer_as_the_python_ones(pieces: list[str], base: str | None, pad: str) -> None:
    ref = pad + "".join(pieces) + pad
    assert _outcome(urlnorm.normalize, ref, base) == _outcome(urlnorm.normalize_python, ref, base), (ref, base)


@settings(max_examples=800, deadline=None)
@given(st.text(max_size=60), _bases)
def test_property_the_compiled_steps_answer_as_the_python_ones_on_any_text(text: str, base: str | None) -> None:
    for ref in (text, f"http://h.example/{text}", f"/{text}", f"{text}?{text}"):
        assert _outcome(urlnorm.normalize, ref, base) == _outcome(urlnorm.normalize_python, ref, base), (ref, base)


def test_long_inputs_and_results_are_left_to_python() -> None:
    base = "http://h.example/"
    compiled = urlnorm._compiled
    assert compiled is not None
    for ref in ("a" * 2100, "/" + "b" * 2040, "x" * (8 * 2048 + 1), "?" + "q" * 2100):
        assert compiled(ref, base, urlnorm._normalize_authority, urlnorm._DROPPED_NAMES) is None
        assert _outcome(urlnorm.normalize, ref, base) == _outcome(urlnorm.normalize_python, ref, base)
    fits = "/" + "c" * (2048 - len("http://h.example/"))
    assert compiled(fits, base, urlnorm._normalize_authority, urlnorm._DROPPED_NAMES) == "http://h.example" + fits


def test_plain_links_are_answered_by_the_compiled_steps() -> None:
    """What pages mostly hold: relative paths, absolute paths, dot segments, other hosts,
    queries. Each is answered in C, as the Python steps answer it."""
    compiled = urlnorm._compiled
    assert compiled is not None
    base = "http://h17.simweb.test:8000/p/17/intro-to-things.html"
    links = [
        "intro.html",
        "../18/x.html",
        "./a/./b/../c",
        "/",
        "/search?q=a+b&page=2",
        "//cdn.example/lib.js",
        "https://Other.Example:443/A/B?x=1#top",
        "http://h.example",
        "tag/beam-crawl",
        "/p/17/?",
        "/a//b/../",
    ]
    for ref in links:
        answer = compiled(ref, base, urlnorm._normalize_authority, urlnorm._DROPPED_NAMES)
        assert answer is not None, ref
        assert answer == urlnorm.normalize_python(ref, base)


def test_what_the_compiled_steps_leave_to_python() -> None:
    compiled = urlnorm._compiled
    assert compiled is not None
    base = "http://h.example/a/"
    for ref in ("b%41", "caf\u00e9", "a b", "a\\b", "?q=1", "#top", "", "mailto:x@y", "/x;jsessionid=1", "/?utm_x=1"):
        assert compiled(ref, base, urlnorm._normalize_authority, urlnorm._DROPPED_NAMES) is None, ref
    assert compiled("b", None, urlnorm._normalize_authority, urlnorm._DROPPED_NAMES) is None
    assert compiled("b", "http://h.example/a#f", urlnorm._normalize_authority, urlnorm._DROPPED_NAMES) is None


def test_a_bad_authority_is_refused_as_python_refuses_it() -> None:
    for ref in ("http://bad host/", "http://h.example:99999/", "//-x..y/", "http://0x1.2.3.4.5/"):
        with pytest.raises(InvalidURL) as compiled:
            urlnorm.normalize(ref, "http://h.example/")
        with pytest.raises(InvalidURL) as python:
            urlnorm.normalize_python(ref, "http://h.example/")
        assert str(compiled.value) == str(python.value)


def test_compiled_refuses_bad_arguments_without_crashing() -> None:
    compiled = urlnorm._compiled
    assert compiled is not None
    auth, names = urlnorm._normalize_authority, urlnorm._DROPPED_NAMES
    with pytest.raises(TypeError):
        compiled("a", "http://h/")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        compiled(b"a", "http://h/", auth, names)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compiled("a", "http://h/", None, names)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compiled("/?x=1", "http://h/", auth, [*names])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compiled("/?x=1", "http://h/", auth, (1,))  # type: ignore[arg-type]


def test_without_the_extension_the_steps_are_pythons() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["beamcrawl.core.urls._urlnorm"] = None  # as if it was not built
        from beamcrawl.core.urls import urlnorm
        assert urlnorm._compiled is None
        base = "http://Example.com:80/a/b/c.html"
        print([urlnorm.normalize(r, base) for r in ("d.html", "../x/./y", "//o.example/a/..")])
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "['http://example.com/a/b/d.html', 'http://example.com/a/x/y', 'http://o.example/']"
