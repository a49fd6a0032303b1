"""A Flink 1.16 session cluster on this machine: a JobManager, TaskManagers and an SDK worker pool.

Built from the jars ``make flink`` copies (the Flink 1.16 runtime is part of the job server's
class path), each process is its own JVM (or Python) with its own config folder, and all of
them listen on loopback only. The folder the caller names holds everything:
``conf/jobmanager/``, ``conf/taskmanager-N/`` (each a ``flink-conf.yaml``), ``logs/``, the
processes' scratch space and ``cluster.json`` (their pids and ports), so ``stop`` and ``status``
need only the folder.

What it took for Flink 1.16 on Java 17 and Beam's portable batch jobs (issue #28):
- ``--add-exports java.base/sun.net.util`` (Flink's address parsing), and every TaskManager
  memory option, which Flink's own ``BashJavaUtils`` computes from the process size;
- Beam's jars on the cluster's class path, loaded parent-first (a class loader per job leaked
  metaspace and direct memory by round 2), enough sort-shuffle buffers, blob caches cleaned
  every minute;
- a restart strategy (fixed delay) so a lost TaskManager costs a restart, not the round.

The SDK workers run in the pool (``worker_pool.py``: keyed by caller, as two TaskManagers
need); a round is sent with ``--flink_master localhost:REST --environment_type EXTERNAL
--environment_config localhost:POOL`` (``submit_args``).

    beamcrawl flink-cluster start --dir DIR [--rest-port 8081] [--task-managers 2]
    beamcrawl flink-cluster status --dir DIR
    beamcrawl flink-cluster stop --dir DIR
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from beamcrawl.core.runtime.interruptible import run_tool
from beamcrawl.pipelines import flink
from beamcrawl.pipelines.runner_args import RunnerSetupError

STATE = "cluster.json"
ENTRYPOINT = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASK_MANAGER = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
BASH_JAVA_UTILS = "org.apache.flink.runtime.util.bash.BashJavaUtils"
JAVA17 = ["--add-exports=java.base/sun.net.util=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
          "--add-opens=java.base/java.util=ALL-UNNAMED"]  # fmt: skip
START_TIMEOUT = 120.0
STOP_GRACE = 20.0


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """What a cluster is made of. Memory is sized for a 2-core machine shared with other work:
    a 1 GiB JobManager and 1.5 GiB TaskManagers of 2 slots each.

    The restart strategy is Flink's ``fixed-delay``: ``restart_attempts`` restarts,
    ``restart_delay_s`` apart; a TaskManager is declared lost after ``heartbeat_timeout_s``
    (or at once, when its connections break).
    """

    rest_port: int = 8081
    rpc_port: int = 6123
    pool_port: int = 50000
    task_managers: int = 2
    slots: int = 2
    jobmanager_memory: str = "1024m"
    taskmanager_memory: str = "1536m"
    restart_attempts: int = 3
    restart_delay_s: int = 10
    heartbeat_timeout_s: int = 20
    # How long the REST API may answer from its cache of a job: the crawl's failover watch
    # (pipelines/flink_failover.py) sees a failure at most this much late (Flink's default, 3 s).
    rest_refresh_ms: int = 500


def flink_conf(cfg: ClusterConfig, folder: Path, role: str) -> str:
    """The ``flink-conf.yaml`` of one process (``jobmanager`` or ``taskmanager-N``)."""
    lines = {
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": cfg.rpc_port,
        "jobmanager.bind-host": "localhost",
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": cfg.rest_port,
        "jobmanager.memory.process.size": cfg.jobmanager_memory,
        "taskmanager.memory.process.size": cfg.taskmanager_memory,
        "taskmanager.numberOfTaskSlots": cfg.slots,
        "taskmanager.network.sort-shuffle.min-buffers": 64,
        "classloader.resolve-order": "parent-first",
        "blob.service.cleanup.interval": 60,
        "restart-strategy": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": cfg.restart_attempts,
        "restart-strategy.fixed-delay.delay": f"{cfg.restart_delay_s} s",
        "heartbeat.interval": 5000,
        "web.refresh-interval": cfg.rest_refresh_ms,
        "heartbeat.timeout": cfg.heartbeat_timeout_s * 1000,
        "web.tmpdir": str(folder / "tmp" / role / "web"),
        "blob.storage.directory": str(folder / "tmp" / role / "blobs"),
        "io.tmp.dirs": str(folder / "tmp" / role / "io"),
    }
    if role.startswith("taskmanager-"):
        lines.update({
            "taskmanager.host": "localhost",
            "taskmanager.bind-host": "localhost",
            "taskmanager.rpc.port": 0,
            "taskmanager.data.port": 0,
            "taskmanager.resource-id": role,
        })  # fmt: skip
    return "".join(f"{key}: {value}\n" for key, value in lines.items())


def _classpath() -> str:
    return str(flink.launcher_jar(build=False))  # its manifest lists every copied jar


def _memory_params(java: str, conf_dir: Path, what: str) -> tuple[list[str], list[str]]:
    """Flink's own computation of a process's JVM flags and memory options (as its scripts do)."""
    proc = run_tool([java, "-cp", _classpath(), BASH_JAVA_UTILS, what, "--configDir", str(conf_dir)], timeout=120)
    results = [
        line.split(":", 1)[1] for line in proc.stdout.splitlines() if line.startswith("BASH_JAVA_UTILS_EXEC_RESULT:")
    ]
    if proc.returncode != 0 or len(results) < 2:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise RunnerSetupError(f"Flink's BashJavaUtils could not size the {conf_dir.name} process: {last[:200]}")
    return results[0].split(), results[1].split()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as a server binds it: a port whose old connections linger in TIME_WAIT is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def rest(port: int, path: str, timeout: float = 5.0) -> dict:
    """A GET of the cluster's REST API on loopback, decoded."""
    with urllib.request.urlopen(f"http://localhost:{port}{path}", timeout=timeout) as resp:
        return json.loads(resp.read())


