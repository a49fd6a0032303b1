"""``beamcrawl submit``: work in, with a priority and a reason.

    beamcrawl submit URL... [--file F] --priority high|normal|low --reason TEXT
                     [--allow-private-networks] (--store URI | --crawl OUT_DIR)

Adds seeds, sitemaps, feeds and urgent recrawls to a crawl's frontier and prints one line of
JSON, the same answer the control API gives (``POST /v1/crawl-requests``)::

    {"accepted": 2, "duplicates": 0, "rejected": [{"url": "ftp://x/", "reason": "unsupported scheme 'ftp'"}]}

``accepted`` URLs were queued (due now, at the priority's level on the crawl's one priority
scale, core/freshness.SUBMIT_PRIORITY); with ``--priority high`` that includes URLs the crawl
already knows, queued again now with their validators (an urgent recrawl, fetched
conditionally; one a redirect's Retry-After still holds is due when that hold ends). ``duplicates`` were given twice or, below high, are already known to the
crawl; ``rejected`` ones cannot be crawled (the reason says why: ``refused: ...`` for an
address the crawler may not connect to, link-local always, loopback and private ones,
``localhost`` and ``*.localhost`` among them, without ``--allow-private-networks``). ``--file`` reads URLs one per line (blank lines and
``#`` comments, at a line's start or after whitespace, skipped; ``-`` is standard input); a
rejected URL from a file is also named on standard error as ``FILE:LINE``. The work is
picked up by the next round; no lease is needed, since queueing writes the frontier row
before the seen-set row and a round running meanwhile at worst queues a URL twice (fetched
once: slot assignment folds rows of one fingerprint).

Exit status: 0 when the request was handled (even if some URLs were rejected), 2 for a bad
command line (unknown priority, no URLs, unreadable file, bad reason), 1 when the store
cannot be opened or written. Errors are one line on standard error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, TextIO

from beamcrawl.core.policy.change_rate import SUBMIT_PRIORITY, submit_priority
from beamcrawl.cli.args import OneLineArgumentParser

__all__ = ["MAX_REASON_CHARS", "SubmitError", "SubmitRequest", "main", "read_url_file", "read_url_lines", "submit"]

MAX_REASON_CHARS = 200
KINDS = ("auto", "page", "sitemap")
# The source recorded on the frontier rows (FrontierEntry.source) of submitted URLs.
SOURCE = "submit"


class SubmitError(Exception):
    """A one-line problem; ``status`` is the exit status (2 bad input, 1 store)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SubmitRequest:
    """A request to queue work, as the CLI and the control API receive it.

    Attributes:
        urls: The URLs, as given (normalised when queued).
        priority: ``high``, ``normal`` or ``low``.
        reason: Why (``sitemap_lastmod``, ``operator recrawl``...), at most 200 characters.
        kind: ``page``, ``sitemap`` (a sitemap or feed, read for the URLs it lists) or
            ``auto`` (by the URL's path: ``.xml``, ``.xml.gz``, ``.rss``, ``/feed``...).
    """

    urls: tuple[str, ...]
    priority: str
    reason: str
    kind: str = "auto"

    def __post_init__(self) -> None:
        if self.priority not in SUBMIT_PRIORITY:
            raise SubmitError(f"priority must be one of {', '.join(SUBMIT_PRIORITY)}, got {self.priority!r}")
        if self.kind not in KINDS:
            raise SubmitError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        check_reason(self.reason)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "SubmitRequest":
        """The control API's body: ``{"urls": [...], "priority": "high", "reason": "..."}``.

        Raises:
            SubmitError: A field is missing or of the wrong type (status 2).
        """
        urls = body.get("urls")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise SubmitError("urls must be a list of strings")
        priority, reason, kind = body.get("priority", "normal"), body.get("reason"), body.get("kind", "auto")
        if not isinstance(priority, str) or not isinstance(reason, str) or not isinstance(kind, str):
            raise SubmitError("priority, reason and kind must be strings")
        return cls(tuple(urls), priority, reason, kind)


