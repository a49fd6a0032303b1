"""Pieces the benchmarks share: simweb on a fixed port, measured subprocesses, audits.

- :func:`simweb_on_port` starts simweb on a given port (so a crawl state that holds absolute
  URLs stays valid when the server is restarted with a fresh request log);
- :func:`run_measured` runs a crawler as a subprocess in its own session and measures its
  whole process wall time, the CPU seconds of it and every descendant, the peak of the sum of
  their resident set sizes, the simweb server's CPU over the same interval and what the rest of
  the machine used meanwhile (other work on a 2-core machine changes the figures);
- :func:`audit_split` runs simweb's politeness audit on a request log and splits each kind of
  violation by the robots.txt kind of the host it happened on;
- :func:`calibrate` and :func:`calibration_piece` time a fixed piece of Python work: the
  machine's speed, before and after a run and every second through it, so that CPU measured
  at different speeds can be compared (:attr:`RunMeasure.weighted_cpu`).

Linux only (reads ``/proc``). Imports beamcrawl's simweb and audit, nothing else of it.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import subprocess
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from beamcrawl.simweb.audit import AuditReport, audit
from beamcrawl.simweb.testing import SimwebHandle, read_request_log, running_simweb

__all__ = [
    "AuditSplit",
    "RunMeasure",
    "audit_split",
    "calibrate",
    "calibration_piece",
    "free_port",
    "machine_busy_seconds",
    "process_cpu_seconds",
    "requests_between",
    "run_measured",
    "simweb_on_port",
    "weigh_cpu",
]

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------- /proc


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name (state is index 0), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one live process (0 when it is gone)."""
    f = _stat_fields(pid)
    return stat_cpu_seconds(f) if f else 0.0


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores), from ``/proc/stat``."""
    with open("/proc/stat", encoding="ascii") as fh:
        values = [int(x) for x in fh.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _TICK


def _all_processes() -> Iterator[tuple[int, list[str]]]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None:
                yield int(name), fields


def process_tree(root: int) -> list[tuple[int, list[str]]]:
    """``root`` and its live descendants, each with its ``/proc/PID/stat`` fields."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for pid, fields in _all_processes():
        stats[pid] = fields
        children.setdefault(int(fields[1]), []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            tree.append((pid, stats[pid]))
            todo.extend(children.get(pid, ()))
    return tree


def stat_cpu_seconds(fields: list[str]) -> float:
    """User + system CPU seconds from a process's ``/proc/PID/stat`` fields."""
    return (int(fields[11]) + int(fields[12])) / _TICK


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _cmdline(pid: int, limit: int = 160) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:limit]
    except OSError:
        return ""


class PeriodicSampler(threading.Thread):
    """A daemon thread that calls :meth:`sample` every ``interval`` s until :meth:`stop`."""

    join_timeout = 5.0

    def __init__(self, name: str, interval: float) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self._stop_event = threading.Event()

    def sample(self) -> Any:
        raise NotImplementedError

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop_event.set()
        self.join(self.join_timeout)


class _TreeSampler(PeriodicSampler):
    """Samples a process tree: the peak of its summed RSS and each process's last CPU time."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        super().__init__("tree-sampler", interval)
        self.root = root
        self.peak_rss = 0
        self.peak_parts: dict[int, int] = {}  # each process's RSS in the sample of the peak
        self.own_peak: dict[int, int] = {}  # each process's largest RSS in any sample
        self.cpu_by_pid: dict[int, float] = {}
        self.cmd_by_pid: dict[int, str] = {}
        self.pids: set[int] = set()

    def sample(self) -> None:
        """Take one sample now."""
        parts: dict[int, int] = {}
        for pid, f in process_tree(self.root):
            if f[0] == "Z":
                continue
            parts[pid] = rss = _rss_bytes(pid)
            self.own_peak[pid] = max(self.own_peak.get(pid, 0), rss)
            self.cpu_by_pid[pid] = stat_cpu_seconds(f)
            if pid not in self.pids:
                self.cmd_by_pid[pid] = _cmdline(pid)
            self.pids.add(pid)
        total = sum(parts.values())
        if total > self.peak_rss:
            self.peak_rss = total
            self.peak_parts = parts

    def cpu_so_far(self) -> float:
        """The tree's CPU seconds at the last sample (processes gone keep their last)."""
        return sum(list(self.cpu_by_pid.values()))


