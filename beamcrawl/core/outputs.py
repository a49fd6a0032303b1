"""Where a round's files go, and how they are committed at the end of the round.

A round writes everything under ``OUT/_staging/round=N/<kind>/``; only when the
pipeline has finished are the files moved to ``OUT/<kind>/round=N/`` (a rename per
file, atomic on one filesystem). A round that fails leaves its outputs absent, and its
rerun starts from an empty staging folder. File names are unique per writer and bundle,
so a rerun never overwrites what an earlier attempt committed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass

KINDS = ("warc", "cdxj", "pages", "links")
# Kinds committed into another kind's folder: a WARC file's CDXJ index sits beside it.
FOLDER = {"cdxj": "warc"}
DONE = "done"  # frontier keys finished this round, applied to the store at commit


def part_name(suffix: str) -> str:
    """A unique part-file name (writers in several processes and attempts never clash)."""
    return f"part-{uuid.uuid4().hex[:16]}{suffix}"


@dataclass(frozen=True)
class RoundOutputs:
    out: str
    round_no: int

    @property
    def label(self) -> str:
        # Not zero-padded: query engines read hive partitions (DuckDB, Spark, BigQuery) and
        # infer "round=000007" as the string '000007', shadowing the files' integer column.
        return f"round={self.round_no}"

    @property
    def staging(self) -> str:
        return os.path.join(self.out, "_staging", self.label)

    def staged(self, kind: str) -> str:
        return os.path.join(self.staging, kind)

    def final_rel(self, kind: str) -> str:
        """The committed folder of ``kind``, relative to OUT (used in blob references)."""
        return f"{FOLDER.get(kind, kind)}/{self.label}"

    def final(self, kind: str) -> str:
        return os.path.join(self.out, FOLDER.get(kind, kind), self.label)

    def report_path(self) -> str:
        return os.path.join(self.out, "reports", f"round-{self.round_no:06d}.json")

    def prepare(self) -> None:
        """Empties staging (leftovers of a failed attempt are discarded, then redone)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        for kind in (*KINDS, DONE):
            os.makedirs(self.staged(kind), exist_ok=True)

    def done_files(self) -> list[str]:
        folder = self.staged(DONE)
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.join(folder, name) for name in os.listdir(folder) if not name.startswith("."))

    def commit_files(self) -> dict[str, list[str]]:
        """Moves every finished staged file to its final folder; returns them by kind."""
        moved: dict[str, list[str]] = {}
        for kind in KINDS:
            src = self.staged(kind)
            if not os.path.isdir(src):
                continue
            names = sorted(n for n in os.listdir(src) if not n.startswith("."))
            if not names:
                continue
            dst = self.final(kind)
            os.makedirs(dst, exist_ok=True)
            for name in names:
                os.replace(os.path.join(src, name), os.path.join(dst, name))
            moved[kind] = [os.path.join(dst, n) for n in names]
        return moved

    def discard_staging(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        parent = os.path.dirname(self.staging)
        if os.path.isdir(parent) and not os.listdir(parent):
            os.rmdir(parent)
