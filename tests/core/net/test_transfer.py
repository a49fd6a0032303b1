"""Tests for beamcrawl.core.net.transfer: minimum transfer rate, body cap, capped decompression.

The rate guard is tested against a real aiohttp server on loopback that drips one byte every
100 ms, and the decoders against real gzip, deflate and brotli bombs.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import random
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beamcrawl.core.net import transfer
from beamcrawl.core.net.transfer import (
    ACCEPT_ENCODING,
    BROTLI,
    CappedDecoder,
    UnsupportedEncoding,
    decode_content,
    read_body,
    warc_truncated,
)

MiB = 1024 * 1024
BOMB_SIZE = 32 * MiB  # what each bomb expands to (16x the largest cap used here)


def _zlib_bomb(wbits: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(MiB)
    return b"".join(c.compress(block) for _ in range(BOMB_SIZE // MiB)) + c.flush()


def _brotli_bomb() -> bytes:
    c = BROTLI.Compressor(quality=5)
    block = bytes(MiB)
    out = [c.process(block) for _ in range(BOMB_SIZE // MiB)]
    return b"".join(out) + c.finish()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    made = {"gzip": _zlib_bomb(31), "deflate": _zlib_bomb(15), "deflate-raw": _zlib_bomb(-15)}
    if BROTLI is not None:
        made["br"] = _brotli_bomb()
    return made


# --- a real server ------------------------------------------------------------------------------


class DripServer:
    """Loopback aiohttp server; each route streams its body in a scripted way. Every stream is
    bounded in bytes and time, and ends by itself."""

    def __init__(self, bombs: dict[str, bytes]) -> None:
        self.bombs = bombs
        self.port = 0
        self.sent: dict[str, int] = {}
        self._ready = threading.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        headers = {"Content-Type": "text/html"}
        coding = name.split("-")[0] if name.startswith(("gzip", "deflate", "br")) else None
        if coding:
            headers["Content-Encoding"] = "deflate" if coding == "deflate" else coding
        resp = web.StreamResponse(headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0
        try:
            if name == "drip":  # one byte per 100 ms, for at most 10 s
                for _ in range(100):
                    await resp.write(b"x")
                    sent += 1
                    await asyncio.sleep(0.1)
            elif name == "stall":  # a quick start, then silence for 1.5 s
                await resp.write(b"y" * 4000)
                sent += 4000
                await asyncio.sleep(1.5)
            elif name == "steady":  # 32 KiB every 20 ms: ~1.6 MB/s, 640 KiB in all
                for _ in range(20):
                    await resp.write(b"z" * 32768)
                    sent += 32768
                    await asyncio.sleep(0.02)
            elif name == "big":
                for _ in range(80):
                    await resp.write(b"b" * 65536)
                    sent += 65536
            elif coding:
                # In small pieces with short pauses, as a network delivers them, so the
                # client sees the stream grow and can stop part way.
                body = self.bombs["deflate-raw" if name == "deflate-raw" else coding]
                for i in range(0, len(body), 4096):
                    await resp.write(body[i : i + 4096])
                    sent += len(body[i : i + 4096])
                    await asyncio.sleep(0.002)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client hung up, as it should after a cut
        finally:
            self.sent[name] = sent
        return resp

    def run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        app = web.Application()
        app.router.add_get("/{name}", self.handle)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()


@pytest.fixture(scope="module")
def server(bombs: dict[str, bytes]) -> Iterator[DripServer]:
    srv = DripServer(bombs)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    assert srv._ready.wait(10)
    try:
        yield srv
    finally:
        srv.loop.call_soon_threadsafe(srv.loop.stop)
        thread.join(10)


async def _fetch(port: int, name: str, **kw: object) -> tuple[bytes, str | None, float, CappedDecoder | None]:
    decoder_cap = kw.pop("decoded_cap", None)
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(f"http://127.0.0.1:{port}/{name}", timeout=aiohttp.ClientTimeout(total=15)) as resp:
            decoder = None
            on_chunk = None
            if decoder_cap is not None:
                decoder = CappedDecoder(resp.headers.get("Content-Encoding"), decoder_cap)
                parts: list[bytes] = []

                def on_chunk(chunk: bytes) -> bool:
                    parts.append(decoder.feed(chunk))
                    return not decoder.done

            started = time.monotonic()
            body, reason = await read_body(resp.content, **kw, on_chunk=on_chunk)  # type: ignore[arg-type]
            took = time.monotonic() - started
            if reason is not None:
                resp.close()
            if decoder is not None:
                parts.append(decoder.finish())
                decoder.payload = b"".join(parts)  # type: ignore[attr-defined]
            return body, reason, took, decoder


def test_drip_server_is_abandoned_after_the_grace_period(server: DripServer) -> None:
    body, reason, took, _ = asyncio.run(_fetch(server.port, "drip", cap=MiB, min_rate=100.0, grace=0.5))
    assert reason == "slow"
    assert took >= 0.45  # not before the grace ended
    assert 3 <= len(body) <= 8  # ~10 bytes/s for half a second: cut when the rule failed, not at the drip's end
    assert set(body) == {ord("x")}


def test_drip_is_also_caught_by_the_rate_long_after_the_grace(server: DripServer) -> None:
    # 10 B/s against a minimum of 8 B/s passes; against 15 B/s it fails within ~1 s.
    body, reason, took, _ = asyncio.run(_fetch(server.port, "drip", cap=MiB, min_rate=15.0, grace=0.3))
    assert reason == "slow" and len(body) < 50  # of the 100 bytes the 10 s drip would send


def test_stalled_server_is_abandoned_after_the_stall_timeout(server: DripServer) -> None:
    body, reason, took, _ = asyncio.run(_fetch(server.port, "stall", cap=MiB, min_rate=0.0, grace=0.0, stall=0.4))
    assert reason == "slow" and body == b"y" * 4000
    assert took >= 0.35  # not before the stall timeout


def test_steady_server_is_read_in_full(server: DripServer) -> None:
    body, reason, took, _ = asyncio.run(_fetch(server.port, "steady", cap=MiB, min_rate=50_000.0, grace=0.2, stall=1.0))
    assert reason is None and len(body) == 20 * 32768


def test_body_cap(server: DripServer) -> None:
    body, reason, _, _ = asyncio.run(_fetch(server.port, "big", cap=100_000, min_rate=1000.0, grace=1.0))
    assert reason == "length" and len(body) == 100_000


@pytest.mark.parametrize("name", ["gzip", "deflate", "deflate-raw", "br"])
def test_bombs_are_cut_while_streaming(server: DripServer, bombs: dict[str, bytes], name: str) -> None:
    """A 64 MiB bomb, decoded as it arrives with a 1 MiB cap: the transfer stops as soon as
    the payload reaches the cap, long before the compressed body ends."""
    if name not in bombs:
        pytest.fail("no brotli binding with an output limit (brotli>=1.2, setup.py): br bombs are unguarded")
    raw, reason, _, decoder = asyncio.run(
        _fetch(server.port, name, cap=8 * MiB, min_rate=0.0, grace=0.0, decoded_cap=MiB)
    )
    assert decoder is not None and decoder.error is None
    assert reason == "length" and decoder.truncated
    assert len(decoder.payload) == MiB and decoder.payload == bytes(MiB)  # type: ignore[attr-defined]
    if len(bombs[name]) > 16 * 4096:  # (a brotli bomb is ~100 bytes: nothing to stop early)
        assert len(raw) < len(bombs[name]) / 4  # stopped early


@pytest.mark.parametrize("name", ["gzip", "deflate", "deflate-raw", "br"])
def test_decode_content_caps_bombs_in_memory(bombs: dict[str, bytes], name: str) -> None:
    if name not in bombs:
        pytest.fail("no brotli binding with an output limit (brotli>=1.2, setup.py): br bombs are unguarded")
    coding = "deflate" if name.startswith("deflate") else name
    out = decode_content(bombs[name], coding, 2 * MiB)
    assert out.truncated and out.error is None and out.body == bytes(2 * MiB)


# --- decoders without a server ------------------------------------------------------------------


def test_decode_content_small_bodies() -> None:
    page = b"<html>" + b"a" * 5000 + b"</html>"
    assert decode_content(gzip.compress(page), "gzip", MiB) == (page, False, None)
    assert decode_content(gzip.compress(page), "X-GZIP", MiB) == (page, False, None)
    assert decode_content(zlib.compress(page), "deflate", MiB) == (page, False, None)
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert decode_content(raw_deflate.compress(page) + raw_deflate.flush(), "deflate", MiB).body == page
    assert decode_content(page, None, MiB) == (page, False, None)
    assert decode_content(page, "identity", 100) == (page[:100], True, None)
    # exactly at the cap is not a cut
    assert decode_content(gzip.compress(page), "gzip", len(page)) == (page, False, None)
    assert decode_content(gzip.compress(page), "gzip", len(page) - 1) == (page[:-1], True, None)


def test_multi_member_gzip_and_trailing_padding() -> None:
    raw = gzip.compress(b"first,") + gzip.compress(b"second") + b"\x00" * 8
    assert decode_content(raw, "gzip", MiB) == (b"first,second", False, None)


def test_stacked_codings_are_undone_last_first() -> None:
    page = b"<p>" * 1000
    raw = gzip.compress(zlib.compress(page))  # deflate applied first, then gzip
    assert decode_content(raw, "deflate, gzip", MiB).body == page
    assert decode_content(raw, "deflate, gzip", 10).body == page[:10]


# Each coding the crawler undoes, as a function that applies it.
_CODERS = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress, "identity": lambda b: b}
if BROTLI is not None:
    _CODERS["br"] = BROTLI.compress


def _mixed_bytes(seed: int, parts: list[tuple[bool, int]]) -> bytes:
    """Runs of random bytes (which a coding makes longer) and of zeros (which it shrinks)."""
    rnd = random.Random(seed)
    return b"".join(rnd.randbytes(n) if noise else bytes(n) for noise, n in parts)


@settings(max_examples=150, deadline=None)
@given(
    codings=st.lists(st.sampled_from(sorted(c for c in _CODERS if c != "identity")), min_size=1, max_size=3),
    seed=st.integers(0, 2**32),
    parts=st.lists(st.tuples(st.booleans(), st.integers(1, 40_000)), max_size=4),
    chunk=st.integers(1, 8192),
    data=st.data(),
)
@example(codings=["gzip", "gzip"], seed=0, parts=[(True, 30_000)], chunk=1000, data=None)
def test_stacked_codings_give_the_body_to_the_cap_however_it_arrives(codings, seed, parts, chunk, data) -> None:
    """Fed in any chunks, the decoder gives the body up to the cap, and says it was cut
    only when the body is longer. With stacked codings a stage before the last could reach
    its limit (the bytes left under the cap) while the body was still under it: zlib kept
    the rest of that input aside and the next chunk replaced it, so the stream broke
    (random bytes gzipped twice, the inner stream longer than the body)."""
    plain = _mixed_bytes(seed, parts)
    cap = data.draw(st.integers(1, len(plain) + 100), label="cap") if data else len(plain) + 100
    body = plain
    for coding in codings:
        body = _CODERS[coding](body)
    decoder = CappedDecoder(", ".join(codings), cap)
    out = [decoder.feed(body[i : i + chunk]) for i in range(0, len(body), chunk)]
    out.append(decoder.finish())
    assert decoder.error is None
    assert b"".join(out) == plain[:cap]
    assert decoder.truncated == (len(plain) > cap)


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_the_end_of_a_body_allocates_nothing_the_size_of_the_cap(coding) -> None:
    # zlib's flush(n) takes n as the size of a buffer to allocate, not as a limit: given the
    # bytes left under the cap, every compressed body's end allocated up to the cap whole.
    page = b"<p>" * 1000
    decoder = CappedDecoder(coding, 256 * MiB)
    assert decoder.feed(_CODERS[coding](page)) == page
    tracemalloc.start()
    try:
        assert decoder.finish() == b""
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MiB and decoder.complete


def test_truncated_stream_keeps_what_decodes() -> None:
    page = bytes(range(256)) * 400
    raw = gzip.compress(page)
    out = decode_content(raw[: len(raw) // 2], "gzip", MiB)
    assert out.error is None and 0 < len(out.body) < len(page) and page.startswith(out.body)


def test_corrupt_and_unsupported_streams_keep_the_raw_bytes() -> None:
    junk = b"\x1f\x8b\x08\x00not really gzip at all"
    out = decode_content(junk, "gzip", MiB)
    assert out.body == junk and out.error is not None and not out.truncated
    assert decode_content(b"abc", "zstd", MiB) == (b"abc", False, "unsupported Content-Encoding 'zstd'")
    with pytest.raises(UnsupportedEncoding):
        CappedDecoder("compress", 10)


def test_accept_encoding_only_advertises_what_decodes() -> None:
    assert ACCEPT_ENCODING.startswith("gzip, deflate")
    assert ("br" in ACCEPT_ENCODING) == (BROTLI is not None)


def test_old_brotli_without_an_output_limit_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    class OldDecompressor:
        def process(self, data: bytes) -> bytes:  # brotli < 1.2: no output_buffer_limit
            return data

    class OldBrotli:
        Decompressor = OldDecompressor

    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name in ("brotli", "brotlicffi"):
            return OldBrotli
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    assert transfer._load_brotli() is None


# --- read_body logic with a scripted stream ----------------------------------------------------


class _Script:
    """A StreamReader stand-in: yields (delay, chunk) pairs, then EOF. A chunk with no delay
    has arrived already (``read_nowait`` returns it); the others are waited for."""

    def __init__(self, steps: list[tuple[float, bytes]]) -> None:
        self.steps = list(steps)
        self.waits = 0

    async def readany(self) -> bytes:
        if not self.steps:
            return b""
        delay, chunk = self.steps.pop(0)
        self.waits += 1
        await asyncio.sleep(delay)
        return chunk

    def read_nowait(self, n: int = -1) -> bytes:
        if self.steps and self.steps[0][0] == 0:
            return self.steps.pop(0)[1]
        return b""

    def is_eof(self) -> bool:
        return not self.steps


def test_read_body_exact_cap_is_complete_and_on_chunk_can_stop() -> None:
    body, reason = asyncio.run(read_body(_Script([(0, b"ab"), (0, b"cd")]), 4, 0.0, 0.0))
    assert (body, reason) == (b"abcd", None)
    body, reason = asyncio.run(read_body(_Script([(0, b"ab"), (0, b"cd"), (0, b"e")]), 4, 0.0, 0.0))
    assert (body, reason) == (b"abcd", "length")
    seen: list[bytes] = []
    body, reason = asyncio.run(
        read_body(_Script([(0, b"ab"), (0, b"cd")]), 10, 0.0, 0.0, on_chunk=lambda c: seen.append(c) or False)
    )
    assert (body, reason, seen) == (b"ab", "length", [b"ab"])


def test_read_body_takes_what_has_arrived_without_waiting() -> None:
    arrived = _Script([(0, b"ab"), (0, b"cd")])
    assert asyncio.run(read_body(arrived, 10, 1000.0, 0.1)) == (b"abcd", None)
    assert arrived.waits == 0
    later = _Script([(0, b"ab"), (0.01, b"cd"), (0, b"ef")])
    assert asyncio.run(read_body(later, 10, 1000.0, 0.1)) == (b"abcdef", None)
    assert later.waits == 1


def test_read_body_fast_burst_then_slow_tail_is_judged_on_the_average() -> None:
    # 1,000 bytes at once buys 1 s at 1,000 B/s: a 0.5 s pause then more bytes is fine.
    steps = [(0, b"a" * 1000), (0.5, b"b" * 1000), (0, b"")]
    body, reason = asyncio.run(read_body(_Script(steps), 10_000, 1000.0, 0.1))
    assert reason is None and len(body) == 2000


def test_warc_truncated_uses_the_standards_words() -> None:
    assert [warc_truncated(r) for r in (None, "length", "slow", "other")] == [
        None,
        "length",
        "time",
        "unspecified",
    ]


# --- transfer codings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ((), ""),
        (("chunked",), ""),
        (("gzip, chunked",), "gzip"),
        (("gzip", "chunked"), "gzip"),
        (("GZIP ,Chunked",), "GZIP"),
        (("deflate, gzip, chunked",), "deflate, gzip"),
        (("chunked, chunked",), ""),  # applied once at most: read as once, as the client does
        (("gzip",), "gzip"),  # read to the close, then undone
        (("gzip,",), "gzip"),
    ],
)
def test_transfer_codings_are_those_left_once_chunked_is_undone(lines, expected) -> None:
    assert transfer.transfer_codings(lines) == expected


@pytest.mark.parametrize(
    "lines", [("chunked, gzip",), ("chunked", "gzip"), ("chunked,",), ("chunked", ""), ("chunked, identity",)]
)
def test_a_chunked_that_is_not_the_last_transfer_coding_is_bad_framing(lines) -> None:
    with pytest.raises(transfer.BadFraming):
        transfer.transfer_codings(lines)


def test_a_gzip_transfer_coding_is_undone_for_parsing_and_for_the_warc() -> None:
    """``Transfer-Encoding: gzip, chunked``: the fetcher undoes the gzip (the client undid
    the chunks), parse sees the page and its links, and the WARC record holds the page under
    the renamed header. It held the gzip bytes: a record whose head names no coding (no
    Content-Encoding, its Transfer-Encoding renamed) and whose payload is gzip, read back by
    warcio as gzip, its payload digest not that of the entity (WARC 1.1 §5.9: the payload of
    an application/http block is its entity-body, the transfer codings undone)."""
    from warcio.archiveiterator import ArchiveIterator

    from beamcrawl.core.archive.warc_records import new_record_id
    from beamcrawl.core.archive.warc_revisit import payload_digest
    from beamcrawl.core.net.fetcher import FetchRunner
    from beamcrawl.core.policy.robots import RobotsRules
    from beamcrawl.schemas.records import FrontierEntry, HostPlan, HostRecord
    from beamcrawl.transforms.parse import parse_fetch
    from beamcrawl.transforms.warc_io import capture_record
    from wire_shapes import ShapeServer, loopback_config, page  # noqa: E402  (tests/wire_shapes.py)

    config = loopback_config(min_delay=0.05)
    with ShapeServer() as server:
        slot = f"te.test:{server.port}"
        record = HostRecord(host=slot)
        record.robots = RobotsRules.parse("", "beamcrawl").to_dict()
        record.robots_fetched_at = time.time()
        entry = FrontierEntry(url=f"http://{slot}/te-a", fp=1, host=slot, due_ms=0)
        runner = FetchRunner(config)
        try:
            runner.submit(HostPlan(host=slot, shard=0, record=record, delay=0.05, fetch_robots=False, entries=[entry]))
            (result,) = [v for k, v in runner.drain(wait=True) if k == "result"]
        finally:
            runner.close()
    served = page("/te-a", "te.test")
    assert result.outcome == "fetched" and result.status == 200
    assert result.body == served
    assert result.raw_body == served  # the entity: gzip and chunks undone, no content coding
    parsed = parse_fetch(result, "beamcrawl")
    assert [link.url for link in parsed.links] == [f"http://{slot}/te-a-next"]
    member = capture_record(parsed, "response", new_record_id()).member
    records = [
        (rec.http_headers.get_header("X-Crawler-Transfer-Encoding"), rec.http_headers.get_header("Transfer-Encoding"),
         rec.rec_headers.get_header("WARC-Payload-Digest"), rec.content_stream().read())
        for rec in ArchiveIterator(io.BytesIO(member), check_digests="raise")
    ]  # fmt: skip
    assert records == [("gzip, chunked", None, payload_digest(served), served)]


# Transfer codings other than chunked (applied first to last, chunked after them), where the
# list is cut into field lines, and how the name is written.
_transfer_stacks = st.lists(st.sampled_from(sorted(set(_CODERS) - {"identity"})), min_size=1, max_size=3).flatmap(
    lambda codings: st.tuples(
        st.just(codings),
        st.lists(st.booleans(), min_size=len(codings), max_size=len(codings)),
        st.sampled_from(["Transfer-Encoding", "transfer-encoding", "TRANSFER-ENCODING"]),
    )
)


def _transfer_coded_page(
    transfer: tuple[list[str], list[bool], str], content: list[str], body: bytes, sizes: list[int]
) -> tuple[bytes, bytes]:
    """A 200 whose ``body`` has the content codings ``content`` applied (the entity), then the
    transfer codings of ``transfer`` and chunked, in chunks of the ``sizes`` given (cycled);
    and the entity."""
    entity = body
    for coding in content:
        entity = _CODERS[coding](entity)
    coded = entity
    codings, cuts, name = transfer
    for coding in codings:
        coded = _CODERS[coding](coded)
    from wire_shapes import field_lines  # noqa: E402  (tests/wire_shapes.py)

    lines = field_lines([*codings, "chunked"], cuts)
    head = b"".join(b"%s: %s\r\n" % (name.encode(), ", ".join(part).encode()) for part in lines)
    if content:
        head += b"Content-Encoding: %s\r\n" % ", ".join(content).encode()
    chunks, at, i = [], 0, 0
    while at < len(coded):
        size = max(1, sizes[i % len(sizes)])
        chunks.append(b"%x\r\n%s\r\n" % (size if at + size <= len(coded) else len(coded) - at, coded[at : at + size]))
        at, i = at + size, i + 1
    framed = b"".join(chunks) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + head + b"\r\n" + framed, entity


@settings(max_examples=15, deadline=None)
@given(
    pages=st.lists(
        st.tuples(
            _transfer_stacks,
            st.lists(st.sampled_from(["gzip", "deflate"]), max_size=1),
            st.binary(max_size=300),
            st.lists(st.integers(1, 700), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_warc_record_holds_the_entity_its_head_describes(pages) -> None:
    """Whatever transfer codings a page comes in, over one field line or several, its WARC
    record holds the entity (RFC 9112 §6: the transfer codings undone, the content codings
    kept, as its Content-Encoding says), its payload digest is that entity's, and warcio
    reads it back with both digests right; parse gets the page itself."""
    from warcio.archiveiterator import ArchiveIterator

    from beamcrawl.core.archive.warc_records import new_record_id
    from beamcrawl.core.archive.warc_revisit import payload_digest
    from beamcrawl.transforms.parse import parse_fetch
    from beamcrawl.transforms.warc_io import capture_record

    body = b"<html><body><a href='/next'>next</a> "
    made = {
        f"te{i}.test": _transfer_coded_page(transfer, content, body + tail, sizes)
        for i, (transfer, content, tail, sizes) in enumerate(pages)
    }
    _, results = _robots_round({host: answer for host, (answer, _) in made.items()}, robots_known=True)
    for i, (host, (_, entity)) in enumerate(made.items()):
        result = _result_of(results, host)
        assert result.outcome == "fetched", result.error
        assert result.body == body + pages[i][2]
        assert result.raw_body == entity
        member = capture_record(parse_fetch(result, "beamcrawl"), "response", new_record_id()).member
        records = [
            (rec.rec_headers.get_header("WARC-Payload-Digest"), rec.http_headers.get_header("Transfer-Encoding"),
             rec.raw_stream.read())
            for rec in ArchiveIterator(io.BytesIO(member), check_digests="raise")
        ]  # fmt: skip
        assert records == [(payload_digest(entity), None, entity)]


@settings(max_examples=15, deadline=None)
@given(
    cuts=st.lists(
        st.tuples(st.sampled_from(sorted(set(_CODERS) - {"identity"})), st.binary(min_size=1, max_size=400), st.data()),
        min_size=1,
        max_size=4,
    )
)
def test_a_transfer_coded_stream_that_ends_before_its_end_is_one_fetch_error(cuts) -> None:
    """A body whose transfer-coded stream stops short (the chunks end, the gzip, deflate or
    brotli stream does not): decoders give what they decoded so far without an error, and
    the record held that as the whole entity, no WARC-Truncated (a brotli stream of three
    bytes decoded to nothing: an empty page archived). The transfer was not cut, the coding
    was: no entity to record, one fetch error."""
    from beamcrawl.core.net.fetcher import error_kind

    answers = {}
    for i, (coding, body, data) in enumerate(cuts):
        coded = _CODERS[coding](body)
        short = coded[: data.draw(st.integers(1, len(coded) - 1), label="kept")]
        answers[f"short{i}.test"] = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: %s, chunked\r\n\r\n" % coding.encode()
            + b"%x\r\n%s\r\n0\r\n\r\n" % (len(short), short)
        )
    _, results = _robots_round(answers, robots_known=True)
    for host in answers:
        result = _result_of(results, host)
        assert result.outcome == "error" and error_kind(result.error) == "bad_response", (result.raw_body, result.error)


@pytest.mark.parametrize(
    "coding",
    [
        b"gzip, chunked",
        b"deflate, chunked",
        b"x-unknown, chunked",
        b"zstd, chunked",
        b"gzip\r\nTransfer-Encoding: chunked",
    ],
)
def test_a_transfer_coding_that_cannot_be_undone_is_one_fetch_error(coding) -> None:
    """A body under a transfer coding that cannot be undone (not supported, or no stream of
    it) has no entity to record or parse: one fetch error, a bad response, not a page whose
    record holds the coded bytes under a head that names no coding."""
    from beamcrawl.core.net.fetcher import error_kind

    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: " + coding
    answer += b"\r\n\r\n1d\r\n<html>not coded at all</html>\r\n0\r\n\r\n"
    _, results = _robots_round({"bad-te.test": answer}, robots_known=True)
    (result,) = results
    assert result.outcome == "error" and "transfer coding" in result.error, result
    assert error_kind(result.error) == "bad_response"
    assert result.raw_body == b"" and result.body == b""


@pytest.mark.parametrize(
    ("rules", "asked"), [(b"Disallow: /x\n", ["/robots.txt", "/p"]), (b"Disallow: /\n", ["/robots.txt"])]
)
def test_a_robots_txt_under_transfer_and_content_codings_is_read(rules, asked) -> None:
    """A robots.txt gzipped as its content and again in transfer is read and obeyed: its
    transfer coding undone once, by the fetch, its content coding then."""
    answer, _ = _transfer_coded_page(
        (["gzip"], [False], "Transfer-Encoding"), ["gzip"], b"User-agent: *\n" + rules, [7]
    )
    paths, results = _robots_round({"rules-te.test": answer})
    assert paths["rules-te.test"] == asked
    (robots,) = [r for r in results if r.entry.source == "robots"]
    assert robots.outcome == "fetched" and robots.body == b"User-agent: *\n" + rules


# --- Content-Encoding over several field lines ------------------------------------------------

# A stack of codings (applied first to last), and where its list is cut into field lines.
_stacks = st.lists(st.sampled_from(sorted(_CODERS)), min_size=1, max_size=3).flatmap(
    lambda codings: st.tuples(
        st.just(codings),
        st.lists(st.booleans(), min_size=len(codings) - 1, max_size=len(codings) - 1),
        st.sampled_from(["Content-Encoding", "content-encoding", "CONTENT-ENCODING"]),
    )
)


def _encoded_page(codings: list[str], cuts: list[bool], name: str, body: bytes) -> bytes:
    """A 200 whose body is ``body`` with ``codings`` applied in turn, the list sent over
    field lines cut where ``cuts`` says (RFC 9110 §5.3: the same as one comma-joined line)."""
    for coding in codings:
        body = _CODERS[coding](body)
    from wire_shapes import field_lines  # noqa: E402  (tests/wire_shapes.py)

    lines = field_lines(codings, cuts)
    head = b"".join(b"%s: %s\r\n" % (name.encode(), ", ".join(part).encode()) for part in lines)
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + head + b"Content-Length: %d\r\n\r\n" % len(body) + body


@settings(max_examples=20, deadline=None)
@given(stacks=st.lists(_stacks, min_size=1, max_size=4))
@example(stacks=[(["gzip", "deflate"], [True], "Content-Encoding")])
def test_content_codings_over_several_field_lines_are_all_undone(stacks) -> None:
    """Content-Encoding sent over several field lines is one list (RFC 9110 §5.3). Only the
    first line was read: ``Content-Encoding: gzip`` then ``Content-Encoding: deflate`` was
    undone as gzip alone, which fails on the deflate stream, so parse (and the robots.txt
    reader, for a robots.txt) got the compressed bytes. The WARC keeps them as sent."""
    body = b"<html><body><a href='/next'>next</a> " + b"text " * 40 + b"</body></html>"
    answers = {f"ce{i}.test": _encoded_page(*stack, body) for i, stack in enumerate(stacks)}
    _, results = _robots_round(answers, robots_known=True)
    for host, answer in answers.items():
        result = _result_of(results, host)
        assert result.outcome == "fetched", result.error
        assert result.raw_body == answer.split(b"\r\n\r\n", 1)[1]  # the WARC's payload: as sent
        assert result.body == body, (host, result.response_headers)


def test_a_robots_txt_whose_codings_span_two_field_lines_is_obeyed() -> None:
    """A robots.txt sent ``Content-Encoding: gzip`` then ``Content-Encoding: deflate`` was
    read as its compressed bytes, which hold no rule: ``Disallow: /`` went unread and the
    page was requested. It is decoded whole and obeyed (RFC 9309 §2.2.2)."""
    from beamcrawl.core.net.fetcher import FetchRunner
    from beamcrawl.schemas.records import FrontierEntry, HostPlan, HostRecord
    from wire_shapes import ShapeServer, loopback_config, response  # noqa: E402  (tests/wire_shapes.py)

    config = loopback_config()
    robots = _encoded_page(["gzip", "deflate"], [True], "Content-Encoding", b"User-agent: *\nDisallow: /\n")

    async def site(served, writer):
        served.body = robots if served.path == "/robots.txt" else response(b"<html>page</html>")
        writer.write(served.body)
        await writer.drain()
        return True

    with ShapeServer() as server:
        server.sites["rules.test"] = site
        slot = f"rules.test:{server.port}"
        entry = FrontierEntry(url=f"http://{slot}/p", fp=1, host=slot, due_ms=0)
        plan = HostPlan(
            host=slot, shard=0, record=HostRecord(host=slot), delay=0.02, fetch_robots=True, entries=[entry]
        )
        runner = FetchRunner(config)
        try:
            runner.submit(plan)
            results = [r for k, r in runner.drain(wait=True) if k == "result"]
        finally:
            runner.close()
        paths = server.paths("rules.test")
    assert paths == ["/robots.txt"]
    assert [r.outcome for r in results if r.entry.source != "robots"] == ["robots_disallowed"]


def _text_file(raw: bytes) -> bool:
    """UTF-8 without a control character but whitespace: a text file, not a compressed one."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(b >= 0x20 and b != 0x7F or b in b"\t\n\x0c\r" for b in raw)


