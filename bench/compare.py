"""beamcrawl side by side with Scrapy and a floor crawler, on the same synthetic web.

One run, on loopback only, stopping by itself (about 11 minutes with the defaults, most of it
beamcrawl's rounds running past their window):

1. **beamcrawl** (``bench/beamcrawl_round.py``, the local FnApiRunner):

   - *cold round*: one round seeded with every host's root (what one round from nothing
     does: robots.txt and the roots, since a round fetches only what was due when it began);
   - *warm-up round* (``--warmup-window``), unmeasured, so the frontier holds far more URLs
     than a 60 s window can fetch; the store is then copied once per runner;
   - *measured round*, one per runner, each in a fresh process from its copy: the in-process
     runner, and ``--direct_running_mode=multi_processing --direct_num_workers=2``.
     robots.txt is cached from the warm-up (a steady-state round), so the audit of a measured
     round reads the warm-up's log followed by the round's own.
2. **Scrapy** (``bench/scrapy_crawler.py`` in ``.bench-venv``, created here on first use with
   ``pip install scrapy==SCRAPY_VERSION``): documented broad-crawl settings, seeded with every
   host's root, ``CLOSESPIDER_TIMEOUT`` = the window, ``CONCURRENT_REQUESTS`` 100 (the docs'
   starting value; on this machine it beat 50, 200, 500 and one-per-host).
3. **floor** (``bench/floor_crawler.py``): a minimal polite asyncio/aiohttp crawler, one
   process per core, seeded with every host's root, for the window.

Every crawler gets a freshly started simweb (same port, seed and size; a new request log), the
same User-Agent (beamcrawl's, which carries the ``beamcrawl`` token the audit selects by), the
same fixed delay, one request per host at a time, and robots.txt obeyed. Each is measured from
the outside over its whole process lifetime (Python and Beam start-up included): pages per
second (responses the server logged for it / wall seconds), CPU seconds per 1,000 pages (the
process and all its children), peak RSS (summed over its processes), and politeness violations
counted by ``beamcrawl/simweb/audit.py`` from the server's log.

    python bench/compare.py                       # 3,000 hosts, 0.5 s delay, 60 s windows
    python bench/compare.py --snapshot --snapshot-rev A --warm-state S   # saves the warm state in S
    python bench/compare.py --snapshot --snapshot-rev B --warm-state S   # B's rounds from A's state
    python bench/compare.py --hosts 200 --window 10 --crawlers floor,scrapy   # a quick look

Prints a Markdown table (the one in bench/README.md) and writes all figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from harness import (  # noqa: E402
    AuditSplit,
    RunMeasure,
    audit_split,
    dump_json,
    free_port,
    machine_busy_seconds,
    run_measured,
    simweb_on_port,
)

from beamcrawl import DEFAULT_USER_AGENT, PRODUCT_TOKEN  # noqa: E402
from beamcrawl.simweb.names import host_names  # noqa: E402
from beamcrawl.simweb.testing import read_request_log  # noqa: E402

__all__ = ["Row", "main"]

SCRAPY_VERSION = "2.19.0"
ALL_CRAWLERS = ("beamcrawl", "beamcrawl-mp", "scrapy", "floor")
MP_ARGS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


@dataclass
class Row:
    """One line of the comparison.

    Attributes:
        name: What ran.
        measure: The process measurements (None when it did not run).
        pages: Responses the server logged for this run.
        html_pages: Of those, 200 responses.
        audit: The politeness audit (None when it did not run).
        note: Anything a reader must know about this row.
        extra: Crawler-specific figures (beamcrawl round reports, Scrapy stats).
    """

    name: str
    measure: RunMeasure | None = None
    pages: int = 0
    html_pages: int = 0
    audit: AuditSplit | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    first_request: float = 0.0
    last_request: float = 0.0
    pauses: tuple[int, int, int] = (0, 0, 0)  # fetch_pauses: span s, seconds without a request, longest run

    @property
    def startup(self) -> float:
        """Seconds from process start to its first request (imports, Beam, select, plan)."""
        return self.first_request - self.measure.started if self.measure and self.pages else 0.0

    @property
    def fetching(self) -> float:
        """Seconds from its first request to its last."""
        return self.last_request - self.first_request if self.pages else 0.0

    @property
    def tail(self) -> float:
        """Seconds from its last request to process exit (draining, writing, committing)."""
        return self.measure.ended - self.last_request if self.measure and self.pages else 0.0

    @property
    def fetch_rate(self) -> float:
        """Pages per second while it was fetching."""
        return self.pages / self.fetching if self.fetching > 0 else 0.0

    @property
    def pages_per_second(self) -> float:
        """Pages per second over the whole process wall time."""
        return self.pages / self.measure.wall if self.measure and self.measure.wall else 0.0

    @property
    def cpu_per_1000(self) -> float:
        """CPU seconds per 1,000 pages."""
        return 1000 * self.measure.cpu / self.pages if self.measure and self.pages else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "name": self.name,
            "pages": self.pages,
            "html_pages": self.html_pages,
            "pages_per_second": round(self.pages_per_second, 1),
            "startup_seconds": round(self.startup, 1),
            "fetching_seconds": round(self.fetching, 1),
            "tail_seconds": round(self.tail, 1),
            "pages_per_second_while_fetching": round(self.fetch_rate, 1),
            "fetch_pauses": {
                "span_seconds": self.pauses[0],
                "seconds_without_a_request": self.pauses[1],
                "longest": self.pauses[2],
            },
            "cpu_seconds_per_1000_pages": round(self.cpu_per_1000, 3),
            "measure": self.measure.to_dict() if self.measure else None,
            "audit": self.audit.to_dict() if self.audit else None,
            "note": self.note,
            "extra": self.extra,
        }


def _own_requests(requests: list[dict[str, Any]], token: str) -> list[dict[str, Any]]:
    return [r for r in requests if token in str(r.get("ua", "")).lower()]


def _fill(row: Row, own: list[dict[str, Any]], audited: list[dict[str, Any]], truth: Any, delay: float) -> Row:
    row.pages = len(own)
    if own:
        starts = [float(r["start"]) for r in own]
        row.first_request, row.last_request = min(starts), max(starts)
    row.pauses = fetch_pauses(own)
    row.html_pages = sum(1 for r in own if int(r.get("status", 0)) == 200)
    row.audit = audit_split(audited, truth, PRODUCT_TOKEN, delay)
    return row


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def ensure_bench_venv(venv: Path) -> Path | None:
    """Return the bench venv's python with Scrapy installed, creating it if needed."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import scrapy, sys; sys.exit(scrapy.__version__ != %r)" % SCRAPY_VERSION]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"bench: installing scrapy=={SCRAPY_VERSION} into {venv} (benchmark only) ...", flush=True)
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"scrapy=={SCRAPY_VERSION}"], check=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"bench: cannot install Scrapy: {exc}", file=sys.stderr)
        return None
    return python


