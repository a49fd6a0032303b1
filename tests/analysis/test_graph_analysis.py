"""The notebook's analysis helpers on a small hand-made crawl output."""

from __future__ import annotations

import datetime as dt
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamcrawl.analysis import link_graph as lg
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA, signed64

T = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

# (src page, dst page, kind); hosts are the part before '/'
EDGES = [
    ("a.test/1", "b.test/1", "a"),
    ("a.test/1", "c.test/1", "a"),
    ("b.test/1", "c.test/1", "a"),
    ("b.test/2", "c.test/1", "a"),
    ("c.test/1", "a.test/1", "a"),
    ("c.test/1", "c.test/2", "a"),  # same host: not in the host graph
    ("a.test/1", "a.test/1", "a"),  # self-link: no in-degree
    ("d.other/1", "e.other/1", "a"),  # a second component
    ("a.test/1", "z.test/1", "canonical"),  # not a followable link
]


def _url(page: str) -> str:
    return f"http://{page.split('/')[0]}/{page.split('/')[1]}"


def _domain(page: str) -> str:
    return page.split("/")[0]


def _write(folder, schema, rows):
    os.makedirs(folder, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), os.path.join(folder, "part-0.parquet"))


@pytest.fixture
def crawl(tmp_path):
    out = tmp_path / "out"
    for rnd, edges in ((1, EDGES[:5]), (2, EDGES[5:])):
        rows = [
            {
                "src": _url(s),
                "dst": _url(d),
                "src_fp": signed64(fingerprint(_url(s))),
                "dst_fp": signed64(fingerprint(_url(d))),
                "src_host": s.split("/")[0],
                "dst_host": d.split("/")[0],
                "src_domain": _domain(s),
                "dst_domain": _domain(d),
                "anchor": None,
                "nofollow": False,
                "kind": k,
                "fetched_at": T,
            }
            for s, d, k in edges
        ]
        _write(out / "links" / f"round={rnd}", LINKS_SCHEMA, rows)
    pages = []
    for i, (host, status, ctype, source) in enumerate(
        [
            ("a.test", 200, "text/html; charset=utf-8", "seed"),
            ("a.test", 200, "TEXT/HTML", "link"),
            ("b.test", 404, "text/html", "link"),
            ("b.test", None, None, "link"),
            ("c.test", 200, "application/pdf", "link"),
            ("c.test", 200, "text/plain", "robots"),
        ]
    ):
        empty = {name: None for name in PAGES_SCHEMA.names}
        pages.append(
            empty
            | {
                "url": f"http://{host}/{i}",
                "url_fp": i,
                "host": host,
                "status": status,
                "outcome": "fetched" if status else "error",
                "content_type": ctype,
                "content_length": 10 if status else None,
                "source": source,
            }
        )
    _write(out / "pages" / "round=1", PAGES_SCHEMA, pages)
    os.makedirs(out / "reports")
    for rnd, responses in ((1, 4), (2, 6)):
        report = {
            "round": rnd,
            "responses": responses,
            "new_urls": 3,
            "frontier_size": 10 - rnd,
            "pages_per_second": 2.5,
            "metrics": {},
        }
        (out / "reports" / f"round-{rnd:06d}.json").write_text(json.dumps(report))
    return lg.open_crawl(str(out))


def test_views_see_every_round(crawl):
    assert crawl.sql("select round, count(*) from links group by 1 order by 1").fetchall() == [(1, 5), (2, 4)]
    assert crawl.execute("select typeof(round) from pages limit 1").fetchone()[0] == "INTEGER"


def test_in_degree_distribution(crawl):
    # c.test/1 has 3 distinct linking pages; b.test/1, a.test/1, c.test/2, e.other/1 have 1 each
    assert lg.in_degree_distribution(crawl).fetchall() == [(1, 4), (3, 1)]


def test_top_hosts_and_domains(crawl):
    hosts = lg.top_hosts(crawl, 3).fetchall()
    assert hosts[0] == ("c.test", 2, 3, 1)  # linked from a.test and b.test; one page fetched (robots.txt aside)
    domains = lg.top_domains(crawl, 10).fetchall()
    assert domains[0][0] == "c.test" and ("e.other", 1, 1, 1) in domains


def test_status_and_content_type_mix(crawl):
    assert lg.status_mix(crawl).fetchall() == [("200", "2xx", 3), ("404", "4xx", 1), ("error", "error", 1)]
    assert dict((r[0], r[1]) for r in lg.content_type_mix(crawl).fetchall()) == {
        "text/html": 3,
        "application/pdf": 1,
    }