def _robots_round(
    answers: dict[str, Any], page: str = "/p", robots_known: bool = False, **settings_: Any
) -> tuple[dict[str, list[str]], list]:
    """Each host of ``answers`` serves its robots.txt answer (the bytes, or a site function
    that writes them, as ``ShapeServer`` takes one), and a page at any other path; one plan
    each asks for ``page``, robots.txt fetched first. With ``robots_known`` the hosts' rules
    are known already (none) and the answer is served at every path. The paths each host was
    asked for, and every result."""
    from beamcrawl.core.net.fetcher import FetchRunner
    from beamcrawl.core.policy.robots import RobotsRules
    from beamcrawl.schemas.records import FrontierEntry, HostPlan, HostRecord
    from wire_shapes import ShapeServer, loopback_config, response  # noqa: E402  (tests/wire_shapes.py)

    config = loopback_config(**settings_)
    with ShapeServer() as server:
        for host, answer in answers.items():

            async def site(served, writer, answer=answer):
                if served.path == "/robots.txt" and callable(answer):
                    return await answer(served, writer)
                mine = served.path == "/robots.txt" or robots_known
                served.body = answer if mine else response(b"<html>page</html>")
                writer.write(served.body)
                await writer.drain()
                return True

            server.sites[host] = site
        runner = FetchRunner(config)
        try:
            for host in answers:
                slot = f"{host}:{server.port}"
                record = HostRecord(host=slot)
                if robots_known:
                    record.robots = RobotsRules.parse("", "beamcrawl").to_dict()
                    record.robots_fetched_at = time.time()
                entry = FrontierEntry(url=f"http://{slot}{page}", fp=1, host=slot, due_ms=0)
                runner.submit(
                    HostPlan(
                        host=slot, shard=0, record=record, delay=0.02, fetch_robots=not robots_known, entries=[entry]
                    )
                )
            results = [r for k, r in runner.drain(wait=True) if k == "result"]
        finally:
            runner.close()
        paths = {host: server.paths(host) for host in answers}
        deadline = time.monotonic() + 5
        while any(not r.end for r in server.requests) and time.monotonic() < deadline:
            time.sleep(0.05)  # a site that drips ends before the server stops
    return paths, results


