"""The crawl's identity in its output folder (pipelines/out_folder.py): the declared purposes."""

from __future__ import annotations

import json

from beamcrawl.pipelines import out_folder
from beamcrawl.stores.base import open_store


def test_purposes_are_written_into_crawl_json_and_follow_a_later_run(tmp_path):
    out = str(tmp_path / "out")
    uri = f"sqlite:///{out}/store.sqlite"
    store = open_store(uri)
    identity = lambda: json.loads((tmp_path / "out" / "crawl.json").read_text())  # noqa: E731
    first = out_folder.claim(store, out, uri, out_folder.check_folder(out, uri, True), True, ("ai-train",))
    assert first.new and identity()["purposes"] == ["ai-train"]
    again = out_folder.claim(store, out, uri, out_folder.folder_state(out), False, ("search", "ai-train"))
    assert not again.new and identity()["purposes"] == ["search", "ai-train"]
    assert identity()["crawl_id"] == first.crawl_id
    out_folder.claim(store, out, uri, out_folder.folder_state(out), False, ())
    assert "purposes" not in identity()  # a run without --purpose declares none


def test_a_crawl_without_purposes_writes_no_purposes(tmp_path):
    out = str(tmp_path / "out")
    uri = f"sqlite:///{out}/store.sqlite"
    out_folder.claim(open_store(uri), out, uri, out_folder.check_folder(out, uri, True), True)
    assert set(json.loads((tmp_path / "out" / "crawl.json").read_text())) == {"crawl_id", "store", "created_at", "note"}
