"""The store's own ReadRows path (stores/bigtable_reads.py): the chunk protocol merged into
rows, requests narrowed for a resumed attempt, and reads resumed against the real emulator
with failures put in front of it.

The merge is checked on chunk streams generated from rows (cells split at any byte, names
repeated or left out where the protocol allows, rows reset half-sent, any grouping into
messages), so every way a server may frame the same rows gives the same rows back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.api_core import exceptions as api_exceptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.stores import bigtable, bigtable_reads
from beamcrawl.stores.base import Mutation, StoreError, open_store
from beamcrawl.stores.bigtable import BigtableStore
from beamcrawl.stores.bigtable_reads import (
    InvalidChunk,
    ReadRowsRequest,
    ReadRowsResponse,
    RowMerger,
    read_rows,
    revise_request,
)

pytestmark = pytest.mark.filterwarnings("ignore:Connecting to Bigtable emulator:RuntimeWarning")

Cell = tuple[str, bytes, int, bytes]  # family, qualifier, timestamp, value

_cells = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "u"]),
        st.binary(min_size=0, max_size=3),
        st.integers(min_value=0, max_value=5).map(lambda t: t * 1000),
        st.binary(max_size=12),
    ),
    min_size=1,
    max_size=6,
)
_rows = st.dictionaries(st.binary(min_size=1, max_size=5), _cells, max_size=6).map(
    lambda rows: [(k, sorted(v, key=lambda c: (c[0], c[1], -c[2]))) for k, v in sorted(rows.items())]
)


def _expected(cells: list[Cell]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for family, qualifier, _, value in cells:
        out.setdefault(f"{family}:{qualifier.decode('utf-8', 'surrogateescape')}", value)
    return out


def _row_chunks(draw: Any, key: bytes, cells: list[Cell]) -> list[dict[str, Any]]:
    """One row as chunk fields: names where they change (or, by chance, again), each value
    cut at generated points, the last chunk committing the row."""
    chunks: list[dict[str, Any]] = []
    last_family = last_qualifier = None
    for i, (family, qualifier, ts, value) in enumerate(cells):
        first: dict[str, Any] = {"timestamp_micros": ts}
        if i == 0 or draw(st.booleans()):
            first["row_key"] = key
        if i == 0 or family != last_family or draw(st.booleans()):
            first["family_name"] = family
            first["qualifier"] = qualifier
        elif qualifier != last_qualifier or draw(st.booleans()):
            first["qualifier"] = qualifier
        last_family, last_qualifier = family, qualifier
        cuts = sorted(draw(st.sets(st.integers(min_value=1, max_value=max(1, len(value) - 1)), max_size=3)))
        cuts = [c for c in cuts if c < len(value)]
        pieces = [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)])] or [b""]
        for j, piece in enumerate(pieces):
            chunk = dict(first) if j == 0 else {}
            if j and draw(st.booleans()):
                chunk["timestamp_micros"] = ts  # the same again is allowed
            chunk["value"] = piece
            chunk["value_size"] = len(value) if j < len(pieces) - 1 else 0
            chunks.append(chunk)
    chunks[-1]["commit_row"] = True
    return chunks


def _message(chunks: list[dict[str, Any]], scanned: bytes = b"") -> Any:
    response = ReadRowsResponse(last_scanned_row_key=scanned)
    for fields in chunks:
        c = response.chunks.add()
        for name, value in fields.items():
            if name in ("family_name", "qualifier"):
                getattr(c, name).value = value
            else:
                setattr(c, name, value)
    return response


@st.composite
def _framed(draw: Any) -> tuple[list[tuple[bytes, list[Cell]]], list[Any]]:
    rows = draw(_rows)
    chunks: list[dict[str, Any]] = []
    for key, cells in rows:
        whole = _row_chunks(draw, key, cells)
        if draw(st.booleans()):  # part of the row sent, then taken back
            sent = draw(st.integers(min_value=1, max_value=len(whole)))
            part = [dict(c) for c in whole[:sent]]
            part[-1].pop("commit_row", None)
            part[-1]["value_size"] = part[-1].get("value_size", 0)
            chunks += part
            chunks.append({"reset_row": True})
        chunks += whole
    cuts = sorted(draw(st.sets(st.integers(min_value=0, max_value=len(chunks)), max_size=5)))
    bounds = [0, *cuts, len(chunks)]
    messages = [_message(chunks[a:b]) for a, b in zip(bounds, bounds[1:])]
    return rows, messages


@given(_framed())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_framing_of_rows_merges_back_into_them(framed: tuple[list[tuple[bytes, list[Cell]]], list[Any]]) -> None:
    rows, messages = framed
    merger = RowMerger(keys_only=False)
    assert list(merger.merge(messages)) == [(k, _expected(cells)) for k, cells in rows]
    assert merger.rows == len(rows) and merger.progress == (rows[-1][0] if rows else None)
    keys = RowMerger(keys_only=True)
    assert list(keys.merge(messages)) == [(k, {}) for k, _ in rows]


def test_last_scanned_key_moves_the_progress_on() -> None:
    merger = RowMerger(keys_only=True)
    row = _message([{"row_key": b"b", "family_name": "u", "qualifier": b"x", "commit_row": True}], scanned=b"c")
    assert list(merger.merge([row, _message([], scanned=b"k")])) == [(b"b", {})]
    assert merger.progress == b"k"
    with pytest.raises(InvalidChunk, match="out of order"):
        list(merger.merge([_message([{"row_key": b"j", "family_name": "u", "qualifier": b"", "commit_row": True}])]))


_FIRST = {"row_key": b"k", "family_name": "f", "qualifier": b"q"}


@pytest.mark.parametrize(
    ("chunks", "reason"),
    [
        ([{"reset_row": True}], "reset_row outside a row"),
        ([_FIRST, {"reset_row": True, "value": b"x"}], "reset_row with data"),
        ([{"family_name": "f", "qualifier": b"q", "commit_row": True}], "first chunk has no key"),
        ([{"row_key": b"k", "qualifier": b"q", "commit_row": True}], "a qualifier without a family"),
        ([{"row_key": b"k", "commit_row": True}], "without a family or qualifier"),
        ([_FIRST, {"family_name": "g", "commit_row": True}], "a new family without a qualifier"),
        ([_FIRST, {"row_key": b"other", "commit_row": True}], "row key changed within a row"),
        ([{**_FIRST, "value": b"a", "value_size": 2, "commit_row": True}], "commit_row within a split cell"),
        ([{**_FIRST, "value": b"a", "value_size": 2}, {"qualifier": b"r", "value": b"b"}], "qualifier changed"),
        ([{**_FIRST, "value": b"a", "value_size": 2}, {"family_name": "g", "value": b"b"}], "family changed"),
        ([{**_FIRST, "timestamp_micros": 5, "value_size": 2}, {"timestamp_micros": 6}], "timestamp changed"),
        (
            [{**_FIRST, "value": b"a", "value_size": 2}, {"row_key": b"j", "value": b"b"}],
            "row key changed within a cell",
        ),
        ([_FIRST], "ended within a row"),
        ([{**_FIRST, "value_size": 3}], "ended within a row"),
        ([{**_FIRST, "commit_row": True}, {**_FIRST, "commit_row": True}], "out of order"),
    ],
)
def test_chunks_that_break_the_protocol_are_refused(chunks: list[dict[str, Any]], reason: str) -> None:
    with pytest.raises(InvalidChunk, match=reason):
        list(RowMerger(keys_only=False).merge([_message(chunks)]))


# --- a resumed attempt's request ----------------------------------------------------------------

_key = st.binary(max_size=3)


@st.composite
def _requests(draw: Any) -> Any:
    request = ReadRowsRequest(table_name="t", rows_limit=draw(st.integers(min_value=0, max_value=5)))
    request.rows.row_keys.extend(sorted(draw(st.sets(st.binary(min_size=1, max_size=3), max_size=5))))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        r = request.rows.row_ranges.add()
        start, end = draw(st.sampled_from(["closed", "open", None])), draw(st.sampled_from(["closed", "open", None]))
        if start:
            setattr(r, f"start_key_{start}", draw(_key))
        if end:
            setattr(r, f"end_key_{end}", draw(_key))
    return request


def _matches(request: Any, key: bytes) -> bool:
    rows = request.rows
    if not rows.row_keys and not rows.row_ranges:
        return True
    if key in rows.row_keys:
        return True
    for r in rows.row_ranges:
        lo_ok = (
            (not r.start_key_closed or key >= r.start_key_closed)
            if r.WhichOneof("start_key") != "start_key_open"
            else (not r.start_key_open or key > r.start_key_open)
        )
        hi_ok = (
            (not r.end_key_open or key < r.end_key_open)
            if r.WhichOneof("end_key") != "end_key_closed"
            else (not r.end_key_closed or key <= r.end_key_closed)
        )
        if lo_ok and hi_ok:
            return True
    return False


@given(_requests(), st.binary(min_size=1, max_size=3), st.lists(st.binary(max_size=4), max_size=40))
def test_a_revised_request_asks_for_exactly_what_comes_after_the_progress(
    request: Any, after: bytes, probes: list[bytes]
) -> None:
    revised = revise_request(request, after)
    keys = set(probes) | set(request.rows.row_keys) | {after, after + b"\x00"}
    wanted = {k for k in keys if k > after and _matches(request, k)}
    if revised is None:
        assert not wanted
        return
    assert {k for k in keys if _matches(revised, k)} == wanted
    assert revised.table_name == request.table_name and revised.rows_limit == request.rows_limit
    assert revised is not request


# --- reads resumed, against the emulator ----------------------------------------------------------


class _Broken(grpc.RpcError, grpc.Call):
    """A failed call as grpc raises it (an RpcError that is also the Call)."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return f"injected {self._code.name}"

    def initial_metadata(self) -> Any:
        return ()

    def trailing_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


