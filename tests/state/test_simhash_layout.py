"""Which simhash tables a store keeps (state/simhash_layout.py), on the embedded store and on
the Bigtable emulator: chosen once, recorded, then kept."""

from __future__ import annotations

import pytest

from beamcrawl.core.content import textfp
from beamcrawl.state import simhash_layout as sl
from beamcrawl.schemas.records import Probe
from beamcrawl.stores.base import Mutation, StoreError, open_store
from beamcrawl.state.content_rows import simhash_row_cells, sorted_cells


@pytest.fixture(params=["embedded", "bigtable"])
def store_uri(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "embedded":
        return f"sqlite:///{tmp_path}/store.sqlite"
    return request.getfixturevalue("bigtable_uri")


def _own(uri: str) -> textfp.TableLayout:
    return textfp.TEN_TABLES if uri.startswith("sqlite") else textfp.LAYOUT


def test_a_new_store_takes_its_kinds_tables_and_records_them(store_uri):
    with open_store(store_uri) as store:
        assert sl.recorded_layout(store) is None
        chosen = sl.simhash_layout(store)
        assert chosen == _own(store_uri) and len(chosen.orders) == store.simhash_tables
        assert sl.recorded_layout(store) == chosen
        raw = store.read_keys("meta", [sl.LAYOUT_KEY])[sl.LAYOUT_KEY][sl.LAYOUT_CELL]
        assert raw == textfp.layout_name(chosen).encode()
        assert sl.simhash_layout(store) == chosen  # read back, not chosen again


def test_a_store_holding_simhash_rows_and_no_record_keeps_twenty_tables(store_uri):
    with open_store(store_uri) as store:
        store.mutate("simhash", [Mutation.set(b"\x05" + bytes(5), {"s:" + "ab" * 16: b"\x05"})])
        assert sl.default_layout(store) == textfp.LAYOUT
        assert sl.simhash_layout(store) == textfp.LAYOUT
        assert sl.recorded_layout(store) == textfp.LAYOUT


def test_rows_without_a_record_keep_the_layout_their_keys_have(store_uri):
    """A store whose record was lost (restored without its meta row, say) reads its rows in
    the layout they were written in, ten or twenty, whatever its kind would take."""
    probe = Probe("http://a.com/", 7, 1, 0x0123456789ABCDEF, 1.0, "sha1:X")
    for layout in (textfp.TEN_TABLES, textfp.LAYOUT):
        with open_store(store_uri) as store:
            old = [k for k, _ in store.read_range("simhash", keys_only=True)]
            store.mutate("simhash", [Mutation.delete_row(k) for k in old])
            store.write_cells("simhash", sorted_cells(simhash_row_cells(probe, 1, layout)))
            assert sl.default_layout(store) == layout
            assert sl.simhash_layout(store, record=False) == layout


def test_a_job_that_records_nothing_leaves_the_choice_unrecorded(store_uri):
    with open_store(store_uri) as store:
        assert sl.simhash_layout(store, record=False) == _own(store_uri)
        assert sl.recorded_layout(store) is None
        assert store.read_keys("meta", [sl.LAYOUT_KEY]) == {}


@pytest.mark.parametrize("raw", [b"", b"twenty", b"11,11,11,11,10,10/2", b"\xff\xfe", b"13,13,13,13,12/2/2"])
def test_a_record_that_is_no_layout_fails_with_one_line_naming_it(store_uri, raw):
    with open_store(store_uri) as store:
        store.mutate("meta", [Mutation.set(sl.LAYOUT_KEY, {sl.LAYOUT_CELL: raw})])
        with pytest.raises(StoreError) as err:
            sl.simhash_layout(store)
    message = str(err.value)
    assert "meta row 'simhash'" in message and "layout" in message and "\n" not in message


def test_two_launches_that_race_agree_on_the_first_record(store_uri, monkeypatch):
    """The other launch records the twenty tables between this one's read and its write:
    this one's check-and-set fails, and it takes what was recorded."""
    with open_store(store_uri) as store:
        real = sl.default_layout

        def raced(s):
            chosen = real(s)
            assert s.check_and_set("meta", sl.LAYOUT_KEY, sl.LAYOUT_CELL, None, b"11,11,11,11,10,10/3")
            return chosen

        monkeypatch.setattr(sl, "default_layout", raced)
        assert sl.simhash_layout(store) == textfp.LAYOUT
        assert sl.recorded_layout(store) == textfp.LAYOUT


def test_store_info_says_which_tables_the_store_keeps(tmp_path, capsys):
    from beamcrawl.cli import store_admin

    uri = f"sqlite:///{tmp_path}/store.sqlite"
    assert store_admin.main(["info", "--store", uri]) == 0
    assert "near copies in 10 simhash tables (13,13,13,13,12/2; none recorded yet" in capsys.readouterr().out
    with open_store(uri) as store:
        assert store.check_and_set("meta", sl.LAYOUT_KEY, sl.LAYOUT_CELL, None, b"11,11,11,11,10,10/3")
    assert store_admin.main(["info", "--store", uri]) == 0
    assert "near copies in 20 simhash tables (11,11,11,11,10,10/3; recorded)" in capsys.readouterr().out


def test_store_info_counts_the_embedded_stores_simhash_rows(tmp_path, capsys):
    """The simhash table's keys begin with their table byte: the key-space estimate reads
    25,000 rows of table 0 as billions. The embedded store counts them."""
    from beamcrawl.cli import store_admin

    uri = f"sqlite:///{tmp_path}/store.sqlite"
    with open_store(uri) as store:
        store.write_cells("simhash", [(bytes([0]) + i.to_bytes(4, "big"), "s:x", b"\x01") for i in range(25_000)])
        assert store.estimate_rows("simhash") > 1_000_000  # what store info printed before
    assert store_admin.main(["info", "--store", uri]) == 0
    assert "  simhash   25000 rows" in capsys.readouterr().out.splitlines()
