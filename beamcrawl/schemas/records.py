"""Record types that flow through a round and live in the store.

Stored records are encoded as one JSON cell per row (``r:json``) plus, where a transform
scans or filters on a field, a few small cells of their own. JSON keeps rows readable with
``cbt`` or ``sqlite3`` and lets fields be added without a migration; the hot data (keys) is
binary and sorted. The rows a round writes most, a new URL's frontier row and its seen-set
discovery cell, are written in a compact binary format instead (``schemas/cells.py``): its
first byte tells it from JSON, and the readers here read both.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import itertools
import json
import operator
import struct
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any, Callable, Iterable, Iterator, NamedTuple, TypeVar

from beamcrawl.schemas import cells as binary

JSON_CELL = "r:json"
# A seen-set row written at discovery packs these UrlState fields in one cell (binary,
# schemas/cells.py; a JSON array in rows written before).
QUEUED_CELL = "u:q"
QUEUED_FIELDS = ("url", "first_seen_ms", "source", "depth")
# A fetch's outcome packs these UrlState fields in one cell (binary, schemas/cells.py; a JSON
# array when a value does not fit it), where rows written before hold a ``u:<field>`` cell
# each. It is newer than any of those, so its fields win over theirs.
OUTCOME_CELL = "u:o"
OUTCOME_FIELDS = ("url", "state", "status", "fetched_at_ms", "checksum", "error")
# The URL's revisit state after its last fetch (binary, schemas/cells.py; JSON in rows
# written before or when a value does not fit), read on its own by URL seen.
REVISIT_CELL = "u:revisit"
# One encoder for compact JSON (json.dumps with arguments builds a new encoder per call).
_COMPACT = json.JSONEncoder(separators=(",", ":"), default=lambda v: _json_default(v))


R = TypeVar("R")
# The field-values getter of each @shuffled class (Packed pickles lists of them as rows).
_FIELD_VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
# The field names of each @shuffled class.
_FIELD_SETS: dict[type, frozenset[str]] = {}


def shuffled(cls: type[R]) -> type[R]:
    """Makes a dataclass pickle as its class and a tuple of its field values.

    A record crossing a shuffle is pickled and unpickled by Beam's fallback coder (or, where a
    transform declares its type, by its coder in schemas/coders.py, which writes the values
    only). By default
    pickle writes a dataclass as its ``__dict__`` and rebuilds it key by key; as ``(class,
    values)`` it is rebuilt by one ``__init__`` call, which halves the encoding and makes
    decoding three times cheaper (a parsed page with its links: 29 → 16 µs to encode, 31 →
    9 µs to decode). Only for records whose ``__init__`` takes every field and changes none:
    nothing pickled this way outlives the job that wrote it.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init for f in fields) or hasattr(cls, "__post_init__") or len(fields) < 2:
        raise TypeError(f"{cls.__name__}: shuffled records need two or more init fields and no __post_init__")
    values: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*(f.name for f in fields))
    _FIELD_VALUES[cls] = values
    _FIELD_SETS[cls] = frozenset(f.name for f in fields)

    def __reduce__(self: Any) -> tuple[type, tuple[Any, ...]]:
        if type(self) is not cls:  # a subclass's own fields would be lost
            return object.__reduce__(self)  # type: ignore[return-value]
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls


def evolve(record: R, **changes: Any) -> R:
    """``dataclasses.replace(record, **changes)`` for a ``@shuffled`` record, at a quarter of
    its cost (``replace`` reads every field's metadata, then calls ``__init__`` by keyword:
    3.7-4.7 µs for a page's records, against 0.9-1.3). As ``@shuffled`` checked, such a
    record's ``__init__`` only assigns its fields, so a new object given the same field
    values, ``changes`` over them, is what ``replace`` makes. Anything else (another class,
    a record holding attributes that are not fields) goes to ``replace``.

    Raises:
        TypeError: A change names no field of the record.
    """
    cls = type(record)
    names = _FIELD_SETS.get(cls)
    values = getattr(record, "__dict__", None)
    if names is None or values is None or len(values) != len(names) or not changes.keys() <= names:
        return dataclasses.replace(record, **changes)  # type: ignore[type-var]
    new = object.__new__(cls)
    fields = new.__dict__
    fields.update(values)
    fields.update(changes)
    return new


