"""A Flink job server for local rounds, built with Maven when Beam's matching one is not served.

Beam's Python FlinkRunner talks to a Java job server through the portable Job API. The job
server matching the installed Beam (``beam-runners-flink-<FV>-job-server``, fetched with Maven
by :func:`flink_job_server_jar`) is preferred; where a Maven repository does not serve it, this module builds one from a job
server that is served: the Flink 1.16 runner library of Beam 2.50
(``org.apache.beam:beam-runners-flink-1.16:2.50.0``), whose jar holds the job server's main
class. Maven copies that library and its dependencies into a cache folder, and the JDK's
``jar`` tool makes a thin launcher jar whose manifest names the main class and puts every
copied jar on its class path. The SDK (2.77) is newer than that job server (2.50); the Job
API between them is stable enough for this project's pipeline, which the suite checks with
a real two-round crawl on Flink's local mini-cluster.

``python -m beamcrawl.pipelines.flink`` (``make flink``) builds it once and prints its path.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.children import dying_with_parent
from beamcrawl.core.runtime.interruptible import run_tool
from beamcrawl.pipelines.runner_args import (
    CACHE,
    RunnerSetupError,
    option_value,
    runner_name,
)

BEAM_VERSION = "2.50.0"
FLINK_VERSION = "1.16"
ARTIFACT = ("org.apache.beam", f"beam-runners-flink-{FLINK_VERSION}", BEAM_VERSION)
MAIN_CLASS = "org.apache.beam.runners.flink.FlinkJobServerDriver"
JAR_NAME = "job-server.jar"
# The library brings SLF4J's API (1.7.30) but no binding, so the job server would log nothing;
# the JDK logging binding of the same version sends its log to stderr (a file, see below).
SLF4J_VERSION = "1.7.30"

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>beamcrawl.local</groupId>
  <artifactId>flink-job-server-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-jdk14</artifactId>
      <version>{slf4j}</version>
    </dependency>
  </dependencies>
</project>
"""
_POM_TEXT = _POM.format(group=ARTIFACT[0], artifact=ARTIFACT[1], version=ARTIFACT[2], slf4j=SLF4J_VERSION)
# Named after the POM's content too, so a changed POM builds afresh beside an older build.
FOLDER = (
    CACHE / "flink" / f"beam-{BEAM_VERSION}-flink-{FLINK_VERSION}-{hashlib.sha256(_POM_TEXT.encode()).hexdigest()[:8]}"
)


