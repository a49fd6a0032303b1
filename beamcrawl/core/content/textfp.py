"""Text fingerprints for near-duplicate detection: visible text, features, 64-bit simhash,
and the permuted tables that find fingerprints within 3 bits (pure; no Beam).

A page's fingerprint is Charikar's simhash of its visible text, as Manku, Jain and Das
Sarma use it for crawling (docs/ARCHITECTURE.md §1 step 7):

1. **Visible text.** The HTML is parsed with selectolax (Lexbor) and everything a reader
   does not read as the page's content is removed first: scripts, styles, forms, hidden
   elements, navigation, sidebars, cookie and ad slots (by tag, ARIA role, or a class/id
   word such as ``nav``, ``sidebar``, ``ad``), and page-level ``<header>``/``<footer>``
   (those inside ``<article>`` or ``<main>`` stay: they carry bylines and notes). A site's
   template then weighs nothing, so two articles in one template do not look alike.
2. **Features.** Lower-cased word tokens (``\\w+``), English stop words and one-character
   tokens out, then overlapping shingles of :data:`SHINGLE_WORDS` words, each weighted by
   how often it occurs. Shingles rather than single words: two different texts drawn from
   one vocabulary have nearly the same bag of words but few common word pairs. Pairs rather
   than longer runs: a one-word edit changes ``2 × width`` shingles, so the shorter the
   shingle, the fewer bits an edit moves (measured on simweb, ``bench/simhash_bench.py
   --hosts 150 --pages 20 --seed 11``: near-copy recall 0.970 with 3-word shingles, 0.985
   with pairs, and on 200 hosts the closest two different texts stayed 7 bits apart
   either way; giving words more weight found more copies still but brought different
   texts to within 4 bits).
3. **Simhash.** Each feature is hashed to 64 bits with MurmurHash3 (``mmh3.hash64``, x64,
   seed 0, first word, unsigned); bit ``b`` of the fingerprint is set when the features
   whose hash has bit ``b`` set carry more than half of the total weight. The reference is
   the ``simhash`` package (:func:`simhash_reference`); :func:`simhash_features` computes
   the same bits with numpy, several times faster, and the tests check that both agree
   bit for bit. A crawled page's fingerprint (:func:`text_simhash`) is computed from its
   words by the compiled ``_simhash`` module (``_simhash.c``: the shingles, MurmurHash3
   and the bit counts in C, a fifth to a sixth of the Python path's cost; a text's words
   are split and filtered there too), checked on import against the Python path it
   replaces, which runs where the module was not built.

Pages with fewer than :data:`MIN_FEATURES` distinct features get no simhash (None): a
handful of words ("Loading…", "Please enable JavaScript") is the same on countless
unrelated pages and must not make them near copies of each other.

**Permuted tables (Manku et al. §3).** Two fingerprints are near copies when at most
:data:`MAX_DISTANCE` (3) of their 64 bits differ. The 64 bits are cut into six blocks
(11, 11, 11, 11, 10, 10 bits); three differing bits touch at most three blocks, so two
near fingerprints agree exactly on at least three blocks. Each of the C(6, 3) = 20 tables
moves one choice of three blocks to the front (:func:`permute`); in one of the 20, any
two near fingerprints share the leading 31 to 33 bits, and that prefix is the table's
row key (:func:`table_key`). A lookup is then an exact match on a prefix per table plus a
Hamming check of the few fingerprints in that row.

Why 20 tables and not fewer. Tables trade storage and writes (one row cell per table per
stored page) against the fingerprints read per lookup (stored pages / 2^prefix bits per
table):

============================  ======  ===========  ================================
layout                        tables  prefix bits  read per lookup, 10^9 stored
============================  ======  ===========  ================================
4 blocks of 16, choose 1      4       16           4 × 15,000 = 61,000 fingerprints
5 blocks (13,13,13,13,12), 2  10      25–26        10 × ~20 = ~200
6 blocks (11×4, 10×2), 3      20      31–33        20 × ~0.3 = ~6
============================  ======  ===========  ================================

A crawl that keeps 10^8–10^10 pages needs the 20-table layout (the paper's own choice at
8 billion); the 4-table one is only reasonable below ~10^6. Between them, the 10-table layout
(:data:`TEN_TABLES`) reads ~2 fingerprints a lookup at 10^7 stored pages and ~20 at 10^8, for
half the rows a page: what a store with one writer at a time is made for (the embedded store,
where every row is a B-tree insert under the file's single write lock). The layout is part of
the stored keys, so a store keeps the one it began with: it is recorded in the store when the
first round chooses it (:func:`layout_name`, :func:`parse_layout`; ``state/simhash_layout.py``),
and a store holding simhash rows from before that record used :data:`LAYOUT`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, combinations, filterfalse
from typing import Callable, Iterable, Mapping, Sequence

import mmh3
import numpy as np
from selectolax.lexbor import LexborHTMLParser, LexborNode

from beamcrawl.core.content.htmlbounds import scan
from beamcrawl.core.content.sniff import decode_html

__all__ = [
    "COMPILED",
    "LAYOUT",
    "LAYOUTS",
    "MAX_DISTANCE",
    "MIN_FEATURES",
    "SHINGLE_WORDS",
    "STOP_WORDS",
    "TEN_TABLES",
    "WORD_WEIGHT",
    "TableLayout",
    "feature_hash",
    "features",
    "hamming",
    "html_simhash",
    "layout_name",
    "parse_layout",
    "permutations",
    "permute",
    "prefix_bits",
    "shares_a_table",
    "shingles",
    "simhash_features",
    "simhash_hex",
    "simhash_reference",
    "table_key",
    "table_keys",
    "table_range",
    "text_simhash",
    "tokens",
    "tree_simhash",
    "tree_text",
    "unpermute",
    "visible_text",
]

#: Fingerprints at most this many bits apart are near copies (Manku et al.: 64 bits, k = 3).
MAX_DISTANCE = 3
#: Words per shingle (feature).
SHINGLE_WORDS = 2
#: Weight of one occurrence of a word, against 1 for one occurrence of a shingle.
WORD_WEIGHT = 1
#: Fewer distinct features than this (words and shingles; about eight distinct words): no
#: simhash, too little text to tell pages apart. An app shell's "You need to enable
#: JavaScript to run this app" (5 words, 9 features) is the same on unrelated sites.
MIN_FEATURES = 16
#: At most this much HTML is parsed for text (as for links: bounded work per page).
MAX_TEXT_BYTES = 4 * 1024 * 1024

_BITS = 64
_MASK = (1 << _BITS) - 1

# Elements that are never the page's readable content.
_NOISE_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "canvas",
    "object",
    "embed",
    "iframe",
    "frame",
    "frameset",
    "nav",
    "aside",
    "form",
    "select",
    "button",
    "dialog",
)
_NOISE_ROLES = ("navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog")
# The elements removed wherever they are, in one selector for one pass of the selector
# engine, which tests every element against every selector of the list: the role tests sit
# behind one [role], which rules all eight out at once for the many elements without one.
_ALWAYS_NOISE = (
    ", ".join(_NOISE_TAGS)
    + ", [hidden], [aria-hidden=true], [role]:is("
    + ", ".join(f"[role={role}]" for role in _NOISE_ROLES)
    + ")"
)
# A class or id made of one of these words (split on space, '-' and '_') marks page chrome
# or an ad slot. Whole words only: "ad" must not match "shadow" or "header" match "subheader".
_NOISE_WORDS = frozenset(
    """
    nav navbar navigation menu menubar sidebar breadcrumb breadcrumbs masthead topbar
    footer header cookie cookies consent gdpr banner ad ads adslot advert adverts
    advertisement advertising sponsor sponsored promo share sharing social skip skiplink
    """.split()
)
# Runs of two or more word characters: the \w+ tokens but the one-character ones, found by
# the regex engine instead of a length test per token.
_WORD2 = re.compile(r"\w{2,}")
# The ASCII bytes that are not word characters (all but letters, digits and "_") mapped to a
# space and every other byte to itself: in the UTF-8 of a text, bytes.split() then cuts at
# each of them, the places where no \w run can continue (:func:`_utf8_words`).
_ASCII_BREAKS = bytes(c if c >= 0x80 or chr(c).isalnum() or c == 0x5F else 0x20 for c in range(256))

#: English function words left out of features (they say nothing about what a page is).
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having he
    her here hers herself him himself his how i if in into is isn it its itself just let me
    more most mustn my myself no nor not now of off on once only or other ought our ours
    ourselves out over own same shan she should shouldn so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    upon us very was wasn we were weren what when where which while who whom why will with
    won would wouldn you your yours yourself yourselves also may might must shall via per
    s t d ll m o re ve y
    """.split()
)
# The stop words as UTF-8, with the one-character ASCII tokens: one set lookup drops both
# from a chunk of ASCII word characters (:func:`_utf8_words`).
_STOP_UTF8: frozenset[bytes] = frozenset(w.encode("ascii") for w in STOP_WORDS) | frozenset(
    bytes((c,)) for c in range(0x80) if _ASCII_BREAKS[c] != 0x20
)


