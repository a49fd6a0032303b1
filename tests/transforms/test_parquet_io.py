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
from hypothesis import given, settings
from hypothesis import strategies as st
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.core.urls.urlnorm import fingerprint, host_of
from beamcrawl.schemas import arrow
from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA, SCHEMAS, describe, fp_hex, signed64
from beamcrawl.schemas.records import FetchResult, FrontierEntry, Link, PageBatch, ParsedPage
from beamcrawl.transforms import parquet_io
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.parquet_io import (
    ColumnBuffer,
    WriteLinkEdges,
    WritePageEvents,
    link_edge_columns,
    write_part,
    write_table,
)
from beamcrawl.transforms.warc_io import page_event

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIG_FP = 0xF000_0000_0000_0001  # above 2**63: stored negative


def _page(url: str = "http://news.example.co.uk:8080/a", fp: int | None = None) -> ParsedPage:
    entry = FrontierEntry(url=url, fp=fp if fp is not None else fingerprint(url), host=host_of(url), due_ms=0, depth=2)
    result = FetchResult(
        entry=entry,
        outcome="fetched",
        url=url,
        final_url=url,
        status=200,
        fetched_at=1_767_225_600.5,
        elapsed=0.1,
        ip="127.0.0.1",
        response_headers=[("Content-Type", "text/html"), ("ETag", "e1")],
        raw_body=b"<html></html>",
        body=b"<html></html>",
    )
    links = [
        Link(url="http://b.example.org/z", fp=BIG_FP, anchor="Zed", nofollow=False),
        Link(url="http://b.example.org/a", fp=fingerprint("http://b.example.org/a"), anchor="", nofollow=True),
        Link(
            url="http://news.example.co.uk:8080/c", fp=fingerprint("http://news.example.co.uk:8080/c"), kind="canonical"
        ),
    ]
    return ParsedPage(fetch=result, links=links, checksum="0" * 16, title="A")


def _edge_rows(page: ParsedPage) -> list[dict]:
    """A page's link edges as row dicts (the columns read across)."""
    columns = link_edge_columns(page) or {}
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def test_link_edges_carry_both_ends():
    rows = _edge_rows(_page())
    assert len(rows) == 3
    first = rows[0]
    assert first["src"] == "http://news.example.co.uk:8080/a" and first["dst"] == "http://b.example.org/z"
    assert first["src_host"] == "news.example.co.uk:8080" and first["dst_host"] == "b.example.org"
    assert first["src_domain"] == "example.co.uk" and first["dst_domain"] == "example.org"
    assert first["dst_fp"] == BIG_FP - (1 << 64) and fp_hex(first["dst_fp"]) == "f000000000000001"
    assert first["anchor"] == "Zed" and first["nofollow"] is False
    assert first["fetched_at"] == 1_767_225_600_500  # 2026-01-01T00:00:00.5Z, as stored
    assert rows[1]["anchor"] is None and rows[1]["nofollow"] is True
    assert rows[2]["kind"] == "canonical"


def test_a_page_without_links_has_no_edges():
    page = _page()
    page.links = []
    assert link_edge_columns(page) is None


def test_meta_nofollow_marks_every_edge():
    page = _page()
    page.meta_nofollow = True
    assert all(row["nofollow"] for row in _edge_rows(page))


def test_fingerprint_round_trip():
    for fp in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, BIG_FP):
        assert -(1 << 63) <= signed64(fp) < (1 << 63)
        assert int(fp_hex(signed64(fp)), 16) == fp


def test_rows_fit_the_schemas_exactly():
    event = page_event(_page(), "warc/round=7/p.warc.gz@0")
    assert set(event) == set(PAGES_SCHEMA.names)
    pa.Table.from_pylist([event], schema=PAGES_SCHEMA)
    edges = link_edge_columns(_page())
    assert edges is not None and list(edges) == LINKS_SCHEMA.names
    pa.Table.from_pydict(edges, schema=LINKS_SCHEMA)


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
    rows = _edge_rows(_page()) + _edge_rows(_page("http://a.example.org/"))
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
        parsed = p | beam.Create([PageBatch(pages)])
        _ = parsed | WriteLinkEdges(outputs)
        _ = parsed | beam.Map(lambda batch: [page_event(page, None) for page in batch.pages]) | WritePageEvents(outputs)
        assert_that(collected(p), equal_to([]), label="No dead letters")
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