def launcher_jar(build: bool = True) -> Path:
    """The launcher jar of the Flink 1.16 job server, built into the cache when missing.

    Raises:
        RunnerSetupError: One line naming what is missing (Maven, Java, the ``jar`` tool)
            or why Maven failed.
    """
    target = FOLDER / JAR_NAME
    if target.exists():
        return target
    if not build:
        raise RunnerSetupError(f"the local Flink job server is not built yet (run `make flink`; expected {target})")
    mvn, jar_tool = _tools()
    FOLDER.parent.mkdir(parents=True, exist_ok=True)
    # Built in a private folder and renamed into place: a concurrent build, or one killed
    # half-way, never leaves a launcher whose class path is incomplete.
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=FOLDER.parent))
    try:
        (staging / "pom.xml").write_text(_POM_TEXT)
        proc = run_tool(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(staging / "pom.xml"),
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={staging / 'lib'}",
            ],
            timeout=3600,
        )
        jars = sorted(p.name for p in (staging / "lib").glob("*.jar"))
        if proc.returncode != 0 or not any(name.startswith(ARTIFACT[1] + "-") for name in jars):
            raise RunnerSetupError(
                f"Maven could not fetch {':'.join(ARTIFACT)} and its dependencies (for the local Flink "
                f"job server): {_last_error(proc.stdout + proc.stderr)}"
            )
        (staging / "MANIFEST.MF").write_text(manifest(MAIN_CLASS, [f"lib/{name}" for name in jars]))
        proc = run_tool(
            [
                jar_tool,
                "--create",
                "--file",
                str(staging / JAR_NAME),
                "--manifest",
                str(staging / "MANIFEST.MF"),
                "-C",
                str(staging),
                "pom.xml",
            ],
            timeout=600,
        )
        if proc.returncode != 0:
            raise RunnerSetupError(
                f"the JDK's jar tool could not make the Flink launcher jar: {_last_error(proc.stderr)}"
            )
        try:
            os.rename(staging, FOLDER)
        except OSError:
            if not target.exists():  # not a concurrent build that finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _tools() -> tuple[str, str]:
    """Maven and the JDK's jar tool; Java itself is needed to run the job server."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RunnerSetupError("building the local Flink job server needs Maven ('mvn' is not on PATH)")
    java = shutil.which("java")
    if java is None:
        raise RunnerSetupError("the Flink job server needs Java 11 or 17 ('java' is not on PATH)")
    jar_tool = shutil.which("jar")
    if jar_tool is None:  # a JDK whose bin folder is not on PATH, only its java link
        candidate = Path(os.path.realpath(java)).with_name("jar")
        jar_tool = str(candidate) if candidate.exists() else None
    if jar_tool is None:
        raise RunnerSetupError("building the local Flink job server needs the JDK's 'jar' tool (a JDK, not only a JRE)")
    return mvn, jar_tool


def manifest(main_class: str, class_path: list[str]) -> str:
    """A jar manifest naming ``main_class`` and the jars of ``class_path`` (relative to the
    jar), with lines folded at 72 bytes as the jar specification requires."""
    lines = ["Manifest-Version: 1.0", f"Main-Class: {main_class}", "Class-Path: " + " ".join(class_path)]
    out = []
    for line in lines:
        data = line.encode()
        out.append(data[:72])
        out.extend(b" " + data[i : i + 71] for i in range(72, len(data), 71))
    return b"\r\n".join(out).decode() + "\r\n\r\n"


def _last_error(output: str) -> str:
    """The first line of Maven's (or a tool's) output that says what went wrong."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("[ERROR]").strip() for line in lines if line.startswith("[ERROR]")]
    errors = [line for line in errors if line]
    return (errors or lines or ["no output"])[0][:300]


# --- One job server for a whole crawl ---------------------------------------------------------

LOG_NAME = "flink-job-server.log"
# The job server's heap unless --job_server_jvm_property=-Xmx... says otherwise.
JOB_SERVER_HEAP = "1g"
START_TIMEOUT = 180.0
# The line the job server logs once its job service listens, with the port it bound.
_LISTENING = re.compile(r"JobService started on (?:\[[^\]\s]*\]|[^\s:]+):(\d+)\s*$", re.MULTILINE)
# The job server logs through SLF4J to java.util.logging: one line per record, and without
# the two loudest sources (a dump of every job's metrics, thousands of lines a round, which
# the round's report already holds; Flink's metric-name collisions).
JAVA_LOGGING = """\
handlers=java.util.logging.ConsoleHandler
.level=INFO
java.util.logging.ConsoleHandler.level=ALL
java.util.logging.SimpleFormatter.format=%1$tF %1$tT %4$s %3$s: %5$s%6$s%n
org.apache.beam.runners.flink.FlinkPipelineRunner.level=WARNING
org.apache.flink.runtime.metrics.level=SEVERE
org.apache.flink.metrics.level=SEVERE
"""
TEARDOWN_NOTE = (
    "# At the end of each round the SDK workers close their gRPC streams; the job server then logs "
    "'Hanged up for unknown endpoint' (BeamFnDataGrpcMultiplexer), 'Error cleaning up servers' and "
    "'call already closed' (SEVERE). Those are that teardown, not failures: a round's outcome is its report.\n"
)


# How long Maven's failure to fetch the matching job server (not served, or no route) is
# remembered before Maven is asked again (Maven's own default update interval is a day too).
MISS_TTL = 24 * 3600.0