def _quiet_check(seconds: float = 3.0) -> float:
    """Cores busy on the machine over a short interval (before anything of ours runs)."""
    b0 = machine_busy_seconds()
    time.sleep(seconds)
    return (machine_busy_seconds() - b0) / seconds


def wait_quiet(max_wait: float, threshold: float = 0.3) -> float:
    """Wait (at most ``max_wait`` seconds) until other work uses under ``threshold`` cores.

    On a shared 2-core machine someone else's test run halves a crawler's figures; waiting for
    a quiet moment before each measured run keeps the runs comparable. Returns the last reading.
    """
    deadline = time.monotonic() + max_wait
    busy = _quiet_check(2.0)
    while busy > threshold and time.monotonic() < deadline:
        busy = _quiet_check(2.0)
    if busy > threshold:
        print(f"bench: machine still busy ({busy:.2f} cores) after {max_wait:g}s; running anyway", flush=True)
    return busy


def run_beamcrawl(args: argparse.Namespace, work: Path, port: int, seeds: Path, ua: str) -> list[Row]:
    """The cold round, the warm-up, and one measured round per runner."""
    rows: list[Row] = []
    py = sys.executable
    script = str(BENCH / "beamcrawl_round.py")
    common = [
        "--delay",
        str(args.delay),
        "--hosts-in-flight",
        str(args.hosts),
        "--user-agent",
        ua,
        "--crawl-delay-cap",
        "2",
    ]
    warm_out = work / "beamcrawl-warm"
    # Generous: a round runs well past its window (every page fetched is then parsed, stored
    # and its links merged), and a round stopped before its end measures nothing valid.
    timeout = args.window + 900

    def round_(label: str, out: Path, window: float, web: Any, *extra: str) -> RunMeasure:
        """One ``beamcrawl_round.py`` round on ``out``, measured; its report in WORK/LABEL.json."""
        command = [py, script, "--out", str(out), "--window", str(window)]
        command += ["--report-out", str(work / f"{label}.json"), *common, *extra]
        return run_measured(label, command, log_dir=work, timeout=timeout, server_pid=web.process.pid, cwd=work)

    state = Path(args.warm_state) if args.warm_state else None
    params = _warm_params(args)
    truth = None
    if state is not None and (state / WARM_META).exists():
        # The same starting state as an earlier run (another tree's, say): its store, the
        # warm-up's request log (the audit reads it before each round's own) and frontier.
        meta = json.loads((state / WARM_META).read_text())
        if meta.get("params") != params:
            raise SystemExit(f"bench: {state} was warmed up with {meta.get('params')}, not {params}")
        shutil.rmtree(warm_out, ignore_errors=True)
        shutil.copytree(state / "beamcrawl-warm", warm_out)
        warm_log = read_request_log(state / "beamcrawl-warm.jsonl")
        frontier = meta["frontier"]
        print(
            f"bench: warm state reused from {state} (made by {meta.get('rev')}); frontier {frontier} URLs", flush=True
        )
    else:
        with simweb_on_port(
            work,
            port,
            hosts=args.hosts,
            seed=args.seed,
            pages_per_host=args.pages_per_host,
            log_name="beamcrawl-warm.jsonl",
        ) as web:
            wait_quiet(args.wait_quiet)
            cold = round_("beamcrawl-cold", warm_out, args.window, web, "--seeds", str(seeds))
            warm_cold = web.requests()
            warm = round_("beamcrawl-warmup", warm_out, args.warmup_window, web)
            warm_log = web.requests()
            truth = web.truth()
            log_path = web.log_path
        cold_row = Row("beamcrawl, 1 round from the roots (cold)", cold)
        _fill(cold_row, _own_requests(warm_cold, PRODUCT_TOKEN), warm_cold, truth, args.delay)
        cold_row.extra["round"] = _read_json(work / "beamcrawl-cold.json")
        cold_row.note = "robots.txt + the root of every host: a round fetches only what was due at its start"
        rows.append(cold_row)
        warm_reports = _read_json(work / "beamcrawl-warmup.json") or []
        frontier = warm_reports[-1]["frontier_size"] if warm_reports else None
        print(f"bench: warm-up round done in {warm.wall:.1f}s; frontier now {frontier} URLs", flush=True)
        if state is not None:
            shutil.rmtree(state, ignore_errors=True)
            state.mkdir(parents=True)
            shutil.copytree(warm_out, state / "beamcrawl-warm")
            shutil.copyfile(log_path, state / "beamcrawl-warm.jsonl")
            rev = os.environ.get(SNAPSHOT_ENV + "_REV") or "the working tree"
            meta = {"params": params, "frontier": frontier, "rev": rev, "port": port}
            (state / WARM_META).write_text(json.dumps(meta, indent=1))
            print(f"bench: warm state saved in {state}", flush=True)

    for key, label, beam_args in (
        ("beamcrawl", "beamcrawl, 1 round, FnApiRunner in-process", []),
        ("beamcrawl-mp", "beamcrawl, 1 round, multi_processing x2", MP_ARGS),
    ):
        if key not in args.crawlers:
            continue
        out = work / f"{key}-out"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(warm_out, out)
        with simweb_on_port(
            work, port, hosts=args.hosts, seed=args.seed, pages_per_host=args.pages_per_host, log_name=f"{key}.jsonl"
        ) as web:
            wait_quiet(args.wait_quiet)
            m = round_(key, out, args.window, web, "--", *beam_args)
            own = _own_requests(web.requests(), PRODUCT_TOKEN)
            truth = truth if truth is not None else web.truth()
        row = Row(label, m)
        # Politeness holds across rounds: audit the warm-up's traffic and this round's together.
        _fill(row, own, warm_log + own, truth, args.delay)
        reports = _read_json(work / f"{key}.json") or []
        row.extra["round"] = reports[0] if reports else None
        row.extra["frontier_before"] = frontier
        if m.returncode != 0:
            stopped = "stopped by the harness, unfinished; " if m.timed_out else ""
            row.note = f"{stopped}exit status {m.returncode}; see {m.stderr}"
        rows.append(row)
        print(f"bench: {label}: {row.pages} pages in {m.wall:.1f}s", flush=True)
    return rows


