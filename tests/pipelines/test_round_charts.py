"""``pipelines/round_charts.py``: the charts redrawn after each round by a child process the
crawl does not wait for, one at a time, every round covered once the crawl ends.

The drawings here are stand-in children (a real process each: it notes its start in a file,
then waits until the test lets it go), so what the crawl loop waits for is seen, not timed;
the last test draws a real crawl's charts with the real command.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beamcrawl.analysis import charts
from beamcrawl.pipelines.crawl_errors import RoundInterrupted
from beamcrawl.pipelines import round_charts
from beamcrawl.pipelines.round_charts import NICENESS, SPACING, RoundCharts, child_env, drawing_command

# A drawing: notes its start, waits for the "go" file (30 s at most), says $SAY on stderr and
# $TOOK (the seconds it took, as the real one tells them) on stdout, exits $RC (a negative $RC:
# killed by that signal).
STAND_IN = """
import os, sys, time
work = sys.argv[1]
with open(os.path.join(work, "started"), "a") as fh:
    fh.write(f"{os.getpid()} {os.getsid(0)} {os.getpriority(os.PRIO_PROCESS, 0)}\\n")
end = time.time() + 30
while not os.path.exists(os.path.join(work, "go")) and time.time() < end:
    time.sleep(0.01)
sys.stderr.write(os.environ.get("SAY", ""))
sys.stderr.flush()
time.sleep(float(os.environ.get("TOOK") or 0))
print(os.environ.get("TOOK", ""))
rc = int(os.environ.get("RC", "0"))
if rc < 0:
    os.kill(os.getpid(), -rc)
