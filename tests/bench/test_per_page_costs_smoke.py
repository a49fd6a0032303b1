"""Smoke test of ``bench/per_page_costs.py``'s ``bounds`` step: the pre-scan's rows print, with
the compiled tokenizer and with the regular expressions, on simweb pages, a real-shaped
document and the hostile shapes. A few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import per_page_costs  # noqa: E402


def test_the_bounds_rows_print_both_tokenizers(tmp_path, capsys):
    doc = (
        "<html><body>"
        + "".join(f"<p class=x><a href=/{i}>link <b>{i}</b></a></p>" for i in range(400))
        + "</body></html>"
    )
    (tmp_path / "a.html").write_text(doc)
    argv = [
        "--hosts",
        "3",
        "--pages",
        "20",
        "--repeat",
        "1",
        "--steps",
        "bounds",
        "--html-glob",
        str(tmp_path / "*.html"),
    ]
    assert per_page_costs.main(argv) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| bounds")]
    names = [row.split(" | ")[0] for row in rows]
    assert "| bounds: htmlbounds.scan, simweb (compiled tags, compiled walk)" in names
    assert "| bounds: the same, tags by expressions, walk in Python" in names
    for label in (
        "compiled tags, compiled walk",
        "compiled tags, walk in Python",
        "tags by expressions, walk in Python",
    ):
        assert f"| bounds: htmlbounds.scan, real HTML, mean a page ({label})" in names
    hostile = [row for row in rows if row.startswith("| bounds, hostile:")]
    assert len(hostile) == len(per_page_costs.HOSTILE)
    # Each hostile page timed with both walks, and cut where the limits say.
    assert all(" | walk in Python " in row and "Bound(cut=" in row for row in hostile)
    assert all(float(row.split(" | ")[1].replace(",", "")) > 0 for row in rows)


def test_the_links_rows_print_each_corpus_with_its_links(tmp_path, capsys):
    (tmp_path / "a.html").write_text("<p>" + "".join(f"<a href=/{i}>link {i}</a>" for i in range(30)) + "</p>")
    argv = ["--hosts", "3", "--pages", "20", "--repeat", "1", "--steps", "links"]
    assert per_page_costs.main([*argv, "--html-glob", str(tmp_path / "*.html")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| links")]
    assert [row.split(" | ")[0] for row in rows] == ["| links: page_links, simweb", "| links: page_links, real HTML"]
    assert rows[1].endswith("| 30.0 links a page |")


def test_the_surt_and_schedule_rows_print(tmp_path, capsys):
    (tmp_path / "a.html").write_text('<a href="/x/Y/">y</a><a href="http://www.b.example:80/?b=1&a=2">b</a>')
    argv = ["--hosts", "3", "--pages", "20", "--repeat", "1", "--steps", "surt,schedule"]
    assert per_page_costs.main([*argv, "--html-glob", str(tmp_path / "*.html")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    names = [row.split(" | ")[0] for row in rows]
    assert names[1:] == [
        "| surt: surt_key of a link, simweb",
        "| surt: surt.surt of a link, simweb",
        "| surt: surt_key of a link, real HTML",
        "| surt: surt.surt of a link, real HTML",
        "| schedule: schedule_page of a dated response",
        "| schedule: the same, and the rows of its state (URL state, next visit)",
        "| schedule: parse_http_date of an IMF-fixdate",
    ]
    assert "2 URLs, 100.0% the short way" in rows[3]


def test_the_shape_rows_print_both_checks_and_no_difference(capsys):
    rows, names = _step_rows(capsys, "shape")
    assert "| shape: ShapeRules.check of a link, simweb (compiled)" in names
    assert "| shape: ShapeRules.check_python of a link, simweb" in names
    assert all(" 0 answers differ |" in row for row in rows if "(compiled)" in row)


def test_the_norm_rows_print_both_steps_and_no_difference(capsys):
    rows, names = _step_rows(capsys, "norm")
    assert "| norm: normalize of a link, simweb (compiled steps)" in names
    assert "| norm: normalize_python of a link, simweb" in names
    compiled = [row for row in rows if "(compiled steps)" in row]
    assert compiled and all(" 0 answers differ |" in row for row in compiled)
    assert "100.0% answered in C" in compiled[0]  # simweb's links are all plain ones


def _step_rows(capsys, step: str) -> tuple[list[str], list[str]]:
    """The table rows of one quick run of ``step`` on a few simweb pages, and their names."""
    assert per_page_costs.main(["--hosts", "3", "--pages", "20", "--repeat", "1", "--steps", step]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {step}:")]
    return rows, [row.split(" | ")[0] for row in rows]
