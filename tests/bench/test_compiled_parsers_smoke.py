"""Smoke test of ``bench/compiled_parsers.py`` (#25 Build item 5): on a few simweb pages, two
hand-written documents and a few hostile URLs it prints every table, its shares are shares, and
what both sides read alike counts as identical. A few seconds; no network."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import compiled_parsers as cp  # noqa: E402

WORDS = " ".join(f"word{chr(97 + i)}{chr(97 + j)}" for i in range(5) for j in range(5))
PAGE = f"<html><head><title>t</title></head><body><p>{WORDS}</p></body></html>"
CHROME = (
    "<html><body><nav>Home News Sport</nav><div class='sidebar'>Popular today</div>"
    f"<main><p>{WORDS}</p><p><a href='b.html?utm_source=x#top'>next</a></p></main>"
    "<footer>Legal notice</footer></body></html>"
)

_ROW = re.compile(r"^\| (?P<side>[^|]+?) \| (?P<cells>.+) \|$")


def _rows(out: str, heading: str) -> dict[str, list[str]]:
    """The data rows of the table under ``heading``: side → cells."""
    block = out.split(heading, 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in block.splitlines():
        m = _ROW.match(line)
        if m and not line.startswith(("| side", "|---")):
            rows[m["side"]] = [c.strip() for c in m["cells"].split("|")]
    return rows


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_the_bench_prints_sane_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.html").write_text(PAGE)
    (tmp_path / "b.html").write_text(CHROME)
    args = ["--hosts", "5", "--pages", "6", "--hostile", "40", "--repeat", "1", "--html-glob", str(tmp_path / "*.html")]
    assert cp.main(args) == 0
    out = capsys.readouterr().out
    assert "resiliparse " in out and "can-ada " in out and "ada-url " in out

    for heading in ("### text, simweb:", "### text, real HTML: 2 pages"):
        rows = _rows(out, heading)
        parses = {"selectolax parse alone", "resiliparse parse alone", "htmlbounds.scan (before either parse)"}
        assert set(rows) == {"ours", "rp-main", "rp-rules"} | parses
        for side in parses:
            assert _number(rows.pop(side)[0]) > 0
        for side, cells in rows.items():
            assert _number(cells[0]) > 0 and _number(cells[1]) > 0  # µs a page: text, text + simhash
            shares = [_number(c) for c in cells[2:]]
            assert all(0 <= s <= 1 for s in shares), (side, shares)
            # The simhash classes cover every page: 0, 1-3, >3 bits, one side without, neither.
            assert sum(shares[1:]) == pytest.approx(1, abs=0.006)
        assert _number(rows["ours"][2]) == 1  # ours against itself

    for heading in ("### URLs, simweb links:", "### URLs, real HTML links:", "### URLs, hostile URLs and WHATWG rows:"):
        rows = _rows(out, heading)
        assert set(rows) == set(cp.URL_SIDES)
        for side, cells in rows.items():
            assert _number(cells[0]) > 0
            assert 0 <= _number(cells[2]) <= _number(cells[1]) <= 1, (side, cells)
        assert _number(rows["ours (urlnorm.normalize)"][1]) == 1


def test_a_page_both_read_alike_is_identical() -> None:
    (same,) = cp.text_outputs([PAGE], cp.rp_main)
    assert same.same_tokens and same.distance == 0 and not same.only_ours and not same.only_theirs
    # Our chrome rules on resiliparse's tree leave the text ours leaves; its own heuristics
    # are another reading of the same page, and the tokens each side has alone are counted.
    (rules,) = cp.text_outputs([CHROME], cp.rp_rules)
    assert rules.same_tokens and rules.distance == 0
    (nav,) = cp.text_outputs(["<html><body><p>alpha beta</p><p>gamma<b>delta</b></p></body></html>"], cp.rp_main)
    assert not nav.same_tokens and nav.only_ours == {"gamma": 1, "delta": 1} and nav.only_theirs == {"gammadelta": 1}


def test_links_both_resolve_alike_are_identical() -> None:
    links = cp.page_hrefs(CHROME.encode(), "http://a.example/x/page.html")
    assert links == [cp.Link("b.html?utm_source=x#top", "http://a.example/x/page.html", "utf-8")]
    same = cp.Link("../c/d.html", "http://a.example/x/page.html", None)
    for side in (cp.can_ada_url, cp.ada_url_url):
        ((_, ours, theirs),) = cp.url_outputs([same], side)
        assert ours == theirs == "http://a.example/c/d.html"
    # Our own rules (tracking parameters, fragment) are where the raw output differs, and are
    # put in their category.
    ((link, ours, theirs),) = cp.url_outputs(links, cp.URL_SIDES["can-ada + fragment cut, http(s) only"])
    assert ours == "http://a.example/x/b.html" and theirs == "http://a.example/x/b.html?utm_source=x"
    assert cp.category(link, ours, theirs) == "query: tracking or session parameters (we drop them)"
    ((link, ours, theirs),) = cp.url_outputs([cp.Link("b.html#top", link.base, None)], cp.can_ada_url)
    assert cp.category(link, ours, theirs) == "fragment (we drop it)"
