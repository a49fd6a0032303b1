"""A capacity model for a crawl of N pages a month on Dataflow with Cloud Bigtable, from a real crawl's figures.

    .venv/bin/python bench/capacity.py OUT_DIR [--pages-per-month 1e9] [--cpu-ms 2.74]
                                               [--skip-rounds 1] [--bigtable-reads-per-node 17000]
                                               [--bigtable-writes-per-node 14000]

Reads the round reports under ``OUT_DIR/reports`` (the first ``--skip-rounds`` rounds left
out: a cold round fetches robots.txt and seeds, not the steady state) and the files the
rounds committed, and derives per fetched page:

- bytes that crossed shuffles and side inputs, and main inputs held for a side input (the
  reports' ``shuffle_bytes``, ``side_input_bytes`` and ``materialised_bytes``, from Beam's
  PCollection metrics);
- store rows read and written, from the stages' counters (select's due rows, URL seen's
  keys scanned or looked up, content seen's rows scanned and written, the URL state and
  frontier rows each fetch rewrites, two rows per new URL, host rows);
- WARC, CDXJ and Parquet bytes, from the committed files.

CPU per page is not in a report (a round's processes are the runner's); pass the figure
``bench/compare.py`` measured (``--cpu-ms``, default the fourth session's 2.74 CPU ms a page,
multi_processing x2). It then prints the model: worker vCPU-hours, shuffle GB, Bigtable
nodes for the average row rate (the published per-node SSD figures: 17,000 rows/s read or
14,000 rows/s written, 1 KB rows), and storage growth, each with its arithmetic.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Any

SECONDS_PER_MONTH = 30 * 86_400


def _reports(out: str, skip: int) -> list[dict[str, Any]]:
    paths = sorted(glob.glob(os.path.join(out, "reports", "round-*.json")))
    reports = [json.load(open(p, encoding="utf-8")) for p in paths]
    return [r for r in reports if r.get("round", 0) > skip]


def _files_bytes(out: str, kind: str, rounds: set[int], suffix: str) -> int:
    total = 0
    for n in rounds:
        for path in glob.glob(os.path.join(out, kind, f"round={n}", f"*{suffix}")):
            total += os.path.getsize(path)
    return total


def per_page(out: str, skip: int = 1) -> dict[str, float]:
    """The per-fetched-page figures of a crawl's rounds (see the module docstring)."""
    reports = _reports(out, skip)
    if not reports:
        raise SystemExit(f"capacity: no round reports after round {skip} under {out}/reports")
    m: dict[str, float] = {}
    for r in reports:
        for k, v in r.get("metrics", {}).items():
            if isinstance(v, (int, float)):
                m[k] = m.get(k, 0) + v
    pages = sum(r["responses"] for r in reports)
    rounds = {r["round"] for r in reports}
    shuffled = [r.get("shuffle_bytes") for r in reports]
    g = m.get
    new_urls = g("url_seen/new", 0)
    reads = {
        "select: due frontier rows": g("select/due_rows", 0),
        "host records and policies": 2 * g("fetch/hosts", 0),
        "URL seen: keys scanned": g("url_seen/keys_scanned", 0),
        "URL seen: keys looked up": g("url_seen/keys_looked_up", 0),
        "content seen: content rows": g("content_seen/content_rows_scanned", 0)
        + g("content_seen/content_keys_looked_up", 0),
        "content seen: simhash rows": g("content_seen/simhash_rows_scanned", 0)
        + g("content_seen/simhash_keys_looked_up", 0),
    }
    writes = {
        "URL state": g("record/urls_rows", 0),
        "frontier: fetched row deleted": g("fetch/success", 0),
        "frontier: revisit queued": g("record/urls_rows", 0),
        "new URLs: frontier + seen set": 2 * new_urls,
        "content seen: content + simhash rows": g("content_seen/rows_written", 0),
        "host records": g("record/hosts_rows", 0),
        "domain budgets": g("budgets/linker_counts_updated", 0) + g("budgets/domains", 0),
    }
    fig = {
        "pages": pages,
        "rounds": len(reports),
        "shuffle_bytes": (sum(s for s in shuffled if s is not None) / pages)
        if pages and all(s is not None for s in shuffled)
        else float("nan"),
        "side_input_bytes": sum(r.get("side_input_bytes") or 0 for r in reports) / max(pages, 1),
        "materialised_bytes": sum(r.get("materialised_bytes") or 0 for r in reports) / max(pages, 1),
        "new_urls": new_urls / max(pages, 1),
        "reads": sum(reads.values()) / max(pages, 1),
        "writes": sum(writes.values()) / max(pages, 1),
        "warc_bytes": _files_bytes(out, "warc", rounds, ".warc.gz") / max(pages, 1),
        "cdxj_bytes": _files_bytes(out, "warc", rounds, ".cdxj") / max(pages, 1),
        "parquet_bytes": sum(_files_bytes(out, k, rounds, ".parquet") for k in ("pages", "links")) / max(pages, 1),
    }
    fig.update({f"read: {k}": v / max(pages, 1) for k, v in reads.items()})
    fig.update({f"write: {k}": v / max(pages, 1) for k, v in writes.items()})
    return fig


