"""Web Bot Auth signing (core/net/botauth.py), checked against published vectors and an
independent verifier (the ``http-message-signatures`` library), and the ``keys`` command."""

from __future__ import annotations

import base64
import json
import os
import stat
from types import SimpleNamespace

import http_message_signatures as hms
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net import botauth
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.cli import keys as keys_cmd

# RFC 8037 Appendix A.1 (the Ed25519 key) and A.3 (its RFC 7638 thumbprint).
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
AGENT = "https://crawler.example/bot"


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def library_verify(headers, url: str, public_key: Ed25519PublicKey, keyid: str):
    """The http-message-signatures library's verifier on a request for ``url``."""
    verifier = hms.HTTPMessageVerifier(
        signature_algorithm=hms.algorithms.ED25519,
        key_resolver=hms.MappingKeyResolver(public_keys={keyid: public_key}, private_keys={}),
    )
    message = SimpleNamespace(method="GET", url=url, headers=dict(headers))
    return verifier.verify(message, expect_tag="web-bot-auth", require_components=("@authority", "signature-agent"))


def test_thumbprint_matches_rfc8037():
    key = Ed25519PrivateKey.from_private_bytes(_unb64url(RFC8037_D))
    assert botauth.jwk(key.public_key())["x"] == RFC8037_X
    assert botauth.thumbprint(key.public_key()) == RFC8037_THUMBPRINT
    assert botauth.thumbprint(Ed25519PublicKey.from_public_bytes(_unb64url(RFC8037_X))) == RFC8037_THUMBPRINT


def test_headers_have_the_draft_shape():
    key = Ed25519PrivateKey.from_private_bytes(_unb64url(RFC8037_D))
    signer = botauth.Signer.create(_pem(key), AGENT)
    headers = dict(signer.headers("http://Example.COM:80/a?b=1", now=1735689600))
    assert headers["Signature-Agent"] == f'"{AGENT}"'
    assert headers["Signature-Input"] == (
        'sig1=("@authority" "signature-agent");created=1735689600;expires=1735689660;'
        f'keyid="{RFC8037_THUMBPRINT}";alg="ed25519";tag="web-bot-auth"'
    )
    assert headers["Signature"].startswith("sig1=:") and headers["Signature"].endswith(":")
    # Ed25519 is deterministic: the signature is that of the base this module documents.
    base = (
        '"@authority": example.com\n'
        f'"signature-agent": "{AGENT}"\n'
        '"@signature-params": ("@authority" "signature-agent");created=1735689600;expires=1735689660;'
        f'keyid="{RFC8037_THUMBPRINT}";alg="ed25519";tag="web-bot-auth"'
    ).encode()
    key.public_key().verify(base64.b64decode(headers["Signature"][6:-1]), base)


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://example.com/", "example.com"),
        ("http://EXAMPLE.com:80/x", "example.com"),
        ("https://example.com:443/", "example.com"),
        ("https://example.com:80/", "example.com:80"),
        ("http://example.com:8080/", "example.com:8080"),
        ("http://user:pw@example.com/", "example.com"),
        ("http://[::1]:8080/", "[::1]:8080"),
        ("http://127.0.0.1/robots.txt", "127.0.0.1"),
    ],
)
def test_authority(url, expected):
    assert botauth.authority(url) == expected


_hosts = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,10}){0,3}", fullmatch=True)
_agents = st.from_regex(r"https://[a-z]{1,12}\.example(/[!#-\[\]-~]{0,30})?", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    host=_hosts,
    port=st.one_of(st.none(), st.integers(1, 65535)),
    scheme=st.sampled_from(["http", "https"]),
    agent=_agents,
    path=st.from_regex(r"/[a-zA-Z0-9._~/-]{0,30}", fullmatch=True),
)
def test_independent_verifier_accepts_and_tampering_fails(host, port, scheme, agent, path):
    key = Ed25519PrivateKey.generate()
    signer = botauth.Signer.create(_pem(key), agent)
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}{path}"
    headers = signer.headers(url)
    (result,) = library_verify(headers, url, key.public_key(), signer.keyid)
    assert result.parameters["tag"] == "web-bot-auth" and result.parameters["keyid"] == signer.keyid
    assert result.parameters["expires"] - result.parameters["created"] == botauth.VALIDITY
    # Our own verifier agrees, on the authority the request arrived for.
    assert (
        botauth.verify(dict(headers), botauth.authority(url), {signer.keyid: key.public_key()})["keyid"] == signer.keyid
    )
    # Another site, or another agent, and the signature no longer holds.
    with pytest.raises(hms.InvalidSignature):
        library_verify(headers, f"{scheme}://x{host}{path}", key.public_key(), signer.keyid)
    forged = [(k, '"https://evil.example/"' if k == "Signature-Agent" else v) for k, v in headers]
    with pytest.raises(hms.InvalidSignature):
        library_verify(forged, url, key.public_key(), signer.keyid)
    with pytest.raises(ValueError):
        botauth.verify(dict(forged), botauth.authority(url), {signer.keyid: key.public_key()})


