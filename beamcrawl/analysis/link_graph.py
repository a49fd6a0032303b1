"""The link graph and fetch events of a crawl, as DuckDB views and small graph algorithms.

:func:`open_crawl` opens a crawl's output folder as three views, ``pages``, ``links`` and
``reports`` (one row per round report), in an in-memory DuckDB database; the query
helpers return DuckDB relations, which print as tables and convert with ``.fetchall()``,
``.arrow()`` or ``.df()``. The host graph (one edge per pair of distinct hosts with a link
between them) is small enough for numpy: :func:`pagerank` is the power iteration with
dangling hosts' rank spread evenly, :func:`components` labels weakly connected
components. Used by ``notebooks/link_graph.ipynb``; nothing here imports Beam.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA

__all__ = [
    "LINK_KINDS",
    "REPORT_COLUMNS",
    "HostGraph",
    "components",
    "content_type_mix",
    "crawl_out_path",
    "crawl_progress",
    "host_graph",
    "in_degree_distribution",
    "largest_component",
    "node_sizes",
    "open_crawl",
    "pagerank",
    "ranked_hosts",
    "status_mix",
    "top_domains",
    "top_hosts",
]

# The repository's root (a source checkout: the notebooks live in ROOT/notebooks).
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Edges that are links a person could follow; canonical and redirect edges are not.
LINK_KINDS = ("a", "area", "frame")

REPORT_COLUMNS = (
    "round",
    "seconds",
    "pipeline_seconds",
    "urls_due",
    "urls_assigned",
    "responses",
    "fetch_errors",
    "deferred",
    "robots_disallowed",
    "bytes",
    "links_found",
    "new_urls",
    "frontier_size",
    "pages_per_second",
)


def _parquet_view(con: duckdb.DuckDBPyConnection, name: str, folder: str, schema: pa.Schema) -> None:
    files = sorted(glob.glob(os.path.join(folder, "round=*", "*.parquet")))
    if files:
        # The round is the folder's hive partition (round=7), not a column of the files.
        listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(
            f"create or replace view {name} as select * from read_parquet([{listing}], "
            "hive_partitioning = true, hive_types = {'round': INTEGER})"
        )
    else:  # a crawl with no such output yet still answers queries, with no rows
        con.register(f"_{name}_empty", schema.append(pa.field("round", pa.int32())).empty_table())
        con.execute(f"create or replace view {name} as select * from _{name}_empty")


def _reports_table(folder: str) -> pa.Table:
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "round-*.json"))):
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
        rows.append({c: report.get(c) for c in REPORT_COLUMNS})
    fields = [
        pa.field(c, pa.int64() if c not in ("seconds", "pipeline_seconds", "pages_per_second") else pa.float64())
        for c in REPORT_COLUMNS
    ]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def open_crawl(out: str, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """Views ``pages``, ``links`` and ``reports`` over a crawl's output folder.

    Args:
        out: The crawl's ``--out`` folder.
        con: A connection to add the views to (default: a new in-memory database).

    Raises:
        FileNotFoundError: ``out`` is not a folder.
    """
    if not os.path.isdir(out):
        raise FileNotFoundError(f"no crawl output folder at {out}")
    con = con or duckdb.connect()
    _parquet_view(con, "pages", os.path.join(out, "pages"), PAGES_SCHEMA)
    _parquet_view(con, "links", os.path.join(out, "links"), LINKS_SCHEMA)
    con.register("_reports", _reports_table(os.path.join(out, "reports")))
    con.execute("create or replace view reports as select * from _reports order by round")
    return con


def _kinds(kinds: Sequence[str]) -> str:
    return ", ".join("'" + k.replace("'", "''") + "'" for k in kinds)


def in_degree_distribution(
    con: duckdb.DuckDBPyConnection, kinds: Sequence[str] = LINK_KINDS
) -> duckdb.DuckDBPyRelation:
    """``(in_degree, urls)``: how many URLs are linked from exactly that many distinct pages
    (self-links excluded), by in-degree; the classic heavy-tailed plot of a web graph."""
    return con.sql(
        f"""
        with indeg as (
            select dst_fp, count(distinct src_fp) as in_degree
            from links where kind in ({_kinds(kinds)}) and src_fp <> dst_fp
            group by dst_fp
        )
        select in_degree, count(*) as urls from indeg group by in_degree order by in_degree
        """
    )


def top_hosts(
    con: duckdb.DuckDBPyConnection, n: int = 20, kinds: Sequence[str] = LINK_KINDS
) -> duckdb.DuckDBPyRelation:
    """Hosts by how many other hosts link to them, with link and fetched-page counts."""
    return con.sql(
        f"""
        with inl as (
            select dst_host as host, count(distinct src_host) as linking_hosts, count(*) as inlinks
            from links where kind in ({_kinds(kinds)}) and src_host <> dst_host group by 1
        ), fetched as (
            select host, count(*) as pages_fetched from pages
            where outcome = 'fetched' and coalesce(source, '') <> 'robots' group by 1
        )
        select coalesce(inl.host, fetched.host) as host,
               coalesce(linking_hosts, 0) as linking_hosts, coalesce(inlinks, 0) as inlinks,
               coalesce(pages_fetched, 0) as pages_fetched
        from inl full outer join fetched on inl.host = fetched.host
        order by linking_hosts desc, inlinks desc, pages_fetched desc, host
        limit {int(n)}
        """
    )


def top_domains(
    con: duckdb.DuckDBPyConnection, n: int = 20, kinds: Sequence[str] = LINK_KINDS
) -> duckdb.DuckDBPyRelation:
    """Registered domains by how many other domains link to them."""
    return con.sql(
        f"""
        select dst_domain as domain, count(distinct src_domain) as linking_domains, count(*) as inlinks,
               count(distinct dst_host) as hosts_linked
        from links where kind in ({_kinds(kinds)}) and src_domain <> dst_domain
        group by 1 order by linking_domains desc, inlinks desc, domain limit {int(n)}
        """
    )


def crawl_progress(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    """One row per round: responses, errors, new URLs, frontier size, throughput."""
    return con.sql(
        "select round, responses, fetch_errors, new_urls, frontier_size, links_found, pages_per_second, "
        "sum(responses) over (order by round) as responses_total from reports order by round"
    )


def status_mix(con: duckdb.DuckDBPyConnection, include_robots: bool = False) -> duckdb.DuckDBPyRelation:
    """Fetch events by HTTP status (``error`` for no response), robots.txt requests aside."""
    where = "" if include_robots else "where coalesce(source, '') <> 'robots'"
    return con.sql(
        f"""
        select coalesce(cast(status as varchar), outcome) as status,
               coalesce(cast(status // 100 as varchar) || 'xx', outcome) as class,
               count(*) as events
        from pages {where} group by 1, 2 order by events desc, status
        """
    )


def content_type_mix(con: duckdb.DuckDBPyConnection, n: int = 15) -> duckdb.DuckDBPyRelation:
    """Fetched pages by media type (Content-Type without parameters, lower-cased)."""
    return con.sql(
        f"""
        select coalesce(nullif(lower(trim(split_part(content_type, ';', 1))), ''), '(none)') as media_type,
               count(*) as pages, sum(content_length) as bytes
        from pages where outcome = 'fetched' and coalesce(source, '') <> 'robots'
        group by 1 order by pages desc, media_type limit {int(n)}
        """
    )


@dataclass(frozen=True)
class HostGraph:
    """Hosts and the distinct host-to-host edges between them (no self-loops)."""

    hosts: list[str]
    src: np.ndarray  # int64 indices into hosts
    dst: np.ndarray

    @property
    def n(self) -> int:
        return len(self.hosts)


def host_graph(con: duckdb.DuckDBPyConnection, kinds: Sequence[str] = LINK_KINDS) -> HostGraph:
    """The host graph of the crawl's links: every host that links or is linked is a node."""
    edges = con.sql(
        f"select distinct src_host, dst_host from links where kind in ({_kinds(kinds)}) "
        "and src_host is not null and dst_host is not null and src_host <> dst_host"
    ).fetchall()
    hosts = sorted({h for edge in edges for h in edge})
    index = {h: i for i, h in enumerate(hosts)}
    src = np.fromiter((index[s] for s, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[d] for _, d in edges), dtype=np.int64, count=len(edges))
    return HostGraph(hosts, src, dst)


def pagerank(
    n: int, src: np.ndarray, dst: np.ndarray, damping: float = 0.85, tol: float = 1e-10, max_iter: int = 200
) -> np.ndarray:
    """PageRank of a directed graph by power iteration; the ranks sum to 1.

    A node without out-edges spreads its rank over all nodes (the usual dangling-node
    rule), so the iteration is a proper Markov chain.

    Args:
        n: Number of nodes.
        src: Edge sources (node indices).
        dst: Edge targets, aligned with ``src``; duplicate edges count twice.
        damping: Probability of following a link rather than jumping anywhere.
        tol: Stop when the L1 change of an iteration is below this.
        max_iter: Stop after this many iterations regardless.
    """
    if n == 0:
        return np.zeros(0)
    out_degree = np.bincount(src, minlength=n).astype(float)
    dangling = out_degree == 0
    rank = np.full(n, 1.0 / n)
    weight = np.divide(1.0, out_degree, out=np.zeros(n), where=~dangling)
    for _ in range(max_iter):
        flow = np.bincount(dst, weights=rank[src] * weight[src], minlength=n)
        new = damping * (flow + rank[dangling].sum() / n) + (1.0 - damping) / n
        new /= new.sum()
        done = np.abs(new - rank).sum() < tol
        rank = new
        if done:
            break
    return rank


def components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Weakly connected component labels: each node gets the smallest node index of its
    component (min-label propagation with pointer jumping, vectorised)."""
    labels = np.arange(n)
    if len(src) == 0:
        return labels
    while True:
        low = np.minimum(labels[src], labels[dst])
        new = labels.copy()
        np.minimum.at(new, src, low)
        np.minimum.at(new, dst, low)
        new = new[new]  # a label's label is in the same component and no larger
        if np.array_equal(new, labels):
            return labels
        labels = new


def largest_component(graph: HostGraph) -> list[str]:
    """The hosts of the host graph's largest weakly connected component, sorted."""
    if graph.n == 0:
        return []
    labels = components(graph.n, graph.src, graph.dst)
    biggest = np.bincount(labels).argmax()
    return sorted(graph.hosts[i] for i in np.flatnonzero(labels == biggest))


def ranked_hosts(graph: HostGraph, n: int = 20, **kwargs: Any) -> list[tuple[str, float]]:
    """The top ``n`` hosts by PageRank over the host graph, with their scores."""
    scores = pagerank(graph.n, graph.src, graph.dst, **kwargs)
    order = np.lexsort((np.arange(graph.n), -scores))[:n]
    return [(graph.hosts[i], float(scores[i])) for i in order]


def crawl_out_path(path: str | None = None, env: dict[str, str] | None = None) -> str:
    """The crawl folder a notebook should open, as an absolute path.

    A notebook's kernel runs in the notebook's folder (``notebooks/``), not where the user
    typed the command, so a relative ``BEAMCRAWL_CRAWL_OUT=demo-out`` must not be taken
    relative to the kernel. A relative path is looked for, in order, under:

    1. ``BEAMCRAWL_CALLER_CWD``, when set (scripts that start a kernel elsewhere);
    2. ``PWD``, the folder of the shell that ran ``jupyter`` (the kernel inherits the
       variable; changing directory inside Python does not change it);
    3. the kernel's working folder;
    4. the repository root (``make demo`` writes ``demo-out/`` there).

    The first place where it exists wins; if it exists nowhere, the first candidate is
    returned (so the error names the folder the user meant).

    Args:
        path: The folder as given (None or empty: ``BEAMCRAWL_CRAWL_OUT``, else ``demo-out``).
        env: The environment (default ``os.environ``).
    """
    env = dict(os.environ if env is None else env)
    text = path or env.get("BEAMCRAWL_CRAWL_OUT") or "demo-out"
    text = os.path.expanduser(text)
    if os.path.isabs(text):
        return os.path.normpath(text)
    bases = [env.get("BEAMCRAWL_CALLER_CWD"), env.get("PWD"), os.getcwd(), _REPO_ROOT]
    candidates = [os.path.normpath(os.path.join(b, text)) for b in bases if b and os.path.isabs(b)]
    return next((c for c in candidates if os.path.isdir(c)), candidates[0])


def node_sizes(scores: Sequence[float] | np.ndarray, smallest: float = 30.0, largest: float = 900.0) -> np.ndarray:
    """Marker areas for nodes ranked by ``scores`` (PageRank), from ``smallest`` to ``largest``.

    PageRank over a few dozen hosts is close to ``1/n`` for every one of them, so areas
    proportional to the score all look alike. The scores are spread over the full range
    instead: the square root of each score relative to the smallest and the largest (a
    square root, because the eye reads a marker's area), so the best-ranked host is
    ``largest`` and the worst ``smallest``. Equal scores give equal, middle-sized markers.
    """
    values = np.sqrt(np.clip(np.asarray(scores, dtype=float), 0.0, None))
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low <= 1e-12 * max(high, 1e-300):
        return np.full(values.shape, (smallest + largest) / 2.0)
    return smallest + (values - low) / (high - low) * (largest - smallest)