# --- visible text ------------------------------------------------------------------------


def _decode(body: bytes, content_type: str) -> str:
    """The HTML as text, decoded as the link parser decodes it (:func:`sniff.decode_html`:
    BOM, header, ``<meta>``, UTF-8, detector, windows-1252), so both read the same text."""
    return decode_html(body[:MAX_TEXT_BYTES], content_type)[0]


def _inside_content(node: LexborNode) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag in ("article", "main"):
            return True
        parent = parent.parent
    return False


def _inside_content_test() -> Callable[[LexborNode], bool]:
    """:func:`_inside_content`, its answers kept for each ancestor it passes, so that the
    ancestors the nodes of one tree share are walked once (a call walks up to the first
    ancestor an earlier call passed). Asked of each header and footer, the plain walk took
    their number times their depth: 60,000 ``<footer>`` 500 elements deep (1 MB) took 3 s."""
    inside: dict[int, bool] = {}  # by mem_id: whether the node is, or is inside, one

    def test(node: LexborNode) -> bool:
        passed: list[int] = []
        found = False
        parent = node.parent
        while parent is not None:
            key = parent.mem_id
            if key in inside:
                found = inside[key]
                break
            if parent.tag in ("article", "main"):
                found = inside[key] = True
                break
            passed.append(key)
            parent = parent.parent
        for key in passed:
            inside[key] = found
        return found

    return test


