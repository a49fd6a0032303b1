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
``beamcrawl keys directory`` prints, or ``beamcrawl keys serve`` serves). The signature covers the request's ``@authority`` (the
host, and the port unless it is the scheme's default) and that header, so it cannot be
replayed against another site or under another agent; ``keyid`` is the RFC 7638 JWK
thumbprint of the Ed25519 public key; ``created`` and ``expires`` are taken per request, the
signature valid for :data:`VALIDITY` seconds.

Keys change: a key folder holds several, with their dates in ``keys.json`` (:class:`KeyEntry`).
:func:`rotate_keys` adds one, published at once and signing a directory max-age later, and
schedules the older ones to retire after an overlap; :func:`signing_entry` is the key a crawl
signs with now (:func:`load_signer` takes a folder or one key file), :func:`served_keys` the
keys the directory publishes. The directory's response is itself signed with each of those
keys (:func:`directory_signature_headers`, as draft-meunier-webbotauth-httpsig-directory asks:
tag ``http-message-signatures-directory``, the request's ``@authority`` and the body's
``Content-Digest`` covered), which binds the key set to the agent's authority.

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
    "content_digest",
    "COVERED",
    "directory_authority",
    "DIRECTORY_MAX_AGE",
    "DIRECTORY_MEDIA_TYPE",
    "directory_signature_headers",
    "DIRECTORY_TAG",
    "generate_keys",
    "iso_time",
    "jwk",
    "jwks",
    "KeyEntry",
    "LABEL",
    "load_private_key",
    "load_public_key",
    "load_signer",
    "parse_keys_file",
    "read_folder",
    "read_key_file",
    "retire_key",
    "rotate_keys",
    "ROTATION_OVERLAP",
    "served_keys",
    "sf_string",
    "signature_base",
    "signature_params",
    "Signer",
    "signing_entry",
    "TAG",
    "thumbprint",
    "VALIDITY",
    "verify",
    "write_keys_file",
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
# The directory draft (draft-meunier-webbotauth-httpsig-directory-00): the media type the
# directory must be served with, and the tag of the signatures on its response.
DIRECTORY_MEDIA_TYPE = "application/http-message-signatures-directory+json"
DIRECTORY_TAG = "http-message-signatures-directory"
# Seconds a verifier may cache the directory (Cache-Control: max-age): one day, as the draft's
# examples. A key is published at least this long before it signs (a verifier's cached copy
# then knows it) and a replaced key stays published for ROTATION_OVERLAP after the switch.
DIRECTORY_MAX_AGE = 86400
# Seconds a replaced key stays in the directory after its successor starts signing: 7 days,
# well past the directory's max-age and any fetch loop still holding the old key (a round).
ROTATION_OVERLAP = 7 * 86400
# The key folder's metadata (per key: thumbprint, files, created, signs from, retires at).
KEYS_FILE = "keys.json"
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
        BotAuthError: A key is there already (never overwritten), the folder is managed by
            ``keys rotate`` already, or it is not writable.
    """
    if os.path.exists(os.path.join(folder, KEYS_FILE)):
        raise BotAuthError(f"{folder} holds {KEYS_FILE}: add a key with: beamcrawl keys rotate {folder}")
    return _write_key_pair(folder, Ed25519PrivateKey.generate(), PRIVATE_KEY_FILE, PUBLIC_KEY_FILE)


def _write_key_pair(folder: str, key: Ed25519PrivateKey, private_name: str, public_name: str) -> tuple[str, str]:
    private_path = os.path.join(folder, private_name)
    public_path = os.path.join(folder, public_name)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise BotAuthError(f"{path} exists already; keys are never overwritten (choose another --out)")
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


# --- the key folder: which key signs, which are published, rotation --------------------------


@dataclass(frozen=True)
class KeyEntry:
    """One key of a key folder, as its ``keys.json`` records it.

    Attributes:
        keyid: The key's JWK thumbprint.
        private: The private key's file name in the folder; None for a public key only
            (published, never signs).
        public: The public key's file name, or None.
        created: When the key was made (epoch seconds); it is published from then on.
        signs_from: From when crawls sign with it (``keys rotate --activate-after``).
        retire_at: When it leaves the directory (None: not scheduled); from then on it is
            retired: neither published nor used.
    """

    keyid: str
    private: str | None
    public: str | None
    created: int
    signs_from: int
    retire_at: int | None = None

    def retired(self, now: float) -> bool:
        """Whether the key has left the directory at ``now``."""
        return self.retire_at is not None and self.retire_at <= now


def iso_time(epoch: float) -> str:
    """Epoch seconds as ISO 8601 UTC to the second (``2026-12-01T19:30:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _epoch(text: object, source: str) -> int:
    import calendar

    try:
        return calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        raise BotAuthError(f"{source}: not a time (YYYY-MM-DDTHH:MM:SSZ): {text!r}") from None


def _file_name(value: object, source: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or "/" in value or "\\" in value or value.startswith("."):
        raise BotAuthError(f"{source}: a key file must be a plain file name in the folder, got {value!r}")
    return value


def parse_keys_file(raw: bytes, source: str = KEYS_FILE) -> list[KeyEntry]:
    """The entries of a ``keys.json``.

    Raises:
        BotAuthError: Not the format ``keys rotate`` writes (one line, naming ``source``).
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BotAuthError(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list) or not doc["keys"]:
        raise BotAuthError(f'{source}: expected an object with a non-empty list "keys"')
    entries = []
    for item in doc["keys"]:
        if not isinstance(item, dict) or not isinstance(item.get("keyid"), str):
            raise BotAuthError(f'{source}: every key needs a "keyid"')
        private = _file_name(item.get("private"), source)
        public = _file_name(item.get("public"), source)
        if private is None and public is None:
            raise BotAuthError(f"{source}: key {item['keyid']} names no key file")
        created = _epoch(item.get("created"), source)
        retire_at = item.get("retire_at")
        entries.append(
            KeyEntry(
                item["keyid"], private, public, created,
                _epoch(item.get("signs_from", item.get("created")), source),
                None if retire_at is None else _epoch(retire_at, source),
            )
        )  # fmt: skip
    if len({e.keyid for e in entries}) != len(entries):
        raise BotAuthError(f"{source}: a keyid is listed twice")
    return entries


def _keys_file_bytes(entries: Iterable[KeyEntry]) -> bytes:
    keys = [
        {
            "keyid": e.keyid, "private": e.private, "public": e.public, "created": iso_time(e.created),
            "signs_from": iso_time(e.signs_from), "retire_at": None if e.retire_at is None else iso_time(e.retire_at),
        }
        for e in sorted(entries, key=lambda e: e.created)  # stable: a same-second rotation stays last
    ]  # fmt: skip
    return (json.dumps({"format": 1, "keys": keys}, indent=2) + "\n").encode("utf-8")


def _read_local(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 20)
    except OSError as exc:
        raise BotAuthError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_folder(folder: str) -> list[KeyEntry]:
    """The keys of a local key folder: its ``keys.json``, or, in a folder without one (made by
    ``keys generate``, or by hand), every ``*.pem`` in it, one entry per key, made and
    signing from the file's modification time.

    Raises:
        BotAuthError: Not a folder, no key, or a file that is no Ed25519 key (one line).
    """
    if not os.path.isdir(folder):
        raise BotAuthError(f"not a folder: {folder}")
    meta = os.path.join(folder, KEYS_FILE)
    if os.path.exists(meta):
        return parse_keys_file(_read_local(meta), meta)
    import glob

    private: dict[str, str] = {}
    public: dict[str, str] = {}
    made: dict[str, int] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.pem"))):
        pem = _read_local(path)
        kid = thumbprint(load_public_key(pem, path))
        mtime = int(os.stat(path).st_mtime)
        (private if b"PRIVATE KEY" in pem else public)[kid] = os.path.basename(path)
        made[kid] = min(made.get(kid, mtime), mtime)
    if not made:
        raise BotAuthError(f"no keys (*.pem) in {folder} (make one with: beamcrawl keys generate --out {folder})")
    return [
        KeyEntry(kid, private.get(kid), public.get(kid), when, when)
        for kid, when in sorted(made.items(), key=lambda kv: (kv[1], kv[0]))
    ]


def signing_entry(entries: Iterable[KeyEntry], now: float | None = None) -> KeyEntry:
    """The key crawls sign with at ``now``: the newest that is not retired, holds a private
    key and whose ``signs_from`` has come.

    Raises:
        BotAuthError: None can sign now.
    """
    clock = time.time() if now is None else now
    # In the folder's order, so that of two keys made in the same second the later one wins.
    ready = [(e.signs_from, e.created, n, e) for n, e in enumerate(entries)]
    ready = [r for r in ready if r[3].private and not r[3].retired(clock) and r[0] <= clock]
    if not ready:
        raise BotAuthError("no key of the folder can sign now (add one with: beamcrawl keys rotate DIR)")
    return max(ready, key=lambda r: r[:3])[3]


def served_keys(entries: Iterable[KeyEntry], now: float | None = None) -> list[KeyEntry]:
    """The keys the directory publishes at ``now``: every key not retired (the signing one,
    its successor waiting for ``signs_from``, its predecessors within their overlap)."""
    clock = time.time() if now is None else now
    return [e for e in entries if not e.retired(clock)]


class _FolderLock:
    """An exclusive lock on a key folder (``flock`` on ``.keys.lock``): two ``rotate`` or
    ``retire`` commands at once do not lose each other's change to ``keys.json``."""

    def __init__(self, folder: str) -> None:
        if not os.path.isdir(folder):
            raise BotAuthError(f"not a folder: {folder}")
        self.path = os.path.join(folder, ".keys.lock")
        self.fd = -1

    def __enter__(self) -> "_FolderLock":
        import fcntl

        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise BotAuthError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing releases the lock


def write_keys_file(folder: str, entries: Iterable[KeyEntry]) -> None:
    """Writes ``keys.json`` atomically: a temporary file beside it, synced, then renamed over
    it, so a reader (a fetch loop, ``keys serve``) sees the old file or the new, never half."""
    final = os.path.join(folder, KEYS_FILE)
    temp = os.path.join(folder, f".{KEYS_FILE}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as fh:
            fh.write(_keys_file_bytes(entries))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, final)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise BotAuthError(f"cannot write {final}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


def rotate_keys(
    folder: str,
    now: float | None = None,
    activate_after: int = DIRECTORY_MAX_AGE,
    overlap: int = ROTATION_OVERLAP,
) -> KeyEntry:
    """Adds a new key to ``folder``, published at once and signing ``activate_after`` seconds
    later; every key not retired yet is scheduled to retire ``overlap`` seconds after that
    switch (sooner if it was scheduled sooner). A folder without ``keys.json`` gets one,
    holding its existing keys.

    Returns the new key's entry.

    Raises:
        BotAuthError: A bad folder, a negative duration, or a file that cannot be written.
    """
    if activate_after < 0 or overlap < 0:
        raise BotAuthError("--activate-after and --overlap must be >= 0 seconds")
    clock = int(time.time() if now is None else now)
    with _FolderLock(folder):
        entries = read_folder(folder)
        key = Ed25519PrivateKey.generate()
        kid = thumbprint(key.public_key())
        stem = f"key-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(clock))}-{kid[:8]}"
        _write_key_pair(folder, key, f"{stem}.pem", f"{stem}.pub.pem")
        new = KeyEntry(kid, f"{stem}.pem", f"{stem}.pub.pem", clock, clock + activate_after)
        until = new.signs_from + overlap
        kept = [
            e if e.retired(clock) else KeyEntry(
                e.keyid, e.private, e.public, e.created, e.signs_from,
                until if e.retire_at is None else min(e.retire_at, until),
            )
            for e in entries
        ]  # fmt: skip
        write_keys_file(folder, [*kept, new])
    return new


def retire_key(folder: str, keyid: str, now: float | None = None) -> KeyEntry:
    """Retires ``keyid`` now: it leaves the directory and never signs again (its files stay).
    If the newest key left was only scheduled to retire because of it, that date is dropped.

    Raises:
        BotAuthError: An unknown or already retired key, or one whose retirement would
            leave no key to sign with now (one line).
    """
    clock = int(time.time() if now is None else now)
    with _FolderLock(folder):
        entries = read_folder(folder)
        match = [e for e in entries if e.keyid == keyid]
        if not match:
            raise BotAuthError(f"no key {keyid!r} in {folder} (see: beamcrawl keys list {folder})")
        if match[0].retired(clock):
            raise BotAuthError(f"key {keyid} is retired already (since {iso_time(match[0].retire_at or 0)})")
        after = [
            KeyEntry(e.keyid, e.private, e.public, e.created, e.signs_from, clock) if e.keyid == keyid else e
            for e in entries
        ]
        try:
            signing_entry(after, clock)
        except BotAuthError:
            raise BotAuthError(
                f"refusing to retire {keyid}: no other key could sign now "
                f"(add one first: beamcrawl keys rotate {folder} --activate-after 0)"
            ) from None
        # A key scheduled to retire because of the successor retired here stays: the newest
        # key left able to sign has no retirement date, so some key signs at every later time.
        able = [(e.signs_from, e.created, n, e) for n, e in enumerate(after) if e.private and not e.retired(clock)]
        if all(r[3].retire_at is not None for r in able):
            keep = max(able, key=lambda r: r[:3])[3]
            after = [
                KeyEntry(e.keyid, e.private, e.public, e.created, e.signs_from, None) if e is keep else e for e in after
            ]
        write_keys_file(folder, _without_gaps(after, clock))
    return next(e for e in after if e.keyid == keyid)


def _without_gaps(entries: list[KeyEntry], clock: int) -> list[KeyEntry]:
    """``entries`` with no moment from ``clock`` on at which no key could sign.

    Retiring the signing key early can open one: its predecessor keeps the retirement date
    the rotation gave it, and the successor waiting for its ``signs_from`` may start after
    that. The key signing just before such a moment keeps signing until the next key's
    ``signs_from`` and stays published for :data:`ROTATION_OVERLAP` after it (or, with no key
    to come, is no longer scheduled to retire)."""
    while True:
        moments = sorted(
            {clock} | {e.signs_from for e in entries if e.signs_from > clock}
            | {e.retire_at for e in entries if e.retire_at is not None and e.retire_at > clock}
        )  # fmt: skip
        signer = None
        for t in moments:
            try:
                signer = signing_entry(entries, t)
            except BotAuthError:
                break
        else:
            return entries
        assert signer is not None  # some key signs at ``clock``: the caller checked
        later = [e.signs_from for e in entries if e.private and e.signs_from > t and not e.retired(e.signs_from)]
        until = min(later) + ROTATION_OVERLAP if later else None
        entries = [
            KeyEntry(e.keyid, e.private, e.public, e.created, e.signs_from, until) if e is signer else e
            for e in entries
        ]


def load_signer(path: str, agent: str, now: float | None = None) -> "Signer":
    """The signer of ``--signing-key``: a PEM private key file, or a key folder (local, or a
    Beam filesystem URL ending in ``/``), whose newest key able to sign now is used.

    Raises:
        BotAuthError: A bad key, folder or agent URL (one line).
    """
    if "://" in path and path.endswith("/"):
        try:
            raw = read_key_file(path + KEYS_FILE)
        except BotAuthError:  # a folder of 'keys generate', copied as it is
            return Signer.create(read_key_file(path + PRIVATE_KEY_FILE), agent, source=path + PRIVATE_KEY_FILE)
        entry = signing_entry(parse_keys_file(raw, path + KEYS_FILE), now)
        return Signer.create(read_key_file(path + str(entry.private)), agent, source=path + str(entry.private))
    if "://" not in path and os.path.isdir(path):
        entry = signing_entry(read_folder(path), now)
        key_path = os.path.join(path, str(entry.private))
        return Signer.create(read_key_file(key_path), agent, source=key_path)
    return Signer.create(read_key_file(path), agent, source=path)


# --- the directory's own signatures (draft-meunier-webbotauth-httpsig-directory) -------------

# A response signature covers the authority of the request it answers (the ``req`` flag,
# RFC 9421 §2.4) and the body's digest (RFC 9530).
_DIRECTORY_COMPONENTS = '("@authority";req "content-digest")'
_AUTHORITY = re.compile(r"(?:[a-z0-9\-._~!$&'()*+,;=%]+|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?")


def directory_authority(host_header: str) -> str:
    """The ``@authority`` a directory request was made for, from its Host header: lower-cased,
    without the default port of http or https (the server behind a TLS proxy sees either).

    Raises:
        ValueError: Not a host name or address with an optional port.
    """
    value = host_header.strip().lower()
    if not _AUTHORITY.fullmatch(value):
        raise ValueError(f"not an authority: {host_header[:100]!r}")
    for default in (":80", ":443"):
        if value.endswith(default):
            return value[: -len(default)]
    return value


def content_digest(body: bytes) -> str:
    """The ``Content-Digest`` field of ``body`` (RFC 9530, SHA-256)."""
    return f"sha-256=:{base64.b64encode(hashlib.sha256(body).digest()).decode('ascii')}:"


def directory_signature_headers(
    keys: Iterable[Ed25519PrivateKey], authority_value: str, body: bytes, now: float | None = None,
    validity: int = DIRECTORY_MAX_AGE,
) -> list[tuple[str, str]]:  # fmt: skip
    """``Content-Digest``, ``Signature-Input`` and ``Signature`` of a directory response: one
    signature per key (labels ``sig1``, ``sig2`` ...), each covering the request's authority
    and the body's digest, ``keyid`` its thumbprint, tag ``http-message-signatures-directory``,
    valid for ``validity`` seconds (the directory's max-age: a cached copy stays verifiable).

    Raises:
        ValueError: No key, or an authority with a newline.
    """
    created = int(time.time() if now is None else now)
    digest = content_digest(body)
    inputs, signatures = [], []
    for number, key in enumerate(keys, start=1):
        params = (
            f"{_DIRECTORY_COMPONENTS};created={created};expires={created + validity};"
            f"keyid={sf_string(thumbprint(key.public_key()))};alg={sf_string(ALG)};tag={sf_string(DIRECTORY_TAG)}"
        )
        if "\n" in authority_value:
            raise ValueError("a signed component contains a newline")
        base = f'"@authority";req: {authority_value}\n"content-digest": {digest}\n"@signature-params": {params}'
        signature = base64.b64encode(key.sign(base.encode("ascii"))).decode("ascii")
        inputs.append(f"sig{number}={params}")
        signatures.append(f"sig{number}=:{signature}:")
    if not inputs:
        raise ValueError("a directory response needs at least one key to sign it")
    return [("Content-Digest", digest), ("Signature-Input", ", ".join(inputs)), ("Signature", ", ".join(signatures))]


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
