"""The crawler's keys served and rotated (``beamcrawl keys serve|rotate|retire|list``, #29).

A site's side is played by an independent RFC 9421 implementation (the
``http-message-signatures`` library): it fetches the directory over HTTP from ``keys serve``
on loopback, checks the directory's own signatures with the keys the directory holds, and
verifies requests signed before, during and after a rotation against the directory served
at the time. The rotation's dates are checked with an explicit clock; the end-to-end crawl
with ``--signing-key DIR`` is in tests/pipelines/test_botauth_e2e.py.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import tempfile
import time
from types import SimpleNamespace

import http_message_signatures as hms
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.cli import keys as keys_cmd
from beamcrawl.core.net import botauth

AGENT = "https://crawler.example/bot"
DAY = 86400


class _VerifierAt(hms.HTTPMessageVerifier):
    """The library's verifier with its clock set to ``at`` (epoch seconds)."""

    def __init__(self, at: float, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def validate_created_and_expires(self, sig_input, max_age=None):
        created, expires = sig_input.params["created"], sig_input.params["expires"]
        if not created - 5 <= self.at <= expires:
            raise hms.InvalidSignature(f"not valid at {self.at}")


def _verifier(keys: dict, at: float | None = None) -> hms.HTTPMessageVerifier:
    resolver = hms.MappingKeyResolver(public_keys=keys, private_keys={})
    if at is None:
        return hms.HTTPMessageVerifier(signature_algorithm=hms.algorithms.ED25519, key_resolver=resolver)
    return _VerifierAt(at, signature_algorithm=hms.algorithms.ED25519, key_resolver=resolver)


def _public_keys(jwks: dict) -> dict:
    return {
        k["kid"]: Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(k["x"] + "=" * (-len(k["x"]) % 4)))
        for k in jwks["keys"]
    }


def verify_request(headers, url: str, keys: dict, at: float | None = None):
    """A site's check of a crawl request against the keys of a directory."""
    message = SimpleNamespace(method="GET", url=url, headers=dict(headers))
    return _verifier(keys, at).verify(
        message, expect_tag="web-bot-auth", require_components=("@authority", "signature-agent")
    )


def verify_directory(status: int, headers, body: bytes, url: str) -> tuple[dict, set]:
    """A verifier's check of a fetched directory: every signature with the keys the body
    holds, the authority of the request, the body's digest. Returns the keys and the keyids
    whose signature verified."""
    keys = _public_keys(json.loads(body))
    response = SimpleNamespace(
        status_code=status, headers=dict(headers), request=SimpleNamespace(method="GET", url=url, headers={})
    )
    results = _verifier(keys).verify(
        response,
        expect_tag=botauth.DIRECTORY_TAG,
        require_components=('"@authority";req', "content-digest"),
        body=body,
    )
    return keys, {r.parameters["keyid"] for r in results}