def _is_noise_named(node: LexborNode) -> bool:
    """Whether the node's class or id has a word of :data:`_NOISE_WORDS` (cut at whitespace,
    ``-`` and ``_``). ``str.split()`` cuts at the whitespace a ``\\s`` regex matches and only
    drops the empty pieces, which are no noise word; it is three times cheaper than a regex
    split, and pages with many classed elements ask this of each of them."""
    attrs = node.attributes
    return _has_noise_word(attrs.get("class")) or _has_noise_word(attrs.get("id"))


def _has_noise_word(value: str | None) -> bool:
    if not value:
        return False
    return not _NOISE_WORDS.isdisjoint(value.lower().replace("-", " ").replace("_", " ").split())


def _remove_all(nodes: list[LexborNode]) -> None:
    """Detaches ``nodes`` (in document order, as css() returns them), last first."""
    last = None
    for node in reversed(nodes):
        mem_id = node.mem_id
        if mem_id != last:  # a node matched by two selectors of the list comes twice
            node.remove()
            last = mem_id


def visible_text(html: bytes | str, content_type: str = "") -> str:
    """The text a reader sees as the page's content, words separated by spaces.

    Args:
        html: The HTML document (bytes are decoded as the link parser decodes them).
        content_type: The response's Content-Type, for the charset.

    Returns:
        The text of ``<body>`` without page chrome (see the module docstring); ``""`` if
        there is none.
    """
    text = _decode(html, content_type) if isinstance(html, bytes) else html[:MAX_TEXT_BYTES]
    bound = scan(text)  # no further than the parse limits allow (core/content/htmlbounds.py)
    return tree_text(LexborHTMLParser(text if bound is None else text[: bound.cut]))


def tree_text(tree: LexborHTMLParser) -> str:
    """:func:`visible_text` of a document already parsed (the tree the link parser built,
    :func:`beamcrawl.core.content.htmlparse.parse_document`, so a page is parsed once).

    Detaches the page chrome from ``tree``: read links and anything else from it first.
    """
    body = tree.body
    if body is None:
        return ""
    # Two selector passes where one per rule would do four: each css() call parses its
    # selector and walks the whole body, which costs more than what it finds on most pages.
    # Each pass decides on the tree as the pass found it, then removes: an element removed
    # takes its descendants with it, so what was decided about them changes nothing, and a
    # header's ancestors, the only other thing a decision reads, are those of the page. The
    # removals go in reverse document order (descendants before their ancestors, a node
    # matched twice once), so no node is touched after a removal that contained it.
    # css() matches the body itself too; the body is never chrome, whatever its class
    # (WordPress's "has-sidebar") or attributes say: removing it would leave no text at all.
    own = body.mem_id
    _remove_all([node for node in body.css(_ALWAYS_NOISE) if node.mem_id != own])
    inside_content = _inside_content_test()
    _remove_all(
        [
            node
            for node in body.css("header, footer, [class], [id]")
            if node.mem_id != own
            and ((node.tag in ("header", "footer") and not inside_content(node)) or _is_noise_named(node))
        ]
    )
    return body.text(separator=" ")


