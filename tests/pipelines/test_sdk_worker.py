"""The local runner's worker processes start without the client libraries no stage uses
(``pipelines/sdk_worker.py``), and still run a round's stages and reach the store's client."""

from __future__ import annotations

import json
import os
import sys

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import environments

from beamcrawl.pipelines import live, sdk_worker

MP = ["--runner=FnApiRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def _inspect(out: str) -> beam.DoFn:
    """A DoFn that writes what the worker process running it has imported, and can import.
    Defined in a function so that the pickler ships the class by value to worker processes."""
    absent = tuple(sdk_worker.ABSENT)

    class Inspect(beam.DoFn):
        def process(self, n: int):
            import importlib
            import json
            import os
            import sys
            from pathlib import Path

            def importable(name: str) -> bool:
                try:
                    importlib.import_module(name)
                except ImportError:
                    return False
                return True

            report = {
                "pid": os.getpid(),
                "loaded": sorted(m for m in sys.modules if m.startswith(absent)),
                "bigquery": importable("google.cloud.bigquery"),
                "bigtable": importable("google.cloud.bigtable"),
                "storage": importable("google.cloud.storage"),
                "gcs_filesystem": importable("apache_beam.io.gcp.gcsfilesystem"),
            }
            Path(out, f"{n}.json").write_text(json.dumps(report))
            Path(out, f"out-{n * 2}").touch()
            yield n * 2

    return Inspect()


@pytest.mark.parametrize("progress", ["plain", "off"])
def test_local_workers_run_without_the_unused_clients(tmp_path, monkeypatch, progress):
    monkeypatch.setenv("BEAMCRAWL_PROGRESS", progress)
    p = live.pipeline(PipelineOptions(flags=MP))
    _ = p | beam.Create([1, 2, 3]) | beam.ParDo(_inspect(str(tmp_path)))
    live.run(p, round_no=1, window=5.0, stream=open(os.devnull, "w"))
    reports = [json.loads(f.read_text()) for f in sorted(tmp_path.glob("[0-9].json"))]
    assert len(reports) == 3
    assert sorted(f.name for f in tmp_path.glob("out-*")) == ["out-2", "out-4", "out-6"]
    for r in reports:
        assert r["pid"] != os.getpid()  # a worker process, not this one
        assert r["loaded"] == [], r  # Beam's harness imported none of them
        assert not r["bigquery"]
        assert r["bigtable"] and r["storage"] and r["gcs_filesystem"]  # the store's and gs://'s clients


def test_only_beams_own_worker_command_is_replaced():
    with sdk_worker.local_workers():
        beams = environments.SubprocessSDKEnvironment.from_command_string(f"{sys.executable} {sdk_worker.BEAM_WORKER}")
        users = environments.SubprocessSDKEnvironment.from_command_string("/opt/py/bin/python -m my.worker")
    assert beams.command_string == f"{sys.executable} -m beamcrawl.pipelines.sdk_worker"
    assert users.command_string == "/opt/py/bin/python -m my.worker"
    # and left as Beam has it outside a local run
    after = environments.SubprocessSDKEnvironment.from_command_string(f"{sys.executable} {sdk_worker.BEAM_WORKER}")
    assert after.command_string == f"{sys.executable} {sdk_worker.BEAM_WORKER}"


def test_an_absent_package_is_not_found_and_others_are(tmp_path):
    import subprocess

    code = (
        "from beamcrawl.pipelines import sdk_worker; sdk_worker.absent_clients(); import importlib, sys\n"
        "for name in ('google.cloud.bigquery', 'google.cloud.pubsub_v1.types', 'google.cloud.dataflow_v1beta3'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as e:\n"
        "        assert name == e.name or name.startswith(e.name + '.'), e.name  # a module of one\n"
        "    else:\n"
        "        raise SystemExit(name + ' imported')\n"
        "import google.cloud.bigtable, google.cloud.storage\n"
        "finder = sys.meta_path[0]\n"
        "assert finder.find_spec('google.cloud.bigqueryx') is None  # a name that only starts alike\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_overlapping_runs_share_the_patch_until_the_last_ends():
    beams = f"{sys.executable} {sdk_worker.BEAM_WORKER}"

    def command() -> str:
        return environments.SubprocessSDKEnvironment.from_command_string(beams).command_string

    a, b = sdk_worker.local_workers(), sdk_worker.local_workers()
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)  # the first run ends while the second still starts workers
    assert command() == sdk_worker.worker_command()
    b.__exit__(None, None, None)
    assert command() == beams


# `beamcrawl crawl` with these Beam arguments, stopped early by a seeds file that is not there
# (after it has imported the round's modules and Beam); prints whether BigQuery's client, one of
# the clients left out, was imported, and the command's exit status.
_LAUNCH = """
import json, sys
from beamcrawl.cli.main import cmd_crawl
rc = cmd_crawl(["--out", sys.argv[1], "--seeds", sys.argv[1] + "/none.txt", *sys.argv[2:]])
import apache_beam.runners  # as a round's launch does, whichever runner it names
print(json.dumps({"rc": rc, "bigquery": "google.cloud.bigquery" in sys.modules}))
"""


@pytest.mark.parametrize(
    "beam_args, left_out",
    [
        ([], True),
        (["--runner", "FnApiRunner", "--direct_running_mode=multi_processing"], True),
        (["--runner=PrismRunner"], True),
        (["--runner=flink", "--flink_master=[local]"], True),
        (["--runner", "DataflowRunner"], False),
        (["--runner=apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"], False),
    ],
)
def test_the_crawl_command_leaves_the_clients_out_for_runners_that_never_use_them(tmp_path, beam_args, left_out):
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _LAUNCH, str(tmp_path), *beam_args],
        capture_output=True, text=True, timeout=120, cwd=os.getcwd(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["rc"] == 2, done.stderr  # the missing seeds file, after the imports
    assert "none.txt" in done.stderr
    assert report["bigquery"] is not left_out, done.stderr