class _Served:
    """``keys serve``'s application on a loopback port, in a loop of its own thread."""

    def __init__(self, folder: str):
        import threading

        from aiohttp import web

        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(keys_cmd.make_app(folder))
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self.runner.addresses[0][1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def get(self, path: str = botauth.DIRECTORY_PATH, host: str | None = None) -> tuple[int, dict, bytes]:
        import urllib.request

        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if host:
            request.add_header("Host", host)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "keys"
    assert keys_cmd.main(["generate", "--out", str(folder)]) == 0
    server = _Served(str(folder))
    yield folder, server
    server.close()


def _run(*argv: str) -> str:
    out = io.StringIO()
    assert keys_cmd.run(list(argv), out) == 0
    return out.getvalue()


def test_directory_is_served_signed_and_a_rotation_verifies_throughout(served):
    folder, server = served
    url = f"http://127.0.0.1:{server.port}/page"  # what the crawl fetches from a site
    status, headers, body = server.get()
    assert status == 200
    assert headers["Content-Type"] == "application/http-message-signatures-directory+json"
    assert headers["Cache-Control"] == "max-age=86400"
    keys, signed = verify_directory(status, headers, body, f"http://127.0.0.1:{server.port}{botauth.DIRECTORY_PATH}")
    (old_kid,) = keys
    assert signed == {old_kid}
    assert json.loads(body) == json.loads(_run("directory", str(folder)))  # serve = directory

    # Before: a folder of 'keys generate' (no keys.json) signs with its one key.
    before = botauth.load_signer(str(folder), AGENT).headers(url)
    assert verify_request(before, url, keys)[0].parameters["keyid"] == old_kid

    # During: a new key is published (and signs the directory) at once; with
    # --activate-after 0 crawls sign with it from now, the old key still published.
    _run("rotate", str(folder), "--activate-after", "0")
    status, headers, body = server.get()
    keys, signed = verify_directory(status, headers, body, f"http://127.0.0.1:{server.port}{botauth.DIRECTORY_PATH}")
    assert old_kid in keys and len(keys) == 2 and signed == set(keys)
    (new_kid,) = set(keys) - {old_kid}
    during = botauth.load_signer(str(folder), AGENT).headers(url)
    assert verify_request(during, url, keys)[0].parameters["keyid"] == new_kid
    assert verify_request(before, url, keys)  # a request signed just before still verifies

    # After: the old key retired is gone from the served directory; its requests fail there.
    _run("retire", str(folder), old_kid)
    status, headers, body = server.get()
    keys, signed = verify_directory(status, headers, body, f"http://127.0.0.1:{server.port}{botauth.DIRECTORY_PATH}")
    assert set(keys) == signed == {new_kid}
    assert verify_request(during, url, keys)
    stale = botauth.Signer.create((folder / botauth.PRIVATE_KEY_FILE).read_bytes(), AGENT).headers(url)
    with pytest.raises(hms.InvalidSignature):
        verify_request(stale, url, keys)


def test_directory_signature_binds_authority_and_body(served):
    _, server = served
    status, headers, body = server.get(host="keys.crawler.example")
    assert status == 200
    verify_directory(status, headers, body, "https://keys.crawler.example" + botauth.DIRECTORY_PATH)
    with pytest.raises(hms.InvalidSignature):  # the same response, claimed for another site
        verify_directory(status, headers, body, "https://evil.example" + botauth.DIRECTORY_PATH)
    forged = json.loads(body)
    forged["keys"][0]["x"] = base64.urlsafe_b64encode(b"\x01" * 32).rstrip(b"=").decode()
    with pytest.raises(hms.InvalidSignature):  # another key slipped into the body
        verify_directory(status, headers, json.dumps(forged).encode(), "https://keys.crawler.example/")
    assert server.get("/")[0] == 404
    assert server.get("/.well-known/other")[0] == 404
    assert server.get(host="bad host\\x")[0] == 400


def test_rotation_dates_with_the_defaults(tmp_path):
    folder = str(tmp_path / "keys")
    botauth.generate_keys(folder)
    (old,) = botauth.read_folder(folder)
    t0 = old.created + 100
    new = botauth.rotate_keys(folder, now=t0)
    entries = botauth.read_folder(folder)

    def state(t: float) -> tuple[str, set]:
        return botauth.signing_entry(entries, t).keyid, {e.keyid for e in botauth.served_keys(entries, t)}

    both = {old.keyid, new.keyid}
    # Published at once, signing one max-age later: a verifier's cached copy knows it by then.
    assert state(t0) == (old.keyid, both)
    assert state(t0 + botauth.DIRECTORY_MAX_AGE - 1) == (old.keyid, both)
    assert state(t0 + botauth.DIRECTORY_MAX_AGE) == (new.keyid, both)
    # The old key stays published for the overlap after the switch, then retires by date.
    switch = t0 + botauth.DIRECTORY_MAX_AGE
    assert botauth.ROTATION_OVERLAP > botauth.DIRECTORY_MAX_AGE
    assert state(switch + botauth.ROTATION_OVERLAP - 1) == (new.keyid, both)
    assert state(switch + botauth.ROTATION_OVERLAP) == (new.keyid, {new.keyid})
    # A request signed by the old key at its last signing second verifies at the overlap's
    # end against the directory of that time; one second after, against the next, it fails.
    url = "https://site.example/"
    last = botauth.load_signer(folder, AGENT, now=switch - 1)
    assert last.keyid == old.keyid
    signed = last.headers(url, now=switch - 1)
    assert verify_request(signed, url, _keys_at(folder, switch - 1), at=switch - 1)
    assert old.keyid not in _keys_at(folder, switch + botauth.ROTATION_OVERLAP)


def _keys_at(folder: str, now: float) -> dict:
    return _public_keys(keys_cmd.directory(folder, now=now))


# One operation: (seconds after the previous one, "rotate" with activate-after, or "retire" the
# n-th key of the folder).
_OPS = st.lists(
    st.tuples(
        st.integers(0, 20 * DAY),
        st.one_of(
            st.tuples(st.just("rotate"), st.sampled_from([0, 3600, DAY])),
            st.tuples(st.just("retire"), st.integers(0, 5)),
        ),
    ),
    max_size=6,
)


@settings(max_examples=25, deadline=None)
@given(_OPS)
def test_some_published_key_signs_at_every_time_whatever_the_operations(ops):
    with tempfile.TemporaryDirectory() as folder:
        botauth.generate_keys(folder)
        clock = botauth.read_folder(folder)[0].created
        for gap, (op, arg) in ops:
            clock += gap
            if op == "rotate":
                botauth.rotate_keys(folder, now=clock, activate_after=arg)
            else:
                entries = botauth.read_folder(folder)
                try:
                    botauth.retire_key(folder, entries[arg % len(entries)].keyid, now=clock)
                except botauth.BotAuthError as exc:
                    assert "retired already" in str(exc) or "refusing" in str(exc)
            entries = botauth.read_folder(folder)
            moments = {clock} | {e.signs_from for e in entries} | {e.retire_at for e in entries if e.retire_at}
            for t in sorted(m for m in moments if m >= clock) + [clock + 400 * DAY]:
                signer = botauth.signing_entry(entries, t)  # raises if none could sign
                assert signer in botauth.served_keys(entries, t)


def test_retiring_the_signer_early_leaves_no_moment_unsigned(tmp_path):
    # Found by the test above: K1 signs and K0 retires at day 7 (the first rotation's
    # overlap); at day 6 K2 is added to sign from day 7 + 1 s, and K1 is retired. K0 must
    # sign until K2 does, then stay published for the overlap.
    folder = str(tmp_path)
    botauth.generate_keys(folder)
    t0 = botauth.read_folder(folder)[0].created
    botauth.rotate_keys(folder, now=t0, activate_after=0)
    clock = t0 + 6 * DAY + 1
    k2 = botauth.rotate_keys(folder, now=clock, activate_after=DAY)
    k0, k1 = botauth.read_folder(folder)[:2]
    assert k0.retire_at == t0 + 7 * DAY < k2.signs_from
    botauth.retire_key(folder, k1.keyid, now=clock)
    entries = botauth.read_folder(folder)
    assert botauth.signing_entry(entries, k2.signs_from - 1).keyid == k0.keyid
    assert botauth.signing_entry(entries, k2.signs_from).keyid == k2.keyid
    assert [e.retire_at for e in entries if e.keyid == k0.keyid] == [k2.signs_from + botauth.ROTATION_OVERLAP]


def test_keys_list_table_and_json(tmp_path, capsys):
    folder = str(tmp_path / "keys")
    botauth.generate_keys(folder)
    (old,) = botauth.read_folder(folder)
    new = botauth.rotate_keys(folder)
    assert keys_cmd.main(["list", folder]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["KEYID", "CREATED", "ACTIVE", "SIGNING", "RETIRED"]
    by_kid = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert by_kid[old.keyid][1:3] == ["yes", "yes"] and by_kid[old.keyid][3] == "at"
    assert by_kid[new.keyid][1:4] == ["yes", "from", botauth.iso_time(new.signs_from)]
    assert keys_cmd.main(["list", folder, "--json"]) == 0
    rows = {r["keyid"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[old.keyid]["signing"] and not rows[new.keyid]["signing"]
    assert rows[old.keyid]["retire_at"] == botauth.iso_time(new.signs_from + botauth.ROTATION_OVERLAP)
    assert all(r["active"] and not r["retired"] for r in rows.values())


_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@settings(max_examples=200, deadline=None)
@given(kid=st.text(_B64URL, min_size=43, max_size=43), dashes=st.booleans())
def test_any_keyid_is_retires_argument(kid, dashes):
    # One keyid in 64 begins with "-" (the CI failure of stop 32): still KEYID, not an option.
    argv = ["retire", "--", "some/dir", kid] if dashes else ["retire", "some/dir", kid]
    args = keys_cmd._parser().parse_args(keys_cmd._keyids_as_positionals(argv))
    assert (args.action, args.folder, args.keyid) == ("retire", "some/dir", kid)


def test_a_keyid_beginning_with_a_dash_is_retired_from_the_command_line(tmp_path, capsys):
    for n in range(2000):  # a new key's keyid begins with "-" one time in 64
        folder = str(tmp_path / f"keys{n}")
        botauth.generate_keys(folder)
        (old,) = botauth.read_folder(folder)
        if old.keyid.startswith("-"):
            break
    assert old.keyid.startswith("-")
    new = botauth.rotate_keys(folder, activate_after=0)
    assert keys_cmd.main(["retire", folder, old.keyid]) == 0
    assert f"retired {old.keyid} at" in capsys.readouterr().out
    assert {e.keyid for e in botauth.served_keys(botauth.read_folder(folder), time.time())} == {new.keyid}
    assert keys_cmd.main(["retire", folder, old.keyid]) == 1  # and once more: our one line, not argparse's
    assert capsys.readouterr().err.startswith(f"beamcrawl keys: error: key {old.keyid} is retired already")


def test_keys_json_is_replaced_whole(tmp_path):
    folder = tmp_path / "keys"
    botauth.generate_keys(str(folder))
    botauth.rotate_keys(str(folder))
    meta = folder / botauth.KEYS_FILE
    inode = meta.stat().st_ino
    botauth.rotate_keys(str(folder))
    assert meta.stat().st_ino != inode  # a new file renamed over the old, not rewritten in place
    assert len(botauth.read_folder(str(folder))) == 3
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".keys.json")) == []


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["list", "{missing}"], 1, "not a folder"),
        (["rotate", "{missing}"], 1, "not a folder"),
        (["serve", "{empty}"], 1, "no keys"),
        (["retire", "{keys}", "nope"], 1, "no key 'nope'"),
        (["retire", "{keys}", "{kid}"], 1, "refusing to retire"),
        (["rotate", "{keys}", "--overlap", "-1"], 1, "must be >= 0"),
        (["generate", "--out", "{rotated}"], 1, "keys rotate"),
        (["list", "{broken}"], 1, "keys.json: not JSON"),
        (["directory", "{swapped}"], 1, "as keys.json says"),
        (["serve", "{keys}", "--port", "70000"], 2, "--port"),
        ([], 2, "give a command"),
    ],
)
def test_errors_are_one_line(tmp_path, capsys, argv, status, message):
    keys = tmp_path / "keys"
    botauth.generate_keys(str(keys))
    rotated, broken, empty = tmp_path / "rotated", tmp_path / "broken", tmp_path / "empty"
    botauth.generate_keys(str(rotated))
    botauth.rotate_keys(str(rotated))
    broken.mkdir()
    (broken / botauth.KEYS_FILE).write_text("{")
    empty.mkdir()
    swapped = tmp_path / "swapped"  # a key file replaced by another key
    botauth.generate_keys(str(swapped))
    botauth.rotate_keys(str(swapped))
    botauth.generate_keys(str(tmp_path / "other"))
    for name in (botauth.PRIVATE_KEY_FILE, botauth.PUBLIC_KEY_FILE):
        (swapped / name).write_bytes((tmp_path / "other" / name).read_bytes())
    (kid,) = (e.keyid for e in botauth.read_folder(str(keys)))
    names = {
        "missing": tmp_path / "missing",
        "empty": empty,
        "keys": keys,
        "kid": kid,
        "rotated": rotated,
        "broken": broken,
        "swapped": swapped,
    }
    try:
        got = keys_cmd.main([a.format(**names) for a in argv])
    except SystemExit as exc:  # argparse's exit for a bad command line
        got = exc.code
    err = capsys.readouterr().err
    assert got == status and message in err and err.count("\n") == 1, err


