"""Web Bot Auth: the crawler's signed identity (RFC 9421 HTTP Message Signatures).

A site that wants to know a request really comes from this crawler, and not from someone
copying its User-Agent, checks a signature instead of a name. With ``--signing-key FILE
--signature-agent URL`` every request the fetcher makes (robots.txt, pages, sitemaps, feeds)
carries three headers, as the Web Bot Auth drafts (draft-meunier-web-bot-auth-architecture)
describe::

    Signature-Agent: "https://crawler.example/"
    Signature-Input: sig1=("@authority" "signature-agent");created=1735689600;
                     expires=1735689660;keyid="kPrK_qmx...";alg="ed25519";tag="web-bot-auth"
    Signature: sig1=:jdq0SqOwHdyHr9+r5jw3iYZH6aNGKijYp/EstF4RQTQdi5N5YYKrD+mCT1HA1nZDsi6nJKuHxUi/5Syp3rLWBA==:

``Signature-Agent`` is a structured-field string (quoted): where the key directory is
published (``/.well-known/http-message-signatures-directory`` under it serves the JWKS that
``beamcrawl keys directory`` prints). The signature covers the request's ``@authority`` (the
host, and the port unless it is the scheme's default) and that header, so it cannot be
replayed against another site or under another agent; ``keyid`` is the RFC 7638 JWK
thumbprint of the Ed25519 public key; ``created`` and ``expires`` are taken per request, the
signature valid for :data:`VALIDITY` seconds.

Ed25519 comes from ``cryptography``; the signature base (RFC 9421 §2.5) is built here,
because the covered components are two fixed ones and building them costs less than a
message adapter per request. :func:`verify` checks a received request's headers the way a
site would, and serves the tests. Nothing here imports aiohttp, nor Beam but to read a
key file from a ``gs://`` path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "authority",
    "BotAuthError",
    "check_agent",
    "COVERED",
    "generate_keys",
    "jwk",
    "jwks",
    "LABEL",
    "load_private_key",
    "load_public_key",
    "read_key_file",
    "sf_string",
    "signature_base",
    "signature_params",
    "Signer",
    "TAG",
    "thumbprint",
    "VALIDITY",
    "verify",
]

# The signature's label in Signature-Input and Signature (one signature per request).
LABEL = "sig1"
TAG = "web-bot-auth"
ALG = "ed25519"
COVERED = ("@authority", "signature-agent")
# Seconds a signature is valid after ``created``: long enough for a slow request to arrive and
# a site's clock to be a little off, short enough that a captured header is soon worthless.
VALIDITY = 60
# File names ``beamcrawl keys generate`` writes into its folder.
PRIVATE_KEY_FILE = "signing-key.pem"
PUBLIC_KEY_FILE = "signing-key.pub.pem"
DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
_DEFAULT_PORTS = {"http": 80, "https": 443}
# An sf-string holds printable ASCII (RFC 8941 §3.3.3); the agent URL must need no escapes.
_AGENT_CHARS = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# The inner list of covered components, serialised (RFC 8941 §4.1.1.1).
_COMPONENTS = "(" + " ".join(f'"{c}"' for c in COVERED) + ")"


class BotAuthError(ValueError):
    """A key file or signing setting that cannot be used; the message is one line."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# --- keys ---------------------------------------------------------------------------------


