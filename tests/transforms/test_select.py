"""Select (transforms/select.py) on a real embedded store and FnApiRunner: what is due, and the
host records and policies of the hosts with due work.

A frontier row due exactly now is due; one due a millisecond later is not. A row that does not
decode is counted and left where it is, and the others are still read. A policy set on a bare
host name covers its slots on other ports unless a slot has its own; a host with no stored
record gets a fresh one; a host whose stored record does not decode is set aside, and the
other hosts are still read.
"""

from __future__ import annotations

from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.schemas.records import FrontierEntry, HostPolicy, HostRecord, frontier_key, packed_by_host
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms.assign_slots import AssignSlots
from beamcrawl.transforms import select
from beamcrawl.transforms.select import ReadDueFrontier, ReadHostState
from beamcrawl.transforms.dead_letter import collected

NOW_MS = 1_000_000


def _counters(result: PipelineResult, namespace: str) -> dict[str, int]:
    query = result.metrics().query(MetricsFilter().with_namespace(namespace))
    return {c.key.metric.name: c.committed for c in query["counters"]}


def _entry(host: str, n: int, due_ms: int) -> FrontierEntry:
    return FrontierEntry(url=f"http://{host}/{n}", fp=n, host=host, due_ms=due_ms)


def test_every_row_due_by_now_is_read_grouped_by_host_and_a_bad_row_stays(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    due = [_entry("a.example", 1, 0), _entry("b.example", 2, NOW_MS - 5), _entry("a.example", 3, NOW_MS)]
    later = [_entry("a.example", 4, NOW_MS + 1), _entry("c.example", 5, NOW_MS * 2)]
    bad_key = frontier_key(NOW_MS - 1, 99)
    with open_store(uri) as store:
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in due + later])
        store.mutate("frontier", [Mutation.set(bad_key, {"r:json": b"{not json"})])

    p = TestPipeline(runner="FnApiRunner")
    out = p | ReadDueFrontier(uri, NOW_MS)
    assert_that(
        out | beam.FlatMap(lambda he: [(he[0], e.url) for e in he[1]]), equal_to([(e.host, e.url) for e in due])
    )
    # The bad row is one dead letter of its own, with its reason (and stays in the store).
    letters = collected(p) | beam.Map(lambda d: (d.stage, d.exception))
    assert_that(letters, equal_to([("select", "JSONDecodeError")]), label="One dead letter")
    result = p.run()
    result.wait_until_finish()

    counters = _counters(result, "select")
    assert counters["due_rows"] == len(due) and counters["bad_rows"] == 1
    with open_store(uri) as store:  # nothing is deleted by reading: the bad row waits for an operator
        keys = [k for k, _ in store.read_range("frontier", keys_only=True)]
    assert bad_key in keys and len(keys) == len(due) + len(later) + 1