# --- features ----------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens of ``text``, without stop words, one-character tokens and
    numbers.

    Numbers go because the commonest difference between two servings of one page is one:
    a timestamp, a date, a visitor counter, a price that moved.
    """
    stop = STOP_WORDS
    return [t for t in _WORD2.findall(text.lower()) if t not in stop and not t.isdigit()]


def _utf8_words(text: str) -> list[bytes]:
    """:func:`tokens` of ``text``, each as its UTF-8 bytes, in fewer Python steps.

    The lower-cased text is encoded once and every ASCII byte that is not a word character
    becomes a space (``bytes.translate``), so ``bytes.split()`` cuts the text where its
    ``\\w`` runs end; lower-casing the whole text first keeps the one context-dependent case
    (a final sigma) as :func:`tokens` has it. A chunk of ASCII word characters is a token
    as it stands, kept unless it is a stop word, one character (both one set lookup) or
    digits (:func:`_split_words`, compiled where it was built). A chunk with other
    characters (UTF-8 bytes of 0x80 and above, never an ASCII byte, so chunks end on
    character boundaries) is read back as text and tokenised as :func:`tokens` does; where
    such chunks are more than an eighth of the words, the whole text is, by :func:`tokens`. Lone
    surrogates (from a decode that kept them) travel through the encoding and back
    unchanged; they are no word characters, so never in a token.
    """
    broken = text.lower().encode("utf-8", "surrogatepass").translate(_ASCII_BREAKS)
    words, mixed = (_compiled_split or _split_words)(broken, _STOP_UTF8)
    if not mixed:
        return words
    if 8 * len(mixed) > len(words):
        # Mostly words of other scripts: one pass of the expression over the whole text
        # costs a fraction of one a chunk (a Russian text of 800 words: 0.6 against 2.2 ms).
        return [t.encode("utf-8") for t in tokens(text)]
    out: list[bytes] = []
    done = 0
    for at in mixed:
        out += words[done:at]
        out += [
            t.encode("utf-8")
            for t in _WORD2.findall(words[at].decode("utf-8", "surrogatepass"))
            if t not in STOP_WORDS and not t.isdigit()
        ]
        done = at + 1
    out += words[done:]
    return out


def _split_words(broken: bytes, stop: frozenset[bytes]) -> tuple[list[bytes], list[int]]:
    """The chunks of ``broken`` (split at ASCII whitespace) but the ASCII ones in ``stop`` or
    of digits only, and the positions among them of the chunks with a byte above 0x7f (kept
    whatever they are). An ASCII text takes two C-level filters, no Python step per chunk."""
    chunks = broken.split()
    if broken.isascii():
        return list(filterfalse(bytes.isdigit, filterfalse(stop.__contains__, chunks))), []
    words: list[bytes] = []
    mixed: list[int] = []
    for chunk in chunks:
        if not chunk.isascii():
            mixed.append(len(words))
            words.append(chunk)
        elif chunk not in stop and not chunk.isdigit():
            words.append(chunk)
    return words, mixed


def _utf8_shingles(words: list[bytes], width: int) -> list[bytes]:
    """Every shingle occurrence of :func:`shingles` (one per position, not counted), in
    UTF-8; no shingles for ``width`` 1, where :func:`features` has words only."""
    n = len(words)
    if width < 2 or n == 0:
        return []
    if n < width:
        return [b" ".join(words)]
    if width == 2:
        return list(map(b" ".join, zip(words, words[1:])))
    return list(map(b" ".join, zip(*(words[i:] for i in range(width)))))


def shingles(words: Sequence[str], width: int = SHINGLE_WORDS) -> Counter[str]:
    """Overlapping runs of ``width`` words, joined by a space, with how often each occurs.

    A text shorter than ``width`` words is one shingle of all its words (none if empty).
    """
    n = len(words)
    if n == 0:
        return Counter()
    if n < width:
        return Counter((" ".join(words),))
    if width == 2:  # the common case, without slicing a list per position
        return Counter(map(" ".join, zip(words, words[1:])))
    return Counter(" ".join(words[i : i + width]) for i in range(n - width + 1))


def features(text: str, width: int = SHINGLE_WORDS, word_weight: int = WORD_WEIGHT) -> Counter[str]:
    """The weighted features of a text: its words and its ``width``-word shingles.

    Words and phrases, as the seeds and Manku et al. describe the features: a word weighs
    ``word_weight`` per occurrence and a shingle one per occurrence. Shingles keep two
    texts drawn from one vocabulary apart; words keep a one-word edit small (it changes two
    word counts but ``width`` shingles twice over), which is what lets a near copy stay
    within 3 bits. A word and a shingle never collide: shingles contain spaces.
    """
    words = tokens(text)
    weighted = shingles(words, width) if width > 1 else Counter()
    if word_weight == 1:
        weighted.update(words)  # Counter's C loop; the same sums
        return weighted
    for word, count in Counter(words).items():
        weighted[word] += count * word_weight
    return weighted


# --- simhash -----------------------------------------------------------------------------


def feature_hash(feature: bytes) -> int:
    """A feature's 64-bit hash: MurmurHash3 x64-128, seed 0, first 64 bits, unsigned.

    This is the ``hashfunc`` given to the ``simhash`` package, which passes UTF-8 bytes.
    """
    return mmh3.hash64(feature, seed=0, x64arch=True, signed=False)[0]


# The simhash package multiplies a uint8 bit array by a weight above its batching cutoff (50),
# which numpy 2 refuses for weights over 255; it adds repeated (feature, weight) pairs, so a
# heavy feature is passed in pieces of at most this weight (the sums are the same).
_PACKAGE_PIECE = 50


def simhash_reference(weighted: Mapping[str, int]) -> int:
    """The 64-bit simhash of weighted features, computed by the ``simhash`` package.

    The reference the fast path is tested against. Weights must be positive integers.
    """
    from simhash import Simhash  # imported here: only the reference and tests need it

    pieces: list[tuple[str, int]] = []
    for feature, weight in weighted.items():
        while weight > _PACKAGE_PIECE:
            pieces.append((feature, _PACKAGE_PIECE))
            weight -= _PACKAGE_PIECE
        pieces.append((feature, weight))
    return int(Simhash(pieces, f=_BITS, hashfunc=feature_hash).value)


def _hashes_from_digests(features: Iterable[str], n: int) -> np.ndarray:
    # One 16-byte x64 digest per feature (seed 0), joined and read as little-endian words:
    # the even words are hash64's first halves, without two Python ints per feature.
    return np.frombuffer(b"".join(map(mmh3.hash_bytes, features)), dtype="<u8", count=2 * n)[::2]


def _hashes_one_by_one(features: Iterable[str], n: int) -> np.ndarray:
    return np.fromiter(
        (mmh3.hash64(f, seed=0, x64arch=True, signed=False)[0] for f in features), dtype=np.uint64, count=n
    )


def _digests_agree() -> bool:
    """Whether this mmh3 build's digests carry hash64's words little-endian (checked once:
    else the one-by-one path, same bits, slower)."""
    sample = ["simhash", "near copies", "\u00e9t\u00e9 \u4e2d\u6587"]
    return bool((_hashes_from_digests(sample, 3) == _hashes_one_by_one(sample, 3)).all())


# mmh3 hashes a str as its UTF-8 bytes, as feature_hash does for the package.
_feature_hashes = _hashes_from_digests if _digests_agree() else _hashes_one_by_one


def simhash_features(weighted: Mapping[str, int]) -> int:
    """The 64-bit simhash of weighted features, bit-identical to :func:`simhash_reference`.

    The package adds each feature's hash bits ``weight`` times and sets a bit when its
    sum exceeds half the total weight; here the same sums are one matrix product of the
    weights with the features' bit matrix (``unpackbits`` of the big-endian hashes, most
    significant bit first as in the package), in integers: the weight-1 rows (most
    shingles) are a column sum, the few others a small product. Not BLAS: a float product
    would be as fast alone but competes for threads with everything else in a worker
    (measured: 1 ms to 14 ms for one 8,000-feature page on a busy 2-core machine).
    The cost left is hashing (one mmh3 call per feature).

    Args:
        weighted: Feature → positive integer weight.

    Returns:
        The fingerprint (0 for no features).
    """
    n = len(weighted)
    if n == 0:
        return 0
    hashes = _feature_hashes(weighted, n)
    weights = np.fromiter(weighted.values(), dtype=np.int64, count=n)
    bits = np.unpackbits(hashes.astype(">u8").view(np.uint8).reshape(n, 8), axis=1)
    # Per bit, the weight of the features that have it set.
    single = weights == 1
    ones = bits[single].sum(axis=0, dtype=np.int64)
    if not single.all():
        heavy = ~single
        ones += weights[heavy] @ bits[heavy]
    above = 2 * ones > int(weights.sum())
    return int.from_bytes(np.packbits(above).tobytes(), "big")


def _bit_counts(digests: bytes, n: int) -> np.ndarray:
    """Per bit ``b`` of the 64-bit hashes in ``n`` joined x64 digests (the first, little-
    endian half of each, as :func:`_hashes_from_digests` reads them), how many have it set;
    index ``b``.

    The hashes' bytes are cut into bits, eight to a ``uint64`` lane (one bit per byte), and
    the lanes summed along their row: one addition counts eight bits at once, and at most
    255 lanes per sum keep each byte's count from carrying into the next. Several times
    faster than summing the columns of an ``n × 64`` bit matrix.
    """
    rows = np.frombuffer(digests, dtype=np.uint8, count=16 * n).reshape(n, 16)[:, :8].T.copy()  # (8, n)
    lanes = np.unpackbits(rows, axis=1, bitorder="little").view(np.uint64)  # (8, n)
    if n <= 255:
        sums = lanes.sum(axis=1, dtype=np.uint64)[:, None]
    else:
        sums = np.add.reduceat(lanes, np.arange(0, n, 255), axis=1, dtype=np.uint64)
    return sums.view(np.uint8).reshape(8, -1, 8).sum(axis=1, dtype=np.int64).reshape(64)


def _occurrence_simhash(words: list[bytes], shingled: list[bytes], word_weight: int) -> int:
    """:func:`simhash_features` of the features these words and shingles make, without
    counting them: a feature of weight ``w`` adds its bits ``w`` times, so hashing each
    occurrence (each word ``word_weight`` times) gives the same sums. Hashing the repeats
    costs less than building a Counter of them."""
    if word_weight == 1:  # one join, no copy of the words' digests
        digests = b"".join(map(mmh3.hash_bytes, chain(words, shingled)))
    else:
        digests = b"".join(map(mmh3.hash_bytes, words)) * word_weight + b"".join(map(mmh3.hash_bytes, shingled))
    n = len(digests) // 16
    if n == 0:
        return 0
    above = 2 * _bit_counts(digests, n) > n
    return int.from_bytes(np.packbits(above, bitorder="little").tobytes(), "little")


def _words_simhash(words: list[bytes], width: int, word_weight: int) -> int:
    """:func:`_occurrence_simhash` of these words and their shingles, in Python."""
    return _occurrence_simhash(words, _utf8_shingles(words, width), word_weight)


def _compiled_agrees(compiled: Callable[[list[bytes], int, int], int]) -> bool:
    """Whether the compiled simhash gives this module's bits (checked once on import, on
    words of every length class its hash treats apart: else the Python path is used)."""
    words = [w.encode() for w in "a bb near copies \u00e9t\u00e9 \u4e2d\u6587 simhash fingerprints".split()]
    words += [b"x" * n for n in (7, 8, 9, 15, 16, 17, 31, 32, 33)]
    return all(
        compiled(words[i:], width, weight) == _words_simhash(words[i:], width, weight)
        for i in (0, 3, len(words) - 1, len(words))
        for width in (1, 2, 3)
        for weight in (1, 2)
    )


def _load_compiled() -> Callable[[list[bytes], int, int], int] | None:
    try:
        from beamcrawl.core.content._simhash import simhash as compiled
    except ImportError:  # built without a C compiler: the same bits in Python
        return None
    return compiled if _compiled_agrees(compiled) else None


def _load_compiled_split() -> Callable[[bytes, frozenset[bytes]], tuple[list[bytes], list[int]]] | None:
    """The compiled :func:`_split_words`, if it was built and gives its words (checked once
    on import, on every kind of chunk: stop words, one character, digits, the spaces, bytes
    above 0x7f)."""
    try:
        from beamcrawl.core.content._simhash import split_words as compiled
    except ImportError:
        return None
    samples = [b"", b" ", b"the 42 a b2 x_y \t\x0bnear\x0c\rcopies\n 7 s ll 2024x", b"one", b"  9  "]
    samples += [b"caf\xc3\xa9 the \xe2\x80\x99 9 \xe4\xb8\xad", b"\xff"]
    agrees = all(compiled(data, _STOP_UTF8) == _split_words(data, _STOP_UTF8) for data in samples)
    return compiled if agrees else None


# The simhash of a page's words in C (_simhash.c), or None; COMPILED says which one runs.
_compiled_simhash = _load_compiled() if _feature_hashes is _hashes_from_digests else None
COMPILED = _compiled_simhash is not None
# A text's words split and filtered in C (_simhash.c), or None.
_compiled_split = _load_compiled_split()
# The largest word weight it takes (its counts are 64-bit integers); above it, Python.
_COMPILED_MAX_WEIGHT = 2**31 - 1


def text_simhash(
    text: str, width: int = SHINGLE_WORDS, min_features: int = MIN_FEATURES, word_weight: int = WORD_WEIGHT
) -> int | None:
    """The simhash of a text, or None when it has fewer than ``min_features`` features.

    Computed from each feature occurrence in UTF-8 (:func:`_utf8_words`, then the compiled
    ``_simhash`` module where it was built, else :func:`_occurrence_simhash`): the same
    bits as ``simhash_features(features(text))``, which the tests check, at under half the
    cost in Python and a fraction of it compiled. That recipe is kept for an mmh3 build
    whose digests this module cannot read (:func:`_digests_agree`), for word weights other
    than positive integers and for shingle widths below 1.
    """
    fast = _feature_hashes is _hashes_from_digests and isinstance(word_weight, int) and word_weight > 0
    if not fast or width < 1:
        weighted = features(text, width, word_weight)
        if len(weighted) < min_features:
            return None
        return simhash_features(weighted)
    words = _utf8_words(text)
    # Distinct features: words and shingles never collide (shingles contain spaces) but for
    # the one-word text whose only shingle is that word. The distinct words of a prefix
    # settle most pages without a set of all of them.
    if len(set(words[: 4 * min_features])) < min_features and (
        len(set(words).union(_utf8_shingles(words, width))) < min_features
    ):
        return None
    if _compiled_simhash is not None and word_weight <= _COMPILED_MAX_WEIGHT:
        return _compiled_simhash(words, width, word_weight)
    return _words_simhash(words, width, word_weight)


def html_simhash(body: bytes, content_type: str = "") -> int | None:
    """The simhash of an HTML page's visible text (None: too little text to judge)."""
    return text_simhash(visible_text(body, content_type))