def run_scrapy(args: argparse.Namespace, work: Path, port: int, seeds: Path, ua: str) -> Row:
    """Scrapy's broad crawl for the window."""
    row = Row(f"Scrapy {SCRAPY_VERSION}, broad-crawl settings, CONCURRENT_REQUESTS {args.scrapy_concurrency}")
    python = ensure_bench_venv(Path(args.bench_venv))
    if python is None:
        row.note = "not run: Scrapy could not be installed"
        return row
    stats = work / "scrapy-stats.json"
    with simweb_on_port(
        work, port, hosts=args.hosts, seed=args.seed, pages_per_host=args.pages_per_host, log_name="scrapy.jsonl"
    ) as web:
        wait_quiet(args.wait_quiet)
        m = run_measured(
            "scrapy",
            [
                str(python),
                str(BENCH / "scrapy_crawler.py"),
                "--seeds",
                str(seeds),
                "--window",
                str(args.window),
                "--delay",
                str(args.delay),
                "--user-agent",
                ua,
                "--robots-token",
                PRODUCT_TOKEN,
                "--concurrency",
                str(args.scrapy_concurrency),
                "--stats-out",
                str(stats),
            ],
            log_dir=work,
            timeout=args.window + 180,
            server_pid=web.process.pid,
            cwd=work,
        )
        requests = web.requests()
        truth = web.truth()
    row.measure = m
    own = _own_requests(requests, PRODUCT_TOKEN)
    _fill(row, own, own, truth, args.delay)
    row.extra["stats"] = _read_json(stats)
    if m.returncode != 0:
        row.note = f"exit status {m.returncode}; see {m.stderr}"
    print(f"bench: Scrapy: {row.pages} pages in {m.wall:.1f}s", flush=True)
    return row


