"""What one hostile page costs the parse: a page of many distinct links, with and without the cap
on the links a page gives (``--max-links-per-page``), and the pre-scan of an ``<a>`` bomb.

Each case runs in a process of its own, so its peak resident memory (``ru_maxrss``) is its own
(the interpreter and the imports included: the ``baseline`` row is a process that only
imported them). Printed per case: CPU seconds of the step (best of ``--repeat``, in that
process), the peak of Python's own allocations during one run of it (tracemalloc: Lexbor's tree
is not among them, the resident peak has it), the peak resident memory, and what it gave.

* ``links``: :func:`parse_fetch` (the whole parse of a fetched page: decode, pre-scan, Lexbor,
  links, their columns, checksum, simhash) of a 4 MiB page of distinct ``<a href>``, with no cap
  (``--max-links 0``: every link, as before the cap) and with the default cap;
* ``bomb``: :func:`htmlbounds.scan` of ``<a b>`` × 400,000 (2 MB, cut at 200,000 elements).

    python bench/link_cap.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from beamcrawl.core.content import htmlbounds  # noqa: E402
from beamcrawl.core.content.htmlparse import MAX_LINKS, MAX_PARSE_BYTES  # noqa: E402
from beamcrawl.core.urls.urlnorm import fingerprint  # noqa: E402
from beamcrawl.schemas.records import FetchResult, FrontierEntry  # noqa: E402
from beamcrawl.transforms.parse import parse_fetch  # noqa: E402

URL = "http://links.test/page"


def many_links() -> bytes:
    """As many distinct ``<a href=/pN>x</a>`` as fit in MAX_PARSE_BYTES."""
    parts, size = [], 0
    while True:
        part = f"<a href=/p{len(parts)}>x</a>"
        if size + len(part) > MAX_PARSE_BYTES:
            return "".join(parts).encode()
        parts.append(part)
        size += len(part)


def fetched(body: bytes) -> FetchResult:
    entry = FrontierEntry(url=URL, fp=fingerprint(URL), host="links.test", due_ms=0)
    headers = [("Content-Type", "text/html; charset=utf-8")]
    return FetchResult(
        entry=entry,
        outcome="fetched",
        url=URL,
        final_url=URL,
        status=200,
        response_headers=headers,
        body=body,
        raw_body=body,
    )


def _case(name: str) -> tuple[Callable[[], Any], Callable[[Any], str]]:
    """The step a case times, and what its answer says."""
    if name == "baseline":
        return (lambda: None), (lambda _: "")
    if name.startswith("links:"):
        cap = int(name.split(":")[1])
        result = fetched(many_links())
        return (lambda: parse_fetch(result, "beamcrawl", max_links=cap)), (
            lambda page: f"{len(page.links):,} links, parse_truncated={page.parse_truncated}"
        )
    if name == "bomb":
        text = "<a b>" * 400_000
        return (lambda: htmlbounds.scan(text)), (lambda bound: f"cut {bound}")
    raise SystemExit(f"unknown case {name}")


def run_case(name: str, repeat: int) -> dict[str, Any]:
    step, said = _case(name)
    gc.collect()
    best = float("inf")
    answer = None
    for _ in range(repeat):
        start = time.process_time()
        answer = step()
        best = min(best, time.process_time() - start)
        answer_text = said(answer)
        answer = None
        gc.collect()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    answer = step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"cpu_s": best, "traced_mb": peak / 1e6, "rss_mb": rss, "answer": answer_text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.repeat)))
        return
    print(f"{'case':<40} {'CPU s':>7} {'traced MB':>10} {'resident MB':>12}  answer")
    for name, label in [
        ("baseline", "imports only"),
        ("links:0", "4 MiB of distinct links, no cap"),
        (f"links:{MAX_LINKS}", f"4 MiB of distinct links, cap {MAX_LINKS:,}"),
        ("bomb", "pre-scan of <a b> x 400,000"),
    ]:
        out = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--case", name, "--repeat", str(args.repeat)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        print(f"{label:<40} {row['cpu_s']:>7.3f} {row['traced_mb']:>10.1f} {row['rss_mb']:>12.1f}  {row['answer']}")


if __name__ == "__main__":
    main()
