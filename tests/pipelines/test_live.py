"""Live progress reads a running job's metrics on every local runner the suite uses.

A one-element job whose DoFn counts slowly (one increment every 0.4 s, 12 in all, inside
one bundle) runs through ``live.run``; the poller must see the count part-way, and the
round's own metrics read after the job (``launch.round_metrics``) must still be the final ones.
"""

from __future__ import annotations

import io
import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.pipelines import live
from beamcrawl.pipelines.launch import round_metrics
from beamcrawl.pipelines.runners import prism_binary

STEPS = 12


def _slow_counter() -> beam.DoFn:
    # Defined in a function so that the pickler ships the class by value to worker processes.
    from apache_beam.metrics import Metrics

    class SlowCount(beam.DoFn):
        def __init__(self) -> None:
            self.ticks = Metrics.counter("fetch", "received")

        def process(self, element):
            for _ in range(STEPS):
                time.sleep(0.4)
                self.ticks.inc()
            yield element

    return SlowCount()


RUNNERS = {
    "in-process": ["--runner=FnApiRunner"],
    "multi_processing": ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "prism": ["--runner=PrismRunner"],
}


@pytest.mark.parametrize("name", list(RUNNERS))
def test_the_poller_sees_a_running_bundle_count(name, monkeypatch):
    args = list(RUNNERS[name])
    if name == "prism":
        args.append(f"--prism_location={prism_binary()}")
    monkeypatch.setenv("BEAMCRAWL_PROGRESS", "plain")
    monkeypatch.setenv("BEAMCRAWL_PROGRESS_EVERY", "0")  # a line for every poll
    p = live.pipeline(PipelineOptions(flags=args))
    _ = p | beam.Create([1]) | beam.ParDo(_slow_counter())
    stream = io.StringIO()
    result = live.run(p, round_no=1, window=5.0, stream=stream)
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("round 1 [")]
    counts = [int(line.split(" settled")[0].rsplit(", ", 1)[1].split("/")[0]) for line in lines]
    assert any(0 < n < STEPS for n in counts[:-1]), lines  # seen while the bundle ran
    assert counts == sorted(counts)  # never steps back
    assert counts[-1] == STEPS and lines[-1].startswith("round 1 [done]")
    assert round_metrics(result)["fetch/received"] == STEPS  # the result's own answer is intact


def test_progress_off_runs_the_plain_runner(monkeypatch):
    monkeypatch.setenv("BEAMCRAWL_PROGRESS", "off")
    p = live.pipeline(PipelineOptions(flags=["--runner=FnApiRunner"]))
    assert not isinstance(p.runner, live.LiveFnApiRunner)
    _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x)
    stream = io.StringIO()
    live.run(p, round_no=1, window=1.0, stream=stream)
    assert stream.getvalue() == ""


@pytest.mark.parametrize("columns", [110, 0])  # 0: a tty that reports no width
def test_on_a_terminal_the_progress_is_a_bar_redrawn_in_place(monkeypatch, columns):
    import os
    import pty
    import threading

    monkeypatch.delenv("BEAMCRAWL_PROGRESS", raising=False)
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    tty = os.fdopen(slave, "w", encoding="utf-8")
    assert tty.isatty()
    received = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p = live.pipeline(PipelineOptions(flags=["--runner=FnApiRunner"]))
    _ = p | beam.Create([1]) | beam.ParDo(_slow_counter())
    live.run(p, round_no=7, window=5.0, stream=tty)
    tty.close()
    reader.join(timeout=10)
    os.close(master)
    text = received.decode("utf-8", "replace")
    if columns == 0:  # no width to place a bar in (issue 27 item 12: it drew blank lines): plain lines
        lines = text.replace("\r\n", "\n").splitlines()
        assert "█" not in text and all(line.strip() for line in lines), text
        assert lines[-1].startswith("round 7 [done]") and f", {STEPS}/" in lines[-1]
        return
    assert "\r" in text and "█" in text  # redrawn in place, with a bar
    assert f"{STEPS}/{STEPS} settled" in text and "round 7 done" in text
    assert "waiting on delay" in text and "pages/s" in text
    assert "round 7 [" not in text  # no plain lines on a terminal
