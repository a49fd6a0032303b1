"""``beamcrawl export``: exit codes and one-line errors."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from beamcrawl.cli.export import main
from beamcrawl.schemas.records import HostRecord
from beamcrawl.stores.base import Mutation, open_store


@pytest.fixture
def crawl_out(tmp_path):
    out = tmp_path / "crawl"
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        store.mutate("hosts", [Mutation.set(b"a.test", HostRecord(host="a.test", delay=2.0).to_cells())])
    return out


def test_exports_hosts_from_a_crawl_folder(crawl_out, tmp_path, capsys):
    assert main(["hosts", "--crawl", str(crawl_out), "--out", str(tmp_path / "state")]) == 0
    assert capsys.readouterr().out.startswith("hosts: 1 rows in 1 file(s)")
    assert pq.read_table(str(tmp_path / "state" / "hosts")).column("delay").to_pylist() == [2.0]


def test_exports_urls_from_a_store_uri(crawl_out, tmp_path):
    assert (
        main(
            [
                "urls",
                "--store",
                f"sqlite:///{crawl_out}/store.sqlite",
                "--out",
                str(tmp_path / "s"),
                "--chunk-rows",
                "5",
            ]
        )
        == 0
    )
    assert pq.read_table(str(tmp_path / "s" / "urls")).num_rows == 0


def test_missing_store_is_one_line_and_creates_nothing(tmp_path, capsys):
    assert main(["urls", "--crawl", str(tmp_path / "nope"), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no crawl store at" in err
    assert not (tmp_path / "nope").exists()
    assert main(["urls", "--store", str(tmp_path / "nope.sqlite"), "--out", str(tmp_path / "s")]) == 2
    assert not (tmp_path / "nope.sqlite").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["pages", "--crawl", "x", "--out", "y"],
        ["urls", "--out", "y"],
        ["urls", "--crawl", "x", "--store", "x", "--out", "y"],
        ["urls", "--crawl", "x"],
        ["urls", "--crawl", "x", "--out", "y", "--chunk-rows", "0"],
    ],
)
def test_bad_usage_exits_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