def tree_simhash(tree: LexborHTMLParser) -> int | None:
    """:func:`html_simhash` of a document already parsed; detaches its chrome (see
    :func:`tree_text`), so take links from the tree first."""
    return text_simhash(tree_text(tree))


def hamming(a: int, b: int) -> int:
    """How many of the 64 bits differ between two fingerprints."""
    return ((a ^ b) & _MASK).bit_count()


# --- permuted tables ---------------------------------------------------------------------


@dataclass(frozen=True)
class TableLayout:
    """How fingerprints are spread over permuted tables (Manku et al. §3.1).

    Attributes:
        widths: Block widths in bits, most significant block first; they sum to 64.
        leading: Blocks moved to the front of each table. With ``len(widths) - leading ==
            k``, any two fingerprints at most ``k`` bits apart share the leading blocks of
            at least one table.
    """

    widths: tuple[int, ...] = (11, 11, 11, 11, 10, 10)
    leading: int = 3
    _blocks: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if sum(self.widths) != _BITS:
            raise ValueError(f"block widths must sum to {_BITS}, got {sum(self.widths)}")
        if not 0 < self.leading < len(self.widths):
            raise ValueError("leading must be between 1 and the number of blocks - 1")
        blocks = []
        shift = _BITS
        for width in self.widths:
            shift -= width
            blocks.append((shift, width))  # (right shift, width) of each block
        object.__setattr__(self, "_blocks", tuple(blocks))

    @property
    def max_distance(self) -> int:
        """The largest Hamming distance the layout is guaranteed to find."""
        return len(self.widths) - self.leading

    @cached_property
    def orders(self) -> tuple[tuple[int, ...], ...]:
        """Per table, the block order: its leading blocks, then the others, each ascending."""
        everything = range(len(self.widths))
        return tuple(
            tuple(lead) + tuple(b for b in everything if b not in lead)
            for lead in combinations(everything, self.leading)
        )

    @cached_property
    def prefix_widths(self) -> tuple[int, ...]:
        """Per table, the bits of its leading blocks (the exact-match prefix)."""
        return tuple(sum(self.widths[b] for b in order[: self.leading]) for order in self.orders)

    @cached_property
    def key_bytes(self) -> int:
        """Bytes of prefix in a row key (enough for the widest prefix)."""
        return (max(self.prefix_widths) + 7) // 8

    def permute(self, fp: int, table: int) -> int:
        """The fingerprint with table ``table``'s blocks moved to the front."""
        out = 0
        for b in self.orders[table]:
            shift, width = self._blocks[b]
            out = (out << width) | ((fp >> shift) & ((1 << width) - 1))
        return out

    def unpermute(self, permuted: int, table: int) -> int:
        """The inverse of :meth:`permute`."""
        out = 0
        remaining = _BITS
        for b in self.orders[table]:
            shift, width = self._blocks[b]
            remaining -= width
            out |= ((permuted >> remaining) & ((1 << width) - 1)) << shift
        return out

    def permute_many(self, fps: np.ndarray, table: int) -> np.ndarray:
        """:meth:`permute` over a ``uint64`` array (for a bundle of pages at once)."""
        out = np.zeros(fps.shape, dtype=np.uint64)
        for b in self.orders[table]:
            shift, width = self._blocks[b]
            out = (out << np.uint64(width)) | ((fps >> np.uint64(shift)) & np.uint64((1 << width) - 1))
        return out

    def table_key(self, table: int, permuted: int) -> bytes:
        """The row key of a permuted fingerprint in table ``table``.

        One table byte, then the leading-block prefix left-aligned in :attr:`key_bytes`
        bytes (the bits after it zero). Keys sort by table, then by permuted fingerprint,
        so each table is one contiguous key range and fingerprints sharing a prefix share
        a row.
        """
        width = self.prefix_widths[table]
        prefix = permuted >> (_BITS - width)
        aligned = prefix << (8 * self.key_bytes - width)
        return bytes((table,)) + aligned.to_bytes(self.key_bytes, "big")

    def table_range(self, table: int) -> tuple[bytes, bytes]:
        """The key range ``[start, end)`` holding table ``table``."""
        return bytes((table,)), bytes((table + 1,))

    def bucket_groups(self, bits: int) -> tuple[tuple[int, ...], ...]:
        """The tables in groups whose permuted fingerprints always begin with the same
        ``bits`` bits (the blocks that cover those bits are the same, in the same order),
        tables ascending, groups in order of their first table.

        A fingerprint's bucket (its first ``bits`` permuted bits) is then one bucket in
        every table of its group, so it need cross a shuffle once a group, not once a table:
        with the default layout and ``bits`` from 1 to 11, four groups of 10, 6, 3 and 1
        tables (by the first leading block); with no bits, one group of all.
        """
        if not 0 <= bits <= _BITS:
            raise ValueError(f"bucket bits must be between 0 and {_BITS}, got {bits}")
        by_cover: dict[tuple[int, ...], list[int]] = {}
        for table, order in enumerate(self.orders):
            cover, covered = [], 0
            for b in order:
                if covered >= bits:
                    break
                cover.append(b)
                covered += self.widths[b]
            by_cover.setdefault(tuple(cover), []).append(table)
        return tuple(tuple(tables) for tables in by_cover.values())

    @cached_property
    def _key_plans(self) -> tuple[tuple[int, tuple[tuple[int, int, int], ...]], ...]:
        """Per table: its number and, per leading block, (right shift, mask, left shift) that
        move the block from the fingerprint straight to its place in the left-aligned key
        prefix (the other blocks do not reach the key)."""
        plans = []
        for table, order in enumerate(self.orders):
            lead = order[: self.leading]
            dst = 8 * self.key_bytes - self.prefix_widths[table]
            moves = []
            for b in reversed(lead):  # the last leading block ends at the prefix's low end
                shift, width = self._blocks[b]
                moves.append((shift, (1 << width) - 1, dst))
                dst += width
            plans.append((table, tuple(moves)))
        return tuple(plans)

    def keys_of(self, fp: int) -> list[bytes]:
        """The row key of ``fp`` in every table, in table order: ``table_key(t, permute(fp,
        t))`` for each ``t``, computed from the leading blocks only."""
        n = self.key_bytes
        out = []
        for table, moves in self._key_plans:
            aligned = 0
            for shift, mask, dst in moves:
                aligned |= ((fp >> shift) & mask) << dst
            out.append(bytes((table,)) + aligned.to_bytes(n, "big"))
        return out


