"""What analysts and operators get from a fresh crawl: CDXJ beside every WARC (checked
against cdxj-indexer), a Prometheus file beside every report, Parquet that pyarrow and
DuckDB read with the round as a column, and the state exports."""

from __future__ import annotations

import glob
import io
import json
import os
import re

import duckdb
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from beamcrawl.cli.export import main as export_main
from beamcrawl.stores.base import open_store

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a demo crawl: `pytest -m "not slow and not e2e"` leaves it out


def _indexer(warc: str, root: str) -> list[str]:
    from cdxj_indexer.main import CDXJIndexer

    out = io.StringIO()
    CDXJIndexer(out, [warc], dir_root=root, sort=True).process_all()
    return out.getvalue().splitlines()


def test_every_warc_has_a_sorted_cdxj_equal_to_cdxj_indexers(demo_crawl):
    out = str(demo_crawl["out"])
    warcs = sorted(glob.glob(f"{out}/warc/round=*/*.warc.gz"))
    assert len(warcs) >= 2
    compared = 0
    for warc in warcs:
        with open(warc[: -len(".warc.gz")] + ".cdxj", encoding="utf-8") as fh:
            ours = fh.read().splitlines()
        theirs = _indexer(warc, out)
        assert [l.split(" ", 2)[:2] for l in ours] == sorted(l.split(" ", 2)[:2] for l in ours)
        assert len(ours) == len(theirs)
        for mine, other in zip(ours, theirs):
            m_key, m_ts, m_json = mine.split(" ", 2)
            t_key, t_ts, t_json = other.split(" ", 2)
            assert (m_key, m_ts) == (t_key, t_ts)
            m, t = json.loads(m_json), json.loads(t_json)
            for name in ("url", "mime", "status", "length", "offset", "filename"):
                assert m.get(name) == t.get(name), (name, mine, other)
            assert t["digest"] == "sha1:" + m["digest"]
            compared += 1
    fetched = sum(
        1
        for f in glob.glob(f"{out}/pages/*/*.parquet")
        for r in pq.read_table(f, columns=["blob"]).to_pylist()
        if r["blob"]
    )
    assert compared == fetched > 50


def test_blobs_and_cdxj_point_at_the_same_records(demo_crawl):
    out = str(demo_crawl["out"])
    index = {}
    for path in glob.glob(f"{out}/warc/round=*/*.cdxj"):
        for line in open(path, encoding="utf-8"):
            fields = json.loads(line.split(" ", 2)[2])
            index[(fields["filename"], fields["offset"])] = fields["url"]
    pages = pq.read_table(os.path.join(out, "pages")).to_pylist()
    for row in pages:
        if row["blob"]:
            rel, offset = row["blob"].rsplit("@", 1)
            assert index[(rel, offset)] == row["url"]


def test_pages_carry_round_headers_and_politeness_waits(demo_crawl):
    out = str(demo_crawl["out"])
    table = pq.read_table(os.path.join(out, "pages"))  # the folder, as analysts open it
    assert sorted(set(table.column("round").to_pylist())) == [1, 2]
    rows = table.to_pylist()
    assert all(r["server"] == "simweb" for r in rows if r["outcome"] == "fetched")
    assert any(r["waited_ms"] and r["waited_ms"] > 100 for r in rows)
    con = duckdb.connect()
    by_round = dict(con.execute(f"select round, count(*) from '{out}/links/*/*.parquet' group by 1").fetchall())
    assert set(by_round) == {1, 2}


def test_one_prometheus_file_holds_the_latest_round(demo_crawl):
    out = demo_crawl["out"]
    reports = sorted(glob.glob(str(out / "reports" / "round-*.json")))
    assert len(reports) == 2  # the per-round JSON stays
    # One .prom whatever the round count: a textfile collector pointed at reports/ sees no
    # clash of metric names between rounds.
    assert [os.path.basename(p) for p in glob.glob(str(out / "reports" / "*.prom"))] == ["beamcrawl.prom"]
    report = json.load(open(reports[-1]))
    text = open(out / "reports" / "beamcrawl.prom").read()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    assert samples["beamcrawl_round"] == report["round"] == 2
    assert samples["beamcrawl_round_responses"] == report["responses"]
    assert samples["beamcrawl_store_success"] == report["metrics"]["store/success"] > 0
    assert samples["beamcrawl_publish_pages_success"] > 0
    assert samples["beamcrawl_fetch_politeness_wait_ms_count"] > 0
    assert "beamcrawl_fetch_politeness_wait_ms_max" in text


