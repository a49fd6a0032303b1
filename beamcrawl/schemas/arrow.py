"""Arrow schemas of the Parquet files people read: pages/, links/, errors/ and the state exports.

Types are chosen to load cleanly in DuckDB, pyarrow, Spark and BigQuery:

- fingerprints are signed 64-bit integers (BigQuery and Spark have no unsigned 64-bit
  type). The value is the unsigned fingerprint that ``beamcrawl normalize`` prints in hex,
  reinterpreted as two's complement: ``lpad(lower(hex(url_fp)), 16, '0')`` in DuckDB gives
  the hex form back, :func:`fp_hex` does it in Python;
- timestamps are UTC with an explicit millisecond unit (``timestamp[ms, tz=UTC]``), which
  every one of those engines reads as an instant rather than a local wall-clock time;
- everything else is a plain string, integer, float or boolean; no nested types, no
  dictionaries, no unsigned integers;
- the round is not a column of the files: it is the hive partition of their folder
  (``pages/round=7/``), which every one of those engines reads as a ``round`` column.
  BigQuery refuses hive partition keys that are also columns of the files, and pyarrow's
  ``pq.read_table(folder)`` fails on the clash, so the folder is the only place it is.

Every field carries its description in the field metadata (key ``description``), so a
reader of any file sees what a column means (``pq.read_schema(f).field("x").metadata``);
:func:`describe` renders a schema as the Markdown table in ``notebooks/SCHEMAS.md``.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from beamcrawl.core.policy.usage_prefs import PURPOSES

from beamcrawl.core.urls.urlnorm import fp_hex  # a stored (signed) fingerprint as `beamcrawl normalize` prints it

__all__ = [
    "ERRORS_SCHEMA",
    "HOSTS_SCHEMA",
    "QUARANTINE_SCHEMA",
    "LINKS_SCHEMA",
    "PAGES_HEADER_COLUMNS",
    "PAGES_SCHEMA",
    "SCHEMAS",
    "TIMESTAMP",
    "URLS_SCHEMA",
    "describe",
    "fp_hex",
    "signed64",
    "timestamp_ms",
]

TIMESTAMP = pa.timestamp("ms", tz="UTC")

DESCRIPTION = b"description"


def _f(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={DESCRIPTION: doc.encode()})


# Response headers published as columns of pages/ (header name → column). Values are the
# header as the server sent it (its bytes as text when they are UTF-8, else read as latin-1,
# as the WARC's readers read them); a header sent several times is joined with ", " (the
# HTTP list form), absent headers are null.
PAGES_HEADER_COLUMNS: dict[str, str] = {
    "etag": "etag",
    "last-modified": "last_modified",
    "content-encoding": "content_encoding",
    "content-language": "content_language",
    "server": "server",
    "location": "location",
    "x-robots-tag": "x_robots_tag",
    "retry-after": "retry_after",
}

PAGES_SCHEMA = pa.schema(
    [
        _f("url", pa.string(), "The URL requested (normalised).", nullable=False),
        _f("url_fp", pa.int64(), "64-bit fingerprint of url, signed (see fp_hex).", nullable=False),
        _f("host", pa.string(), "Host of url, with the port when it is not the default.", nullable=False),
        _f("final_url", pa.string(), "The URL that answered (redirects are not followed, so it is url)."),
        _f("status", pa.int32(), "HTTP status code; null when no response arrived."),
        _f(
            "outcome",
            pa.string(),
            "fetched | error (no response: timeout, reset, connection refused) | refused (the address policy refused the connection before any socket: link-local, or loopback/private without --allow-private-networks; nothing archived).",
            nullable=False,
        ),
        _f("fetched_at", TIMESTAMP, "When the request started (UTC)."),
        _f("elapsed_ms", pa.float64(), "Request start to last body byte, milliseconds."),
        _f("waited_ms", pa.float64(), "How long the request waited for its host's turn (politeness), milliseconds."),
        _f("content_type", pa.string(), "The Content-Type response header, as sent."),
        _f("content_length", pa.int64(), "Payload bytes after undoing Content-Encoding (at most the body cap)."),
        _f(
            "truncated",
            pa.string(),
            "Why the payload is incomplete, as WARC-Truncated says it: 'length' (the body cap or the decoded-size "
            "cap cut it), 'time' (cut for transferring too slowly: minimum rate or stall), 'unspecified'; null "
            "when the whole body arrived.",
        ),
        _f("changed", pa.bool_(), "Whether the content differs from the previous fetch of url."),
        _f("checksum", pa.string(), "16 hex digits: 64-bit mmh3 of the payload (exact-duplicate key)."),
        _f("simhash", pa.string(), "16 hex digits: 64-bit simhash of the text (near-duplicate key)."),
        _f("duplicate_of", pa.string(), "URL of the page this one copies (the one stored), when it is a copy."),
        _f(
            "duplicate_kind",
            pa.string(),
            "exact (the same payload: archived as a WARC revisit record when the bytes sent match too) | "
            "near (simhash of the text within 3 bits: not archived); null when not a copy. Any status takes "
            "part in exact matching, so a site's identical 404 or 500 pages are exact copies of its first "
            "one (stored once); filter on status for copies of 2xx content. Only 2xx pages are near copies.",
        ),
        _f(
            "duplicate_distance",
            pa.int32(),
            "Differing bits between this page's simhash and its original's (0 for an exact copy).",
        ),
        _f(
            "blob",
            pa.string(),
            "Where the page's record is: '<WARC file relative to OUT>@<offset>' of its response record, "
            "or of its revisit record for an exact copy; null when nothing was archived (a near copy).",
        ),
        _f("out_links", pa.int32(), "Number of links found on the page (edges in links/)."),
        _f(
            "parse_truncated",
            pa.string(),
            "Which parse limit cut the page's HTML (elements, depth, attributes, tags: core/content/htmlbounds.py): "
            "its links and text are those before the cut, its stored bytes whole; links when only its links were "
            "cut, at --max-links-per-page (the first of them kept, its text whole); null when parsed whole.",
        ),
        _f("title", pa.string(), "The HTML <title>, whitespace collapsed."),
        _f("meta_noindex", pa.bool_(), "noindex from meta robots or X-Robots-Tag (for us or everyone)."),
        _f("meta_nofollow", pa.bool_(), "nofollow from meta robots or X-Robots-Tag (for us or everyone)."),
        _f("ip", pa.string(), "Server address the response came from (WARC-IP-Address)."),
        _f(
            "error",
            pa.string(),
            "Why the fetch failed (outcome = error) or was refused (outcome = refused: 'refused address: <reason>'), or a note on archiving.",
        ),
        _f("depth", pa.int32(), "Link distance from a seed."),
        _f("source", pa.string(), "Why it was fetched: seed | link | redirect | robots (a robots.txt request) | ..."),
        _f("etag", pa.string(), "ETag response header."),
        _f("last_modified", pa.string(), "Last-Modified response header (HTTP date, as sent)."),
        _f("content_encoding", pa.string(), "Content-Encoding response header (the WARC keeps the encoded body)."),
        _f("content_language", pa.string(), "Content-Language response header."),
        _f("server", pa.string(), "Server response header."),
        _f("location", pa.string(), "Location response header (redirect target, as sent)."),
        _f("x_robots_tag", pa.string(), "X-Robots-Tag response header(s)."),
        _f("retry_after", pa.string(), "Retry-After response header (seconds or HTTP date, as sent)."),
        *(
            _f(
                f"usage_{purpose.replace('-', '_')}",
                pa.string(),
                f"The site's usage preference for {purpose} at fetch time, when it is a purpose of the crawl "
                "(--purpose): allowed | refused | unstated, from robots.txt Content-Signal and Content-Usage and "
                "the Content-Usage header, the stricter winning; null when the crawl does not declare it.",
            )
            for purpose in PURPOSES
        ),
        _f(
            "usage_refused",
            pa.string(),
            "Why a fetched page was not archived or parsed: the purpose its Content-Usage header refused, with "
            "the header (the URL itself was allowed by robots.txt); null otherwise.",
        ),
    ]
)

LINKS_SCHEMA = pa.schema(
    [
        _f("src", pa.string(), "URL of the page the link is on (normalised).", nullable=False),
        _f("dst", pa.string(), "URL the link points to (absolute, normalised).", nullable=False),
        _f("src_fp", pa.int64(), "Fingerprint of src, signed (see fp_hex).", nullable=False),
        _f("dst_fp", pa.int64(), "Fingerprint of dst, signed (see fp_hex).", nullable=False),
        _f("src_host", pa.string(), "Host of src (with a non-default port)."),
        _f("dst_host", pa.string(), "Host of dst (with a non-default port)."),
        _f("src_domain", pa.string(), "Registered domain of src_host (public suffix + 1)."),
        _f("dst_domain", pa.string(), "Registered domain of dst_host (public suffix + 1)."),
        _f("anchor", pa.string(), "Anchor text, whitespace collapsed, at most 256 characters; null if none."),
        _f("nofollow", pa.bool_(), "rel=nofollow on the link, or nofollow for the whole page."),
        _f(
            "kind",
            pa.string(),
            "a | area | frame | canonical | redirect (a 3xx Location) | refresh (a <meta http-equiv=refresh> target) | feed (a page's RSS/Atom link) | sitemap (a robots.txt Sitemap: line or a sitemap index entry) | listed (a URL a sitemap or feed lists).",
        ),
        _f("fetched_at", TIMESTAMP, "When src was fetched (UTC)."),
    ]
)

URLS_SCHEMA = pa.schema(
    [
        _f("url", pa.string(), "The URL (normalised).", nullable=False),
        _f("url_fp", pa.int64(), "Fingerprint of url, signed (see fp_hex); the seen set's key.", nullable=False),
        _f("host", pa.string(), "Host of url (with a non-default port)."),
        _f(
            "state",
            pa.string(),
            "queued | fetched | error | refused | robots_disallowed | usage_refused (--purpose: a purpose the site's robots.txt refuses).",
        ),
        _f("source", pa.string(), "How it was found: seed | link | redirect | sitemap | submit."),
        _f("depth", pa.int32(), "Link distance from a seed when first seen."),
        _f("first_seen", TIMESTAMP, "When it was first seen (UTC)."),
        _f("status", pa.int32(), "HTTP status of the last fetch."),
        _f("fetched_at", TIMESTAMP, "When it was last fetched (UTC)."),
        _f("checksum", pa.string(), "Payload checksum of the last fetch (16 hex digits)."),
        _f("error", pa.string(), "Why the last fetch failed."),
    ]
)

HOSTS_SCHEMA = pa.schema(
    [
        _f("host", pa.string(), "Host name, with a non-default port.", nullable=False),
        _f("delay", pa.float64(), "Current gap between requests to the host, seconds."),
        _f("last_fetch_end", TIMESTAMP, "When the last response on the host ended (UTC)."),
        _f("not_before", TIMESTAMP, "No request before this time (Retry-After, back-off)."),
        _f("last_response_time", pa.float64(), "Duration of the last response, seconds."),
        _f("robots_kind", pa.string(), "Cached robots.txt: parsed | allow_all | disallow_all; null if never fetched."),
        _f("robots_status", pa.int32(), "HTTP status of the last robots.txt fetch."),
        _f("robots_fetched_at", TIMESTAMP, "When robots.txt was last fetched (UTC)."),
        _f(
            "robots_failing_since",
            TIMESTAMP,
            "Start of the current run of unreachable robots.txt answers; null if none.",
        ),
        _f("ip", pa.string(), "Last server address used."),
        _f("dns_error", pa.string(), "Why the host's name did not resolve to an allowed address, if it did not."),
        _f("consecutive_errors", pa.int32(), "Errors in a row (drives back-off)."),
        _f("fetches", pa.int64(), "Requests made to the host, all rounds."),
    ]
)

ERRORS_SCHEMA = pa.schema(
    [
        _f(
            "stage",
            pa.string(),
            "The stage the element failed in: select | resolve | assign_slots | fetch | parse | content_seen | freshness | store | publish_pages | publish_links | url_seen | budgets | record.",
            nullable=False,
        ),
        _f(
            "key",
            pa.string(),
            "The element's key: a frontier row key (hex; that row is kept) for a URL, else the host, domain or store row key.",
        ),
        _f("url", pa.string(), "The element's URL, if it has one (as received: it may be malformed)."),
        _f("host", pa.string(), "The element's host (host[:port]), if it has one."),
        _f(
            "exception",
            pa.string(),
            "The exception's type name (the errors/<stage>/<type> counter of the round report).",
            nullable=False,
        ),
        _f("message", pa.string(), "The exception's message, at most 500 characters (bytes from the web escaped)."),
        _f("traceback", pa.string(), "The last frames of the traceback, at most 2,000 characters."),
    ]
)

QUARANTINE_SCHEMA = pa.schema(
    [
        _f(
            "kind",
            pa.string(),
            "url | host: what failed (a dead letter with a URL names the URL, else its host).",
            nullable=False,
        ),
        _f("id", pa.string(), "The URL or host (host[:port]); give it to `beamcrawl hosts release`.", nullable=False),
        _f("host", pa.string(), "The host of the element."),
        _f("quarantined", pa.bool_(), "True once it failed in two rounds: not fetched again until released."),
        _f("failed_rounds", pa.int32(), "How many rounds it failed in (since its last release)."),
        _f("first_round", pa.int64(), "The first round it failed in."),
        _f("last_round", pa.int64(), "The last round it failed in."),
        _f("stage", pa.string(), "The stage of its last failure (errors/ has every one)."),
        _f("exception", pa.string(), "The exception type of its last failure."),
        _f("message", pa.string(), "The message of its last failure."),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "pages": PAGES_SCHEMA,
    "links": LINKS_SCHEMA,
    "errors": ERRORS_SCHEMA,
    "quarantine": QUARANTINE_SCHEMA,
    "urls": URLS_SCHEMA,
    "hosts": HOSTS_SCHEMA,
}


def signed64(fp: int) -> int:
    """An unsigned 64-bit fingerprint as the signed value stored in Parquet."""
    return fp - (1 << 64) if fp >= (1 << 63) else fp


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MS = dt.timedelta(milliseconds=1)


def timestamp_ms(seconds: float) -> int:
    """An epoch-seconds time as the value a :data:`TIMESTAMP` column stores: what Arrow makes
    of ``datetime.fromtimestamp(seconds, UTC)`` (its microseconds, floored to milliseconds).

    Arrow converts a column of ints many times faster than one of aware datetimes, so a
    column that repeats one time per row (a page's edges) is built from this value.
    """
    return (dt.datetime.fromtimestamp(seconds, dt.timezone.utc) - _EPOCH) // _MS


def describe(schema: pa.Schema) -> str:
    """A Markdown table of a schema's columns: name, type, nullability, description."""
    lines = ["| column | type | null | description |", "|---|---|---|---|"]
    for field in schema:
        doc = (field.metadata or {}).get(DESCRIPTION, b"").decode()
        lines.append(
            f"| `{field.name}` | `{field.type}` | {'yes' if field.nullable else 'no'} | {doc.replace('|', '/')} |"
        )
    return "\n".join(lines)
