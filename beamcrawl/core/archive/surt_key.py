"""The SURT key of a URL, as replay tools look it up, without the surt library's detour.

A CDXJ line's key must be what pywb and cdxj-indexer compute for the URL being looked up:
``surt.surt(url)`` with its default canonicalisation (Internet Archive's and Google's rules).
That function takes some 16 µs a URL here: it parses the URL into an object, unescapes and
re-escapes every part until nothing changes, tries IP address forms (asking the resolver
about any host made of digits and dots), runs session-id regexes, and joins bytes piece by
piece; the WARC stage asks it once a page.

The URLs the crawler archives are already normalised (``core/urls/urlnorm.py``): a lowercase
scheme and host, no fragment, percent-encoding where the URL standard wants it. For such a
URL most of those rules do nothing, and what is left is short: drop a default port and a
leading ``www`` label (``www2.`` too), reverse the host's labels with commas, lowercase the
path and drop its trailing slash (unless it is ``/``), and for a query, the surt library's
own session-id stripping, lowercasing and argument ordering. :func:`surt_key` takes that
short way for a URL whose every part is in a grammar where the two agree by construction:

- ``http`` or ``https``; no user info;
- a host of ASCII letters, digits, ``-`` and ``_`` in non-empty labels, the last one not all
  digits (so never an IP address in any of the forms the library would resolve);
- an optional port, 1 to 65535 without leading zeros;
- a path of unreserved characters, sub-delimiters, ``:`` and ``@`` (no ``%``, parentheses or
  whitespace), with no empty, ``.`` or ``..`` segment before its last;
- an optional query of the same characters, ``/`` and ``?`` (no ``%``);
- no fragment.

Anything else goes to the library, as before (and to the URL itself where the library
fails, as cdxj-indexer does). Tests compare the two on generated URLs inside the grammar and
on its edges.
"""

from __future__ import annotations

import re

import surt
from surt.IAURLCanonicalizer import alphaReorderQuery
from surt.URLRegexTransformer import stripQuerySessionID

__all__ = ["surt_key", "short_key"]

_PATH_CHARS = r"[A-Za-z0-9\-._~!$&'*+,;=:@]"
_SHORT = re.compile(
    r"(https?)://"
    r"((?:[a-z0-9_-]+\.)*[a-z0-9_-]*[a-z_-][a-z0-9_-]*)"  # the last label is not all digits
    r"(?::([1-9][0-9]{0,4}))?"
    rf"((?:/{_PATH_CHARS}+)*/{_PATH_CHARS}*)"
    r"(?:\?([A-Za-z0-9\-._~!$&'()*+,;=:@/?]*))?"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_WWW = re.compile(r"www[0-9]*\.")  # the label surt's host massage drops
_DOT_SEGMENT = re.compile(r"/\.\.?(?:/|$)")


def short_key(url: str) -> str | None:
    """The SURT key of ``url`` the short way, or None when ``url`` is outside the grammar
    where the short way is the library's (see the module docstring)."""
    m = _SHORT.fullmatch(url)
    if m is None:
        return None
    scheme, host, port, path, query = m.groups()
    if _DOT_SEGMENT.search(path):
        return None  # the library resolves dot segments
    www = _WWW.match(host)
    if www:
        host = host[www.end() :]
    key = ",".join(reversed(host.split(".")))
    if port is not None:
        number = int(port)
        if number > 65535:
            return None
        if number != _DEFAULT_PORTS[scheme]:
            key += f":{number}"
    path = path.lower()
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    key += ")" + path
    if query:
        # The library's own query rules, on the same bytes: session ids out, lowercase,
        # arguments sorted (an argument without '=' kept so).
        cut = alphaReorderQuery(stripQuerySessionID(query.encode("ascii")).lower())
        if cut:
            key += "?" + cut.decode("ascii")
    return key


def surt_key(url: str) -> str:
    """The SURT sort key of a URL, as pywb computes it for a lookup.

    The short way when the URL is in its grammar; otherwise ``surt.surt(url)``, falling back
    to the URL itself when surt cannot parse it (as cdxj-indexer does), so one odd URL never
    costs a whole index.
    """
    key = short_key(url)
    if key is not None:
        return key
    try:
        long_key: str = surt.surt(url)
    except (ValueError, IndexError, TypeError, AttributeError):  # surt's failure modes on bad input
        return url
    return long_key
