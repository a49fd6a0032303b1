"""What live progress costs a round: pages/s with the metrics polling on and off, same web.

Starts simweb on loopback, runs two warm-up rounds, then measured rounds
of one crawl alternating ``BEAMCRAWL_PROGRESS=off`` (no polling, Beam's plain FnApiRunner) and
``plain`` (polling once a second, a line every 10 s), and prints each round's pages per
second over its pipeline time and the mean of each setting.

    python bench/progress_overhead.py [--hosts 300] [--window 15] [--pairs 3] [-- BEAM OPTIONS]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--pairs", type=int, default=3)
    args, beam_args = parser.parse_known_args()

    from beamcrawl.core.runtime.config import CrawlConfig
    from beamcrawl.pipelines.runners import with_local_runner
    from beamcrawl.pipelines.crawl import crawl
    from beamcrawl.simweb.testing import running_simweb

    work = tempfile.mkdtemp(prefix="beamcrawl-progress-bench-")
    rates: dict[str, list[float]] = {"off": [], "plain": []}
    devnull = open(os.devnull, "w")
    with running_simweb(work, hosts=args.hosts, seed=3, pages_per_host=400, latency_scale=0) as web:
        cfg = CrawlConfig(
            out=os.path.join(work, "out"), store=f"sqlite:///{work}/out/store.sqlite",
            min_delay=args.delay, max_delay=args.delay, round_window=args.window,
            allow_private_networks=True, resolve=(("*", "127.0.0.1"),),
        )  # fmt: skip
        runner_args = with_local_runner(beam_args)
        os.environ["BEAMCRAWL_PROGRESS"] = "off"
        # Two warm-up rounds: robots.txt and roots, then the first full one (the measured
        # rounds that follow all fetch from a frontier far larger than a window takes).
        crawl(cfg, 2, [web.base_url(h) for h in web.hosts], runner_args, out=devnull)
        for i in range(args.pairs * 2):
            mode = ("off", "plain")[i % 2] if (i // 2) % 2 == 0 else ("plain", "off")[i % 2]  # ABBA
            os.environ["BEAMCRAWL_PROGRESS"] = mode
            report = crawl(cfg, 1, [], runner_args, out=devnull)[0]
            rates[mode].append(report["pages_per_second"])
            print(
                f"round {report['round']} progress={mode}: {report['responses']} responses, "
                f"{report['pages_per_second']:.1f} pages/s over {report['pipeline_seconds']:.1f}s",
                flush=True,
            )
    for mode, values in rates.items():
        print(f"progress={mode}: mean {statistics.mean(values):.1f} pages/s over {len(values)} rounds ({values})")
    off, on = statistics.mean(rates["off"]), statistics.mean(rates["plain"])
    print(f"polling on vs off: {100 * (on - off) / off:+.1f}% pages/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