def flink_job_server_jar(flink_version: str) -> Path:
    """The Beam Flink job-server jar for the installed Beam, fetched with Maven into the cache."""
    import apache_beam

    version = apache_beam.__version__
    artifact = f"beam-runners-flink-{flink_version}-job-server"
    target = CACHE / "jars" / f"{artifact}-{version}.jar"
    if target.exists():
        return target
    coordinates = f"org.apache.beam:{artifact}:{version}"
    missing = target.with_name(target.name + ".missing")
    fix = "pass --flink_job_server_jar=PATH to a copy of it"
    with contextlib.suppress(OSError):
        if time.time() - missing.stat().st_mtime < MISS_TTL:
            raise RunnerSetupError(
                f"Maven could not fetch {coordinates} (the Flink job server for this Beam) "
                f"within the last day (delete {missing} to ask again); {fix}"
            )
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RunnerSetupError("fetching the Flink job server needs Maven ('mvn' is not on PATH)")
    target.parent.mkdir(parents=True, exist_ok=True)
    proc = run_tool(
        [mvn, "-q", "-B", "-U", "dependency:copy", f"-Dartifact={coordinates}", f"-DoutputDirectory={target.parent}"],
        timeout=1800,
    )
    if proc.returncode != 0 or not target.exists():
        missing.write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {coordinates} not fetched\n")
        raise RunnerSetupError(f"Maven could not fetch {coordinates} (the Flink job server for this Beam); {fix}")
    missing.unlink(missing_ok=True)
    return target


def flink_job_server(
    flink_version: str | None = None,
    local: bool = True,
    announce: Callable[[str], object] | None = None,
    master: str | None = None,
) -> Path:
    """The job-server jar a Flink round uses: Beam's matching one where Maven serves it, else
    (for Flink's local mini-cluster) the Flink 1.16 job server built by ``make flink``.

    A remote cluster runs the Flink version it runs, so there the matching jar is required;
    with no ``flink_version`` given, the cluster at ``master`` is asked (its REST
    ``/overview``), and a Flink 1.16 cluster gets the job server ``make flink`` built.
    """
    from apache_beam.options.pipeline_options import FlinkRunnerOptions

    if not local and flink_version is None and master is not None:
        running = cluster_flink_version(master)
        flink_version = ".".join(running.split(".")[:2])
        if flink_version == FLINK_VERSION:
            jar = launcher_jar()
            if announce is not None:
                announce(f"flink: the cluster at {master} runs Flink {running}: using the Flink {FLINK_VERSION} "
                         f"job server of Beam {BEAM_VERSION} ({jar})")  # fmt: skip
            return jar
    wanted = flink_version or FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS[-1]
    try:
        return flink_job_server_jar(wanted)
    except RunnerSetupError as exc:
        if not local:
            raise RunnerSetupError(f"{exc} matching the cluster's Flink version") from None
        jar = launcher_jar()
        if announce is not None:
            announce(
                f"flink: Beam's Flink {wanted} job server could not be fetched here; using the Flink "
                f"{FLINK_VERSION} job server of Beam {BEAM_VERSION} ({jar})"
            )
        return jar


def cluster_flink_version(master: str, timeout: float = 10.0) -> str:
    """The Flink version a session cluster runs (``1.16.0``), from its REST ``/overview``.

    Raises:
        RunnerSetupError: The cluster does not answer, or not as Flink's REST API does.
    """
    import json
    import urllib.request

    address = master.removeprefix("http://").removeprefix("https://").rstrip("/")
    try:
        with urllib.request.urlopen(f"http://{address}/overview", timeout=timeout) as resp:
            version = json.loads(resp.read()).get("flink-version")
    except (OSError, ValueError, AttributeError) as exc:
        raise RunnerSetupError(
            f"the Flink cluster at {address} did not answer on its REST API (/overview): {exc}"
        ) from None
    if not isinstance(version, str) or not version.strip():
        raise RunnerSetupError(
            f"the Flink cluster at {address} did not say its version (no flink-version in /overview)"
        )
    return version.strip()


def uses_local_job_server(args: Sequence[str]) -> bool:
    """True when ``args`` run on Flink with a job server this process starts (not an
    endpoint given with ``--job_endpoint``, nor Flink's uber-jar submission)."""
    runner = runner_name(args).lower()
    return (
        runner in ("flinkrunner", "flink")
        and option_value(args, "job_endpoint") is None
        and option_value(args, "flink_job_server_jar") is not None
        and option_value(args, "flink_submit_uber_jar") is None
    )


