"""pages/ and links/ Parquet: the rows, the files, and what DuckDB and pyarrow make of them."""

from __future__ import annotations

import datetime as dt
import glob
import os
import pathlib

import apache_beam as beam
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from beamcrawl.core.outputs import RoundOutputs
from beamcrawl.core.urlnorm import fingerprint, host_of
from beamcrawl.schemas import arrow
from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA, SCHEMAS, describe, fp_hex, signed64
from beamcrawl.schemas.records import FetchResult, FrontierEntry, Link, ParsedPage
from beamcrawl.transforms.parquet_io import WriteLinkEdges, WritePageEvents, link_edges, write_part
from beamcrawl.transforms.warc_io import page_event

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIG_FP = 0xF000_0000_0000_0001  # above 2**63: stored negative


def _page(url: str = "http://news.example.co.uk:8080/a", fp: int | None = None) -> ParsedPage:
    entry = FrontierEntry(url=url, fp=fp if fp is not None else fingerprint(url), host=host_of(url), due_ms=0, depth=2)
    result = FetchResult(
        entry=entry, outcome="fetched", url=url, final_url=url, status=200, fetched_at=1_767_225_600.5,
        elapsed=0.1, ip="127.0.0.1", response_headers=[("Content-Type", "text/html"), ("ETag", "e1")],
        raw_body=b"<html></html>", body=b"<html></html>",
    )
    links = [
        Link(url="http://b.example.org/z", fp=BIG_FP, anchor="Zed", nofollow=False),
        Link(url="http://b.example.org/a", fp=fingerprint("http://b.example.org/a"), anchor="", nofollow=True),
        Link(url="http://news.example.co.uk:8080/c", fp=fingerprint("http://news.example.co.uk:8080/c"), kind="canonical"),
    ]
    return ParsedPage(fetch=result, links=links, checksum="0" * 16, title="A")


def test_link_edges_carry_both_ends():
    rows = link_edges(_page())
    assert len(rows) == 3
    first = rows[0]
    assert first["src"] == "http://news.example.co.uk:8080/a" and first["dst"] == "http://b.example.org/z"
    assert first["src_host"] == "news.example.co.uk:8080" and first["dst_host"] == "b.example.org"
    assert first["src_domain"] == "example.co.uk" and first["dst_domain"] == "example.org"
    assert first["dst_fp"] == BIG_FP - (1 << 64) and fp_hex(first["dst_fp"]) == "f000000000000001"
    assert first["anchor"] == "Zed" and first["nofollow"] is False
    assert first["fetched_at"] == dt.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=dt.timezone.utc)
    assert rows[1]["anchor"] is None and rows[1]["nofollow"] is True
    assert rows[2]["kind"] == "canonical"


def test_meta_nofollow_marks_every_edge():
    page = _page()
    page.meta_nofollow = True
    assert all(row["nofollow"] for row in link_edges(page))


def test_fingerprint_round_trip():
    for fp in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, BIG_FP):
        assert -(1 << 63) <= signed64(fp) < (1 << 63)
        assert int(fp_hex(signed64(fp)), 16) == fp


def test_rows_fit_the_schemas_exactly():
    event = page_event(_page(), "warc/round=7/p.warc.gz@0")
    assert set(event) == set(PAGES_SCHEMA.names)
    pa.Table.from_pylist([event], schema=PAGES_SCHEMA)
    edges = link_edges(_page())
    assert set(edges[0]) == set(LINKS_SCHEMA.names)
    pa.Table.from_pylist(edges, schema=LINKS_SCHEMA)


def test_every_column_is_described_and_portable():
    for name, schema in SCHEMAS.items():
        for field in schema:
            assert field.metadata and field.metadata[b"description"], (name, field.name)
            t = field.type
            # no unsigned, nested, dictionary or naive/nanosecond timestamp types
            assert not pa.types.is_unsigned_integer(t) and not pa.types.is_nested(t) and not pa.types.is_dictionary(t)
            if pa.types.is_timestamp(t):
                assert t.unit == "ms" and t.tz == "UTC"


def test_schemas_md_is_up_to_date():
    text = (ROOT / "notebooks" / "SCHEMAS.md").read_text(encoding="utf-8")
    for name, schema in SCHEMAS.items():
        table = describe(schema) + "\n"
        assert table in text and text[text.index(table) + len(table) :][:1] in ("", "\n"), (
            f"notebooks/SCHEMAS.md is stale for {name}: replace its table with schemas.arrow.describe({name.upper()}_SCHEMA)"
        )


def test_write_part_sorts_compresses_and_keeps_descriptions(tmp_path):
    rows = link_edges(_page()) + link_edges(_page("http://a.example.org/"))
    path = str(tmp_path / "links" / "part-1.parquet")
    write_part(rows, LINKS_SCHEMA, ("src", "dst"), path)
    table = pq.read_table(path)
    keys = list(zip(table.column("src").to_pylist(), table.column("dst").to_pylist()))
    assert keys == sorted(keys)
    meta = pq.ParquetFile(path).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert pq.read_schema(path).field("anchor").metadata[b"description"].startswith(b"Anchor text")


def test_types_as_duckdb_sees_them(tmp_path):
    path = str(tmp_path / "pages.parquet")
    write_part([page_event(_page(fp=BIG_FP), None)], PAGES_SCHEMA, ("url",), path)
    con = duckdb.connect()
    types = dict(con.execute(f"select column_name, column_type from (describe select * from '{path}')").fetchall())
    assert types["url_fp"] == "BIGINT" and types["fetched_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types["etag"] == "VARCHAR" and "round" not in types  # the round is the folder's
    hex_fp = con.execute(f"select lpad(lower(hex(url_fp)), 16, '0') from '{path}'").fetchone()[0]
    assert hex_fp == "f000000000000001"
    con.execute("set TimeZone = 'UTC'")
    assert con.execute(f"select epoch_ms(fetched_at) from '{path}'").fetchone()[0] == 1_767_225_600_500


def test_transforms_write_staged_parts(tmp_path):
    outputs = RoundOutputs(str(tmp_path / "out"), 5)
    outputs.prepare()
    pages = [_page(), _page("http://a.example.org/")]
    with TestPipeline(runner="FnApiRunner") as p:
        parsed = p | beam.Create(pages)
        _ = parsed | WriteLinkEdges(outputs)
        _ = parsed | beam.Map(lambda page: page_event(page, None)) | WritePageEvents(outputs)
    moved = outputs.commit_files()
    assert set(moved) == {"pages", "links"}
    # the folder as readers open it: pyarrow and DuckDB both see the round as a column
    links = pq.read_table(os.path.join(outputs.out, "links")).to_pylist()
    assert len(links) == 6 and {r["round"] for r in links} == {5}
    con = duckdb.connect()
    assert con.execute(f"select distinct round from '{outputs.out}/links/*/*.parquet'").fetchall() == [(5,)]
    pages_rows = pq.read_table(glob.glob(os.path.join(outputs.out, "pages", "round=5", "*.parquet"))).to_pylist()
    assert sorted(r["url"] for r in pages_rows) == ["http://a.example.org/", "http://news.example.co.uk:8080/a"]
    assert pages_rows[0]["etag"] == "e1"


@pytest.mark.parametrize("schema_name", sorted(arrow.SCHEMAS))
def test_empty_tables_write_and_read(tmp_path, schema_name):
    schema = arrow.SCHEMAS[schema_name]
    path = str(tmp_path / f"{schema_name}.parquet")
    pq.write_table(schema.empty_table(), path, compression="zstd")
    assert pq.read_schema(path).remove_metadata().equals(schema.remove_metadata())