# The registered domain of every host the pages below name, written out by hand (not by the
# code under test): an IP literal is its own domain, IPv6 in brackets and never empty.
_DOMAIN_OF = {
    "a.example.org": "example.org",
    "b.example.org": "example.org",
    "news.example.co.uk:8080": "example.co.uk",
    "[::1]:8080": "[::1]",
    "10.0.0.1": "10.0.0.1",
    "xn--bcher-kva.example": "xn--bcher-kva.example",  # ".example" is no listed suffix
}


# The row path the writers took before the column buffers (issue #10): a dict per edge, rows
# sorted in Python, ``Table.from_pylist``. Kept here as the reference for what files hold.
def _edge_rows_as_before(page: ParsedPage) -> list[dict]:
    f = page.fetch
    if not page.links:
        return []
    src_host = f.entry.host
    src_domain = _DOMAIN_OF[src_host]
    fetched_at = dt.datetime.fromtimestamp(f.fetched_at, dt.timezone.utc) if f.fetched_at else None
    rows = []
    for link in page.links:
        dst_host = host_of(link.url)
        rows.append({
            "src": f.url, "dst": link.url, "src_fp": signed64(f.entry.fp), "dst_fp": signed64(link.fp),
            "src_host": src_host, "dst_host": dst_host, "src_domain": src_domain,
            "dst_domain": _DOMAIN_OF[dst_host], "anchor": link.anchor or None,
            "nofollow": link.nofollow or page.meta_nofollow, "kind": link.kind, "fetched_at": fetched_at,
        })  # fmt: skip
    return rows


def test_ip_links_have_their_address_as_domain() -> None:
    """An IPv6 link's dst_domain is the address (it was "" and became an empty store key)."""
    columns = link_edge_columns(_awkward_pages()[2])
    rows = dict(zip(columns["dst_host"], columns["dst_domain"]))
    assert rows["[::1]:8080"] == "[::1]"
    assert rows["10.0.0.1"] == "10.0.0.1"
    assert all(columns["dst_domain"]) and all(columns["src_domain"])


def _parts_as_before(batches: list[list[dict]], schema: pa.Schema, sort_by: tuple[str, ...]) -> list[bytes]:
    parts, rows = [], []

    def flush() -> None:
        nonlocal rows
        if rows:
            rows.sort(key=lambda r: tuple(r[c] for c in sort_by))
            sink = pa.BufferOutputStream()
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink, compression="zstd")
            parts.append(sink.getvalue().to_pybytes())
            rows = []

    for batch in batches:
        rows.extend(batch)
        if len(rows) >= parquet_io.FLUSH_ROWS:
            flush()
    flush()
    return parts


def _parts_now(tmp_path, elements: list, schema: pa.Schema, sort_by: tuple[str, ...], columnar: bool) -> list[bytes]:
    folder = tmp_path / f"now-{schema.names[0]}"
    fn = parquet_io._ParquetPartsFn(str(folder), schema, sort_by, "test", columnar=columnar)
    fn.start_bundle()
    for element in elements:
        fn.process(element)
    fn.finish_bundle()
    return [path.read_bytes() for path in sorted(folder.iterdir())]


