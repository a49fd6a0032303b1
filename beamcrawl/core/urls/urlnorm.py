"""URL normalisation and fingerprints (host keys and domains are in :mod:`beamcrawl.core.urls.hostkeys`).

Every discovered link goes through :func:`normalize` before it is fingerprinted, so two
spellings of one page must come out as one string. Only the *safe* RFC 3986 §6.2.2/§6.2.3
rules are applied, plus a few learned ones (tracking parameters and session ids are dropped):

* scheme and host lower-cased, IDN hosts to punycode (UTS #46), trailing dot of the host
  removed, numeric IPv4 spellings and IPv6 literals written canonically;
* the default port removed, userinfo and the fragment dropped;
* percent-encoding normalised: hex digits upper-cased, escaped unreserved characters
  decoded, characters that may not appear raw (space, non-ASCII as UTF-8, ``"<>{}|`` ...)
  encoded, and in the query ``'`` too (the WHATWG special-query set: ``?'`` is ``?%27``);
  escaped reserved characters such as ``%2F`` are left alone; the non-ASCII characters of a
  query are written in the linking document's encoding when it is not UTF-8 (``encoding``);
* dot segments removed, an empty path written as ``/``;
* ``utm_*``, click ids and session ids removed from the query, ``;jsessionid=`` from the path.

It does not sort the query, touch trailing slashes, collapse ``//`` or lower-case the path: on
some sites those name different resources, and such equivalences are learned per host.

Relative references are resolved per RFC 3986 §5.2 (with the backward-compatible reading of
``http:g`` that browsers use). Where RFC 3986 and browsers differ, the WHATWG URL standard's
reading of http(s) URLs wins, because it is what the links on pages mean: a backslash before
the query is a ``/`` (``http:\\\\a.example\\b`` is ``http://a.example/b``), any number of
slashes may follow ``http:`` in an absolute URL, and an ``xn--`` label that does not decode to
a valid IDNA label refuses the host. :func:`urllib.parse.urljoin` is not used: it is slow for the
hot loop and collapses empty path segments (``a//b``), which §5.2 keeps.

This module is imported by quick CLI tools: it must not import Apache Beam, and tldextract
and idna are only imported on first use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

import mmh3

__all__ = [
    "MAX_URL_LENGTH",
    "InvalidURL",
    "clear_caches",
    "fingerprint",
    "fp_hex",
    "host_of",
    "normalize",
    "normalize_host",
]

#: Longest normalised URL accepted (the sitemaps protocol's limit; longer ones are mostly traps).
MAX_URL_LENGTH = 2048
# Inputs far longer than the limit are refused before any work is spent on them. Normalising
# can shrink a URL (tracking parameters, dot segments), hence the slack.
_MAX_INPUT_LENGTH = 8 * MAX_URL_LENGTH

_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    """A URL that cannot be crawled; ``str(exc)`` is a short reason such as ``"missing host"``."""


# --- character classes (RFC 3986 §2 and §3.3/§3.4) -------------------------------------------

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# What quote() must leave alone, on top of the unreserved characters it always keeps: the
# sub-delims, ":" and "@" (pchar), "/" and, in queries, "?"; "%" because escapes have already
# been normalised by the time quote() runs.
_PATH_SAFE = "!$&'()*+,;=:@/%"
# In the query of an http(s) URL the WHATWG URL standard also encodes "'" (its special-query
# percent-encode set), so "?'" and "?%27" are one URL, as they are to browsers.
_QUERY_SAFE = "!$&()*+,;=:@/%?"

# A component with none of these characters needs no percent-encoding work at all, which is
# the common case; one search in C is much cheaper than looking at each character in Python.
_PATH_NEEDS_WORK = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/]").search
_QUERY_NEEDS_WORK = re.compile(r"[^A-Za-z0-9\-._~!$&()*+,;=:@/?]").search
# Once its escapes are normalised, a component without these needs no quote() call either.
_PATH_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]").search
_QUERY_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9\-._~!$&()*+,;=:@/?%]").search
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Leading/trailing C0 controls and spaces are stripped and tabs/newlines removed, as browsers
# do with href values (WHATWG URL standard); other whitespace is encoded like any character.
_C0_OR_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# RFC 3986 Appendix B: splits any string into its five components.
_URI_PARTS = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?")
_REG_HOST = re.compile(r"[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*")
_JSESSIONID_PARAM = re.compile(r";jsessionid=[^/;]*", re.IGNORECASE)


# Every "%XX" spelling mapped to its normal form: the character itself when it is unreserved,
# else the escape with upper-case hex digits.
_ESCAPE_FORMS = {
    f"%{hi}{lo}": (chr(int(hi + lo, 16)) if chr(int(hi + lo, 16)) in _UNRESERVED else f"%{hi}{lo}".upper())
    for hi in "0123456789abcdefABCDEF"
    for lo in "0123456789abcdefABCDEF"
}


def _escape_replacement(match: re.Match[str]) -> str:
    return _ESCAPE_FORMS[match.group()]


def _normalize_escapes(component: str, safe: str, needs_quoting: Callable[[str], Any]) -> str:
    """Applies the percent-encoding rules to a path or query.

    Order matters for idempotence: a ``%`` that starts no escape is encoded first, then
    existing escapes are normalised, and only then is everything else quoted (``%`` is in
    ``safe`` so the escapes are not encoded twice).
    """
    if "%" in component:
        component = _STRAY_PERCENT.sub("%25", component)
        component = _ESCAPE.sub(_escape_replacement, component)
        if not needs_quoting(component):
            return component
    try:
        # surrogateescape turns lone surrogates from a bytes->str decode back into their bytes.
        return quote(component, safe=safe, errors="surrogateescape")
    except UnicodeEncodeError:
        raise InvalidURL("bad character") from None


# --- tracking and session parameters -----------------------------------------------------------

_DROPPED_PARAMS = frozenset(
    {
        # click ids and campaign tracking
        "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid",
        "mc_cid", "mc_eid", "_ga", "_gl", "igshid", "twclid", "ttclid", "li_fat_id",
        "mkt_tok", "_hsenc", "_hsmi", "__hstc", "__hssc", "__hsfp", "vero_id",
        "oly_anon_id", "oly_enc_id", "_openstat", "srsltid",
        # session ids
        "jsessionid", "phpsessid", "sid", "sessionid", "session_id", "cfid", "cftoken",
    }
)  # fmt: skip
_DROPPED_PREFIXES = ("utm_", "aspsessionid")
# A cheap pre-check so that the common query with none of these names is not split at all.
_MAYBE_DROPPED = re.compile(
    r"(?:^|&)(?:utm_|aspsessionid|" + "|".join(sorted(map(re.escape, _DROPPED_PARAMS))) + ")",
    re.IGNORECASE,
).search


def _is_dropped(param: str) -> bool:
    name = param.partition("=")[0].lower()
    return name in _DROPPED_PARAMS or name.startswith(_DROPPED_PREFIXES)


def _strip_params(query: str) -> str | None:
    """Removes tracking/session parameters; None when nothing is left of a non-empty query."""
    params = query.split("&")
    kept = [p for p in params if not _is_dropped(p)]
    if len(kept) == len(params):
        return query
    return "&".join(kept) if kept else None


# --- path ----------------------------------------------------------------------------------------


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for a path that starts with ``/``; empty segments are kept.

    The output buffer is ``"/" + segment`` for each kept segment: ``..`` removes the last one
    (with its ``/``), and a path ending in ``.`` or ``..`` ends in ``/`` (it names a
    directory), so ``////../..`` keeps ``//`` as §5.2.4 (and browsers) do.
    """
    out: list[str] = []
    segments = path.split("/")
    for segment in segments[1:]:
        if segment == ".":
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        out.append(segment)
    result = "".join("/" + segment for segment in out)
    if segments[-1] in (".", ".."):
        result += "/"
    return result or "/"


