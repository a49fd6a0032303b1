"""Write the golden summary of the golden crawl (``tests/golden/simweb_golden.json.gz``).

Run from the repository root, on the code whose outputs are the reference::

    .venv/bin/python tests/golden/make_golden.py

It runs the golden crawl (``golden_crawl.py``: its settings, in a network namespace of its
own) twice, and writes the golden only when both crawls give the same summary, so a golden
that depends on timing is never written. The file's header names the crawler's commit (the
last one that changed ``beamcrawl/``; ``+dirty`` when it had uncommitted changes) and HEAD,
the settings, and the columns left out and why. Bytes are reproducible: the same code at the
same HEAD writes the same file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from golden_crawl import SETTINGS, crawl  # noqa: E402
from golden_summary import EXCLUDED, diff, summarize  # noqa: E402

GOLDEN = HERE / "simweb_golden.json.gz"
FORMAT = 1


def _git(*args: str) -> str:
    root = HERE.parent.parent
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()


def code_commit() -> str:
    """The last commit that changed the crawler (``beamcrawl/``), with ``+dirty`` when
    ``beamcrawl/`` has uncommitted changes: the code the golden describes."""
    last = _git("log", "-1", "--format=%H", "--", "beamcrawl")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "beamcrawl")
    return (last or "unknown") + ("+dirty" if dirty else "")


def header() -> dict[str, Any]:
    return {
        "format": FORMAT,
        "commit": code_commit(),
        "head": _git("rev-parse", "HEAD"),
        "made_by": "python tests/golden/make_golden.py",
        "settings": SETTINGS,
        "excluded": EXCLUDED,
    }


def encode(golden: dict[str, Any]) -> bytes:
    """The file's bytes: JSON with one table row per line, gzip without a timestamp."""
    lines = ["{", f'"header": {json.dumps(golden["header"], sort_keys=True)},']
    sections = [k for k in golden if k != "header"]
    for i, name in enumerate(sections):
        table = golden[name]
        lines.append(f'"{name}": {{"columns": {json.dumps(table["columns"])}, "rows": [')
        rows = table["rows"]
        lines.extend(
            json.dumps(r, separators=(",", ":")) + ("," if j < len(rows) - 1 else "") for j, r in enumerate(rows)
        )
        lines.append("]}" + ("," if i < len(sections) - 1 else ""))
    lines.append("}")
    return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=9, mtime=0)


def load(path: Path = GOLDEN) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=GOLDEN, help=f"where to write (default {GOLDEN})")
    parser.add_argument("--runs", type=int, default=2, help="crawls that must agree (default 2)")
    args = parser.parse_args(argv)
    summaries = []
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        for i in range(args.runs):
            summaries.append(summarize(crawl(Path(tmp) / f"run{i}")))
            print(f"crawl {i + 1}/{args.runs} summarised", file=sys.stderr)
    for i, other in enumerate(summaries[1:], 2):
        lines = diff(summaries[0], other)
        if lines:
            print(f"crawl 1 and crawl {i} differ; no golden written:", *lines, sep="\n", file=sys.stderr)
            return 1
    head = header()
    if head["commit"].endswith("+dirty"):
        print("note: beamcrawl/ has uncommitted changes; the header says +dirty", file=sys.stderr)
    data = encode({"header": head, **summaries[0]})
    args.out.write_bytes(data)
    counts = ", ".join(f"{k} {len(v['rows'])}" for k, v in summaries[0].items())
    print(f"wrote {args.out} ({len(data):,} bytes): {counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
