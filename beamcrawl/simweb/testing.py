"""Run simweb as a subprocess for tests, the demo and benchmarks.

Example::

    with running_simweb(tmp_path, hosts=50) as sw:
        crawl(seeds=[sw.base_url(h) for h in sw.hosts[:10]], resolve={h: "127.0.0.1" ...})
        report = sw.audit(min_delay=1.0)
        assert report.violations == 0, report.summary()
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import beamcrawl
from beamcrawl.simweb.audit import AuditReport, audit
from beamcrawl.simweb.freshness_audit import FreshnessReport, measure
from beamcrawl.simweb.names import host_names
from beamcrawl.simweb.server import SYNC_PATH, read_request_log
from beamcrawl.simweb.truth import load_truth

__all__ = ["SimwebHandle", "read_request_log", "running_simweb"]

_READY_PREFIX = "simweb listening on http://"


@dataclass
class SimwebHandle:
    """A running simweb subprocess.

    Attributes:
        port: The port it listens on.
        address: The address it listens on (map every simweb host name to it).
        hosts: Its host names, in index order.
        log_path: Its request log.
        truth_path: Its truth file, or None when not written.
        seed: Its seed.
        pages_per_host: Its pages per host.
        process: The subprocess.
        change_scale: Its change scale (0: the change model is off).
        epoch: The change model's epoch (from the server's ready line), or None when off.
    """

    port: int
    address: str
    hosts: list[str]
    log_path: Path
    truth_path: Path | None
    seed: int
    pages_per_host: int
    process: subprocess.Popen[str]
    change_scale: float = 0.0
    epoch: float | None = None
    _truth: dict[str, dict[str, Any]] | None = field(default=None, repr=False)

    def base_url(self, host: str) -> str:
        """Return ``http://host:port/``, the root of a virtual host."""
        return f"http://{host}:{self.port}/"

    def url(self, host: str, path: str = "/") -> str:
        """Return the absolute URL of ``path`` on a virtual host."""
        return f"http://{host}:{self.port}{path}"

    def truth(self) -> dict[str, dict[str, Any]]:
        """Return the ground truth, ``{host: record}`` (loaded once)."""
        if self._truth is None:
            if self.truth_path is None:
                raise RuntimeError("this simweb was started without a truth file")
            self._truth = load_truth(self.truth_path)
        return self._truth

    def sync(self, timeout: float = 10.0) -> None:
        """Wait until every response the server has sent is in the log.

        A client can receive a response a few microseconds before the server has logged it;
        this asks the server (``GET /_simweb/sync``) to answer once no request is in progress.
        A no-op when the server has stopped (its log is then complete).
        """
        if self.process.poll() is not None:
            return
        host = "127.0.0.1" if self.address in ("0.0.0.0", "") else self.address
        host = f"[{host}]" if ":" in host else host
        with urllib.request.urlopen(f"http://{host}:{self.port}{SYNC_PATH}", timeout=timeout) as r:
            r.read()

    def requests(self, sync: bool = True) -> list[dict[str, Any]]:
        """Return every request logged so far, in log order.

        Args:
            sync: First make sure every response already sent is logged (see :meth:`sync`).
        """
        if sync:
            self.sync()
        return read_request_log(self.log_path)

    def audit(self, agent_token: str = "beamcrawl", min_delay: float = 1.0, tolerance: float = 0.0) -> AuditReport:
        """Audit the politeness of everything logged so far (see :func:`audit`)."""
        return audit(self.requests(), self.truth(), agent_token, min_delay, tolerance)

    def freshness(self, token: str, start: float, end: float, pages: set[str] | None = None) -> FreshnessReport:
        """Measure a crawler's freshness over ``[start, end]`` from everything logged so far
        (see :func:`beamcrawl.simweb.freshness_audit.measure`); needs the change model and the truth."""
        return measure(self.requests(), self.truth(), token, start, end, pages)

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the server with SIGTERM (SIGKILL after ``timeout``); return its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


def _flag(name: str, value: Any) -> list[str]:
    return [f"--{name.replace('_', '-')}", str(value)]