sys.exit(rc)
"""


def _stand_in(tmp_path: Path) -> list[str]:
    return [sys.executable, "-c", STAND_IN, str(tmp_path)]


def _started(tmp_path: Path) -> list[tuple[int, int]]:
    """(pid, session id) of each stand-in drawing started."""
    path = tmp_path / "started"
    if not path.exists():
        return []
    return [(int(line.split()[0]), int(line.split()[1])) for line in path.read_text().splitlines()]


def _wait_for(cond, timeout: float = 30.0) -> None:
    end = time.time() + timeout
    while not cond():
        assert time.time() < end, "timed out"
        time.sleep(0.01)


def test_a_round_does_not_wait_for_its_drawing_and_drawings_never_overlap(tmp_path):
    drawer = RoundCharts(str(tmp_path), command=_stand_in(tmp_path), spacing=0)
    drawer.round_done()
    _wait_for(lambda: len(_started(tmp_path)) == 1)
    # round_done returned while the drawing still waits for "go": the next round is not held.
    drawer.round_done()  # a round ends while the first drawing is under way: no second one
    drawer.round_done()
    drawer.catch_up()
    time.sleep(0.3)
    assert len(_started(tmp_path)) == 1 and drawer.stale
    (tmp_path / "go").touch()
    drawer.close()  # waits for the first, then draws once more: the last rounds are covered
    assert len(_started(tmp_path)) == 2 and drawer.started == 2 and not drawer.stale
    drawer.close()  # closed again (the crawl closes it before its status says finished): nothing more
    assert len(_started(tmp_path)) == 2


def test_a_stale_drawing_starts_as_soon_as_the_one_under_way_has_ended(tmp_path):
    drawer = RoundCharts(str(tmp_path), command=_stand_in(tmp_path), spacing=0)
    drawer.round_done()
    drawer.round_done()
    (tmp_path / "go").touch()
    _wait_for(lambda: drawer._proc is not None and drawer._proc.poll() is not None)
    drawer.catch_up()  # what the crawl loop calls while it waits for URLs to fall due
    _wait_for(lambda: len(_started(tmp_path)) == 2)
    drawer.close()
    assert drawer.started == 2


def test_the_drawing_runs_in_a_session_of_its_own_and_an_interrupted_crawl_leaves_it_running(tmp_path):
    with pytest.raises(RoundInterrupted):
        with RoundCharts(str(tmp_path), command=_stand_in(tmp_path), spacing=0) as drawer:
            drawer.round_done()
            _wait_for(lambda: len(_started(tmp_path)) == 1)
            raise RoundInterrupted(3)
    ((pid, sid),) = _started(tmp_path)
    assert sid == pid != os.getsid(0)  # a terminal's Ctrl-C goes to the crawl's group, not to it
    os.kill(pid, 0)  # still running: the interrupted crawl did not wait for it
    (tmp_path / "go").touch()
    _wait_for(lambda: not _alive(pid))


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # reaped already (Popen's own bookkeeping)
        return False
    return finished == 0


def test_a_crawl_that_fails_still_waits_for_its_charts(tmp_path):
    with pytest.raises(ValueError):
        with RoundCharts(str(tmp_path), command=_stand_in(tmp_path), spacing=0) as drawer:
            drawer.round_done()
            (tmp_path / "go").touch()
            raise ValueError("a round failed")
    assert len(_started(tmp_path)) == 1 and drawer._proc is None


@pytest.mark.parametrize(
    ("say", "rc", "expected"),
    [
        ("report charts not drawn: ValueError: no pages\n", "0", ["report charts not drawn: ValueError: no pages"]),
        ("Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'matplotlib'\n", "1",
         ["report charts not drawn: the drawing process exited with status 1: "
          "ModuleNotFoundError: No module named 'matplotlib'"]),
        ("", "-9", ["report charts not drawn: the drawing process was killed by signal 9"]),
        ("", "0", []),
    ],
)  # fmt: skip
def test_what_a_drawing_says_is_one_warning(tmp_path, caplog, monkeypatch, say, rc, expected):
    monkeypatch.setenv("SAY", say)
    monkeypatch.setenv("RC", rc)
    (tmp_path / "go").touch()
    with caplog.at_level(logging.WARNING, logger="beamcrawl.pipelines.round_charts"):
        with RoundCharts(str(tmp_path), command=_stand_in(tmp_path), spacing=0) as drawer:
            drawer.round_done()
    assert [r.getMessage() for r in caplog.records if r.name.endswith("round_charts")] == expected


def test_a_drawing_that_hangs_is_stopped_at_the_end_with_one_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="beamcrawl.pipelines.round_charts"):
        with RoundCharts(str(tmp_path), command=_stand_in(tmp_path), wait_at_end=0.5) as drawer:
            drawer.round_done()
    ((pid, _),) = _started(tmp_path)
    assert not _alive(pid)
    assert [r.getMessage() for r in caplog.records] == [
        "report charts not drawn: the drawing took more than 0.5 s and was stopped"
    ]


def test_the_drawing_runs_at_a_lower_priority_than_the_crawl(tmp_path):
    real = drawing_command(str(tmp_path))
    python_at = real.index(sys.executable)
    assert real[python_at:] == [sys.executable, "-m", "beamcrawl.analysis.charts", str(tmp_path)]
    (tmp_path / "go").touch()
    with RoundCharts(str(tmp_path), command=[*real[:python_at], *_stand_in(tmp_path)]) as drawer:
        drawer.round_done()
    niceness = int((tmp_path / "started").read_text().split()[2])
    assert niceness == min(os.getpriority(os.PRIO_PROCESS, 0) + NICENESS, 19)


def test_the_real_command_draws_every_chart_of_every_round(tmp_path):
    out = tmp_path / "out"
    (out / "reports").mkdir(parents=True)
    for n in (1, 2, 3):
        report = {"round": n, "responses": 10 * n, "pages_per_second": 1.0 * n, "new_urls": n, "frontier_size": 5 * n,
                  "urls_due": n, "metrics": {}, "errors": 0, "files": {}}  # fmt: skip
        (out / "reports" / f"round-{n:06d}.json").write_text(json.dumps(report))
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the child finds this beamcrawl whatever the crawl's folder
    try:
        with RoundCharts(str(out)) as drawer:
            drawer.round_done()
    finally:
        os.chdir(cwd)
    assert drawer.command == drawing_command(str(out))
    for name in charts.CHARTS:
        assert (out / "reports" / f"{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert sorted(p.name for p in (out / "reports" / ".charts").iterdir()) == [f"round-{n:06d}.json" for n in (1, 2, 3)]
    # The drawing tells what it took (its stdout's last line), which spaces the next one.
    proc = subprocess.run(drawing_command(str(out)), capture_output=True, text=True, timeout=120, env=child_env())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert 0.0 < float(proc.stdout.split()[-1]) < 120.0


def test_the_child_finds_this_source_tree_but_an_installed_package_is_left_where_it_is(monkeypatch):
    root = str(Path(round_charts.__file__).resolve().parents[2])
    env = child_env({"PATH": "/bin", "PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"] == os.pathsep.join([root, "/elsewhere"]) and env["PATH"] == "/bin"
    assert child_env({})["PYTHONPATH"] == root
    # Installed (its folder a site-packages): not put ahead of the standard library.
    monkeypatch.setattr(round_charts.site, "getsitepackages", lambda: [root])
    assert child_env({"PATH": "/bin"}) == {"PATH": "/bin"}


def test_the_next_drawing_waits_twenty_times_what_the_last_one_took_but_the_crawls_end_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOK", "0.4")  # each drawing takes 0.4 s and says so: the next one 8 s after its start
    (tmp_path / "go").touch()
    real, ahead = time.monotonic, [0.0]
    monkeypatch.setattr(round_charts.time, "monotonic", lambda: real() + ahead[0])
    drawer = RoundCharts(str(tmp_path), command=_stand_in(tmp_path))
    assert drawer.spacing == SPACING == 20.0

    def drawn() -> bool:
        return drawer._proc is not None and drawer._proc.poll() is not None

    drawer.round_done()
    _wait_for(drawn)
    drawer.round_done()  # the first has ended, but its spacing has not passed: not yet
    assert len(_started(tmp_path)) == 1 and drawer.stale
    assert drawer.next_at - drawer._started_at == pytest.approx(8.0)
    ahead[0] = 8.1  # the clock moves on past the spacing
    drawer.catch_up()
    assert len(_started(tmp_path)) == 2 or _wait_for(lambda: len(_started(tmp_path)) == 2) is None
    _wait_for(drawn)
    drawer.round_done()
    assert len(_started(tmp_path)) == 2 and drawer.stale
    drawer.close()  # the crawl's end draws the last rounds whatever the spacing
    assert len(_started(tmp_path)) == 3 and not drawer.stale


@pytest.mark.parametrize(
    ("told", "since", "expected"),
    [(b"1.250\n", 5.0, 1.25), (b"", 5.0, 5.0), (b"Traceback\n", 5.0, 5.0), (b"9.0\n", 5.0, 5.0), (b"-1\n", 5.0, 5.0)],
)
def test_what_a_drawing_took_is_what_it_told_unless_that_cannot_be(told, since, expected):
    assert round_charts.drawing_seconds(told, since) == expected