def _result_of(results: list, host: str, robots: bool = False):
    """The one result of ``host``'s robots.txt (``robots``) or of its page."""
    (found,) = [r for r in results if (r.entry.source == "robots") == robots and f"//{host}:" in r.url]
    return found


@settings(max_examples=15, deadline=None)
@given(
    robots=st.lists(
        st.tuples(_stacks, st.sampled_from([None, "zstd", "compress", "x-unknown"]), st.integers(0, 200)),
        min_size=1,
        max_size=4,
    )
)
@example(robots=[((["gzip"], [], "Content-Encoding"), "zstd", 0)])
@example(robots=[((["gzip"], [], "Content-Encoding"), None, 12)])
@example(robots=[((["identity"], [], "Content-Encoding"), "x-unknown", 0)])
def test_a_robots_txt_the_crawler_cannot_decode_allows_nothing(robots) -> None:
    """``Disallow: /`` in a robots.txt sent in codings that cannot be undone (one not
    supported, or a stream corrupted at a generated byte) was read as the bytes sent, which
    hold no rule: the page was requested. Now such a file counts as unreachable and the URL
    waits; a file that decodes (a corruption no check caught: brotli has no checksum) is
    obeyed as it decodes, and so is a text file under a coding label it does not need."""
    from beamcrawl.core.policy.robots import RobotsRules

    answers, readable = {}, {}
    for i, ((codings, cuts, name), unknown, flip) in enumerate(robots):
        answer = _encoded_page(codings, cuts, name, b"User-agent: *\nDisallow: /\n")
        head, body = answer.split(b"\r\n\r\n", 1)
        named = ", ".join(codings)
        if unknown is not None:  # a further coding named, not applied: the crawler cannot undo it
            head += b"\r\nContent-Encoding: " + unknown.encode()
            named += f", {unknown}"
        elif any(c != "identity" for c in codings) and body:  # a corrupt stream
            at = flip % len(body)
            body = body[:at] + bytes([body[at] ^ 0x5A]) + body[at + 1 :]
        host = f"rules{i}.test"
        answers[host] = head + b"\r\n\r\n" + body
        decoded = decode_content(body, named, MiB)
        text = decoded.body if not decoded.error else body if _text_file(body) else None
        readable[host] = None if text is None else RobotsRules.parse(text, "beamcrawl").allowed("/p")
    paths, results = _robots_round(answers)
    for host in answers:
        page = _result_of(results, host)
        if readable[host] is None:  # not decodable: unreachable, nothing but robots.txt asked for
            assert paths[host] == ["/robots.txt"], host
            assert (page.outcome, page.error) == ("deferred", "robots.txt unavailable"), host
        else:
            assert page.outcome == ("fetched" if readable[host] else "robots_disallowed"), host


