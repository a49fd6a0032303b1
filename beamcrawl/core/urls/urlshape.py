"""URL-shape rules: cheap tests that keep infinite URL spaces and non-HTML out of the frontier.

A spider trap is a URL space with no end: a server that answers any path, so relative links
grow ``/a/b/a/b/a/b/...``; session ids minted on every visit; ever longer query strings. The
first line of defence is the shape of the URL itself, checked on every discovered link before
the URL-seen check (by default: at most 2,048 characters, 16 path segments, no segment 3 times):

* longer than :attr:`ShapeRules.max_length` characters (the sitemaps protocol's own limit);
* more than :attr:`ShapeRules.max_depth` path segments;
* one path segment occurring :attr:`ShapeRules.max_segment_repeats` times or more anywhere in
  the path (not only in a row: ``/a/b/a/b/a/b`` repeats ``a`` three times). Empty segments
  count too (``/x//y//z//``), except the one a trailing slash makes;
* a scheme other than those allowed (``http`` and ``https``);
* a last path segment whose extension names a file the crawler will not parse (images,
  video, audio, archives, executables, fonts, style sheets and scripts, and by default PDFs
  and office documents).

Rejection is not a verdict stored anywhere: the URL is simply not offered to the seen check,
so nothing about it is written. Loosen a rule and the URL comes back the next time a page
that links to it is fetched. Session ids need no rule here: :func:`urlnorm.normalize` already
drops them (``jsessionid``, ``PHPSESSID``, ``sid`` ... from the query, ``;jsessionid=`` from the
path), so the session-id trap collapses to one URL before shape is judged.

What shape cannot catch, budgets do (core/policy/budget_rules.py): a calendar's ``/cal/2024/01.html`` is
short, shallow and repeats nothing, yet has no end. Shape rules are the cheap filter in front.

PDFs and office documents are skipped at URL time by default, a decision worth stating: the
crawler parses HTML only, so a fetched PDF yields no links to follow; it costs one of the
host's politeness slots (a second or more of the host's time) and up to the body cap in bytes,
and a PDF larger than the cap is cut and unreadable anyway. Their extensions are reliable
(``.pdf`` served as HTML is rare), and the fetch stage still recognises a PDF by its bytes
(core/content/sniff.py) when the URL gave no hint. A crawl that wants documents archived sets
``skip_documents=False``. Ambiguous extensions are left out of the sets on purpose: ``.ts``
(a video segment, or TypeScript), ``.xml`` (sitemaps, feeds), ``.json``, ``.txt``, and of
course ``.php``, ``.asp`` and their kind, which are pages.

Pure and fast: it runs on every discovered link, so it works on the string and never parses
it fully. The rules are written twice: in Python (:meth:`ShapeRules.check_python`, about
1.5 µs a link here) and compiled (``_urlshape.c``, the same steps on an ASCII URL, some ten
times cheaper; bench/README.md, "The shape check compiled"). The compiled one is used where it
was built and gives the Python one's answers to a few URLs on import; it leaves a URL with a
character above 0x7f, or with more than 256 path segments, to the Python rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from beamcrawl.core.urls.urlnorm import MAX_URL_LENGTH

__all__ = [
    "ARCHIVE_EXTENSIONS",
    "AUDIO_EXTENSIONS",
    "CODE_EXTENSIONS",
    "DOCUMENT_EXTENSIONS",
    "EXECUTABLE_EXTENSIONS",
    "FONT_EXTENSIONS",
    "IMAGE_EXTENSIONS",
    "REASONS",
    "VIDEO_EXTENSIONS",
    "ShapeRules",
    "check",
]

IMAGE_EXTENSIONS = frozenset(
    "png jpg jpeg jpe jfif pjpeg gif webp avif apng bmp dib ico cur tif tiff svg svgz heic heif "
    "jxl jp2 j2k psd xcf raw cr2 nef arw dng eps ai".split()
)
VIDEO_EXTENSIONS = frozenset(
    "mp4 m4v mov qt avi wmv asf flv f4v mkv webm mpg mpeg mpe m2v m2ts mts 3gp 3g2 ogv vob rm rmvb divx m3u8".split()
)
AUDIO_EXTENSIONS = frozenset(
    "mp3 mp2 wav wave ogg oga opus flac aac m4a m4b wma aif aiff aifc mid midi ra amr ape".split()
)
ARCHIVE_EXTENSIONS = frozenset(
    "zip gz tgz bz2 tbz tbz2 xz txz lz lzma zst 7z rar tar cab arj z iso img dmg vhd vmdk qcow2 sit sitx".split()
)
EXECUTABLE_EXTENSIONS = frozenset(
    "exe msi msp dll so dylib bin apk aab ipa deb rpm jar war ear class pkg mpkg appimage "
    "snap flatpak xpi crx msix appx com scr".split()
)
FONT_EXTENSIONS = frozenset("woff woff2 ttf otf eot pfb pfm".split())
# Never HTML, and the parser takes no links from them (<link rel=stylesheet> and <script src>
# are not followed either).
CODE_EXTENSIONS = frozenset("css js mjs cjs map wasm".split())
DOCUMENT_EXTENSIONS = frozenset(
    "pdf ps doc docx docm dot dotx xls xlsx xlsm xlsb ppt pptx pptm pps ppsx odt ods odp odg "
    "rtf epub mobi azw azw3 djvu xps oxps pages numbers key".split()
)

#: Every reason :func:`check` can return (stable names: they become metric names).
REASONS = ("too_long", "bad_scheme", "too_deep", "repeated_segment", "binary_extension")

# Longest extension worth looking up; a longer "extension" is part of a page name.
_MAX_EXT = 9


def _default_binary() -> frozenset[str]:
    return (
        IMAGE_EXTENSIONS
        | VIDEO_EXTENSIONS
        | AUDIO_EXTENSIONS
        | ARCHIVE_EXTENSIONS
        | EXECUTABLE_EXTENSIONS
        | FONT_EXTENSIONS
        | CODE_EXTENSIONS
    )


@dataclass(frozen=True)
class ShapeRules:
    """Limits on a URL's shape; the defaults are the seeds' numbers.

    Attributes:
        max_length: Longest URL accepted, in characters (2,048, the sitemaps protocol's
            limit). 0 turns the rule off.
        max_depth: Most path segments accepted (16). ``/a/b/`` has 2. 0 turns it off.
        max_segment_repeats: A path in which one segment occurs this many times or more is
            rejected (3: ``/a/b/a/b/a/`` is out, ``/a/b/a/`` is in). 0 turns it off.
        schemes: Schemes accepted, lower case.
        binary_extensions: Extensions (lower case, no dot) of files never fetched.
        skip_documents: Also reject :data:`DOCUMENT_EXTENSIONS` (PDF, office formats): see
            the module docstring for why this is the default.
    """

    max_length: int = MAX_URL_LENGTH
    max_depth: int = 16
    max_segment_repeats: int = 3
    schemes: frozenset[str] = frozenset({"http", "https"})
    binary_extensions: frozenset[str] = field(default_factory=_default_binary)
    skip_documents: bool = True
    # Derived in __post_init__: the extensions and schemes actually looked up.
    _rejected: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _schemes: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())
    _compiled: Callable[[str], int] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        problems = []
        for name in ("max_length", "max_depth", "max_segment_repeats"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_segment_repeats == 1:
            problems.append("max_segment_repeats must be 0 (off) or >= 2, got 1")
        if not self.schemes:
            problems.append("schemes must name at least one scheme")
        if problems:
            raise ValueError("; ".join(problems))
        # Computed once (a frozen dataclass, hence object.__setattr__).
        rejected = self.binary_extensions | (DOCUMENT_EXTENSIONS if self.skip_documents else frozenset())
        object.__setattr__(self, "_rejected", frozenset(e.lower().lstrip(".") for e in rejected))
        object.__setattr__(self, "_schemes", frozenset(s.lower() for s in self.schemes))
        compiled = None
        if _compiled_check is not None:
            compiled = partial(
                _compiled_check,
                self.max_length,
                self.max_depth,
                self.max_segment_repeats,
                self._schemes,
                self._rejected,
            )
        object.__setattr__(self, "_compiled", compiled)

    def __reduce__(self) -> tuple[type[ShapeRules], tuple[Any, ...]]:
        # Rebuilt from its settings where it is unpickled: whether the check is compiled there
        # is that machine's build, not this one's.
        settings = (
            self.max_length, self.max_depth, self.max_segment_repeats, self.schemes, self.binary_extensions,
            self.skip_documents,
        )  # fmt: skip
        return (ShapeRules, settings)

    def check(self, url: str) -> str | None:
        """Why ``url`` must not be crawled, or None when its shape is fine.

        Args:
            url: A normalised absolute URL (:func:`urlnorm.normalize` output). Anything else
                is judged as well as it can be, and never makes this raise.

        Returns:
            One of :data:`REASONS`, or None.
        """
        compiled = self._compiled
        if compiled is not None and type(url) is str:
            code = compiled(url)
            if code >= -1:
                return _ANSWERS[code]
        return self.check_python(url)

    def check_python(self, url: str) -> str | None:
        """:meth:`check` in Python: what the compiled check answers, and its answer for the
        URLs that one leaves to it."""
        if self.max_length and len(url) > self.max_length:
            return "too_long"
        sep = url.find("://")
        if sep <= 0 or url[:sep].lower() not in self._schemes:
            return "bad_scheme"
        slash = url.find("/", sep + 3)
        if slash < 0:
            return None  # "http://host" or "http://host?q": no path to judge
        query = url.find("?", sep + 3)
        if 0 <= query < slash:
            return None  # "http://host?q=/x": the slash is in the query
        end = query if query >= 0 else len(url)
        hash_at = url.find("#", slash, end)
        if hash_at >= 0:
            end = hash_at
        path = url[slash + 1 : end]  # without the leading "/"
        if not path:
            return None
        # A trailing slash names a directory; it does not add a level.
        trailing = path[-1] == "/"
        slashes = path.count("/")
        depth = slashes if trailing else slashes + 1
        if self.max_depth and depth > self.max_depth:
            return "too_deep"
        repeats = self.max_segment_repeats
        if repeats and depth >= repeats:
            segments = (path[:-1] if trailing else path).split("/")
            # Most paths have distinct segments: a set's size says so without counting.
            if len(set(segments)) != len(segments):
                counts: dict[str, int] = {}
                for segment in segments:
                    n = counts.get(segment, 0) + 1
                    if n >= repeats:
                        return "repeated_segment"
                    counts[segment] = n
        if trailing:
            return None
        last = path[path.rfind("/") + 1 :]
        dot = last.rfind(".")
        if dot < 0 or len(last) - dot - 1 > _MAX_EXT:
            return None
        ext = last[dot + 1 :]
        semi = ext.find(";")  # "/a.png;v=2": path parameters are not part of the extension
        if semi >= 0:
            ext = ext[:semi]
        if ext.lower() in self._rejected:
            return "binary_extension"
        return None


# ShapeRules.check's answers by the compiled check's code: REASONS by index, None at -1.
_ANSWERS: tuple[str | None, ...] = (*REASONS, None)


def _load_compiled() -> Callable[..., int] | None:
    """The compiled check (``_urlshape.check``) when it was built and answers as the Python
    rules do on a few URLs of every outcome, else None."""
    try:
        from beamcrawl.core.urls._urlshape import check as compiled
    except ImportError:  # built without a C compiler: the Python rules alone
        return None
    rules = ShapeRules()
    probes = (
        "http://a.example/",
        "HTTPS://a.example/b/c.PNG;v=2?x=1",
        "ftp://a.example/x",
        "http://a.example/a/b/a/b/a/",
        "http://a.example/" + "/".join("abcdefghijklmnopq"),
        "http://a.example?q=/x.png",
        "http://a.example/x.html#a/b.png",
        "http://a.example/" + "x" * 2100,
    )
    args = (rules.max_length, rules.max_depth, rules.max_segment_repeats, rules._schemes, rules._rejected)
    if any(_ANSWERS[compiled(*args, url)] != rules.check_python(url) for url in probes):
        return None
    return compiled


_compiled_check: Callable[..., int] | None = None
_compiled_check = _load_compiled()

_DEFAULT = ShapeRules()


def check(url: str, rules: ShapeRules | None = None) -> str | None:
    """:meth:`ShapeRules.check` with the default rules unless ``rules`` is given.

    Returns:
        A reason from :data:`REASONS`, or None when the URL may be crawled.
    """
    return (rules or _DEFAULT).check(url)