class _Stream:
    """The real stream's messages, cut after ``after`` of them by ``fault`` (if any)."""

    def __init__(self, real: Any, after: int | None, fault: grpc.StatusCode, log: list[str]) -> None:
        self.real, self.after, self.fault, self.log = real, after, fault, log

    def __iter__(self) -> Iterator[Any]:
        for n, message in enumerate(self.real):
            if n == self.after:
                raise _Broken(self.fault)
            yield message
        if self.after is not None and self.after >= 0:
            raise _Broken(self.fault)  # broken at the very end: the server never said it was done

    def cancel(self) -> None:
        self.log.append("cancel")
        if hasattr(self.real, "cancel"):
            self.real.cancel()


class _FlakyReads:
    """The store's real ReadRows callable, each attempt cut after a planned number of
    messages (None: whole). Only the failures are made up; the rows come from the emulator."""

    def __init__(self, real: Any, plan: list[int | None], fault: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        self.real, self.plan, self.fault = real, plan, fault
        self.requests: list[Any] = []
        self.log: list[str] = []

    def __call__(self, request: Any, **kw: Any) -> _Stream:
        copy = ReadRowsRequest()
        copy.CopyFrom(request)
        self.requests.append(copy)
        after = self.plan.pop(0) if self.plan else None
        return _Stream(self.real(request, **kw), after, self.fault, self.log)


def _flaky(
    store: BigtableStore, plan: list[int | None], fault: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
) -> _FlakyReads:
    with store._lock:
        clients = store._connected()
    flaky = _FlakyReads(clients.read_rows, plan, fault)
    clients.read_rows = flaky
    return flaky


@pytest.fixture
def filled(bigtable_uri: str) -> Iterator[tuple[BigtableStore, dict[bytes, dict[str, bytes]]]]:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        rows = {b"%03d" % i: {"u:a": b"%d" % i, "u:b": b"x" * (i % 7 + 1)} for i in range(60)}
        store.mutate("urls", [Mutation.set(k, c) for k, c in rows.items()])
        store.mutate("urls", [Mutation.set(b"%03d" % i, {"u:a": b"new%d" % i}) for i in range(0, 60, 5)])
        for i in range(0, 60, 5):
            rows[b"%03d" % i]["u:a"] = b"new%d" % i
        with store._lock:
            clients = store._connected()
        real = clients.read_rows
        try:
            yield store, rows
        finally:
            # The clients are shared by every store of the process that is open at the time:
            # a test's injected failures must not outlive it (they once cost the next test
            # 97 failed attempts when another store kept the clients alive).
            clients.read_rows = real


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=70)), max_size=4),
    limit=st.sampled_from([None, 7, 60]),
)
def test_a_broken_read_resumes_after_its_last_row(
    filled: tuple[BigtableStore, dict[bytes, dict[str, bytes]]], plan: list[int | None], limit: int | None
) -> None:
    store, rows = filled
    with store._lock:
        real = store._connected().read_rows
    try:
        flaky = _flaky(store, list(plan))
        got = list(store.read_range("urls", limit=limit))
        want = sorted(rows.items())[:limit] if limit else sorted(rows.items())
        assert got == want
        keys = store.read_keys("urls", [*rows, b"absent", b"zzz"], keys_only=True)
        assert keys == {k: {} for k in rows}
        assert len(flaky.requests) >= 2 if plan else len(flaky.requests) == 2  # a scan and a key set
    finally:
        with store._lock:
            store._connected().read_rows = real


