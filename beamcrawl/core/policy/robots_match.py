"""Allow and Disallow rules matched as RFC 9309 §2.2.2 says: octets compared, longest wins.

:class:`RuleMatcher` decides whether a request target (a path and query) may be fetched
under one group's ``Allow`` and ``Disallow`` rules (``robots.py`` selects the group):

- a rule matches when its path matches the start of the target, where ``*`` stands for any
  run of characters and a final ``$`` for the target's end;
- of the rules that match, the one with the most octets decides; an ``Allow`` wins a tie;
  no rule matching allows. An empty path matches nothing (``Disallow:`` allows all);
- both sides are compared in one normal form (:func:`match_form`): a character outside
  ASCII, a control character, a space and the few characters RFC 3986 allows nowhere
  (``"<>\\^`{|}``) are percent-encoded as UTF-8, an escape's hex digits are upper-cased, an
  escaped *unreserved* character is decoded (``%7E`` is ``~``, ``%62`` is ``b``), and every
  other escape and character stays as written. So ``?`` and ``%3F`` stay different, as do
  ``=`` and ``%3D``: an escaped reserved character is not the character (RFC 3986 §2.2),
  and RFC 9309's own table keeps ``/foo/bar?baz=quz`` as it is while ``/foo/bar/%62%61%7A``
  becomes ``/foo/bar/baz``. The two characters a rule gives a meaning are the exception
  (§2.2.3): a target's ``*`` and ``$`` are compared as ``%2A`` and ``%24``, which is how a
  rule names them, and a ``$`` inside a rule (not at its end) is a ``$``. A rule's octets are
  counted in that form, its ``*`` and final ``$`` included, as Google's reference parser
  counts them.

Why not protego's matching alone, which ``RobotsRules`` used before (it now asks both, and
fetches what both allow): protego percent-encodes a pattern's reserved characters before it
counts its length (``/?`` counted four octets,
``/a&b`` six), so an ``Allow`` holding a ``?`` or an ``&`` beat a longer ``Disallow``, and
the crawler fetched what the file forbids (``Disallow: /*x`` with ``Allow: /?`` let
``/?x`` through). It also treated ``?`` and ``%3F`` as one character, so ``Allow: /a?``
allowed ``/a%3Fb`` under ``Disallow: /a``.

Matching takes one pass over the rules in the order they decide (most octets first, an
``Allow`` before a ``Disallow`` of the same length), and stops at the first that matches;
``*`` is matched by leftmost search of each literal run (which is exact for patterns whose
only wildcard is ``*``), so a hostile pattern costs at most its length times the target's,
never a backtracking search. Targets that no rule's literal head starts are answered by one
``str.startswith`` over all the heads.

A group of many rules (:data:`SIEVE_FROM` and more) is first sieved (:class:`Sieve`): each
rule is filed under one short piece of its literal text, one that few other rules share, and
a target is checked only against the rules whose piece it contains, still in the order they
decide. Without it each rule was tried in turn: 27,000 ``Disallow: /*x{i}`` (500 KB, a size
RFC 9309 §2.5 says to parse) read a 2 KB target 27,000 times, ~35 ms a check.

Pure functions: no I/O, no Beam.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["SIEVE_FROM", "PathPattern", "RuleMatcher", "Sieve", "match_form", "rule_matches", "rule_octets"]

# How many rules a group has before they are sieved: fewer are tried in turn about as fast
# as a long target's pieces are listed (~0.5 ms for 2 KB).
SIEVE_FROM = 500
# The longest piece a rule is filed under, and how many of each run's pieces are weighed.
_PIECE = 6
_PIECES_WEIGHED = 8

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX = frozenset("0123456789ABCDEFabcdef")
# Strings already in the normal form: unreserved and reserved characters only, no escape.
_PLAIN = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!&'()+,;=]*").fullmatch
# What stays as it is outside an escape: unreserved and reserved (RFC 3986 §2.2, §2.3), but
# "*" and "$", which are compared as their escapes (RFC 9309 §2.2.3).
_KEPT = _UNRESERVED | frozenset(":/?#[]@!&'()+,;=")


def match_form(text: str) -> str:
    """``text`` (a rule's path or a request target) in the form rules are compared in.

    Examples: ``/%7ejoe`` → ``/~joe``; ``/ä`` → ``/%C3%A4``; ``/a%2fb`` → ``/a%2Fb``;
    ``/a b`` → ``/a%20b``; ``/a?b=%3d`` → ``/a?b=%3D``; ``/a*$`` → ``/a%2A%24``; a ``%``
    that starts no escape → ``%25``. A rule's path is put in this form a run between its
    ``*`` at a time, without its final ``$``.
    """
    if _PLAIN(text):
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "%":
            if i + 2 < n and text[i + 1] in _HEX and text[i + 2] in _HEX:
                octet = text[i + 1 : i + 3].upper()
                char = chr(int(octet, 16))
                out.append(char if char in _UNRESERVED else f"%{octet}")
                i += 3
                continue
            out.append("%25")
        elif c in _KEPT:
            out.append(c)
        else:
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
        i += 1
    return "".join(out)


class _Rule:
    """One rule in its matching form: the literal runs between its ``*``, and whether it ends
    at the target's end."""

    __slots__ = ("allow", "anchored", "head", "octets", "runs")

    def __init__(self, allow: bool, path: str) -> None:
        self.allow = allow
        self.anchored = path.endswith("$")
        self.runs = [match_form(run) for run in (path[:-1] if self.anchored else path).split("*")]
        self.octets = sum(map(len, self.runs)) + len(self.runs) - 1 + self.anchored
        self.head = self.runs[0]

    def matches(self, target: str) -> bool:
        """Whether the rule matches ``target`` (in the matching form), from its start."""
        runs = self.runs
        if len(runs) == 1:
            return target == self.head if self.anchored else target.startswith(self.head)
        if not target.startswith(self.head):
            return False
        pos = len(self.head)
        for run in runs[1:-1]:
            found = target.find(run, pos)
            if found < 0:
                return False
            pos = found + len(run)
        last = runs[-1]
        if self.anchored:
            return len(target) - len(last) >= pos and target.endswith(last)
        return not last or target.find(last, pos) >= 0


def rule_matches(path: str, target: str) -> bool:
    """Whether one rule's ``path`` (as the file writes it) matches ``target`` (a path with
    optional query), as an ``Allow`` or ``Disallow`` of that path would. For records that
    borrow robots.txt's paths (``Content-Usage``); an empty path matches nothing."""
    return bool(path) and _Rule(True, path).matches(match_form(target))


def rule_octets(path: str) -> int:
    """How many octets a rule's ``path`` counts for, longest match wins (in the match form)."""
    return _Rule(True, path).octets if path else 0


class PathPattern:
    """One rule's path, put in its matching form once, for records that match many targets
    against many such paths (``Content-Usage``): :func:`rule_matches` and :func:`rule_octets`
    without the path read again, nor the target, for each pair (:meth:`matches` takes a
    target already in :func:`match_form`)."""

    __slots__ = ("_rule", "octets")

    def __init__(self, path: str) -> None:
        self._rule = _Rule(True, path) if path else None
        self.octets = self._rule.octets if self._rule is not None else 0

    def matches(self, form: str) -> bool:
        """Whether the path matches ``form``, a target in :func:`match_form` (an empty path
        matches nothing)."""
        return self._rule is not None and self._rule.matches(form)


class Sieve:
    """Which of many patterns could match a target, found without trying each.

    A pattern matches only a target that holds each of its literal runs, so each pattern is
    filed under one piece of a run (at most :data:`_PIECE` characters, the first of those
    weighed that fewest other patterns share), and a target is given the patterns filed under the
    pieces it holds. A pattern with no literal character is given to every target.

    Args:
        patterns: each pattern's literal runs (its text between ``*``, in the form it is
            compared in), in the order the patterns decide.
    """

    __slots__ = ("_always", "_filed", "_lengths")

    def __init__(self, patterns: Iterable[Sequence[str]]) -> None:
        weighed: list[list[str]] = []
        for runs in patterns:
            pieces: list[str] = []
            for run in runs:
                if len(run) <= _PIECE:
                    if run:
                        pieces.append(run)
                    continue
                starts = range(len(run) - _PIECE + 1)
                pieces.extend(run[i : i + _PIECE] for i in starts[:: max(1, len(starts) // _PIECES_WEIGHED)])
            weighed.append(pieces)
        # How many patterns weigh each piece (a pattern weighing it twice counts twice: the
        # sieve is as exact either way).
        shared = Counter(itertools.chain.from_iterable(weighed))
        filed: dict[str, list[int]] = {}
        always: list[int] = []
        for index, pieces in enumerate(weighed):
            if pieces:
                filed.setdefault(min(pieces, key=shared.__getitem__), []).append(index)
            else:
                always.append(index)
        self._filed = filed
        self._always = always
        self._lengths = sorted({len(key) for key in filed})

    def candidates(self, target: str) -> list[int]:
        """The indexes (ascending) of the patterns that could match ``target``: every one
        that does is among them."""
        filed = self._filed
        found = list(self._always)
        end = len(target)
        for size in self._lengths:
            for piece in {target[i : i + size] for i in range(end - size + 1)}:
                if piece in filed:
                    found.extend(filed[piece])
        found.sort()
        return found


class RuleMatcher:
    """One group's ``Allow`` and ``Disallow`` rules, ready to decide request targets.

    Args:
        rules: ``(allow, path)`` pairs in any order, ``path`` as the file writes it (its value
            stripped). Empty paths are dropped: they match nothing.
    """

    __slots__ = ("_heads", "_rules", "_sieve")

    def __init__(self, rules: Iterable[tuple[bool, str]]) -> None:
        kept = [_Rule(allow, path) for allow, path in rules if path]
        kept.sort(key=lambda r: (-r.octets, not r.allow))
        self._rules = tuple(kept)
        self._heads = tuple({r.head for r in kept})
        self._sieve = Sieve(r.runs for r in kept) if len(kept) >= SIEVE_FROM else None

    def __len__(self) -> int:
        return len(self._rules)

    def allowed(self, target: str) -> bool:
        """Whether ``target`` (a path with optional query, no fragment) may be fetched."""
        if not self._rules:
            return True
        target = match_form(target)
        if not target.startswith(self._heads):
            return True
        rules = self._rules
        if self._sieve is not None:
            rules = tuple(rules[i] for i in self._sieve.candidates(target))
        for rule in rules:
            if target.startswith(rule.head) and rule.matches(target):
                return rule.allow
        return True