@contextlib.contextmanager
def job_server(args: Sequence[str], out: str, announce: Callable[[str], object] | None = None) -> Iterator[list[str]]:
    """Runs the Flink job server once for every round of a crawl, its output in a file.

    Left to itself, Beam starts a job server per round (a JVM start, ~5-10 s, each time) and
    keeps each one alive until the crawl exits, with its output in this process's log. Here
    one job server serves all the rounds (``--job_endpoint``), and its port, command line
    and whole output (Flink's log, and gRPC's "Multiplexer hanging up" notices when a
    round's SDK workers close their streams at teardown) go to ``OUT/logs/flink-job-server.log``.
    The job server ends with the crawl, however the crawl ends (a SIGKILL included:
    ``core/runtime/children.py``); the artifacts folder a killed crawl could not remove is
    swept by the next crawl's start (:func:`sweep_stale_artifacts`).

    Yields:
        ``args`` with ``--job_endpoint`` added when a job server was started, else unchanged.

    Raises:
        RunnerSetupError: The job server exited or stayed silent before it listened.
    """
    if not uses_local_job_server(args):
        yield list(args)
        return
    from apache_beam.runners.portability.flink_runner import (
        FlinkRunner,  # as Beam starts it
    )

    folder = Path(out) / "logs" if not files.is_remote(out) else Path(tempfile.mkdtemp(prefix="beamcrawl-flink-"))
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / LOG_NAME
    sweep_stale_artifacts()
    artifacts = tempfile.mkdtemp(prefix=f"{ARTIFACTS_PREFIX}{os.getpid()}-")
    logging_config = Path(artifacts) / "logging.properties"
    logging_config.write_text(JAVA_LOGGING)
    jvm = option_values(args, "job_server_jvm_property")
    cmd = [
        option_value(args, "job_server_java_launcher") or "java",
        f"-Djava.util.logging.config.file={logging_config}",
        # A heap limit unless one is given: the JVM's default is a quarter of the machine.
        *([] if any(p.startswith("-Xmx") for p in jvm) else [f"-Xmx{JOB_SERVER_HEAP}"]),
        *jvm,
        "-jar", str(option_value(args, "flink_job_server_jar")),
        "--flink-master", FlinkRunner.add_http_scheme(option_value(args, "flink_master") or "[auto]"),
        # Port 0: the job server binds a free port itself and logs it. A port picked here and
        # handed over could be taken in between by another process, whose port the crawl
        # would then find listening and send its rounds to (gRPC waits, then times out).
        "--job-host", "localhost", "--job-port", "0", "--artifact-port", "0", "--expansion-port", "0",
        "--artifacts-dir", artifacts,
    ]  # fmt: skip
    with open(log_path, "a", encoding="utf-8") as log_file:
        log_file.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} job server: {' '.join(cmd)}\n")
        log_file.write(TEARDOWN_NOTE)
        log_file.flush()
        start = log_file.tell()  # the log is appended to: this run's output begins here
        try:
            # It ends with the crawl even when the crawl is killed (SIGKILL, OOM): its JVM and
            # the mini-cluster in it would otherwise run on, with their memory and ports.
            proc = subprocess.Popen(
                dying_with_parent(cmd), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            shutil.rmtree(artifacts, ignore_errors=True)
            raise RunnerSetupError(f"cannot start the Flink job server ({cmd[0]}): {exc.strerror or exc}") from None
    # The job server stops inside quiet_teardown: the last round's workers may still be
    # closing their streams when it goes.
    with quiet_teardown(announce):
        try:
            port = _wait_listening(proc, log_path, start)
            if announce is not None:
                announce(f"flink: job server on localhost:{port}; its log: {log_path}")
            yield [*args, f"--job_endpoint=localhost:{port}"]
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            shutil.rmtree(artifacts, ignore_errors=True)


# The job server's artifacts folder of a crawl: the prefix, the crawl's pid, then mkdtemp's tail.
ARTIFACTS_PREFIX = "beamcrawl-flink-artifacts-"


def sweep_stale_artifacts(folder: str | None = None) -> list[str]:
    """Removes the artifacts folders (in ``folder``, default the temporary directory) that
    crawls killed before their clean-up left behind: those whose crawl's pid (in the name)
    is no live process. A folder of a live pid, possibly another crawl's, is kept; so is one
    without a pid in its name. Returns the folders removed."""
    removed = []
    for path in Path(folder or tempfile.gettempdir()).glob(f"{ARTIFACTS_PREFIX}*"):
        pid = path.name[len(ARTIFACTS_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or not path.is_dir() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


HANGUP = "Multiplexer hanging up"


def is_teardown_hangup(exc: BaseException | None) -> bool:
    """True for the gRPC error a LOOPBACK SDK worker gets when the Flink job server closes
    its data stream at the end of a round (CANCELLED, "Multiplexer hanging up"), or for an
    error raised from it (its cause or context)."""
    import grpc

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, grpc.RpcError) and hasattr(exc, "code") and hasattr(exc, "details"):
            try:
                if exc.code() == grpc.StatusCode.CANCELLED and HANGUP in (exc.details() or ""):
                    return True
            except Exception:  # a call object in a state that cannot say
                pass
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class _HangupFilter(logging.Filter):
    """Drops log records whose exception is the teardown hang-up, counting them."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        hangup = bool(record.exc_info) and is_teardown_hangup(record.exc_info[1])
        # ... or Beam's worker quoting it in a message (no exception attached)
        hangup = hangup or (record.name.startswith("apache_beam.") and HANGUP in record.getMessage())
        if hangup:
            if not getattr(record, "_teardown_hangup", False):  # one record, several handlers
                record._teardown_hangup = True
                self.dropped += 1
            return False
        return True


@contextlib.contextmanager
def quiet_teardown(announce: Callable[[str], object] | None = None) -> Iterator[None]:
    """Keeps the SDK workers' teardown hang-ups (a logged error and a traceback per worker
    thread, every round) off the console; says once, in one line, that they happened.

    Only that exact error is held back: any other exception in a worker thread, or any
    other record, is reported as before.
    """
    dropped = _HangupFilter()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(dropped)
    previous_hook = threading.excepthook
    threads = 0

    def hook(exc: threading.ExceptHookArgs) -> None:
        nonlocal threads
        if is_teardown_hangup(exc.exc_value):
            threads += 1
            return
        previous_hook(exc)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous_hook
        for handler in handlers:
            handler.removeFilter(dropped)
        if (dropped.dropped or threads) and announce is not None:
            announce(
                f"flink: SDK workers saw the job server close their data streams at round ends "
                f"('{HANGUP}', {dropped.dropped + threads} times): normal teardown, not shown"
            )


def option_values(args: Sequence[str], name: str) -> list[str]:
    """Every value of a repeatable ``--name`` in a Beam argument list, in order."""
    flag = f"--{name}"
    values = []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            values.append(args[i + 1])
        elif arg.startswith(flag + "="):
            values.append(arg.split("=", 1)[1])
    return values


def _wait_listening(proc: subprocess.Popen, log_path: Path, start: int) -> int:
    """The port the job server says (in its log, from byte ``start``) its job service bound,
    once that port takes connections.

    Raises:
        RunnerSetupError: The job server exited, or did not say it listened within
            ``START_TIMEOUT`` seconds.
    """
    deadline = time.monotonic() + START_TIMEOUT
    port = None
    while True:
        if proc.poll() is not None:
            tail = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
            raise RunnerSetupError(
                f"the Flink job server exited with status {proc.returncode} before it listened "
                f"({tail[-1][:200] if tail else 'no output'}); see {log_path}"
            )
        if port is None:
            with open(log_path, "rb") as log:
                log.seek(start)
                found = _LISTENING.search(log.read().decode("utf-8", "replace"))
            port = int(found.group(1)) if found else None
        if port is not None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return port
        if time.monotonic() > deadline:
            said = f"said it listens on port {port} but takes no connection there" if port else "did not say it listens"
            raise RunnerSetupError(f"the Flink job server {said} within {START_TIMEOUT:g}s; see {log_path}")
        time.sleep(0.25)


def main() -> int:
    try:
        print(flink_job_server(announce=print))
    except RunnerSetupError as exc:
        print(f"make flink: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
