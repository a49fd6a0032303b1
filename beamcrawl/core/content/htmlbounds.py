"""How much of an HTML document may be parsed: a pre-scan of its tags that finds where a parse
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
Nesting is limited to 512 open elements, as browsers' HTML parsers do. A formatting element the
parser rebuilds or adopts is created with a copy of its attributes, so each copy counts one more
element for every :data:`CLONE_CHARS` characters of them (the elements in between that the
adoption agency copies weigh as the heaviest above the one it adopts).

The walk does the tags most pages are made of (plain and formatting elements, blocks, list
items, cells and rows where they are expected, their end tags at the current node) in its loop,
and leaves the others to :class:`_Tree`; it answers exactly what the plain form of the walk
answered (kept in tests/core/content/htmlbounds_reference.py and compared on generated input).

The tags are read by the compiled ``_htmltags`` module (``_htmltags.c``) where it was built and
gives the tokens the regular expressions below give (checked on import: else they read them).
On the documents of /usr/share/doc it takes under half of the expressions' time, and a tenth
of it where only the attributes are read (bench/README.md, "The parse's tags and words
compiled").

The walk itself is compiled too: ``_htmltags.walk`` takes those tokens, the limits as they are
when :func:`scan` runs, and this module's sets of names as flags (:func:`_walk_tables`: the C
keeps no copy of them), and answers the number of the tag at which a limit passed, the limit,
the elements counted and the deepest nesting; the cut's offset is found here. The walk in
Python (:func:`_py_walk` and :class:`_Tree`) stays as the fallback where the extension was not
built and as the reference the compiled walk is checked against on import (the
:data:`_WALK_CHECKS` documents, under the limits and smaller ones: a walk that answers
otherwise is not used; :data:`WALK_COMPILED` says which walk runs), and the tests compare the
two on generated input. It takes a real page's walk from ~1 ms to ~0.12 ms, leaving the
tokenizer most of the scan (bench/README.md, "The pre-scan's walk compiled").
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "COMPILED",
    "WALK_COMPILED",
    "CLONE_CHARS",
    "MAX_ATTRIBUTES",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_TAGS",
    "Bound",
    "Estimate",
    "estimate",
    "scan",
]

#: Elements the parse may create, the ones the parser re-creates included (~0.5 KB each).
MAX_ELEMENTS = 200_000
#: Open elements at once (browsers' parsers put deeper elements beside, not inside).
MAX_DEPTH = 512
#: Attributes of one element (the parser compares each with the ones before it).
MAX_ATTRIBUTES = 256
#: Start and end tags of one document (each is checked against the open elements).
MAX_TAGS = 400_000
#: Characters of attributes that count as one more element each time the parser copies them:
#: a formatting element rebuilt, or cloned by the adoption agency, is created with a copy of
#: its attributes (``<p><a href='...1 MB...'>x</p>`` then ``<p>x</p>`` × 4,000, 0.5 MB, held
#: 1.9 GB; 10,000 of them did not parse in 6 GB). An element is ~0.5 KB (MAX_ELEMENTS).
CLONE_CHARS = 512

# Documents with at most this many "<" are not scanned: at their worst (512 misnested
# formatting elements, each rebuilt at each of 512 blocks) they build ~130,000 elements,
# ~60 MB, in a tenth of a second, and a scan costs several times a parse.
_FEW_TAGS = 1024

# A tag as the HTML tokenizer reads it: its name, then its attributes (a value is quoted only
# after "=") up to the ">" that ends it. Every path matches and ">?" ends every path, so the
# engine never backtracks; the repeats are possessive ("*+"), which says so to the engine and
# saves it the state it would keep to come back (about half of this pattern's time, measured
# on the documents of /usr/share/doc).
_ATTRIBUTES = (
    r"""((?:[\t\n\f\r /]++|[^\t\n\f\r />][^\t\n\f\r />=]*+"""
    r"""(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:"[^"]*+"|'[^']*+'|[^\t\n\f\r >]*+))?+)*+>?)"""
)
_TAG = re.compile(r"<(/?)([A-Za-z][^\t\n\f\r />]*+)" + _ATTRIBUTES)
_TAG_ATTRIBUTES = re.compile(r"</?[A-Za-z][^\t\n\f\r />]*+" + _ATTRIBUTES)
# A tag, then what follows it: nothing when the next tag or the end of the document follows,
# else the first character of the text up to the next tag (a "<" that starts no tag is text).
# findall builds a tuple a tag without a Python step; the text between tags is never copied.
_TAG_AND_NEXT = re.compile(_TAG.pattern + r"(?:(?=</?[A-Za-z])|(?=([\s\S]))|)")
_TAG_START = re.compile(r"</?[A-Za-z]")
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
# What :func:`_walk` does with a start tag without a call, by its name (when the current node is
# no SVG or MathML element): each kind is what :meth:`_Tree.start` does for those names, with
# the steps that cannot apply to them left out.
_PLAIN, _BLOCK, _HEADING, _LIST_ITEM, _EMPTY, _RULE, _FORMAT, _CELL, _ROW, _STEPS = range(10)
# Names with any step of their own in :meth:`_Tree.start`; every other name (most of a page's
# tags, and unknown ones) only rebuilds the formatting elements and opens an element.
_STARTS_WITH_STEPS = (
    _FOREIGN
    | _IGNORED
    | {"select", "button", "option", "optgroup", "table", "a"}
    | _CLOSES_P
    | _TABLE_PARTS
    | _NO_RECONSTRUCT
    | _FORMATTING
    | _VOID
    | _MARKERS
)
_START_KINDS: dict[str, int] = {
    **{name: _BLOCK for name in _CLOSES_P - _HEADINGS - {"hr", "plaintext", "xmp"}},
    **{name: _HEADING for name in _HEADINGS},
    **{name: _LIST_ITEM for name in ("li", "dd", "dt")},
    **{name: _EMPTY for name in _VOID - _CLOSES_P},
    "hr": _RULE,
    **{name: _FORMAT for name in _FORMATTING - {"nobr"}},
    "td": _CELL,  # in a row, else as :meth:`_Tree.start`
    "th": _CELL,
    "tr": _ROW,  # in a table section, else as :meth:`_Tree.start`
}
# The names left to :meth:`_Tree.start`; any other name is _PLAIN.
_START_KINDS.update({name: _STEPS for name in _STARTS_WITH_STEPS - _START_KINDS.keys()})


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
        # An element with no formatting entry and not foreign is only its name: one object per
        # name serves all of them. Nothing asks which one of those it is: the adoption agency
        # places its clone by index, and </form> removes the topmost form, the one it found.
        self.shared: dict[str, _Element] = {}

    # --- the stack of open elements ---

    def push(self, name: str, entry: _Entry | None = None, foreign: bool = False) -> _Element:
        self.created += 1
        if self.created > MAX_ELEMENTS:
            raise _Over("elements")
        if len(self.stack) >= MAX_DEPTH:
            raise _Over("depth")
        if entry is None and not foreign:
            element = self.shared.get(name) or self.shared.setdefault(name, _Element(name, None))
        else:
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
        if index >= len(self.stack):
            return
        clears = False
        for element in self.stack[index:]:
            if element.name in _CELLS:
                clears = True
                break
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
        counts = self.names
        for n in names:
            if counts.get(n):
                break
        else:
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
        if i == len(active):
            return
        # :meth:`push` for each, written out: a block of the formatting bomb rebuilds hundreds.
        stack = self.stack
        names = self.names
        for entry in active[i:]:
            self.created += 1 + len(entry.key[1]) // CLONE_CHARS  # the clone of its attributes
            if self.created > MAX_ELEMENTS or len(stack) >= MAX_DEPTH:
                self.deepest = max(self.deepest, len(stack))
                raise _Over("elements" if self.created > MAX_ELEMENTS else "depth")
            name = entry.name
            entry.open = element = _Element(name, entry)
            stack.append(element)
            names[name] = names.get(name, 0) + 1
        self.deepest = max(self.deepest, len(stack))

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
        # element: a clone of it and of at most three formatting elements in between, each
        # with a copy of its attributes (those in between weighed as the heaviest above it).
        rounds = min(len(specials), 8)
        heaviest = max((len(e.entry.key[1]) // CLONE_CHARS for e in self.stack[at + 1 :] if e.entry), default=0)
        self.created += rounds * (4 + len(entry.key[1]) // CLONE_CHARS + 3 * heaviest)
        if self.created > MAX_ELEMENTS:
            raise _Over("elements")
        self.remove(element)
        clone = _Element(name, entry)
        entry.open = clone
        # Just after the last special element the rounds passed, which the removal of
        # ``element`` (below it) moved down by one.
        position = specials[rounds - 1]
        self.stack.insert(position, clone)
        self.names[name] += 1
        if len(specials) < 8:
            # The last round finds no special element after the clone: the clone and the
            # elements after it (none of them special) are closed, and its entry goes.
            self.pop_from(position)
            self.drop_entry(entry)


def _attribute_count(rest: str, past: int | None = None) -> int:
    """The attributes in ``rest`` (a tag's text after its name), counted no further than one
    past ``past`` when it is given."""
    count = 0
    pos = 0
    end = len(rest)
    while pos < end and (past is None or count <= past):
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
    merged = _merged_attributes_bound(text)
    return merged if merged is not None and (bound is None or merged.cut < bound.cut) else bound


# An <html> or <body> start tag after the first of each adds to that element the attributes it
# lacks, each compared with all the element's: the parser spent 5 s on 0.5 MB of <body a0>
# <body a1>... (40,000 tags, each adding one), the square of their number. Their attributes
# count together, as one tag's, against MAX_ATTRIBUTES (tags in comments and scripts too, as
# the walk counts them).
# (Classes of letters, not the two names: a quarter cheaper; the name is checked after.)
_MERGING_TAG = re.compile(r"<[hHbB][tToO][mMdD][lLyY](?=[\t\n\f\r />])")


def _merged_attributes_bound(text: str) -> Bound | None:
    """Where the attributes of the document's ``<html>`` and ``<body>`` start tags, counted
    together, pass MAX_ATTRIBUTES (the offset of the tag that passes it), or None."""
    total = 0
    for found in _MERGING_TAG.finditer(text):
        if found.group().lower() not in ("<html", "<body"):
            continue
        tag = _TAG.match(text, found.start())
        if tag is None:  # pragma: no cover - a "<" and a letter always start one
            continue
        total += _attribute_count(tag.group(3), MAX_ATTRIBUTES - total)
        if total > MAX_ATTRIBUTES:
            return Bound(found.start(), "attributes")
    return None


def _regex_tags(text: str, most: int = -1) -> list[tuple[str, str, str, str]]:
    """Each tag of ``text`` as ``(closing, name, attributes, after)``: ``closing`` is ``/`` for
    an end tag, ``attributes`` all of the tag after its name (its ``>`` included), ``after`` the
    first character of the text that follows it, or nothing when a tag or the end follows. Only
    the first ``most`` tags when ``most`` is not negative."""
    if most < 0 or text.count("<") <= most:
        return _TAG_AND_NEXT.findall(text)
    tags = itertools.islice(_TAG_AND_NEXT.finditer(text), most)
    return [(found[1] or "", found[2], found[3], found[4] or "") for found in tags]


def _regex_long_attributes(text: str, longer_than: int) -> list[str]:
    """The ``attributes`` of :func:`_regex_tags` longer than ``longer_than`` characters."""
    return [rest for rest in _TAG_ATTRIBUTES.findall(text) if len(rest) > longer_than]


# Documents that take each rule of the tokenizer (quotes, spaces and the vertical tab that is
# none, names and text of one, two and four bytes a character, a tag cut by the end).
_TOKENIZER_CHECKS = [
    "",
    "x<",
    "<a href=/x title='a>b' data-x=\"unclosed>t</a >",
    "< p><P CLASS=x>\u00e9<br/><img src=a.png alt=>\n</P><1><!-- c --><a =b c = d e/>",
    "<a\x0bb><svg\u4e2d\U0001f600 f='q\"'>x</svg><b\t\f\r\na\x0bb>\u00e9",
    "</",
    "<a",
    '<a b="',
]


def _compiled_agrees(tags: Callable[[str, int], list[Any]], long_attributes: Callable[[str, int], list[str]]) -> bool:
    """Whether the compiled tokenizer reads these documents' tags as the expressions do
    (checked once on import, on each rule's edge: else the expressions are used)."""
    try:
        return all(
            tags(doc, -1) == _regex_tags(doc)
            and long_attributes(doc, n) == _regex_long_attributes(doc, n)
            and tags(doc, n) == _regex_tags(doc, n)
            for doc in _TOKENIZER_CHECKS
            for n in (0, 1, 3)
        )
    except TypeError:  # an older build, whose tags() reads them all: the expressions are used
        return False


def _load_compiled() -> tuple[Callable[[str, int], list[Any]], Callable[[str, int], list[str]]]:
    try:
        from beamcrawl.core.content._htmltags import long_attributes, tags
    except ImportError:  # built without a C compiler: the same tags from the expressions
        return _regex_tags, _regex_long_attributes
    if not _compiled_agrees(tags, long_attributes):
        return _regex_tags, _regex_long_attributes
    return tags, long_attributes


# How the tags are read: compiled (_htmltags.c) or by the expressions; COMPILED says which.
_tags, _long_attributes = _load_compiled()
COMPILED = _tags is not _regex_tags


def _attributes_bound(text: str) -> Bound | None:
    """:func:`scan` of a document of few tags: only one of many attributes can cost much."""
    long_tags = _long_attributes(text, 2 * MAX_ATTRIBUTES)
    if not any(_attribute_count(rest, MAX_ATTRIBUTES) > MAX_ATTRIBUTES for rest in long_tags):
        return None
    for match in _TAG.finditer(text):
        rest = match.group(3)
        if len(rest) > 2 * MAX_ATTRIBUTES and _attribute_count(rest, MAX_ATTRIBUTES) > MAX_ATTRIBUTES:
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
    bound, created, deepest = _walk(text)
    return Estimate(created, deepest, bound)


def _py_walk(text: str) -> tuple[Bound | None, int, int]:
    """The walk in Python: where ``text`` passes a limit (or None), the elements it counted
    and the deepest nesting (the reference the compiled walk is checked against)."""
    tree = _Tree()
    stack = tree.stack
    names = tree.names
    active = tree.active
    shared = tree.shared
    kinds = _START_KINDS
    max_elements, max_depth = MAX_ELEMENTS, MAX_DEPTH
    max_attributes, long_attributes = MAX_ATTRIBUTES, 2 * MAX_ATTRIBUTES
    # One tag past the limit tells the limit is passed: the tags after it are not read (1.3
    # million <a>, 4 MB, were read and held, ~140 MB, to be cut at the 400,001st).
    tokens = _tags(text, MAX_TAGS + 1 if 0 <= MAX_TAGS < 1 << 62 else -1)
    too_many = len(tokens) > MAX_TAGS
    if too_many:  # the walk stops at the first tag past the limit, if nothing stops it before
        del tokens[MAX_TAGS:]
    # Text before the next tag (its first character, or nothing).
    following = text[:1] if _TAG_START.match(text) is None else ""
    count = len(tokens)
    tags = 0
    try:
        walk = enumerate(tokens, 1)
        for tags, (closing, name, attributes, after) in walk:  # noqa: B007 (read on a cut)
            text_before = following
            following = after
            if len(attributes) > long_attributes and _attribute_count(attributes, max_attributes) > max_attributes:
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
                    if entry is None:
                        if name not in _MARKERS:
                            names[name] -= 1
                            stack.pop()
                            continue
                        if not top.foreign:
                            # A cell, caption, object, marquee, applet or template closed where
                            # it is the current node: the list is cleared back to its marker.
                            names[name] -= 1
                            stack.pop()
                            tree.clear_to_marker()
                            continue
                    elif active and active[-1] is entry:
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
            kind = kinds.get(name, _PLAIN)
            if kind == _PLAIN or kind == _BLOCK:
                if kind == _BLOCK:
                    if names.get("p"):
                        tree.close_p()
                elif active and active[-1].open is None and active[-1] is not _MARKER:
                    tree.reconstruct()
            elif kind == _FORMAT:
                level = tree.levels[-1]
                if name == "a" and level.by_name.get("a"):
                    tree.start(name, attributes, attributes.endswith("/>"))  # the adoption agency
                    continue
                # A formatting element: the list rebuilt, then one more element and entry
                # (:meth:`_Tree.push` and :meth:`_Tree.add_entry`, written out).
                if active and active[-1].open is None and active[-1] is not _MARKER:
                    tree.reconstruct()
                key = (name, attributes)
                tree.created += 1
                if tree.created > max_elements:
                    raise _Over("elements")
                if len(stack) >= max_depth:
                    raise _Over("depth")
                if tags < count and _closes(tokens[tags], name, long_attributes):
                    # Its end tag next (<code>x</code>): it opens, is the current node and the
                    # last entry when it closes, so the pair only counts an element and drops
                    # the entry that Noah's Ark would have dropped for it.
                    if len(stack) >= tree.deepest:
                        tree.deepest = len(stack) + 1
                    same = level.by_key.get(key)
                    if same is not None and len(same) >= 3:
                        tree.drop_entry(same[0])
                    following = next(walk)[1][3]
                    continue
                entry = _Entry(name, key)
                entry.open = element = _Element(name, entry)
                stack.append(element)
                names[name] = names.get(name, 0) + 1
                if len(stack) > tree.deepest:
                    tree.deepest = len(stack)
                same = level.by_key.get(key)
                if same is None:
                    same = level.by_key[key] = []
                elif len(same) >= 3:  # Noah's Ark: at most three of one element and attributes
                    tree.drop_entry(same[0])
                named = level.by_name.get(name)
                if named is None:
                    level.by_name[name] = [entry]
                else:
                    named.append(entry)
                same.append(entry)
                active.append(entry)
                continue
            elif kind == _CELL and top is not None and top.name == "tr":
                # A cell in a row (a row is only ever opened in a table or its section): no part
                # to close or imply, and the cell is a marker.
                tree.push(name)
                tree.add_marker()
                continue
            elif kind == _ROW and top is not None and top.name in _SECTIONS:
                pass  # a row in a table section: no part to close or imply
            elif kind == _EMPTY:  # a void element: rebuilt list, one element left closed
                if active and active[-1].open is None and active[-1] is not _MARKER:
                    tree.reconstruct()
                tree.count_one()
                continue
            elif kind == _LIST_ITEM:
                # An open item of the same list closes, unless a special element is nearer.
                same_items = ("li",) if name == "li" else ("dd", "dt")
                for i in range(len(stack) - 1, -1, -1):
                    open_name = stack[i].name
                    if open_name in same_items:
                        tree.pop_from(i)
                        break
                    if open_name in _SPECIAL and open_name not in ("address", "div", "p"):
                        break
                if names.get("p"):
                    tree.close_p()
            elif kind == _HEADING:
                if names.get("p"):
                    tree.close_p()
                if stack and stack[-1].name in _HEADINGS:
                    tree.pop_from(len(stack) - 1)
            elif kind == _RULE:  # <hr>: closes a <p>, one element left closed
                if names.get("p"):
                    tree.close_p()
                tree.count_one()
                continue
            else:
                tree.start(name, attributes, attributes.endswith("/>"))
                continue
            # Open the element (what :meth:`_Tree.push` does, for one with no entry).
            tree.created += 1
            if tree.created > max_elements:
                raise _Over("elements")
            if len(stack) >= max_depth:
                raise _Over("depth")
            if (
                tags < count
                and _closes(tokens[tags], name, long_attributes)
                and not (following and active and active[-1].open is None and active[-1] is not _MARKER)
            ):
                # Its end tag next (<span>x</span>), with nothing to rebuild for the text in
                # between: it opens and closes as the current node, and only counts.
                if len(stack) >= tree.deepest:
                    tree.deepest = len(stack) + 1
                following = next(walk)[1][3]
                continue
            plain = shared.get(name)
            if plain is None:
                plain = shared[name] = _Element(name, None)
            stack.append(plain)
            names[name] = names.get(name, 0) + 1
            if len(stack) > tree.deepest:
                tree.deepest = len(stack)
        if too_many:
            tags = MAX_TAGS + 1
            raise _Over("tags")
        if following:  # the text after the last tag (a cut there is at that tag)
            tree.reconstruct()
    except _Over as over:
        return Bound(_offset_of_tag(text, tags), over.reason), tree.created, tree.deepest
    return None, tree.created, tree.deepest


def _closes(token: tuple[str, str, str, str], name: str, long_attributes: int) -> bool:
    """Whether ``token`` is the end tag of ``name``, with too few attributes to pass a limit."""
    return token[0] == "/" and (token[1] == name or token[1].lower() == name) and len(token[2]) <= long_attributes


def _regex_offset_of_tag(text: str, number: int) -> int:
    """Where the ``number``-th tag (1-based) of :data:`_TAG_AND_NEXT` starts (the end of
    ``text`` when there are fewer)."""
    for count, match in enumerate(_TAG.finditer(text), 1):
        if count == number:
            return match.start()
    return len(text)


def _offsets_agree(tag_offset: Callable[[str, int], int]) -> bool:
    """Whether the compiled tokenizer finds each tag where the expression does, on the
    documents :func:`_compiled_agrees` reads (checked once on import)."""
    return all(
        tag_offset(doc, n) == _regex_offset_of_tag(doc, n)
        for doc in _TOKENIZER_CHECKS
        for n in range(-1, len(_regex_tags(doc)) + 2)
    )


def _load_tag_offset() -> Callable[[str, int], int]:
    if not COMPILED:
        return _regex_offset_of_tag
    try:
        from beamcrawl.core.content._htmltags import tag_offset
    except ImportError:  # an older build: the expression finds the tag
        return _regex_offset_of_tag
    return tag_offset if _offsets_agree(tag_offset) else _regex_offset_of_tag


# Where a cut's tag starts: found by the compiled tokenizer where it reads the tags (a 2 MB page
# cut at its 200,000th tag: 56 ms by the expression), else by the expression.
_offset_of_tag = _load_tag_offset()


# --- the walk compiled (_htmltags.walk) ---

WalkTokens = Callable[..., tuple[int, "str | None", int, int]]


def _walk_tables(
    fixed: tuple[str, ...], sets: tuple[str, ...]
) -> tuple[dict[str, int], tuple[str, ...], tuple[int, ...]]:
    """The names the compiled walk knows, numbered (``fixed``, the ones it names, first), and
    each one's flags: bit i for the set of this module named ``sets[i]``, its kind in
    :data:`_START_KINDS` from bit 16. The sets are this module's: the C holds no copy."""
    members = [globals()[name] for name in sets]
    known = set().union(*members, _START_KINDS)
    names = tuple(fixed) + tuple(sorted(known - set(fixed)))
    flags = tuple(
        sum(1 << bit for bit, members_of in enumerate(members) if name in members_of)
        | _START_KINDS.get(name, _PLAIN) << 16
        for name in names
    )
    return {name: number for number, name in enumerate(names)}, names, flags


def _compiled_walk_by(
    walk_tokens: WalkTokens, tables: tuple[Any, Any, Any], text: str
) -> tuple[Bound | None, int, int]:
    """:func:`_py_walk` by the compiled walk: the tokens of :func:`_tags`, the limits as they
    are now, and the cut's offset found here."""
    limits = MAX_ELEMENTS, MAX_DEPTH, MAX_ATTRIBUTES, MAX_TAGS
    if not all(0 <= limit < 1 << 62 for limit in limits):
        return _py_walk(text)  # no such limits in use; the Python walk answers them as it does
    following = bool(text) and _TAG_START.match(text) is None
    ids, names, flags = tables
    tokens = _tags(text, MAX_TAGS + 1)  # one past the limit tells it is passed (_py_walk)
    tag, reason, created, deepest = walk_tokens(tokens, following, ids, names, flags, *limits, _attribute_count)
    return (None if reason is None else Bound(_offset_of_tag(text, tag), reason)), created, deepest


# Documents that take each rule of the walk (the common tags and their short ways, Noah's Ark,
# the adoption agency, <a> and <nobr>, markers, tables, SVG and MathML, lists, headings,
# forms, names Python lowers apart from ASCII, text before and after), checked under limits
# that cut them too.
_WALK_CHECKS = [
    "",
    "x",
    "<p><b><b><b><b>x</b></p>x<b id=1><b id=1><b id=1><b id=1><p>x</b>",
    "<b><div>x</b>y<a><p><a>x</p><a>x<div><a>y<nobr>x<nobr>y</nobr><i><p><s><div>x</i>"
    + "<div>" * 9
    + "<b>"
    + "<p>" * 9
    + "</b>z",
    "<SPAN>x</span><Code>y</CODE><b>x</i></b><span></span a b c><em>x</em><u>y</u>",
    "<table><td>x<tr><td><b>y</td>z</table><table><caption>c<tbody><tr><th>1<td><i>2</table>"
    "<table><tr><table><thead><tr><col><tfoot><colgroup></table>x",
    "<object><b>x</object>y<applet><i>z</applet><template><u>t</template><marquee><s>m</div>",
    "<div><b>x</div><object></object>y<div><i>x</div><table><tr><td></td></table>z",
    "<svg><g><b>x<svg><font color=1>y<math><mi><p>z</math><svg/><path/></svg><svg><foreignObject>"
    "<table><td>q</foreignObject></svg><math><font face=x><font>f</font><tr><foreignObject><table>x",
    "<select><option>a<option>b<optgroup><select><button><button><li>a<li>b<ul><li>c</li></ul><dd>c<dt>"
    "<h1><h2>x</h2><hr><br/></br><form><div></form></div></p><address><li>x</li></p></select>",
    "<B\u0130>x</b\u0130><lin\u212a><spa\u212a>x</spa\u212a><\u212a>\u212a</\u212a><b\u00e9>\u00e9</B\u00c9>",
    "<a " + "b " * 600 + ">x</a><b>x</b " + "c " * 600 + ">",
    "<p><font id=1>x" * 30 + "<div>" * 40 + "<ul><li>" * 10 + "x",
    # Formatting elements whose attributes weigh: rebuilt, adopted, and between (CLONE_CHARS).
    "<p><a href='" + "x" * 1100 + "'>x</p>" + "<p>x</p>" * 3 + "<i class='" + "y" * 600 + "'><b><div>x</b>" * 3,
]


def _walk_agrees(walk_tokens: WalkTokens, tables: tuple[Any, Any, Any]) -> bool:
    """Whether the compiled walk answers what :func:`_py_walk` answers on these documents
    (checked once on import, under the limits and smaller ones: else the Python walk is used)."""
    global MAX_ELEMENTS, MAX_DEPTH, MAX_ATTRIBUTES, MAX_TAGS
    held = MAX_ELEMENTS, MAX_DEPTH, MAX_ATTRIBUTES, MAX_TAGS
    documents = _WALK_CHECKS + ["".join(_WALK_CHECKS)]
    try:
        for limits in (held, (60, 9, 3, held[3]), (held[0], held[1], held[2], 25), (200, 30, 256, 150)):
            MAX_ELEMENTS, MAX_DEPTH, MAX_ATTRIBUTES, MAX_TAGS = limits
            for doc in documents:
                if _compiled_walk_by(walk_tokens, tables, doc) != _py_walk(doc):
                    return False
    except Exception:  # noqa: BLE001 - a walk that fails is one that does not agree
        return False
    finally:
        MAX_ELEMENTS, MAX_DEPTH, MAX_ATTRIBUTES, MAX_TAGS = held
    return True


def _load_compiled_walk() -> Callable[[str], tuple[Bound | None, int, int]]:
    try:
        from beamcrawl.core.content._htmltags import WALK_NAMES, WALK_SETS
        from beamcrawl.core.content._htmltags import walk as walk_tokens
    except ImportError:  # built without a C compiler (or an older build): the walk in Python
        return _py_walk
    tables = _walk_tables(WALK_NAMES, WALK_SETS)
    if not _walk_agrees(walk_tokens, tables):
        return _py_walk

    def compiled_walk(text: str) -> tuple[Bound | None, int, int]:
        return _compiled_walk_by(walk_tokens, tables, text)

    return compiled_walk


# How the tags are walked: compiled (_htmltags.walk) or in Python; WALK_COMPILED says which.
_walk = _load_compiled_walk()
WALK_COMPILED = _walk is not _py_walk
