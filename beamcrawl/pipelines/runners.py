"""Which Beam runner a round uses, and what each one needs before it can start.

- Local: Beam's in-process ``FnApiRunner`` (the default; the plain DirectRunner first tries
  to download the Prism binary, which may not be reachable).
- Prism, Beam's portable Go runner: built once from its Go module with the machine's Go
  toolchain into a cache folder, then passed as ``--prism_location``.
- Flink: the Beam Flink job-server jar matching the installed Beam, fetched with Maven into
  the cache folder and passed as ``--flink_job_server_jar``; where Maven does not serve it,
  Flink's local mini-cluster runs the Flink 1.16 job server ``make flink`` builds (both are
  chosen in ``flink.py``).
- Dataflow, or Flink/Prism on other machines: workers share no disk with the launcher, so
  the embedded (SQLite) store is refused with a message saying what to use instead.
"""

from __future__ import annotations

import difflib
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Sequence

from beamcrawl.core.runtime.interruptible import run_tool, sigterm_as_interrupt
from beamcrawl.pipelines.runner_args import (
    CACHE,
    LOCAL_MASTERS,
    LOCAL_RUNNER,
    RunnerSetupError,
    option_value,
    runner_name,
)

log = logging.getLogger(__name__)


def is_remote(args: Sequence[str]) -> bool:
    """True when the round's workers may run on machines other than this one."""
    runner = runner_name(args).lower().removesuffix("runner")
    if runner in ("fnapi", "direct", "prism", "bundlebaseddirect", "switchingdirect"):
        return False
    # Workers in a pool or in containers are not this process, whatever the job server's address:
    # a job endpoint or Flink master on localhost may front a cluster.
    outside = (option_value(args, "environment_type") or "").upper() in ("EXTERNAL", "DOCKER")
    if runner == "flink":
        return outside or (option_value(args, "flink_master") or "[auto]") not in LOCAL_MASTERS
    if runner == "portable":
        endpoint = option_value(args, "job_endpoint") or ""
        return outside or not (endpoint == "embed" or endpoint.startswith(("localhost:", "127.0.0.1:")))
    return True  # Dataflow, Spark, and anything we don't know: assume a cluster


def check_runner(args: Sequence[str]) -> None:
    """Refuses a ``--runner`` Beam does not know, listing the ones it does (a typo such as
    ``FlinkRuner`` would otherwise be taken for some cluster's runner)."""
    from apache_beam.options.pipeline_options import StandardOptions

    name = runner_name(args)
    known = StandardOptions.KNOWN_RUNNER_NAMES
    # As Beam resolves a name: any case, "Runner" optional, or a class's dotted path.
    if "." in name or {name.lower(), name.lower() + "runner"} & {k.lower() for k in known}:
        return
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise RunnerSetupError(
        f"unknown runner {name!r}; {hint}Beam knows {', '.join(known)} (or a PipelineRunner's dotted class path)"
    )


def check_store_for_runner(store_uri: str, args: Sequence[str]) -> None:
    """Refuses the embedded store when the round's workers may not share this machine's disk."""
    if store_uri.startswith("bigtable://") or not is_remote(args):
        return
    raise RunnerSetupError(
        f"the embedded store ({store_uri}) is a file on this machine, which {runner_name(args)} workers "
        "cannot reach; use --store bigtable://PROJECT/INSTANCE (create it with `beamcrawl store init`)"
    )


def with_local_runner(args: Sequence[str]) -> list[str]:
    """Beam arguments with the local runner added when none is given."""
    if option_value(args, "runner") is not None:
        return list(args)
    return [f"--runner={LOCAL_RUNNER}", *args]


# --- Prism ------------------------------------------------------------------------------

PRISM_MODULE = "github.com/apache/beam/sdks/v2/go/cmd/prism"


def prism_binary(build: bool = True) -> Path:
    """The Prism runner binary for the installed Beam, built from its Go module if needed."""
    import apache_beam

    version = apache_beam.__version__
    target = CACHE / "bin" / f"prism-v{version}"
    if target.exists():
        return target
    if not build:
        raise RunnerSetupError(f"Prism {version} is not built yet (expected {target})")
    go = shutil.which("go")
    if go is None:
        raise RunnerSetupError("building the Prism runner needs the Go toolchain ('go' is not on PATH)")
    staging = CACHE / "bin" / f".prism-build-{os.getpid()}"
    print(
        f"building the Prism runner {version} once (go install {PRISM_MODULE}@v{version}) into "
        f"{target.parent}; this can take a few minutes ...",
        file=sys.stderr,
        flush=True,
    )
    started = time.monotonic()
    try:
        # Ctrl-C or SIGTERM, to any thread, ends the build promptly and kills it (and its
        # compilers); the staging folder goes either way.
        with sigterm_as_interrupt():
            staging.mkdir(parents=True, exist_ok=True)
            proc = run_tool([go, "install", f"{PRISM_MODULE}@v{version}"], env=dict(os.environ, GOBIN=str(staging)),
                            timeout=1800)  # fmt: skip
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise RunnerSetupError(f"cannot build Prism {version} from {PRISM_MODULE}: {last}")
            os.replace(staging / "prism", target)  # atomic: concurrent builds never see half a binary
    finally:
        # Interrupted or failed, a build leaves nothing behind (the next one starts afresh).
        shutil.rmtree(staging, ignore_errors=True)
    print(f"built {target} in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    return target


def prepare(args: Sequence[str]) -> list[str]:
    """Beam arguments completed with what the chosen runner needs (binary or jar paths)."""
    args = with_local_runner(args)
    runner = runner_name(args).lower()
    if runner in ("prismrunner", "prism") and option_value(args, "prism_location") is None:
        args = [*args, f"--prism_location={prism_binary()}"]
    if runner in ("flinkrunner", "flink") and option_value(args, "flink_job_server_jar") is None:
        local = (option_value(args, "flink_master") or "[auto]") in LOCAL_MASTERS
        from beamcrawl.pipelines.flink import flink_job_server

        jar = flink_job_server(option_value(args, "flink_version"), local=local, announce=log.info,
                               master=None if local else option_value(args, "flink_master"))  # fmt: skip
        args = [*args, f"--flink_job_server_jar={jar}"]
        if (
            option_value(args, "environment_type") is None
            and (option_value(args, "flink_master") or "[auto]") in LOCAL_MASTERS
        ):
            args = [*args, "--environment_type=LOOPBACK"]
    return list(args)