def run_floor(args: argparse.Namespace, work: Path, port: int, seeds: Path, ua: str) -> Row:
    """The floor crawler for the window, one process per core."""
    processes = args.processes or os.cpu_count() or 1
    row = Row(f"floor: asyncio+aiohttp, {processes} processes")
    stats = work / "floor-stats.json"
    with simweb_on_port(
        work, port, hosts=args.hosts, seed=args.seed, pages_per_host=args.pages_per_host, log_name="floor.jsonl"
    ) as web:
        wait_quiet(args.wait_quiet)
        m = run_measured(
            "floor",
            [
                sys.executable,
                str(BENCH / "floor_crawler.py"),
                "--seeds",
                str(seeds),
                "--window",
                str(args.window),
                "--delay",
                str(args.delay),
                "--user-agent",
                ua,
                "--robots-token",
                PRODUCT_TOKEN,
                "--processes",
                str(processes),
                "--stats-out",
                str(stats),
            ],
            log_dir=work,
            timeout=args.window + 120,
            server_pid=web.process.pid,
            cwd=work,
        )
        requests = web.requests()
        truth = web.truth()
    row.measure = m
    own = _own_requests(requests, PRODUCT_TOKEN)
    _fill(row, own, own, truth, args.delay)
    row.extra["stats"] = _read_json(stats)
    if m.returncode != 0:
        row.note = f"exit status {m.returncode}; see {m.stderr}"
    print(f"bench: floor: {row.pages} pages in {m.wall:.1f}s", flush=True)
    return row


