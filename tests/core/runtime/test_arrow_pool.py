"""heap.arrow_on_the_system_allocator: the round's Parquet writer puts Arrow's buffers on the C
library's malloc, unless the user chose a pool. Each case in a child process: the pool is
process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent(
    """
    import pyarrow as pa
    from beamcrawl.schemas.arrow import PAGES_SCHEMA
    from beamcrawl.transforms.parquet_io import _ParquetPartsFn

    before = pa.default_memory_pool().backend_name
    fn = _ParquetPartsFn("unused", PAGES_SCHEMA, ("url",), "pages")
    fn.setup()
    system = pa.system_memory_pool().bytes_allocated()
    kept = pa.array(["x" * 100] * 100_000)  # made after the writer's setup
    grown = pa.system_memory_pool().bytes_allocated() - system
    print(before, pa.default_memory_pool().backend_name, grown >= 10_000_000)
    """
)


def _child(pool: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_parquet_writer_allocates_arrow_buffers_from_the_system_allocator() -> None:
    before, after, grown = _child(None)
    assert before != "system"  # pyarrow's own default: the bundled allocator
    assert after == "system" and grown == "True"


@pytest.mark.parametrize("pool", ["mimalloc", "jemalloc"])
def test_a_pool_the_user_chose_is_kept(pool: str) -> None:
    import pyarrow as pa

    if pool not in pa.supported_memory_backends():
        pytest.skip(f"this pyarrow has no {pool}")
    before, after, grown = _child(pool)
    assert before == after == pool and grown == "False"