def start(folder: str | Path, cfg: ClusterConfig = ClusterConfig(), env: dict[str, str] | None = None) -> dict:
    """Starts the cluster's processes and waits until every TaskManager has registered its slots.

    Args:
        folder: The cluster's folder (created); its ``logs/`` holds each process's log.
        cfg: Ports, sizes and the restart strategy.
        env: The environment of the worker pool, and so of every SDK worker (default: this
            process's, which must reach the store: ``BIGTABLE_EMULATOR_HOST``, credentials).

    Returns:
        The cluster's state (as ``status`` reads it back from ``cluster.json``).

    Raises:
        RunnerSetupError: One line: a port in use, Java missing, or a process that did not come up.
    """
    folder = Path(folder).resolve()
    if (folder / STATE).exists() and _alive(_read_state(folder)):
        raise RunnerSetupError(
            f"a cluster is already running from {folder} (beamcrawl flink-cluster stop --dir {folder})"
        )
    for name, port in (("REST", cfg.rest_port), ("RPC", cfg.rpc_port), ("worker pool", cfg.pool_port)):
        if not _port_free(port):
            raise RunnerSetupError(
                f"the {name} port {port} is in use on localhost; choose another (--{name.lower().replace(' ', '-')}-port)"
            )
    java = _java()
    _classpath()
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    state: dict = {"folder": str(folder), "config": dataclasses.asdict(cfg), "processes": {}}
    logging_config = folder / "conf" / "logging.properties"
    logging_config.parent.mkdir(parents=True, exist_ok=True)
    logging_config.write_text(flink.JAVA_LOGGING)
    try:
        roles = ["jobmanager"] + [f"taskmanager-{i}" for i in range(1, cfg.task_managers + 1)]
        sizes: dict[str, tuple[list[str], list[str]]] = {}
        for role in roles:
            conf_dir = folder / "conf" / role
            conf_dir.mkdir(parents=True, exist_ok=True)
            (conf_dir / "flink-conf.yaml").write_text(flink_conf(cfg, folder, role))
            for sub in ("web", "blobs", "io"):
                (folder / "tmp" / role / sub).mkdir(parents=True, exist_ok=True)
            what, main = (
                ("GET_JM_RESOURCE_PARAMS", ENTRYPOINT)
                if role == "jobmanager"
                else ("GET_TM_RESOURCE_PARAMS", TASK_MANAGER)
            )
            if what not in sizes:  # every TaskManager has the same sizes
                sizes[what] = _memory_params(java, conf_dir, what)
            jvm, dynamic = sizes[what]
            cmd = [java, *jvm, *JAVA17, f"-Djava.util.logging.config.file={logging_config}", f"-Dbeamcrawl.cluster={folder}",
                   "-cp", _classpath(), main, "--configDir", str(conf_dir), *dynamic]  # fmt: skip
            # TaskManagers start beside the JobManager: they retry until it listens.
            state["processes"][role] = _spawn(cmd, logs / f"{role}.log", None)
            _write_state(folder, state)  # after each start: `stop` can end what a killed `start` left
        pool_cmd = [
            sys.executable,
            "-m",
            "beamcrawl.pipelines.worker_pool",
            "--port",
            str(cfg.pool_port),
            "--bind",
            "127.0.0.1",
        ]
        state["processes"]["worker-pool"] = _spawn(pool_cmd, logs / "worker-pool.log", env)
        _write_state(folder, state)
        _wait(
            lambda: _rest_ok(cfg.rest_port),
            f"the JobManager's REST API on port {cfg.rest_port}",
            logs / "jobmanager.log",
            state,
        )
        _wait(lambda: _registered(cfg.rest_port, cfg.task_managers, cfg.slots),
              f"{cfg.task_managers} TaskManagers to register their slots", logs / "taskmanager-1.log", state)  # fmt: skip
        _wait(
            lambda: not _port_free(cfg.pool_port),
            f"the worker pool on port {cfg.pool_port}",
            logs / "worker-pool.log",
            state,
        )
    except BaseException:
        _terminate(state)
        raise
    return status(folder)


