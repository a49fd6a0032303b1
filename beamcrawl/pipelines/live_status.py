"""The live status of a crawl: ``OUT/status.json``, rewritten by the running crawl, read by
``beamcrawl status`` and the API's ``GET /v1/status``.

The crawl rewrites the file (a whole new file renamed over the old one, so a reader never
sees half of it) when a round starts and ends and, while a round runs, at each poll of the
live progress (about once a second, at most every :data:`WRITE_EVERY` seconds): the same
fields as the progress bar, from the same metrics. It lives with the outputs, not in the
store, so it works whatever the store. A reader judges whether the crawl it describes is
still alive (its process, on the same machine) and adds the last round's report.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import socket
import time
from typing import Any

from beamcrawl.core.runtime import files

__all__ = ["STATUS_FILE", "LiveStatus", "read_status", "status_lines"]

STATUS_FILE = "status.json"
WRITE_EVERY = 1.0
REMOTE_WRITE_EVERY = 10.0  # an object store: one object write per 10 s is plenty
LIVE_FIELDS = ("stage", "fetched", "robots", "settled", "planned", "errors", "pages_per_s", "bytes",
               "hosts_active", "hosts_waiting")  # fmt: skip


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class LiveStatus:
    """The writer, owned by one run of the crawl loop."""

    def __init__(self, out: str, crawl_id: str = "", store: str = "") -> None:
        self.out = out
        self.path = files.join(out, STATUS_FILE)
        self.every = REMOTE_WRITE_EVERY if files.is_remote(out) else WRITE_EVERY
        self.state: dict[str, Any] = {
            "state": "starting", "pid": os.getpid(), "host": socket.gethostname(), "crawl_id": crawl_id,
            "store": store, "run_started_at": _iso(time.time()), "round": None, "round_started_at": None,
            "live": None, "window_ends_at": None, "last_round": None, "updated_at": None,
        }  # fmt: skip
        self.last_write = 0.0

    def _write(self) -> None:
        now = time.time()
        self.state["updated_at"] = _iso(now)
        files.write_bytes(self.path, (json.dumps(self.state, indent=1) + "\n").encode())
        self.last_write = now

    def between_rounds(self, last_round: int | None = None) -> None:
        if last_round is not None:
            self.state["last_round"] = last_round
        self.state.update(state="between rounds", round=None, round_started_at=None, live=None, window_ends_at=None)
        self._write()

    def round_started(self, round_no: int) -> None:
        self.state.update(state="running", round=round_no, round_started_at=_iso(time.time()), live=None)
        self._write()

    def progress(self, round_no: int, fields: dict[str, Any], now: float, final: bool) -> None:
        """A live-progress sink (pipelines/live.py)."""
        if not final and now - self.last_write < self.every:
            return
        self.state["round"] = round_no
        self.state["live"] = {k: fields.get(k) for k in LIVE_FIELDS}
        left = fields.get("window_left")
        self.state["window_ends_at"] = _iso(now + float(left)) if left is not None else None
        self._write()

    def stopped(self, how: str) -> None:
        """The run ended: ``finished``, ``interrupted`` or ``failed: <why>``."""
        self.state.update(state="stopped", how=how, round=None, round_started_at=None, live=None, window_ends_at=None)
        self._write()


def _alive(status: dict[str, Any]) -> bool:
    """Whether the process that wrote ``status`` still runs (only knowable on its machine)."""
    if status.get("state") == "stopped":
        return False
    if status.get("host") != socket.gethostname() or not isinstance(status.get("pid"), int):
        return True
    try:
        os.kill(status["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _last_report(out: str) -> dict[str, Any] | None:
    paths = [p for p in files.list_files(files.join(out, "reports")) if re.search(r"round-\d+\.json$", p)]
    for path in sorted(paths, reverse=True):
        try:
            with files.open_read(path) as fh:
                report = json.loads(fh.read().decode("utf-8"))
            return report if isinstance(report, dict) else None
        except (OSError, ValueError):
            continue
    return None


def read_status(out: str) -> dict[str, Any] | None:
    """What ``OUT/status.json`` says, judged: ``running`` (a round runs now), ``alive`` (the
    crawl's process), and ``last_report`` (the latest round's report); None when ``out`` holds
    neither a status nor a report."""
    status: dict[str, Any] | None = None
    try:
        with files.open_read(files.join(out, STATUS_FILE)) as fh:
            status = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        status = None
    report = _last_report(out)
    if status is None and report is None:
        return None
    status = dict(status or {"state": "unknown"})
    alive = _alive(status) if "pid" in status else False
    if not alive and status.get("state") not in ("stopped", "unknown"):
        status.update(how=f"ended unannounced: its process {status.get('pid')} is gone", state="stopped")
    status["alive"] = alive
    status["running"] = alive and status.get("state") == "running"
    status["last_report"] = report
    return status


def status_lines(out: str, status: dict[str, Any], now: float | None = None) -> list[str]:
    """``beamcrawl status``'s answer, in lines."""
    from beamcrawl.pipelines.progress import describe, responses
    from beamcrawl.pipelines.round_summary import summary

    now = now or time.time()
    lines = [f"crawl {out}" + (f" (store {status['store']})" if status.get("store") else "")]
    if status["running"]:
        since = status.get("round_started_at") or "?"
        lines.append(
            f"round {status.get('round')}: running since {since} (pid {status.get('pid')} on {status.get('host')})"
        )
        live = status.get("live")
        if live:
            ends = status.get("window_ends_at")
            fields = dict(live, window_left=None, elapsed=0)
            if ends:
                fields["window_left"] = max(0.0, calendar.timegm(time.strptime(ends, "%Y-%m-%dT%H:%M:%SZ")) - now)
            lines.append(
                f"  [{live['stage']}] {responses(live)}, {live['settled']:,}/{live['planned']:,} settled | {describe(fields)}"
            )
            lines.append(f"  fetch window ends {ends}" if ends else "  fetch window: not started")
            lines.append(f"  (updated {status.get('updated_at')})")
        else:
            lines.append("  no live counters yet (the job is starting, or progress is off)")
    elif status.get("alive"):
        lines.append(f"no round running: between rounds (pid {status.get('pid')} on {status.get('host')})")
    else:
        how = status.get("how")
        lines.append("no round running" + (f" (the last run {how}, {status.get('updated_at')})" if how else ""))
    report = status.get("last_report")
    if report:
        lines.append("last round:")
        lines.extend(summary(report).splitlines())
    return lines
