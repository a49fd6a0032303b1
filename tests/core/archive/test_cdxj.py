"""A WARC file's index held packed (``cdxj.pack``) until the file closes is written as the
entries themselves would be: the same lines, in the same order."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.archive import cdxj

# Keys share prefixes and end where others go on (``a`` against ``a)``), as SURT keys do.
_keys = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12).map(lambda s: "com,h)/" + s)
_fields = st.dictionaries(
    st.sampled_from(["url", "mime", "status", "digest", "length", "offset", "filename", "redirect"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
)
_entries = st.lists(
    st.builds(
        cdxj.CdxjEntry,
        key=st.one_of(_keys, st.sampled_from(["com,h)/", "com,h)/a", "com,h)/a)"])),
        timestamp=st.from_regex(r"20[0-9]{12}", fullmatch=True),
        offset=st.integers(0, 10**12),
        fields=_fields,
    ),
    max_size=30,
    unique_by=lambda e: e.offset,  # one record an offset in a file
)


@settings(max_examples=200, deadline=None)
@given(entries=_entries)
def test_packed_entries_write_the_lines_the_entries_would(tmp_path_factory, entries: list[cdxj.CdxjEntry]) -> None:
    folder = Path(tmp_path_factory.mktemp("cdxj"))
    packed = [cdxj.pack(e) for e in reversed(entries)]
    assert cdxj.write_packed(str(folder / "packed.cdxj"), packed) == len(entries)
    expected = "".join(f"{e.line()}\n" for e in sorted(entries)).encode("utf-8")
    assert (folder / "packed.cdxj").read_bytes() == expected
    assert cdxj.write_cdxj(str(folder / "entries.cdxj"), entries) == len(entries)
    assert (folder / "entries.cdxj").read_bytes() == expected


@settings(max_examples=200, deadline=None)
@given(entries=_entries, run_entries=st.integers(1, 8), order=st.randoms(use_true_random=False))
def test_an_index_sorted_in_runs_writes_the_lines_of_one_sort(
    tmp_path_factory, entries: list[cdxj.CdxjEntry], run_entries: int, order
) -> None:
    """Entries added in any order, held ``run_entries`` at a time and the rest sorted into
    runs on disk, make the very file one sort of them all makes; the index is empty after,
    and holds no more than ``run_entries`` in memory meanwhile."""
    folder = Path(tmp_path_factory.mktemp("runs"))
    packed = [cdxj.pack(e) for e in entries]
    order.shuffle(packed)
    index = cdxj.SortedIndex(run_entries)
    for i, entry in enumerate(packed, 1):
        index.add(entry)
        assert len(index) == i
        assert index.runs == i // run_entries
        assert len(index._held) == i % run_entries
    assert index.write(str(folder / "runs.cdxj")) == len(entries)
    assert (len(index), index.runs) == (0, 0)
    assert cdxj.write_packed(str(folder / "one.cdxj"), packed) == len(entries)
    assert (folder / "runs.cdxj").read_bytes() == (folder / "one.cdxj").read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == ["one.cdxj", "runs.cdxj"]  # no temporary left


def test_an_index_that_fails_to_write_leaves_no_file_and_no_runs(tmp_path: Path) -> None:
    index = cdxj.SortedIndex(2)
    for n in range(4):
        index.add((b"com,h)/%d" % n, b"20261204071500", n, b"{}"))
    index.add(("com,h)/text", b"20261204071500", 9, b"{}"))  # type: ignore[arg-type]  # not bytes
    assert index.runs == 2
    with pytest.raises(TypeError):
        index.write(str(tmp_path / "x.cdxj"))
    assert list(tmp_path.iterdir()) == []  # neither the file nor its hidden temporary
    assert (len(index), index.runs) == (0, 0)
    with pytest.raises(ValueError, match="run_entries"):
        cdxj.SortedIndex(0)


def test_a_key_that_cannot_be_written_fails_when_packed_not_when_the_file_closes() -> None:
    entry = cdxj.CdxjEntry("com,h)/\udcff", "20261204071500", 0, {"url": "http://h.com/\udcff"})
    with pytest.raises(UnicodeEncodeError):
        cdxj.pack(entry)
