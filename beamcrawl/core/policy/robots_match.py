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
rule is filed under its first run, its last if anchored, or one short piece of its literal
text, whichever few other rules share, and a target is checked only against the rules whose
key it holds, still in the order they decide. Without it each rule was tried in turn: 27,000
``Disallow: /*x{i}`` (500 KB, a size RFC 9309 §2.5 says to parse) read a 2 KB target 27,000
times, ~35 ms a check. A rule written more than once is kept once.

No index tells, without trying them, which of many rules whose pieces a target holds hold
them in the right order (25,600 ``Disallow: /*x*y``, every ``x`` after every ``y`` in a 2 KB
target, took 126 ms a check). So a check's work is bounded (:func:`check_work`: a step for
each rule taken, one for each run searched, :data:`CHECK_WORK` and one a character of the
target in all), and a check that reaches the bound before its answer answers "disallowed",
the polite answer, and is counted (``capped``). No group of fewer than :data:`SIEVE_FROM`
rules of a few runs each reaches it.

Pure functions: no I/O, no Beam.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

__all__ = [
    "CAPPED",
    "CHECK_WORK",
    "SIEVE_FROM",
    "PathPattern",
    "RuleMatcher",
    "Sieve",
    "check_work",
    "first_match",
    "match_form",
    "rule_matches",
    "rule_octets",
]

# How many rules a group has before they are sieved: fewer are tried in turn about as fast
# as a long target's pieces are listed (~0.5 ms for 2 KB).
SIEVE_FROM = 500
# The longest piece a rule is filed under, and how many of each run's pieces are weighed.
_PIECE = 6
_PIECES_WEIGHED = 8
# Up to how many candidates a sieve sorts at once; more are merged in order as they are taken.
_SORTED_UP_TO = 2_000
#: The steps one check may take (a rule taken, a run searched) besides one a character of
#: its target (:func:`check_work`).
CHECK_WORK = 2_000
#: What :func:`first_match` gives for a check that reached its bound before an answer.
CAPPED = -1


def check_work(target: str) -> int:
    """The most steps a check of ``target`` takes: :data:`CHECK_WORK` and one a character.

    A rule that can match ``target`` has at most one run a character of it and one more, so
    any one of them fits; what no file of rules can do is make a check try thousands.
    """
    return CHECK_WORK + len(target)


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

    __slots__ = ("allow", "anchored", "head", "key", "literal", "octets", "runs")

    def __init__(self, allow: bool, path: str) -> None:
        self.allow = allow
        self.anchored = path.endswith("$")
        runs = [match_form(run) for run in (path[:-1] if self.anchored else path).split("*")]
        self.octets = sum(map(len, runs)) + len(runs) - 1 + self.anchored
        # An empty run between two others ("**") matches wherever the search stands: it is
        # counted in the octets, not searched.
        self.runs = [runs[0], *(run for run in runs[1:-1] if run), runs[-1]] if len(runs) > 2 else runs
        self.head = self.runs[0]
        self.literal = sum(map(len, self.runs))
        self.key: tuple[object, ...] = (self.anchored, *self.runs)

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

    A pattern matches only a target that starts with its first run, ends with its last if
    it is anchored (``$``), and holds each of its runs. So each pattern is filed under one
    key that few other patterns share: its first run (looked up among the target's
    prefixes), its last run if anchored (among the target's suffixes), or a piece of a run
    (at most :data:`_PIECE` characters, of those weighed the one fewest other patterns
    share, looked up among the target's pieces of that size). A target is given the
    patterns filed under the keys it holds. A pattern with no literal character is given to
    every target.

    Args:
        patterns: each pattern's literal runs (its text between ``*``, in the form it is
            compared in) and whether it is anchored, in the order the patterns decide.
    """

    __slots__ = ("_always", "_by_head", "_by_piece", "_by_tail", "_heads", "_lengths", "_tails")

    def __init__(self, patterns: Iterable[tuple[Sequence[str], bool]]) -> None:
        weighed: list[tuple[str, str, list[str]]] = []
        for runs, anchored in patterns:
            pieces: list[str] = []
            for run in runs:
                if len(run) <= _PIECE:
                    if run:
                        pieces.append(run)
                    continue
                starts = range(len(run) - _PIECE + 1)
                pieces.extend(run[i : i + _PIECE] for i in starts[:: max(1, len(starts) // _PIECES_WEIGHED)])
            weighed.append((runs[0] if runs else "", runs[-1] if anchored and runs else "", pieces))
        # How many patterns weigh each key (a pattern weighing a piece twice counts twice: the
        # sieve is as exact either way). Every target starts and ends with "": no key.
        shared = Counter(itertools.chain.from_iterable(pieces for _, _, pieces in weighed))
        heads = Counter(head for head, _, _ in weighed)
        tails = Counter(tail for _, tail, _ in weighed)
        by_head: dict[str, list[int]] = {}
        by_tail: dict[str, list[int]] = {}
        by_piece: dict[str, list[int]] = {}
        always: list[int] = []
        for index, (head, tail, pieces) in enumerate(weighed):
            keys = [(shared[piece], 2, piece, by_piece) for piece in pieces]
            if head:
                keys.append((heads[head], 0, head, by_head))
            if tail:
                keys.append((tails[tail], 1, tail, by_tail))
            if keys:
                _, _, key, filed = min(keys, key=lambda k: k[:2])
                filed.setdefault(key, []).append(index)
            else:
                always.append(index)
        self._by_head, self._by_tail, self._by_piece, self._always = by_head, by_tail, by_piece, always
        self._heads = sorted({len(key) for key in by_head})
        self._tails = sorted({len(key) for key in by_tail})
        self._lengths = sorted({len(key) for key in by_piece})

    def candidates(self, target: str) -> Iterator[int]:
        """The indexes (ascending) of the patterns that could match ``target``: every one
        that does is among them."""
        end = len(target)
        found = [self._always] if self._always else []
        by_head, by_tail, by_piece = self._by_head, self._by_tail, self._by_piece
        found.extend(by_head[target[:size]] for size in self._heads if size <= end and target[:size] in by_head)
        found.extend(
            by_tail[target[end - size :]] for size in self._tails if size <= end and target[end - size :] in by_tail
        )
        for size in self._lengths:
            found.extend(by_piece[p] for p in {target[i : i + size] for i in range(end - size + 1)} if p in by_piece)
        if sum(map(len, found)) <= _SORTED_UP_TO:
            return iter(sorted(itertools.chain.from_iterable(found)))
        # Many: they are taken in order as far as a check goes (CHECK_WORK), not all sorted.
        return heapq.merge(*found)


def first_match(candidates: Iterable[int], attempt: Callable[[int], int], work: int) -> tuple[int | None, int]:
    """The first of ``candidates`` that matches, and the steps taken to find it.

    Args:
        candidates: pattern indexes, in the order the patterns decide.
        attempt: for a pattern's index, the runs its match searches (0 when it is ruled out
            without a search), negative when it matches.
        work: the most steps the check may take: a step for each candidate taken and each
            run searched.

    Returns:
        ``(index, steps)``: ``index`` is None when no candidate matches, and :data:`CAPPED`
        when the check reached ``work`` before its answer was known.
    """
    steps = 0
    for index in candidates:
        if steps >= work:
            return CAPPED, steps
        searched = attempt(index)
        if searched < 0:
            return index, steps - searched
        steps += searched + 1
    return None, steps


class RuleMatcher:
    """One group's ``Allow`` and ``Disallow`` rules, ready to decide request targets.

    Rules written more than once (the same runs, anchored or not) are kept once, as the
    first of them in the order they decide: the others never decide. A check takes at most
    :data:`CHECK_WORK` steps (a rule taken, a run searched) and one a character of the
    target (:func:`check_work`); past that it answers "disallowed", the polite answer, and counts it in :attr:`capped`.

    Args:
        rules: ``(allow, path)`` pairs in any order, ``path`` as the file writes it (its value
            stripped). Empty paths are dropped: they match nothing.

    Attributes:
        steps: the work of all checks so far, in :func:`first_match`'s steps.
        capped: checks answered "disallowed" because they reached their work's bound.
    """

    __slots__ = ("_heads", "_rules", "_sieve", "capped", "steps")

    def __init__(self, rules: Iterable[tuple[bool, str]]) -> None:
        kept = [_Rule(allow, path) for allow, path in rules if path]
        kept.sort(key=lambda r: (-r.octets, not r.allow))
        first: dict[tuple[object, ...], _Rule] = {}
        for rule in kept:
            first.setdefault(rule.key, rule)
        kept = list(first.values())
        self._rules = tuple(kept)
        self._heads = tuple({r.head for r in kept})
        self._sieve = Sieve((r.runs, r.anchored) for r in kept) if len(kept) >= SIEVE_FROM else None
        self.steps = 0
        self.capped = 0

    def __len__(self) -> int:
        return len(self._rules)

    def allowed(self, target: str) -> bool:
        """Whether ``target`` (a path with optional query, no fragment) may be fetched."""
        if not self._rules:
            return True
        target = match_form(target)
        if not target.startswith(self._heads):
            return True
        rules: Iterable[_Rule] = self._rules
        if self._sieve is not None:
            rules = (self._rules[index] for index in self._sieve.candidates(target))
        # first_match's loop, written out: it is on every URL's path.
        size, steps, work = len(target), 0, check_work(target)
        for rule in rules:
            if steps >= work:
                self.steps += steps
                self.capped += 1
                return False
            if rule.literal > size or not target.startswith(rule.head):
                steps += 1
                continue
            steps += len(rule.runs) + 1
            if rule.matches(target):
                self.steps += steps - 1
                return rule.allow
        self.steps += steps
        return True
