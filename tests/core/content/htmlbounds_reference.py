"""The pre-scan of beamcrawl/core/content/htmlbounds.py as it was at 0630e4d, kept as the
reference its faster form must equal on every input (tests/core/content/test_htmlbounds.py).

Do not optimise this copy: it is the plain statement of the walk. The module docstring of the
original follows.

How much of an HTML document may be parsed: a pre-scan of its tags that finds where a parse
would pass the limits on elements, nesting depth, attributes per element and tags (pure; no Beam).

Lexbor, the HTML parser, has no limits of its own, and the HTML tree construction rules make
some small inputs expensive: every new block re-creates all open formatting elements (the
"reconstruct the active formatting elements" step), so ``<p><font id=N>x`` × 4,000 (75 KB)
builds a tree of about 3.4 GB; each tag is checked against the open elements, so 100,000 nested
``<div>`` take most of a minute; each attribute is compared with the element's others, so one
tag of 100,000 attributes takes 45 s. :func:`scan` walks the tags once, keeping the parts of the
tree builder that decide those costs (the stack of open elements with the implied end tags and
scopes that pop it, the list of active formatting elements with its markers, the Noah's Ark
clause, ``<a>`` and the adoption agency), and answers the offset of the first tag at which the
document would pass a limit. The document is then parsed up to that offset and the page marked
truncated with the limit's name; its bytes are stored as fetched.

The walk errs one way: it may count more elements and a deeper stack than the parser builds
(tags inside ``<script>``, comments and attribute values count, a start tag before text rebuilds
what the parser would rebuild later), never fewer, so the parse stays within the limits
whatever the markup; the tests hold it to that against the parser on generated tag soup.
Nesting is limited to 512 open elements, as browsers' HTML parsers do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_ATTRIBUTES", "MAX_DEPTH", "MAX_ELEMENTS", "MAX_TAGS", "Bound", "Estimate", "estimate", "scan"]

#: Elements the parse may create, the ones the parser re-creates included (~0.5 KB each).
MAX_ELEMENTS = 200_000
#: Open elements at once (browsers' parsers put deeper elements beside, not inside).
MAX_DEPTH = 512
#: Attributes of one element (the parser compares each with the ones before it).
MAX_ATTRIBUTES = 256
#: Start and end tags of one document (each is checked against the open elements).
MAX_TAGS = 400_000
#: Characters of attributes that count as one more element each time the parser copies them
#: (added since 0630e4d: a rebuilt or adopted formatting element copies its attributes).
CLONE_CHARS = 512

# Documents with at most this many "<" are not scanned: at their worst (512 misnested
# formatting elements, each rebuilt at each of 512 blocks) they build ~130,000 elements,
# ~60 MB, in a tenth of a second, and a scan costs several times a parse.
_FEW_TAGS = 1024

# A tag as the HTML tokenizer reads it: its name, then its attributes (a value is quoted only
# after "=") up to the ">" that ends it. Every path matches, so the engine never backtracks.
_ATTRIBUTES = (
    r"""((?:[\t\n\f\r /]+|[^\t\n\f\r />][^\t\n\f\r />=]*"""
    r"""(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"[^"]*"|'[^']*'|[^\t\n\f\r >]*))?)*>?)"""
)
_TAG = re.compile(r"<(/?)([A-Za-z][^\t\n\f\r />]*)" + _ATTRIBUTES)
_TAG_ATTRIBUTES = re.compile(r"</?[A-Za-z][^\t\n\f\r />]*" + _ATTRIBUTES)
# Text up to a tag (a "<" that starts none is text; possessive, so a long run is read once),
# then the tag if there is one: every position matches, and findall never retries one.
_TEXT_AND_TAG = re.compile(r"((?:[^<]+|<(?!/?[A-Za-z]))*+)(?:" + _TAG.pattern + ")?")
_ATTRIBUTE = re.compile(r"[^\t\n\f\r />][^\t\n\f\r />=]*")
_ATTRIBUTE_VALUE = re.compile(r"""[\t\n\f\r ]*=[\t\n\f\r ]*(?:"[^"]*"|'[^']*'|[^\t\n\f\r >]*)""")

_FORMATTING = frozenset("a b big code em font i nobr s small strike strong tt u".split())
_VOID = frozenset(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param source track wbr".split()
)
_SPECIAL = frozenset(
    """address applet area article aside base basefont bgsound blockquote body br button caption
    center col colgroup dd details dir div dl dt embed fieldset figcaption figure footer form frame
    frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe img input keygen li link listing
    main marquee menu meta nav noembed noframes noscript object ol p param plaintext pre script
    search section select source style summary table tbody td template textarea tfoot th thead
    title tr track ul wbr xmp mi mo mn ms mtext annotation-xml foreignobject desc""".split()
)
_SCOPE = frozenset("applet caption html table td th marquee object template foreignobject desc title select".split())
_BUTTON_SCOPE = _SCOPE | {"button"}
_LIST_SCOPE = _SCOPE | {"ol", "ul"}
_CLOSES_P = frozenset(
    """address article aside blockquote center details dialog dir div dl fieldset figcaption figure
    footer header hgroup main menu nav ol p search section summary ul h1 h2 h3 h4 h5 h6 pre
    listing form hr xmp plaintext""".split()
)
_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())
_BLOCK_END = _CLOSES_P | {"button", "li", "dd", "dt", "applet", "marquee", "object"}
_MARKERS = frozenset("applet marquee object td th caption template".split())
_CELLS = frozenset(("td", "th", "caption"))
_INTEGRATION = frozenset("foreignobject desc title mi mo mn ms mtext annotation-xml".split())
_BREAKOUT = frozenset(
    """b big blockquote body br center code dd div dl dt em embed h1 h2 h3 h4 h5 h6 head hr i img
    li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt u ul var
    font""".split()
)
_TABLE_PARTS = frozenset("tbody thead tfoot tr td th caption colgroup".split())
_SECTIONS = frozenset("tbody thead tfoot".split())
_IGNORED = frozenset("html body head frameset".split())
_FOREIGN = frozenset(("svg", "math"))
_NO_RECONSTRUCT = _CLOSES_P | _TABLE_PARTS | {"table", "li", "dd", "dt"}
# Start tags whose only work is to open an element (after rebuilding the formatting elements),
# and blocks that also close an open <p>: :func:`_walk` does them without a call.
_BLOCKS = _CLOSES_P - _HEADINGS - {"hr", "plaintext", "xmp"}
_PLAIN = frozenset(
    """abbr bdi bdo cite data dfn kbd label mark q rp rt ruby samp span sub sup time var ins del
    picture audio video map output progress meter slot canvas""".split()
)