@contextmanager
def running_simweb(
    tmp_dir: str | Path,
    hosts: int = 50,
    seed: int = 1,
    pages_per_host: int = 40,
    *,
    latency_scale: float = 1.0,
    bind: str = "127.0.0.1",
    truth: bool = True,
    startup_timeout: float = 60.0,
    port: int = 0,
    log_name: str = "simweb-requests.jsonl",
    change_scale: float = 0.0,
    epoch: float | None = None,
    **kw: Any,
) -> Iterator[SimwebHandle]:
    """Start simweb in a subprocess (on a free port unless given) and stop it on exit.

    Args:
        tmp_dir: Directory for the log (``simweb-requests.jsonl``), the truth
            (``simweb-truth.jsonl``) and the server's stderr (``simweb.stderr``).
        hosts: Number of virtual hosts.
        seed: Seed of the web.
        pages_per_host: Pages per host.
        latency_scale: Slow hosts' delay multiplier (0 disables the delays).
        bind: Address to listen on.
        truth: Whether to write the truth file (large webs take a few seconds).
        startup_timeout: Seconds to wait for the ready line.
        port: The port to listen on (0: a free one). A fixed port lets a restarted server
            keep the URLs a crawl's state already holds.
        log_name: File name of the request log in ``tmp_dir``; emptied first, since simweb
            appends (the server's stderr goes to ``<log_name>.stderr``).
        change_scale: > 0 turns the change model on (``--change-scale``); 0 leaves it off.
        epoch: The change model's epoch (``--epoch``); None: the server's start time, which
            the handle's ``epoch`` then holds.
        **kw: Further server flags, e.g. ``truth_max_pages=20`` becomes
            ``--truth-max-pages 20``.

    Yields:
        The handle of the running server.

    Raises:
        RuntimeError: If the server exits or stays silent before it is ready.
    """
    tmp = Path(tmp_dir)
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / log_name
    log_path.unlink(missing_ok=True)
    truth_path = tmp / "simweb-truth.jsonl" if truth else None
    stderr_path = tmp / f"{log_name}.stderr"
    cmd = [sys.executable, "-m", "beamcrawl.simweb", "--port", str(port), "--bind", bind]
    cmd += _flag("hosts", hosts) + _flag("seed", seed) + _flag("pages_per_host", pages_per_host)
    cmd += _flag("latency_scale", latency_scale) + _flag("log", log_path)
    if truth_path is not None:
        cmd += _flag("truth", truth_path)
    if change_scale > 0:
        cmd += _flag("change_scale", repr(float(change_scale)))
        if epoch is not None:
            cmd += _flag("epoch", repr(float(epoch)))
    for name, value in kw.items():
        cmd += _flag(name, value)
    env = dict(os.environ)
    # Make the package importable in the child however the parent found it.
    root = str(Path(beamcrawl.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with stderr_path.open("w") as stderr:
        # cwd=tmp: with ``-m`` the current folder comes first on sys.path, and the caller's
        # folder may hold another copy of beamcrawl than the one this process imported.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=env, text=True, cwd=tmp
        )
    handle: SimwebHandle | None = None
    try:
        # readline() blocks; a helper thread lets us bound the wait.
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            line = lines.get(timeout=startup_timeout)
        except queue.Empty:
            raise RuntimeError(f"simweb not ready after {startup_timeout}s") from None
        if not line.startswith(_READY_PREFIX):
            proc.wait(5)
            raise RuntimeError(
                f"simweb failed to start (exit {proc.returncode}): {line!r}\n"
                + stderr_path.read_text(errors="replace")[-4000:]
            )
        fields = line[len(_READY_PREFIX) :].split()
        hostport = fields[0]
        port = int(hostport.rsplit(":", 1)[1])
        served_epoch = next((float(f[6:]) for f in fields if f.startswith("epoch=")), None)
        handle = SimwebHandle(
            port=port,
            address=bind,
            hosts=host_names(hosts, seed),
            log_path=log_path,
            truth_path=truth_path,
            seed=seed,
            pages_per_host=pages_per_host,
            process=proc,
            change_scale=float(change_scale),
            epoch=served_epoch,
        )
        yield handle
    finally:
        if handle is not None:
            handle.stop()
        elif proc.poll() is None:
            proc.kill()
            proc.wait()