def _violations(row: Row) -> str:
    if row.audit is None:
        return "-"
    r = row.audit.report
    if not r.violations:
        return "0"
    parts = []
    for name, n in (
        ("overlaps", r.overlaps),
        ("short gaps", r.short_gaps),
        ("robots", r.robots_violations),
        ("robots not first", r.robots_not_first),
    ):
        if n:
            parts.append(f"{n} {name}")
    return f"**{r.violations}**: " + ", ".join(parts)


def table(rows: list[Row]) -> str:
    """The comparison as a Markdown table."""
    lines = [
        "| crawler | pages | wall s | **pages/s** | CPU s / 1k pages | peak RSS MB (procs) "
        "| politeness violations | start-up / fetching / tail s | pages/s while fetching "
        "| CPU s: server / others |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        m = row.measure
        if m is None:
            lines.append(f"| {row.name} | - | - | - | - | - | {row.note} | - | - | - |")
            continue
        name = f"{row.name} (**stopped unfinished**)" if m.timed_out else row.name
        lines.append(
            f"| {name} | {row.pages:,} | {m.wall:.1f} | **{row.pages_per_second:,.0f}** "
            f"| {row.cpu_per_1000:.2f} | {m.peak_rss / 2**20:,.0f} ({m.processes}) "
            f"| {_violations(row)} | {row.startup:.0f} / {row.fetching:.0f} / {row.tail:.0f} "
            f"| {row.fetch_rate:,.0f} | {m.server_cpu:.0f} / {m.other_cpu:.0f} |"
        )
    return "\n".join(lines)


def pause_lines(rows: list[Row]) -> str:
    """Seconds of each crawler's fetching in which it started no request (its fetch loop
    waiting for the stage behind it: the backlog's bound, or a stall), and the longest run."""
    out = []
    for row in rows:
        span, idle, longest = row.pauses
        if span:
            out.append(f"- {row.name}: {idle} of {span} s without a request started, the longest pause {longest} s")
    return "\n".join(out)


def violation_details(rows: list[Row]) -> str:
    """Where each crawler's violations happened, by the robots.txt kind of the host."""
    out = []
    for row in rows:
        if row.audit is None or not row.audit.report.violations:
            continue
        out.append(f"- {row.name}:")
        for kind, counts in row.audit.by_kind.items():
            found = ", ".join(
                f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if k not in ("hosts", "requests") and v
            )
            out.append(f"  - robots kind `{kind}` ({counts['hosts']} hosts): {found}")
        r = row.audit.report
        if r.min_gap is not None:
            out.append(f"  - smallest start-to-start gap {r.min_gap:.3f} s (end-to-start {r.min_end_gap:.3f} s)")
    return "\n".join(out)


def _process_name(command: str) -> str:
    """A short name for a process: its script, its ``-m`` module, or its program."""
    words = command.split()
    for i, word in enumerate(words):
        if word.endswith(".py"):
            return Path(word).name
        if word == "-m" and i + 1 < len(words):
            return words[i + 1]
    return Path(words[0]).name if words else "?"


def peak_lines(rows: list[Row]) -> str:
    """What each crawler's peak RSS sums: each process's RSS in the sample of the peak, and its
    own largest RSS where that was at another time (the table's figure is the sum's peak)."""
    out = []
    for row in rows:
        m = row.measure
        if m is None or len(m.peak_parts) < 2:
            continue
        parts = []
        for at_peak, own, command in m.peak_parts:
            part = f"{_process_name(command)} {at_peak / 2**20:,.0f}"
            if round(own / 2**20) > round(at_peak / 2**20):
                part += f" (its own peak {own / 2**20:,.0f})"
            parts.append(part)
        sampled = sum(at_peak for at_peak, _, _ in m.peak_parts)
        out.append(f"- {row.name}: {sampled / 2**20:,.0f} MB sampled = " + " + ".join(parts))
    return "\n".join(out)


def speed_lines(rows: list[Row]) -> str:
    """Each run's machine speed (``harness.calibrate`` before and after it) and its CPU a page
    corrected for it: in calibrations per 1,000 pages, and against the floor's at the same
    speed (the machine's speed moves between runs, so the raw CPU ratio does not hold). Then
    the same weighed second by second through the run (``RunMeasure.weighted_cpu``: the
    speed moves within a run too), with the range of the speed sampled."""
    measured = [r for r in rows if r.measure is not None and r.measure.speed_cal > 0 and r.pages]
    floor = next((r for r in measured if r.name.startswith("floor")), None)
    base = floor.cpu_per_1000 / floor.measure.speed_cal if floor is not None else None  # type: ignore[union-attr]
    weighed_base = None
    if floor is not None and floor.measure is not None and floor.measure.weighted_cpu:
        weighed_base = 1000 * floor.measure.weighted_cpu / floor.pages
    out = []
    for r in measured:
        m = r.measure
        assert m is not None
        units = r.cpu_per_1000 / m.speed_cal
        line = (
            f"- {r.name}: {1000 * m.calibration[0]:.0f} / {1000 * m.calibration[1]:.0f} ms; "
            f"{r.cpu_per_1000:.2f} ms a page = {units:.1f} calibrations per 1k pages"
        )
        if base and r is not floor:
            line += f", {units / base:.2f}x the floor at the same speed"
        if m.weighted_cpu and m.speed_pieces:
            weighed = 1000 * m.weighted_cpu / r.pages
            low, high = min(m.speed_pieces), max(m.speed_pieces)
            line += (
                f"; weighed each second ({len(m.speed_pieces)} samples, {1000 * low:.1f}-{1000 * high:.1f} ms a"
                f" piece): {weighed:.0f} pieces per 1k pages"
            )
            if weighed_base and r is not floor:
                line += f", {weighed / weighed_base:.2f}x the floor"
        out.append(line)
    return "\n".join(out)


def fetch_pauses(requests: Sequence[Mapping[str, Any]], quiet: int = 1) -> tuple[int, int, int]:
    """``(seconds from the first request to the last, seconds among them with no request
    started, the longest run of such seconds)`` of one crawler's requests: a fetch loop that
    waits for its stage (the backlog's bound) shows as whole seconds with none."""
    if not requests:
        return 0, 0, 0
    seconds = Counter(int(r["start"]) for r in requests)
    first, last = min(seconds), max(seconds)
    idle = longest = run = 0
    for second in range(first, last + 1):
        if seconds.get(second, 0) < quiet:
            idle += 1
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    return last - first + 1, idle, longest


def moved_bytes(rows: list[Row], top: int = 6) -> str:
    """Bytes per fetched page that crossed shuffles, side inputs and main inputs held for a
    side input, from each beamcrawl round's report (Beam's PCollection size metrics)."""
    out = []
    for row in rows:
        report = row.extra.get("round")
        if isinstance(report, list):  # the cold round's JSON is the crawl's list of reports
            report = report[-1] if report else None
        if not isinstance(report, dict) or report.get("shuffle_bytes") is None or not report.get("responses"):
            continue
        n = report["responses"]
        shuffle, side = report["shuffle_bytes"] / n, (report.get("side_input_bytes") or 0) / n
        held = (report.get("materialised_bytes") or 0) / n
        out.append(
            f"- {row.name}: {shuffle:,.0f} B a page into shuffles + {side:,.0f} side inputs + "
            f"{held:,.0f} held for a side input = {shuffle + side + held:,.0f}"
        )
        steps = sorted((report.get("shuffle_bytes_by_step") or {}).items(), key=lambda kv: -kv[1])[:top]
        out.extend(f"  - {name}: {b / n:,.0f}" for name, b in steps)
    return "\n".join(out)


def _git_state() -> dict[str, Any]:
    """The commit the tree is at, whether it has local changes (read-only git calls), and the
    snapshot folder when the run used one."""

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "head": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain")),
        "snapshot": os.environ.get(SNAPSHOT_ENV),
        "snapshot_commit": os.environ.get(SNAPSHOT_ENV + "_REV"),
        "simhash_compiled": _simhash_compiled(),
    }