class _SpeedSampler(PeriodicSampler):
    """Every ``interval`` s, the machine's speed (:func:`calibration_piece`, the best of two)
    beside the tree's CPU so far: which CPU seconds were used at which speed."""

    def __init__(self, tree: _TreeSampler, interval: float = 1.0) -> None:
        super().__init__("speed-sampler", interval)
        self.tree = tree
        self.samples: list[tuple[float, float]] = []  # (tree CPU s so far, piece s)

    def sample(self) -> None:
        piece = min(calibration_piece(), calibration_piece())
        self.samples.append((self.tree.cpu_so_far(), piece))


def weigh_cpu(samples: Sequence[tuple[float, float]], total_cpu: float) -> tuple[float, list[float]]:
    """CPU seconds in calibration pieces: each interval's CPU divided by the speed measured
    at its end (what came after the last sample by the last speed).

    Args:
        samples: ``(CPU seconds so far, piece seconds)`` in time order.
        total_cpu: The run's CPU seconds in all (at least the last sample's).

    Returns:
        ``(pieces, the piece times)``; ``(0.0, [])`` without samples.
    """
    if not samples:
        return 0.0, []
    pieces = 0.0
    before = 0.0
    for cpu, piece in samples:
        pieces += max(0.0, cpu - before) / piece
        before = max(before, cpu)
    pieces += max(0.0, total_cpu - before) / samples[-1][1]
    return pieces, [piece for _, piece in samples]


# --------------------------------------------------------------------------- measured runs