def check_reason(reason: str) -> str:
    """Returns the reason if it is one printable line of at most 200 characters.

    Raises:
        SubmitError: Empty, too long, or with control characters (status 2).
    """
    text = reason.strip()
    if not text:
        raise SubmitError("--reason must not be empty")
    if len(text) > MAX_REASON_CHARS:
        raise SubmitError(f"--reason is longer than {MAX_REASON_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise SubmitError("--reason must be one line without control characters")
    return text


def read_url_file(path: str, stdin: TextIO | None = None) -> list[str]:
    """URLs from a file, one per line; ``#`` comments and blank lines skipped.

    A line that is not a URL is kept (it is rejected, with its reason, in the answer):
    one bad line must not cost the rest of a batch.

    Raises:
        SubmitError: The file cannot be read (status 2).
    """
    return [text for _, text in read_url_lines(path, stdin)]


def read_url_lines(path: str, stdin: TextIO | None = None) -> list[tuple[int, str]]:
    """``(line number, URL)`` from a file: blank lines and ``#`` comments (at a line's start
    or after whitespace: ``http://a.example/ # why``) skipped (core/urls/seedfile.py).

    Raises:
        SubmitError: The file cannot be read (status 2).
    """
    from beamcrawl.core.urls.seedfile import url_lines

    try:
        if path == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except FileNotFoundError:
        raise SubmitError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise SubmitError(f"not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SubmitError(f"cannot read {path}: {exc}") from None
    return list(url_lines(text.splitlines()))


def submit(store: Any, request: SubmitRequest, now_ms: int, allow_private: bool = False) -> dict[str, Any]:
    """Queues a request's URLs; returns ``{"accepted", "duplicates", "rejected"}``.

    The one operation behind ``beamcrawl submit`` and the control API: a batched key-set read
    of the seen set, then frontier-then-seen writes (``pipelines.seeding.submit_urls``). A URL
    whose host is an address the crawler may not connect to (link-local always; loopback
    and private ones unless ``allow_private``, the crawl's --allow-private-networks) is
    rejected here, with the reason, rather than failing in every round.
    """
    # Imported here: pipelines/seeding.py imports Apache Beam, which argument errors need not wait for.
    from beamcrawl.core.urls.seedfile import address_refusal
    from beamcrawl.core.urls.urlnorm import InvalidURL, normalize
    from beamcrawl.pipelines.seeding import submit_urls

    usable, refused = [], []
    for url in request.urls:
        try:
            why = address_refusal(normalize(url), allow_private)
        except InvalidURL:
            why = None  # submit_urls rejects it with the URL rules' reason
        if why is None:
            usable.append(url)
        else:
            refused.append({"url": url, "reason": f"refused: {why}"})
    report = submit_urls(
        store, usable, now_ms, priority=submit_priority(request.priority), source=SOURCE,
        reason=request.reason, kind=request.kind, requeue_known=request.priority == "high",
    )  # fmt: skip
    rejected = list(report.rejected) + refused
    order = {url: i for i, url in reversed(list(enumerate(request.urls)))}
    rejected.sort(key=lambda r: order.get(r["url"], len(order)))  # as given
    return {"accepted": report.accepted, "duplicates": report.duplicates, "rejected": rejected}


def _parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog="beamcrawl submit",
        description="Queue seeds, sitemaps, feeds and urgent recrawls with a priority and a reason.",
    )
    parser.add_argument("urls", nargs="*", metavar="URL", help="URLs to queue.")
    parser.add_argument(
        "--file", action="append", default=[], metavar="F", help="File of URLs, one per line ('-': stdin). Repeatable."
    )
    parser.add_argument("--priority", required=True, help="high | normal | low.")
    parser.add_argument("--reason", required=True, help="Why, in a few words (kept with the work).")
    parser.add_argument(
        "--kind",
        default="auto",
        help="page | sitemap (a sitemap or feed, read for URLs) | auto (by path). Default auto.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--store", help="The crawl's store: sqlite:///PATH, a folder, or bigtable://PROJECT/INSTANCE[/PREFIX]."
    )
    where.add_argument("--crawl", metavar="OUT_DIR", help="The crawl's output folder (its embedded store).")
    parser.add_argument(
        "--allow-private-networks", action="store_true",
        help="Accept URLs on loopback and private IP addresses (as the crawl's own flag; "
        "link-local ones are refused always).",
    )  # fmt: skip
    return parser


def store_uri(store: str | None, crawl: str | None) -> str:
    """The store named by ``--store`` or ``--crawl``, which must exist already: a typo must
    not start an empty crawl state that no crawl reads.

    Raises:
        SubmitError: No embedded store there (status 1).
    """
    if store and store.startswith("bigtable://"):
        return store
    if crawl:
        path = os.path.join(os.path.abspath(crawl), "store.sqlite")
    else:
        assert store is not None
        raw = store[len("sqlite://") :] if store.startswith("sqlite://") else store
        path = os.path.abspath(os.path.expanduser(raw))
        if os.path.isdir(path):
            path = os.path.join(path, "store.sqlite")
    if not os.path.isfile(path):
        raise SubmitError(f"no crawl store at {path} (give the crawl's --out as --crawl, or its --store)", status=1)
    return f"sqlite://{path}"  # path is absolute: sqlite:///abs/path


def run(argv: Sequence[str], out: TextIO, stdin: TextIO | None = None, now: float | None = None) -> int:
    """``beamcrawl submit`` with its streams given (for tests); raises SubmitError."""
    args = _parser().parse_args(list(argv))
    urls = list(args.urls)
    where: dict[str, str] = {}  # a URL from a file: its first file and line
    for path in args.file:
        for number, url in read_url_lines(path, stdin):
            where.setdefault(url, f"{'<stdin>' if path == '-' else path}:{number}")
            urls.append(url)
    if not urls:
        raise SubmitError("no URLs given (as arguments or with --file)")
    request = SubmitRequest(tuple(urls), args.priority, args.reason, args.kind)
    uri = store_uri(args.store, args.crawl)

    from beamcrawl.stores.base import StoreError, open_store

    now_ms = int((time.time() if now is None else now) * 1000)
    try:
        with open_store(uri) as store:
            answer = submit(store, request, now_ms, allow_private=args.allow_private_networks)
    except StoreError as exc:
        raise SubmitError(str(exc), status=1) from None
    except Exception as exc:  # a backend's own errors (sqlite, grpc) differ; all are store trouble here
        raise SubmitError(f"store {uri}: {type(exc).__name__}: {exc}".splitlines()[0], status=1) from None
    out.write(json.dumps(answer) + "\n")
    out.flush()
    for item in answer["rejected"]:  # the lines of a file to fix, where they came from one
        if item["url"] in where:
            print(
                f"beamcrawl submit: {where[item['url']]}: rejected {item['url']!r}: {item['reason']}", file=sys.stderr
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``beamcrawl submit`` (and ``python -m beamcrawl.cli.submit``)."""
    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stdin)
    except SubmitError as exc:
        print(f"beamcrawl submit: error: {exc}", file=sys.stderr)
        return exc.status


if __name__ == "__main__":
    sys.exit(main())
