"""Where a round's memory goes, stage by stage: resident set size over time, what the runner
holds between stages, which allocator holds the rest, and (optionally) Python's allocations
at the peak by traceback.

Starts simweb on loopback, runs a cold round and a warm-up round (as ``stage_timeline.py``
does), then a measured round in this process on the FnApiRunner, while a thread samples this
process's RSS every ``--interval`` seconds (with ``--mp``, summed with the SDK worker
processes; never the simweb server). For every bundle the runner executes it records:

- the stage, when it ran, the RSS before and after and the largest sample meanwhile (with
  ``--mp``, also each process's RSS after it and at the peak: the runner's and each child's);
- what the runner holds after it: the encoded bytes in its list buffers (outputs waiting
  for their consuming stage, side inputs) and the values its grouping buffers hold *decoded*
  (the inputs of every ``GroupByKey`` not yet read); ``--sizes`` also measures each buffer
  (grouping buffers deep, slow);
- this process's allocators: pymalloc's arenas and the blocks in use in them (small Python
  objects), glibc malloc's heap in use (large objects, C libraries) and its free memory
  kept, and SQLite's share of malloc (its page caches: one per store connection).

The same allocator figures are taken at the highest RSS. The earlier rounds ran in this
process too: their freed memory is given back (``malloc_trim``) before the measured round,
but the start RSS still holds what they left (a bench process running one round starts
lower).

``--tracemalloc N`` traces Python's allocations (N frames each; slow: it starves the fetch,
so use ``--trace-stage TEXT`` to trace only the bundles of the stages whose name holds TEXT)
and keeps a snapshot of the moment the traced total was highest (taken whenever it grew by
``--snapshot-step``); it prints that snapshot's largest allocation sites and tracebacks.
Objects decoded from a stage's input are charged to Beam's decoder, whoever keeps them.
``--trim`` calls ``malloc_trim(0)`` after every bundle (what returning free memory would give).
``--collect`` runs a full ``gc.collect()`` after every bundle and shows what it found: cyclic
garbage that the raised collection thresholds (``core/runtime/gctune.py``) leave for later,
and the pymalloc blocks still in use after it. ``--trace-left`` reports, instead of the traced
stage's highest moment, what its bundles left allocated when they ended (after the collection,
with ``--collect``): what stays alive past a stage and pins the allocators' arenas.

    python bench/memory_timeline.py [--hosts 1000] [--window 20] [--mp] [--sizes]
    python bench/memory_timeline.py --tracemalloc 5 --trace-stage Mark-copies
    python bench/memory_timeline.py --collect --tracemalloc 6 --trace-stage Fetch --trace-left

``--round-of OUT`` measures one round on an output folder warmed elsewhere, in this fresh
process (no simweb, no warm-up: the server its URLs name must be running); ``flat_memory.py``
runs it so that a round's start holds no earlier round's memory. The last line of the output,
``MEASURED {...}``, is the round's figures as JSON.

Wraps ``FnApiRunner._execute_bundle``, a private method of Beam's runner: a measuring tool,
not part of beamcrawl. Linux with glibc only (``/proc``, ``mallinfo2``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
import types
from pathlib import Path
from typing import Any, Callable, Iterator

from apache_beam.runners.portability.fn_api_runner import execution, fn_runner

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from harness import PeriodicSampler, _rss_bytes, process_tree  # noqa: E402
from stage_timeline import _short, add_round_arguments, measure_round, warmed_up  # noqa: E402

from beamcrawl.stores.embedded import sqlite_memory_used  # noqa: E402

__all__ = ["main"]

MB = 1024 * 1024
MEASURED = "MEASURED"  # the prefix of the figures' line


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc_mallinfo2() -> Any:
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return fn


_MALLINFO2 = _libc_mallinfo2()


def malloc_trim() -> None:
    """Gives glibc malloc's free memory back to the system (``malloc_trim(0)``)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