# --- host and port -----------------------------------------------------------------------------


def _idna_encode(host: str) -> str:
    """Non-ASCII host to its ASCII (punycode) form, as browsers do (UTS #46, non-transitional).

    The ``idna`` package's IDNA 2008 encoding is tried first; a name its stricter rules refuse
    but browsers take (symbols and emoji, ``_`` or a hyphen at a label's edge, all in the wild)
    is written by the URL standard's own reading of UTS #46 (:func:`_uts46_to_ascii`). Not by
    the stdlib's IDNA 2003 codec: that one maps ``ß`` to ``ss`` and ``ς`` to ``σ`` and drops
    joiners, so ``a_b.straße.de`` came out as ``a_b.strasse.de``, another registered domain
    than the one the link names (``a_b.xn--strae-oqa.de``).
    """
    import idna  # slow to import and rarely needed, so only on the first non-ASCII host

    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except (UnicodeError, ValueError):  # idna.IDNAError is a UnicodeError
        pass
    encoded = _uts46_to_ascii(host)
    if encoded is None:
        raise InvalidURL("bad host")
    return encoded


def _uts46_to_ascii(host: str) -> str | None:
    """The URL standard's "domain to ASCII" (UTS #46 ToASCII, non-transitional, no STD3 or
    hyphen rules, DNS lengths left to the caller), built on the ``idna`` package's parts;
    None where it fails.

    Every code point must be valid or mapped (the mapping is NFC); a non-ASCII label must not
    begin with ``xn--`` or a combining mark, must keep its joiners only where RFC 5892's
    CONTEXTJ rules allow them and, if it holds a right-to-left character, RFC 5893's Bidi
    Rule (as ``idna.encode`` checks it). ``xn--`` labels are left to :func:`_check_a_labels`.
    """
    import unicodedata

    import idna
    from idna.core import check_bidi, valid_contextj

    out = []
    try:
        for label in idna.uts46_remap(host, std3_rules=False, transitional=False).split("."):
            if not label.isascii():
                if label[:4] == "xn--" or unicodedata.category(label[0])[0] == "M":
                    return None
                if any(c in "\u200c\u200d" and not valid_contextj(label, at) for at, c in enumerate(label)):
                    return None
                check_bidi(label)
                label = "xn--" + label.encode("punycode").decode("ascii")
            out.append(label)
    except (UnicodeError, ValueError):  # idna.IDNAError is a UnicodeError
        return None
    return ".".join(out)