#: The 20-table layout (31–33-bit prefixes, k = 3): Cloud Bigtable's, and every store's whose
#: simhash rows predate the recorded layout.
LAYOUT = TableLayout()
assert LAYOUT.max_distance == MAX_DISTANCE

#: The 10-table layout (25–26-bit prefixes, k = 3): half the rows a stored page, for stores of
#: up to some 10^8 pages (the embedded store's).
TEN_TABLES = TableLayout((13, 13, 13, 13, 12), 2)
assert TEN_TABLES.max_distance == MAX_DISTANCE

#: The layouts a store may record, by the number of tables.
LAYOUTS = {len(layout.orders): layout for layout in (LAYOUT, TEN_TABLES)}


_LAYOUT_NAME = re.compile(r"[0-9]{1,2}(,[0-9]{1,2}){0,63}/[0-9]{1,2}", re.ASCII)


def layout_name(layout: TableLayout) -> str:
    """How a store records a layout: the block widths, then the leading blocks
    (``"13,13,13,13,12/2"``)."""
    return ",".join(map(str, layout.widths)) + f"/{layout.leading}"


def parse_layout(name: str) -> TableLayout:
    """The layout a store recorded (:func:`layout_name`).

    Raises:
        ValueError: Not a layout's name, or a layout this version does not keep (one of
            :data:`LAYOUTS`: a store's keys are read only in a layout known to find every
            fingerprint within :data:`MAX_DISTANCE` bits).
    """
    if not _LAYOUT_NAME.fullmatch(name):
        raise ValueError(f"not a simhash table layout: {name[:80]!r} (block widths, '/', leading blocks)")
    widths, _, leading = name.partition("/")
    try:
        layout = TableLayout(tuple(int(w) for w in widths.split(",")), int(leading))
    except ValueError as exc:
        raise ValueError(f"not a simhash table layout: {name[:80]!r} ({exc})") from None
    if layout not in LAYOUTS.values():
        known = ", ".join(map(layout_name, LAYOUTS.values()))
        raise ValueError(f"simhash table layout {name[:80]!r} is not one this version keeps ({known})")
    return layout