_RULES = b"User-agent: *\n# " + b"x" * 60 + b"\nDisallow: /\n"


@settings(max_examples=6, deadline=None)
@given(cuts=st.lists(st.integers(1, len(_RULES) - 1), min_size=1, max_size=3))
@example(cuts=[20])
def test_a_robots_txt_cut_short_by_a_slow_transfer_allows_nothing(cuts) -> None:
    """A robots.txt whose server stalls before the end (here before ``Disallow: /``) is cut
    (WARC-Truncated: time). It was read up to the cut: the rule still to come went unread,
    and the page was requested. It counts as unreachable now, wherever the cut falls."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(_RULES)

    def drip(cut: int):
        async def robots(served, writer):
            served.body = _RULES
            writer.write(head + _RULES[:cut])
            await writer.drain()
            await asyncio.sleep(0.8)  # past the stall timeout: the rest comes too late
            writer.write(_RULES[cut:])
            await writer.drain()
            return False

        return robots

    hosts = {f"drip{i}.test": drip(cut) for i, cut in enumerate(cuts)}
    paths, results = _robots_round(hosts, stall_timeout=0.3)
    for host in hosts:
        assert paths[host] == ["/robots.txt"], host
        assert _result_of(results, host, robots=True).truncated == "time"  # the cut happened, and is archived as such
        page = _result_of(results, host)
        assert (page.outcome, page.error) == ("deferred", "robots.txt unavailable")


@settings(max_examples=4, deadline=None)
@given(caps=st.lists(st.integers(1, 40_000), min_size=1, max_size=4))
@example(caps=[30])
def test_a_robots_txt_is_read_to_500_kib_whatever_the_body_caps(caps) -> None:
    """RFC 9309 §2.5: a crawler parses at least 500 KiB of a robots.txt. With the body caps
    set lower (``--max-body-bytes``, ``--max-decoded-bytes``), the file was cut there like
    any page, and a ``Disallow`` past the cut went unread: the page it forbids was requested."""
    rules = b"User-agent: *\n" + b"# filler\n" * 4_000 + b"Disallow: /p\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(rules)
    hosts = {f"capped{i}.test": cap for i, cap in enumerate(caps)}
    for host, cap in hosts.items():
        paths, _ = _robots_round({host: head + rules}, "/prx", max_body_bytes=cap, max_decoded_bytes=cap)
        assert paths[host] == ["/robots.txt"], (cap, paths)


def test_a_robots_txt_cut_at_a_cap_is_read_in_whole_lines() -> None:
    """A gzipped robots.txt of bytes that do not compress, cut at the transfer cap (500 KiB and
    a byte, with the caps set lower), decodes to less than 500 KiB that ends inside a line.
    That half line was read as a rule: ``Allow: /private-archive/`` cut to ``Allow: /pr``
    allowed ``/prx``, which ``Disallow: /p`` forbids. Only whole lines are read."""
    import random

    from beamcrawl.core.policy.robots import MAX_ROBOTS_BYTES

    cap = MAX_ROBOTS_BYTES + 1  # what a robots.txt is read to with the caps below it
    start = b"User-agent: *\nDisallow: /p\n# "
    noise = bytes(random.Random(7).choice(range(32, 256)) for _ in range(cap))  # no line ends

    def gz(body: bytes) -> bytes:
        return gzip.compress(body, compresslevel=0, mtime=0)  # stored: no smaller than the text

    # Where the transfer cap falls in the decoded text does not depend on what follows it
    # (stored blocks): place the Allow line so that the cut leaves "Allow: /pr".
    probe = start + noise + b"\n" + b"x" * 4096
    seen = len(zlib.decompressobj(31).decompress(gz(probe)[:cap]))
    filler = seen - len(start) - 1 - len(b"Allow: /pr")
    rules = start + noise[:filler] + b"\nAllow: /private-archive/\n"
    body = gz(rules)
    assert len(zlib.decompressobj(31).decompress(body[:cap])) == seen  # the cut is where it was probed
    assert zlib.decompressobj(31).decompress(body[:cap]).endswith(b"\nAllow: /pr")
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(
        body
    )
    paths, results = _robots_round(
        {"halfline.test": head + body}, "/prx", max_body_bytes=1_000, max_decoded_bytes=1_000
    )
    assert _result_of(results, "halfline.test", robots=True).truncated == "length"
    assert paths["halfline.test"] == ["/robots.txt"], paths


@pytest.mark.parametrize("status", [b"204 No Content", b"304 Not Modified"])
@pytest.mark.parametrize("coding", [b"chunked, gzip", b"chunked,", b"zstd", b"gzip"])
def test_an_answer_without_content_is_read_whatever_its_transfer_encoding(status, coding) -> None:
    """A 204 or a 304 has no content (RFC 9112 §6.3), so its Transfer-Encoding frames
    nothing: the answer is what it says, not a transfer coding that cannot be undone."""
    answer = b"HTTP/1.1 " + status + b"\r\nTransfer-Encoding: " + coding + b"\r\n\r\n"
    _, results = _robots_round({"empty-te.test": answer}, robots_known=True)
    (result,) = results
    assert result.outcome == "fetched" and result.status == int(status[:3]), result.error
    assert result.raw_body == result.body == b""