def stop(folder: str | Path) -> bool:
    """Stops every process of the cluster in ``folder``; False when none was running."""
    folder = Path(folder).resolve()
    if not (folder / STATE).exists():
        return False
    state = _read_state(folder)
    running = _alive(state)
    _terminate(state)
    (folder / STATE).unlink(missing_ok=True)
    return bool(running)


def restart(folder: str | Path, role: str) -> dict:
    """Starts ``role`` (a JobManager or TaskManager that died or was killed) again as it was
    started, and waits until the cluster has all its TaskManagers; returns the status."""
    folder = Path(folder).resolve()
    state = _read_state(folder)
    entry = state["processes"][role]
    if role == "worker-pool" or "cmd" not in entry:
        raise RunnerSetupError(f"cannot restart the cluster's {role}: stop and start the cluster")
    deadline = time.monotonic() + STOP_GRACE  # a process just killed may take a moment to go
    while _is_ours(entry):
        if time.monotonic() > deadline:
            raise RunnerSetupError(f"the cluster's {role} is running (pid {entry['pid']})")
        time.sleep(0.1)
    cmd = list(entry["cmd"])
    restarts = int(entry.get("restarts", 0)) + 1
    if role.startswith("taskmanager-"):
        # A new identity: under its old one, Flink looked for the killed process's shuffle
        # output on the new one (PartitionNotFoundException) and failed the restarted job again.
        cmd = [*entry["cmd"], "-D", f"taskmanager.resource-id={role}-{restarts}"]
    state["processes"][role] = {**_spawn(cmd, Path(entry["log"]), None), "cmd": entry["cmd"], "restarts": restarts}
    _write_state(folder, state)
    cfg = state["config"]
    _wait(lambda: _registered(cfg["rest_port"], cfg["task_managers"], cfg["slots"]),
          f"{cfg['task_managers']} TaskManagers to register their slots", Path(entry["log"]), state)  # fmt: skip
    return status(folder)


def status(folder: str | Path) -> dict:
    """The cluster's processes (alive or not), and what its REST API says (``/overview``)."""
    folder = Path(folder).resolve()
    if not (folder / STATE).exists():
        return {"folder": str(folder), "running": False, "processes": {}}
    state = _read_state(folder)
    alive = _alive(state)
    out = {"folder": str(folder), "running": len(alive) == len(state["processes"]), "config": state["config"],
           "processes": {role: {"pid": p["pid"], "alive": role in alive, "log": p["log"]} for role, p in state["processes"].items()}}  # fmt: skip
    with contextlib.suppress(OSError, ValueError):
        out["overview"] = rest(state["config"]["rest_port"], "/overview")
    return out


