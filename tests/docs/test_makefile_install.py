"""`make install` (behind `make demo` and `make test`) installs quietly: no setuptools box."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_editable_install_of_make_install_prints_no_setuptools_box(tmp_path: Path) -> None:
    # The recipe as make runs it, pointed at a scratch virtualenv and without the dependencies
    # (the shared ones are not what is being checked; the editable build is).
    recipe = subprocess.run(
        ["make", "-B", "-n", "install", f"PY={tmp_path}/venv/bin/python", f"VENV={tmp_path}/venv"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (line,) = [x for x in recipe.splitlines() if "pip install --quiet -e" in x]
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    done = subprocess.run(
        ["bash", "-c", line.replace("-e '.[test]'", "--no-deps -e .")], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "Editable installation" not in done.stdout + done.stderr
    assert "!!" not in done.stderr
