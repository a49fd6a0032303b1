"""Exporting the seen set and host records: streamed in chunks, typed like the other files."""

from __future__ import annotations

import datetime as dt
import json
import os

import duckdb
import pyarrow.parquet as pq
import pytest

from beamcrawl.state.parquet_export import export_table, host_row, scan_chunks, url_row
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.arrow import HOSTS_SCHEMA, URLS_SCHEMA, fp_hex
from beamcrawl.schemas.records import HostRecord, UrlState, fp_key
from beamcrawl.stores.base import Mutation, open_store

N_URLS = 250


class _CountingStore:
    """Delegates to a store and records every range scan's bounds and limit."""

    def __init__(self, store):
        self.store = store
        self.scans = []

    def read_range(self, table, start=None, end=None, *, keys_only=False, limit=None):
        self.scans.append((table, start, end, limit))
        return self.store.read_range(table, start, end, keys_only=keys_only, limit=limit)


@pytest.fixture
def store(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/store.sqlite") as s:
        urls = []
        for i in range(N_URLS):
            url = f"http://h{i % 7}.test/p{i}"
            state = UrlState(url=url, first_seen_ms=1_767_225_600_000 + i, source="link", depth=i % 3)
            if i % 2:
                state.state, state.status, state.fetched_at_ms, state.checksum = (
                    "fetched",
                    200,
                    1_767_225_700_000,
                    "ab" * 8,
                )
            urls.append(Mutation.set(fp_key(fingerprint(url)), state.to_cells()))
        urls.append(Mutation.set(fp_key(1), {"u:state": json.dumps("queued").encode()}))  # no url: skipped
        s.mutate("urls", urls)
        hosts = [
            Mutation.set(
                f"h{i}.test".encode(),
                HostRecord(
                    host=f"h{i}.test",
                    delay=1.5,
                    last_fetch_end=1_767_225_600.25 if i else 0.0,
                    fetches=i,
                    robots={"kind": "parsed", "token": "beamcrawl", "status": 200, "text": ""},
                    robots_status=200,
                    robots_fetched_at=1_767_225_000.0,
                    ip="127.0.0.1",
                ).to_cells(),
            )
            for i in range(7)
        ]
        s.mutate("hosts", hosts)
        yield s


def test_urls_stream_in_chunks_into_row_groups_and_files(store, tmp_path):
    counting = _CountingStore(store)
    result = export_table(counting, "urls", str(tmp_path / "x"), chunk_rows=40, file_rows=100)
    assert result.rows == N_URLS and result.skipped == 1
    assert [s[3] for s in counting.scans] == [40] * 7  # 251 rows: six full chunks and a short one
    assert counting.scans[0][1] is None and all(s[1] is not None for s in counting.scans[1:])
    assert len(result.files) == 3  # a new file after every 100 rows or more
    assert pq.ParquetFile(result.files[0]).metadata.num_row_groups >= 2
    table = pq.read_table(str(tmp_path / "x" / "urls"))
    assert table.num_rows == N_URLS
    assert table.schema.remove_metadata().equals(URLS_SCHEMA.remove_metadata())
    rows = table.to_pylist()
    fps = [int(fp_hex(r["url_fp"]), 16) for r in rows]
    assert fps == sorted(fps)  # key order: unsigned fingerprint order
    by_url = {r["url"]: r for r in rows}
    one = by_url["http://h1.test/p1"]
    assert one["state"] == "fetched" and one["status"] == 200 and one["host"] == "h1.test"
    assert one["fetched_at"] == dt.datetime(2026, 1, 1, 0, 1, 40, tzinfo=dt.timezone.utc)
    assert one["url_fp"] == rows[[r["url"] for r in rows].index("http://h1.test/p1")]["url_fp"]
    assert fp_hex(one["url_fp"]) == format(fingerprint("http://h1.test/p1"), "016x")
    assert by_url["http://h0.test/p0"]["fetched_at"] is None and by_url["http://h0.test/p0"]["state"] == "queued"


def test_hosts_export_and_duckdb_reads_it(store, tmp_path):
    result = export_table(store, "hosts", str(tmp_path / "x"))
    assert result.rows == 7
    con = duckdb.connect()
    rows = con.execute(
        f"select host, delay, robots_kind, fetches, last_fetch_end is null from '{tmp_path}/x/hosts/*.parquet' order by host"
    ).fetchall()
    assert rows[0] == ("h0.test", 1.5, "parsed", 0, True)
    assert rows[1][4] is False
    assert pq.read_schema(result.files[0]).remove_metadata().equals(HOSTS_SCHEMA.remove_metadata())


def test_a_new_export_replaces_the_old_and_an_empty_table_still_has_a_file(tmp_path):
    out = str(tmp_path / "x")
    with open_store(f"sqlite:///{tmp_path}/empty.sqlite") as empty:
        first = export_table(empty, "hosts", out)
        assert first.rows == 0 and len(first.files) == 1
        assert pq.read_table(first.files[0]).num_rows == 0
        again = export_table(empty, "hosts", out)
    assert sorted(os.listdir(out)) == ["hosts"] and again.files == first.files


def test_scan_chunks_resumes_after_the_last_key(store):
    keys = [k for chunk in scan_chunks(store, "urls", 17) for k, _ in chunk]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) == N_URLS + 1


def test_row_functions_tolerate_sparse_rows():
    assert url_row(fp_key(5), {}) is None
    assert host_row(b"x.test", {}) is None
    row = host_row(b"x.test", {"r:json": json.dumps({"host": "x.test", "added_later": 1}).encode()})
    assert row["host"] == "x.test" and row["robots_kind"] is None and row["last_fetch_end"] is None


def test_exports_from_bigtable_too(bigtable_uri, tmp_path):
    """The same chunked scans against the Bigtable emulator (skipped when there is none)."""
    with open_store(bigtable_uri) as bt:
        urls = [f"http://e.test/{i}" for i in range(30)]
        bt.mutate(
            "urls", [Mutation.set(fp_key(fingerprint(u)), UrlState(url=u, first_seen_ms=1).to_cells()) for u in urls]
        )
        result = export_table(bt, "urls", str(tmp_path / "bt"), chunk_rows=7)
    assert result.rows == 30
    assert sorted(pq.read_table(str(tmp_path / "bt" / "urls")).column("url").to_pylist()) == sorted(urls)
