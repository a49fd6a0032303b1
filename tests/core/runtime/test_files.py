"""The file helpers on local disk (object stores go through Beam's FileSystems)."""

from __future__ import annotations

import os
import sys
import zlib

from beamcrawl.core.runtime import files

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from scheme_disk import SCHEME  # noqa: E402  (tests/scheme_disk.py)


def test_join_and_remote_detection():
    assert files.join("gs://b/out", "warc", "x") == "gs://b/out/warc/x"
    assert files.is_remote("gs://b/x") and not files.is_remote("/tmp/x")
    assert files.dirname("gs://b/out/x.json") == "gs://b/out"


def test_write_list_move_remove(tmp_path):
    folder = str(tmp_path / "a" / "b")
    files.write_bytes(os.path.join(folder, "one.txt"), b"1")
    files.write_bytes(os.path.join(folder, ".hidden"), b"h")
    with files.open_write(os.path.join(folder, "two.bin")) as fh:
        fh.write(b"22")
    assert [os.path.basename(p) for p in files.list_files(folder)] == ["one.txt", "two.bin"]
    assert not any(".tmp-" in n for n in os.listdir(folder))  # written whole, then renamed
    dst = str(tmp_path / "c" / "one.txt")
    files.move(os.path.join(folder, "one.txt"), dst)
    with files.open_read(dst) as fh:
        assert fh.read() == b"1"
    files.remove_tree(folder)
    assert not os.path.exists(folder)
    files.remove_tree(folder)  # a missing folder is fine
    assert files.list_files(folder) == []


def test_a_whole_file_write_cut_before_its_rename_leaves_nothing_listed(tmp_path, monkeypatch):
    """A worker killed between writing a staged file and renaming it must not leave a file
    that a folder's listing (what a round's commit moves into place) names."""
    folder = str(tmp_path / "staged")
    files.write_bytes(os.path.join(folder, "part-1.parquet"), b"whole")

    def killed(src, dst):
        raise KeyboardInterrupt  # the writer's end, after the bytes and before the rename

    monkeypatch.setattr(files.os, "replace", killed)
    try:
        files.write_bytes(os.path.join(folder, "part-2.parquet"), b"cut")
    except KeyboardInterrupt:
        pass
    assert [os.path.basename(p) for p in files.list_files(folder)] == ["part-1.parquet"]
    assert len(os.listdir(folder)) == 2  # the temporary is there, hidden


def test_ensure_writable(tmp_path):
    files.ensure_writable(str(tmp_path / "new"))
    assert os.listdir(tmp_path / "new") == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    try:
        files.ensure_writable(str(blocker / "sub"))
    except OSError:
        pass
    else:
        raise AssertionError("a folder under a file must not be writable")


def test_a_piecewise_file_appears_whole_when_closed(tmp_path):
    folder = str(tmp_path / "staged")
    path = os.path.join(folder, "part-1.txt")
    fh = files.PiecewiseFile(path)
    fh.write(b"one\n")
    fh.write(b"two\n")
    assert files.list_files(folder) == []  # being written: under a hidden name only
    fh.close()
    assert files.list_files(folder) == [path]
    with files.open_read(path) as f:
        assert f.read() == b"one\ntwo\n"
    assert os.listdir(folder) == ["part-1.txt"]


def test_a_gz_named_file_on_a_remote_filesystem_is_written_and_read_as_its_bytes(tmp_path):
    """A WARC file's gzip members are the file (its CDXJ offsets count them): a name ending
    in .gz must not make the filesystem gzip them again on write, nor inflate them on read."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    members = packer.compress(b"WARC/1.1\r\n") + packer.flush()
    uri = f"{SCHEME}://{tmp_path}/staged/part-1.warc.gz"
    with files.open_write(uri) as fh:
        fh.write(members)
    assert (tmp_path / "staged" / "part-1.warc.gz").read_bytes() == members
    with files.open_read(uri) as fh:
        assert fh.read() == members
    files.write_bytes(f"{SCHEME}://{tmp_path}/staged/part-2.warc.gz", members)
    assert (tmp_path / "staged" / "part-2.warc.gz").read_bytes() == members
    piece = files.PiecewiseFile(f"{SCHEME}://{tmp_path}/staged/part-3.warc.gz")
    piece.write(members)
    piece.close()
    assert (tmp_path / "staged" / "part-3.warc.gz").read_bytes() == members