def _check_a_labels(host: str) -> None:
    """Refuses a host with an ``xn--`` label that is no valid IDNA A-label (as UTS #46 and so
    browsers do): Punycode that does not decode, or decodes to a label :func:`_uts46_to_ascii`
    does not write back as the same ``xn--`` label (nothing, ASCII only, code points that
    are disallowed or not in their mapped form, a leading combining mark, a joiner out of
    context, a right-to-left label that breaks the Bidi Rule). ``xn--lsa`` is refused as
    its U+0301 is: one host, one answer."""
    for label in host.split("."):
        if not label.startswith("xn--"):
            continue
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
        except (UnicodeError, ValueError, IndexError, OverflowError):
            raise InvalidURL("bad host") from None
        if _uts46_to_ascii(decoded) != label:
            raise InvalidURL("bad host")


def _ends_in_number(host: str) -> bool:
    """WHATWG's test for a host that must parse as IPv4 (last label numeric or hex)."""
    last = host.rpartition(".")[2]
    if last.isdigit():
        return True
    return last[:2] == "0x" and all(c in "0123456789abcdef" for c in last[2:])


def _parse_ipv4_number(part: str) -> int:
    if part[:2] == "0x":
        digits = part[2:]
        return int(digits, 16) if digits else 0
    if len(part) > 1 and part[0] == "0":
        return int(part, 8)
    if not part.isdigit():
        raise ValueError(part)
    return int(part)