def submit_args(state: dict) -> list[str]:
    """The Beam options that send a round to the cluster whose state is ``state``."""
    cfg = state["config"]
    return ["--runner=FlinkRunner", f"--flink_master=localhost:{cfg['rest_port']}",
            "--environment_type=EXTERNAL", f"--environment_config=localhost:{cfg['pool_port']}"]  # fmt: skip


@contextlib.contextmanager
def running(
    folder: str | Path, cfg: ClusterConfig = ClusterConfig(), env: dict[str, str] | None = None
) -> Iterator[dict]:
    """A started cluster for the block's length (for tests); stopped however the block ends."""
    state = start(folder, cfg, env)
    try:
        yield state
    finally:
        stop(folder)


# --- processes --------------------------------------------------------------------------------


def _java() -> str:
    import shutil

    java = shutil.which("java")
    if java is None:
        raise RunnerSetupError("the Flink cluster needs Java 11 or 17 ('java' is not on PATH)")
    return java


def _spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None) -> dict:
    with open(log_path, "a", encoding="utf-8") as log_file:
        log_file.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {' '.join(cmd)}\n")
        log_file.flush()
        # Its own session: the cluster outlives `beamcrawl flink-cluster start` and its Ctrl-C.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # fmt: skip
    return {"pid": proc.pid, "log": str(log_path), "started": _start_time(proc.pid), "cmd": cmd}


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (/proc), so a reused pid is never signalled."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _is_ours(entry: dict) -> bool:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(entry["pid"], 0)
        with contextlib.suppress(OSError):  # reap it if it is our child that died
            os.waitpid(entry["pid"], os.WNOHANG)
        if Path(f"/proc/{entry['pid']}/stat").exists():
            state = Path(f"/proc/{entry['pid']}/stat").read_text().rsplit(")", 1)[1].split()[0]
            return state != "Z" and _start_time(entry["pid"]) == entry.get("started")
    return False


def _alive(state: dict) -> list[str]:
    return [role for role, entry in state["processes"].items() if _is_ours(entry)]


def _terminate(state: dict) -> None:
    """SIGTERM to each process (TaskManagers and pool first, the JobManager last), then SIGKILL."""
    order = sorted(state["processes"], key=lambda role: role == "jobmanager")
    for role in order:
        entry = state["processes"][role]
        if _is_ours(entry):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(entry["pid"], signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline and any(_is_ours(state["processes"][r]) for r in order):
        time.sleep(0.2)
    for role in order:
        entry = state["processes"][role]
        if _is_ours(entry):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(entry["pid"], signal.SIGKILL)


def _rest_ok(port: int) -> bool:
    try:
        rest(port, "/overview", timeout=2.0)
    except (OSError, ValueError):
        return False
    return True


def _registered(port: int, task_managers: int, slots: int) -> bool:
    """Whether ``task_managers`` TaskManagers have registered *and* reported their slots: a
    TaskManager registers first and sends its slot report after, so ``/overview`` can count
    two TaskManagers and one's slots for a moment (a job asked for then waits for slots)."""
    try:
        overview = rest(port, "/overview", timeout=2.0)
        return (
            int(overview.get("taskmanagers", 0)) >= task_managers
            and int(overview.get("slots-total", 0)) >= task_managers * slots
        )
    except (OSError, ValueError, TypeError):
        return False


def _wait(ready, what: str, log_path: Path, state: dict) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        dead = [role for role, entry in state["processes"].items() if not _is_ours(entry)]
        if dead:
            raise RunnerSetupError(
                f"the cluster's {dead[0]} exited while waiting for {what}; see {state['processes'][dead[0]]['log']}"
            )
        if time.monotonic() > deadline:
            raise RunnerSetupError(f"timed out after {START_TIMEOUT:g}s waiting for {what}; see {log_path}")
        time.sleep(0.5)


def _write_state(folder: Path, state: dict) -> None:
    tmp = folder / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, folder / STATE)


def _read_state(folder: Path) -> dict:
    return json.loads((folder / STATE).read_text())