def model(
    fig: dict[str, float], pages_month: float, cpu_ms: float, reads_node: float, writes_node: float, row_bytes: float
) -> str:
    """The model's lines, arithmetic shown."""
    rate = pages_month / SECONDS_PER_MONTH
    vcpu_h = pages_month * cpu_ms / 1000 / 3600
    moved = fig["shuffle_bytes"] + fig["side_input_bytes"] + fig.get("materialised_bytes", 0.0)
    shuffle_gb = pages_month * moved / 1e9
    reads_s, writes_s = rate * fig["reads"], rate * fig["writes"]
    nodes = reads_s / reads_node + writes_s / writes_node
    warc_tb = pages_month * (fig["warc_bytes"] + fig["cdxj_bytes"]) / 1e12
    parquet_tb = pages_month * fig["parquet_bytes"] / 1e12
    rows_month = pages_month * fig["new_urls"] * 2  # a seen-set row and a frontier row per new URL
    table_tb = rows_month * row_bytes / 1e12
    return "\n".join([
        f"pages a month: {pages_month:,.0f} = {rate:,.0f} pages/s on average (30-day month)",
        f"worker vCPU-hours: {pages_month:,.0f} x {cpu_ms} ms / 3,600,000 = {vcpu_h:,.0f} vCPU-h "
        f"(= {vcpu_h / 720:,.0f} vCPUs busy all month)",
        f"shuffle: {pages_month:,.0f} x ({fig['shuffle_bytes']:,.0f} + {fig['side_input_bytes']:,.0f} side-input + "
        f"{fig.get('materialised_bytes', 0.0):,.0f} held for a side input) B = {shuffle_gb:,.0f} GB",
        f"Bigtable: {rate:,.0f} pages/s x {fig['reads']:.1f} rows read = {reads_s:,.0f} rows/s; "
        f"x {fig['writes']:.1f} rows written = {writes_s:,.0f} rows/s",
        f"  nodes (SSD, 1 KB rows): {reads_s:,.0f} / {reads_node:,.0f} + {writes_s:,.0f} / {writes_node:,.0f} = {nodes:.1f} "
        f"(rounds are bursts: size for the peak, e.g. x {1 / 0.7:.1f} for 70% CPU at a steady rate)",
        f"storage growth: WARC+CDXJ {pages_month:,.0f} x {fig['warc_bytes'] + fig['cdxj_bytes']:,.0f} B = {warc_tb:,.1f} TB; "
        f"Parquet {parquet_tb:,.2f} TB; Bigtable {pages_month:,.0f} x {fig['new_urls']:.2f} new URLs x 2 rows x {row_bytes:.0f} B "
        f"= {table_tb:,.2f} TB a month (the frontier row is replaced, not added, on each revisit)",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="a crawl's output folder (--out)")
    parser.add_argument("--pages-per-month", type=float, default=1e9)
    parser.add_argument("--cpu-ms", type=float, default=2.74, help="CPU ms a page (bench/compare.py)")
    parser.add_argument("--skip-rounds", type=int, default=1, help="leave out the first N rounds (cold start)")
    parser.add_argument("--bigtable-reads-per-node", type=float, default=17_000)
    parser.add_argument("--bigtable-writes-per-node", type=float, default=14_000)
    parser.add_argument("--row-bytes", type=float, default=300, help="bytes of a seen-set plus frontier row, stored")
    args = parser.parse_args(argv)
    fig = per_page(args.out, args.skip_rounds)
    print(f"{fig['pages']:,.0f} pages over {fig['rounds']} rounds of {args.out}; per fetched page:")
    for key, value in fig.items():
        if key not in ("pages", "rounds"):
            print(f"  {key:<44} {value:12,.2f}")
    print()
    print(
        model(
            fig,
            args.pages_per_month,
            args.cpu_ms,
            args.bigtable_reads_per_node,
            args.bigtable_writes_per_node,
            args.row_bytes,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