def test_crawl_progress(crawl):
    rows = lg.crawl_progress(crawl).fetchall()
    assert [(r[0], r[1], r[-1]) for r in rows] == [(1, 4, 4), (2, 6, 10)]


def test_host_graph_components_and_largest(crawl):
    graph = lg.host_graph(crawl)
    assert graph.hosts == ["a.test", "b.test", "c.test", "d.other", "e.other"]
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == [(0, 1), (0, 2), (1, 2), (2, 0), (3, 4)]
    assert lg.components(graph.n, graph.src, graph.dst).tolist() == [0, 0, 0, 3, 3]
    assert lg.largest_component(graph) == ["a.test", "b.test", "c.test"]


def _dense_pagerank(n, src, dst, d=0.85):
    """The stationary vector of the Google matrix, by eigen-decomposition."""
    m = np.zeros((n, n))
    for s, t in zip(src, dst):
        m[t, s] += 1
    out = m.sum(axis=0)
    for j in range(n):
        m[:, j] = m[:, j] / out[j] if out[j] else 1.0 / n
    g = d * m + (1 - d) / n
    values, vectors = np.linalg.eig(g)
    v = np.real(vectors[:, np.argmax(np.real(values))])
    return v / v.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pagerank_equals_the_dense_solution(seed):
    rng = np.random.default_rng(seed)
    n = 12
    src = rng.integers(0, n, 40)
    dst = rng.integers(0, n, 40)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    ranks = lg.pagerank(n, src, dst, tol=1e-14, max_iter=1000)
    assert ranks.sum() == pytest.approx(1.0)
    assert ranks == pytest.approx(_dense_pagerank(n, src, dst), abs=1e-9)


def test_pagerank_edge_cases():
    assert lg.pagerank(0, np.array([], dtype=int), np.array([], dtype=int)).size == 0
    assert lg.pagerank(3, np.array([], dtype=int), np.array([], dtype=int)) == pytest.approx([1 / 3] * 3)
    star = lg.pagerank(4, np.array([1, 2, 3]), np.array([0, 0, 0]))
    assert star[0] > star[1] == pytest.approx(star[2])


def test_components_on_a_long_chain():
    n = 1000
    src = np.arange(n - 1)[::-1]
    dst = src + 1
    assert set(lg.components(n, src, dst).tolist()) == {0}


def test_ranked_hosts(crawl):
    ranked = lg.ranked_hosts(lg.host_graph(crawl), 2)
    assert [h for h, _ in ranked] == ["c.test", "a.test"]


def test_an_empty_crawl_folder_answers_with_no_rows(tmp_path):
    con = lg.open_crawl(str(tmp_path))
    assert lg.in_degree_distribution(con).fetchall() == []
    assert lg.host_graph(con).n == 0 and lg.largest_component(lg.host_graph(con)) == []
    assert lg.crawl_progress(con).fetchall() == []
    with pytest.raises(FileNotFoundError):
        lg.open_crawl(str(tmp_path / "missing"))


def test_node_sizes_span_the_range_by_square_root_and_keep_order():
    from beamcrawl.analysis.link_graph import node_sizes

    sizes = node_sizes([0.04, 0.01, 0.09], smallest=10, largest=100)
    assert list(sizes) == pytest.approx([55.0, 10.0, 100.0])  # sqrt: 0.2 halfway between 0.1 and 0.3
    assert list(node_sizes([0.2, 0.2], smallest=10, largest=100)) == [55.0, 55.0]
    assert node_sizes([]).size == 0


def test_crawl_out_path_resolves_against_the_caller(tmp_path, monkeypatch):
    from beamcrawl.analysis.link_graph import crawl_out_path

    caller, kernel = tmp_path / "caller", tmp_path / "caller" / "notebooks"
    (caller / "demo-out").mkdir(parents=True)
    kernel.mkdir()
    monkeypatch.chdir(kernel)
    env = {"BEAMCRAWL_CRAWL_OUT": "demo-out", "PWD": str(caller)}
    assert crawl_out_path(env=env) == str(caller / "demo-out")
    assert crawl_out_path("demo-out", env={"BEAMCRAWL_CALLER_CWD": str(caller), "PWD": str(kernel)}) == str(
        caller / "demo-out"
    )
    assert crawl_out_path(str(tmp_path / "x" / ".." / "abs"), env={}) == str(tmp_path / "abs")
    # Found nowhere: the caller's meaning, so the error names the folder the user meant.
    assert crawl_out_path("missing", env={"PWD": str(caller)}) == str(caller / "missing")
