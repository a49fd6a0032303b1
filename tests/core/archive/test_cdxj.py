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


def test_a_key_that_cannot_be_written_fails_when_packed_not_when_the_file_closes() -> None:
    entry = cdxj.CdxjEntry("com,h)/\udcff", "20261204071500", 0, {"url": "http://h.com/\udcff"})
    with pytest.raises(UnicodeEncodeError):
        cdxj.pack(entry)
