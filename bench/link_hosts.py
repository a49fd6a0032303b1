"""What a link's host costs a page: found once at parse (``Link.host``) or by each stage.

Three stages after content seen need each link's politeness slot (``urlnorm.host_of``): URL
seen's candidates (``page_candidates``), the linking domains (``linked_domains``) and the
link-edge Parquet columns (``link_edge_columns``). Each found it again from the URL until
parse set it on the link. For ``--pages`` simweb pages (rendered from the model, no server)
and the real HTML documents of ``--html-glob``, parsed by ``parse_fetch``, this times the
three with the hosts parse found, and with them blanked (each stage then calls
``host_of``), and what finding them at parse costs (``link_host`` over the page's links).
CPU µs a page, the best of ``--repeat`` runs, the forms taking turns, the caches of hosts
and domains warm (a first pass, untimed, checks the outputs)::

    .venv/bin/python bench/link_hosts.py [--hosts 200] [--pages 2000] [--repeat 5]

The outputs of the three are checked equal for both forms on every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from per_page_costs import real_pages, simweb_pages  # noqa: E402

from beamcrawl.core.urls.urlnorm import fingerprint, host_of  # noqa: E402
from beamcrawl.schemas.records import FetchResult, FrontierEntry, ParsedPage  # noqa: E402
from beamcrawl.transforms.budgets import linked_domains  # noqa: E402
from beamcrawl.transforms.parquet_io import link_edge_columns  # noqa: E402
from beamcrawl.transforms.parse import link_host, parse_fetch  # noqa: E402
from beamcrawl.transforms.url_seen import page_candidates  # noqa: E402


def parsed(bodies: list[bytes]) -> list[ParsedPage]:
    """Each body parsed as a 200 text/html page of its own URL on one of a few hosts."""
    pages = []
    for i, body in enumerate(bodies):
        url = f"http://h{i % 50}.bench.test:8000/p/{i}.html"
        entry = FrontierEntry(url=url, fp=fingerprint(url), host=host_of(url), due_ms=0)
        fetch = FetchResult(
            entry=entry, outcome="fetched", url=url, status=200,
            response_headers=[("Content-Type", "text/html; charset=utf-8")], body=body, raw_body=body,
        )  # fmt: skip
        pages.append(parse_fetch(fetch, "beamcrawl"))
    return pages


def blanked(pages: list[ParsedPage]) -> list[ParsedPage]:
    return [dataclasses.replace(p, links=[dataclasses.replace(k, host="") for k in p.links]) for p in pages]


def stages(page: ParsedPage) -> tuple[Any, ...]:
    return page_candidates(page), linked_domains(page), link_edge_columns(page)


def _cpu(work: Callable[[], Any]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def measure(pages: list[ParsedPage], repeat: int) -> dict[str, float]:
    blank = blanked(pages)
    urls = [[k.url for k in p.links] for p in pages]
    # Checked once, untimed; this pass also fills the hosts' and domains' caches for both.
    if [stages(p) for p in pages] != [stages(p) for p in blank]:
        raise SystemExit("the stages gave other outputs with the hosts carried: the bench is wrong")
    runs: dict[str, Callable[[], Any]] = {
        "carried": lambda: [stages(p) for p in pages],
        "each stage": lambda: [stages(p) for p in blank],
        "at parse": lambda: [[link_host(u) for u in page] for page in urls],
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, work in runs.items():
            gc.collect()  # each run starts from the same heap; its outputs are dropped after
            best[name] = min(best[name], _cpu(work))
    per = 1e6 / len(pages)
    out = {name: t * per for name, t in best.items()}
    out["links"] = sum(map(len, urls)) / len(pages)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--html-glob", default="/usr/share/doc/*/*.html")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    corpora = {"simweb": simweb_pages(args.hosts, args.pages), "real HTML": real_pages(args.html_glob)}
    print(f"best of {args.repeat}; CPU µs a page")
    print(
        "| corpus | pages | links a page | three stages, host carried | each stage finds it | found at parse | saved |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, bodies in corpora.items():
        if not bodies:
            continue
        f = measure(parsed(bodies), args.repeat)
        saved = f["each stage"] - f["carried"] - f["at parse"]
        print(
            f"| {name} | {len(bodies):,} | {f['links']:.1f} | {f['carried']:.1f} | {f['each stage']:.1f} "
            f"| {f['at parse']:.1f} | {saved:.1f} |"
        )


if __name__ == "__main__":
    main()
