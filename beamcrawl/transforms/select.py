"""Select: the URLs that are due, and the host records and policies of their hosts.

The frontier is keyed by due time then fingerprint, so "everything due by now" is one key
range from the start of the table, cut into parts of about ``SCAN_CHUNK`` rows where the
store finds them cheaply and scanned part by part on every worker. Host records and
operator policies are then read for the distinct hosts with due work, in batched key-set
reads (never one read per host). A due row is read only as far as its host
(``cells.peek_frontier``; a row in the older JSON format whole): the rows wait for slot
assignment as the cells the store holds, compressed per host (``schemas/due_rows.py``), and
are decoded there, once. A policy set for a bare host name
(``example.com``) also applies to its slots on other ports (``example.com:8080``) unless
that slot has a policy of its own.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamcrawl.core.net.resolver import hostname_of
from beamcrawl.core.urls.hostkeys import host_key
from beamcrawl.schemas import cells as binary
from beamcrawl.schemas.due_rows import DueRows, due_rows_by_host
from beamcrawl.schemas.records import JSON_CELL, FrontierEntry, HostPolicy, frontier_key, key_fp
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.state.host_clock import read_host
from beamcrawl.state.quarantine import (
    quarantine_policy,
    quarantined_hosts,
    quarantined_urls,
)
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = ["ReadDueFrontier", "ReadHostState"]

# Due rows read before they are passed on, a DueRows per host; also the rows of each part
# the due range is cut into, so the parts' scans give as many DueRows as one scan did.
SCAN_CHUNK = 100_000


def row_host(cell: bytes) -> str:
    """The host of a frontier row's cell: read from a binary cell's layout alone
    (``cells.peek_frontier``), from the whole row for one in the older JSON format.

    Raises:
        ValueError: The cell does not decode (the row is set aside).
    """
    if binary.is_binary(cell):
        return binary.peek_frontier(cell)[0]
    return FrontierEntry.from_cells({JSON_CELL: cell}).host


def cut_range(start: bytes, end: bytes, splits: list[bytes]) -> list[tuple[bytes, bytes]]:
    """``[start, end)`` as the ranges between its split keys (sorted, strictly inside it),
    in order: together they hold every key of the range once."""
    bounds = [start, *splits, end]
    return list(zip(bounds, bounds[1:]))


class _SplitDueRangeFn(beam.DoFn):
    """Cuts the due key range into parts of about :data:`SCAN_CHUNK` rows, where the store
    finds them cheaply (``Store.split_keys``: SQLite walks its key index, Bigtable gives its
    samples), so the scans that read them run on as many workers as there are parts."""

    def __init__(self, store_uri: str) -> None:
        self.store_uri = store_uri
        self.parts = Metrics.distribution("select", "due_range_parts")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def process(self, key_range: tuple[bytes, bytes]) -> Iterator[tuple[bytes, bytes]]:
        start, end = key_range
        parts = cut_range(start, end, self.store.split_keys("frontier", start, end, SCAN_CHUNK))
        self.parts.update(len(parts))
        return iter(parts)

    def teardown(self) -> None:
        self.store.close()


class _ScanDueFn(beam.DoFn):
    """Scans the frontier's key range [start, end) and yields its rows as stored cells, a
    :class:`DueRows` per host (per chunk of the scan: memory stays bounded however much is
    due). Only a row's host is read here; slot assignment decodes the rest."""

    def __init__(self, store_uri: str) -> None:
        self.store_uri = store_uri
        self.received = Metrics.counter("select", "due_rows")
        self.bad = Metrics.counter("select", "bad_rows")
        self.dead = Outlet("select")
        self.held = Metrics.counter("select", "quarantined_rows")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def process(self, key_range: tuple[bytes, bytes]) -> Iterator[tuple[str, DueRows]]:
        start, end = key_range
        chunk: list[tuple[str, bytes]] = []
        quarantined = quarantined_urls(self.store)  # few: held rows stay where they are
        for key, cells in self.store.read_range("frontier", start, end):
            if quarantined and key_fp(key[8:]) in quarantined:
                self.held.inc()
                continue
            try:
                self.dead.check(key.hex())
                cell = cells.get(JSON_CELL)
                if cell is None:
                    raise ValueError("row has no r:json cell")
                chunk.append((row_host(cell), cell))
            except Exception as exc:  # a row that does not decode stays where it is
                self.bad.inc()
                yield self.dead.tagged(exc, key)
                continue
            if len(chunk) >= SCAN_CHUNK:
                yield from self._emit(chunk)
                chunk = []
        yield from self._emit(chunk)

    def _emit(self, chunk: list[tuple[str, bytes]]) -> Iterator[tuple[str, DueRows]]:
        self.received.inc(len(chunk))
        return due_rows_by_host(chunk)

    def teardown(self) -> None:
        self.store.close()


