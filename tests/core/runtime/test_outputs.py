"""A round's output folders (core/runtime/outputs.py): staged under ``_staging``, committed by rename.

On a real folder: what a round stages is absent from the final folders until the commit moves
it, the commit moves every staged part under its own name, a CDXJ index lands beside its
WARC file, the store's own staging (done keys, requeue rows) is never committed as output,
and a failed attempt's leftovers are discarded before the rerun.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import DONE, KINDS, REQUEUE, RoundOutputs, part_name


def _stage(outputs: RoundOutputs, kind: str, name: str, data: bytes = b"x") -> str:
    path = files.join(outputs.staged(kind), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    files.write_bytes(path, data)
    return path


def test_partition_labels_are_not_zero_padded_but_reports_are(tmp_path: Path) -> None:
    outputs = RoundOutputs(str(tmp_path), 7)
    # Hive partitions: "round=000007" would be read as the string '000007' by query engines.
    assert outputs.label == "round=7"
    assert outputs.final("pages") == str(tmp_path / "pages" / "round=7")
    assert outputs.final_rel("pages") == "pages/round=7"
    assert outputs.report_path() == str(tmp_path / "reports" / "round-000007.json")
    assert outputs.staging == str(tmp_path / "_staging" / "round=7")


def test_a_cdxj_index_is_committed_beside_its_warc_file(tmp_path: Path) -> None:
    outputs = RoundOutputs(str(tmp_path), 2)
    assert outputs.final("cdxj") == outputs.final("warc")
    assert outputs.final_rel("cdxj") == "warc/round=2"
    _stage(outputs, "warc", "part-a.warc.gz")
    _stage(outputs, "cdxj", "part-a.cdxj")
    moved = outputs.commit_files()
    assert sorted(os.listdir(tmp_path / "warc" / "round=2")) == ["part-a.cdxj", "part-a.warc.gz"]
    assert set(moved) == {"warc", "cdxj"}


def test_staged_files_appear_only_at_the_commit_under_their_own_names(tmp_path: Path) -> None:
    outputs = RoundOutputs(str(tmp_path), 1)
    outputs.prepare()
    staged = {kind: _stage(outputs, kind, f"part-{kind}.bin", kind.encode()) for kind in ("pages", "links", "errors")}
    assert not (tmp_path / "pages").exists()  # nothing final before the commit
    moved = outputs.commit_files()
    for kind, src in staged.items():
        target = tmp_path / kind / "round=1" / f"part-{kind}.bin"
        assert moved[kind] == [str(target)]
        assert target.read_bytes() == kind.encode()
        assert not os.path.exists(src)


def test_the_stores_staging_is_not_committed_as_output(tmp_path: Path) -> None:
    """Done keys and requeue rows are applied to the store at commit, not published."""
    outputs = RoundOutputs(str(tmp_path), 3)
    assert DONE not in KINDS and REQUEUE not in KINDS
    done = _stage(outputs, DONE, "part-1.txt", b"00ff\n")
    requeue = _stage(outputs, REQUEUE, "part-2.jsonl", b"{}\n")
    assert outputs.done_files() == [done] and outputs.requeue_files() == [requeue]
    assert outputs.commit_files() == {}
    assert os.path.exists(done) and os.path.exists(requeue)


def test_prepare_discards_a_failed_attempts_leftovers(tmp_path: Path) -> None:
    outputs = RoundOutputs(str(tmp_path), 4)
    _stage(outputs, "pages", "part-old.parquet")
    outputs.mark_committing()
    assert outputs.committing()
    outputs.prepare()
    assert not outputs.committing()
    assert outputs.commit_files() == {}  # the old part is gone, not committed by the rerun


def test_discarding_staging_removes_the_emptied_staging_folder(tmp_path: Path) -> None:
    first, second = RoundOutputs(str(tmp_path), 1), RoundOutputs(str(tmp_path), 2)
    _stage(first, "pages", "a")
    _stage(second, "pages", "b")
    first.discard_staging()
    assert sorted(os.listdir(tmp_path / "_staging")) == ["round=2"]  # another round's staging stays
    second.discard_staging()
    assert not (tmp_path / "_staging").exists()


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([".parquet", ".warc.gz", ".cdxj", ""]), st.integers(min_value=2, max_value=200))
def test_part_names_do_not_clash(suffix: str, count: int) -> None:
    names = [part_name(suffix) for _ in range(count)]
    assert len(set(names)) == count
    assert all(n.startswith("part-") and n.endswith(suffix) and "/" not in n for n in names)