def test_round_summary_says_what_its_figures_count(demo_crawl):
    out = demo_crawl["out"]
    report = json.load(open(sorted(glob.glob(str(out / "reports" / "round-*.json")))[0]))
    text = demo_crawl["stdout"]
    robots = report["robots_fetches"]
    assert robots > 0
    assert f"robots.txt {robots}" not in text  # the old wording, without its meaning
    assert re.search(rf"responses: \d+ pages, {robots} robots.txt, \d+ sitemaps and feeds", text), text
    assert re.search(r"deferred \d+ \(assigned but left queued for the next round: (none|[a-z ]+ \d+)", text), text
    assert re.search(r"errors \d+ \(requests that got no HTTP answer; retried later with back-off: ", text), text
    assert re.search(
        r"deferred by budgets \d+ \(queued URLs set aside, due again later, never deleted: over the "
        r"domain's page budget \d+",
        text,
    ), text
    # The breakdowns add up to their totals.
    m = report["metrics"]
    assert sum(v for k, v in m.items() if k.startswith("fetch/deferred_reason/")) == report["deferred"]
    assert sum(v for k, v in m.items() if k.startswith("fetch/error_kind/")) == report["fetch_errors"]


def test_state_exports_match_the_store(demo_crawl, tmp_path):
    out = demo_crawl["out"]
    for what in ("urls", "hosts"):
        assert export_main([what, "--crawl", str(out), "--out", str(tmp_path), "--chunk-rows", "100"]) == 0
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        n_urls = sum(1 for _ in store.read_range("urls", keys_only=True))
        n_hosts = sum(1 for _ in store.read_range("hosts", keys_only=True))
    con = duckdb.connect()
    assert con.execute(f"select count(*) from '{tmp_path}/urls/*.parquet'").fetchone()[0] == n_urls
    assert con.execute(f"select count(*) from '{tmp_path}/hosts/*.parquet'").fetchone()[0] == n_hosts
    states = dict(con.execute(f"select state, count(*) from '{tmp_path}/urls/*.parquet' group by 1").fetchall())
    assert states.get("fetched", 0) > 0 and states.get("queued", 0) > 0


def test_exact_copies_among_error_pages_are_explained_where_analysts_look(demo_crawl):
    """A site's identical 404 and 500 pages are exact copies (stored once); the Parquet files'
    own column descriptions and SCHEMAS.md say so, and say that only 2xx pages are near copies."""
    out = str(demo_crawl["out"])
    schema = pq.read_table(os.path.join(out, "pages")).schema
    description = schema.field("duplicate_kind").metadata[b"description"].decode()
    assert "404 or 500" in description and "filter on status" in description
    con = duckdb.connect()
    near_non_2xx = con.execute(
        f"select count(*) from '{out}/pages/*/*.parquet' where duplicate_kind = 'near' and not status between 200 and 299"
    ).fetchone()[0]
    assert near_non_2xx == 0
    schemas_md = open(os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "SCHEMAS.md")).read()
    assert "duplicate_kind = 'exact'" in schemas_md and "404 (or 500)" in schemas_md
    truncated = schema.field("truncated").metadata[b"description"].decode()
    assert "'time'" in truncated and "'length'" in truncated


def test_content_seen_joins_the_copies_and_decisions_and_holds_no_side_input(demo_crawl):
    """Nothing in content seen waits for a side input, which every worker would hold whole:
    the copies (exact and near, ~250 B each) are joined to the batch files their pages wait
    in, the near decisions and pending pairs to the new checksums' spans of their part (a
    reference per span, ~100 B), the crowded rows to the in-round resolution, and the pages
    wait on disk, a reference a batch file. Bounded from the round reports' figures (Beam's
    measured bytes into each shuffle), with a margin of about 1.6x."""
    out = demo_crawl["out"]
    checked = 0
    for path in sorted(glob.glob(str(out / "reports" / "round-*.json"))):
        report = json.load(open(path))
        by_step = report["shuffle_bytes_by_step"]
        side = {step.split("/")[-2]: n for step, n in by_step.items() if "[side input" in step}
        assert not side, side  # content seen joins what it waits for: no side input
        exact, near, pages = report["exact_copies"], report["near_copies"], report["responses"]
        # The copies reach their pages by a join on the batch file each page waits in:
        # what crosses is the copies and a reference a file (about 1,000 pages a file).
        joined = sum(n for step, n in by_step.items() if "Join batches and their copies" in step)
        assert joined <= 400 * (exact + near) + 200 * (pages // 1000 + 4), (joined, exact, near, pages)
        # The near decisions and the pending pairs meet the new checksums by part: what
        # crosses is the decisions and a span reference per part a spill (2,000 probes).
        spans = 16 * (pages // 2000 + 4)
        decided = sum(n for step, n in by_step.items() if "Join new content and its near copies" in step)
        assert 0 < decided <= 150 * near + 160 * spans, (decided, near, pages)
        named = sum(n for step, n in by_step.items() if "Join new content and pending pairs" in step)
        assert 0 < named <= 400 * near + 160 * spans, (named, near, pages)
        # Pages far outnumber copies in a round: a side input of every page would not fit.
        checked += pages > 3 * (exact + near) and pages * 250 > 400 * (exact + near) + 1024
    assert checked, "no round with pages enough beyond its copies to tell"
