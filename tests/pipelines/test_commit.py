"""A round's commit reads its staged requeue and done files a chunk at a time: the same rows
written and deleted as a whole-file read, with at most ``COMMIT_ROWS`` of them at once."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.runtime.outputs import DONE, REQUEUE, RoundOutputs
from beamcrawl.pipelines import commit
from beamcrawl.pipelines.commit import commit_round, staged_lines
from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.state.frontier import requeue_text
from beamcrawl.stores.base import Mutation, open_store

_LINE = st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=60),
    ends=st.sampled_from([b"\n", b"\r\n"]),
    last_end=st.booleans(),
    rows=st.integers(1, 9),
    block=st.integers(1, 64),
)
def test_staged_lines_are_the_files_lines_in_chunks_whatever_the_block(
    tmp_path_factory, lines, ends, last_end, rows, block
):
    data = ends.join(lines) + (ends if last_end and lines else b"")
    path = str(tmp_path_factory.mktemp("staged") / "part.txt")
    with open(path, "wb") as fh:
        fh.write(data)
    chunks = list(staged_lines(path, rows, block))
    assert [line for chunk in chunks for line in chunk] == [line for line in lines if line]
    assert all(0 < len(chunk) <= rows for chunk in chunks)
    assert all(len(chunk) == rows for chunk in chunks[:-1])  # only the last one short


class _CountingStore:
    """The real embedded store, with the size of every frontier write it was given noted."""

    def __init__(self, store):
        self.store = store
        self.writes: list[int] = []

    def mutate(self, table, mutations):
        if table == "frontier":
            self.writes.append(len(mutations))
        return self.store.mutate(table, mutations)

    def __getattr__(self, name):
        return getattr(self.store, name)


def _entry(i: int) -> FrontierEntry:
    return FrontierEntry(url=f"http://h{i % 7}.test/p/{i}", fp=1000 + i, host=f"h{i % 7}.test", due_ms=5_000 + i)


def test_a_commit_writes_every_staged_row_a_chunk_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(commit, "COMMIT_ROWS", 7)
    monkeypatch.setattr(commit, "READ_BLOCK", 100)  # many reads a file, lines cut across them
    out = str(tmp_path / "out")
    store = open_store(f"sqlite:///{out}/store.sqlite")
    try:
        finished = [_entry(i) for i in range(40)]
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in finished])
        outputs = RoundOutputs(out, 1)
        os.makedirs(outputs.staged(REQUEUE))
        os.makedirs(outputs.staged(DONE))
        nexts = [_entry(100 + i) for i in range(23)]
        with open(os.path.join(outputs.staged(REQUEUE), "part-0.txt"), "w") as fh:
            fh.write("".join(requeue_text(e) + "\n" for e in nexts))
        with open(os.path.join(outputs.staged(DONE), "part-0.txt"), "w") as fh:
            fh.write("\n".join(e.key.hex() for e in finished[:30]) + "\n")
        with open(os.path.join(outputs.staged(DONE), "part-1.txt"), "w") as fh:
            fh.write("\n".join(e.key.hex() for e in finished[30:]))  # its last line without an end
        counting = _CountingStore(store)
        commit_round(counting, outputs)
        left = {key for key, _ in store.read_range("frontier", keys_only=True)}
    finally:
        store.close()
    assert left == {e.key for e in nexts}  # every next visit written, every finished row gone
    assert max(counting.writes) <= 7 and sum(counting.writes) == 23 + 40
    assert len(counting.writes) == 4 + 5 + 2  # 23 rows in 4 writes, 30 in 5, 10 in 2
