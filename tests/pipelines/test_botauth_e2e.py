"""Web Bot Auth end to end: a real crawl with ``--signing-key``, every request verified from
the server's side.

simweb records the Host, Signature-Agent, Signature-Input and Signature of each request it
receives; each is verified by an independent RFC 9421 implementation (the
``http-message-signatures`` library) with the public keys of the served directory,
as a site holding the published directory would, at the time the request arrived. The crawl
is given a key folder after a rotation (``keys rotate``); the directory is the one ``keys
serve`` serves, its own signatures checked first.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from types import SimpleNamespace

import http_message_signatures as hms
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from beamcrawl.simweb.testing import running_simweb

AGENT = "https://crawler.example/beamcrawl"


class _VerifierAt(hms.HTTPMessageVerifier):
    """The library's verifier, judging created/expires at the moment the request arrived."""

    def __init__(self, arrived: float, **kwargs):
        super().__init__(**kwargs)
        self.arrived = arrived

    def validate_created_and_expires(self, sig_input, max_age=None):
        created, expires = sig_input.params["created"], sig_input.params["expires"]
        skew = self.max_clock_skew.total_seconds()
        if not created - skew <= self.arrived <= expires + skew:
            raise hms.InvalidSignature(f"not valid when received ({created}..{expires} vs {self.arrived})")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", *args], capture_output=True, text=True, timeout=600
    )