def test_crawl_refuses_a_folder_with_no_key_in_one_line(tmp_path):
    from beamcrawl.cli.args import config_from_args
    from beamcrawl.cli.main import crawl_parser

    (tmp_path / "keys").mkdir()
    args, _ = crawl_parser().parse_known_args(
        ["--out", str(tmp_path / "o"), "--signing-key", str(tmp_path / "keys"), "--signature-agent", AGENT]
    )
    with pytest.raises(ValueError, match="no keys") as info:
        config_from_args(args)
    assert "\n" not in str(info.value)
    cfg_args, _ = crawl_parser().parse_known_args(
        ["--out", str(tmp_path / "o"), "--signing-key", str(tmp_path / "keys") + "/", "--signature-agent", AGENT]
    )
    botauth.generate_keys(str(tmp_path / "keys"))
    cfg = config_from_args(cfg_args)
    assert botauth.load_signer(cfg.signing_key, AGENT).keyid == botauth.read_folder(str(tmp_path / "keys"))[0].keyid


def test_signing_key_may_be_a_file_or_a_remote_folder(tmp_path, monkeypatch):
    folder = tmp_path / "keys"
    botauth.generate_keys(str(folder))
    (first,) = botauth.read_folder(str(folder))
    pem = str(folder / botauth.PRIVATE_KEY_FILE)
    assert botauth.load_signer(pem, AGENT).keyid == first.keyid  # one key file, as before
    # A gs:// folder (its URL ends in /) is read file by file through read_key_file, which
    # reads Beam filesystems; here the bucket is the local folder.
    remote = "gs://bucket/keys/"

    def read(path: str) -> bytes:
        local = folder / path.removeprefix(remote)
        if not local.exists():
            raise botauth.BotAuthError(f"cannot read signing key {path}: not found")
        return local.read_bytes()

    monkeypatch.setattr(botauth, "read_key_file", read)
    assert botauth.load_signer(remote, AGENT).keyid == first.keyid  # no keys.json: signing-key.pem
    new = botauth.rotate_keys(str(folder), activate_after=0)
    assert botauth.load_signer(remote, AGENT).keyid == new.keyid  # keys.json: its signing key


def test_a_rotation_in_the_same_second_signs_with_the_new_key(tmp_path):
    folder = str(tmp_path / "keys")
    botauth.generate_keys(folder)
    (old,) = botauth.read_folder(folder)
    for _ in range(3):  # each new key has the same times as the one before it
        new = botauth.rotate_keys(folder, now=old.created, activate_after=0)
        assert botauth.signing_entry(botauth.read_folder(folder), old.created).keyid == new.keyid


def test_serve_refuses_a_folder_whose_key_file_is_gone(tmp_path, capsys):
    folder = tmp_path / "keys"
    botauth.generate_keys(str(folder))
    new = botauth.rotate_keys(str(folder))
    (folder / str(new.private)).unlink()
    import threading

    status = []  # in a thread, so that a server that starts anyway fails the test, not hangs it
    thread = threading.Thread(target=lambda: status.append(keys_cmd.main(["serve", str(folder), "--port", "0"])))
    thread.daemon = True
    thread.start()
    thread.join(30)
    assert status == [1]
    err = capsys.readouterr().err
    assert str(new.private) in err and err.count("\n") == 1, err