def _awkward_pages() -> list[ParsedPage]:
    """Pages whose edges test the column path: no links, non-ASCII URLs and anchors (the sort
    must order by code point), repeated (src, dst) pairs (ties keep their order), null anchors
    and fetch times, fetch times on a millisecond's rounding edge, IPv6 and IP hosts, the
    extreme fingerprints, and a page marked nofollow."""
    plain = _page()
    no_links = _page("http://a.example.org/none")
    no_links.links = []
    odd = _page("http://a.example.org/é", fp=(1 << 64) - 1)
    odd.fetch.fetched_at = 1_767_225_600.4999996  # datetime rounds it to .500000
    odd.meta_nofollow = True
    odd.links = [
        Link(url="http://a.example.org/\U0001f600", fp=0, anchor="Bücher ☃"),
        Link(url="http://a.example.org/\ue000", fp=1 << 63, anchor=""),
        Link(url="http://a.example.org/\U00010000", fp=(1 << 63) - 1, kind="frame"),
        Link(url="http://a.example.org/~", fp=5, anchor="first of two"),
        Link(url="http://a.example.org/\x7f", fp=6),
        Link(url="http://a.example.org/~", fp=5, anchor="second of two", nofollow=True),
        Link(url="http://[::1]:8080/v6", fp=7),
        Link(url="http://10.0.0.1/ip", fp=8, kind="redirect"),
        Link(url="https://xn--bcher-kva.example/", fp=9),
    ]
    unfetched = _page("http://a.example.org/")
    unfetched.fetch.fetched_at = 0.0  # null fetched_at
    again = _page()  # the same source twice: its edges stay after the first page's
    again.links = [Link(url="http://b.example.org/z", fp=BIG_FP, anchor="again")]
    return [plain, no_links, odd, unfetched, again, _page("http://news.example.co.uk:8080/", fp=1)]


@pytest.mark.parametrize("flush_rows", [parquet_io.FLUSH_ROWS, 4])
def test_link_parts_hold_what_the_row_path_wrote(tmp_path, monkeypatch, flush_rows):
    monkeypatch.setattr(parquet_io, "FLUSH_ROWS", flush_rows)
    pages = _awkward_pages()
    before = _parts_as_before([_edge_rows_as_before(p) for p in pages], LINKS_SCHEMA, ("src", "dst"))
    now = _parts_now(tmp_path, [link_edge_columns(p) for p in pages], LINKS_SCHEMA, ("src", "dst"), columnar=True)
    assert len(now) == len(before) > (1 if flush_rows == 4 else 0)
    assert sorted(now) == sorted(before)  # the same bytes: schema, metadata, rows and order
    # As the round gives them: each page's source values once beside the links' columns.
    shared = _parts_now(
        tmp_path / "shared", [parquet_io.link_edge_parts(p) for p in pages], LINKS_SCHEMA, ("src", "dst"), columnar=True
    )
    assert sorted(shared) == sorted(before)
    table = pq.read_table(pa.BufferReader(max(now, key=len)))
    assert table.schema.equals(LINKS_SCHEMA, check_metadata=True)


def test_page_parts_hold_what_the_row_path_wrote(tmp_path):
    pages = _awkward_pages()
    failed = _page("http://a.example.org/é")
    failed.fetch.outcome, failed.fetch.status, failed.fetch.error = "error", 0, "timeout"  # most fields null
    events = [page_event(p, f"warc/x@{i}") for i, p in enumerate([*pages, failed])]
    del events[0]["etag"]  # a missing key is null, as from_pylist had it
    before = _parts_as_before([[e] for e in events], PAGES_SCHEMA, ("url",))
    now = _parts_now(tmp_path, events, PAGES_SCHEMA, ("url",), columnar=False)
    assert now == before
    urls = pq.read_table(pa.BufferReader(now[0])).column("url").to_pylist()
    assert urls == sorted(e["url"] for e in events)


@pytest.mark.parametrize(
    "seconds",
    [1_767_225_600.5, 1_767_225_600.4999996, 1_767_225_600.0005, 1_767_225_600.9999999, 1.0000005, 1e9 + 0.1239995],
)
def test_timestamp_ms_is_what_arrow_stores_for_the_datetime(seconds):
    stored = pa.array([dt.datetime.fromtimestamp(seconds, dt.timezone.utc)], type=arrow.TIMESTAMP)
    assert arrow.timestamp_ms(seconds) == stored.cast(pa.int64())[0].as_py()


def test_column_buffer_fills_gaps_with_nulls_and_starts_over():
    buffer = ColumnBuffer(LINKS_SCHEMA)
    buffer.add_row({"src": "s", "dst": "d", "src_fp": 1, "dst_fp": 2})
    assert buffer.add_columns({"src": ["s2", "s3"], "dst": ["d2", "d3"], "src_fp": [3, 3], "dst_fp": [4, 5]}) == 2
    assert len(buffer) == 3
    table = buffer.take()
    assert table.schema.equals(LINKS_SCHEMA, check_metadata=True)
    assert table.column("dst").to_pylist() == ["d", "d2", "d3"] and table.column("anchor").null_count == 3
    assert len(buffer) == 0 and buffer.take().num_rows == 0


