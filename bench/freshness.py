"""Freshness of the adaptive revisit policy against the uniform baseline, side by side.

Both crawls run at once on one simweb whose pages change at known rates, each with its own
store and output, told apart by their User-Agent, with the same seeds (every page robots.txt
allows, except the sitemap-only ones) and the same fetch budget (hosts, delay, round window).
Freshness is the share of time the copy a crawler holds matches the live page, computed
exactly from the versions simweb logged and the change times it drew
(``beamcrawl/simweb/freshness_audit.py``), in the steady state: from when both crawls hold every
seeded page. ``tests/pipelines/test_freshness_e2e.py`` runs it with the defaults below and
asserts on the result.

    .venv/bin/python bench/freshness.py                      # the test's web (about 5 min)
    .venv/bin/python bench/freshness.py --mix static=0.4,slow=0.25,medium=0.2,fast=0.15
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from beamcrawl.simweb.freshness_audit import FreshnessReport, measure, truth_pages
from beamcrawl.simweb.testing import running_simweb

POLICIES = ("adaptive", "uniform")
# The test's web: half static pages, a quarter that change faster than a polite budget can
# follow, a fifth every ~20 s, a few slow ones; about 12 slots a round per host for about
# 100 pages, so the budget is tight (where a revisit policy matters).
DEFAULTS: dict[str, Any] = {
    "hosts": 6,
    "pages": 100,
    "scale": 2.5,  # fast 2.5 s, medium 20 s, slow 160 s
    "mix": "static=0.5,slow=0.05,medium=0.2,fast=0.25",
    "delay": 0.5,
    "window": 6.0,
    "rounds": 40,
    # The crawls' time constants, scaled to the web's: revisits from 1 s to 10 min, a prior of
    # one change per 30 s, a horizon of 10 s (every page is seeded, so what discovery finds is
    # junk: a short horizon puts revisits before it).
    "prior": 30.0,
    "horizon": 10.0,
    "seed": 11,
}


def agent(policy: str) -> str:
    """The User-Agent of a policy's crawl (its marker selects its requests in the log)."""
    return f"Mozilla/5.0 (compatible; beamcrawl/0.1; {policy}-run)"


def _crawl(policy: str, work: Path, seeds: Path, p: dict[str, Any]) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "beamcrawl.cli.main", "crawl",
        "--seeds", str(seeds), "--out", str(work / policy), "--rounds", str(p["rounds"]),
        "--resolve", "*=127.0.0.1", "--allow-private-networks",
        "--min-delay", str(p["delay"]), "--round-window", str(p["window"]), "--runner", "FnApiRunner",
        "--user-agent", agent(policy), "--revisit-policy", policy,
        "--min-revisit-interval", "1", "--max-revisit-interval", "600",
        "--prior-change-interval", str(p["prior"]), "--revisit-horizon", str(p["horizon"]),
        "--domain-budgets=false",
    ]  # fmt: skip
    log = open(work / f"{policy}.log", "w")  # noqa: SIM115 - the child holds it
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)


def run_side_by_side(work: Path, **overrides: Any) -> dict[str, Any]:
    """Runs both crawls at once on one simweb; returns what measuring them needs.

    Raises:
        RuntimeError: A crawl exited with an error (its log's tail says why).
    """
    p = {**DEFAULTS, **overrides}
    with running_simweb(
        str(work / "web"), hosts=p["hosts"], pages_per_host=p["pages"], seed=p["seed"], latency_scale=0,
        change_scale=p["scale"], change_mix=p["mix"],
    ) as web:  # fmt: skip
        truth = web.truth()
        pages = truth_pages(truth, allowed_only=True, sitemap_only=False)
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(sorted(pages)) + "\n")
        started = time.time()
        procs = {policy: _crawl(policy, work, seeds, p) for policy in POLICIES}
        for policy, proc in procs.items():
            if proc.wait() != 0:
                raise RuntimeError(f"{policy} crawl failed: {(work / f'{policy}.log').read_text()[-3000:]}")
        ended = time.time()
        web.sync()
        requests = web.requests()
    return {
        "work": work,
        "params": p,
        "truth": truth,
        "pages": pages,
        "requests": requests,
        "start": started,
        "end": ended,
    }


def requests_of(run: dict[str, Any], policy: str) -> list[dict[str, Any]]:
    return [r for r in run["requests"] if f"{policy}-run" in r.get("ua", "")]


def steady_state(run: dict[str, Any]) -> dict[str, Any]:
    """Freshness of each policy from when both crawls hold a copy of every seeded page: over
    the pages that change (``changing``) and over all of them (``all``), and the requests
    each made meanwhile; ``whole`` is the whole run's report (first pass included)."""
    r = run
    whole = {p: measure(r["requests"], r["truth"], f"{p}-run", r["start"], r["end"], r["pages"]) for p in POLICIES}
    firsts = [page.first_fetch for report in whole.values() for page in report.by_page.values()]
    start = max((f for f in firsts if f is not None), default=r["end"])
    changing = {u for u, page in whole["adaptive"].by_page.items() if page.change_class != "static"}
    out: dict[str, Any] = {"start": start, "seconds": r["end"] - start, "whole": whole}
    out["changing"] = {p: measure(r["requests"], r["truth"], f"{p}-run", start, r["end"], changing) for p in POLICIES}
    out["all"] = {p: measure(r["requests"], r["truth"], f"{p}-run", start, r["end"], r["pages"]) for p in POLICIES}
    out["requests"] = {p: sum(1 for q in requests_of(r, p) if q["start"] >= start) for p in POLICIES}
    return out


def table(steady: dict[str, Any]) -> str:
    """The steady-state figures as a Markdown table."""
    changing: dict[str, FreshnessReport] = steady["changing"]
    classes = [c for c in ("medium", "slow", "fast") if c in changing["adaptive"].by_class]
    head = "| policy | changing pages | " + " | ".join(classes) + " | all pages | requests |"
    lines = [head, "|---" * (4 + len(classes)) + "|"]
    for p in POLICIES:
        by = changing[p].by_class
        cells = " | ".join(f"{by[c]:.3f}" for c in classes)
        lines.append(
            f"| {p} | {changing[p].mean:.3f} | {cells} | {steady['all'][p].mean:.3f} | {steady['requests'][p]:,} |"
        )
    ratio = changing["adaptive"].mean / max(changing["uniform"].mean, 1e-9)
    lines.append(f"\nadaptive / uniform over the changing pages: {ratio:.2f}x; steady state {steady['seconds']:.0f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in DEFAULTS.items():
        parser.add_argument(f"--{name}", type=type(value), default=value)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="beamcrawl-freshness-") as tmp:
        run = run_side_by_side(Path(tmp), **vars(args))
        print(table(steady_state(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
