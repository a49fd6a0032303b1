"""Live progress: the pure fold of metric polls into a display line, and the display itself."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beamcrawl.pipelines.live import ProgressDisplay, flatten
from beamcrawl.pipelines.progress import (
    STAGES,
    Progress,
    Snapshot,
    format_line,
    human_bytes,
    pages_per_second,
    running_stage,
)

FIELDS = ("responses", "robots.txt", "settled", "hosts", "active", "waiting on delay", "errors", "pages/s")


def metrics(**kw: int) -> dict[str, int]:
    """A metrics map from keyword names, ``__`` standing for ``/``."""
    return {k.replace("__", "/"): v for k, v in kw.items()}


def test_snapshot_reads_the_counters_the_display_needs():
    snap = Snapshot.of(
        metrics(
            assign_slots__results_planned=500, fetch__received=120, fetch__success=100,
            fetch__hosts_started=40, fetch__hosts_finished=10, fetch__waits_started=70, fetch__waits_finished=45,
            fetch__bytes=123456, fetch__error=3, parse__error=1, errors__parse__ValueError=2, freshness__error=9,
        ),
        at=10.0,
    )  # fmt: skip
    assert (snap.planned, snap.settled, snap.fetched) == (500, 120, 100)
    assert (snap.hosts_active, snap.hosts_waiting) == (30, 25)
    assert snap.bytes == 123456
    assert snap.errors == 6  # every stage's error counters, dead-letter counters included


def test_snapshot_of_nothing_is_zero_and_ignores_non_numbers():
    snap = Snapshot.of({"fetch/latency_ms": {"count": 3}, "fetch/success": "x"}, at=0)
    assert (snap.planned, snap.fetched, snap.errors, snap.hosts_active) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "before, after, expected",
    [
        (None, {}, "starting"),
        (None, {"select/due_rows": 5}, "planning"),
        ({"fetch/received": 5}, {"fetch/received": 9}, "fetch"),
        ({"fetch/received": 9, "parse/received": 3}, {"fetch/received": 9, "parse/received": 8}, "parse"),
        ({"url_seen/offered": 1}, {"url_seen/offered": 5, "store/received": 2}, "writes"),
        ({"fetch/received": 9}, {"fetch/received": 9}, "starting"),  # nothing moved: the last stage stays
        # Host rows written beside the fetch, as hosts finish early: still the fetch.
        ({"fetch/received": 5, "record/hosts_rows": 1}, {"fetch/received": 9, "record/hosts_rows": 3}, "fetch"),
        ({"parse/received": 5}, {"parse/received": 7, "record/hosts_rows": 3}, "parse"),
        ({"fetch/received": 9}, {"fetch/received": 9, "record/hosts_rows": 3}, "writes"),  # after the fetch
    ],
)
def test_running_stage_is_the_last_stage_that_moved(before, after, expected):
    prev = None if before is None else Snapshot.of(before, 0)
    assert running_stage(prev, Snapshot.of(after, 1)) == expected


def test_every_stage_can_be_recognised():
    names = [name for name, _ in STAGES]
    assert names == ["planning", "fetch", "parse", "content seen", "URL seen", "writes"]
    for name, keys in STAGES:
        assert running_stage(Snapshot.of({}, 0), Snapshot.of({keys[0]: 1}, 1)) == name


def test_pages_per_second_over_the_polls():
    hist = [Snapshot.of({"fetch/success": n}, t) for t, n in ((0, 0), (1, 40), (2, 100))]
    assert pages_per_second(hist) == pytest.approx(50.0)
    assert pages_per_second(hist[:1]) == 0.0


def test_host_rows_written_during_the_fetch_do_not_end_its_window():
    """A host done early has its row written while the others fetch: the line must still
    say fetch, with the window's time left, not 'writes' and 'window over'."""
    prog = Progress(window=60.0, started=100.0)
    prog.update({"assign_slots/results_planned": 900, "fetch/received": 10, "fetch/hosts_started": 30}, 101.0)
    prog.update(
        {"assign_slots/results_planned": 900, "fetch/received": 300, "parse/received": 250,
         "fetch/hosts_started": 30, "record/hosts_rows": 100},
        111.0,
    )  # fmt: skip
    line = format_line(3, prog.fields(111.0))
    assert prog.phase(111.0) == "fetch" and prog.window_left(111.0) == pytest.approx(50.0)
    assert "[fetch]" in line and "50s left in window" in line, line


def test_window_clock_starts_when_the_fetch_is_seen_and_the_stage_after_it():
    prog = Progress(window=10.0, started=100.0)
    prog.update({"select/due_rows": 50, "assign_slots/results_planned": 40}, 101.0)
    assert prog.window_left(101.0) is None and prog.phase(101.0) == "planning"
    prog.update(
        {"assign_slots/results_planned": 40, "fetch/received": 4, "fetch/success": 4, "parse/received": 2}, 103.0
    )
    assert prog.window_left(104.0) == pytest.approx(9.0)
    assert prog.phase(104.0) == "fetch"  # parse runs beside the fetch during the window
    prog.update(
        {"assign_slots/results_planned": 40, "fetch/received": 40, "parse/received": 40, "url_seen/offered": 9}, 106.0
    )
    assert prog.window_left(106.0) == 0.0  # all planned fetches settled: over before the window
    prog.update(
        {"assign_slots/results_planned": 40, "fetch/received": 40, "parse/received": 40, "url_seen/offered": 9}, 114.0
    )
    assert prog.window_left(114.0) == 0.0
    assert prog.phase(114.0) == "URL seen"
    fields = prog.fields(114.0)
    assert (fields["planned"], fields["settled"]) == (40, 40)