def _canonical_ipv4(host: str) -> str:
    """Writes an IPv4 host in dotted-decimal, so each address has one spelling.

    The spellings browsers accept are accepted: ``127.1``, ``0x7f.0.0.1``, ``2130706433``.
    """
    parts = host.split(".")
    try:
        if len(parts) > 4 or "" in parts:
            raise ValueError(host)
        numbers = [_parse_ipv4_number(p) for p in parts]
    except ValueError:
        raise InvalidURL("bad IPv4 address") from None
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidURL("bad IPv4 address")
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n << (8 * (3 - i))
    return ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def _normalize_reg_host(host: str) -> str:
    if "%" in host:
        try:
            host = unquote(host, errors="strict")
        except UnicodeDecodeError:
            raise InvalidURL("bad host") from None
    if not host.isascii():
        host = _idna_encode(host)
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise InvalidURL("missing host")
    if _ends_in_number(host):
        return _canonical_ipv4(host)
    if len(host) > 253 or not _REG_HOST.fullmatch(host):
        if ".." in host or host.startswith("."):
            # The WHATWG host parser (and so a browser's address bar) accepts an empty label,
            # "www.example..de", but no name with one can be looked up: DNS has no empty
            # labels (RFC 1035 §3.1) and getaddrinfo refuses them, so such a link can never be
            # fetched, by a browser or by us. Refused, with its own reason.
            raise InvalidURL("empty label in host")
        raise InvalidURL("bad host")
    if "xn--" in host:
        _check_a_labels(host)
    return host


@lru_cache(maxsize=16384)
def normalize_host(host: str) -> str:
    """A host as written in a URL (no port or userinfo) to its normal form.

    ``[2001:DB8::1]`` → ``[2001:db8::1]``, ``0x7f.1`` → ``127.0.0.1``, ``Bücher.example.`` →
    ``xn--bcher-kva.example``.

    Raises:
        InvalidURL: Not a host a URL may name.
    """
    if host.startswith("["):
        if not host.endswith("]"):
            raise InvalidURL("bad IPv6 address")
        return _normalize_ipv6(host[1:-1])
    if not host:
        raise InvalidURL("missing host")
    return _normalize_reg_host(host)


def _normalize_ipv6(literal: str) -> str:
    import ipaddress  # only IPv6 literals need it, and those are rare

    try:
        address = ipaddress.IPv6Address(literal)
    except ValueError:
        raise InvalidURL("bad IPv6 address") from None
    if address.scope_id is not None:  # a zone id only means something on the local machine
        raise InvalidURL("bad IPv6 address")
    return f"[{address.compressed}]"


@lru_cache(maxsize=16384)
def _normalize_authority(authority: str, scheme: str) -> str:
    """``[userinfo@]host[:port]`` to the normalised ``host[:port]``.

    Cached because links repeat their hosts far more often than not (the same few hosts per
    page), so the IDNA and validation work is paid once per host.
    """
    authority = authority.rpartition("@")[2]
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise InvalidURL("bad IPv6 address")
        host = _normalize_ipv6(authority[1:close])
        rest = authority[close + 1 :]
        if rest and rest[0] != ":":
            raise InvalidURL("bad host")
        port = rest[1:]
    else:
        raw_host, _, port = authority.partition(":")
        if not raw_host:
            raise InvalidURL("missing host")
        host = _normalize_reg_host(raw_host)
    if not port:  # "http://h:/" is the default port (RFC 3986 §6.2.3)
        return host
    if not (port.isascii() and port.isdigit()):
        raise InvalidURL("bad port")
    number = int(port)
    if not 0 < number <= 65535:
        raise InvalidURL("bad port")
    if number == _DEFAULT_PORTS[scheme]:
        return host
    return f"{host}:{number}"


# --- reference resolution ----------------------------------------------------------------------


