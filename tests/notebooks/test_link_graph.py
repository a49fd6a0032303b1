"""notebooks/link_graph.ipynb runs on a fresh crawl, so it never rots.

The crawl's folder reaches the notebook through ``BEAMCRAWL_CRAWL_OUT``, read by its first
cell (tagged ``parameters``, so papermill's ``-p CRAWL_OUT ...`` works as well).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "link_graph.ipynb"

SECTIONS = [
    "Crawl progress across rounds",
    "Status and content-type mix",
    "In-degree distribution",
    "Top hosts and domains",
    "The host graph's largest component",
    "PageRank over the host graph",
]


@pytest.fixture(scope="module")
def executed(demo_crawl, tmp_path_factory, monkeypatch_module):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    monkeypatch_module.setenv("BEAMCRAWL_CRAWL_OUT", str(demo_crawl["out"]))
    monkeypatch_module.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    started = time.monotonic()
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    seconds = time.monotonic() - started
    nbformat.write(nb, tmp_path_factory.mktemp("nb") / "link_graph.executed.ipynb")  # for a look after a failure
    return nb, seconds


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _sections(nb):
    """{heading: [outputs of the code cells until the next heading]}"""
    sections, current = {}, None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            current = cell.source.splitlines()[0][3:].strip()
            sections[current] = []
        elif cell.cell_type == "code" and current is not None:
            sections[current].extend(cell.outputs)
    return sections


def _text(outputs):
    return "".join(o.get("text", "") for o in outputs if o.output_type == "stream")


@pytest.mark.e2e  # runs whole crawl rounds (and so is slow)
def test_runs_without_error_with_a_plot_in_every_section(executed):
    nb, _ = executed
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    sections = _sections(nb)
    assert list(sections) == SECTIONS
    for name, outputs in sections.items():
        assert any("image/png" in o.get("data", {}) for o in outputs), f"no plot in {name!r}"


@pytest.mark.e2e  # runs whole crawl rounds (and so is slow)
def test_outputs_say_what_the_sections_promise(executed):
    nb, _ = executed
    sections = _sections(nb)
    first = _text(nb.cells[2].outputs)
    assert "fetch_events" in first and "edges" in first
    assert "responses_total" in _text(sections["Crawl progress across rounds"])
    assert "2xx" in _text(sections["Status and content-type mix"]) and "text/html" in _text(sections["Status and content-type mix"])
    assert "max in-degree" in _text(sections["In-degree distribution"])
    assert "linking_hosts" in _text(sections["Top hosts and domains"]) and "linking_domains" in _text(sections["Top hosts and domains"])
    giant = _text(sections["The host graph's largest component"])
    assert "largest component:" in giant and " 0 hosts" not in giant
    assert "PageRank, top hosts:" in _text(sections["PageRank over the host graph"])


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert "parameters" in nb.cells[1].metadata.get("tags", [])
    assert "BEAMCRAWL_CRAWL_OUT" in nb.cells[1].source
    assert os.path.exists(NOTEBOOK.parent / "SCHEMAS.md")
