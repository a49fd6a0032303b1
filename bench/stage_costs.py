"""CPU cost per page of each stage of a round, outside Beam, on simweb's pages.

Builds fetch results straight from simweb's model (no server, no network), then times
beamcrawl's own pure stage functions over them, one stage at a time, with the process CPU
clock: parse (``parse_fetch``), WARC (``archive_fetch``, and the same records at lower gzip
levels), the WARC file's CDXJ index lines, page events, link-edge columns, the pages/ and
links/ Parquet parts made of them (buffered, converted to Arrow, sorted, written as the publish
DoFn does), URL candidates, the seen-set and frontier writes of the URLs they discover
(``queue_new_urls`` into a fresh embedded store), Beam's pickling of a fetch result, the
pages pickled into content seen's batch files and read back, the content-seen rows of new
originals (their content row and 20 simhash-table rows), and the URL-state cells of each
fetch (after its revisit is scheduled). The sum says what a page costs beyond fetching it;
compare with the round's CPU per page in the comparison table.

    python bench/stage_costs.py [--pages 3000] [--hosts 300] [--default-gc]

The round's workers raise the garbage collector's thresholds (``core/runtime/gctune.py``); so does
this script, unless ``--default-gc``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from typing import Any

from beamcrawl import DEFAULT_USER_AGENT
from beamcrawl.core.archive import cdxj
from beamcrawl.core.archive.warc_records import GZIP_LEVEL
from beamcrawl.core.runtime import gctune
from beamcrawl.core.policy.change_rate import SchedulePolicy
from beamcrawl.schemas.arrow import LINKS_SCHEMA, PAGES_SCHEMA
from beamcrawl.schemas.records import Candidate, FetchResult, FrontierEntry, Packed, evolve
from beamcrawl.simweb.site import SimWeb
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.content_seen import (
    WRITE_BATCH,
    NewContent,
    probe_page,
    settle,
)
from beamcrawl.state.content_rows import (
    CONTENT_TABLE,
    SIMHASH_TABLE,
    sorted_cells,
    sorted_run,
)
from beamcrawl.transforms.freshness import schedule_page
from beamcrawl.transforms.parquet_io import ColumnBuffer, link_edge_parts, write_table
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.record import url_state_cells
from beamcrawl.state.frontier import queue_new_urls
from beamcrawl.transforms.url_seen import page_candidates
from beamcrawl.transforms.warc_io import archive_fetch, page_event

__all__ = ["main", "sample_results"]

PORT = 8000


def sample_results(hosts: int, pages: int, seed: int = 3) -> list[FetchResult]:
    """``pages`` fetch results of simweb pages, spread over ``hosts`` hosts (200s only)."""
    web = SimWeb(hosts, seed=seed, pages_per_host=1_000_000, port=PORT, latency_scale=0)
    out: list[FetchResult] = []
    j = 1
    while len(out) < pages:
        for hi in range(hosts):
            path = web.page_path(hi, j)
            if not path.endswith(".html"):
                continue
            host = f"{web.names[hi]}:{PORT}"
            url = f"http://{host}{path}"
            sim = web.respond(web.names[hi], path)
            headers = [("Content-Type", sim.content_type), ("Content-Length", str(len(sim.body))), ("Server", "simweb")]
            entry = FrontierEntry(url=url, fp=zlib.crc32(url.encode()) << 20, host=host, due_ms=0, depth=2)
            out.append(
                FetchResult(
                    entry=entry,
                    outcome="fetched",
                    url=url,
                    final_url=url,
                    status=sim.status,
                    fetched_at=time.time(),
                    elapsed=0.002,
                    ip="127.0.0.1",
                    reason="OK",
                    request_headers=[("User-Agent", DEFAULT_USER_AGENT)],
                    response_headers=headers,
                    raw_body=sim.body,
                    body=sim.body,
                )
            )
            if len(out) >= pages:
                break
        j += 1
    return out


def _timed(items: list[Any], fn: Callable[[Any], Any], repeat: int = 3) -> tuple[float, list[Any]]:
    """Best of ``repeat`` CPU times of ``fn`` over every item (others' load adds noise)."""
    best = float("inf")
    out: list[Any] = []
    for _ in range(repeat):
        t0 = time.process_time()
        out = [fn(x) for x in items]
        best = min(best, time.process_time() - t0)
    return best, out


def _parquet_part(
    items: list[Any], schema: Any, sort_by: tuple[str, ...], add: Callable[[ColumnBuffer, Any], Any], path: str
) -> tuple[float, int]:
    """Best of three CPU times of one Parquet part made of ``items`` as the publish DoFn makes
    it (each item added to a :class:`ColumnBuffer`, then one sorted zstd file), and its size."""
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        buffer = ColumnBuffer(schema)
        for item in items:
            if item is not None:
                add(buffer, item)
        write_table(buffer.take(), sort_by, path)
        best = min(best, time.process_time() - t0)
    return best, os.path.getsize(path)


def main(argv: list[str] | None = None) -> int:
    """Time each stage and print a Markdown table of µs per page."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, default=3000)
    p.add_argument("--hosts", type=int, default=300)
    p.add_argument(
        "--default-gc",
        action="store_true",
        help="keep CPython's default GC thresholds (the round's workers raise them: core/runtime/gctune.py)",
    )
    args = p.parse_args(argv)
    if not args.default_gc:
        gctune.tune()
    results = sample_results(args.hosts, args.pages)
    n = len(results)
    rows: list[tuple[str, float, str]] = []

    t, pages = _timed(results, lambda r: parse_fetch(r, "beamcrawl"))
    links = sum(len(pg.links) for pg in pages)
    rows.append(("parse_fetch (selectolax, normalise + fingerprint every link)", t, f"{links / n:.1f} links/page"))
    t, archived = _timed(pages, archive_fetch)
    size0 = sum(len(a.data) for a in archived)
    rows.append(
        (f"archive_fetch: WARC response+request, gzip level {GZIP_LEVEL} (the default)", t, f"{size0 / n:,.0f} B/page")
    )
    for level in (9, 1):
        t, arch = _timed(pages, lambda pg: archive_fetch(pg, level=level))
        size = sum(len(a.data) for a in arch)
        rows.append(
            (
                f"  same records, gzip level {level}",
                t,
                f"{size / n:,.0f} B/page ({100 * size / size0:.0f}% of level {GZIP_LEVEL})",
            )
        )
    t, _ = _timed(
        archived, lambda a: cdxj.entry_for_capture(a.capture, 1 << 20, a.response_length, "warc/x.warc.gz").line()
    )
    rows.append(("CDXJ index line of the capture (entry_for_capture + line)", t, ""))
    t, events = _timed(pages, lambda pg: page_event(pg, "warc/x@0"))
    rows.append(("page_event (pages/ row)", t, ""))
    t, edges = _timed(pages, link_edge_parts)
    rows.append(
        (
            "link_edge_parts (links/ rows: the page's values once, the links' columns)",
            t,
            f"{sum(len(e[1]['dst']) for e in edges if e) / n:.1f} rows/page",
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        t, size = _parquet_part(events, PAGES_SCHEMA, ("url",), ColumnBuffer.add_row, f"{tmp}/pages.parquet")
        rows.append(("pages/ Parquet part: rows by column, Arrow, sorted, zstd file", t, f"{size / n:,.0f} B/page"))
        t, size = _parquet_part(
            edges, LINKS_SCHEMA, ("src", "dst"), lambda b, e: b.add_columns(e[1], e[0]), f"{tmp}/links.parquet"
        )
        rows.append(("links/ Parquet part: the same, of the link-edge columns", t, f"{size / n:,.0f} B/page"))
    t, cands = _timed(pages, page_candidates)
    rows.append(("page_candidates", t, f"{sum(len(c) for c in cands) / n:.1f} candidates/page"))
    t, _ = _timed(results, lambda r: pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL))
    rows.append(("pickle one FetchResult (Beam's fallback coder, one way)", t, ""))
    # The pages as content seen's batch files hold them (bodies set aside, a batch of 1,000
    # pickled as one Packed list) and as "Mark copies" reads them back.
    light = [evolve(pg, fetch=evolve(pg.fetch, body=b"", raw_body=b"")) for pg in pages]
    batches = [Packed(light[i : i + 1000]) for i in range(0, n, 1000)]
    t, blobs = _timed(batches, lambda b: pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL))
    rows.append(("pickle the pages into batch files (bodies set aside)", t, f"{sum(map(len, blobs)) / n:,.0f} B/page"))
    t, _ = _timed(blobs, pickle.loads)
    rows.append(("pickle: the batch files' pages read back", t, ""))

    new: dict[int, Candidate] = {}
    for cs in cands:
        for c in cs:
            new.setdefault(c.fp, c)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/store.sqlite")
        ordered = sorted(new.values(), key=lambda c: c.fp)
        t0 = time.process_time()
        w0 = time.perf_counter()
        queue_new_urls(store, ordered, int(time.time() * 1000))
        t = time.process_time() - t0
        wall = time.perf_counter() - w0
        store.close()
    per_new = 1e6 * t / max(1, len(ordered))
    rows.append(
        (
            "queue_new_urls: frontier + seen-set rows of the new URLs",
            t,
            f"{len(ordered) / n:.1f} new URLs/page, {per_new:.0f} µs CPU each ({wall:.2f} s wall)",
        )
    )

    # Content seen: each page taken as a new original (the common case), its content row and
    # its simhash's row in each of the 20 permuted tables written, as _SettleFn writes them
    # (each table's rows a sorted run).
    probes = [p for p in (probe_page(pg) for pg in pages) if p is not None]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/store.sqlite")
        t0 = time.process_time()
        content: list[Any] = []
        hashes: list[Any] = []
        for probe in probes:
            _, c, h = settle(NewContent(probe.checksum, probe), None, 1)
            content.extend(c)
            hashes.extend(h)
            if len(content) + len(hashes) >= WRITE_BATCH:
                store.write_cells(SIMHASH_TABLE, sorted_cells(hashes))
                store.mutate(CONTENT_TABLE, sorted_run(content))
                content, hashes = [], []
        store.write_cells(SIMHASH_TABLE, sorted_cells(hashes))
        store.mutate(CONTENT_TABLE, sorted_run(content))
        t = time.process_time() - t0
        store.close()
    rows.append(
        ("content seen: content + 20 simhash-table rows per new original", t, f"{len(probes) / n:.2f} originals/page")
    )

    policy = SchedulePolicy()
    scheduled = [schedule_page(pg, policy) for pg in pages]
    t, _ = _timed(scheduled, url_state_cells)
    rows.append(("url_state_cells (seen-set cells of a fetch, its revisit state included)", t, ""))

    print(f"{n} pages of {args.hosts} simweb hosts; CPU µs per page (process time)\n")
    print("| stage | µs / page | note |\n|---|---:|---|")
    total = 0.0
    for name, t, note in rows:
        if not name.startswith("  ") and not name.startswith("pickle"):
            total += t
        print(f"| {name} | {1e6 * t / n:,.0f} | {note} |")
    print(f"| **sum of the stages (the default level, no pickling)** | **{1e6 * total / n:,.0f}** | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