class _Base(NamedTuple):
    scheme: str
    authority: str | None
    path: str
    query: str | None
    directory: str  # what a relative path is appended to: the base up to its last "/"


@lru_cache(maxsize=1024)
def _split_base(base: str) -> _Base:
    """Parts of a base URL; cached because every link on a page shares the page's base."""
    base = _clean(base)
    match = _URI_PARTS.match(base)
    assert match is not None  # the pattern matches every string
    scheme, authority, path, query = match.groups()
    if scheme is None:
        raise InvalidURL("base URL is not absolute")
    scheme = scheme.lower()
    if authority is None:
        directory = f"{scheme}:{path[: path.rfind('/') + 1]}"
    else:
        directory = f"{scheme}://{authority}{path[: path.rfind('/') + 1] if path else '/'}"
    return _Base(scheme, authority, path, query, directory)


def _resolve(ref: str, base: str) -> str:
    """RFC 3986 §5.2.2 (fragments dropped, dot segments left for the normaliser)."""
    # Most links are absolute, path-absolute, network-path or relative paths: all skip the
    # general parse.
    head = ref[:8].lower()
    if head.startswith(("http://", "https://")):
        return ref
    b = _split_base(base)
    if ref[:1] == "/":
        if ref[1:2] == "/":  # network-path ("//host/x"): the base's scheme, the fragment cut
            return f"{b.scheme}:{ref.partition('#')[0]}"
        if b.authority is None:
            return f"{b.scheme}:{ref}"
        return f"{b.scheme}://{b.authority}{ref}"
    # A relative path ("3.html", "../a/b?c"): no scheme without a colon, no authority
    # without a leading "//"; path and query follow the base's directory as written, the
    # fragment is cut.
    if ref and ref[0] not in "?#" and ":" not in ref:
        return b.directory + ref.partition("#")[0]
    match = _URI_PARTS.match(ref)
    assert match is not None
    scheme, authority, path, query = match.groups()
    if scheme is not None and not _SCHEME.fullmatch(scheme):
        # "a b:c" has no scheme: the colon is part of a relative path (as browsers read it).
        match = _URI_PARTS.match(f"./{ref}")
        assert match is not None
        scheme, authority, path, query = match.groups()
    # A reference with the base's own scheme and no authority ("http:g") is read as relative,
    # the backward-compatible rule of §5.4.2 that browsers follow.
    if scheme is not None and (scheme.lower() != b.scheme or authority is not None):
        return ref
    if authority is not None:
        target = f"{b.scheme}://{authority}{path}"
    else:
        if not path:
            path = b.path
            if query is None:
                query = b.query
        elif path[0] != "/":
            if b.authority is not None and not b.path:
                path = f"/{path}"
            else:
                path = b.path[: b.path.rfind("/") + 1] + path
        prefix = f"{b.scheme}:" if b.authority is None else f"{b.scheme}://{b.authority}"
        target = prefix + path
    return target if query is None else f"{target}?{query}"


def _clean(url: str) -> str:
    url = url.strip(_C0_OR_SPACE)
    if "\t" in url or "\n" in url or "\r" in url:
        url = url.translate(_TAB_NEWLINE)
    if "\\" in url:
        url = _backslashes_to_slashes(url)
    return url


def _backslashes_to_slashes(url: str) -> str:
    """Reads ``\\`` as ``/`` up to the query or fragment, as browsers do in http(s) URLs (WHATWG
    URL standard: the scheme's slashes, the end of the authority and path separators).

    Only http and https are crawled, and a URL of any other scheme is refused whatever its
    backslashes, so the rule is applied to every URL and reference.
    """
    end = len(url)
    for mark in "?#":
        at = url.find(mark)
        if 0 <= at < end:
            end = at
    return url[:end].replace("\\", "/") + url[end:]


# --- public API --------------------------------------------------------------------------------


