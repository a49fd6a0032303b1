"""Run beamcrawl rounds in this process, configured the way the benchmark's rules say.

The same as ``beamcrawl crawl`` on the local runner, with settings the command line does not
expose: a *fixed* per-host delay (``response_time_factor = 0``, so a busy event loop's slow
responses do not stretch the delay) and a Crawl-delay cap above the delay (so robots.txt
``Crawl-delay: 1`` and ``2`` are honoured; the CLI's ``--max-delay`` is both the ceiling and
that cap). The benchmark measures this whole process from the outside, Beam start-up included.

    python bench/beamcrawl_round.py --out DIR [--seeds FILE] [--rounds 1] [--window 60] \\
        [--delay 0.5] [--hosts-in-flight 3000] [--profile FILE.html] -- [BEAM OPTIONS]

``--profile`` wraps the crawl in pyinstrument (``pip install pyinstrument`` into the venv)
and writes an HTML and a text report; worker processes of ``multi_processing`` are not seen
by it (use ``py-spy record --subprocesses`` for those).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from beamcrawl.pipelines.sdk_worker import leave_out_for_runner

# As `beamcrawl crawl` does before it imports Beam: these rounds run on the local runner, whose
# launching process goes without the client libraries no stage uses.
leave_out_for_runner([])

from beamcrawl import DEFAULT_USER_AGENT  # noqa: E402
from beamcrawl.core.runtime.config import CrawlConfig  # noqa: E402
from beamcrawl.pipelines.runners import with_local_runner  # noqa: E402
from beamcrawl.pipelines.crawl import crawl  # noqa: E402
from beamcrawl.pipelines.seeding import read_seeds  # noqa: E402

__all__ = ["bench_config", "main"]


def bench_config(
    out: str,
    *,
    delay: float,
    window: float,
    crawl_delay_cap: float,
    hosts_in_flight: int,
    user_agent: str = DEFAULT_USER_AGENT,
    address: str = "127.0.0.1",
) -> CrawlConfig:
    """The benchmark's crawl settings.

    Args:
        out: Output folder (the embedded store lives in it).
        delay: The fixed per-host delay.
        window: The round window in seconds.
        crawl_delay_cap: Largest robots.txt Crawl-delay honoured (also the delay ceiling).
        hosts_in_flight: Hosts one fetch loop crawls at once.
        user_agent: User-Agent header.
        address: Address every host name resolves to.
    """
    return CrawlConfig(
        out=os.path.abspath(out),
        store=f"sqlite:///{os.path.abspath(out)}/store.sqlite",
        user_agent=user_agent,
        min_delay=delay,
        max_delay=max(delay, crawl_delay_cap),
        response_time_factor=0.0,
        round_window=window,
        allow_private_networks=True,
        resolve=(("*", address),),
        max_hosts_in_flight=hosts_in_flight,
    )


def build_parser() -> argparse.ArgumentParser:
    """Command-line parser; anything after ``--`` (or unknown) goes to Beam."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output folder (holds the store)")
    p.add_argument("--seeds", default=None, help="file of seed URLs (none: crawl the frontier)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--window", type=float, default=60.0, help="round window in seconds")
    p.add_argument("--delay", type=float, default=0.5, help="fixed per-host delay in seconds")
    p.add_argument("--crawl-delay-cap", type=float, default=2.0, help="largest Crawl-delay honoured")
    p.add_argument("--hosts-in-flight", type=int, default=1000, help="hosts per fetch loop")
    p.add_argument("--user-agent", default=DEFAULT_USER_AGENT)
    p.add_argument("--resolve-all", default="127.0.0.1", help="address every host resolves to")
    p.add_argument("--report-out", default=None, help="write the rounds' reports here as JSON")
    p.add_argument("--profile", default=None, help="pyinstrument report (.html; .txt beside it)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the rounds; print one line per round."""
    args, beam_args = build_parser().parse_known_args(argv)
    beam_args = [a for a in beam_args if a != "--"]
    cfg = bench_config(
        args.out,
        delay=args.delay,
        window=args.window,
        crawl_delay_cap=args.crawl_delay_cap,
        hosts_in_flight=args.hosts_in_flight,
        user_agent=args.user_agent,
        address=args.resolve_all,
    )
    seeds = read_seeds(args.seeds) if args.seeds else []
    runner_args = with_local_runner(beam_args)
    profiler: Any = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.005, async_mode="disabled")
        profiler.start()
    try:
        reports = crawl(cfg, args.rounds, seeds, runner_args, out=sys.stderr)
    finally:
        if profiler is not None:
            profiler.stop()
            with open(args.profile, "w", encoding="utf-8") as fh:
                fh.write(profiler.output_html())
            with open(os.path.splitext(args.profile)[0] + ".txt", "w", encoding="utf-8") as fh:
                fh.write(profiler.output_text(unicode=False, color=False, show_all=False))
    for r in reports:
        print(
            json.dumps(
                {
                    k: r[k]
                    for k in (
                        "round",
                        "responses",
                        "seconds",
                        "pipeline_seconds",
                        "urls_due",
                        "urls_assigned",
                        "deferred",
                        "frontier_size",
                    )
                }
            )
        )
    if args.report_out:
        with open(args.report_out, "w", encoding="utf-8") as fh:
            json.dump(reports, fh, indent=2, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
