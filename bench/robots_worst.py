"""The worst cost of one robots.txt check: hostile rule sets against long targets.

Each shape fills a robots.txt up to the size the crawler parses (``MAX_ROBOTS_BYTES``) with
rules for ``*`` (our group), and is checked against a target of up to the longest
URL the crawler keeps (``MAX_URL_LENGTH``), crafted so the rules' literal pieces are all in
the target but none matches (or, for ``matches``, one does, late in the decision order).
Printed: the rules, the file's size, the answer, whether the check reached its bound (and
answered "disallowed" for it), and the best of five of ``RobotsRules.allowed`` (ours and
protego's reading), in ms a check, once the file is parsed and its first check made. The
checks capped are counted over the six made, ours / protego's ("-" where nothing bounds them).

    PYTHONPATH=. python bench/robots_worst.py [--only SHAPE]
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterator

from beamcrawl.core.policy.robots import MAX_ROBOTS_BYTES, RobotsRules
from beamcrawl.core.urls.urlnorm import MAX_URL_LENGTH


def _fill(lines: Iterator[str]) -> tuple[str, int]:
    out, size, count = ["User-agent: *\n"], 14, 0
    for line in lines:
        line += "\n"
        if size + len(line) > MAX_ROBOTS_BYTES:
            break
        out.append(line)
        size += len(line)
        count += 1
    return "".join(out), count


def _halves(n: int) -> tuple[str, str]:
    """Two runs of 3-character words with no word in common: ``a`` for one half of a target,
    ``b`` for the other."""
    a = "".join("".join(w) for w in itertools.product("abcdefghijklm", repeat=3))[:n]
    b = "".join("".join(w) for w in itertools.product("nopqrstuvwxyz", repeat=3))[:n]
    return a, b


def named(n: int = 671) -> tuple[str, int, str]:
    """``Disallow: /*u*v$``: each ``u`` and ``v`` in the target, ``v`` not at its end."""
    half = (n - 1) // 2
    a, b = _halves(half)
    target = "/" + a + b
    us = [b[i : i + 3] for i in range(0, len(b) - 3, 3)]
    vs = [a[i : i + 3] for i in range(0, len(a) - 3, 3)]
    text, count = _fill(f"Disallow: /*{u}*{v}$" for v, u in itertools.product(vs, us))
    return text, count, target


def wrong_order(n: int = MAX_URL_LENGTH - 20) -> tuple[str, int, str]:
    """``Disallow: /*x*y``: every ``x`` after every ``y`` in the target."""
    a, b = _halves(n // 2)
    target = "/" + a + b
    xs = [b[i : i + 3] for i in range(0, len(b) - 3, 3)]
    ys = [a[i : i + 3] for i in range(0, len(a) - 3, 3)]
    text, count = _fill(f"Disallow: /*{x}*{y}" for y, x in itertools.product(ys, xs))
    return text, count, target


def wrong_order_encoded(n: int = MAX_URL_LENGTH - 20) -> tuple[str, int, str]:
    """As ``wrong_order``, each piece percent-encoded in the rule (``%61`` for ``a``)."""
    a, b = _halves(n // 2)
    target = "/" + a + b
    enc = lambda s: "".join(f"%{ord(c):02x}" for c in s)  # noqa: E731
    xs = [b[i : i + 3] for i in range(0, len(b) - 3, 3)]
    ys = [a[i : i + 3] for i in range(0, len(a) - 3, 3)]
    text, count = _fill(f"Disallow: /*{enc(x)}*{enc(y)}" for y, x in itertools.product(ys, xs))
    return text, count, target


def three_pieces(n: int = MAX_URL_LENGTH - 20) -> tuple[str, int, str]:
    """``Disallow: /*x*y*z``: ``x`` and ``y`` in order, ``z`` only before them."""
    third = n // 3
    a = "".join("".join(w) for w in itertools.product("abcdefgh", repeat=3))[:third]
    b = "".join("".join(w) for w in itertools.product("ijklmnop", repeat=3))[:third]
    c = "".join("".join(w) for w in itertools.product("qrstuvwx", repeat=3))[:third]
    target = "/" + c + a + b
    xs = [a[i : i + 3] for i in range(0, len(a) - 3, 3)]
    ys = [b[i : i + 3] for i in range(0, len(b) - 3, 3)]
    zs = [c[i : i + 3] for i in range(0, len(c) - 3, 3)]
    text, count = _fill(
        f"Disallow: /*{x}*{y}*{z}" for z, x, y in zip(itertools.cycle(zs), *zip(*itertools.product(xs, ys)))
    )
    return text, count, target


def many_stars(n: int = MAX_URL_LENGTH - 20) -> tuple[str, int, str]:
    """``Disallow: /*a*a...*a*b*c``: hundreds of pieces a rule, each found but the last."""
    target = "/" + "c" * 10 + "a" * (n - 12) + "b"
    text, count = _fill("Disallow: /" + "*a" * (1 + i % 400) + "*b" * (1 + i // 400) + "*c" for i in range(10**6))
    return text, count, target


def repeated(n: int = MAX_URL_LENGTH - 20) -> tuple[str, int, str]:
    """``Disallow: /*a*b$`` on every line: one rule, written again and again."""
    return _fill(itertools.repeat("Disallow: /*a*b$")) + ("/" + "ab" * (n // 2) + "a",)


def matches(n: int = MAX_URL_LENGTH - 20) -> tuple[str, int, str]:
    """``wrong_order`` with one rule that matches, the last in the decision order."""
    text, count, target = wrong_order(n)
    first = f"Disallow: /*{target[1:4]}\n"
    text, count = _fill(itertools.chain([first.strip()], text.splitlines()[1:]))
    return text, count, target


SHAPES: dict[str, Callable[[], tuple[str, int, str]]] = {
    "named": named,
    "wrong_order": wrong_order,
    "wrong_order_encoded": wrong_order_encoded,
    "three_pieces": three_pieces,
    "many_stars": many_stars,
    "repeated": repeated,
    "matches": matches,
}


def _capped(rules: RobotsRules) -> str:
    """How many checks reached their bound, ours and protego's ("-" before the bound was)."""
    asked = [rules._rules(), rules._protego_asked()]
    return "/".join(str(getattr(a, "capped", "-")) for a in asked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SHAPES))
    args = parser.parse_args()
    print(
        f"{'shape':<20} {'rules':>7} {'KB':>5} {'target':>6} {'answer':>7} {'capped':>7} {'parse ms':>9} {'ms a check':>10}"
    )
    for name, shape in SHAPES.items():
        if args.only and name != args.only:
            continue
        text, count, target = shape()
        url = "http://h.test" + target
        start = time.perf_counter()
        rules = RobotsRules.parse(text, "beamcrawl")
        answer = rules.allowed(url)
        parse_ms = (time.perf_counter() - start) * 1e3
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            rules.allowed(url)
            best = min(best, time.perf_counter() - start)
        print(
            f"{name:<20} {count:>7} {len(text) // 1024:>5} {len(target):>6} {str(answer):>7} {_capped(rules):>7} "
            f"{parse_ms:>9.1f} {best * 1e3:>10.2f}"
        )


if __name__ == "__main__":
    main()