def normalize(url: str, base: str | None = None, encoding: str | None = None) -> str:
    """Returns the normalised absolute form of ``url``.

    Args:
        url: An absolute URL, or a reference relative to ``base`` (a link's ``href``).
        base: The URL the reference appeared on (or its ``<base href>``), if any.
        encoding: The character encoding of the document the link is on (a Python codec
            name), if not UTF-8: the WHATWG URL standard writes the non-ASCII characters of a
            link's *query* in the document's encoding (the path is always UTF-8), so
            ``?q=日本`` on a Shift_JIS page is ``?q=%93%FA%96%7B``, as a browser requests it.

    Returns:
        The normalised URL: ``http`` or ``https``, no userinfo or fragment, at most
        :data:`MAX_URL_LENGTH` characters, all ASCII. ``normalize`` of the result returns it
        unchanged.

    Raises:
        InvalidURL: The URL cannot be crawled; the message says why in a few words.
    """
    if _compiled is not None:
        found = _compiled(url, base, _normalize_authority, _DROPPED_NAMES)
        if found is not None:
            return found
    return normalize_python(url, base, encoding)


def normalize_python(url: str, base: str | None = None, encoding: str | None = None) -> str:
    """:func:`normalize` by the Python steps alone (the compiled ones, where built, answer the
    plain links and leave the rest to these)."""
    url = _clean(url)
    if len(url) > _MAX_INPUT_LENGTH:
        raise InvalidURL("too long")
    if base is not None:
        # An empty reference is the base itself (RFC 3986 §5.2.2), as href="" is.
        url = _resolve(url, base)
    if encoding is not None and not url.isascii():
        url = _encode_query(url, encoding)
    return _normalize_resolved(url)


# Encodings whose documents' URLs are written in UTF-8 all the same (WHATWG URL standard,
# "encode" with the document's encoding: UTF-16 and "replacement" documents use UTF-8).
_UTF8_FOR_URLS = frozenset({"utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"})
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_ENCODED_BYTES_SAFE = _QUERY_SAFE.replace("%", "")


def _encode_query(url: str, encoding: str) -> str:
    """``url`` with the non-ASCII characters of its query percent-encoded in ``encoding``; a
    character the encoding cannot write becomes ``%26%23N%3B`` (``&#N;``, encoded), as the
    URL standard's "percent-encode after encoding" writes it. The ASCII bytes of a multi-byte
    character (Shift_JIS's 0x5C, 0x40 ...) are left as the normaliser leaves them anywhere in
    a query."""
    question = url.find("?")
    if question < 0:
        return url
    hash_at = url.find("#", question)
    end = len(url) if hash_at < 0 else hash_at
    query = url[question + 1 : end]
    if query.isascii():
        return url
    try:
        import codecs

        name = codecs.lookup(encoding).name
    except LookupError:
        name = encoding  # no Python codec: encodings' own table, or no encoding (UTF-8, as "replacement")
    if name in _UTF8_FOR_URLS or name.startswith("utf"):
        return url
    from beamcrawl.core.content.encodings import single_byte_index

    index = single_byte_index(name)
    if index is not None:  # the Encoding Standard's bytes where Python's codec has others
        return f"{url[: question + 1]}{_NON_ASCII.sub(lambda m: _index_encoded(m.group(), index), query)}{url[end:]}"
    if name == "iso2022_jp":  # likewise, and its state lasts across the query
        from beamcrawl.core.content.encodings import iso2022_jp_encoded

        written = "".join(
            piece
            if isinstance(piece, str)
            else f"%26%23{piece}%3B"
            if isinstance(piece, int)
            else quote(piece, safe=_ENCODED_BYTES_SAFE)
            for piece in iso2022_jp_encoded(query)
        )
        return f"{url[: question + 1]}{written}{url[end:]}"
    if name in ("euc_jp", "cp932", "gb18030", "big5hkscs"):  # likewise: the standard's indexes
        written = _NON_ASCII.sub(lambda m: _standard_encoded(m.group(), name), query)
        return f"{url[: question + 1]}{written}{url[end:]}"

    def one(char: str) -> str:
        try:
            return quote(char.encode(name), safe=_ENCODED_BYTES_SAFE)
        except UnicodeEncodeError:
            return f"%26%23{ord(char)}%3B"

    def encoded(match: re.Match[str]) -> str:
        run = match.group()
        try:
            return quote(run.encode(name), safe=_ENCODED_BYTES_SAFE)
        except UnicodeEncodeError:
            return "".join(map(one, run))

    try:
        query = _NON_ASCII.sub(encoded, query)
    except LookupError:  # pragma: no cover - looked up above
        return url
    return f"{url[: question + 1]}{query}{url[end:]}"