def test_write_table_sorts_stably(tmp_path):
    table = pa.table({"k": ["b", "a", "b", "a"], "v": [1, 2, 3, 4]})
    write_table(table, ("k",), str(tmp_path / "t.parquet"))
    back = pq.read_table(str(tmp_path / "t.parquet"))
    assert back.column("v").to_pylist() == [2, 4, 1, 3]


def _weight(rows: int, strings: list[list]) -> int:
    """ColumnBuffer.nbytes by its definition: 8 bytes a value, plus each string's length."""
    return 8 * len(LINKS_SCHEMA.names) * rows + sum(len(v) for c in strings for v in c if isinstance(v, str))


_edge_pages = st.lists(
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 2_000) | st.none()), min_size=1, max_size=6),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(pages=_edge_pages, budget=st.integers(1, 20_000), columnar=st.booleans())
def test_parts_flush_at_the_byte_budget_and_keep_every_row(tmp_path_factory, pages, budget, columnar):
    """Pages of edges with URLs and anchors of any size, added as columns or row by row: a
    part is written as soon as the buffered rows reach the byte budget (so no part weighs more
    than the budget plus the element that crossed it, and at most one, the bundle's last, weighs
    less), and the parts together hold every row once."""
    folder = tmp_path_factory.mktemp("parts")
    elements = []
    for i, edges in enumerate(pages):
        cols: dict[str, list] = {name: [] for name in ("src", "dst", "src_fp", "dst_fp", "anchor")}
        for j, (url_len, anchor_len) in enumerate(edges):
            cols["src"].append(f"http://s{i}/")
            cols["dst"].append(f"http://d/{j}/" + "u" * url_len)
            cols["src_fp"].append(i)
            cols["dst_fp"].append(j)
            cols["anchor"].append(None if anchor_len is None else "a" * anchor_len)
        elements.append(cols)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet_io, "FLUSH_BYTES", budget)
        fn = parquet_io._ParquetPartsFn(str(folder), LINKS_SCHEMA, ("src", "dst"), "test", columnar=columnar)
        fn.start_bundle()
        for cols in elements:
            if columnar:
                fn.process(cols)
            else:
                for k in range(len(cols["src"])):
                    fn.process({name: c[k] for name, c in cols.items()})
        fn.finish_bundle()
    parts = [pq.read_table(p) for p in folder.iterdir()]
    got = sorted((r["src_fp"], r["dst_fp"], r["dst"], r["anchor"]) for t in parts for r in t.to_pylist())
    want = sorted(
        (c["src_fp"][k], c["dst_fp"][k], c["dst"][k], c["anchor"][k]) for c in elements for k in range(len(c["src"]))
    )
    assert got == want
    largest = max((_weight(len(c["src"]), [c["src"], c["dst"], c["anchor"]]) for c in elements), default=0)
    weights = [_weight(t.num_rows, [t.column(n).to_pylist() for n in ("src", "dst", "anchor")]) for t in parts]
    assert all(w < budget + largest for w in weights)
    assert sum(w < budget for w in weights) <= 1


def test_column_buffer_estimates_bytes_by_values_and_string_lengths():
    buffer = ColumnBuffer(LINKS_SCHEMA)
    slots = 8 * len(LINKS_SCHEMA.names)
    buffer.add_row({"src": "abc", "dst": "de", "src_fp": 1, "anchor": None})
    assert buffer.nbytes == slots + 5
    buffer.add_columns({"src": ["x" * 10, "y"], "dst": ["", None], "src_fp": [1, 2]})
    assert buffer.nbytes == 3 * slots + 5 + 11
    buffer.add_row({"src": 7, "dst": "ok"})  # a value of the wrong type weighs its slot only
    assert buffer.nbytes == 4 * slots + 5 + 11 + 2
    assert len(buffer.drop_bad_rows()) == 1 and buffer.nbytes == 3 * slots + 5 + 11
    buffer.take()
    assert buffer.nbytes == 0