def load_private_key(pem: bytes, source: str = "key") -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (PKCS#8, unencrypted).

    Raises:
        BotAuthError: Not PEM, encrypted, or not an Ed25519 key (names ``source``).
    """
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:  # cryptography's answer to an encrypted key read without a password
        raise BotAuthError(f"{source}: the key is encrypted; give an unencrypted PKCS#8 PEM key") from None
    except ValueError as exc:
        raise BotAuthError(
            f"{source}: not a PEM private key ({str(exc).splitlines()[0] if str(exc) else 'unreadable'})"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BotAuthError(f"{source}: not an Ed25519 key (make one with: beamcrawl keys generate --out DIR)")
    return key


def load_public_key(pem: bytes, source: str = "key") -> Ed25519PublicKey:
    """The Ed25519 public key of a PEM file holding a public or a private key.

    Raises:
        BotAuthError: Neither, or not Ed25519.
    """
    if b"PRIVATE KEY" in pem:
        return load_private_key(pem, source).public_key()
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError as exc:
        raise BotAuthError(
            f"{source}: not a PEM key ({str(exc).splitlines()[0] if str(exc) else 'unreadable'})"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise BotAuthError(f"{source}: not an Ed25519 key")
    return key


def read_key_file(path: str) -> bytes:
    """A key file's bytes: a local path, or any Beam filesystem URL (``gs://...``) so that
    workers of a cluster read the key where the operator keeps it, not from the job's options.

    Raises:
        BotAuthError: Missing or unreadable (one line).
    """
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # only for remote files

        try:
            with FileSystems.open(path) as fh:
                return fh.read()
        except Exception as exc:  # Beam wraps every filesystem's errors differently
            raise BotAuthError(f"cannot read signing key {path}: {str(exc).splitlines()[0]}") from None
    try:
        with open(path, "rb") as fh:
            return fh.read(64 * 1024)  # a PEM key is a few hundred bytes
    except FileNotFoundError:
        raise BotAuthError(f"signing key not found: {path}") from None
    except OSError as exc:
        raise BotAuthError(f"cannot read signing key {path}: {exc.strerror or exc}") from None


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def jwk(key: Ed25519PublicKey) -> dict[str, str]:
    """The public key as a JWK (RFC 8037 OKP), with ``kid`` = its thumbprint."""
    return {"kty": "OKP", "crv": "Ed25519", "x": _b64url(_raw_public(key)), "kid": thumbprint(key)}


def thumbprint(key: Ed25519PublicKey) -> str:
    """The RFC 7638 JWK thumbprint (SHA-256, base64url without padding): the ``keyid``.

    The hash input is the JWK's required members in lexicographic order, no whitespace.
    """
    members = {"crv": "Ed25519", "kty": "OKP", "x": _b64url(_raw_public(key))}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode("ascii")
    return _b64url(hashlib.sha256(canonical).digest())


def jwks(keys: Iterable[Ed25519PublicKey]) -> dict[str, list[dict[str, str]]]:
    """The key directory: a JWK Set of the keys, one per thumbprint, in kid order."""
    by_kid = {thumbprint(k): jwk(k) for k in keys}
    return {"keys": [by_kid[kid] for kid in sorted(by_kid)]}


def generate_keys(folder: str) -> tuple[str, str]:
    """Makes an Ed25519 key pair in ``folder``: the private key readable by its owner only.

    Returns the private and public key paths.

    Raises:
        BotAuthError: A key is there already (never overwritten), or the folder is not writable.
    """
    private_path = os.path.join(folder, PRIVATE_KEY_FILE)
    public_path = os.path.join(folder, PUBLIC_KEY_FILE)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise BotAuthError(f"{path} exists already; keys are never overwritten (choose another --out)")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        os.makedirs(folder, exist_ok=True)
        # O_EXCL: a file appearing meanwhile is not overwritten; 0600 from the first byte.
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(private_pem)
        os.chmod(private_path, 0o600)  # whatever the umask
        fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(public_pem)
    except FileExistsError as exc:
        raise BotAuthError(f"{exc.filename} exists already; keys are never overwritten") from None
    except OSError as exc:
        raise BotAuthError(f"cannot write keys into {folder}: {exc.strerror or exc}") from None
    return private_path, public_path


# --- signing ------------------------------------------------------------------------------


def authority(url: str) -> str:
    """The ``@authority`` of a request for ``url`` (RFC 9421 §2.2.3): host lower-cased, the
    port kept unless it is the scheme's default, no user info; an IPv6 literal in brackets.

    Raises:
        ValueError: No host.
    """
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise ValueError(f"no host in {url!r}")
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme.lower()):
        return f"{host}:{port}"
    return host


def sf_string(text: str) -> str:
    """``text`` as a structured-field string (RFC 8941 §3.3.3): quoted, ``"`` and ``\\`` escaped.

    Raises:
        ValueError: A character outside printable ASCII.
    """
    if any(not 0x20 <= ord(c) <= 0x7E for c in text):
        raise ValueError(f"not printable ASCII: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def signature_params(created: int, expires: int, keyid: str) -> str:
    """The ``@signature-params`` value, as it also appears in Signature-Input after the label."""
    return (
        f"{_COMPONENTS};created={created};expires={expires};keyid={sf_string(keyid)};"
        f"alg={sf_string(ALG)};tag={sf_string(TAG)}"
    )


def signature_base(authority_value: str, agent_field: str, params: str) -> bytes:
    """The signature base of RFC 9421 §2.5 for the two covered components.

    Args:
        authority_value: The request's ``@authority``.
        agent_field: The Signature-Agent field value as sent (the quoted string).
        params: The ``@signature-params`` value (:func:`signature_params`).
    """
    lines = (
        f'"@authority": {authority_value}',
        f'"signature-agent": {agent_field.strip()}',
        f'"@signature-params": {params}',
    )
    text = "\n".join(lines)
    if "\n" in authority_value or "\n" in agent_field or "\n" in params:
        raise ValueError("a signed component contains a newline")
    return text.encode("ascii")


def check_agent(url: str) -> str:
    """The ``--signature-agent`` URL, checked: absolute http(s), printable ASCII without
    quotes or backslashes (it travels as an sf-string).

    Raises:
        BotAuthError: Anything else (one line).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise BotAuthError(
            f"--signature-agent must be an https:// URL (where the key directory is published), got {url!r}"
        )
    if not _AGENT_CHARS.fullmatch(url):
        raise BotAuthError(
            f"--signature-agent must be printable ASCII without spaces, quotes or backslashes, got {url!r}"
        )
    return url


@dataclass(frozen=True)
class Signer:
    """Signs requests with one key for one signature agent.

    Attributes:
        key: The Ed25519 private key.
        agent: The Signature-Agent URL.
        keyid: The key's JWK thumbprint.
        validity: Seconds from ``created`` to ``expires``.
    """

    key: Ed25519PrivateKey
    agent: str
    keyid: str
    validity: int = VALIDITY
    _agent_field: str = field(init=False, repr=False)
    _params_tail: str = field(init=False, repr=False)
    _base_head: str = field(init=False, repr=False)

    @classmethod
    def create(cls, pem: bytes, agent: str, source: str = "signing key") -> "Signer":
        """A signer from a PEM private key and the agent URL.

        Raises:
            BotAuthError: A bad key or agent URL (one line).
        """
        key = load_private_key(pem, source)
        return cls(key, check_agent(agent), thumbprint(key.public_key()))

    def __post_init__(self) -> None:
        # The parts that are the same for every request, serialised once.
        object.__setattr__(self, "_agent_field", sf_string(self.agent))
        object.__setattr__(
            self, "_params_tail", f";keyid={sf_string(self.keyid)};alg={sf_string(ALG)};tag={sf_string(TAG)}"
        )
        object.__setattr__(self, "_base_head", f'"signature-agent": {sf_string(self.agent)}\n"@signature-params": ')

    def headers(self, url: str, now: float | None = None) -> list[tuple[str, str]]:
        """The Signature-Agent, Signature-Input and Signature headers of a request for ``url``.

        The same as :func:`signature_params` and :func:`signature_base` build, with the parts
        that never change kept from the first request (a test checks they agree).

        Raises:
            ValueError: ``url`` has no host.
        """
        created = int(time.time() if now is None else now)
        params = f"{_COMPONENTS};created={created};expires={created + self.validity}{self._params_tail}"
        base = f'"@authority": {authority(url)}\n{self._base_head}{params}'
        signature = self.key.sign(base.encode("ascii"))
        return [
            ("Signature-Agent", self._agent_field),
            ("Signature-Input", f"{LABEL}={params}"),
            ("Signature", f"{LABEL}=:{base64.b64encode(signature).decode('ascii')}:"),
        ]


# --- verifying (what a site does; used by the tests) -----------------------------------------

_INPUT = re.compile(r"^\s*(?P<label>[a-z*][a-z0-9_\-.*]*)=(?P<params>\(.*)$")
_SIG = re.compile(r"^\s*(?P<label>[a-z*][a-z0-9_\-.*]*)=:(?P<b64>[A-Za-z0-9+/=]*):\s*$")
_PARAM = re.compile(r';(?P<name>[a-z*][a-z0-9_\-.*]*)=(?P<value>"(?:[^"\\]|\\.)*"|-?\d+)')


def verify(
    headers: Mapping[str, str], authority_value: str, keys: Mapping[str, Ed25519PublicKey], now: float | None = None
) -> dict[str, object]:
    """Checks a received request's Web Bot Auth signature; returns its parameters.

    Args:
        headers: The request's headers (case-insensitive lookups are done here).
        authority_value: The ``@authority`` the request arrived for (its Host header).
        keys: Known public keys by thumbprint (the agent's key directory).
        now: The verifier's clock (epoch seconds); default now.

    Raises:
        ValueError: Missing or malformed headers, an unknown key, a wrong tag or algorithm,
            an expired or future signature, or a signature that does not match.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    for name in ("signature-input", "signature", "signature-agent"):
        if name not in lower:
            raise ValueError(f"no {name} header")
    m_in, m_sig = _INPUT.match(lower["signature-input"]), _SIG.match(lower["signature"])
    if not m_in or not m_sig or m_in["label"] != m_sig["label"]:
        raise ValueError("malformed Signature-Input or Signature")
    params = m_in["params"].strip()
    inner, _, rest = params.partition(")")
    covered = tuple(c.strip('"') for c in inner.lstrip("(").split())
    if covered != COVERED:
        raise ValueError(f"covered components {covered} are not {COVERED}")
    values: dict[str, object] = {}
    for m in _PARAM.finditer(rest):
        raw = m["value"]
        values[m["name"]] = raw[1:-1].replace('\\"', '"').replace("\\\\", "\\") if raw.startswith('"') else int(raw)
    if values.get("tag") != TAG or values.get("alg", ALG) != ALG:
        raise ValueError(f"tag must be {TAG!r} and alg {ALG!r}")
    created, expires = values.get("created"), values.get("expires")
    if not isinstance(created, int) or not isinstance(expires, int):
        raise ValueError("created and expires are required")
    clock = time.time() if now is None else now
    if not created - 5 <= clock <= expires:
        raise ValueError("signature not valid now (created/expires)")
    key = keys.get(str(values.get("keyid")))
    if key is None:
        raise ValueError(f"unknown keyid {values.get('keyid')!r}")
    base = signature_base(authority_value, lower["signature-agent"], params)
    try:
        key.verify(base64.b64decode(m_sig["b64"], validate=True), base)
    except (InvalidSignature, ValueError):
        raise ValueError("signature does not match") from None
    return values