def test_a_resumed_attempt_asks_only_for_what_is_left(
    filled: tuple[BigtableStore, dict[bytes, dict[str, bytes]]],
) -> None:
    store, rows = filled
    flaky = _flaky(store, [10, 5])
    assert dict(store.read_range("urls", b"005", b"050", limit=30)) == dict(sorted(rows.items())[5:35])
    first, second, third = flaky.requests
    assert first.rows.row_ranges[0].start_key_closed == b"005" and first.rows_limit == 30
    assert second.rows.row_ranges[0].start_key_open == b"014" and second.rows_limit == 20
    assert third.rows.row_ranges[0].start_key_open == b"019" and third.rows_limit == 15
    assert all(r.rows.row_ranges[0].end_key_open == b"050" for r in flaky.requests)
    assert flaky.log == ["cancel"] * 3  # every stream is let go of, broken or not
    flaky = _flaky(store, [3])
    wanted = [b"001", b"010", b"020", b"030", b"nope"]
    assert set(store.read_keys("urls", wanted)) == set(wanted[:4])
    assert list(flaky.requests[1].rows.row_keys) == [b"030", b"nope"]  # 001, 010 and 020 came


def test_a_read_that_cannot_go_on_fails_with_one_line(
    filled: tuple[BigtableStore, dict[bytes, dict[str, bytes]]],
) -> None:
    store, _ = filled
    flaky = _flaky(store, [2], grpc.StatusCode.PERMISSION_DENIED)
    with pytest.raises(StoreError, match=r"_urls: injected PERMISSION_DENIED$") as info:
        list(store.read_range("urls"))
    assert isinstance(info.value.__cause__, api_exceptions.PermissionDenied)
    assert "\n" not in str(info.value) and len(flaky.requests) == 1  # not worth another attempt
    store.read_timeout = 0.3
    _flaky(store, [0] * 100)
    with pytest.raises(StoreError, match="_urls: injected UNAVAILABLE$"):
        store.read_keys("urls", [b"001"])


