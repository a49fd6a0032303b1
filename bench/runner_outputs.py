"""The same crawl on the in-process runner and on Flink: files written and bytes shuffled a round.

    PYTHONPATH=. .venv/bin/python bench/runner_outputs.py [--runners fnapi,flink,flink2]
        [--hosts 40] [--pages-per-host 30] [--rounds 2] [--window 60] [--seed 5]

Each runner crawls a fresh simweb of the same seed (its own embedded store and output
folder) for ``--rounds`` rounds through the real CLI; a window far longer than the web's work
(``--window``) lets every runner fetch every due URL, so the rounds fetch the same pages.
``flink`` is Flink's local mini-cluster at its default parallelism, ``flink2`` the same with
``--parallelism 2`` (``make flink`` builds the job server first). For each round it prints the
responses, the files committed by kind, and the shuffle figures of the round report
(``pipelines/job_metrics.py``), in all and per response. Bytes a response and file counts do
not depend on the machine's load; the seconds do.

Not collected by pytest; run it by hand and keep the printed table with the commit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from beamcrawl.simweb.testing import running_simweb

RUNNERS = {
    "fnapi": ["--runner", "FnApiRunner"],
    "flink": ["--runner", "FlinkRunner", "--flink_master=[local]", "--environment_type=LOOPBACK"],
    "flink2": [
        "--runner",
        "FlinkRunner",
        "--flink_master=[local]",
        "--environment_type=LOOPBACK",
        "--parallelism",
        "2",
    ],
}


def crawl(name: str, work: Path, args: argparse.Namespace) -> tuple[float, list[dict]]:
    out = work / "out"
    with running_simweb(str(work), hosts=args.hosts, seed=args.seed, pages_per_host=args.pages_per_host) as web:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(seeds), "--out", str(out),
            "--store", f"sqlite:///{out}/store.sqlite", "--rounds", str(args.rounds), "--resolve", "*=127.0.0.1",
            "--allow-private-networks", "--min-delay", "0.05", "--max-delay", "2",
            "--round-window", str(args.window), *RUNNERS[name],
        ]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name}: the crawl failed:\n{proc.stderr[-3000:]}")
    reports = [json.loads(p.read_text()) for p in sorted((out / "reports").glob("round-*.json"))]
    return seconds, reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", default="fnapi,flink,flink2")
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--pages-per-host", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    print("runner  round  responses  warc cdxj pages links  shuffle B  B/resp  side B  materialised B  seconds")
    with tempfile.TemporaryDirectory(prefix="runner-outputs-") as tmp:
        for name in args.runners.split(","):
            work = Path(tmp) / name
            work.mkdir()
            seconds, reports = crawl(name, work, args)
            for r in reports:
                files = {kind: len(r["files"].get(kind, [])) for kind in ("warc", "cdxj", "pages", "links")}
                print(
                    f"{name:7s} {r['round']:5d} {r['responses']:10d}  {files['warc']:4d} {files['cdxj']:4d} "
                    f"{files['pages']:5d} {files['links']:5d}  {r['shuffle_bytes']!s:>9}  "
                    f"{r['shuffle_bytes_per_page']!s:>6}  {r['side_input_bytes']!s:>6}  "
                    f"{r['materialised_bytes']!s:>14}  {seconds:7.1f}"
                )


if __name__ == "__main__":
    main()
