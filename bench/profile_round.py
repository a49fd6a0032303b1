"""Profile one steady-state beamcrawl round with py-spy and say where its CPU goes.

Starts simweb on loopback, runs an unprofiled cold round (robots.txt and roots) and a warm-up
round so the frontier is deep, then runs the measured round under ``py-spy record`` (all
threads, and every subprocess with ``--mp``), and prints two views of the samples:

- **by component**: each sample is charged to the first frame, from the leaf up, that belongs
  to a known component (selectolax, URL normalisation, warcio/gzip, pyarrow, SQLite store,
  aiohttp/asyncio, Beam's runner...), so the shares add up to 100%;
- **inclusive**: the share of samples with a given beamcrawl function anywhere on the stack.

    python bench/profile_round.py [--hosts 3000] [--window 60] [--mp] [--gil] [--out DIR]

``--gil`` keeps only the samples of a thread holding the GIL, so the shares are CPU where the
round has a core whenever it runs (in process, beside the server). A thread that holds the GIL
is sampled also while its process waits for a core: with ``--mp`` two workers, the runner and
the server share two cores during the window, and there the shares count those waits too (in
one such profile the fetch stage's parts had twice the samples a page of an in-process
profile, the stages after the window 1.0-1.3 times; bench/README.md, "Two workers: the
runner's heap given back after each bundle"). For CPU by process read ``/proc``.

Needs py-spy in the venv (``pip install py-spy``) and ptrace (root, or
``kernel.yama.ptrace_scope`` 0). ``--summarise FILE.raw`` only prints the views of an existing
py-spy raw file.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

__all__ = ["COMPONENTS", "INCLUSIVE", "classify", "main", "summarise"]

# (component, regex on "function (file:line)"), tried for each frame from the leaf up; the first
# frame that matches any rule names the component of the sample. Order matters within a frame.
COMPONENTS: list[tuple[str, re.Pattern[str]]] = [
    ("startup: imports", re.compile(r"<frozen importlib\._bootstrap")),
    ("parse: selectolax (HTML tree, CSS select, text)", re.compile(r"selectolax|lexbor")),
    ("parse: URL normalise + fingerprint (urlnorm)", re.compile(r"beamcrawl/core/urls/urlnorm\.py")),
    ("parse: urllib (urljoin/urlsplit/quote)", re.compile(r"urllib/parse\.py")),
    (
        "parse: parse_html/parse stage incl. selectolax C code",
        re.compile(r"beamcrawl/core/content/htmlparse\.py|beamcrawl/transforms/parse\.py"),
    ),
    ("parse: visible text + simhash (textfp)", re.compile(r"beamcrawl/core/content/textfp\.py|mmh3")),
    ("parse: limits pre-scan (htmlbounds)", re.compile(r"beamcrawl/core/content/htmlbounds\.py")),
    (
        "WARC: warcio + gzip/zlib + digests, spool, CDXJ",
        re.compile(r"warcio/|/gzip\.py|zlib|hashlib|base64|beamcrawl/core/archive/|beamcrawl/transforms/warc_io\.py"),
    ),
    (
        "Parquet/Arrow: pyarrow + row building",
        re.compile(r"pyarrow|beamcrawl/transforms/parquet_io\.py|beamcrawl/schemas/arrow\.py"),
    ),
    ("domains: tldextract", re.compile(r"tldextract")),
    ("store: SQLite (frontier, seen set, hosts)", re.compile(r"sqlite3|beamcrawl/stores/")),
    ("DRUM: bucket/combine/merge, candidates", re.compile(r"beamcrawl/transforms/url_seen\.py")),
    (
        "content seen: checksums, simhash tables, settle",
        re.compile(r"beamcrawl/transforms/(content_seen|near_copies)\.py|beamcrawl/state/content_rows\.py"),
    ),
    (
        "schedule: revisit policy",
        re.compile(r"beamcrawl/transforms/freshness\.py|beamcrawl/core/policy/change_rate\.py"),
    ),
    ("record: URL/host state rows", re.compile(r"beamcrawl/transforms/record\.py|beamcrawl/schemas/records\.py")),
    ("fetch: aiohttp client", re.compile(r"aiohttp/|multidict|yarl/|aiohappyeyeballs")),
    ("fetch: asyncio event loop", re.compile(r"asyncio/|selectors\.py")),
    (
        "fetch: beamcrawl fetcher/politeness/robots",
        re.compile(r"beamcrawl/core/(net|policy)/\w+\.py|beamcrawl/transforms/fetch\.py|protego"),
    ),
    ("Beam: coders/pickling", re.compile(r"apache_beam/coders|pickle|dill|cloudpickle")),
    ("Beam: runner, operations, bundle processing", re.compile(r"apache_beam/")),
    ("threads: queue/locks/waits", re.compile(r"threading\.py|queue\.py")),
    ("grpc/protobuf", re.compile(r"grpc|protobuf")),
    ("other beamcrawl", re.compile(r"beamcrawl/")),
]

# Inclusive views: the share of samples with a matching frame anywhere on the stack (thread
# frames included, so a thread's whole share shows). py-spy shows frames as
# "Class.method (path:line)"; Cython-compiled code (Beam's operations, selectolax, pyarrow's
# core) has no frames of its own, its time shows in the Python caller.
INCLUSIVE: list[tuple[str, re.Pattern[str]]] = [
    # The thread's name is not always what py-spy shows (a Python 3.11 thread's OS name is
    # its process's): the fetch loop is the thread running an asyncio loop.
    (
        "fetch-loop thread (aiohttp + asyncio + fetcher)",
        re.compile(r"^thread \(\d+\): beamcrawl-fetch|^BaseEventLoop\.run_forever "),
    ),
    ("main thread: Beam bundles (all DoFns)", re.compile(r"^BundleProcessor\.process_bundle ")),
    ("Select: frontier scan (_ScanDueFn)", re.compile(r"^_ScanDueFn\.")),
    ("Assign slots (_PlanFn)", re.compile(r"^_PlanFn\.")),
    ("Parse DoFn (_ParseFn.process)", re.compile(r"^_ParseFn\.process ")),
    ("- parse_html (selectolax inside)", re.compile(r"^parse_html ")),
    ("- urlnorm normalize + fingerprint", re.compile(r"^(normalize|fingerprint) \(beamcrawl/core/urls/urlnorm")),
    ("WARC DoFn (_WriteWarcFn.process)", re.compile(r"^_WriteWarcFn\.process ")),
    ("- warcio WARCWriter.write_record (gzip, digests)", re.compile(r"^WARCWriter\.write_record ")),
    ("- CDXJ index entries", re.compile(r"beamcrawl/core/archive/cdxj\.py")),
    ("Parquet writers (_ParquetPartsFn)", re.compile(r"^_ParquetPartsFn\.")),
    ("- link_edge_parts (links/ columns)", re.compile(r"^link_edge_(?:parts|columns) ")),
    ("DRUM combine per bundle (_BucketFn)", re.compile(r"^_BucketFn\.")),
    ("DRUM merge + queue new URLs (_MergeBucketFn.process)", re.compile(r"^_MergeBucketFn\.process ")),
    ("- queue_new_urls (frontier + seen-set rows)", re.compile(r"^queue_new_urls ")),
    ("Record URL/host state rows (_WriteRowsFn)", re.compile(r"^_WriteRowsFn\.process ")),
    (
        "row encoding: to_cells / dataclasses.asdict / json",
        re.compile(r"^(\w+\.to_cells|_encode|asdict|dumps|json_cell) "),
    ),
    ("SQLite writes: EmbeddedStore.mutate", re.compile(r"^EmbeddedStore\.mutate ")),
    ("SQLite reads: EmbeddedStore.read_*", re.compile(r"^EmbeddedStore\.(read_range|read_keys)")),
    ("Beam coders (encode/decode)", re.compile(r"apache_beam/coders")),
    ("round commit (_commit)", re.compile(r"^_commit ")),
    ("imports", re.compile(r"<frozen importlib")),
]


def _parse_raw(lines: Iterable[str]) -> Iterable[tuple[list[str], int]]:
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            continue
        yield stack.split(";"), n


def classify(frames: list[str]) -> str:
    """The component of one sample (frames root first, as py-spy writes them)."""
    for frame in reversed(frames):
        for name, pattern in COMPONENTS:
            if pattern.search(frame):
                return name
    leaf = frames[-1] if frames else "?"
    return "unclassified: " + leaf.split(" (", 1)[0]


def summarise(raw: Path, top: int = 25) -> str:
    """Both views of a py-spy raw (collapsed stacks) file, as Markdown."""
    by_component: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    processes: Counter[str] = Counter()
    with raw.open(encoding="utf-8", errors="replace") as fh:
        for frames, n in _parse_raw(fh):
            total += n
            body = [f for f in frames if not f.startswith(("process ", "thread "))]
            proc = next((f for f in frames if f.startswith("process ")), "")
            processes[proc.split(":", 1)[0]] += n
            by_component[classify(body)] += n
            stripped = [f.strip() for f in frames]
            for name, pattern in INCLUSIVE:
                if any(pattern.search(f) for f in stripped):
                    inclusive[name] += n
    if not total:
        return "no samples"
    lines = [f"samples: {total:,}" + (f" in {len(processes)} processes" if len(processes) > 1 else ""), ""]
    lines += ["| component (self, leaf-up) | share |", "|---|---:|"]
    for name, n in by_component.most_common(top):
        lines.append(f"| {name} | {100 * n / total:.1f}% |")
    lines += ["", "| function (inclusive) | share |", "|---|---:|"]
    for name, _ in INCLUSIVE:
        if inclusive[name]:
            lines.append(f"| {name} | {100 * inclusive[name] / total:.1f}% |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """Command-line parser."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=3000)
    p.add_argument("--window", type=float, default=60.0)
    p.add_argument("--warmup-window", type=float, default=20.0)
    p.add_argument("--delay", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--pages-per-host", type=int, default=1_000_000)
    p.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    p.add_argument(
        "--gil",
        action="store_true",
        help="sample only the thread holding the GIL (CPU shares in process; with --mp also waits for a core)",
    )
    p.add_argument("--mp", action="store_true", help="multi_processing with 2 workers")
    p.add_argument("--out", default=None, help="folder for the raw profile (default: a new temp folder)")
    p.add_argument("--summarise", default=None, help="only summarise this py-spy raw file")
    return p


def main(argv: list[str] | None = None) -> int:
    """Profile a round (or summarise a raw file) and print the views."""
    args = build_parser().parse_args(argv)
    if args.summarise:
        print(summarise(Path(args.summarise)))
        return 0
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        print("profile: py-spy not found (pip install py-spy)", file=sys.stderr)
        return 2

    from harness import free_port, simweb_on_port

    from beamcrawl import DEFAULT_USER_AGENT
    from beamcrawl.simweb.names import host_names

    out = Path(args.out or tempfile.mkdtemp(prefix="beamcrawl-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    work = out / f"work-{int(time.time())}"
    work.mkdir()
    port = free_port()
    seeds = work / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\n" for h in host_names(args.hosts, args.seed)))
    script = str(BENCH / "beamcrawl_round.py")
    common = [
        "--out",
        str(work / "out"),
        "--delay",
        str(args.delay),
        "--hosts-in-flight",
        str(args.hosts),
        "--user-agent",
        DEFAULT_USER_AGENT,
        "--crawl-delay-cap",
        "2",
    ]
    label = "mp" if args.mp else "inprocess"
    raw = out / f"round-{label}.raw"
    with simweb_on_port(
        work, port, hosts=args.hosts, seed=args.seed, pages_per_host=args.pages_per_host, log_name="requests.jsonl"
    ):
        subprocess.run(
            [sys.executable, script, *common, "--seeds", str(seeds), "--window", str(args.window)], check=True, cwd=work
        )
        subprocess.run([sys.executable, script, *common, "--window", str(args.warmup_window)], check=True, cwd=work)
        cmd = [py_spy, "record", "-r", str(args.rate), "-f", "raw", "--threads", "--nonblocking", "-o", str(raw)]
        if args.mp:
            cmd.append("--subprocesses")
        if args.gil:
            cmd.append("--gil")
        cmd += [
            "--",
            sys.executable,
            script,
            *common,
            "--window",
            str(args.window),
            "--report-out",
            str(work / "round.json"),
        ]
        if args.mp:
            cmd += ["--", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, cwd=work)
        wall = time.monotonic() - t0
    print(f"profiled round: {wall:.1f}s wall; raw samples in {raw}")
    report = work / "round.json"
    if report.exists():
        shutil.copy(report, out / f"round-{label}.json")
        r = json.loads(report.read_text())[0]
        print(
            {
                k: r.get(k)
                for k in (
                    "responses",
                    "seconds",
                    "pipeline_seconds",
                    "links_found",
                    "new_urls",
                    "deferred",
                    "frontier_size",
                )
            }
        )
    print(summarise(raw))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
