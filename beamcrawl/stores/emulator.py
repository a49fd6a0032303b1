"""Find, build and run the Cloud Bigtable emulator, for tests and local Bigtable crawls.

The emulator is Google's in-memory Bigtable server (``cbtemulator``). It is looked for, in
order:

1. ``BEAMCRAWL_EMULATOR=/path/to/binary`` (an explicit binary);
2. ``cbtemulator`` on ``PATH``;
3. the Cloud SDK's copy, ``<sdk>/platform/bigtable-emulator/cbtemulator``, where ``<sdk>``
   is the usual install folders or the SDK that holds the ``gcloud`` on ``PATH``;
4. a copy built earlier into the cache folder (``$BEAMCRAWL_CACHE_DIR``, else
   ``$XDG_CACHE_HOME/beamcrawl``, else ``~/.cache/beamcrawl``; binaries go in ``bin/``);
5. otherwise it is built there from its Go module (``cloud.google.com/go/bigtable/cmd/
   emulator`` at :data:`GO_MODULE_VERSION`) with the machine's Go toolchain, once; later
   runs reuse the cached binary.

``BEAMCRAWL_EMULATOR=build`` skips steps 1-3 (to exercise or pre-build the Go path), and
``BEAMCRAWL_EMULATOR=off`` disables the emulator (tests that need it skip).

:func:`running_emulator` starts it on a free loopback port, points the Bigtable clients
at it through ``BIGTABLE_EMULATOR_HOST`` and stops it afterwards. On Linux the emulator
is also told to die with the process that started it, so a killed test run leaves no
server behind.

Command line (``python -m beamcrawl.stores.emulator``): ``path`` prints the binary's path,
finding or building it (what ``make`` runs before the tests); ``run`` starts one on
``--port`` and serves until interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from beamcrawl.core.runtime.children import dying_with_parent
from beamcrawl.core.runtime.interruptible import run_tool

__all__ = [
    "EmulatorUnavailable",
    "RunningEmulator",
    "cache_dir",
    "find_emulator",
    "find_or_build_emulator",
    "build_emulator",
    "running_emulator",
    "scratch_store",
]

ENV_CHOICE = "BEAMCRAWL_EMULATOR"
ENV_CACHE = "BEAMCRAWL_CACHE_DIR"
EMULATOR_HOST_ENV = "BIGTABLE_EMULATOR_HOST"

GO_PACKAGE = "cloud.google.com/go/bigtable/cmd/emulator"
# Pinned so every machine builds the same server; bump deliberately.
GO_MODULE_VERSION = "v1.58.0"
BINARY_NAME = "cbtemulator"

SDK_ROOTS = (
    "/usr/lib/google-cloud-sdk",
    "/usr/share/google-cloud-sdk",
    "/opt/google-cloud-sdk",
    "/google-cloud-sdk",
    "~/google-cloud-sdk",
)
SDK_EMULATOR = ("platform", "bigtable-emulator", BINARY_NAME)

BUILD_TIMEOUT_S = 900.0
START_TIMEOUT_S = 30.0


class EmulatorUnavailable(RuntimeError):
    """No emulator binary was found and none could be built; the message says why."""


# --- finding ------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The folder for beamcrawl's cached tools (created on demand by the builder)."""
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "beamcrawl"


def cached_binary() -> Path:
    """Where the Go-built emulator lives in the cache (versioned, so a bump rebuilds)."""
    return cache_dir() / "bin" / f"{BINARY_NAME}-{GO_MODULE_VERSION}"


def _executable(path: str | os.PathLike[str]) -> Path | None:
    p = Path(path).expanduser()
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _sdk_roots() -> list[Path]:
    """Cloud SDK folders to look in: the usual ones, then the one holding ``gcloud``."""
    roots = [Path(r).expanduser() for r in SDK_ROOTS]
    gcloud = shutil.which("gcloud")
    if gcloud:
        # <sdk>/bin/gcloud, often reached through a symlink such as /usr/bin/gcloud.
        roots.append(Path(os.path.realpath(gcloud)).parent.parent)
    return roots


