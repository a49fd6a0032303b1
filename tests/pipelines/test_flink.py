"""The local Flink job server: its launcher jar, which job server a round gets, how it is run
(one per crawl, its output in a file), and the SDK workers' teardown noise kept off the console.

The rounds themselves run on Flink in ``test_end_to_end.py``.
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import socket
import shutil
import sys
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from beamcrawl.pipelines import flink, runners
from beamcrawl.pipelines.flink import flink_job_server
from beamcrawl.pipelines.runners import RunnerSetupError


def _unfold(manifest: str) -> dict[str, str]:
    """A manifest's main section, continuation lines joined (the jar specification's rule)."""
    lines: list[str] = []
    for line in manifest.split("\r\n"):
        if line.startswith(" "):
            lines[-1] += line[1:]
        elif line:
            lines.append(line)
    return dict(line.split(": ", 1) for line in lines)


jar_names = st.lists(st.from_regex(r"lib/[a-z][a-z0-9.-]{0,60}\.jar", fullmatch=True), min_size=0, max_size=60)


@given(jar_names)
def test_manifest_lines_fit_72_bytes_and_unfold_to_the_class_path(names):
    text = flink.manifest(flink.MAIN_CLASS, names)
    assert text.endswith("\r\n\r\n")
    assert all(len(line.encode()) <= 72 for line in text.split("\r\n"))
    fields = _unfold(text)
    assert fields["Main-Class"] == flink.MAIN_CLASS
    assert fields["Class-Path"].split() == names


def test_built_launcher_names_the_driver_and_every_copied_jar():
    """The jar ``make flink`` built (make test builds it first; its absence is a failure)."""
    import zipfile

    jar = flink.launcher_jar(build=False)
    with zipfile.ZipFile(jar) as zf:
        fields = _unfold(zf.read("META-INF/MANIFEST.MF").decode())
    assert fields["Main-Class"] == flink.MAIN_CLASS
    listed = fields["Class-Path"].split()
    on_disk = sorted(f"lib/{p.name}" for p in (jar.parent / "lib").glob("*.jar"))
    assert listed == on_disk and len(listed) > 100
    assert any(name.startswith(f"lib/{flink.ARTIFACT[1]}-{flink.BEAM_VERSION}") for name in listed)
    assert any(name.startswith("lib/slf4j-jdk14-") for name in listed)  # the job server's log


def test_option_values_keeps_every_repeat_in_order():
    args = ["--job_server_jvm_property=-Xmx1g", "--runner=FlinkRunner", "--job_server_jvm_property", "-Da=b"]
    assert flink.option_values(args, "job_server_jvm_property") == ["-Xmx1g", "-Da=b"]
    assert flink.option_values(args, "absent") == []


# --- which job server ----------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, with Beam's matching jar known to be not served (fresh marker)."""
    monkeypatch.setattr(runners, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(flink, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(flink, "FOLDER", tmp_path / "cache" / "flink" / "built")
    jars = tmp_path / "cache" / "jars"
    jars.mkdir(parents=True)
    import apache_beam

    matching = jars / f"beam-runners-flink-2.2-job-server-{apache_beam.__version__}.jar"
    (jars / (matching.name + ".missing")).write_text("not served\n")
    return {"matching": matching, "launcher": flink.FOLDER / flink.JAR_NAME}


def test_local_rounds_fall_back_to_the_built_job_server_and_say_so(cache):
    cache["launcher"].parent.mkdir(parents=True)
    cache["launcher"].write_bytes(b"PK")
    said = []
    assert flink_job_server(None, local=True, announce=said.append) == cache["launcher"]
    assert len(said) == 1 and "could not be fetched" in said[0] and flink.FLINK_VERSION in said[0]


def test_a_day_old_miss_asks_maven_again(cache, tmp_path, monkeypatch):
    marker = cache["matching"].with_name(cache["matching"].name + ".missing")
    old = time.time() - flink.MISS_TTL - 60
    os.utime(marker, (old, old))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no Maven: asking again is what fails
    with pytest.raises(RunnerSetupError, match="needs Maven"):
        flink.flink_job_server_jar("2.2")
    os.utime(marker, None)  # fresh again: Maven is not asked, and the message says how to ask
    with pytest.raises(RunnerSetupError, match="delete .*missing to ask again"):
        flink.flink_job_server_jar("2.2")


def test_the_matching_job_server_is_preferred_when_there(cache):
    cache["launcher"].parent.mkdir(parents=True)
    cache["launcher"].write_bytes(b"PK")
    cache["matching"].write_bytes(b"PK")
    assert flink_job_server(None, local=True) == cache["matching"]
    assert flink_job_server("2.2", local=False) == cache["matching"]


def test_a_remote_cluster_needs_the_matching_job_server(cache):
    cache["launcher"].parent.mkdir(parents=True)
    cache["launcher"].write_bytes(b"PK")
    with pytest.raises(RunnerSetupError) as exc:
        flink_job_server(None, local=False)
    message = str(exc.value)
    assert "\n" not in message and "--flink_job_server_jar" in message and "cluster" in message


@pytest.mark.parametrize("tools, missing", [((), "Maven"), (("mvn",), "Java"), (("mvn", "java"), "'jar' tool")])
def test_building_without_a_tool_fails_in_one_line_naming_it(cache, tmp_path, monkeypatch, tools, missing):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        # a copy, not a link: a link to the JDK's java would lead to its jar tool
        shutil.copy(shutil.which(tool) or "/bin/true", bin_dir / tool)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(RunnerSetupError) as exc:
        flink_job_server(None, local=True)
    assert "\n" not in str(exc.value) and missing in str(exc.value)
    assert not cache["launcher"].exists()


def test_prepare_adds_the_job_server_and_loopback_for_a_local_master(cache):
    cache["launcher"].parent.mkdir(parents=True)
    cache["launcher"].write_bytes(b"PK")
    args = runners.prepare(["--runner=FlinkRunner", "--flink_master=[local]"])
    assert runners.option_value(args, "flink_job_server_jar") == str(cache["launcher"])
    assert runners.option_value(args, "environment_type") == "LOOPBACK"
    assert runners.option_value(args, "flink_version") is None  # Beam 2.77's choices start at 1.19
    assert flink.uses_local_job_server(args)
    assert not flink.uses_local_job_server([*args, "--job_endpoint=localhost:8099"])
    assert not flink.uses_local_job_server(["--runner=FnApiRunner"])


@contextlib.contextmanager
def _rest_api(body: bytes, status: int = 200):
    """A real HTTP server on loopback answering every GET as a Flink REST API would (or not)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_flink_1_16_cluster_gets_the_built_job_server_and_says_so(cache):
    cache["launcher"].parent.mkdir(parents=True)
    cache["launcher"].write_bytes(b"PK")
    with _rest_api(b'{"taskmanagers": 2, "flink-version": "1.16.0"}') as master:
        args = runners.prepare(["--runner=FlinkRunner", f"--flink_master={master}", "--environment_type=EXTERNAL"])
    assert runners.option_value(args, "flink_job_server_jar") == str(cache["launcher"])
    assert runners.option_value(args, "environment_type") == "EXTERNAL"  # not turned into LOOPBACK
    assert flink.uses_local_job_server(args)


@pytest.mark.parametrize(
    "body, status, says",
    [
        (b'{"flink-version": "1.19.1"}', 200, "flink-1.19-job-server"),  # another Flink: its matching jar
        (b'{"taskmanagers": 2}', 200, "did not say its version"),
        (b"<html>not flink</html>", 200, "did not answer"),
        (b"{}", 503, "did not answer"),
    ],
)
def test_a_cluster_whose_job_server_cannot_be_had_fails_in_one_line(cache, body, status, says):
    cache["launcher"].parent.mkdir(parents=True)
    cache["launcher"].write_bytes(b"PK")
    import apache_beam

    jars = cache["matching"].parent
    (jars / f"beam-runners-flink-1.19-job-server-{apache_beam.__version__}.jar.missing").write_text("not served\n")
    with _rest_api(body, status) as master, pytest.raises(RunnerSetupError) as exc:
        runners.prepare(["--runner=FlinkRunner", f"--flink_master={master}"])
    assert "\n" not in str(exc.value) and says in str(exc.value)


def test_a_cluster_that_does_not_answer_is_named(cache):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed
    with pytest.raises(RunnerSetupError, match=f"localhost:{port}"):
        flink.cluster_flink_version(f"http://localhost:{port}", timeout=2)


# --- the job server process -----------------------------------------------------------------


def test_a_job_server_that_cannot_start_fails_in_one_line_pointing_at_its_log(tmp_path):
    not_a_jar = tmp_path / "job-server.jar"
    not_a_jar.write_text("not a jar")
    args = ["--runner=FlinkRunner", "--flink_master=[local]", f"--flink_job_server_jar={not_a_jar}"]
    with pytest.raises(RunnerSetupError) as exc:
        with flink.job_server(args, str(tmp_path / "out")):
            pytest.fail("a job server that exits must not be used")
    log = tmp_path / "out" / "logs" / flink.LOG_NAME
    message = str(exc.value)
    assert "\n" not in message and "exited" in message and str(log) in message
    text = log.read_text()
    assert "job server: " in text and "jarfile" in text.lower()  # java's own complaint


@pytest.mark.parametrize(
    "given, heap", [([], f"-Xmx{flink.JOB_SERVER_HEAP}"), (["--job_server_jvm_property=-Xmx384m"], "-Xmx384m")]
)
def test_the_job_server_gets_a_heap_limit_and_is_asked_for_loopback_and_a_port_of_its_own(tmp_path, given, heap):
    not_a_jar = tmp_path / "job-server.jar"
    not_a_jar.write_text("not a jar")
    args = ["--runner=FlinkRunner", "--flink_master=[local]", f"--flink_job_server_jar={not_a_jar}", *given]
    with pytest.raises(RunnerSetupError):
        with flink.job_server(args, str(tmp_path / "out")):
            pytest.fail("a job server that exits must not be used")
    cmd = (tmp_path / "out" / "logs" / flink.LOG_NAME).read_text().splitlines()[0].split(": ", 1)[1].split()
    assert [arg for arg in cmd if arg.startswith("-Xmx")] == [heap]
    assert cmd[cmd.index("--job-host") + 1] == "localhost"
    assert cmd[cmd.index("--job-port") + 1] == "0"  # it binds a port itself and says which


# A stand-in for the java launcher: a real process that, like Beam's job server, binds a port
# of its own (``--job-port 0``), logs "JobService started on localhost:PORT" and serves, or
# misbehaves as told (FAKE_MODE). It writes the port it bound to FAKE_BOUND for the test.
FAKE_JOB_SERVER = """\
import os, socket, sys, time
args = sys.argv[1:]
assert args[args.index("--job-port") + 1] == "0", args
mode = os.environ["FAKE_MODE"]
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
port = sock.getsockname()[1]
if mode == "elsewhere":  # says a port where nothing listens
    sock.close()
    probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
with open(os.environ["FAKE_BOUND"], "w") as out:
    out.write(str(port))
time.sleep(float(os.environ.get("FAKE_DELAY", "0")))
print("INFO JobServerDriver: ArtifactStagingService started on localhost:1", flush=True)
if mode != "silent":
    print(f"INFO org.apache.beam.runners.jobsubmission.JobServerDriver: JobService started on localhost:{port}", flush=True)
time.sleep(120)
"""


def _fake_launcher(tmp_path, monkeypatch, mode, delay=0.0):
    script = tmp_path / "fake_job_server.py"
    script.write_text(FAKE_JOB_SERVER)
    launcher = tmp_path / "java"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    launcher.chmod(0o755)
    jar = tmp_path / "job-server.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("FAKE_MODE", mode)
    monkeypatch.setenv("FAKE_DELAY", str(delay))
    monkeypatch.setenv("FAKE_BOUND", str(tmp_path / "bound"))
    return [
        "--runner=FlinkRunner",
        "--flink_master=[local]",
        f"--flink_job_server_jar={jar}",
        f"--job_server_java_launcher={launcher}",
    ]


def test_the_crawl_uses_the_port_the_job_server_says_it_bound_not_one_it_handed_over(tmp_path, monkeypatch):
    """The job server picks its port: the crawl's rounds go to the port it logs, even while
    another process listens on loopback and the log already holds an earlier run's port."""
    log = tmp_path / "out" / "logs" / flink.LOG_NAME
    log.parent.mkdir(parents=True)
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        stale = other.getsockname()[1]  # an earlier crawl's line, in the same log
        log.write_text(f"INFO JobServerDriver: JobService started on localhost:{stale}\n")
        args = _fake_launcher(tmp_path, monkeypatch, "serves", delay=0.5)
        said: list[str] = []
        with flink.job_server(args, str(tmp_path / "out"), announce=said.append) as given:
            bound = int((tmp_path / "bound").read_text())
            assert bound != stale
            assert runners.option_value(given, "job_endpoint") == f"localhost:{bound}"
            assert f"localhost:{bound}" in said[0]


@pytest.mark.parametrize(
    "mode, says", [("silent", "did not say it listens"), ("elsewhere", "takes no connection there")]
)
def test_a_job_server_that_does_not_say_a_port_it_serves_fails_in_one_line(tmp_path, monkeypatch, mode, says):
    args = _fake_launcher(tmp_path, monkeypatch, mode)
    monkeypatch.setattr(flink, "START_TIMEOUT", 3.0)
    with pytest.raises(RunnerSetupError) as exc:
        with flink.job_server(args, str(tmp_path / "out")):
            pytest.fail("a job server that does not serve the port it says must not be used")
    message = str(exc.value)
    assert "\n" not in message and says in message and flink.LOG_NAME in message


def test_other_runners_get_their_arguments_unchanged(tmp_path):
    with flink.job_server(["--runner=PrismRunner"], str(tmp_path / "out")) as args:
        assert args == ["--runner=PrismRunner"]
    assert not (tmp_path / "out").exists()


# --- teardown noise ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hangup():
    """A real gRPC error as the SDK worker gets it: a stream the server cancels with
    "Multiplexer hanging up" (and another cancelled stream, with other details)."""

    def stream(request, context):
        yield b"one"
        context.abort(grpc.StatusCode.CANCELLED, request.decode())

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.method_handlers_generic_handler("t", {"s": grpc.unary_stream_rpc_method_handler(stream)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_stream("/t/s")

    def error(details: str) -> grpc.RpcError:
        try:
            list(call(details.encode()))
        except grpc.RpcError as exc:
            return exc
        raise AssertionError("the stream was not cancelled")

    errors = {"hangup": error(flink.HANGUP), "other": error("job cancelled by the user")}
    yield errors
    channel.close()
    server.stop(None)


def test_only_the_teardown_hangup_is_recognised(hangup):
    assert flink.is_teardown_hangup(hangup["hangup"])
    try:  # an error raised while handling it, as a worker's close() may
        try:
            raise hangup["hangup"]
        except grpc.RpcError as exc:
            raise RuntimeError("closing the data channel failed") from exc
    except RuntimeError as chained:
        assert flink.is_teardown_hangup(chained)
    assert not flink.is_teardown_hangup(hangup["other"])
    assert not flink.is_teardown_hangup(RuntimeError(flink.HANGUP))
    assert not flink.is_teardown_hangup(None)


def _raise_in_thread(exc: BaseException) -> None:
    def run():
        raise exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def test_quiet_teardown_holds_back_the_hangup_only_and_says_so_once(hangup, capsys, monkeypatch):
    handler = logging.StreamHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    reached = []  # what reaches the hook that was there before (Python's, or pytest's)
    monkeypatch.setattr(threading, "excepthook", lambda args: reached.append(args.exc_value))
    before = threading.excepthook
    said = []
    try:
        with flink.quiet_teardown(announce=said.append):
            worker_log = logging.getLogger("apache_beam.runners.worker.data_plane")
            for exc in (hangup["hangup"], hangup["other"]):
                try:
                    raise exc
                except grpc.RpcError:
                    worker_log.error("Failed to read inputs in the data plane.", exc_info=True)
            worker_log.warning("Worker: data stream ended (%s)", flink.HANGUP)  # quoted, no exc_info
            logging.getLogger("beamcrawl.fetch").warning("a page said %s", flink.HANGUP)  # not Beam's: kept
            bug = ValueError("a real bug in a worker thread")
            _raise_in_thread(hangup["hangup"])
            _raise_in_thread(bug)
        after = threading.excepthook
    finally:
        root.removeHandler(handler)
    err = capsys.readouterr().err
    assert err.count("Failed to read inputs") == 1 and "job cancelled by the user" in err
    assert "data stream ended" not in err and f"a page said {flink.HANGUP}" in err
    assert err.count(flink.HANGUP) == 1
    assert reached == [bug]
    assert len(said) == 1 and "3 times" in said[0]
    assert after is before and handler.filters == []


def test_quiet_teardown_says_nothing_when_nothing_happened():
    said = []
    with flink.quiet_teardown(announce=said.append):
        time.sleep(0)
    assert said == []


def test_artifacts_left_by_a_killed_crawl_are_swept_and_no_live_crawls(tmp_path):
    """A crawl killed before its clean-up leaves its job server's artifacts folder; the next
    crawl's job server start removes those of dead crawls only."""
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    dead = tmp_path / f"{flink.ARTIFACTS_PREFIX}{exited.pid}-x1y2"
    live = tmp_path / f"{flink.ARTIFACTS_PREFIX}{os.getpid()}-a3b4"
    unnamed = tmp_path / f"{flink.ARTIFACTS_PREFIX}k9z8"  # an older crawl's: no pid to go by
    other = tmp_path / "someone-elses"
    for folder in (dead, live, unnamed, other):
        folder.mkdir()
        (folder / "logging.properties").write_text("x")
    assert flink.sweep_stale_artifacts(str(tmp_path)) == [str(dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, unnamed, other))
