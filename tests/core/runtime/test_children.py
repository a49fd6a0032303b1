"""A server started with children.dying_with_parent ends when its launcher is killed; it is the
server's own process (exec'd, same pid); nothing of the launcher runs in the child before it."""

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
    from beamcrawl.core.runtime.children import dying_with_parent
    code = (
        "import signal, sys, time\\n"
        "def term(*a):\\n"
        "    print('term', flush=True); sys.exit(0)\\n"
        "signal.signal(signal.SIGTERM, term)\\n"
        "import os\\n"
        "print('ready', os.getpid(), flush=True)\\n"
        "time.sleep(120)\\n"
    )
    cmd = [sys.executable, "-c", code]
    cmd = dying_with_parent(cmd) if sys.argv[1] == "hook" else cmd
    child = subprocess.Popen(cmd, stdout=open(sys.argv[2], "w"))
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
    assert said.split() == ["ready", str(child), "term"]  # stopped by SIGTERM: its own clean-up ran
    # the pid the launcher holds is the server's own: the wrapper became it


def test_without_the_hook_the_server_outlives_its_launcher(tmp_path) -> None:
    # What the hook is for: the control shows the orphan the hook prevents.
    child, said = _launch_and_kill(tmp_path, "none", wait=2)
    try:
        assert _alive(child) and said.split() == ["ready", str(child)]
    finally:
        os.kill(child, signal.SIGKILL)


# A launcher with a fork handler (as gRPC registers them): it marks a file if it ever runs in
# a child. Starting the server must run nothing of the launcher's in the child; a preexec_fn
# (the control) forks the launcher and runs its handlers there.
_FORKED = textwrap.dedent(
    """
    import os, subprocess, sys
    from beamcrawl.core.runtime.children import dying_with_parent
    marker = sys.argv[2]
    os.register_at_fork(after_in_child=lambda: open(marker, "w").write("ran in the child"))
    cmd = [sys.executable, "-c", "print('server')"]
    if sys.argv[1] == "wrapped":
        proc = subprocess.run(dying_with_parent(cmd), capture_output=True, text=True)
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=lambda: None)
    print(proc.stdout.strip())
    """
)


@pytest.mark.parametrize("mode", ["wrapped", "preexec_fn"])
def test_nothing_of_the_launcher_runs_in_the_child_before_the_server(tmp_path, mode: str) -> None:
    marker = tmp_path / "marker"
    out = subprocess.run([sys.executable, "-c", _FORKED, mode, str(marker)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "server", out.stderr
    assert marker.exists() == (mode == "preexec_fn")


def test_a_program_that_is_not_there_fails_where_popen_would() -> None:
    from beamcrawl.core.runtime.children import dying_with_parent

    with pytest.raises(FileNotFoundError):
        dying_with_parent(["no-such-program-beamcrawl", "-x"])