def permutations(layout: TableLayout = LAYOUT) -> tuple[tuple[int, ...], ...]:
    """The block order of every table (table ``i`` is ``permutations()[i]``)."""
    return layout.orders


def permute(fp: int, table: int, layout: TableLayout = LAYOUT) -> int:
    """``fp`` with table ``table``'s leading blocks moved to the front (a bit permutation,
    so Hamming distances are unchanged)."""
    return layout.permute(fp, table)


def unpermute(permuted: int, table: int, layout: TableLayout = LAYOUT) -> int:
    """The fingerprint a permuted one came from."""
    return layout.unpermute(permuted, table)


def prefix_bits(table: int, layout: TableLayout = LAYOUT) -> int:
    """How many leading bits of a permuted fingerprint must match in table ``table``."""
    return layout.prefix_widths[table]


def table_key(table: int, permuted: int, layout: TableLayout = LAYOUT) -> bytes:
    """The row key of a permuted fingerprint's prefix in table ``table`` (see
    :meth:`TableLayout.table_key`)."""
    return layout.table_key(table, permuted)


def table_range(table: int, layout: TableLayout = LAYOUT) -> tuple[bytes, bytes]:
    """The key range ``[start, end)`` of table ``table``."""
    return layout.table_range(table)


def table_keys(fp: int, layout: TableLayout = LAYOUT) -> list[bytes]:
    """The row key of ``fp`` in every table, in table order."""
    return layout.keys_of(fp)


def shares_a_table(a: int, b: int, layout: TableLayout = LAYOUT) -> bool:
    """Whether two fingerprints fall in the same row of at least one table."""
    return any(ka == kb for ka, kb in zip(table_keys(a, layout), table_keys(b, layout)))


def simhash_hex(fp: int | None) -> str | None:
    """A fingerprint as 16 hex digits, as ``ParsedPage.simhash`` carries it."""
    return None if fp is None else f"{fp:016x}"