@dataclass(frozen=True)
class Bound:
    """Where a document passes a limit: parse ``text[:cut]``; ``reason`` names the limit
    (``elements``, ``depth``, ``attributes`` or ``tags``)."""

    cut: int
    reason: str


class _Entry:
    """An entry of the list of active formatting elements (compared by identity)."""

    __slots__ = ("key", "name", "open")

    def __init__(self, name: str, key: tuple[str, str]) -> None:
        self.name = name
        self.key = key
        self.open: _Element | None = None  # the element on the stack, None once popped


class _Element:
    __slots__ = ("entry", "foreign", "name")

    def __init__(self, name: str, entry: _Entry | None, foreign: bool = False) -> None:
        self.name = name
        self.entry = entry
        self.foreign = foreign  # SVG or MathML


_MARKER = _Entry("", ("", ""))


class _Level:
    """The active formatting entries after one marker, by name and by (name, attributes)."""

    __slots__ = ("by_key", "by_name")

    def __init__(self) -> None:
        self.by_name: dict[str, list[_Entry]] = {}
        self.by_key: dict[tuple[str, str], list[_Entry]] = {}


class _Over(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Tree:
    """The parts of the tree builder's state that decide its cost (see the module docstring)."""

    def __init__(self) -> None:
        self.stack: list[_Element] = []
        self.names: dict[str, int] = {}  # open elements by name, for "is there one at all"
        self.active: list[_Entry] = []
        self.levels: list[_Level] = [_Level()]
        self.created = 0
        self.deepest = 0

    # --- the stack of open elements ---

    def push(self, name: str, entry: _Entry | None = None, foreign: bool = False) -> _Element:
        self.created += 1
        if self.created > MAX_ELEMENTS:
            raise _Over("elements")
        if len(self.stack) >= MAX_DEPTH:
            raise _Over("depth")
        element = _Element(name, entry, foreign)
        self.stack.append(element)
        self.deepest = max(self.deepest, len(self.stack))
        self.names[name] = self.names.get(name, 0) + 1
        return element

    def _forget(self, element: _Element) -> None:
        self.names[element.name] -= 1
        if element.entry is not None and element.entry.open is element:
            element.entry.open = None

    def pop_from(self, index: int) -> None:
        """Pops the element at ``index`` and all above it."""
        for element in self.stack[index:]:
            self._forget(element)
        del self.stack[index:]

    def pop_with_markers(self, index: int) -> None:
        """:meth:`pop_from`; closing a cell or caption also clears the list back to its marker."""
        clears = any(element.name in _CELLS for element in self.stack[index:])
        self.pop_from(index)
        if clears:
            self.clear_to_marker()

    def remove(self, element: _Element) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i] is element:
                self._forget(element)
                del self.stack[i]
                return

    def find(self, names: frozenset[str] | set[str], boundary: frozenset[str] | set[str]) -> int:
        """Index of the topmost open element named in ``names`` before one in ``boundary``, or -1."""
        if not any(self.names.get(n) for n in names):
            return -1
        for i in range(len(self.stack) - 1, -1, -1):
            name = self.stack[i].name
            if name in names:
                return i
            if name in boundary:
                return -1
        return -1

    def in_foreign(self) -> bool:
        top = self.stack[-1] if self.stack else None
        return top is not None and top.foreign and top.name not in _INTEGRATION

    def count_one(self) -> None:
        """Counts an element that is not left open (void or self-closing)."""
        self.created += 1
        if self.created > MAX_ELEMENTS:
            raise _Over("elements")

    def in_table(self) -> bool:
        """Whether the insertion mode is one of the table's (not inside a cell or caption)."""
        for i in range(len(self.stack) - 1, -1, -1):
            name = self.stack[i].name
            if name in ("table", "tbody", "thead", "tfoot", "tr"):
                return True
            if name in ("td", "th", "caption", "template", "select", "html"):
                return False
        return False

    def close_p(self) -> None:
        if self.names.get("p"):
            at = self.find({"p"}, _BUTTON_SCOPE)
            if at >= 0:
                self.pop_from(at)

    # --- the list of active formatting elements ---

    def reconstruct(self) -> None:
        active = self.active
        i = len(active)
        while i > 0 and active[i - 1] is not _MARKER and active[i - 1].open is None:
            i -= 1
        for entry in active[i:]:
            self.created += len(entry.key[1]) // CLONE_CHARS  # its attributes copied (push counts it)
            entry.open = self.push(entry.name, entry)

    def add_marker(self) -> None:
        self.active.append(_MARKER)
        self.levels.append(_Level())

    def clear_to_marker(self) -> None:
        active = self.active
        while active:
            entry = active.pop()
            if entry is _MARKER:
                self.levels.pop()
                return
        self.levels = [_Level()]

    def last_entry(self, name: str) -> _Entry | None:
        entries = self.levels[-1].by_name.get(name)
        return entries[-1] if entries else None

    def drop_entry(self, entry: _Entry) -> None:
        level = self.levels[-1]
        level.by_name[entry.name].remove(entry)
        level.by_key[entry.key].remove(entry)
        active = self.active
        for i in range(len(active) - 1, -1, -1):
            if active[i] is entry:
                del active[i]
                return

    def add_entry(self, entry: _Entry) -> None:
        level = self.levels[-1]
        same = level.by_key.setdefault(entry.key, [])
        if len(same) >= 3:  # Noah's Ark: at most three of one element and attributes
            self.drop_entry(same[0])
        level.by_name.setdefault(entry.name, []).append(entry)
        same.append(entry)
        self.active.append(entry)

    # --- tags ---

    def start(self, name: str, attributes: str, self_closing: bool) -> None:
        if self.in_foreign():
            breakout = name in _BREAKOUT and (
                name != "font" or any(word in attributes.lower() for word in ("color", "face", "size"))
            )
            if not breakout:  # SVG and MathML: every tag is an element of its own
                if self_closing:
                    self.count_one()
                else:
                    self.push(name, foreign=True)
                return
            while self.in_foreign():  # an HTML tag ends the SVG or MathML it is in
                self.pop_from(len(self.stack) - 1)
        if name in _FOREIGN:
            self.reconstruct()
            if self_closing:
                self.count_one()
            else:
                self.push(name, foreign=True)
            return
        if name in _IGNORED:
            return
        if name == "select":
            at = self.find({"select"}, _SCOPE - {"select"})
            if at >= 0:  # a <select> in a <select> only ends the open one
                self.pop_from(at)
                return
        if name == "button" and self.names.get("button"):
            at = self.find({"button"}, _SCOPE)
            if at >= 0:
                self.pop_from(at)
        if name in _CLOSES_P:
            self.close_p()
            if name in _HEADINGS and self.stack and self.stack[-1].name in _HEADINGS:
                self.pop_from(len(self.stack) - 1)
        elif name in ("li", "dd", "dt"):
            same = {"li"} if name == "li" else {"dd", "dt"}
            for i in range(len(self.stack) - 1, -1, -1):
                open_name = self.stack[i].name
                if open_name in same:
                    self.pop_from(i)
                    break
                if open_name in _SPECIAL and open_name not in ("address", "div", "p"):
                    break
            self.close_p()
        elif name in _TABLE_PARTS:
            if not self._table_part(name):
                return
        elif name == "table" and self.in_table():
            self.pop_with_markers(self.find({"table"}, {"html", "template"}))
        if name == "a":
            old = self.last_entry("a")
            if old is not None:  # the adoption agency closes the open <a>, then it goes
                self.end_formatting("a")
                if old.open is not None:
                    self.remove(old.open)
                if old in self.levels[-1].by_name.get("a", ()):
                    self.drop_entry(old)
        if name not in _NO_RECONSTRUCT:
            self.reconstruct()
        if name in _FORMATTING:
            if name == "nobr" and self.find({"nobr"}, _SCOPE) >= 0:
                self.end_formatting("nobr")
                self.reconstruct()
            entry = _Entry(name, (name, attributes))
            entry.open = self.push(name, entry)
            self.add_entry(entry)
            return
        if name in ("option", "optgroup") and self.stack and self.stack[-1].name == "option":
            self.pop_from(len(self.stack) - 1)
        if name in _VOID:
            self.count_one()
            return
        self.push(name)
        if name in _MARKERS:
            self.add_marker()

    def _table_part(self, name: str) -> bool:
        """Closes what a new cell, row or section ends and counts the parts it implies; False
        when the tag is ignored (outside any table)."""
        table = self.find({"table"}, {"html", "template"})
        if table < 0:
            return False
        if name in ("td", "th"):
            cell = self.find({"td", "th"}, {"table", "html", "template"})
            if cell >= 0:
                self.pop_with_markers(cell)
            context: frozenset[str] = frozenset({"tr"})
        elif name == "tr":
            row = self.find({"tr"}, {"table", "html", "template"})
            if row >= 0:
                self.pop_with_markers(row)
            context = _SECTIONS
        else:
            section = self.find(_SECTIONS | {"caption", "colgroup"}, {"table", "html", "template"})
            if section >= 0:
                self.pop_with_markers(section)
            context = frozenset()
        # "Clear the stack back to a table (body, row) context": what a new part does not go
        # into (foster-parented elements) is closed; the list keeps its entries.
        at = self.find(context | {"table"}, {"html", "template"})
        self.pop_with_markers(at + 1)
        top = self.stack[-1].name
        if name == "tr" and top == "table":
            self.push("tbody")
        elif name in ("td", "th") and top != "tr":
            if top not in _SECTIONS:
                self.push("tbody")
            self.push("tr")
        return True

    def end(self, name: str) -> None:
        if self.in_foreign():
            for i in range(len(self.stack) - 1, -1, -1):
                element = self.stack[i]
                if not element.foreign:
                    break  # an HTML element: the HTML rules below
                if element.name == name:
                    self.pop_from(i)
                    return
        if name in _IGNORED:
            return
        if name == "br":
            self.start("br", "", False)
            return
        if name in _FORMATTING and self.last_entry(name) is not None:
            self.end_formatting(name)
            return
        if name == "p":
            at = self.find({"p"}, _BUTTON_SCOPE)
            if at < 0:
                self.push("p")  # "</p>" with no open <p> inserts an empty one
                at = len(self.stack) - 1
            self.pop_from(at)
            return
        if name in _BLOCK_END:
            if name in _HEADINGS:
                at = self.find(_HEADINGS, _SCOPE)
            else:
                at = self.find({name}, _LIST_SCOPE if name == "li" else _SCOPE)
            if at >= 0:
                if name == "form":  # only the form itself is closed, not what is open in it
                    self.remove(self.stack[at])
                else:
                    self.pop_with_markers(at)
                    if name in _MARKERS:  # </applet>, </marquee>, </object>
                        self.clear_to_marker()
            return
        if name == "select":
            at = self.find({"select"}, _SCOPE - {"select"})
            if at >= 0:
                self.pop_from(at)
            return
        if name in _TABLE_PARTS or name == "table":
            boundary = {"html", "template"} if name == "table" else {"table", "html", "template"}
            at = self.find({name}, boundary)
            if at >= 0:
                self.pop_with_markers(at)
            return
        # Any other end tag: the topmost element of that name, unless a special one is nearer.
        if not self.names.get(name):
            return
        for i in range(len(self.stack) - 1, -1, -1):
            open_name = self.stack[i].name
            if open_name == name:
                self.pop_from(i)
                if name == "template":
                    self.clear_to_marker()
                return
            if open_name in _SPECIAL:
                return

    def end_formatting(self, name: str) -> None:
        """The adoption agency, as far as it changes the stack, the list and the count."""
        entry = self.last_entry(name)
        if entry is None:
            return
        element = entry.open
        if element is None:  # not open any more: only its entry goes
            self.drop_entry(entry)
            return
        at = next(i for i in range(len(self.stack) - 1, -1, -1) if self.stack[i] is element)
        if any(self.stack[i].name in _SCOPE for i in range(at + 1, len(self.stack))):
            return  # open but not in scope (a table, cell or object in between): ignored
        specials = [i for i in range(at + 1, len(self.stack)) if self.stack[i].name in _SPECIAL]
        if not specials:
            self.pop_from(at)
            self.drop_entry(entry)
            return
        # Each round of the outer loop (at most 8) moves the element past the next special
        # element: a clone of it and of at most three formatting elements in between.
        rounds = min(len(specials), 8)
        heaviest = max((len(e.entry.key[1]) // CLONE_CHARS for e in self.stack[at + 1 :] if e.entry), default=0)
        self.created += rounds * (4 + len(entry.key[1]) // CLONE_CHARS + 3 * heaviest)
        if self.created > MAX_ELEMENTS:
            raise _Over("elements")
        last = self.stack[specials[rounds - 1]]
        self.remove(element)
        clone = _Element(name, entry)
        entry.open = clone
        position = next(i for i in range(len(self.stack)) if self.stack[i] is last) + 1
        self.stack.insert(position, clone)
        self.names[name] += 1
        if len(specials) < 8:
            # The last round finds no special element after the clone: the clone and the
            # elements after it (none of them special) are closed, and its entry goes.
            self.pop_from(position)
            self.drop_entry(entry)


def _attribute_count(rest: str) -> int:
    count = 0
    pos = 0
    end = len(rest)
    while pos < end:
        match = _ATTRIBUTE.search(rest, pos)
        if match is None:
            break
        count += 1
        pos = match.end()
        value = _ATTRIBUTE_VALUE.match(rest, pos)
        if value is not None:
            pos = value.end()
    return count


def scan(text: str) -> Bound | None:
    """Where parsing ``text`` would pass a limit (None: the whole document is within them).

    Args:
        text: The decoded document.

    Returns:
        The offset of the first tag past a limit and the limit's name, or None.
    """
    bound = _attributes_bound(text) if text.count("<") <= _FEW_TAGS else _walk(text)[0]
    merged = _merged_attributes_bound(text)  # added since 0630e4d
    return merged if merged is not None and (bound is None or merged.cut < bound.cut) else bound


def _merged_attributes_bound(text: str) -> Bound | None:
    total = 0
    for found in _MERGING_TAG.finditer(text):
        total += _attribute_count(_TAG.match(text, found.start()).group(3))
        if total > MAX_ATTRIBUTES:
            return Bound(found.start(), "attributes")
    return None


_MERGING_TAG = re.compile(r"<(?:[hH][tT][mM][lL]|[bB][oO][dD][yY])(?=[\t\n\f\r />])")


def _attributes_bound(text: str) -> Bound | None:
    """:func:`scan` of a document of few tags: only one of many attributes can cost much."""
    long_tags = [rest for rest in _TAG_ATTRIBUTES.findall(text) if len(rest) > 2 * MAX_ATTRIBUTES]
    if not any(_attribute_count(rest) > MAX_ATTRIBUTES for rest in long_tags):
        return None
    for match in _TAG.finditer(text):
        rest = match.group(3)
        if len(rest) > 2 * MAX_ATTRIBUTES and _attribute_count(rest) > MAX_ATTRIBUTES:
            return Bound(match.start(), "attributes")
    return None  # pragma: no cover - findall and finditer read the same tags


@dataclass(frozen=True)
class Estimate:
    """What :func:`scan` counts for a document: at least the parser's elements and depth."""

    elements: int
    depth: int
    bound: Bound | None


def estimate(text: str) -> Estimate:
    """The elements and the deepest nesting :func:`scan` finds in ``text`` (up to a limit)."""
    bound, tree = _walk(text)
    return Estimate(tree.created, tree.deepest, bound)


def _walk(text: str) -> tuple[Bound | None, _Tree]:
    tree = _Tree()
    stack = tree.stack
    names = tree.names
    active = tree.active
    tags = 0
    try:
        # One tuple per tag (findall builds them without a Python step per tag): whether text
        # comes before it, "/" for an end tag, the name, and the attributes.
        for text_before, closing, name, attributes in _TEXT_AND_TAG.findall(text):
            if not name:  # the text after the last tag (and an empty match at the end)
                if text_before:
                    tree.reconstruct()
                continue
            tags += 1
            if tags > MAX_TAGS:
                raise _Over("tags")
            if len(attributes) > 2 * MAX_ATTRIBUTES and _attribute_count(attributes) > MAX_ATTRIBUTES:
                raise _Over("attributes")
            if not name.islower():
                name = name.lower()
            # Text before the tag: the open formatting elements are rebuilt for it.
            if text_before and active and active[-1].open is None and active[-1] is not _MARKER:
                tree.reconstruct()
            top = stack[-1] if stack else None
            # The common cases first, written out: they are most of the tags of most pages.
            if closing:
                if top is not None and top.name == name:
                    entry = top.entry
                    if entry is None and name not in _MARKERS:
                        names[name] -= 1
                        stack.pop()
                        continue
                    if entry is not None and active and active[-1] is entry:
                        # A formatting element closed where it is the current node: the
                        # adoption agency only pops it and drops its entry.
                        level = tree.levels[-1]
                        same = level.by_name.get(name)
                        if same and same[-1] is entry:
                            same.pop()
                            level.by_key[entry.key].remove(entry)
                            active.pop()
                            entry.open = None
                            names[name] -= 1
                            stack.pop()
                            continue
                tree.end(name)
                continue
            if top is not None and top.foreign:
                tree.start(name, attributes, attributes.endswith("/>"))
                continue
            if name in _FORMATTING and name != "nobr" and (name != "a" or not tree.levels[-1].by_name.get("a")):
                # A formatting element with no open <a> to adopt: rebuilt list, then one more.
                if active and active[-1].open is None and active[-1] is not _MARKER:
                    tree.reconstruct()
                entry = _Entry(name, (name, attributes))
                entry.open = tree.push(name, entry)
                tree.add_entry(entry)
                continue
            if name in _PLAIN or name in _BLOCKS:
                if name in _BLOCKS:
                    if names.get("p"):
                        tree.close_p()
                elif active and active[-1].open is None and active[-1] is not _MARKER:
                    tree.reconstruct()
                tree.created += 1
                if tree.created > MAX_ELEMENTS:
                    raise _Over("elements")
                if len(stack) >= MAX_DEPTH:
                    raise _Over("depth")
                stack.append(_Element(name, None))
                names[name] = names.get(name, 0) + 1
                if len(stack) > tree.deepest:
                    tree.deepest = len(stack)
                continue
            tree.start(name, attributes, attributes.endswith("/>"))
    except _Over as over:
        return Bound(_offset_of_tag(text, tags), over.reason), tree
    return None, tree


def _offset_of_tag(text: str, number: int) -> int:
    """Where the ``number``-th tag (1-based) of :data:`_TEXT_AND_TAG` starts (the end of
    ``text`` when there are fewer)."""
    for count, match in enumerate(_TAG.finditer(text), 1):
        if count == number:
            return match.start()
    return len(text)
