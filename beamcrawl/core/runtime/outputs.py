"""Where a round's files go, and how they are committed at the end of the round.

A round writes everything under ``OUT/_staging/round=N/<kind>/``; only when the
pipeline has finished are the files moved to ``OUT/<kind>/round=N/`` (a rename per
file, atomic on one filesystem). A round that fails leaves its outputs absent, and its
rerun starts from an empty staging folder. File names are unique per writer and bundle,
so a rerun never overwrites what an earlier attempt committed.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from beamcrawl.core.runtime import files

KINDS = ("warc", "cdxj", "pages", "links", "errors")
# Kinds committed into another kind's folder: a WARC file's CDXJ index sits beside it.
FOLDER = {"cdxj": "warc"}
DONE = "done"  # frontier keys finished this round, applied to the store at commit
REQUEUE = "requeue"  # the next visits' frontier rows, written at commit before DONE applies
HOLDS = "holds"  # known URLs a redirect's Retry-After holds: their visits moved at commit


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
        return files.join(self.out, "_staging", self.label)

    def staged(self, kind: str) -> str:
        return files.join(self.staging, kind)

    def final_rel(self, kind: str) -> str:
        """The committed folder of ``kind``, relative to OUT (used in blob references)."""
        return f"{FOLDER.get(kind, kind)}/{self.label}"

    def final(self, kind: str) -> str:
        return files.join(self.out, FOLDER.get(kind, kind), self.label)

    def report_path(self) -> str:
        return files.join(self.out, "reports", f"round-{self.round_no:06d}.json")

    def written(self) -> str | None:
        """Where this round's committed files already are (relative to OUT), else None:
        a round is committed once, so a round found written belongs to another crawl."""
        if self.report_path() in files.list_files(files.dirname(self.report_path())):
            return f"reports/round-{self.round_no:06d}.json"
        for kind in KINDS:
            if files.list_files(self.final(kind)):
                return self.final_rel(kind)
        return None

    def prepare(self) -> None:
        """Empties staging (leftovers of a failed attempt are discarded, then redone).

        Writers create their folders as they write (object stores have no folders)."""
        files.remove_tree(self.staging)

    def _marker(self) -> str:
        return files.join(self.staging, "COMMITTING")

    def mark_committing(self) -> None:
        """Records that the commit began (it is then finished, never redone)."""
        files.write_bytes(self._marker(), b"")

    def committing(self) -> bool:
        """Whether a commit of this round began and did not finish."""
        return self._marker() in files.list_files(self.staging)

    def done_files(self) -> list[str]:
        return files.list_files(self.staged(DONE))

    def requeue_files(self) -> list[str]:
        return files.list_files(self.staged(REQUEUE))

    def holds_files(self) -> list[str]:
        return files.list_files(self.staged(HOLDS))

    def commit_files(self) -> dict[str, list[str]]:
        """Moves every finished staged file to its final folder; returns them by kind."""
        moved: dict[str, list[str]] = {}
        for kind in KINDS:
            staged = files.list_files(self.staged(kind))
            if not staged:
                continue
            dst = self.final(kind)
            moved[kind] = []
            for src in staged:
                target = files.join(dst, src.rstrip("/").rsplit("/", 1)[-1])
                files.move(src, target)
                moved[kind].append(target)
        return moved

    def discard_staging(self) -> None:
        files.remove_tree(self.staging)
        parent = files.dirname(self.staging)
        if not files.is_remote(parent) and os.path.isdir(parent) and not os.listdir(parent):
            os.rmdir(parent)