def test_verify_refuses_expired_and_unknown_keys():
    key = Ed25519PrivateKey.generate()
    signer = botauth.Signer.create(_pem(key), AGENT)
    headers = dict(signer.headers("http://example.com/", now=1000))
    keys = {signer.keyid: key.public_key()}
    assert botauth.verify(headers, "example.com", keys, now=1030)["created"] == 1000
    with pytest.raises(ValueError, match="not valid now"):
        botauth.verify(headers, "example.com", keys, now=1000 + botauth.VALIDITY + 1)
    with pytest.raises(ValueError, match="unknown keyid"):
        botauth.verify(headers, "example.com", {"other": key.public_key()}, now=1030)


@pytest.mark.parametrize(
    "agent",
    [
        "ftp://x.example/",
        "crawler.example",
        'https://x.example/"q',
        "https://x.example/a b",
        "https://x.example/\\",
        "https://\u00e9.example/",
    ],
)
def test_bad_agents_are_refused_in_one_line(agent):
    with pytest.raises(ValueError, match="--signature-agent") as info:
        CrawlConfig(out="/tmp/x", store="sqlite:///x", signing_key="/k.pem", signature_agent=agent)
    assert "\n" not in str(info.value)


def test_key_and_agent_go_together():
    with pytest.raises(ValueError, match="go together"):
        CrawlConfig(out="/tmp/x", store="sqlite:///x", signing_key="/k.pem")
    with pytest.raises(ValueError, match="go together"):
        CrawlConfig(out="/tmp/x", store="sqlite:///x", signature_agent=AGENT)


def test_bad_keys_are_one_line(tmp_path):
    from cryptography.hazmat.primitives.asymmetric import ec

    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    encrypted = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
    )
    for pem, words in ((b"not a key", "not a PEM"), (ec_pem, "not an Ed25519"), (encrypted, "encrypted")):
        with pytest.raises(botauth.BotAuthError, match=words) as info:
            botauth.Signer.create(pem, AGENT)
        assert "\n" not in str(info.value)
    with pytest.raises(botauth.BotAuthError, match="not found"):
        botauth.read_key_file(str(tmp_path / "missing.pem"))


def test_keys_generate_and_directory(tmp_path, capsys):
    folder = tmp_path / "keys"
    assert keys_cmd.main(["generate", "--out", str(folder)]) == 0
    private = folder / botauth.PRIVATE_KEY_FILE
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    key = botauth.load_private_key(private.read_bytes())
    kid = botauth.thumbprint(key.public_key())
    assert f"keyid:       {kid}" in capsys.readouterr().out

    # Never overwritten: a second generate fails in one line and leaves the key as it was.
    before = private.read_bytes()
    assert keys_cmd.main(["generate", "--out", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("beamcrawl keys: error:") and "exists already" in err and err.count("\n") == 1
    assert private.read_bytes() == before

    assert keys_cmd.main(["directory", str(folder)]) == 0
    directory = json.loads(capsys.readouterr().out)
    (published,) = directory["keys"]  # the private and the public file hold one key
    assert published == {"kty": "OKP", "crv": "Ed25519", "x": published["x"], "kid": kid}
    public = Ed25519PublicKey.from_public_bytes(_unb64url(published["x"]))
    assert botauth.thumbprint(public) == kid

    # A retired key's public half kept beside it stays published.
    old = Ed25519PrivateKey.generate().public_key()
    (folder / "retired.pub.pem").write_bytes(
        old.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert keys_cmd.main(["directory", str(folder)]) == 0
    kids = {k["kid"] for k in json.loads(capsys.readouterr().out)["keys"]}
    assert kids == {kid, botauth.thumbprint(old)}


def test_keys_directory_errors_are_one_line(tmp_path, capsys):
    assert keys_cmd.main(["directory", str(tmp_path)]) == 1
    assert "no keys" in capsys.readouterr().err
    (tmp_path / "junk.pem").write_text("hello")
    assert keys_cmd.main(["directory", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "junk.pem" in err and err.count("\n") == 1