def _simhash_compiled() -> bool | None:
    """Whether the beamcrawl on this run's path computes the simhash in C (None: it predates
    the compiled one, or does not import)."""
    try:
        from beamcrawl.core.content import textfp
    except Exception:
        return None
    return getattr(textfp, "COMPILED", None)


def build_parser() -> argparse.ArgumentParser:
    """Command-line parser."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=3000)
    p.add_argument("--window", type=float, default=60.0, help="crawl window in seconds")
    p.add_argument("--delay", type=float, default=0.5, help="fixed per-host delay in seconds")
    p.add_argument("--seed", type=int, default=3, help="simweb seed")
    p.add_argument("--pages-per-host", type=int, default=1_000_000)
    p.add_argument("--warmup-window", type=float, default=10.0, help="window of beamcrawl's unmeasured warm-up round")
    p.add_argument(
        "--crawlers", default=",".join(ALL_CRAWLERS), help=f"comma-separated subset of {','.join(ALL_CRAWLERS)}"
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=30.0,
        help="before each measured run, wait up to this many seconds for other processes to leave the CPU (default 30)",
    )
    p.add_argument("--processes", type=int, default=0, help="floor processes (default: cores)")
    p.add_argument(
        "--scrapy-concurrency",
        type=int,
        default=100,
        help="Scrapy's CONCURRENT_REQUESTS (default 100, the Broad Crawls page's "
        "starting value and the fastest of 50/100/200/500/3000 here)",
    )
    p.add_argument("--bench-venv", default=str(ROOT / ".bench-venv"), help="virtualenv for Scrapy (created if missing)")
    p.add_argument("--work", default=None, help="working folder (default: a new temporary one)")
    p.add_argument("--json", default=None, help="write all figures here (default: WORK/compare.json)")
    p.add_argument(
        "--snapshot",
        action="store_true",
        help="run every crawler and server from `git archive REV` (one consistent, "
        "committed tree while others edit the working copy)",
    )
    p.add_argument("--snapshot-rev", default="HEAD", help="the commit --snapshot uses (default HEAD)")
    p.add_argument(
        "--warm-state",
        default=None,
        help="a folder for beamcrawl's state after its warm-up: saved there by a run that finds "
        "none, reused by a run that finds one (with the same --hosts, --seed, --pages-per-host, "
        "--delay, --window and --warmup-window), so that two trees measure their rounds from "
        "one state; the cold row is then left out",
    )
    return p


SNAPSHOT_ENV = "BEAMCRAWL_BENCH_SNAPSHOT"
WARM_META = "warm.json"


def _warm_port(args: argparse.Namespace) -> int | None:
    """The port a saved warm state's URLs name (its web must be served there again)."""
    meta = Path(args.warm_state or "") / WARM_META
    if args.warm_state and meta.exists():
        return int(json.loads(meta.read_text())["port"])
    return None