def _served_directory(keys) -> tuple[dict, dict]:
    """The directory as a site gets it from ``beamcrawl keys serve``: fetched over HTTP, each
    of its signatures checked with the keys it holds. Returns the keys and the raw JWKS."""
    import urllib.request

    from beamcrawl.core.net.botauth import DIRECTORY_PATH, DIRECTORY_TAG

    server = subprocess.Popen(
        [sys.executable, "-m", "beamcrawl.cli.main", "keys", "serve", str(keys), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = server.stdout.readline().split()[-1]
        assert url.endswith(DIRECTORY_PATH), server.stderr.read()
        with urllib.request.urlopen(url, timeout=30) as response:
            status, headers, body = response.status, dict(response.headers), response.read()
    finally:
        server.terminate()
        server.wait(30)
    jwks = json.loads(body)
    published = {
        k["kid"]: Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(k["x"] + "==")) for k in jwks["keys"]
    }
    verifier = hms.HTTPMessageVerifier(
        signature_algorithm=hms.algorithms.ED25519,
        key_resolver=hms.MappingKeyResolver(public_keys=published, private_keys={}),
    )
    response = SimpleNamespace(
        status_code=status, headers=headers, request=SimpleNamespace(method="GET", url=url, headers={})
    )
    results = verifier.verify(
        response, expect_tag=DIRECTORY_TAG, require_components=('"@authority";req', "content-digest"), body=body
    )
    assert {r.parameters["keyid"] for r in results} == set(published)
    return published, jwks


@pytest.fixture(scope="module")
def signed_crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("botauth")
    keys = work / "keys"
    assert _cli("keys", "generate", "--out", str(keys)).returncode == 0
    # The crawl is given the key folder after a rotation: it must sign with the new key.
    rotated = _cli("keys", "rotate", str(keys), "--activate-after", "0")
    assert rotated.returncode == 0, rotated.stderr
    newest = rotated.stdout.split()[2]
    directory = _cli("keys", "directory", str(keys))
    assert directory.returncode == 0, directory.stderr
    published, served = _served_directory(keys)
    assert served == json.loads(directory.stdout) and newest in published and len(published) == 2
    out = work / "out"
    with running_simweb(str(work), hosts=8, seed=3, pages_per_host=12) as web:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        proc = _cli(
            "crawl", "--seeds", str(seeds), "--out", str(out), "--rounds", "2",
            "--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.2",
            "--round-window", "3", "--signing-key", str(keys),
            "--signature-agent", AGENT, "--runner", "FnApiRunner",
        )  # fmt: skip
        requests = web.requests()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return requests, published, out, newest


def _verify(record: dict, keys: dict, host: str | None = None, agent: str | None = None) -> list:
    sig = dict(record["sig"])
    if agent is not None:
        sig["Signature-Agent"] = agent
    headers = {k: v for k, v in sig.items() if k != "Host"}
    verifier = _VerifierAt(
        record["start"], signature_algorithm=hms.algorithms.ED25519,
        key_resolver=hms.MappingKeyResolver(public_keys=keys, private_keys={}),
    )  # fmt: skip
    message = SimpleNamespace(
        method=record["method"], url=f"http://{host or sig['Host']}{record['path']}", headers=headers
    )
    return verifier.verify(message, expect_tag="web-bot-auth", require_components=("@authority", "signature-agent"))


def test_every_request_is_signed_and_verifies(signed_crawl):
    requests, keys, _, newest = signed_crawl
    assert len(requests) > 20
    unsigned = [r["path"] for r in requests if "sig" not in r]
    assert not unsigned, unsigned[:5]
    robots = 0
    for record in requests:
        (result,) = _verify(record, keys)
        assert result.parameters["keyid"] == newest  # the folder's newest key, not its first
        assert record["sig"]["Signature-Agent"] == f'"{AGENT}"'
        robots += record["path"] == "/robots.txt"
    assert robots >= 8  # robots.txt is signed like everything else


def test_signatures_are_per_request(signed_crawl):
    requests, _, _, _ = signed_crawl
    bases = set()
    for r in requests:
        params = r["sig"]["Signature-Input"]
        created = int(params.split(";created=")[1].split(";")[0])
        assert abs(created - r["start"]) < 5  # signed when sent, not once per round
        bases.add((r["sig"]["Host"], created))
    # One signature per signature base: requests to one host in one second share it (Ed25519
    # is deterministic), every other pair differs.
    assert len({r["sig"]["Signature"] for r in requests}) == len(bases) > 8
    assert any(r["path"] not in ("/", "/robots.txt") for r in requests)


@pytest.mark.parametrize("tamper", ["host", "agent"])
def test_tampered_requests_fail(signed_crawl, tamper):
    requests, keys, _, _ = signed_crawl
    for record in requests[:10]:
        if tamper == "host":
            other = "evil.example:" + record["sig"]["Host"].rpartition(":")[2]
            with pytest.raises(hms.InvalidSignature):
                _verify(record, keys, host=other)
        else:
            with pytest.raises(hms.InvalidSignature):
                _verify(record, keys, agent='"https://evil.example/"')


def test_warc_request_records_carry_the_signature(signed_crawl):
    from warcio.archiveiterator import ArchiveIterator

    _, _, out, _ = signed_crawl
    seen = 0
    for path in out.rglob("*.warc.gz"):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "request":
                    headers = record.http_headers
                    assert headers.get_header("Signature-Agent") == f'"{AGENT}"'
                    assert headers.get_header("Signature").startswith("sig1=:")
                    assert 'tag="web-bot-auth"' in headers.get_header("Signature-Input")
                    seen += 1
    assert seen > 0


def test_a_late_replay_fails(signed_crawl):
    requests, keys, _, _ = signed_crawl
    record = dict(requests[0], start=requests[0]["start"] + 3600)
    with pytest.raises(hms.InvalidSignature, match="not valid when received"):
        _verify(record, keys)


def test_bad_signing_options_are_one_line(tmp_path):
    missing = _cli("crawl", "--out", str(tmp_path / "o"), "--signing-key", str(tmp_path / "nope.pem"),
                   "--signature-agent", AGENT)  # fmt: skip
    assert missing.returncode == 2
    assert "signing key not found" in missing.stderr and missing.stderr.count("\n") == 1
    alone = _cli("crawl", "--out", str(tmp_path / "o"), "--signature-agent", AGENT)
    assert alone.returncode == 2 and "go together" in alone.stderr
    assert not (tmp_path / "o").exists()
