"""The repository stands alone: no link or reference leads outside it (a user of the
repository has no ``../shared`` folder), and the README's relative links name files that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    out = []
    for name in names:
        path = ROOT / name
        # This file names what it looks for.
        if (
            path.is_file()
            and path.suffix not in {".gz", ".parquet", ".png", ".warc"}
            and path != Path(__file__).resolve()
        ):
            out.append(path)
    return out


def test_nothing_refers_outside_the_repository() -> None:
    offenders = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if "../shared" in line or re.search(r"(?<![\w/])shared/DESIGN", line) or re.search(r"\bDESIGN\.md\b", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)


def test_readme_relative_links_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", text)
    relative = [link for link in links if "://" not in link]
    assert "docs/ARCHITECTURE.md" in relative
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, missing


def test_crawl_help_cites_the_architecture_in_the_repository() -> None:
    import sys

    help_text = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--help"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "docs/ARCHITECTURE.md" in help_text
    assert "DESIGN.md" not in help_text
