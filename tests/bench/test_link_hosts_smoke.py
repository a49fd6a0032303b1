"""Smoke test of ``bench/link_hosts.py``: on a few simweb pages the three stages give the
same outputs with the hosts parse found and with them blanked (the bench checks it and exits
otherwise), and the table prints. A few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import link_hosts  # noqa: E402
from per_page_costs import simweb_pages  # noqa: E402


def test_hosts_carried_give_the_same_outputs_and_the_table_prints(capsys, tmp_path):
    pages = link_hosts.parsed(simweb_pages(5, 30))
    assert all(link.host for page in pages for link in page.links)
    figures = link_hosts.measure(pages, repeat=1)
    assert figures["links"] > 5 and figures["carried"] > 0 and figures["each stage"] > 0
    link_hosts.main(["--hosts", "3", "--pages", "10", "--repeat", "1", "--html-glob", str(tmp_path / "none*.html")])
    out = capsys.readouterr().out
    assert "| simweb | 10 |" in out and "real HTML" not in out
