"""``beamcrawl demo``: start simweb on loopback and crawl it for a few rounds.

It runs the real crawl (the same pipeline, store and outputs as ``beamcrawl crawl``) on the
embedded store, then audits simweb's request log from the server's side and says what it
did and where the outputs are.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Sequence

from beamcrawl.cli.args import OneLineArgumentParser


# Written into a demo's --out first thing: a later demo replaces only a folder holding it.
MARKER = ".beamcrawl-demo"


class DemoError(Exception):
    """The demo cannot start; the message is one line."""


def prepare_out(out: str) -> None:
    """Empties ``out`` for a new demo, creating it and its marker.

    Only a folder a previous demo wrote (it holds :data:`MARKER`) or an empty one is
    replaced: ``--out .`` or ``--out ~`` must never cost a user their files.

    Raises:
        DemoError: ``out`` is a file, or a folder with other contents.
    """
    if os.path.lexists(out) and not os.path.isdir(out):
        raise DemoError(f"--out {out} is a file, not a folder")
    if os.path.isdir(out) and os.listdir(out):
        if not os.path.isfile(os.path.join(out, MARKER)):
            raise DemoError(
                f"--out {out} is not empty and not a previous demo's output (no {MARKER} file); "
                "give a new or empty folder"
            )
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, MARKER), "w", encoding="utf-8") as fh:
        fh.write("beamcrawl demo output: `beamcrawl demo` replaces this folder when run again\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog="beamcrawl demo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="demo-out",
        help="Output folder (default ./demo-out); a previous demo's output there is replaced, any other "
        "non-empty folder refused.",
    )  # fmt: skip
    parser.add_argument("--hosts", type=int, default=200, help="Virtual hosts in simweb (default 200).")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds to crawl (default 3).")
    parser.add_argument("--round-window", type=float, default=15.0, help="Seconds of fetching per round.")
    parser.add_argument("--min-delay", type=float, default=0.5, help="Politeness floor per host, seconds.")
    parser.add_argument(
        "--change-scale", type=float, default=10.0,
        help="simweb's pages change at rates in units of this many seconds (0: never); sitemaps and feeds appear.",
    )  # fmt: skip
    parser.add_argument(
        "--min-revisit-interval", type=float, default=20.0,
        help="Seconds before a fetched page may be fetched again (short, so a demo sees revisits).",
    )  # fmt: skip
    args, beam_args = parser.parse_known_args(list(argv or []))

    out = os.path.abspath(args.out)
    try:
        prepare_out(out)
    except (DemoError, OSError) as exc:
        print(f"beamcrawl demo: error: {exc}", file=sys.stderr)
        return 2

    from beamcrawl.pipelines.sdk_worker import leave_out_for_runner

    leave_out_for_runner(beam_args)  # as `beamcrawl crawl` does, before Beam is imported
    from beamcrawl.core.runtime.config import CrawlConfig
    from beamcrawl.pipelines.runners import with_local_runner
    from beamcrawl.pipelines.crawl_errors import RoundInterrupted
    from beamcrawl.pipelines.crawl import crawl
    from beamcrawl.simweb.audit import audit
    from beamcrawl.simweb.testing import running_simweb

    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    work = tempfile.mkdtemp(prefix="beamcrawl-demo-")
    t0 = time.time()
    with running_simweb(work, hosts=args.hosts, seed=7, change_scale=args.change_scale) as web:
        seeds = [web.base_url(h) for h in web.hosts[::4]]
        print(
            f"simweb: {len(web.hosts)} hosts on 127.0.0.1:{web.port}; {len(seeds)} seeds; crawling {args.rounds} rounds into {out}"
        )
        cfg = CrawlConfig(
            out=out,
            store=f"sqlite:///{out}/store.sqlite",
            min_delay=args.min_delay,
            round_window=args.round_window,
            allow_private_networks=True,
            resolve=(("*", "127.0.0.1"),),
            # The demo web lives for a minute: revisit on its time scale (a crawl of the
            # real web keeps the defaults, an hour to 60 days).
            min_revisit_interval=args.min_revisit_interval,
            max_revisit_interval=max(args.min_revisit_interval, 600.0),
            prior_change_interval=max(args.min_revisit_interval, 8 * args.change_scale or 60.0),
            revisit_horizon=max(args.min_revisit_interval, 60.0),
        )
        try:
            reports = crawl(cfg, args.rounds, seeds, with_local_runner(beam_args))
        except RoundInterrupted as exc:
            print(f"beamcrawl demo: {exc}", file=sys.stderr)
            shutil.rmtree(work, ignore_errors=True)
            return 130
        requests = web.requests()
        truth = web.truth()
    elapsed = time.time() - t0
    report = audit(requests, truth, agent_token=cfg.robots_token, min_delay=cfg.min_delay)
    pages = sum(r["responses"] for r in reports)
    fetch_seconds = sum(r["pipeline_seconds"] for r in reports)
    hosts = max((r["hosts_planned"] for r in reports), default=0)
    print()
    print(
        f"demo: {pages} responses in {len(reports)} rounds, {pages / max(fetch_seconds, 1e-9):.1f} pages/s "
        f"over the rounds' pipeline time ({fetch_seconds:.1f}s), up to {hosts} hosts in rotation; {elapsed:.1f}s in all"
    )
    print(f"politeness audit (server side): {report.summary()}")
    revisits = {k: sum(r.get(k, 0) for r in reports) for k in ("changed", "unchanged", "not_modified", "sitemaps_read")}
    print(
        f"revisits: {revisits['changed']} found changed, {revisits['unchanged']} unchanged "
        f"({revisits['not_modified']} answered 304, no body); {revisits['sitemaps_read']} sitemaps and feeds read"
    )
    print(f"outputs: {out}/warc  {out}/pages  {out}/links  {out}/reports  (store: {out}/store.sqlite)")
    print(
        f'try: .venv/bin/python -c "import duckdb; print(duckdb.sql(\\"select status, count(*) from '
        f"'{out}/pages/*/*.parquet' group by 1\\\"))\""
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0 if report.violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
