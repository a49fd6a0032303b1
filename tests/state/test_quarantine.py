"""state/quarantine.py: an element failing in two rounds is held until released (on each
store backend: the rows live in the ``meta`` table)."""

from __future__ import annotations

import math

from beamcrawl.state import quarantine
from beamcrawl.state.parquet_export import quarantine_row
from beamcrawl.core.urls.urlnorm import fingerprint

URL = "http://a.test/x"


def _letter(stage="parse", url=URL, host="a.test", key=""):
    return {"stage": stage, "key": key, "url": url, "host": host, "exception": "ValueError", "message": "bad"}


def test_two_rounds_quarantine_and_a_release_ends_it(store):
    hostless = _letter(url="", host="", key="")  # names no element: counted, never held
    assert quarantine.book_failures(store, 1, [_letter(), _letter(stage="record"), hostless]) == []
    assert quarantine.book_failures(store, 1, [_letter()]) == []  # the same round again (a resumed commit)
    assert quarantine.quarantined_urls(store) == set()
    assert quarantine.book_failures(store, 2, [_letter(), _letter(url="", host="b.test:81")]) == [("url", URL)]
    assert quarantine.quarantined_urls(store) == {fingerprint(URL)}
    assert quarantine.quarantined_hosts(store, ["b.test:81"]) == set()  # one round only
    assert quarantine.book_failures(store, 3, [_letter(url="", host="b.test:81")]) == [("host", "b.test:81")]
    assert quarantine.quarantined_hosts(store, ["b.test:81", "c.test"]) == {"b.test:81"}
    listed = quarantine.list_quarantine(store, "a.test")
    assert [(q["kind"], q["id"], q["rounds"]) for q in listed] == [("url", URL, [1, 2])]
    rows = [quarantine_row(k, c) for k, c in store.read_range("meta")]
    assert {(r["kind"], r["id"], r["failed_rounds"]) for r in rows if r} == {("url", URL, 2), ("host", "b.test:81", 2)}
    assert [r["id"] for r in quarantine.release(store, "http://A.test/x")] == [URL]  # normalised
    assert [r["id"] for r in quarantine.release(store, "b.test:81")] == ["b.test:81"]
    assert quarantine.quarantined_urls(store) == set() and quarantine.release(store, URL) == []
    # Released, the count starts over: one more failure does not quarantine again.
    assert quarantine.book_failures(store, 4, [_letter()]) == []


def test_a_quarantined_host_is_planned_as_paused_without_end():
    policy = quarantine.quarantine_policy("a.test", None)
    assert policy.host == "a.test" and policy.pause_until == math.inf and not policy.blocked


def test_kept_fps_name_frontier_rows_and_urls():
    key = (123).to_bytes(8, "big") + (456).to_bytes(8, "big")
    kept = quarantine.kept_fps([_letter(key=key.hex(), url=""), _letter(key="a.test"), _letter(url="", host="h")])
    assert kept == {456, fingerprint(URL)}