def _standard_encoded(run: str, name: str) -> str:
    """A run of non-ASCII characters written as the Encoding Standard's EUC-JP (``euc_jp``),
    Shift_JIS (``cp932``), gb18030 or Big5 (``big5hkscs``) encoder writes it, percent-encoded
    (``&#N;`` for a character it cannot write)."""
    from beamcrawl.core.content import encodings

    encoded = {
        "euc_jp": encodings.euc_jp_encoded,
        "cp932": encodings.shift_jis_encoded,
        "gb18030": encodings.gb18030_encoded,
        "big5hkscs": encodings.big5_encoded,
    }[name]
    out = []
    for char in run:
        raw = encoded(char)
        out.append(f"%26%23{ord(char)}%3B" if raw is None else quote(raw, safe=_ENCODED_BYTES_SAFE))
    return "".join(out)


def _index_encoded(run: str, index: dict[str, int]) -> str:
    """``run`` written with a single-byte encoding's ``index`` (each character's byte),
    percent-encoded (``&#N;`` for a character it cannot write)."""
    return "".join(f"%{index[char]:02X}" if char in index else f"%26%23{ord(char)}%3B" for char in run)


@lru_cache(maxsize=8192)
def _normalize_resolved(url: str) -> str:
    """:func:`normalize` of a cleaned URL with its reference resolved.

    Cached because a site's pages link the same URLs over and over (its menus, its footer,
    its other sections), whatever each page writes for them: the cache is keyed by the
    resolved URL, so ``"/about"`` on every page of a host is one entry. On simweb's pages
    about a quarter of the links hit it; a hit costs a tenth of the work it saves.
    """
    if not url:
        raise InvalidURL("empty URL")

    colon = url.find(":")
    scheme = url[:colon].lower() if colon > 0 else ""
    if scheme not in _DEFAULT_PORTS:
        if scheme and _SCHEME.fullmatch(scheme):
            raise InvalidURL(f"unsupported scheme {scheme!r}")
        raise InvalidURL("missing scheme")
    # Browsers skip any number of slashes after "http:" (WHATWG "special authority ignore
    # slashes"): "http:/a.example/", "http:///a.example/" and "http:a.example" name a.example.
    # A reference with base of the same scheme and without "//" was resolved as relative.
    rest = url[colon + 1 :].lstrip("/")
    if not rest or rest[0] in "?#":
        raise InvalidURL("missing host")
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]

    # The authority ends at the first "/" or "?", whichever comes first.
    end = len(rest)
    slash = rest.find("/")
    if slash >= 0:
        end = slash
    question = rest.find("?", 0, end)
    if question >= 0:
        end = question
    host = _normalize_authority(rest[:end], scheme)

    path = rest[end:]
    query: str | None = None
    question = path.find("?")
    if question >= 0:
        query = path[question + 1 :]
        path = path[:question]

    if path:
        if _PATH_NEEDS_WORK(path):
            path = _normalize_escapes(path, _PATH_SAFE, _PATH_NEEDS_QUOTING)
        if ";" in path:
            path = _JSESSIONID_PARAM.sub("", path)
        if "/." in path:
            path = _remove_dot_segments(path)
    else:
        path = "/"

    if query:
        if _QUERY_NEEDS_WORK(query):
            query = _normalize_escapes(query, _QUERY_SAFE, _QUERY_NEEDS_QUOTING)
        if _MAYBE_DROPPED(query):
            query = _strip_params(query)

    result = f"{scheme}://{host}{path}" if query is None else f"{scheme}://{host}{path}?{query}"
    if len(result) > MAX_URL_LENGTH:
        raise InvalidURL("too long")
    return result


