"""Waits that a stop signal ends promptly, whichever of the process's threads it lands on.

The kernel hands a signal sent to a process to any thread that does not block it; CPython
acts on it on the main thread only. These tests aim SIGINT and SIGTERM at a *named thread*
(tgkill) of a child process that waits in :func:`run_tool` or :func:`sleep`, which is what
happened, rarely, to a Ctrl-C sent to ``beamcrawl crawl`` while it built Prism: the signal
went to a BLAS thread and the CLI sat out the whole build.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.core.runtime import interruptible
from beamcrawl.core.runtime.interruptible import run_tool
from thread_signals import (
    alive,
    stop_signals_as_from_a_terminal,
    tgkill,
    settled_threads_taking,
)  # tests/thread_signals.py

# A child that starts a thread of its own (as numpy's BLAS, gRPC or the fetch loop do), then
# waits in the helper named by argv[1]; it says which pids to watch and how it ended.
CHILD = textwrap.dedent(
    """
    import os, sys, threading, time
    from beamcrawl.core.runtime import interruptible

    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    out = sys.argv[2]
    try:
        if sys.argv[1] == "tool":
            # The tool starts a grandchild (as go starts its compilers) and says both pids.
            interruptible.run_tool(["sh", "-c", f"sleep 600 & echo $$ $! > {out}.pids; wait"], timeout=600)
        else:
            open(out + ".pids", "w").write("")
            interruptible.sleep(600)
    except KeyboardInterrupt:
        open(out, "w").write("interrupted")
        sys.exit(130)
    open(out, "w").write("returned")
    """
)


def start_child(tmp_path: Path, what: str) -> tuple[subprocess.Popen[bytes], Path, list[int]]:
    out = tmp_path / "ended"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, what, str(out)],
        cwd=Path(__file__).parents[3],
        preexec_fn=stop_signals_as_from_a_terminal,
    )
    pids_file = Path(f"{out}.pids")
    expected = 2 if what == "tool" else 0  # the tool's shell and its sleep; none for a sleep

    def ready() -> bool:
        return pids_file.exists() and len(pids_file.read_text().split()) == expected

    deadline = time.monotonic() + 60
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # the waiting call has begun
    pids = [int(p) for p in pids_file.read_text().split()]
    assert child.poll() is None
    return child, out, pids


# A SIGTERM during a plain sleep keeps its default action (the process ends at once, from
# any thread): there is nothing to clean up there, so only the tool turns it into an interrupt.
@pytest.mark.parametrize(("what", "sig"), [("tool", signal.SIGINT), ("tool", signal.SIGTERM), ("sleep", signal.SIGINT)])
def test_a_stop_signal_to_any_thread_ends_the_wait_promptly(tmp_path, what, sig):
    """Aimed at the main thread, then at the child's other thread (the case the bug
    needed; before the fix it waited the whole 600 s)."""
    for target_index in range(2):
        run_dir = tmp_path / f"t{target_index}"
        run_dir.mkdir()
        child, out, pids = start_child(run_dir, what)
        try:
            targets = settled_threads_taking(child.pid, sig)
            assert targets[0] == child.pid and len(targets) >= 2, targets
            target = targets[target_index]
            sent = time.monotonic()
            tgkill(child.pid, target, sig)
            child.wait(timeout=30)
            took = time.monotonic() - sent
        finally:
            child.kill()
        assert child.returncode == 130 and out.read_text() == "interrupted"
        assert took < 10, f"{what}: the signal to thread {target} was acted on after {took:.1f}s"
        # The tool's whole group is gone: the shell and the sleep it started.
        for pid in pids:
            deadline = time.monotonic() + 10
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(pid), f"process {pid} of the interrupted tool is still running"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(delay=st.floats(min_value=0.0, max_value=0.4))
def test_a_signal_at_any_moment_of_the_tool_leaves_nothing_running(tmp_path_factory, delay):
    """A SIGTERM whenever it comes (before the tool is started, while it starts, while it
    runs) ends the wait with KeyboardInterrupt and never leaves the tool running."""
    tmp = tmp_path_factory.mktemp("moment")
    marker = tmp / "tool-pid"
    script = textwrap.dedent(
        f"""
        import sys
        from beamcrawl.core.runtime import interruptible
        print("ready", flush=True)
        try:
            interruptible.run_tool(["sh", "-c", "echo $$ > {marker}; exec sleep 600"], timeout=600)
        except KeyboardInterrupt:
            sys.exit(130)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[3],
        preexec_fn=stop_signals_as_from_a_terminal,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(delay)
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
    finally:
        child.kill()
    assert child.returncode in (130, -signal.SIGTERM)  # before the handler is in place: killed
    if marker.exists() and marker.read_text().strip():
        tool = int(marker.read_text())
        deadline = time.monotonic() + 10
        while alive(tool) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(tool), "the tool outlived its interrupted wait"


@settings(max_examples=40, deadline=None)
@given(
    stdout=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"), max_size=200),
    stderr=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"), max_size=200),
    code=st.integers(min_value=0, max_value=255),
    big=st.sampled_from([0, 1 << 20]),
)
def test_run_tool_returns_what_subprocess_run_returns(stdout, stderr, code, big):
    """Output (past a pipe's buffer too, read in many slices), errors and exit status are
    the same as ``subprocess.run(capture_output=True, text=True)`` gives."""
    prog = (
        "import sys; "
        f"sys.stdout.write({stdout!r} + 'x' * {big}); sys.stderr.write({stderr!r} + 'y' * {big}); sys.exit({code})"
    )
    cmd = [sys.executable, "-c", prog]
    got = run_tool(cmd, timeout=60)
    want = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert (got.args, got.returncode, got.stdout, got.stderr) == (want.args, want.returncode, want.stdout, want.stderr)


def test_a_tool_past_its_timeout_is_killed_with_its_children(tmp_path):
    pids = tmp_path / "pids"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_tool(["sh", "-c", f"sleep 600 & echo $$ $! > {pids}; wait"], timeout=1.0)
    assert time.monotonic() - started < 10
    for pid in (int(p) for p in pids.read_text().split()):
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid)


def test_a_missing_tool_raises_as_subprocess_does():
    with pytest.raises(FileNotFoundError):
        run_tool(["/nonexistent/tool"], timeout=5)


def test_sleep_sleeps_its_time():
    started = time.monotonic()
    interruptible.sleep(0.5)
    assert 0.5 <= time.monotonic() - started < 2
    interruptible.sleep(-1)  # nothing to wait for
