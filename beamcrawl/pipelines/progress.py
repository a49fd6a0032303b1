"""What a running round looks like from its Beam metrics: pure functions, no runner, no I/O.

The launcher polls the job's metrics about once a second (``pipelines/live.py``) and hands
each poll here as a flat ``{"namespace/name": value}`` map (the same shape the round report's
``metrics`` has). :class:`Progress` folds the polls into what an operator wants to see: pages
fetched of pages planned, hosts fetching and hosts waiting on their politeness delay, bytes,
errors, pages per second, the time left in the fetch window, and which stage is running once
the window is over (parse, content seen, URL seen, writes). :func:`format_line` makes one
plain line of it (logs, CI); the terminal bar shows the same fields.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

# The stages in the order a round's elements go through them, each with the counters that
# move while it works. The last stage whose counters moved since the previous poll is the
# one running (stages overlap: parse runs in the fetch's process during the window).
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("planning", ("select/due_rows", "assign_slots/hosts_planned", "assign_slots/hosts_idle")),
    ("fetch", ("fetch/received",)),
    ("parse", ("parse/received",)),
    ("content seen", ("content_seen/pages_checked",)),
    ("URL seen", ("url_seen/offered", "url_seen/buckets")),
    (
        "writes",
        ("store/received", "publish_pages/received", "publish_links/received", "record/hosts_rows", "record/urls_rows"),
    ),
)

RATE_SPAN = 5.0  # seconds of polls the pages/s figure is averaged over
# Stages that start only once the fetch is over (after a shuffle of the fetch's output).
AFTER_FETCH = ("URL seen", "writes")
# Stages whose counters move only while the fetch runs (the parse is fused with it).
BESIDE_FETCH = ("fetch", "parse")


def round_rate(responses: float, seconds: float) -> float:
    """A whole round's responses per second, as its report and summary give it (the last
    progress line shows this figure, so the two agree)."""
    return round(responses / max(seconds, 1e-9), 2)


def _is_error(key: str) -> bool:
    """A stage's failure counter (``fetch/error``, ``parse/error``, a dead-letter
    ``errors/<stage>/<type>``), not ``freshness/error``: a page whose server answered with
    an error, which the fetch counted as a response."""
    return key.startswith("errors/") or (key.endswith("/error") and not key.startswith("freshness/"))


def _num(metrics: Mapping[str, object], key: str) -> int:
    value = metrics.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


@dataclass(frozen=True)
class Snapshot:
    """The numbers one poll of the metrics gives."""

    at: float
    planned: int  # results the fetch will give: URLs given slots, robots.txt, disallowed URLs
    settled: int  # planned fetches with an outcome (fetched, failed, disallowed, deferred)
    fetched: int  # responses (robots.txt among them, as in the round summary)
    robots: int  # of those, robots.txt answers
    hosts_active: int  # hosts being crawled now (holding one of the loop's host slots)
    hosts_waiting: int  # of those, hosts sleeping until their politeness delay is up
    bytes: int
    errors: int  # fetch errors plus every stage's error counters
    stage_counts: tuple[int, ...]  # one total per STAGES entry

    @classmethod
    def of(cls, metrics: Mapping[str, object], at: float) -> "Snapshot":
        """A snapshot of a flat ``{"namespace/name": value}`` metrics map."""
        errors = sum(_num(metrics, k) for k in metrics if _is_error(k))
        return cls(
            at=at,
            planned=_num(metrics, "assign_slots/results_planned"),
            settled=_num(metrics, "fetch/received"),
            fetched=_num(metrics, "fetch/success"),
            robots=_num(metrics, "fetch/robots_fetches"),
            hosts_active=max(0, _num(metrics, "fetch/hosts_started") - _num(metrics, "fetch/hosts_finished")),
            hosts_waiting=max(0, _num(metrics, "fetch/waits_started") - _num(metrics, "fetch/waits_finished")),
            bytes=_num(metrics, "fetch/bytes"),
            errors=errors,
            stage_counts=tuple(sum(_num(metrics, k) for k in keys) for _, keys in STAGES),
        )


def running_stage(previous: Snapshot | None, current: Snapshot, last: str = "starting") -> str:
    """The stage running now: the last one (in round order) whose counters moved since
    ``previous``; ``last`` when nothing moved (a stage busy between two counter updates).

    While the fetch or the parse beside it moves and not every planned fetch has its
    outcome, a write counter that moves too is a write made beside the fetch (the host rows
    of hosts done early are written as they finish), not the stages after the fetch: those
    start only once it is over."""
    if previous is None:
        moved = [i for i, n in enumerate(current.stage_counts) if n > 0]
    else:
        moved = [i for i, (a, b) in enumerate(zip(previous.stage_counts, current.stage_counts)) if b > a]
    fetch_over = current.planned > 0 and current.settled >= current.planned and not current.hosts_active
    if not fetch_over and any(STAGES[i][0] in BESIDE_FETCH for i in moved):
        moved = [i for i in moved if STAGES[i][0] not in AFTER_FETCH]
    return STAGES[moved[-1]][0] if moved else last


def pages_per_second(history: "deque[Snapshot] | list[Snapshot]") -> float:
    """Responses per second over the polls in ``history`` (oldest first)."""
    if len(history) < 2:
        return 0.0
    first, last = history[0], history[-1]
    span = last.at - first.at
    return max(0, last.fetched - first.fetched) / span if span > 0 else 0.0


@dataclass
class Progress:
    """Folds polls into the display state. ``window`` is the round's fetch window in seconds;
    the window's clock starts at the first poll that sees the fetch under way."""

    window: float
    started: float
    history: deque[Snapshot] = field(default_factory=deque)
    stage: str = "starting"
    fetch_began: float | None = None
    latest: Snapshot | None = None
    finished_at: float | None = None  # when the job was done (its last poll)

    peaks: dict[str, float] = field(default_factory=dict)

    def update(self, metrics: Mapping[str, object], now: float) -> Snapshot:
        # Every counter read here only grows; a poll that lands while a runner hands a
        # finished bundle's figures over can read one low, so each is held at its peak.
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and value > self.peaks.get(key, 0):
                self.peaks[key] = value
        snap = Snapshot.of(self.peaks, now)
        self.stage = running_stage(self.latest, snap, self.stage)
        if self.fetch_began is None and (snap.hosts_active or snap.settled or snap.fetched):
            self.fetch_began = now
        self.history.append(snap)
        while len(self.history) > 2 and self.history[0].at < now - RATE_SPAN:
            self.history.popleft()
        self.latest = snap
        return snap

    def window_left(self, now: float) -> float | None:
        """Seconds left in the fetch window; None before the fetch has begun."""
        if self.stage in AFTER_FETCH:
            return 0.0  # their input is the whole fetch's output: the fetch is over
        if self.fetch_began is None:
            return None
        snap = self.latest
        if snap is not None and snap.planned and snap.settled >= snap.planned and not snap.hosts_active:
            return 0.0  # every planned fetch has its outcome: the fetch is over before its window
        return max(0.0, self.fetch_began + self.window - now)

    def phase(self, now: float) -> str:
        """``fetch`` while the window runs, else the stage running (``after window: ...``)."""
        left = self.window_left(now)
        if left is None:
            return self.stage
        if left > 0 and self.stage in ("fetch", "parse", "content seen"):
            return "fetch"  # parse (and its probes) run beside the fetch during the window
        return self.stage

    def fields(self, now: float, final: bool = False) -> dict[str, object]:
        """Everything the display shows, by name (the same for the bar, the plain line, the
        crawl's log and ``beamcrawl status``). With ``final`` (the job is done) the rate is
        the whole round's, as in its summary.

        A robots.txt redirect gives a result per hop though one fetch was planned, so the
        settled count is shown no higher than the planned one."""
        snap = self.latest or Snapshot.of({}, now)
        return {
            "stage": "done" if final else self.phase(now),
            "fetched": snap.fetched,
            "robots": snap.robots,
            "settled": min(snap.settled, snap.planned) if snap.planned else snap.settled,
            "planned": snap.planned,
            "hosts_active": snap.hosts_active,
            "hosts_waiting": snap.hosts_waiting,
            "bytes": snap.bytes,
            "errors": snap.errors,
            "pages_per_s": round_rate(snap.fetched, now - self.started) if final else pages_per_second(self.history),
            "window_left": self.window_left(now),
            "elapsed": now - self.started,
        }


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def describe(fields: Mapping[str, object]) -> str:
    """The fields after the stage and counts: hosts, bytes, errors, rate, window."""
    left = fields["window_left"]
    if fields["stage"] in (*AFTER_FETCH, "done"):
        left = 0.0
    window = "window not started" if left is None else ("window over" if left <= 0 else f"{left:.0f}s left in window")
    return (
        f"hosts {fields['hosts_active']} active ({fields['hosts_waiting']} waiting on delay) | "
        f"{human_bytes(float(fields['bytes']))} | errors {fields['errors']} | "
        f"{float(fields['pages_per_s']):.1f} pages/s | {window}"
    )


def responses(fields: Mapping[str, object]) -> str:
    """``812 responses (150 robots.txt)``: responses counted as the round summary counts them."""
    return f"{fields['fetched']:,} responses ({fields.get('robots', 0):,} robots.txt)"


def format_line(round_no: int, fields: Mapping[str, object]) -> str:
    """One plain progress line (logs and CI), e.g.::

    round 3 [fetch] 0:12 812 responses (150 robots.txt), 840/2,000 settled | hosts 150 active
    (131 waiting on delay) | 9.6 MB | errors 2 | 71.0 pages/s | 3s left in window
    """
    elapsed = int(float(fields["elapsed"]))
    return (
        f"round {round_no} [{fields['stage']}] {elapsed // 60}:{elapsed % 60:02d} "
        f"{responses(fields)}, {fields['settled']:,}/{fields['planned']:,} settled | " + describe(fields)
    )