def clear_caches() -> None:
    """Empties this module's caches (hosts, authorities, bases, resolved URLs).

    For the end of a long run of pages (a parse bundle): a cache's entries are replaced one
    by one as the pages go, so the few thousand it holds at the end were made at every
    moment of the run, among the run's short-lived objects, and each keeps its allocator's
    block of memory (a 16 KiB pool in a 1 MiB arena) from being given back when the rest
    goes. Measured (bench/README.md, "The URL caches pin the fetch stage's memory"): emptied
    at the end of the fetch stage, Python's arenas after it were 200-231 MB against 229-283.
    """
    for cached in (normalize_host, _normalize_authority, _split_base, _normalize_resolved):
        cached.cache_clear()


def fingerprint(normalized_url: str) -> int:
    """The URL's unsigned 64-bit fingerprint.

    Stored keys depend on this value: it is MurmurHash3 x64-128 (seed 0) of the UTF-8 bytes,
    first 64 bits, unsigned, and must never change.
    """
    # mmh3 hashes a str as its UTF-8 bytes (no encode() copy). Keywords, not positions:
    # mmh3 5.3 ignores a positional ``signed`` and answers signed.
    return mmh3.hash64(normalized_url, seed=0, x64arch=True, signed=False)[0]


def fp_hex(fp: int) -> str:
    """A fingerprint as 16 lower-case hex digits, the same for its unsigned value and the
    signed one the Parquet files hold (the row key is ``schemas.records.fp_key``)."""
    return format(fp & 0xFFFF_FFFF_FFFF_FFFF, "016x")


_NORMAL_PREFIX = re.compile(r"(https?)://([^/?#\\]+)")


def host_of(normalized_url: str) -> str:
    """The politeness slot key of a normalised URL: ``host`` or ``host:port``. Never empty.

    A non-default port is kept because ``site.com:8080`` may be a different server (and it is
    what the HTTP ``Host`` header carries). Total: a URL that is not normalised gets the slot
    of its normal form, and one that has none is refused.

    Raises:
        InvalidURL: (a ValueError) the URL cannot be crawled; the message says why.
    """
    match = _NORMAL_PREFIX.match(normalized_url)
    if match is not None:
        # The authority of a normalised URL is its own normal form (a cache hit).
        return _normalize_authority(match.group(2), match.group(1))
    return host_of(normalize(normalized_url))


# --- the compiled steps ----------------------------------------------------------------------

# What _MAYBE_DROPPED looks for at the start of each query parameter, for the compiled steps.
_DROPPED_NAMES = (*_DROPPED_PREFIXES, *sorted(_DROPPED_PARAMS))


def _load_compiled() -> Callable[[str, str | None, Callable[[str, str], str], tuple[str, ...]], str | None] | None:
    """The compiled steps (``_urlnorm.normalize``) when they were built and answer as the
    Python steps do on a few links of every kind they take, else None."""
    try:
        from beamcrawl.core.urls._urlnorm import normalize as compiled
    except ImportError:  # built without a C compiler: the Python steps alone
        return None
    base = "http://Example.com:80/a/b/c.html?q=1"
    probes = ("d.html", "../x/./y?utm=1&a=b", "/p;x=1", "//other.example/a/..", "HTTPS://h.example:444/", "?q", "e#f")
    for ref in probes:
        try:
            if compiled(ref, base, _normalize_authority, _DROPPED_NAMES) not in (None, normalize_python(ref, base)):
                return None
        except InvalidURL:
            return None
    return compiled


_compiled = _load_compiled()
