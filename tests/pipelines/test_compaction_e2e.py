"""A round whose writers stage many small files (bundles split across workers, as Dataflow
splits work items) commits them merged: fewer WARC files and Parquet parts, each WARC file
valid with one warcinfo naming it, every index line and page event pointing at its record,
every page of the round committed, and the report saying how many files there were."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.simweb.testing import running_simweb
from crawl_setups import runner_args  # noqa: E402  (tests/crawl_setups.py)
from staged_warcs import check_warc_folder  # noqa: E402  (tests/staged_warcs.py)


def test_a_round_of_many_small_files_commits_them_merged(tmp_path: Path) -> None:
    with running_simweb(str(tmp_path / "web"), hosts=6, seed=11, pages_per_host=10) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        out = tmp_path / "out"
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl",
            "--seeds", str(seeds), "--out", str(out), "--store", f"sqlite:///{out}/store.sqlite", "--rounds", "1",
            "--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.05", "--round-window", "2",
            *runner_args("threads"),
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "reports" / "round-000001.json").read_text())
    compacted = report["compacted"]
    # the writers staged several small files; fewer were committed
    assert compacted["warc"]["before"] > compacted["warc"]["after"] == len(report["files"]["warc"])
    assert compacted["cdxj"]["after"] == len(report["files"]["cdxj"]) == compacted["warc"]["after"]
    assert compacted["pages"]["before"] > compacted["pages"]["after"] == len(report["files"]["pages"])
    assert f"warc: {compacted['warc']['after']} file(s) (merged from {compacted['warc']['before']} staged)" in (
        done.stdout
    )
    outputs = RoundOutputs(str(out), 1)
    folder = outputs.final("warc")
    indexed = check_warc_folder(outputs, folder, folder)
    pages = [
        row
        for path in sorted(Path(outputs.final("pages")).glob("*.parquet"))
        for row in pq.read_table(path).to_pylist()
    ]
    blobs = [row for row in pages if row["blob"]]
    assert blobs and sorted(row["url"] for row in blobs) == sorted(indexed)  # each page its one record
    for row in blobs:
        rel, offset = row["blob"].rsplit("@", 1)
        with open(out / rel, "rb") as fh:
            fh.seek(int(offset))
            record = next(iter(ArchiveIterator(fh)))
        assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]
    assert not (out / "_staging").exists()