def test_format_line_carries_every_field():
    prog = Progress(window=20.0, started=0.0)
    prog.update(
        metrics(assign_slots__results_planned=2000, fetch__received=840, fetch__success=812, fetch__hosts_started=150,
                fetch__waits_started=131, fetch__bytes=9_600_000, fetch__error=2), 5.0,
    )  # fmt: skip
    prog.update(
        metrics(assign_slots__results_planned=2000, fetch__received=1000, fetch__success=883, fetch__hosts_started=150,
                fetch__waits_started=131, fetch__bytes=9_700_000, fetch__error=2), 6.0,
    )  # fmt: skip
    line = format_line(3, prog.fields(12.0))
    assert line.startswith("round 3 [fetch] 0:12 883 responses (0 robots.txt), 1,000/2,000 settled")
    assert "hosts 150 active (131 waiting on delay)" in line
    assert "9.7 MB" in line and "errors 2" in line and "71.0 pages/s" in line and "13s left in window" in line
    assert "\n" not in line


@given(
    st.dictionaries(
        st.sampled_from(
            [k for _, keys in STAGES for k in keys]
            + [
                "fetch/success",
                "fetch/bytes",
                "fetch/error",
                "fetch/hosts_started",
                "fetch/hosts_finished",
                "fetch/waits_started",
                "fetch/waits_finished",
                "assign_slots/results_planned",
            ]
        ),
        st.integers(min_value=0, max_value=10**12),
    ),
    st.floats(min_value=0, max_value=1e6),
)
def test_any_metrics_make_one_line(m, now):
    prog = Progress(window=5.0, started=0.0)
    prog.update(m, now)
    line = format_line(1, prog.fields(now))
    assert line.startswith("round 1 [") and "\n" not in line
    assert all(f in line for f in FIELDS)


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 999, 1500, 2_500_000, 3e9)] == ["0 B", "999 B", "1.5 kB", "2.5 MB", "3.0 GB"]


class _Key:
    def __init__(self, ns, name):
        self.metric = type("M", (), {"namespace": ns, "name": name})()


class _Result:
    def __init__(self, ns, name, committed, attempted):
        self.key, self.committed, self.attempted = _Key(ns, name), committed, attempted


def test_flatten_prefers_attempted_and_skips_system_metrics():
    answer = {"counters": [
        _Result("fetch", "success", None, 7), _Result("fetch", "success", 2, 3),  # two steps, summed
        _Result("fetch", "bytes", 10, None), _Result("", "metric:element_count:v1", 5, 5),
    ]}  # fmt: skip
    assert flatten(answer) == {"fetch/success": 10, "fetch/bytes": 10}


def test_plain_display_prints_one_line_per_interval_and_a_final_one(monkeypatch):
    monkeypatch.setenv("BEAMCRAWL_PROGRESS_EVERY", "10")
    out = io.StringIO()
    prog = Progress(window=5.0, started=1000.0)
    display = ProgressDisplay(2, prog, out, mode="plain")
    display.next_line = 1010.0
    for t in range(1000, 1025):
        prog.update({"fetch/received": t - 1000, "fetch/success": t - 1000}, float(t))
        display.show(float(t))
    display.show(1025.0, final=True)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 10 s, at 20 s, and the final line
    assert lines[0].startswith("round 2 [fetch] 0:10 10 responses (0 robots.txt)")
    assert lines[-1].startswith("round 2 [done]")


def test_bar_display_draws_a_tqdm_bar():
    out = io.StringIO()
    prog = Progress(window=5.0, started=0.0)
    display = ProgressDisplay(4, prog, out, mode="bar")
    prog.update({"assign_slots/results_planned": 10, "fetch/received": 5, "fetch/success": 4}, 1.0)
    display.show(1.0)
    display.show(2.0, final=True)
    text = out.getvalue()
    assert "round 4" in text and "4 responses" in text and "5/10 settled" in text and "50%" in text
    assert "hosts 0 active (0 waiting on delay)" in text and "pages/s" in text and "s left in window" in text


def test_a_low_poll_never_steps_the_display_back():
    prog = Progress(window=5.0, started=0.0)
    prog.update({"fetch/received": 10, "fetch/success": 9}, 1.0)
    snap = prog.update({"fetch/received": 4, "fetch/success": 3}, 2.0)  # a bundle between hands
    assert (snap.settled, snap.fetched) == (10, 9)
    assert prog.update({"fetch/received": 12, "fetch/success": 11}, 3.0).settled == 12


def test_counts_agree_with_the_round_summary():
    """Issue 27 item 12: settled never above planned (a robots.txt redirect gives a result per
    hop), robots.txt named among the responses, no window left once the fetch is over, and
    the last line's rate the whole round's, as the summary gives it."""
    from beamcrawl.pipelines.progress import round_rate

    prog = Progress(window=30.0, started=100.0)
    prog.update(metrics(assign_slots__results_planned=100, fetch__received=110, fetch__success=110,
                        fetch__robots_fetches=60, fetch__hosts_started=3), 102.0)  # fmt: skip
    fields = prog.fields(103.0)
    assert (fields["settled"], fields["planned"], fields["robots"]) == (100, 100, 60)
    line = format_line(1, fields)
    assert "110 responses (60 robots.txt), 100/100 settled" in line
    prog.update(metrics(assign_slots__results_planned=100, fetch__received=110, fetch__success=110,
                        fetch__robots_fetches=60, fetch__hosts_started=3, url_seen__offered=5), 104.0)  # fmt: skip
    assert prog.stage == "URL seen" and "window over" in format_line(1, prog.fields(104.0))
    final = prog.fields(105.5, final=True)
    assert final["stage"] == "done" and final["pages_per_s"] == round_rate(110, 5.5)