def test_a_reader_that_stops_early_cancels_the_stream(
    filled: tuple[BigtableStore, dict[bytes, dict[str, bytes]]],
) -> None:
    store, rows = filled
    flaky = _flaky(store, [None])
    scan: Any = store.read_range("urls")  # a generator, closed below as a reader that stops
    assert next(scan)[0] == b"000"
    scan.close()
    assert flaky.log == ["cancel"]


def test_a_broken_response_is_a_store_error(filled: tuple[BigtableStore, dict[bytes, dict[str, bytes]]]) -> None:
    store, _ = filled

    def unordered(request: Any, **kw: Any) -> Any:
        class Stream:
            def __iter__(self) -> Iterator[Any]:
                yield _message([{"row_key": b"b", "family_name": "u", "qualifier": b"a", "commit_row": True}])
                yield _message([{"row_key": b"a", "family_name": "u", "qualifier": b"a", "commit_row": True}])

            def cancel(self) -> None:
                pass

        return Stream()

    with store._lock:
        store._connected().read_rows = unordered
    with pytest.raises(StoreError, match="a broken ReadRows response: row keys out of order"):
        list(store.read_range("urls"))


def test_the_production_channel_reads_streams_on_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cloud Bigtable's channel is the generated transport's own (credentials and options),
    plus the one option; it cannot be opened here, so its factory's arguments are checked."""
    from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport

    seen: dict[str, Any] = {}
    monkeypatch.setattr(
        BigtableGrpcTransport,
        "create_channel",
        classmethod(lambda cls, host, **kw: seen.update(host=host, **kw) or "channel"),
    )
    assert (
        bigtable._channel_streaming_on_caller("bigtable.googleapis.com", options=[("grpc.x", 1)], scopes=None)
        == "channel"
    )
    assert (
        seen["options"] == [("grpc.x", 1), bigtable_reads.STREAM_ON_CALLER]
        and seen["host"] == "bigtable.googleapis.com"
    )


def test_read_rows_gives_up_when_its_time_is_spent() -> None:
    """The back-off never sleeps past the read's deadline: the last failure is raised."""
    now = [0.0]
    calls = []

    def call(request: Any, **kw: Any) -> Any:
        calls.append(kw["timeout"])
        return _Stream(iter(()), 0, grpc.StatusCode.UNAVAILABLE, [])

    def sleep(s: float) -> None:
        now[0] += s

    with pytest.raises(api_exceptions.ServiceUnavailable):
        list(
            read_rows(
                call,
                ReadRowsRequest(table_name="t"),
                keys_only=True,
                metadata=[],
                attempt_timeout=20,
                timeout=1.0,
                backoff=(0.1, 0.4),
                clock=lambda: now[0],
                sleep=sleep,
            )
        )
    assert now[0] < 1.0 and len(calls) >= 3 and all(t <= 1.0 for t in calls)