def find_emulator() -> Path | None:
    """The emulator binary already on this machine (steps 1-4 above), or None."""
    choice = os.environ.get(ENV_CHOICE, "").strip()
    if choice.lower() in ("off", "none", "0"):
        return None
    if choice and choice.lower() not in ("build", "auto"):
        found = _executable(choice)
        if found is None:
            raise EmulatorUnavailable(f"{ENV_CHOICE}={choice} is not an executable file")
        return found
    if choice.lower() != "build":
        on_path = shutil.which(BINARY_NAME)
        if on_path:
            return Path(on_path)
        for root in _sdk_roots():
            found = _executable(root.joinpath(*SDK_EMULATOR))
            if found is not None:
                return found
    return _executable(cached_binary())


def build_emulator(dest: Path | None = None, *, go: str | None = None) -> Path:
    """Builds the emulator from its Go module into ``dest`` (default: the cache).

    Concurrent builders (a ``make`` target and a test run, or parallel test workers)
    serialise on a lock file; the binary appears atomically, so a reader never sees a
    half-written file.

    Args:
        dest: The binary to create.
        go: The ``go`` command; default the one on ``PATH``.

    Returns:
        The path of the built binary.

    Raises:
        EmulatorUnavailable: There is no Go toolchain, or the build failed.
    """
    dest = dest or cached_binary()
    go = go or shutil.which("go")
    if not go:
        raise EmulatorUnavailable(
            "no Bigtable emulator found and no Go toolchain to build one: install the Cloud "
            "SDK's google-cloud-cli-bigtable-emulator package, or Go"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _executable(dest):  # another builder finished while we waited
            return dest
        with tempfile.TemporaryDirectory(prefix="build-", dir=dest.parent) as gobin:
            env = dict(os.environ, GOBIN=gobin, CGO_ENABLED="0")
            # `go install pkg@version` builds outside any module, from the module proxy.
            # Ctrl-C reaching any thread stops the build (and its compilers) promptly.
            proc = run_tool([go, "install", f"{GO_PACKAGE}@{GO_MODULE_VERSION}"], env=env, timeout=BUILD_TIMEOUT_S)
            built = Path(gobin) / "emulator"
            if proc.returncode != 0 or not built.is_file():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
                raise EmulatorUnavailable(f"building {GO_PACKAGE}@{GO_MODULE_VERSION} failed: " + " | ".join(tail))
            os.replace(built, dest)
    return dest


def find_or_build_emulator() -> Path:
    """The emulator binary: found on this machine, else built (once) with Go.

    Raises:
        EmulatorUnavailable: Disabled with ``BEAMCRAWL_EMULATOR=off``, or none found and
            none could be built.
    """
    if os.environ.get(ENV_CHOICE, "").strip().lower() in ("off", "none", "0"):
        raise EmulatorUnavailable(f"the Bigtable emulator is disabled ({ENV_CHOICE}=off)")
    return find_emulator() or build_emulator()


# --- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunningEmulator:
    """A started emulator.

    Attributes:
        host: ``host:port`` to put in ``BIGTABLE_EMULATOR_HOST``.
        binary: The binary that runs.
        pid: The server's process id.
        start_seconds: How long it took from launch to accepting connections.
    """

    host: str
    binary: Path
    pid: int
    start_seconds: float


# What the emulator prints once it listens, with the address it bound (its own port when
# asked for port 0).
_RUNNING = re.compile(rb"emulator running on (\S+):(\d+)\s*$", re.MULTILINE)


def _wait_until_serving(proc: subprocess.Popen[bytes], log: IO[bytes], host: str, timeout: float) -> int | None:
    """The port the emulator says (in ``log``, its output) it bound, once it takes
    connections there; None if the process exited first.

    A port is trusted only from the emulator's own line: a port merely taking connections
    may be another process's, when the emulator could not bind it.
    """
    deadline = time.monotonic() + timeout
    port = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return None
        if port is None:
            log.seek(0)
            found = _RUNNING.search(log.read())
            port = int(found.group(2)) if found else None
        if port is not None:
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
                return port
        time.sleep(0.02)
    said = f"said it runs on port {port} but takes no connection there" if port else "did not say it listens"
    raise EmulatorUnavailable(f"the Bigtable emulator {said} within {timeout:g}s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def running_emulator(
    binary: Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    set_env: bool = True,
    attempts: int = 3,
) -> Iterator[RunningEmulator]:
    """Runs an emulator for the duration of the ``with`` block.

    Args:
        binary: The emulator binary; default :func:`find_or_build_emulator`.
        host: Loopback address to bind.
        port: Port to bind; default one the emulator chooses (and says).
        set_env: Set ``BIGTABLE_EMULATOR_HOST`` for this process (and so for the
            subprocesses it starts) while the block runs, restoring it afterwards.
        attempts: Launches to try when the emulator exits before it listens.

    Yields:
        The running emulator.

    Raises:
        EmulatorUnavailable: No binary, or it would not start.
    """
    binary = binary or find_or_build_emulator()
    proc: subprocess.Popen[bytes] | None = None
    started = 0.0
    chosen: int | None = None
    last_err = ""
    for _ in range(max(1, attempts)):
        started = time.monotonic()
        log = tempfile.TemporaryFile()
        # Port 0 unless one is asked for: the emulator binds a free port itself and says which.
        # It dies with this process: a test run killed with SIGKILL leaves no emulator.
        proc = subprocess.Popen(
            dying_with_parent([str(binary), "-host", host, "-port", str(port or 0)]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            chosen = _wait_until_serving(proc, log, host, START_TIMEOUT_S)
        except BaseException:
            _stop(proc)
            log.close()
            raise
        if chosen is not None:
            log.close()
            break
        log.seek(0)
        last_err = log.read().decode(errors="replace").strip()[-500:]
        log.close()
        proc = None
        if port:
            break
    if proc is None or chosen is None:
        raise EmulatorUnavailable(f"the Bigtable emulator ({binary}) did not start: {last_err}")
    running = RunningEmulator(
        host=f"{host}:{chosen}", binary=binary, pid=proc.pid, start_seconds=time.monotonic() - started
    )
    previous = os.environ.get(EMULATOR_HOST_ENV)
    if set_env:
        os.environ[EMULATOR_HOST_ENV] = running.host
    try:
        yield running
    finally:
        if set_env:
            if previous is None:
                os.environ.pop(EMULATOR_HOST_ENV, None)
            else:
                os.environ[EMULATOR_HOST_ENV] = previous
        _stop(proc)


@contextlib.contextmanager
def scratch_store(project: str = "beamcrawl-test", instance: str = "test", *, init: bool = True) -> Iterator[str]:
    """A new Bigtable store under a random table prefix, dropped on exit (for tests and
    benchmarks on the emulator, which accepts any project and instance).

    Args:
        project: Project id.
        instance: Instance id.
        init: Create the tables first (as ``beamcrawl store init`` does).

    Yields:
        The store's ``bigtable://`` URI.
    """
    import uuid

    from beamcrawl.stores.bigtable import BigtableStore

    store = BigtableStore(project, instance, f"t{uuid.uuid4().hex[:12]}")
    if init:
        store.create_tables()
    try:
        yield store.uri
    finally:
        store.drop_tables()


# --- command line -------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``path``: print the binary (finding or building it); ``run``: serve until ^C."""
    parser = argparse.ArgumentParser(prog="python -m beamcrawl.stores.emulator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("path", help="print the emulator binary's path, building it with Go if needed")
    run = sub.add_parser("run", help="run an emulator until interrupted")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8086)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "path":
            t0 = time.monotonic()
            binary = find_or_build_emulator()
            print(binary)
            print(f"(ready in {time.monotonic() - t0:.1f}s)", file=sys.stderr)
            return 0
        with running_emulator(host=args.host, port=args.port) as emu:
            print(f"export {EMULATOR_HOST_ENV}={emu.host}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    except EmulatorUnavailable as exc:
        print(f"emulator: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
