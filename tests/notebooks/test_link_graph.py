"""notebooks/link_graph.ipynb runs on a fresh crawl, so it never rots.

The crawl's folder reaches the notebook through ``BEAMCRAWL_CRAWL_OUT``, read by its first
cell (tagged ``parameters``, so papermill's ``-p CRAWL_OUT ...`` works as well).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from beamcrawl.analysis import link_graph as lg

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
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
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
    assert "2xx" in _text(sections["Status and content-type mix"]) and "text/html" in _text(
        sections["Status and content-type mix"]
    )
    assert "max in-degree" in _text(sections["In-degree distribution"])
    assert "linking_hosts" in _text(sections["Top hosts and domains"]) and "linking_domains" in _text(
        sections["Top hosts and domains"]
    )
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


def test_readme_nbconvert_command_with_a_relative_folder(demo_crawl, tmp_path):
    """``BEAMCRAWL_CRAWL_OUT=demo-out jupyter nbconvert --execute notebooks/link_graph.ipynb``,
    typed in a shell in the folder that holds ``demo-out``: the kernel runs in notebooks/,
    and the relative folder still means the caller's one."""
    caller = tmp_path / "checkout"
    (caller / "notebooks").mkdir(parents=True)
    shutil.copy(NOTEBOOK, caller / "notebooks" / NOTEBOOK.name)
    (caller / "demo-out").symlink_to(demo_crawl["out"], target_is_directory=True)
    jupyter = Path(sys.executable).parent / "jupyter"
    command = (
        f"cd {shlex.quote(str(caller))} && BEAMCRAWL_CRAWL_OUT=demo-out MPLBACKEND=agg "
        f"{shlex.quote(str(jupyter))} nbconvert --to html --execute notebooks/link_graph.ipynb --output-dir html"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("BEAMCRAWL_CRAWL_OUT", "BEAMCRAWL_CALLER_CWD")}
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (caller / "html" / "link_graph.html").read_text(encoding="utf-8")
    assert f"crawl at {caller / 'demo-out'}" in html


def test_notebooks_extra_installs_nbconvert():
    extra = [r.split(";")[0] for r in importlib.metadata.requires("beamcrawl") or [] if 'extra == "notebooks"' in r]
    names = {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in extra}
    assert {"nbconvert", "jupyter-client", "ipykernel"} <= names, extra


def test_pagerank_marker_sizes_differ_on_a_real_crawl(demo_crawl):
    con = lg.open_crawl(str(demo_crawl["out"]))
    graph = lg.host_graph(con)
    scores = lg.pagerank(graph.n, graph.src, graph.dst)
    index = {h: i for i, h in enumerate(graph.hosts)}
    shown = np.array([scores[index[h]] for h in lg.largest_component(graph)])
    assert len(shown) >= 5
    sizes = lg.node_sizes(shown)
    # Areas proportional to PageRank (the old chart) all looked alike; these span the range.
    assert sizes.max() / sizes.min() >= 10, sizes
    assert len(np.unique(np.round(sizes))) >= 3, sizes
    # ... in the order of the ranks.
    order = np.argsort(shown, kind="stable")
    assert np.all(np.diff(sizes[order]) >= -1e-9)
