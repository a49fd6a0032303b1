"""The speed claims the tests used to assert with wall-clock bounds, measured and printed.

Tests check behaviour; how fast something is depends on the machine and its load, so it is
measured here and read by a person (issue #16). Each line: the claim, the figure, and the
bound the old test asserted, for comparison. Nothing fails.

    .venv/bin/python bench/speed_claims.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def normalize_per_url() -> float:
    from beamcrawl.core.urls.urlnorm import normalize

    urls = [f"https://www.site{i % 37}.example/news/{i}/story.html?id={i}" for i in range(3000)]

    def go() -> None:
        for url in urls:
            normalize(url)
            normalize(f"../other/{url[-8:]}", url)

    return _best(go) / (2 * len(urls))


def urlshape_per_url() -> float:
    from beamcrawl.core.urls.urlshape import ShapeRules

    urls = [
        "https://www.example.com/news/2024/05/17/some-article-title-here.html",
        "https://example.com/",
        "https://example.com/a/b/a/b/a/b/c",
        "https://cdn.example.com/images/photo_1234.jpg",
        "https://shop.example.com/category/shoes?color=red&size=42&page=3",
    ] * 4000
    rules = ShapeRules()
    return _best(lambda: [rules.check(u) for u in urls]) / len(urls)


def charset_detection() -> float:
    from beamcrawl.core.content.sniff import detect_charset

    page = (
        "<html><head><title>Caf\u00e9</title></head><body>"
        + "na\u00efve r\u00e9sum\u00e9 \u2013 \u201cquoted\u201d " * 20
    )
    body = page.encode("cp1252") * 2000  # ~2.4 MB, undeclared, not UTF-8
    detect_charset(body)  # imports
    return _best(lambda: detect_charset(body))


def bomb_decoding() -> dict[str, float]:
    import zlib

    from beamcrawl.core.net.transfer import BROTLI, decode_content

    zero = bytes(64 * 1024 * 1024)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    bombs = {"gzip": compressor.compress(zero) + compressor.flush()}
    if BROTLI is not None:
        bombs["br"] = BROTLI.compress(zero)
    return {name: _best(lambda b=bomb, n=name: decode_content(b, n, 2 * 1024 * 1024)) for name, bomb in bombs.items()}


def quicktools_import() -> float:
    code = "import time; t = time.perf_counter(); import beamcrawl.cli.quicktools; print(time.perf_counter() - t)"
    return min(
        float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO).stdout)
        for _ in range(3)
    )


def cli_quick_tool(args: list[str]) -> float:
    cmd = [sys.executable, "-m", "beamcrawl.cli.main", *args]
    return _best(lambda: subprocess.run(cmd, check=True, capture_output=True, cwd=REPO))


def main() -> None:
    print(f"normalize (absolute + relative)  {normalize_per_url() * 1e6:8.2f} µs/URL   (old test bound 50 µs)")
    print(f"URL-shape check                  {urlshape_per_url() * 1e6:8.2f} µs/URL   (old test bound 20 µs)")
    print(f"charset detection, 2.4 MB page   {charset_detection() * 1e3:8.1f} ms       (old test bound 1000 ms)")
    for name, seconds in bomb_decoding().items():
        print(f"64 MiB {name:4} bomb, 2 MiB cap    {seconds * 1e3:8.1f} ms       (old test bound 2000 ms)")
    print(f"import beamcrawl.cli.quicktools {quicktools_import() * 1e3:8.1f} ms       (old test bound 300 ms)")
    with tempfile.TemporaryDirectory() as tmp:
        robots = Path(tmp) / "r.txt"
        robots.write_text("User-agent: *\nDisallow: /x\n")
        for args in (
            ["normalize", "http://a.com/b"],
            ["robots-check", "--robots", str(robots), "--agent", "a", "http://a.com/x"],
        ):
            print(
                f"beamcrawl {args[0]:22} {cli_quick_tool(args) * 1e3:8.1f} ms       (old test bound 1000 ms, process start included)"
            )


if __name__ == "__main__":
    main()