@dataclass
class RunMeasure:
    """One crawler process, measured from the outside.

    Attributes:
        label: Name of the run.
        command: The command line.
        wall: Seconds from start to exit of the top process.
        cpu: User + system CPU seconds of the process and all its descendants.
        peak_rss: Peak of the summed resident set sizes of the process tree, in bytes.
        processes: Distinct processes seen in the tree.
        returncode: Exit status (negative: killed by that signal).
        timed_out: Whether the harness had to stop it.
        started: Epoch seconds at start.
        ended: Epoch seconds at exit.
        server_cpu: CPU seconds the simweb server used over the same interval.
        machine_busy: CPU seconds the whole machine was busy over the interval.
        harness_cpu: CPU seconds this harness used over the interval (sampling, waiting).
        stdout: File holding the process's standard output.
        stderr: File holding its standard error.
        calibration: :func:`calibrate` just before the run and just after it: what the
            machine's speed was (a shared machine's moves by a third within minutes).
        per_process: ``[cpu seconds, command]`` of each process seen, busiest first (sampled,
            so a process's last 0.2 s may be missing).
        peak_parts: ``[RSS bytes in the sample of the tree's peak, the process's own largest
            RSS in any sample, command]`` of each process seen, the largest at the peak first:
            which processes the peak sums, and whether one of them peaked at another time.
        weighted_cpu: The run's CPU in calibration pieces (:func:`weigh_cpu`): each second's
            CPU divided by the machine's speed in that second, so a run whose machine slowed
            down halfway is not charged for it. 0 when not sampled.
        speed_pieces: The piece times sampled through the run, seconds (how much the
            machine's speed moved within it).
    """

    label: str
    command: list[str]
    wall: float = 0.0
    cpu: float = 0.0
    peak_rss: int = 0
    processes: int = 0
    returncode: int | None = None
    timed_out: bool = False
    started: float = 0.0
    ended: float = 0.0
    server_cpu: float = 0.0
    machine_busy: float = 0.0
    harness_cpu: float = 0.0
    stdout: str = ""
    stderr: str = ""
    per_process: list[tuple[float, str]] = field(default_factory=list)
    peak_parts: list[tuple[int, int, str]] = field(default_factory=list)
    calibration: tuple[float, float] = (0.0, 0.0)
    weighted_cpu: float = 0.0
    speed_pieces: list[float] = field(default_factory=list)

    @property
    def speed_cal(self) -> float:
        """The machine's speed over the run: the mean of :func:`calibrate` before and after
        (CPU seconds of a fixed piece of work; 0 if not measured)."""
        before, after = self.calibration
        return (before + after) / 2

    @property
    def other_cpu(self) -> float:
        """CPU seconds used meanwhile by processes that are neither crawler, server nor harness."""
        return max(0.0, self.machine_busy - self.cpu - self.server_cpu - self.harness_cpu)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, plus ``other_cpu``."""
        out = asdict(self)
        out["other_cpu"] = self.other_cpu
        return out


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _kill_session(sid: int, sig: int) -> int:
    """Send ``sig`` to every live process of session ``sid`` (all started by us); return count."""
    n = 0
    for pid, fields in _all_processes():
        if int(fields[3]) == sid and fields[0] != "Z":
            try:
                os.kill(pid, sig)
                n += 1
            except ProcessLookupError:
                pass
    return n


def run_measured(
    label: str,
    command: Sequence[str],
    *,
    log_dir: str | Path,
    timeout: float,
    server_pid: int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> RunMeasure:
    """Run ``command`` to completion (or ``timeout``) in a new session and measure it.

    The process and its descendants are sampled every 0.2 s from ``/proc``; CPU is the larger of
    the kernel's account for the process and the descendants it waited for, and the sum of the
    last samples of every process seen (descendants nobody waited for). When the top process
    exits, anything left in its session is stopped.

    Args:
        label: Name of the run (also the stem of its stdout/stderr files).
        command: The command line.
        log_dir: Where ``LABEL.stdout`` and ``LABEL.stderr`` go.
        timeout: Seconds before the session gets SIGTERM (SIGKILL 10 s later).
        server_pid: The simweb server's pid, to account its CPU over the run.
        env: Environment of the process (default: this one's).
        cwd: Working directory.

    Returns:
        The measurements.
    """
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    m = RunMeasure(label=label, command=list(command))
    cal_before = calibrate()
    m.stdout = str(log_dir / f"{label}.stdout")
    m.stderr = str(log_dir / f"{label}.stderr")
    server0 = process_cpu_seconds(server_pid) if server_pid else 0.0
    busy0 = machine_busy_seconds()
    own0 = _own_cpu()
    with open(m.stdout, "wb") as out, open(m.stderr, "wb") as err:
        m.started = time.time()
        t0 = time.monotonic()
        proc = subprocess.Popen(
            list(command),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    sampler = _TreeSampler(proc.pid)
    sampler.sample()
    sampler.start()
    speed = _SpeedSampler(sampler)
    speed.start()

    def on_timeout() -> None:
        m.timed_out = True
        _kill_session(proc.pid, signal.SIGTERM)
        time.sleep(10)
        _kill_session(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    m.wall = time.monotonic() - t0
    m.ended = time.time()
    proc.returncode = os.waitstatus_to_exitcode(status)
    m.returncode = proc.returncode
    speed.stop()
    sampler.stop()
    m.server_cpu = (process_cpu_seconds(server_pid) - server0) if server_pid else 0.0
    m.machine_busy = machine_busy_seconds() - busy0
    m.harness_cpu = _own_cpu() - own0
    # Leftovers of the session (a worker nobody stopped) are ours to stop.
    if _kill_session(proc.pid, signal.SIGTERM):
        time.sleep(2)
        _kill_session(proc.pid, signal.SIGKILL)
    kernel_cpu = usage.ru_utime + usage.ru_stime
    sampled_cpu = sum(sampler.cpu_by_pid.values())
    m.cpu = max(kernel_cpu, sampled_cpu)
    m.peak_rss = max(sampler.peak_rss, usage.ru_maxrss * 1024)
    m.processes = len(sampler.pids)
    m.per_process = sorted(
        ((round(cpu, 2), sampler.cmd_by_pid.get(pid, "")) for pid, cpu in sampler.cpu_by_pid.items()),
        reverse=True,
    )
    m.peak_parts = sorted(
        (
            (sampler.peak_parts.get(pid, 0), peak, sampler.cmd_by_pid.get(pid, ""))
            for pid, peak in sampler.own_peak.items()
        ),
        reverse=True,
    )
    m.calibration = (cal_before, calibrate())
    m.weighted_cpu, m.speed_pieces = weigh_cpu(speed.samples, m.cpu)
    return m


_CAL_ROWS = [(i, f"http://h{i % 97}.test/p/{i}.html", i * 0.5) for i in range(20_000)]
_CAL_PIECE = _CAL_ROWS[:4_000]


def calibrate(repeat: int = 5) -> float:
    """CPU seconds of a fixed piece of Python work like a crawler's (records pickled and
    unpickled, compressed, strings hashed into a dict and sorted), the best of ``repeat``:
    the machine's speed now. A run's CPU a page divided by it compares runs made at
    different speeds (the same code measured 0.78 and 1.07 ms a page for the floor within
    ten minutes here)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        _calibration_work(_CAL_ROWS)
        best = min(best, time.process_time() - start)
    return best


