"""Staged WARC files as a round's writer leaves them, and the checks a compacted folder of
them passes (tests/core/archive/test_compact.py, tests/pipelines/test_compaction_e2e.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import types
import zlib

from warcio.archiveiterator import ArchiveIterator
from warcio.checker import Checker
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from beamcrawl.core.archive import cdxj
from beamcrawl.core.runtime.outputs import RoundOutputs, part_name


def staged_warc(outputs: RoundOutputs, bodies: list[bytes], serial: list[int]) -> list[str]:
    """A staged WARC file as the writer makes one (warcinfo, then response and request
    records, each a member) and its index; returns the URLs of its responses."""
    name = part_name(".warc.gz")
    path = os.path.join(outputs.staged("warc"), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    urls = []
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.1")
        writer.write_record(writer.create_warcinfo_record(name, {"software": "test", "isPartOf": outputs.label}))
        for body in bodies:
            serial[0] += 1
            url = f"http://h{serial[0] % 7}.test/p/{serial[0]}"
            urls.append(url)
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            date = f"2026-01-{1 + serial[0] % 28:02d}T00:00:{serial[0] % 60:02d}Z"
            rec = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=http, warc_headers_dict={"WARC-Date": date}
            )
            writer.write_record(rec)
            ask = StatusAndHeaders("GET /p HTTP/1.1", [("Host", "h.test")], is_http_request=True)
            req = writer.create_warc_record(
                url, "request", payload=io.BytesIO(b""), http_headers=ask, warc_headers_dict={"WARC-Date": date}
            )
            writer.write_record(req)
    rel = f"{outputs.final_rel('warc')}/{name}"
    with open(path, "rb") as fh:
        entries = cdxj.index_warc(fh, rel)
    cdxj.write_cdxj(os.path.join(outputs.staged("cdxj"), name[: -len(".warc.gz")] + ".cdxj"), entries)
    return urls


def check_warc_folder(outputs: RoundOutputs, folder: str | None = None, cdxj_folder: str | None = None) -> list[str]:
    """Every staged WARC file passes warcio check and its index's lines each select the
    record they name; returns the URLs of every indexed record."""
    urls = []
    folder = folder or outputs.staged("warc")
    cdxj_folder = cdxj_folder or outputs.staged("cdxj")
    warcs = sorted(n for n in os.listdir(folder) if n.endswith(".warc.gz"))
    assert sorted(n[: -len(".cdxj")] for n in os.listdir(cdxj_folder) if n.endswith(".cdxj")) == [
        n[: -len(".warc.gz")] for n in warcs
    ]
    for name in warcs:
        path = os.path.join(folder, name)
        with contextlib.redirect_stdout(io.StringIO()) as said:
            assert Checker(types.SimpleNamespace(inputs=[path], verbose=False)).process_all() == 0, said.getvalue()
        with open(path, "rb") as fh:
            heads = [(r.rec_type, r.rec_headers.get_header("WARC-Filename")) for r in ArchiveIterator(fh)]
        assert heads[0] == ("warcinfo", name)  # WARC 1.1 §6.1: the file that holds it
        assert [kind for kind, _ in heads].count("warcinfo") == 1  # one, at the start
        with open(os.path.join(cdxj_folder, name[: -len(".warc.gz")] + ".cdxj"), "rb") as fh:
            lines = fh.read().splitlines()
        packed = []
        for line in lines:
            key, stamp, rest = line.split(b" ", 2)
            fields = json.loads(rest)
            packed.append((key, stamp, int(fields["offset"]), rest))
            assert fields["filename"] == f"{outputs.final_rel('warc')}/{name}"
            with open(path, "rb") as fh:
                fh.seek(int(fields["offset"]))
                record = next(iter(ArchiveIterator(fh)))
                assert record.rec_headers.get_header("WARC-Target-URI") == fields["url"]
                assert cdxj.timestamp_of(record.rec_headers.get_header("WARC-Date")) == stamp.decode()
                record.content_stream().read()
                fh.seek(int(fields["offset"]))
                member = fh.read(int(fields["length"]))
            inflater = zlib.decompressobj(31)
            inflater.decompress(member)
            assert inflater.eof and not inflater.unused_data  # length selects the whole member
            urls.append(fields["url"])
        assert packed == sorted(packed)  # as the writer sorts them
    return urls
