"""A robots.txt whose rules no index sorts out cheaply, and a path that takes every check to its
work's bound (core/policy/robots_match.py): 20,000 ``Disallow: /*X*Y`` whose two pieces are
all in the path, every X after every Y, so none matches and each must be tried. A check of the
path is refused as the polite answer; a short path is not."""

from __future__ import annotations

import itertools

_FIRST = "".join(map("".join, itertools.product("abcdefghijklm", repeat=3)))[:1000]
_SECOND = "".join(map("".join, itertools.product("nopqrstuvwxyz", repeat=3)))[:1000]
#: The path every rule's pieces are in, in the wrong order (2,001 characters).
CAPPED_PATH = "/" + _FIRST + _SECOND


def capped_robots() -> str:
    """The file: a ``*`` group of 20,000 two-piece rules (about 340 KB)."""
    xs = [_SECOND[i : i + 3] for i in range(0, 999, 3)]
    ys = [_FIRST[i : i + 3] for i in range(0, 999, 3)]
    rules = (f"Disallow: /*{x}*{y}\n" for y, x in itertools.islice(itertools.product(ys, xs), 20_000))
    return "User-agent: *\n" + "".join(rules)
