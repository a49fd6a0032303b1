"""A server started with children.parent_death_hook ends when its launcher is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# The launcher: starts a long sleeper (with or without the hook), prints its pid, then waits
# to be killed. The sleeper writes "term" to its output if SIGTERM reaches it.
_LAUNCHER = textwrap.dedent(
    """
    import subprocess, sys, time
    from beamcrawl.core.runtime.children import parent_death_hook
    code = (
        "import signal, sys, time\\n"
        "def term(*a):\\n"
        "    print('term', flush=True); sys.exit(0)\\n"
        "signal.signal(signal.SIGTERM, term)\\n"
        "print('ready', flush=True)\\n"
        "time.sleep(120)\\n"
    )
    hook = parent_death_hook() if sys.argv[1] == "hook" else None
    child = subprocess.Popen([sys.executable, "-c", code], stdout=open(sys.argv[2], "w"), preexec_fn=hook)
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _launch_and_kill(tmp_path, mode: str, wait: float) -> tuple[int, str]:
    out = tmp_path / f"{mode}.txt"
    launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, mode, str(out)], stdout=subprocess.PIPE, text=True)
    child = int(launcher.stdout.readline())
    deadline = time.monotonic() + 30
    while "ready" not in out.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    launcher.send_signal(signal.SIGKILL)  # no finally, no clean-up: a crash
    launcher.wait()
    deadline = time.monotonic() + wait
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    return child, out.read_text()


def test_a_server_with_the_hook_gets_sigterm_when_its_launcher_is_killed(tmp_path) -> None:
    child, said = _launch_and_kill(tmp_path, "hook", wait=10)
    assert not _alive(child), "the server outlived its killed launcher"
    assert said.split() == ["ready", "term"]  # stopped by SIGTERM: its own clean-up ran


def test_without_the_hook_the_server_outlives_its_launcher(tmp_path) -> None:
    # What the hook is for: the control shows the orphan the hook prevents.
    child, said = _launch_and_kill(tmp_path, "none", wait=2)
    try:
        assert _alive(child) and said.split() == ["ready"]
    finally:
        os.kill(child, signal.SIGKILL)