class ReadDueFrontier(beam.PTransform):
    """Reads every frontier row due at ``now_ms`` or earlier, as ``(host, DueRows)`` (a host
    may come in more than one; iterating one gives its ``FrontierEntry`` rows). The due key
    range is cut into parts first, each scanned on its own, so a deep frontier is read by
    every worker at once, not by one."""

    def __init__(self, store_uri: str, now_ms: int) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.now_ms = now_ms

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        due_range = (b"", frontier_key(self.now_ms + 1, 0))
        due = (
            pbegin
            | "Due key range" >> beam.Create([due_range])
            | "Cut it in parts" >> beam.ParDo(_SplitDueRangeFn(self.store_uri))
            | "Parts to workers" >> beam.Reshuffle()
            | "Scan due frontier rows"
            >> beam.ParDo(_ScanDueFn(self.store_uri))
            .with_output_types(tuple[str, DueRows])
            .with_outputs(ERRORS, main="due")
        )
        collect(due[ERRORS])
        return due.due


class _ReadHostRowsFn(beam.DoFn):
    """Reads host records and policies for a batch of host names in two key-set reads."""

    def __init__(self, store_uri: str) -> None:
        self.store_uri = store_uri
        self.dead = Outlet("select")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def process(self, hosts: list[str]) -> Iterable:
        good: list[str] = []
        for host in hosts:  # a host no key can be made of is set aside; its URLs stay queued
            try:
                self.dead.check(host)
                if not host or not hostname_of(host):
                    raise ValueError(f"no host row key for {host!r}")
                good.append(host)
            except Exception as exc:
                yield self.dead.tagged(exc, host, host=host)
        hosts = good
        keys = [h.encode() for h in hosts]
        # A policy set on a bare name (policy_key("[::1]") == "[::1]") covers its ports' slots.
        bare = {h: host_key(h) for h in hosts}
        records = self.store.read_keys("hosts", keys)
        policy_keys = set(keys) | {b.encode() for h, b in bare.items() if b != h}
        policies = self.store.read_keys("policies", sorted(policy_keys))
        held = quarantined_hosts(self.store, hosts)
        for host, key in zip(hosts, keys):
            try:
                # A request sent after the record was written counts too (state/host_clock.py).
                record = read_host(host, records.get(key))
                cells = policies.get(key) or policies.get(bare[host].encode())
                policy = HostPolicy.from_cells(host, cells)
            except Exception as exc:  # a stored row that does not decode: the host waits
                yield self.dead.tagged(exc, host, host=host)
                continue
            yield host, record
            if host in held:  # quarantined until an operator releases it: held like a pause
                policy = quarantine_policy(host, policy)
            if policy is not None:
                yield beam.pvalue.TaggedOutput("policies", (host, policy))

    def teardown(self) -> None:
        self.store.close()


class ReadHostState(beam.PTransform):
    """For each distinct host with due work: ``(host, HostRecord)`` and, tagged
    ``policies``, ``(host, HostPolicy)`` where an operator set one."""

    def __init__(self, store_uri: str) -> None:
        super().__init__()
        self.store_uri = store_uri

    def expand(self, due: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        state = (
            due
            | "Host names" >> beam.Keys()
            | "Distinct hosts" >> beam.Distinct()
            | "Batch host names" >> beam.BatchElements(min_batch_size=64, max_batch_size=2048)
            | "Read host rows"
            >> beam.ParDo(_ReadHostRowsFn(self.store_uri)).with_outputs("policies", ERRORS, main="records")
        )
        collect(state[ERRORS])
        return state