def calibration_piece() -> float:
    """CPU seconds of this thread for a fifth of :func:`calibrate`'s work, once (about 10 ms
    here): the speed sampled through a run, by a thread beside others (its own CPU only)."""
    start = time.thread_time()
    _calibration_work(_CAL_PIECE)
    return time.thread_time() - start


def _calibration_work(rows: list[tuple[int, str, float]]) -> None:
    blob = pickle.dumps(rows, pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(blob)
    zlib.compress(blob, 6)
    index = {url: n for n, url, _ in back}
    sorted(index)


# --------------------------------------------------------------------------------- simweb


@contextmanager
def simweb_on_port(
    work: str | Path,
    port: int,
    *,
    hosts: int,
    seed: int,
    pages_per_host: int,
    log_name: str,
    startup_timeout: float = 60.0,
) -> Iterator[SimwebHandle]:
    """Run simweb on ``port`` (latency off, robots-only truth) until the block exits.

    Args:
        work: Folder for the log (``log_name``), the truth and the server's stderr.
        port: The port to listen on (a restarted server keeps its URLs).
        hosts: Virtual hosts.
        seed: Seed of the web.
        pages_per_host: Pages per host (large: the web never runs out).
        log_name: File name of this server's request log (emptied first).
        startup_timeout: Seconds to wait for the ready line.

    Yields:
        A handle with ``requests()``, ``truth()``, ``audit()`` and ``stop()``.
    """
    with running_simweb(
        work,
        hosts,
        seed,
        pages_per_host,
        port=port,
        log_name=log_name,
        latency_scale=0,
        startup_timeout=startup_timeout,
        truth_max_pages=0,
    ) as handle:
        yield handle


# ---------------------------------------------------------------------------------- audits


def requests_between(requests: Iterable[Mapping[str, Any]], start: float, end: float) -> list[Mapping[str, Any]]:
    """The log records whose request started within ``[start, end]``."""
    return [r for r in requests if start <= float(r["start"]) <= end]


@dataclass
class AuditSplit:
    """An audit, and the same audit per robots.txt kind of the audited hosts.

    Attributes:
        report: The audit of every request.
        by_kind: Per robots kind: ``{"hosts", "requests", "robots_violations", "overlaps",
            "short_gaps", "robots_not_first"}``, only for kinds with a violation.
    """

    report: AuditReport
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the report's counts and examples, and the split."""
        out = self.report.to_dict()
        out.pop("requests_per_host", None)
        out["by_kind"] = self.by_kind
        return out


def audit_split(
    requests: Sequence[Mapping[str, Any]],
    truth: Mapping[str, Mapping[str, Any]],
    token: str,
    min_delay: float,
) -> AuditSplit:
    """Audit ``requests`` and split the violations by the robots kind of their hosts.

    Args:
        requests: simweb request log records.
        truth: simweb truth, ``{host: record}``.
        token: The product token the audit selects requests and robots groups by.
        min_delay: The crawl's delay floor.

    Returns:
        The whole audit and its split.
    """
    report = audit(requests, truth, token, min_delay)
    split = AuditSplit(report)
    if not report.violations:
        return split
    kind_of = {h.lower(): str(rec.get("robots", {}).get("kind", "?")) for h, rec in truth.items()}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in requests:
        host = str(r.get("host", "")).lower().rsplit(":", 1)[0]
        groups.setdefault(kind_of.get(host, "?"), []).append(r)
    for kind, reqs in sorted(groups.items()):
        sub = audit(reqs, truth, token, min_delay, max_examples=0)
        if sub.violations:
            split.by_kind[kind] = {
                "hosts": sub.distinct_hosts,
                "requests": sub.total_requests,
                "robots_violations": sub.robots_violations,
                "overlaps": sub.overlaps,
                "short_gaps": sub.short_gaps,
                "robots_not_first": sub.robots_not_first,
            }
    return split


def load_log(path: str | Path) -> list[dict[str, Any]]:
    """Read a simweb request log (skipping a partly written last line)."""
    return read_request_log(path)


def dump_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, default=str)