def _warm_params(args: argparse.Namespace) -> dict[str, Any]:
    """What a saved warm state depends on (a state is reused only for the same values)."""
    return {
        "hosts": args.hosts,
        "seed": args.seed,
        "pages_per_host": args.pages_per_host,
        "delay": args.delay,
        "window": args.window,
        "warmup_window": args.warmup_window,
    }


def _reexec_in_snapshot(argv: list[str], rev: str) -> None:
    """Extract ``rev``'s ``beamcrawl`` package to a temporary folder and rerun this script with
    it first on ``PYTHONPATH`` (read-only git: ``git archive``, no worktree, no checkout)."""
    snap = Path(tempfile.mkdtemp(prefix="beamcrawl-snapshot-"))
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "beamcrawl", "setup.py", "README.md"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(snap)], input=archive, check=True)
    # The package's C extension (the compiled simhash), built beside the snapshot's sources as
    # `make install` builds it in the tree: without it the round would run the Python path.
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=snap, capture_output=True, text=True
    )
    if built.returncode:
        print(f"bench: the snapshot's C extension did not build:\n{built.stderr[-2000:]}", file=sys.stderr)
    env = dict(os.environ)
    env[SNAPSHOT_ENV] = str(snap)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(snap), env.get("PYTHONPATH")) if p)
    args = [a for a in argv if a != "--snapshot"]
    env[SNAPSHOT_ENV + "_REV"] = subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    print(f"bench: running from a snapshot of {rev} in {snap}", flush=True)
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *args], env)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print its table."""
    args = build_parser().parse_args(argv)
    if args.snapshot and not os.environ.get(SNAPSHOT_ENV):
        _reexec_in_snapshot(list(sys.argv[1:] if argv is None else argv), args.snapshot_rev)
    args.crawlers = {c.strip() for c in args.crawlers.split(",") if c.strip()}
    unknown = args.crawlers - set(ALL_CRAWLERS)
    if unknown:
        print(f"bench: unknown crawler(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    work = Path(args.work or tempfile.mkdtemp(prefix="beamcrawl-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    busy = _quiet_check(2.0)
    print(f"bench: work folder {work}; machine busy before start: {busy:.2f} cores of {os.cpu_count()}", flush=True)
    if busy > 0.3:
        print("bench: WARNING: other processes are using CPU; figures will be lower and noisier", flush=True)
    port = _warm_port(args) or free_port()
    seeds = work / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\n" for h in host_names(args.hosts, args.seed)))
    ua = DEFAULT_USER_AGENT
    started = time.time()
    rows: list[Row] = []
    if args.crawlers & {"beamcrawl", "beamcrawl-mp"}:
        rows += run_beamcrawl(args, work, port, seeds, ua)
    if "scrapy" in args.crawlers:
        rows.append(run_scrapy(args, work, port, seeds, ua))
    if "floor" in args.crawlers:
        rows.append(run_floor(args, work, port, seeds, ua))
    text = table(rows)
    details = violation_details(rows)
    print()
    print(
        f"{args.hosts} hosts, {args.delay} s per-host delay, {args.window:g} s window, "
        f"seed {args.seed}, {os.cpu_count()} cores; total {time.time() - started:.0f} s"
    )
    print()
    print(text)
    if details:
        print()
        print(details)
    speeds = speed_lines(rows)
    if speeds:
        print("\nmachine speed (bench/harness.py calibrate(), before / after each run) and CPU a page for it:")
        print(speeds)
    peaks = peak_lines(rows)
    if peaks:
        print("\npeak RSS, by process (the sampled tree at the peak; MB):")
        print(peaks)
    pauses = pause_lines(rows)
    if pauses:
        print("\nseconds without a request while fetching (the server's log, whole seconds):")
        print(pauses)
    moved = moved_bytes(rows)
    if moved:
        print("\nbytes that crossed shuffles, per fetched page (round reports):")
        print(moved)
    out = Path(args.json) if args.json else work / "compare.json"
    dump_json(
        out,
        {
            "git": _git_state(),
            "settings": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()},
            "user_agent": ua,
            "machine_busy_before": busy,
            "rows": [r.to_dict() for r in rows],
            "table": text,
        },
    )
    print(f"\nbench: figures in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
