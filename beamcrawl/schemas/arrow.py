"""Arrow schemas of the Parquet files analysts read (pages/ and links/).

Types chosen to load cleanly in DuckDB, pyarrow, Spark and BigQuery: fingerprints as signed
64-bit integers (BigQuery and Spark have no unsigned 64-bit type; the hex form is the
``*_fp`` value reinterpreted as unsigned), timestamps in UTC with an explicit millisecond unit.
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms", tz="UTC")

PAGES_SCHEMA = pa.schema(
    [
        pa.field("url", pa.string(), nullable=False),
        pa.field("url_fp", pa.int64(), nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("final_url", pa.string()),
        pa.field("status", pa.int32()),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("fetched_at", TIMESTAMP),
        pa.field("elapsed_ms", pa.float64()),
        pa.field("content_type", pa.string()),
        pa.field("content_length", pa.int64()),
        pa.field("truncated", pa.string()),
        pa.field("changed", pa.bool_()),
        pa.field("checksum", pa.string()),
        pa.field("simhash", pa.string()),
        pa.field("duplicate_of", pa.string()),
        pa.field("blob", pa.string()),
        pa.field("out_links", pa.int32()),
        pa.field("title", pa.string()),
        pa.field("meta_noindex", pa.bool_()),
        pa.field("meta_nofollow", pa.bool_()),
        pa.field("ip", pa.string()),
        pa.field("error", pa.string()),
        pa.field("depth", pa.int32()),
        pa.field("round", pa.int32(), nullable=False),
    ]
)

LINKS_SCHEMA = pa.schema(
    [
        pa.field("src", pa.string(), nullable=False),
        pa.field("dst", pa.string(), nullable=False),
        pa.field("src_fp", pa.int64(), nullable=False),
        pa.field("dst_fp", pa.int64(), nullable=False),
        pa.field("src_host", pa.string()),
        pa.field("dst_host", pa.string()),
        pa.field("src_domain", pa.string()),
        pa.field("dst_domain", pa.string()),
        pa.field("anchor", pa.string()),
        pa.field("nofollow", pa.bool_()),
        pa.field("kind", pa.string()),
        pa.field("fetched_at", TIMESTAMP),
        pa.field("round", pa.int32(), nullable=False),
    ]
)


def signed64(fp: int) -> int:
    """An unsigned 64-bit fingerprint as the signed value stored in Parquet."""
    return fp - (1 << 64) if fp >= (1 << 63) else fp