def test_host_rows_and_policies_of_the_due_hosts(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    bare_policy = HostPolicy("a.example", min_delay_ms=5000)
    own_policy = HostPolicy("a.example:8443", blocked=True)
    with open_store(uri) as store:
        store.mutate(
            "hosts",
            [
                Mutation.set(b"a.example", HostRecord("a.example", delay=2.0, fetches=7).to_cells()),
                Mutation.set(b"broken.example", {"r:json": b"[1, 2"}),
            ],
        )
        store.mutate(
            "policies",
            [
                Mutation.set(b"a.example", bare_policy.to_cells()),
                Mutation.set(b"a.example:8443", own_policy.to_cells()),
            ],
        )
    hosts = ["a.example", "a.example:8080", "a.example:8443", "b.example", "broken.example"]
    due = list(packed_by_host(_entry(h, i, 0) for i, h in enumerate(hosts)))

    p = TestPipeline(runner="FnApiRunner")
    state = p | beam.Create(due) | ReadHostState(uri)
    assert_that(
        state.records | beam.Map(lambda hr: (hr[0], hr[1].delay, hr[1].fetches)),
        equal_to(
            [("a.example", 2.0, 7), ("a.example:8080", 0.0, 0), ("a.example:8443", 0.0, 0), ("b.example", 0.0, 0)]
        ),
        label="records",
    )
    assert_that(
        state.policies | beam.Map(lambda hp: (hp[0], hp[1].min_delay_ms, hp[1].blocked)),
        equal_to([("a.example", 5000, False), ("a.example:8080", 5000, False), ("a.example:8443", None, True)]),
        label="policies",
    )
    # The bad row is one dead letter of its own, with its reason (and stays in the store).
    letters = collected(p) | beam.Map(lambda d: (d.stage, d.exception))
    assert_that(letters, equal_to([("select", "JSONDecodeError")]), label="One dead letter")
    result = p.run()
    result.wait_until_finish()
    errors = _counters(result, "errors")
    assert sum(n for name, n in errors.items() if name.startswith("select/")) == 1


def test_a_row_whose_layout_holds_but_whose_values_do_not_decode_waits_at_slot_assignment(tmp_path: Path) -> None:
    """The select reads only a binary row's layout and host (cells.peek_frontier); the rest is
    decoded where slots are assigned. A row whose revisit state is not JSON is found there:
    one dead letter with its key, the host's other rows planned, nothing deleted."""
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    good = [_entry("a.example", n, 0) for n in range(1, 4)] + [_entry("b.example", 9, 0)]
    broken = FrontierEntry(url="http://a.example/r", fp=50, host="a.example", due_ms=0, revisit={"v": 1})
    raw = broken.to_cells()["r:json"].replace(b'{"v":1}', b'{"v":]}')
    with open_store(uri) as store:
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in good])
        store.mutate("frontier", [Mutation.set(broken.key, {"r:json": raw})])

    cfg = CrawlConfig(out=str(tmp_path / "out"), store=uri, min_delay=1.0, round_window=60.0)
    now = NOW_MS / 1000
    p = TestPipeline(runner="FnApiRunner")
    due = p | ReadDueFrontier(uri, NOW_MS)
    state = due | ReadHostState(uri)
    plans = {"due": due, "hosts": state.records, "policies": state.policies} | AssignSlots(cfg, now)
    assert_that(
        plans | beam.FlatMap(lambda plan: [(plan.host, e.url) for e in plan.entries]),
        equal_to([(e.host, e.url) for e in good]),
    )
    letters = collected(p) | beam.Map(lambda d: (d.stage, d.exception, d.key, d.host))
    assert_that(
        letters,
        equal_to([("assign_slots", "CellError", broken.key.hex(), "a.example")]),
        label="One dead letter",
    )
    result = p.run()
    result.wait_until_finish()
    assert _counters(result, "select")["due_rows"] == len(good) + 1
    assert _counters(result, "assign_slots")["bad_rows"] == 1
    with open_store(uri) as store:
        assert broken.key in {k for k, _ in store.read_range("frontier", keys_only=True)}


def test_a_deep_due_range_is_read_in_parts_every_row_once(both_stores: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The due range is cut into parts of about ``SCAN_CHUNK`` rows (here 40), each scanned on
    its own after a shuffle: every due row comes once, grouped by its host, none due later;
    the parts are counted (on the embedded store exactly the rows over 40; Bigtable cuts
    where its samples fall)."""
    monkeypatch.setattr(select, "SCAN_CHUNK", 40)
    hosts = [f"h{i}.example" for i in range(7)]
    # The Bigtable emulator samples a row key with a chance of 1 in 100 a row (and the last):
    # 399 rows had none inside the range about once in 50 runs, and made one part. 2,999 rows
    # leave that to a chance of about 1e-13.
    rows = 3000 if both_stores.startswith("bigtable") else 400
    due = [_entry(hosts[n % 7], n, n * (NOW_MS // rows)) for n in range(1, rows)]  # all before NOW_MS
    later = [_entry(hosts[n % 7], n, NOW_MS + n) for n in range(rows, rows + 60)]
    with open_store(both_stores) as store:
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in due + later])

    p = TestPipeline(runner="FnApiRunner")
    out = p | ReadDueFrontier(both_stores, NOW_MS)
    assert_that(
        out | beam.FlatMap(lambda he: [(he[0], e.url) for e in he[1]]), equal_to([(e.host, e.url) for e in due])
    )
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    query = result.metrics().query(MetricsFilter().with_name("due_range_parts"))
    (parts,) = [d.committed for d in query["distributions"]]
    assert _counters(result, "select")["due_rows"] == len(due)
    if both_stores.startswith("bigtable"):
        assert parts.sum >= 2
    else:
        assert parts.sum == 10  # 399 rows, 40 a part


def test_cut_range_keeps_the_bounds_and_every_split() -> None:
    assert select.cut_range(b"", b"z", []) == [(b"", b"z")]
    assert select.cut_range(b"a", b"", [b"c", b"k"]) == [(b"a", b"c"), (b"c", b"k"), (b"k", b"")]