def field_values(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """The function that gives a ``@shuffled`` record's field values, in ``__init__`` order."""
    return _FIELD_VALUES[cls]


def shuffled_classes() -> list[type]:
    """Every ``@shuffled`` record class (schemas/coders.py registers a coder for each)."""
    return list(_FIELD_VALUES)


class Packed(list):
    """A list of records that crosses a shuffle as one pickle.

    Beam's fallback coder encodes a plain ``list`` element by element, one pickle per record
    (its class looked up and written each time); a list subclass goes to pickle whole, so
    each record class is written once. Measured in a round: the URL candidates and simhash
    items of one page cost some 270 µs encoded one by one.

    A list of one @shuffled record class pickles as the class once and a row of field
    values per record: no Python ``__reduce__`` call per record (a list of frontier entries:
    1.9 → 1.1 µs an entry to encode, 0.8 → 0.65 to decode).
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        if self:
            cls = type(self[0])
            values = _FIELD_VALUES.get(cls)
            if values is not None and all(type(r) is cls for r in self):
                return _records, (cls, list(map(values, self)))
        return Packed, (list(self),)


def _records(cls: type, rows: list[tuple[Any, ...]]) -> Packed:
    """A :class:`Packed` list of ``cls`` records rebuilt from their field values."""
    return Packed(itertools.starmap(cls, rows))


def packed_by_host(entries: Iterable[FrontierEntry]) -> Iterator[tuple[str, Packed]]:
    """``(host, Packed entries)`` per host, hosts in order of first appearance.

    Due work travels one element per host this way, not one per URL: a round's due rows
    outnumber its fetches, and each element costs its encodings and a pass through every
    transform on the way to slot assignment.
    """
    hosts: dict[str, Packed] = {}
    for entry in entries:
        batch = hosts.get(entry.host)
        if batch is None:
            hosts[entry.host] = batch = Packed()
        batch.append(entry)
    return iter(hosts.items())


# Priorities of work coming in; discovered links get a priority from their depth.
PRIORITY_SEED = 1.0
# Distinct linking hosts remembered per URL offer (importance saturates long before; the
# hashes keep a combine's state small however popular a URL is).
MAX_INLINK_HOSTS = 64


def _own_values(obj: Any) -> dict[str, Any]:
    """A record's field → value, not deep-copied as ``dataclasses.asdict`` does: its
    ``__dict__``, or a slotted record's ``values()``."""
    values = getattr(obj, "__dict__", None)
    return values if values is not None else obj.values()


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _own_values(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _encode(obj: Any) -> dict[str, bytes]:
    # The instance's own values (a nested record, if any, encoded through the default hook).
    return {JSON_CELL: _COMPACT.encode(_own_values(obj)).encode()}


def json_cell(value: Any) -> bytes:
    """A value as a ``u:<field>`` cell: exactly ``json.dumps(value).encode()``.

    Most cells are a string, an int or null, which are encoded here directly; ``json.dumps``
    builds an encoder for anything but a string (about 1 µs for a ``null``). Everything
    else (floats, dicts, lists) goes to ``json.dumps`` itself.
    """
    if value is None:
        return b"null"
    if isinstance(value, str):
        return encode_basestring_ascii(value).encode()
    if type(value) is int:
        return int.__repr__(value).encode()
    if value is True:
        return b"true"
    if value is False:
        return b"false"
    return json.dumps(value).encode()


def _decode_json(cells: dict[str, bytes]) -> dict[str, Any]:
    raw = cells.get(JSON_CELL)
    if raw is None:
        raise ValueError("row has no r:json cell")
    return json.loads(raw)


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _known_fields(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """Drops JSON fields the dataclass does not know, so a row written by a newer version
    (a field added since) still loads."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    if names.issuperset(values):  # the usual row: nothing to drop
        return values
    return {k: v for k, v in values.items() if k in names}


def frontier_key(due_ms: int, fp: int) -> bytes:
    """Frontier rows sort by due time, then fingerprint, so 'what is due' is one range scan."""
    return struct.pack(">QQ", due_ms, fp)


def fp_key(fp: int) -> bytes:
    """The seen set is keyed by the 8-byte big-endian fingerprint (uniform over the range)."""
    return struct.pack(">Q", fp)


def key_fp(key: bytes) -> int:
    return struct.unpack(">Q", key[:8])[0]


@shuffled
@dataclass(slots=True)
class FrontierEntry:
    """A queued URL: a frontier row.

    Slotted: a round holds its due rows by the hundred thousand between reading them and
    planning the hosts, and an entry without its ``__dict__`` is about 100 bytes smaller."""

    url: str
    fp: int
    host: str
    due_ms: int
    priority: float = 0.5
    depth: int = 0
    source: str = "link"  # seed | link | redirect | sitemap | feed | submit | revisit
    inlinks: int = 0
    # Frontier keys of other rows for the same fingerprint (a rerun after a crash may queue
    # a URL twice); they are deleted when this one is done.
    also_keys: list[str] = field(default_factory=list)
    # Times the URL was set aside over its domain's budget or host caps (BEAST): each
    # deferral doubles the next one's interval (transforms/budgets.py).
    deferrals: int = 0
    # What the URL is fetched as: an ordinary page, or a sitemap or feed to read for URLs.
    kind: str = "page"  # page | sitemap | feed
    # Redirects followed to reach this URL (each hop is a URL of its own; at most
    # --max-redirects, core/freshness.redirect_allowed).
    hops: int = 0
    # Why the URL was queued: the operator's reason (``beamcrawl submit``), or what the
    # scheduler saw (``revisit: changed``, ``retry: 503``...).
    reason: str = ""
    # A sitemap's or feed's lastmod claim for the URL (epoch seconds), if any.
    lastmod: float | None = None
    # The origin of the robots.txt whose Sitemap: line named this sitemap (a sitemap named
    # there may list that origin's URLs, sitemaps.org cross-submits).
    robots_origin: str | None = None
    # A URL fetched before: its revisit state (core/freshness.RevisitState.to_dict()) as of
    # that fetch, carried in the row so the next fetch sends its validators and slot
    # assignment ranks it, with no per-URL lookup. None for a URL never fetched.
    revisit: dict[str, Any] | None = None

    @property
    def key(self) -> bytes:
        return frontier_key(self.due_ms, self.fp)

    def to_cells(self, revisit_cell: bytes | None = None) -> dict[str, bytes]:
        """The row's one cell (``r:json``, by its old name), binary (``schemas/cells.py``);
        JSON for an entry whose values the binary layout cannot hold exactly.

        Args:
            revisit_cell: ``encode_revisit(self.revisit)`` when the caller has it already
                (``ParsedPage.revisit_cell``): it is not encoded again.
        """
        raw = binary.encode_frontier(self, revisit_cell)
        return {JSON_CELL: raw} if raw is not None else _encode(self)

    def to_json(self) -> str:
        """The entry as one line of compact JSON (its cell and staged line in earlier versions)."""
        return _COMPACT.encode(self.values())

    def values(self) -> dict[str, Any]:
        """Field → value, in field order (what ``__dict__`` was before the slots)."""
        return dict(zip(_FRONTIER_FIELDS, _FRONTIER_VALUES(self)))

    @classmethod
    def from_cells(cls, cells: dict[str, bytes]) -> "FrontierEntry":
        """Reads a row written in either format.

        Raises:
            ValueError: No ``r:json`` cell, or one that does not decode (the caller sets
                the row aside).
        """
        raw = cells.get(JSON_CELL)
        if raw is not None and binary.is_binary(raw):
            return cls(*binary.decode_frontier(raw))
        values = _decode_json(cells)
        if type(values) is not dict:
            raise ValueError("frontier row is not a JSON object")
        try:
            return cls(**_known_fields(cls, values))
        except TypeError as exc:  # a required field missing
            raise ValueError(f"frontier row does not load: {exc}") from None


_FRONTIER_FIELDS = tuple(f.name for f in dataclasses.fields(FrontierEntry))
_FRONTIER_VALUES = field_values(FrontierEntry)


@shuffled
@dataclass
class UrlState:
    """A row of the seen set: what is known about one URL.

    Written as partial updates, merged into the row without reading it first, in cells
    that pack the fields written together: a URL just discovered gets one ``u:q`` cell
    (:meth:`discovered_cells`, :data:`QUEUED_FIELDS`), a fetch one ``u:o`` cell
    (:meth:`outcome_cells`, :data:`OUTCOME_FIELDS`); the fields written on their own have a
    ``u:<field>`` cell each: ``revisit`` binary (:func:`revisit_cell`), ``reason`` JSON. A
    field's own cell wins over ``u:q``, and ``u:o`` over both (rows written before it have
    ``u:<field>`` cells of JSON for the fields it packs).
    """

    url: str
    first_seen_ms: int | None = None
    state: str = "queued"  # queued | fetched | error | refused | robots_disallowed | usage_refused
    source: str | None = None
    depth: int | None = None
    status: int | None = None
    fetched_at_ms: int | None = None
    checksum: str | None = None
    error: str | None = None
    # The revisit state after the last fetch (core/freshness.RevisitState.to_dict()):
    # validators, visits, changes, change rate, next due. For inspection and for work
    # submitted again by hand (its validators go with it); the frontier row carries the copy
    # the next fetch uses.
    revisit: dict[str, Any] | None = None
    reason: str | None = None  # why it was last queued by hand (``beamcrawl submit --reason``)

    def to_cells(self, only: tuple[str, ...] | None = None) -> dict[str, bytes]:
        values = self.__dict__
        names = only if only is not None else tuple(f.name for f in dataclasses.fields(self))
        return {f"u:{name}": json_cell(values[name]) for name in names}

    @staticmethod
    def discovered_cells(url: str, first_seen_ms: int, source: str | None, depth: int | None) -> dict[str, bytes]:
        """The cells of a URL just queued: one (``u:q``, binary: ``schemas/cells.py``)
        instead of one per field, with no ``null`` cells; ``state`` is the default, ``queued``."""
        raw = binary.encode_queued(url, first_seen_ms, source, depth)
        if raw is None:  # a value the binary layout cannot hold exactly
            raw = _COMPACT.encode([url, first_seen_ms, source, depth]).encode()
        return {QUEUED_CELL: raw}

    def outcome_cells(self) -> dict[str, bytes]:
        """The cell of a fetch's outcome: :data:`OUTCOME_FIELDS` in one (``u:o``, binary)."""
        values = (self.url, self.state, self.status, self.fetched_at_ms, self.checksum, self.error)
        raw = binary.encode_outcome(*values)
        if raw is None:  # a value the binary layout cannot hold exactly
            raw = _COMPACT.encode(list(values)).encode()
        return {OUTCOME_CELL: raw}

    @classmethod
    def from_cells(cls, cells: dict[str, bytes]) -> "UrlState":
        """Reads a seen-set row; its packed cells (``u:q``, ``u:o``) in either format. A
        packed cell that does not decode counts as absent (:data:`UNREADABLE_CELLS` counts
        it)."""
        known = _URL_STATE_FIELDS
        values: dict[str, Any] = {}
        packed = cells.get(QUEUED_CELL)
        if packed is not None:
            values.update(_packed_values(QUEUED_CELL, packed) or {"url": ""})  # unreadable: no URL known
        values.update(
            (col[2:], json.loads(raw))
            for col, raw in cells.items()
            if col.startswith("u:") and col[2:] in known and col != REVISIT_CELL
        )
        revisit = cells.get(REVISIT_CELL)
        if revisit is not None:
            values["revisit"] = revisit_value(revisit)
        outcome = cells.get(OUTCOME_CELL)
        if outcome is not None:
            values.update(_packed_values(OUTCOME_CELL, outcome))
        if "url" not in values and (packed is not None or outcome is not None):
            values["url"] = ""  # every packed cell unreadable: no URL known
        return cls(**values)


# Discovery cells (``u:q``) read as absent because they did not decode, in this process.
UNREADABLE_CELLS = collections.Counter[str]()


def revisit_cell(revisit: dict[str, Any] | None) -> bytes:
    """A revisit state (``RevisitState.to_dict()``) as its ``u:revisit`` cell: binary, or
    its JSON when a value does not fit the layout (as before the binary cells)."""
    return binary.encode_revisit(revisit) or json_cell(revisit)


def revisit_value(raw: bytes) -> Any:
    """A ``u:revisit`` cell's value, of either format: a dict, or None (also for a cell that
    does not decode, counted in :data:`UNREADABLE_CELLS`). A JSON cell's value as written."""
    try:
        return binary.decode_revisit(raw) if binary.is_binary(raw) else json.loads(raw)
    except (ValueError, RecursionError):  # CellError, JSONDecodeError, UnicodeDecodeError
        UNREADABLE_CELLS[REVISIT_CELL] += 1
        return None


_URL_STATE_FIELDS = frozenset(f.name for f in dataclasses.fields(UrlState))
# Each packed cell of the seen set: its fields, and the decoder of its binary format.
_PACKED: dict[str, tuple[tuple[str, ...], Callable[[bytes], tuple[Any, ...]]]] = {
    QUEUED_CELL: (QUEUED_FIELDS, binary.decode_queued),
    OUTCOME_CELL: (OUTCOME_FIELDS, binary.decode_outcome),
}


def _packed_values(column: str, raw: bytes) -> dict[str, Any]:
    """A packed seen-set cell's fields (``u:q`` or ``u:o``, binary or a JSON array), or none
    (counted) when it does not decode."""
    names, decode = _PACKED[column]
    try:
        if binary.is_binary(raw):
            return dict(zip(names, decode(raw)))
        values = json.loads(raw)
        if type(values) is list and len(values) == len(names):
            return dict(zip(names, values))
    except (ValueError, RecursionError):  # CellError, JSONDecodeError, UnicodeDecodeError
        pass
    UNREADABLE_CELLS[column] += 1
    return {}


# The robots.txt fields of a HostRecord kept per scheme, and their values before any answer.
ROBOTS_FIELDS = (
    "robots",
    "robots_fetched_at",
    "robots_status",
    "robots_good",
    "robots_good_at",
    "robots_failing_since",
    "robots_via",
)
_ROBOTS_EMPTY: dict[str, Any] = {
    "robots": None,
    "robots_fetched_at": 0.0,
    "robots_status": None,
    "robots_good": None,
    "robots_good_at": 0.0,
    "robots_failing_since": 0.0,
    "robots_via": "",
}


@shuffled
@dataclass
class HostRecord:
    """What the crawler remembers about a host between rounds (politeness lives here)."""

    host: str
    delay: float = 0.0  # current gap between requests, seconds (0 = not yet set)
    last_fetch_end: float = 0.0  # epoch seconds when the last response on this host ended
    not_before: float = 0.0  # epoch seconds; Retry-After and back-off push this forward
    last_response_time: float = 0.0
    # robots.txt: the answer to the latest fetch (RobotsRules.to_dict()) and when it came.
    robots: dict[str, Any] | None = None
    robots_fetched_at: float = 0.0
    robots_status: int | None = None
    # The last good answer (a 2xx file, or a 4xx "no rules") and when it was fetched, kept
    # apart from the latest answer while that one is "unreachable", so that a robots.txt
    # unreachable for over 24 h can fall back to it (RFC 9309 §2.4). None while the latest
    # answer is good: it is then the good copy itself (not stored twice).
    robots_good: dict[str, Any] | None = None
    robots_good_at: float = 0.0
    robots_failing_since: float = 0.0  # start of the current run of unreachable answers; 0 = none
    # The host (slot key) a robots.txt redirect last led to, when another fetch loop owned
    # it: the next robots.txt fetch is planned in that host's fetch shard, on its clock.
    robots_via: str = ""
    # robots.txt is located per scheme, host and port (RFC 9309 §2.3): the fields above are
    # the answer for ``robots_scheme`` ("" in a record written before schemes were told
    # apart: it is taken for the first scheme asked), and ``robots_other`` holds the same
    # fields (:data:`ROBOTS_FIELDS`) for every other scheme this slot was asked over
    # (``http://h/`` and ``https://h/`` share the slot ``h``).
    robots_scheme: str = ""
    robots_other: dict[str, dict[str, Any]] = field(default_factory=dict)
    # DNS, resolved before slot assignment (transforms/resolve.py); an error is cached too.
    ip: str | None = None
    resolved_at: float = 0.0
    dns_ttl: float = 0.0
    dns_error: str | None = None
    consecutive_errors: int = 0
    fetches: int = 0
    # DNS failures in a row (each holds the host back twice as long; core/net/fetcher.py).
    dns_failures: int = 0
    # What the host refused the crawler's identity (core/policy/refusals.py Refusal.to_dict()
    # each: kind, identity, evidence, times): the host is held while one is in force.
    refusals: list[dict[str, Any]] = field(default_factory=list)

    def robots_view(self, scheme: str) -> HostRecord:
        """A shallow copy whose robots fields are those of ``scheme`` (empty if never asked):
        for reading; the record itself is unchanged."""
        view = dataclasses.replace(self)
        view.select_robots(scheme)
        return view

    def select_robots(self, scheme: str) -> None:
        """Makes the robots fields describe ``scheme``'s robots.txt, keeping the current
        scheme's in ``robots_other`` (nothing is lost: selecting back restores them)."""
        if self.robots_scheme in ("", scheme):
            self.robots_scheme = scheme
            return
        other = dict(self.robots_other)
        other[self.robots_scheme] = {name: getattr(self, name) for name in ROBOTS_FIELDS}
        kept = other.pop(scheme, None) or {}
        for name in ROBOTS_FIELDS:
            setattr(self, name, kept.get(name, _ROBOTS_EMPTY[name]))
        self.robots_other = other
        self.robots_scheme = scheme

    def resolution_fresh(self, now: float) -> bool:
        """Whether the stored DNS answer (address or error) may still be used at ``now``."""
        return self.resolved_at > 0 and now < self.resolved_at + self.dns_ttl

    def to_cells(self) -> dict[str, bytes]:
        return _encode(self)

    @classmethod
    def from_cells(cls, host: str, cells: dict[str, bytes] | None) -> "HostRecord":
        if not cells:
            return cls(host=host)
        return cls(**_known_fields(cls, _decode_json(cells)))


@shuffled
@dataclass
class HostPolicy:
    """An operator's policy for a host (steering), applied at the next round."""

    host: str
    min_delay_ms: int | None = None
    pause_until: float | None = None  # epoch seconds
    blocked: bool = False
    updated_at: float | None = None  # epoch seconds of the last change (for `hosts show`)

    def to_cells(self) -> dict[str, bytes]:
        return _encode(self)

    @classmethod
    def from_cells(cls, host: str, cells: dict[str, bytes] | None) -> "HostPolicy | None":
        if not cells:
            return None
        return cls(**_known_fields(cls, _decode_json(cells)))


@shuffled
@dataclass
class HostPlan:
    """AssignSlots' decision for one host this round: the fetcher's unit of work."""

    host: str
    shard: int
    record: HostRecord
    delay: float
    fetch_robots: bool
    # Lists where the plan is made and fetched; between the two, as it crosses to its fetch
    # shard and waits there, its cells compressed (schemas/due_rows.py DueRows).
    entries: list[FrontierEntry]
    # URLs the cached robots.txt already forbids: marked done without a fetch.
    disallowed: list[FrontierEntry] = field(default_factory=list)
    # How many of ``disallowed`` a check refused because it passed its work's bound (a
    # robots.txt whose rules no index sorts out cheaply: core/policy/robots_match.py).
    robots_capped: int = 0
    # The schemes whose robots.txt is fetched first (``fetch_robots``); empty: the first
    # entry's scheme (or http).
    robots_schemes: list[str] = field(default_factory=list)
    # The schemes of ``entries`` in order of first appearance (which robots.txt each URL is
    # under), so that the fetcher knows them before it decodes the URLs; empty: read from
    # ``entries``.
    schemes: list[str] = field(default_factory=list)


class Spooled(NamedTuple):
    """A response record written in the fetch stage, before the round knows whether it is
    kept (transforms/set_aside.py): one gzip member in a spool file of the round's staging,
    and its request record's member right after it."""

    name: str  # of the spool file, in the round's staging ``spool/`` folder
    offset: int
    length: int  # of the response record's member
    record_id: str  # its WARC-Record-ID (the request record's WARC-Concurrent-To)
    mime: str | None  # what its index line says (core/archive/cdxj.py Capture)
    location: str | None
    request_length: int = 0  # of the request record's member after it (0: not spooled)


@shuffled
@dataclass
class FetchResult:
    """One fetch (or a decision not to fetch) of one queued URL."""

    entry: FrontierEntry
    outcome: str  # fetched | error | refused (address policy) | robots_disallowed | usage_refused | deferred
    url: str
    final_url: str = ""
    status: int = 0
    fetched_at: float = 0.0  # epoch seconds when the request started
    elapsed: float = 0.0
    ip: str | None = None
    http_version: str = "1.1"
    reason: str = ""
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    raw_body: bytes = b""  # the entity: transfer codings undone, content codings kept (the WARC record's)
    body: bytes = b""  # decoded payload, for parsing
    truncated: str | None = None  # 'length' when the size cap cut the body
    error: str | None = None
    waited: float = 0.0  # seconds the request waited for its host's turn (politeness)
    # Set when the page store set the body aside in the fetch stage (transforms/set_aside.py):
    # ``body`` and ``raw_body`` are then empty, and these say what the stages after it need.
    body_size: int | None = None  # bytes of the decoded body
    digest: str | None = None  # WARC payload digest of raw_body ("sha1:<base32>")
    spooled: Spooled | None = None  # where its response record waits
    # Seconds of ``elapsed`` the fetch loop spent late on other work (core/net/fetcher.py
    # LoopLag): not the host's time, so not charged to its adaptive delay.
    loop_lag: float = 0.0
    # The site's usage preferences for the crawl's purposes (core/policy/usage_prefs.py), only
    # when the crawl declares purposes: purpose -> allowed | refused | unstated, and, when one
    # was refused, the evidence (outcome usage_refused: by robots.txt, not fetched; fetched:
    # by the Content-Usage header, the body dropped before it was archived or parsed).
    usage: dict[str, str] | None = None
    usage_refused: str | None = None
    usage_bad_header: bool = False  # a Content-Usage header that did not parse (it said nothing)

    @property
    def response_time(self) -> float:
        """The host's part of ``elapsed``: what the adaptive delay is driven by."""
        return max(0.0, self.elapsed - self.loop_lag)

    @property
    def payload_size(self) -> int:
        """Bytes of the decoded body, whether it is still here or was set aside."""
        return len(self.body) if self.body_size is None else self.body_size

    @property
    def content_type(self) -> str:
        for name, value in self.response_headers:
            if name.lower() == "content-type":
                return value
        return ""

    def header(self, wanted: str) -> str | None:
        wanted = wanted.lower()
        for name, value in self.response_headers:
            if name.lower() == wanted:
                return value
        return None


@shuffled
@dataclass
class Link:
    """An out-link found on a page, already normalised and fingerprinted."""

    url: str
    fp: int
    anchor: str = ""
    nofollow: bool = False
    # a | canonical | redirect | area | frame | feed (an HTML page's RSS/Atom link) |
    # refresh (a <meta http-equiv=refresh> target) |
    # sitemap (robots.txt Sitemap: line, sitemap index entry) | listed (a sitemap's or feed's URL)
    kind: str = "a"
    lastmod: float | None = None  # a sitemap's or feed's date for a listed URL
    # The URL's politeness slot (``urlnorm.host_of``), found once where the link is parsed:
    # candidates, linking domains and the link-edge columns all need it. "" when it was
    # not set (or the URL has none): each of them then asks ``host_of`` itself.
    host: str = ""


# Link's fields in the order LinkColumns keeps them.
LINK_FIELDS = ("url", "fp", "anchor", "nofollow", "kind", "lastmod", "host")


class LinkColumns(collections.abc.Sequence):
    """A page's out-links as columns: one list a field of :class:`Link`, in its field order.

    What the parse gives an HTML page (a dozen links on most pages; redirects, robots.txt,
    sitemaps and feeds keep a list). A page is pickled into content seen's batch files after
    its parse and read back, and a list of ``Link`` objects pickles as a row of values a
    link and is rebuilt one ``__init__`` call a link; seven lists pickle and load in C, and
    the stages that read links in bulk (the candidates and the linking domains through
    :func:`follow_rows`, the link-edge columns from the lists) take them column by column,
    no object made a link. Read as a sequence it is the ``Link`` objects, made when asked
    for: a page's ``links`` may be either, and compares equal to a list of the same links.

    ``lastmods`` is None when no link has a date (an HTML page's).

    Raises:
        ValueError: The columns are not all of one length.
    """

    __slots__ = ("urls", "fps", "anchors", "nofollow", "kinds", "lastmods", "hosts")

    def __init__(
        self,
        urls: list[str],
        fps: list[int],
        anchors: list[str],
        nofollow: list[bool],
        kinds: list[str],
        lastmods: list[float | None] | None = None,
        hosts: list[str] | None = None,
    ) -> None:
        n = len(urls)
        if hosts is None:
            hosts = [""] * n
        if not (len(fps) == len(anchors) == len(nofollow) == len(kinds) == len(hosts) == n) or (
            lastmods is not None and len(lastmods) != n
        ):
            raise ValueError("link columns of different lengths")
        self.urls = urls
        self.fps = fps
        self.anchors = anchors
        self.nofollow = nofollow
        self.kinds = kinds
        self.lastmods = lastmods
        self.hosts = hosts

    @classmethod
    def of(cls, links: Iterable[Link]) -> LinkColumns:
        """The columns of ``links`` (any iterable of :class:`Link`)."""
        links = list(links)
        lastmods = [link.lastmod for link in links]
        return cls(
            [link.url for link in links],
            [link.fp for link in links],
            [link.anchor for link in links],
            [link.nofollow for link in links],
            [link.kind for link in links],
            lastmods if any(v is not None for v in lastmods) else None,
            [link.host for link in links],
        )

    def __len__(self) -> int:
        return len(self.urls)

    def _link(self, i: int) -> Link:
        lastmod = self.lastmods[i] if self.lastmods is not None else None
        return Link(self.urls[i], self.fps[i], self.anchors[i], self.nofollow[i], self.kinds[i], lastmod, self.hosts[i])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            lastmods = self.lastmods[index] if self.lastmods is not None else None
            return LinkColumns(
                self.urls[index], self.fps[index], self.anchors[index], self.nofollow[index],
                self.kinds[index], lastmods, self.hosts[index],
            )  # fmt: skip
        i = operator.index(index)
        if not -len(self.urls) <= i < len(self.urls):
            raise IndexError("link index out of range")
        return self._link(i)

    def __iter__(self) -> Iterator[Link]:
        lastmods = self.lastmods if self.lastmods is not None else itertools.repeat(None)
        return itertools.starmap(
            Link, zip(self.urls, self.fps, self.anchors, self.nofollow, self.kinds, lastmods, self.hosts)
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LinkColumns):
            return self.columns() == other.columns()
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as the list it stands for

    def __repr__(self) -> str:
        return f"LinkColumns({list(self)!r})"

    def columns(self) -> tuple[list[Any], ...]:
        """The seven columns in :data:`LINK_FIELDS` order (``lastmods`` as Nones if absent)."""
        lastmods = self.lastmods if self.lastmods is not None else [None] * len(self.urls)
        return (self.urls, self.fps, self.anchors, self.nofollow, self.kinds, lastmods, self.hosts)

    def __reduce__(self) -> tuple[Any, ...]:
        return LinkColumns, (
            self.urls, self.fps, self.anchors, self.nofollow, self.kinds, self.lastmods, self.hosts,
        )  # fmt: skip


def follow_rows(links: Iterable[Link], meta_nofollow: bool) -> Iterator[tuple[str, int, str, str, float | None]]:
    """``(url, fp, kind, host, lastmod)`` of each link the crawler may follow: not nofollow,
    on a page that is not meta-nofollow (``links`` and ``meta_nofollow`` are a
    :class:`ParsedPage`'s). Read column by column from :class:`LinkColumns`, no ``Link``
    made."""
    if meta_nofollow:
        return iter(())
    if isinstance(links, LinkColumns):
        lastmods = links.lastmods if links.lastmods is not None else itertools.repeat(None)
        rows = zip(links.urls, links.fps, links.kinds, links.hosts, lastmods)
        if any(links.nofollow):
            return itertools.compress(rows, [not v for v in links.nofollow])
        return rows
    return ((link.url, link.fp, link.kind, link.host, link.lastmod) for link in links if not link.nofollow)


def first_url(links: Iterable[Link], kind: str) -> str | None:
    """The URL of the first link of ``kind`` (None: no such link), no ``Link`` made."""
    if isinstance(links, LinkColumns):
        try:
            return links.urls[links.kinds.index(kind)]
        except ValueError:
            return None
    return next((link.url for link in links if link.kind == kind), None)


@shuffled
@dataclass
class ParsedPage:
    """A fetch plus what parsing found in it."""

    fetch: FetchResult
    links: list[Link] | LinkColumns = field(default_factory=list)
    canonical: str | None = None
    meta_nofollow: bool = False
    meta_noindex: bool = False
    checksum: str | None = None  # 16 hex digits of the 64-bit mmh3 of the payload
    simhash: str | None = None
    title: str | None = None
    parse_error: str | None = None
    # The parse limit that cut an HTML document (core/content/htmlbounds.py: elements | depth |
    # attributes | tags): its links and text are those before the cut; the body is stored whole.
    # ``links`` when only the links were cut, at the most a page gives (--max-links-per-page).
    parse_truncated: str | None = None
    # Whether the page had more links than it may give (its links are the first of them),
    # whatever else cut it.
    links_capped: bool = False
    # What a 2xx body is, by label and first bytes (core/content/sniff.py): html | xhtml | xml | text
    # | binary:<kind>; None when parse did not look (not 2xx, robots.txt, a parse failure).
    body_kind: str | None = None
    # Content seen (transforms/content_seen.py): set when this page copies a page the crawl
    # already keeps, which is then the only one stored.
    duplicate_of: str | None = None  # URL of the original
    duplicate_kind: str | None = None  # "exact" (same payload) | "near" (simhash within 3 bits)
    duplicate_distance: int | None = None  # bits between the simhashes (0 for an exact copy)
    original_fetched_at: float | None = None  # epoch s of the original's fetch (WARC-Refers-To-Date)
    original_digest: str | None = None  # the original's WARC payload digest, "sha1:<base32>"
    # Freshness (transforms/freshness.py): the URL's revisit state after this fetch and the
    # decision it led to (core/freshness.Schedule as a dict: action, due, priority, observed).
    revisit: dict[str, Any] | None = None
    schedule: dict[str, Any] | None = None
    # ``revisit`` as its binary cell (schemas/cells.py ``encode_revisit``), encoded once where
    # it is set, for both rows that hold it: the URL's state and its next frontier row. None
    # when there is none or it does not fit the layout (each row then encodes it as JSON).
    revisit_cell: bytes | None = None


@shuffled
@dataclass(frozen=True)
class Probe:
    """What content seen's checksum check needs of one page (the page itself stays where
    it is); a bucket's probes cross its shuffle as a ``ProbeBlock`` (schemas/probe_block.py).

    Attributes:
        url: The fetched URL (the page's identity in this round).
        url_fp: Its 64-bit fingerprint (names its simhash cells).
        checksum: 64-bit mmh3 of the decoded payload.
        simhash: 64-bit simhash of the visible text; None for non-HTML or too little text.
        fetched_at: Epoch seconds of the fetch.
        digest: WARC payload digest of the body as transferred.
        batch: The batch the page waits in for content seen's decisions (its batch file's
            name), where the page's copy mark is sent; the batches, space-separated, when
            the round fetched the URL more than once. Empty: none (tests, tools).
    """

    url: str
    url_fp: int
    checksum: int
    simhash: int | None
    fetched_at: float
    digest: str
    batch: str = ""


class PageBatch(NamedTuple):
    """Pages that travel together after content seen: one element per batch file of content
    seen's staging (transforms/content_seen.py), its pages in the order they were written.

    The stages after "Mark copies" take a batch, not a page: one DoFn call per batch per
    stage, and a failing page is still one dead letter of its own."""

    pages: list[ParsedPage]


class Batched(Packed):
    """What a stage after content seen gives for one batch of pages, as one element: its
    page events, link-edge columns, URL candidates, store rows or staged lines.

    A :class:`Packed` list (one pickle), with a coder of its own (schemas/coders.py,
    :class:`~beamcrawl.schemas.coders.BatchCoder`) whose size estimate pickles a few of its
    items, not all: the runners estimate the size of the first elements of every PCollection,
    and a round's batches are few enough that each was encoded whole, all over again, in
    every step that passed it on."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return Batched, (Packed(self),)


@shuffled
@dataclass
class Candidate:
    """A URL offered to the URL-seen check (discovered link, redirect target or seed)."""

    fp: int
    url: str
    host: str
    depth: int
    priority: float
    source: str = "link"
    inlinks: int = 1
    # 32-bit hashes of the other hosts linking to the URL (its own host's links are no
    # vote), unioned when offers combine, at most MAX_INLINK_HOSTS: importance's in-links.
    inlink_hosts: tuple[int, ...] = ()
    kind: str = "page"  # page | sitemap | feed (what to fetch it as)
    hops: int = 0  # redirects followed to reach it
    lastmod: float | None = None  # a sitemap's or feed's claim
    robots_origin: str | None = None  # for a sitemap named by robots.txt
    # A redirect target's hold: the Retry-After its redirect was sent with, as the epoch
    # second before which the redirected request is not made (RFC 9110 §10.2.3). A URL
    # queued with one is due then, not at once. Candidates with one travel as objects (the
    # columns of schemas/candidate_block.py have no place for it): they are few.
    not_before: float | None = None

    def merge(self, other: "Candidate") -> "Candidate":
        """Combines two offers of one fingerprint (in-links add up, linking hosts unite,
        the best priority wins and brings its source and kind).

        The result does not depend on the order offers arrive in (bundles and workers
        differ between runs): a tie in priority goes to the greater source, then kind, and
        of two robots.txt origins the smaller is kept. Of two holds the later is kept: the
        URL is not asked for before any redirect that named it asked to wait."""
        best = max(self, other, key=_offer_rank)
        hosts = self.inlink_hosts
        if other.inlink_hosts and hosts != other.inlink_hosts:
            hosts = tuple(sorted(set(hosts) | set(other.inlink_hosts))[:MAX_INLINK_HOSTS])
        lastmods = [m for m in (self.lastmod, other.lastmod) if m is not None]
        origins = [o for o in (self.robots_origin, other.robots_origin) if o]
        return Candidate(
            fp=self.fp,
            url=self.url,
            host=self.host,
            depth=min(self.depth, other.depth),
            priority=best.priority,
            source=best.source,
            inlinks=self.inlinks + other.inlinks,
            inlink_hosts=hosts,
            kind=best.kind,
            hops=min(self.hops, other.hops),
            lastmod=max(lastmods) if lastmods else None,
            robots_origin=min(origins) if origins else None,
            not_before=later_hold(self.not_before, other.not_before),
        )


def later_hold(a: float | None, b: float | None) -> float | None:
    """The later of two holds (None: no hold)."""
    if a is None:
        return b
    return a if b is None else max(a, b)


def _offer_rank(c: Candidate) -> tuple[float, str, str]:
    return c.priority, c.source, c.kind
