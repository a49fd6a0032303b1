"""Records that cross shuffles pickle as ``(class, field values)`` and come back equal."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass

import pytest

from beamcrawl.schemas.records import (
    Candidate,
    FetchResult,
    FrontierEntry,
    HostPlan,
    HostPolicy,
    HostRecord,
    Link,
    Packed,
    ParsedPage,
    UrlState,
    shuffled,
)
from beamcrawl.transforms.content_seen import Copy, NewContent, Probe
from beamcrawl.transforms.near_copies import Evidence
from beamcrawl.state.content_rows import ContentRecord


def _page() -> ParsedPage:
    entry = FrontierEntry(
        url="http://a.example/x?q=1", fp=-42, host="a.example", due_ms=1, also_keys=["k"], revisit={"n": 2}
    )
    fetch = FetchResult(
        entry=entry,
        outcome="fetched",
        url=entry.url,
        status=200,
        response_headers=[("Content-Type", "text/html")],
        raw_body=b"\x1f\x8b...",
        body=b"<html>\xff</html>",
        truncated="length",
    )
    links = [Link(url="http://b.example/", fp=7, anchor="b", nofollow=True, kind="a"), Link(url="u", fp=1, lastmod=3.5)]
    return ParsedPage(fetch=fetch, links=links, checksum="00ff", simhash="ab", duplicate_of="u", schedule={"k": [1]})


RECORDS = [
    _page(),
    _page().fetch,
    _page().fetch.entry,
    _page().links[0],
    UrlState(url="u", first_seen_ms=3, state="fetched", revisit={"a": 1}),
    HostRecord(host="h", delay=1.5, robots={"rules": []}, ip="127.0.0.1"),
    HostPolicy(host="h", min_delay_ms=100, blocked=True),
    HostPlan(
        host="h", shard=3, record=HostRecord(host="h"), delay=0.5, fetch_robots=False, entries=[_page().fetch.entry]
    ),
    Candidate(fp=1, url="u", host="h", depth=2, priority=0.5, inlink_hosts=(3, 4), lastmod=2.0),
    Probe(url="u", url_fp=1, checksum=2, simhash=3, fetched_at=1.0, digest="sha1:X"),
    ContentRecord(url="u", kind="near", fetched_at=1.0, digest="d", distance=2, round=2),
    Copy(url="v", original="u", kind="near", distance=2),
    NewContent(checksum=2, first=Probe(url="u", url_fp=1, checksum=2, simhash=None, fetched_at=1.0, digest="d")),
    Evidence(stored=(1, "w"), neighbours=frozenset({(7, 2)}), crowded=True),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trips_equal_as_class_and_values(record: object) -> None:
    data = pickle.dumps(record, pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(data)
    assert back == record and type(back) is type(record)
    # Written as the class and its field values, not a dict of field names.
    reduced = record.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    assert reduced[0] is type(record)
    assert reduced[1] == tuple(getattr(record, f.name) for f in dataclasses.fields(record))  # type: ignore[arg-type]


def test_a_packed_list_of_pages_is_smaller_than_dicts_would_be() -> None:
    pages = Packed(_page() for _ in range(50))
    compact = pickle.dumps(pages, pickle.HIGHEST_PROTOCOL)
    assert pickle.loads(compact) == pages
    as_dicts = pickle.dumps([dataclasses.asdict(p) for p in pages], pickle.HIGHEST_PROTOCOL)
    assert len(compact) < len(as_dicts)


@dataclass
class Tagged(Link):
    tag: str = ""


def test_a_subclass_keeps_its_own_fields() -> None:
    back = pickle.loads(pickle.dumps(Tagged(url="u", fp=1, tag="t")))
    assert back == Tagged(url="u", fp=1, tag="t")


def test_refuses_records_whose_init_does_not_take_every_field() -> None:
    @dataclass
    class Derived:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    @dataclass
    class Normalised:
        a: int
        b: int

        def __post_init__(self) -> None:
            self.b = abs(self.b)

    for cls in (Derived, Normalised):
        with pytest.raises(TypeError, match="shuffled records"):
            shuffled(cls)


def test_a_packed_list_of_one_record_class_pickles_as_rows() -> None:
    entries = Packed(_page().fetch.entry for _ in range(3))
    fn, (cls, rows) = entries.__reduce__()
    assert cls is FrontierEntry and rows == [tuple(getattr(e, f.name) for f in dataclasses.fields(e)) for e in entries]
    back = pickle.loads(pickle.dumps(entries, pickle.HIGHEST_PROTOCOL))
    assert type(back) is Packed and back == entries


@pytest.mark.parametrize(
    "values",
    [[], [1, "a", (2, 3)], [_page().links[0], _page().fetch.entry], [Tagged(url="u", fp=1), Link(url="v", fp=2)]],
    ids=["empty", "plain", "two classes", "subclass"],
)
def test_any_other_packed_list_round_trips(values: list) -> None:
    back = pickle.loads(pickle.dumps(Packed(values), pickle.HIGHEST_PROTOCOL))
    assert type(back) is Packed and back == values and [type(v) for v in back] == [type(v) for v in values]


# --- evolve: dataclasses.replace for @shuffled records, without its cost ------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from beamcrawl.schemas.records import evolve, shuffled_classes  # noqa: E402

_values = st.none() | st.integers() | st.text(max_size=5) | st.binary(max_size=5) | st.lists(st.integers(), max_size=2)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_evolve_makes_what_replace_makes_and_leaves_the_record_as_it_was(data: st.DataObject) -> None:
    page = _page()
    record = data.draw(st.sampled_from([page, page.fetch, page.fetch.entry]))
    names = [f.name for f in dataclasses.fields(record)]
    changes = data.draw(st.dictionaries(st.sampled_from(names), _values, max_size=4))
    before = dataclasses.replace(record)
    evolved = evolve(record, **changes)
    replaced = dataclasses.replace(record, **changes)
    assert type(evolved) is type(replaced) and evolved == replaced and evolved is not record
    assert vars(evolved) == vars(replaced) if hasattr(replaced, "__dict__") else True
    assert record == before  # the input is not changed
    assert pickle.loads(pickle.dumps(evolved)) == replaced


def test_evolve_refuses_what_replace_refuses_and_drops_what_replace_drops() -> None:
    page = _page()
    with pytest.raises(TypeError):
        evolve(page, not_a_field=1)
    page.scratch = "set on the instance, not a field"  # type: ignore[attr-defined]
    evolved = evolve(page, duplicate_of="x")
    assert not hasattr(evolved, "scratch") and evolved.duplicate_of == "x"
    # Every class evolve serves was checked by @shuffled: init fields only, no __post_init__.
    for cls in shuffled_classes():
        assert all(f.init for f in dataclasses.fields(cls)) and not hasattr(cls, "__post_init__")