_STAT_LINES = {
    "# arenas allocated current": "pymalloc_arenas",
    "# bytes in allocated blocks": "pymalloc_used",
}


def allocators() -> dict[str, int]:
    """Bytes by allocator in this process: pymalloc's arenas and the blocks in use in them
    (``sys._debugmallocstats``), and glibc malloc's heap in use and free-but-kept
    (``mallinfo2``). The rest of RSS is code, libraries' static data and thread stacks."""
    out: dict[str, int] = {}
    with tempfile.TemporaryFile(mode="w+") as fh:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(fh.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        fh.seek(0)
        for line in fh:
            for prefix, key in _STAT_LINES.items():
                if line.startswith(prefix):
                    out[key] = int(line.rsplit("=", 1)[1].replace(",", ""))
    out["pymalloc_arenas"] = out.get("pymalloc_arenas", 0) * 1024 * 1024
    if _MALLINFO2 is not None:
        info = _MALLINFO2()
        out["malloc_used"] = info.uordblks + info.hblkhd
        out["malloc_free"] = info.fordblks
    used = sqlite_memory_used()
    if used is not None:
        out["sqlite_used"] = used  # part of malloc's in use
    return out


def _deep_size(roots: list[Any]) -> int:
    """Bytes of ``roots`` and everything they reach (types, modules and functions aside)."""
    seen: set[int] = set()
    todo = list(roots)
    total = 0
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


def _held_by_runner(ctx: Any, sizes: bool = False) -> tuple[int, int, int, dict[str, int]]:
    """(encoded bytes in list buffers, values in grouping buffers, their keys, and with
    ``sizes`` each buffer's bytes by name: encoded for a list buffer, decoded and deep for a
    grouping buffer) the runner holds: its named buffers and the inputs queued for stages
    not yet run."""
    buffers: dict[int, tuple[str, Any]] = {}
    for name, buf in ctx.pcoll_buffers.items():
        buffers[id(buf)] = (name.decode(errors="replace") if isinstance(name, bytes) else str(name), buf)
    for queue in (ctx.queues.ready_inputs, ctx.queues.watermark_pending_inputs):
        for _, data_input in list(getattr(queue, "_q", ())):
            for transform, buf in data_input.data.items():
                buffers.setdefault(id(buf), (f"input of {transform}", buf))
    listed = grouped = keys = 0
    by_name: dict[str, int] = {}
    for name, buf in buffers.values():
        if isinstance(buf, execution.ListBuffer):
            n = sum(len(b) for b in buf._inputs)
            listed += n
            if sizes and n:
                by_name[f"{name} (encoded)"] = n
        elif isinstance(buf, execution.GroupingBuffer):
            keys += len(buf._table)
            grouped += sum(len(v) for v in buf._table.values())
            if sizes and buf._table:
                by_name[f"{name} (decoded)"] = _deep_size([buf._table])
    return listed, grouped, keys, by_name


class _Sampler(PeriodicSampler):
    """RSS of this process (and its SDK workers) every ``interval`` s; tracemalloc snapshots."""

    join_timeout = 60.0

    def __init__(self, interval: float, mp: bool, server_pid: int | None, snapshot_step: float) -> None:
        super().__init__("memory-sampler", interval)
        self.mp = mp
        self.server_pid = server_pid
        self.snapshot_step = snapshot_step
        self.samples: list[tuple[float, int, int]] = []  # (t, rss, traced)
        self.snapshot: tracemalloc.Snapshot | None = None
        self.left_snapshot: tracemalloc.Snapshot | None = None  # at a traced stage's end
        self.snapshot_at = (0.0, 0, 0)  # (t, rss, traced) when the snapshot was taken
        self.peak_traced = 0
        self.peak_rss = 0
        self.peak_allocators: dict[str, int] = {}
        self.peak_split: list[int] = []  # at the highest sample: this process, then each child
        self.peak_split_rss = 0

    def rss(self) -> int:
        return sum(self.rss_by_process())

    def rss_by_process(self) -> list[int]:
        """This process's RSS, then (with ``--mp``) each descendant's but the server's (the SDK
        workers and the ``/bin/sh`` that started each), largest first."""
        own = _rss_bytes(os.getpid())
        if not self.mp:
            return [own]
        skip = set()
        if self.server_pid:
            skip = {pid for pid, _ in process_tree(self.server_pid)}
        others = [
            _rss_bytes(pid)
            for pid, f in process_tree(os.getpid())
            if pid != os.getpid() and pid not in skip and f[0] != "Z"
        ]
        return [own, *sorted(others, reverse=True)]

    def sample(self) -> int:
        split = self.rss_by_process()
        rss = sum(split)
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        t = time.monotonic()
        self.samples.append((t, rss, traced))
        if rss > self.peak_rss + 16 * MB or (rss > self.peak_rss and not self.peak_allocators):
            self.peak_allocators = allocators()  # this process only, also with --mp
            self.peak_rss = rss
        if rss >= max(self.peak_split_rss, 1):
            self.peak_split, self.peak_split_rss = split, rss
        if traced and traced > max(self.snapshot_at[2] * (1 + self.snapshot_step), 1):
            try:
                self.snapshot = tracemalloc.take_snapshot()
                self.snapshot_at = (t, rss, traced)
            except RuntimeError:  # tracing stopped meanwhile
                pass
        self.peak_traced = max(self.peak_traced, traced)
        return rss


class _Recorder:
    """Wraps the runner's bundle execution: (stage, t0, t1, rss before, rss after, held after)."""

    def __init__(
        self,
        sampler: _Sampler,
        trace_stage: str = "",
        frames: int = 0,
        sizes: bool = False,
        trim: bool = False,
        collect: bool = False,
    ) -> None:
        self.sampler = sampler
        self.trim = trim
        self.collect = collect
        # After each bundle, with collect: the allocators before a full collection, the
        # objects it found unreachable, the allocators after it.
        self.collected: list[tuple[dict[str, int], int, dict[str, int]]] = []
        self.sizes = sizes
        self.trace_stage = trace_stage
        self.frames = frames
        self.bundles: list[tuple[str, float, float, int, int, tuple[int, int, int], dict[str, int]]] = []
        self.split_after: list[list[int]] = []  # each bundle's RSS after it: this process, then each child
        self._original = fn_runner.FnApiRunner._execute_bundle

    def __enter__(self) -> "_Recorder":
        original, recorder = self._original, self

        def _execute_bundle(runner: Any, ctx: Any, bundle_ctx: Any, *args: Any, **kwargs: Any) -> Any:
            stage = bundle_ctx.stage.name
            traced = bool(recorder.trace_stage) and recorder.trace_stage in stage
            if traced:
                tracemalloc.start(recorder.frames)
            t0, r0 = time.monotonic(), recorder.sampler.rss()
            try:
                return original(runner, ctx, bundle_ctx, *args, **kwargs)
            finally:
                if recorder.collect:
                    # The allocators' figures below are after the collection; what it found
                    # is shown beside them (the stage's own figures are without --collect).
                    recorder.collected.append((allocators(), gc.collect(), allocators()))
                if traced:
                    recorder.sampler.sample()
                    recorder.sampler.left_snapshot = tracemalloc.take_snapshot()
                    tracemalloc.stop()
                if recorder.trim:
                    malloc_trim()
                t1, split = time.monotonic(), recorder.sampler.rss_by_process()
                r1 = sum(split)
                recorder.split_after.append(split)
                recorder.bundles.append((stage, t0, t1, r0, r1, _held_by_runner(ctx, recorder.sizes), allocators()))

        fn_runner.FnApiRunner._execute_bundle = _execute_bundle  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        fn_runner.FnApiRunner._execute_bundle = self._original  # type: ignore[method-assign]


def report(recorder: _Recorder, sampler: _Sampler, t_start: float, pages: int, top: int) -> str:
    """Bundles in the order they ran, with the RSS they reached, as Markdown."""
    samples = sampler.samples
    peak_t, peak_rss, _ = max(samples, key=lambda s: s[1]) if samples else (0.0, 0, 0)
    base = samples[0][1] if samples else 0
    lines = [
        f"{pages:,} pages; RSS {base / MB:,.0f} MB at the round's start, peak {peak_rss / MB:,.0f} MB "
        f"at +{peak_t - t_start:.1f} s ({(peak_rss - base) / max(pages, 1) / 1024:.1f} KB per page above the start)",
        "",
        "| # | stage (bundles) | start s | wall s | RSS before → max → after MB (with --mp: after, by process) | held after: list-buffer MB / "
        "grouped values (keys) | after: pymalloc arenas (in use) / malloc in use (free kept) / of which SQLite MB |",
        "|---:|---|---:|---:|---|---|---|",
    ]
    # Merge consecutive bundles of one stage.
    runs: list[list[Any]] = []
    for (stage, t0, t1, r0, r1, held, alloc), split in zip(recorder.bundles, recorder.split_after, strict=True):
        if runs and runs[-1][0] == stage:
            runs[-1][2:6] = [t1, r1, held, alloc]
            runs[-1][7] += 1
            runs[-1][8] = split
        else:
            runs.append([stage, t0, t1, r0, r1, held, alloc, 1, split])
    run_of = []  # each bundle's row in the table
    for i, bundle in enumerate(recorder.bundles):
        run_of.append(0 if i == 0 else run_of[-1] + (bundle[0] != recorder.bundles[i - 1][0]))
    shown = sorted(range(len(runs)), key=lambda i: -(runs[i][2] - runs[i][1]))[:top]
    peak_in = [i for i, r in enumerate(runs) if r[1] <= peak_t <= r[2]]
    for i, (stage, t0, t1, r0, r1, held, alloc, n, split) in enumerate(runs):
        inside = [s[1] for s in samples if t0 <= s[0] <= t1] + [r0, r1]
        mark = " **peak**" if i in peak_in else ""
        if i not in shown and not mark and (max(inside) - r0) < 20 * MB:
            continue
        lines.append(
            f"| {i} | {_short(stage, 80)} ({n}){mark} | {t0 - t_start:.1f} | {t1 - t0:.2f} | "
            f"{r0 / MB:,.0f} → {max(inside) / MB:,.0f} → {r1 / MB:,.0f}{_split_cell(split)} | "
            f"{held[0] / MB:,.1f} / {held[1]:,} ({held[2]:,}) | {_alloc_cell(alloc)} |"
        )
    held_lines = []
    for i, run in enumerate(runs):
        big = {k: v for k, v in run[5][3].items() if v >= 2 * MB}
        if big:
            held_lines.append(
                f"- after #{i}: "
                + "; ".join(f"{k[:90]} {v / MB:,.1f}" for k, v in sorted(big.items(), key=lambda kv: -kv[1]))
            )
    if held_lines:
        lines += ["", "What the runner holds after each stage (buffers of 2 MB or more, MB):", "", *held_lines]
    if recorder.collected:
        lines += [
            "",
            "A full collection after each bundle (`--collect`; the table's allocators are after it), where it "
            "found 1,000 objects or more: objects found unreachable; pymalloc arenas (in use) before → after, MB:",
            "",
        ]
        for i, (before, found, after) in enumerate(recorder.collected):
            if found >= 1_000:
                lines.append(
                    f"- #{run_of[i]}: {found:,} objects; {before.get('pymalloc_arenas', 0) / MB:,.0f} "
                    f"({before.get('pymalloc_used', 0) / MB:,.0f}) → {after.get('pymalloc_arenas', 0) / MB:,.0f} "
                    f"({after.get('pymalloc_used', 0) / MB:,.0f})"
                )
    for i in peak_in:
        lines += ["", f"The peak's stage, whole: {_short(runs[i][0], 10_000)}"]
    if len(sampler.peak_split) > 1:
        lines += [
            "",
            f"At the peak ({sum(sampler.peak_split) / MB:,.0f} MB), by process:{_split_cell(sampler.peak_split)}",
        ]
    if sampler.peak_allocators:
        lines += [
            "",
            f"This process at its highest RSS ({sampler.peak_rss / MB:,.0f} MB): "
            f"pymalloc arenas (in use) / malloc in use (free kept) / of which SQLite MB {_alloc_cell(sampler.peak_allocators)}",
        ]
    return "\n".join(lines)


def _split_cell(split: list[int]) -> str:
    """With SDK workers: the RSS of this process and of each child of it (the workers and the
    shells that started them, largest first), MB."""
    if len(split) < 2:
        return ""
    return f" (runner {split[0] / MB:,.0f}, children " + " + ".join(f"{w / MB:,.0f}" for w in split[1:]) + ")"


def _alloc_cell(alloc: dict[str, int]) -> str:
    """pymalloc arenas (blocks in use) / malloc in use (free kept) / SQLite's share of it, MB."""
    return (
        f"{alloc.get('pymalloc_arenas', 0) / MB:,.0f} ({alloc.get('pymalloc_used', 0) / MB:,.0f}) / "
        f"{alloc.get('malloc_used', 0) / MB:,.0f} ({alloc.get('malloc_free', 0) / MB:,.0f}) / "
        f"{alloc.get('sqlite_used', 0) / MB:,.0f}"
    )


def tracemalloc_report(sampler: _Sampler, t_start: float, frames: int, top: int, left: bool = False) -> str:
    snap = sampler.left_snapshot if left else sampler.snapshot
    if snap is None:
        return "(no tracemalloc snapshot)"
    t, rss, traced = sampler.snapshot_at
    snap = snap.filter_traces((tracemalloc.Filter(False, tracemalloc.__file__),))
    if left:
        held = sum(stat.size for stat in snap.statistics("filename"))
        head = (
            f"What the traced stage's last bundle left allocated when it ended: {held / MB:,.0f} MB "
            f"(highest traced total {sampler.peak_traced / MB:,.0f} MB)"
        )
    else:
        head = (
            f"tracemalloc snapshot at +{t - t_start:.1f} s: traced {traced / MB:,.0f} MB of RSS {rss / MB:,.0f} MB "
            f"(highest traced total {sampler.peak_traced / MB:,.0f} MB)"
        )
    lines = [
        "",
        head,
        "",
        "Largest allocation lines:",
        "",
    ]
    for stat in snap.statistics("lineno")[:top]:
        fr = stat.traceback[0]
        lines.append(f"- {stat.size / MB:7.1f} MB {stat.count:>9,} blocks  {_site(fr.filename)}:{fr.lineno}")
    lines += ["", "Largest tracebacks (innermost last):", ""]
    for stat in snap.statistics("traceback")[: max(top // 2, 5)]:
        lines.append(f"- {stat.size / MB:.1f} MB in {stat.count:,} blocks:")
        for fr in list(stat.traceback)[-frames:]:
            lines.append(f"    {_site(fr.filename)}:{fr.lineno}")
    return "\n".join(lines)


def waiting_line(round_report: dict[str, Any]) -> str:
    """The round report's bytes a fetched page: waiting for side inputs (main inputs held for
    one, and the side inputs) and into shuffles (None where the runner reports no sizes)."""
    pages = max(int(round_report.get("responses") or 0), 1)

    def per_page(key: str) -> str:
        value = round_report.get(key)
        return "n/a" if value is None else f"{value / pages:,.0f}"

    return (
        f"\nBytes a fetched page (round report): waiting for a side input {per_page('materialised_bytes')}, "
        f"side inputs {per_page('side_input_bytes')}, into shuffles {per_page('shuffle_bytes')}"
    )


def _site(filename: str) -> str:
    for marker in ("site-packages/", "/beamcrawl/", "/lib/python3"):
        if marker in filename:
            return (
                filename[filename.index(marker) + len(marker) :]
                if marker != "/beamcrawl/"
                else "beamcrawl/" + filename.split("/beamcrawl/", 1)[1]
            )
    return filename


def measured(sampler: _Sampler, round_report: dict[str, Any], window: float) -> dict[str, Any]:
    """The round's figures in one line, for a bench that runs this one in a child process."""
    rss = [s[1] for s in sampler.samples] or [0]
    return {
        "window": window,
        "pages": int(round_report["responses"]),
        "urls_due": int(round_report.get("urls_due", 0)),
        "seconds": float(round_report.get("seconds", 0.0)),
        "start_mb": round(rss[0] / MB, 1),
        "peak_mb": round(max(rss) / MB, 1),
        # With SDK workers: the peak's processes, the runner's first, then its children's.
        "peak_by_process_mb": [round(r / MB, 1) for r in sampler.peak_split],
    }


@contextlib.contextmanager
def _round_to_measure(args: argparse.Namespace) -> Iterator[tuple[Any, Callable[[], list[dict]]]]:
    """simweb and the warm-up rounds in this process, or (``--round-of``) only a round on a
    folder warmed elsewhere."""
    if args.round_of:
        yield None, lambda: measure_round(args.round_of, args)
        return
    with warmed_up(args, "beamcrawl-memory-") as pair:
        yield pair


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_arguments(p, "multi_processing with two workers (RSS summed)")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    p.add_argument("--tracemalloc", type=int, default=0, metavar="N", help="trace allocations, N frames each")
    p.add_argument(
        "--trace-stage",
        default="",
        metavar="TEXT",
        help="with --tracemalloc: trace only the bundles of stages whose name holds TEXT",
    )
    p.add_argument(
        "--sizes",
        action="store_true",
        help="after every bundle, measure each runner buffer (grouping buffers decoded, deep: slow)",
    )
    p.add_argument(
        "--trim",
        action="store_true",
        help="malloc_trim(0) after every bundle: what returning malloc's free memory would give",
    )
    p.add_argument(
        "--collect",
        action="store_true",
        help="a full gc.collect() after every bundle: the cyclic garbage each stage leaves for later",
    )
    p.add_argument(
        "--trace-left",
        action="store_true",
        help="with --tracemalloc: report what the traced stage left allocated at its end, not its highest moment",
    )
    p.add_argument("--snapshot-step", type=float, default=0.05, help="re-snapshot when the traced total grew by this")
    p.add_argument("--top", type=int, default=20, help="stages (and allocation sites) shown")
    p.add_argument(
        "--round-of",
        metavar="OUT",
        help="measure one round on this warmed output folder in this fresh process: no simweb, no "
        "warm-up (the server that folder's URLs name must be running; flat_memory.py runs this)",
    )
    args = p.parse_args(argv)

    with _round_to_measure(args) as (web, measured_round):
        gc.collect()
        malloc_trim()  # the earlier rounds' freed memory: not the measured round's
        server_pid = getattr(getattr(web, "process", None), "pid", None)
        sampler = _Sampler(args.interval, args.mp, server_pid, args.snapshot_step)
        if args.tracemalloc and not args.trace_stage:
            tracemalloc.start(args.tracemalloc)
        sampler.sample()
        t_start = time.monotonic()
        sampler.start()
        with _Recorder(
            sampler, args.trace_stage if args.tracemalloc else "", args.tracemalloc, args.sizes, args.trim, args.collect
        ) as recorder:
            reports = measured_round()
        sampler.stop()
    print(report(recorder, sampler, t_start, int(reports[-1]["responses"]), args.top))
    print(waiting_line(reports[-1]))
    print(MEASURED, json.dumps(measured(sampler, reports[-1], args.window)))
    if args.tracemalloc:
        print(tracemalloc_report(sampler, t_start, args.tracemalloc, args.top, args.trace_left))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