_cells = st.one_of(
    st.text(max_size=12),
    st.none(),
    st.integers(-5, 5),  # not a string: Arrow refuses it in a string column
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(st.text(max_size=12), _cells, st.integers(-(2**63), 2**63 - 1)), max_size=40),
    seal_rows=st.integers(1, 9),
)
def test_rows_sealed_as_they_come_make_the_table_one_conversion_makes(tmp_path_factory, rows, seal_rows):
    """Rows sealed to Arrow every few rows, their bad values dropped as dead letters when
    each seal or the flush meets them: the part holds the good rows in the same table, and
    writes the same file, as converting them all at once; each bad row is one dead letter."""
    folder = tmp_path_factory.mktemp("sealed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet_io, "SEAL_ROWS", seal_rows)
        fn = parquet_io._ParquetPartsFn(str(folder / "parts"), LINKS_SCHEMA, ("src", "dst"), "test", batched=True)
        fn.start_bundle()
        out = fn.process(
            [{"src": src, "dst": "d", "anchor": anchor, "src_fp": fp, "dst_fp": 0} for src, anchor, fp in rows]
        )
        out += fn.finish_bundle()
    letters = [o.value.value if hasattr(o.value, "value") else o.value for o in out]
    good = [r for r in rows if r[1] is None or (isinstance(r[1], str) and _encodes(r[1]))]
    assert len(letters) == len(rows) - len(good)
    parts = sorted((folder / "parts").iterdir()) if (folder / "parts").exists() else []
    if not good:
        assert parts == []
        return
    (part,) = parts
    reference = folder / "reference.parquet"
    whole = pa.Table.from_pylist(
        [{"src": s, "dst": "d", "anchor": a, "src_fp": fp, "dst_fp": 0} for s, a, fp in good], schema=LINKS_SCHEMA
    )
    write_table(whole, ("src", "dst"), str(reference))
    assert pq.read_table(part).equals(pq.read_table(reference))
    assert part.read_bytes() == reference.read_bytes()


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_a_sealed_buffer_keeps_no_python_values():
    buffer = ColumnBuffer(LINKS_SCHEMA, seal_rows=2)
    buffer.add_columns({"src": ["a", "b", "c"], "dst": ["x", "y", "z"], "src_fp": [1, 2, 3], "dst_fp": [4, 5, 6]})
    assert buffer.full()
    buffer.seal()
    assert not buffer.full() and all(column == [] for column in buffer.columns.values())
    assert len(buffer) == 3 and buffer.nbytes == 3 * 8 * len(LINKS_SCHEMA.names) + 6
    buffer.add_row({"src": 7, "dst": "w"})  # refused at the next seal: dropped alone
    assert [row["src"] for row in buffer.drop_bad_rows()] == [7]
    assert buffer.nbytes == 3 * 8 * len(LINKS_SCHEMA.names) + 6
    assert buffer.take().column("src").to_pylist() == ["a", "b", "c"]


_cell = st.one_of(st.none(), st.text(max_size=6), st.binary(max_size=4), st.integers(0, 9))


@settings(max_examples=200, deadline=None)
@given(st.lists(_cell, max_size=12))
def test_string_lengths_are_summed_as_each_value_counts(values):
    """Strings and bytes weigh their length, anything else nothing, in one join or not."""
    assert parquet_io._lengths(values) == sum(len(v) for v in values if isinstance(v, (str, bytes)))


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 6),
    shared=st.dictionaries(st.sampled_from(["src", "src_fp", "src_host", "fetched_at"]), _cell, max_size=4),
    dst=st.lists(st.text(max_size=5), min_size=6, max_size=6),
)
def test_shared_values_are_the_columns_they_stand_for(n, shared, dst):
    """add_columns(columns, shared) holds, weighs and converts as the columns written out."""
    given_once, written_out = ColumnBuffer(LINKS_SCHEMA), ColumnBuffer(LINKS_SCHEMA)
    columns = {"dst": dst[:n]}
    assert (
        given_once.add_columns(columns, shared)
        == written_out.add_columns({**columns, **{name: [value] * n for name, value in shared.items()}})
        == n
    )
    assert given_once.nbytes == written_out.nbytes
    assert given_once.columns == written_out.columns
    try:
        expected = written_out.take()
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        with pytest.raises((pa.ArrowException, TypeError, ValueError, OverflowError)):
            given_once.take()
        return
    assert given_once.take().equals(expected)
