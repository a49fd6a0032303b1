"""``beamcrawl keys``: the crawler's signing keys for Web Bot Auth (core/net/botauth.py), made,
published, rotated and retired.

    beamcrawl keys generate --out DIR
    beamcrawl keys directory DIR
    beamcrawl keys serve DIR [--bind ADDR] [--port N]
    beamcrawl keys rotate DIR [--activate-after S] [--overlap S]
    beamcrawl keys retire DIR KEYID
    beamcrawl keys list DIR [--json]

A key folder holds Ed25519 key pairs and, once it has been rotated, ``keys.json``: per key its
thumbprint (the ``keyid``), its files, when it was made, from when it signs and when it
retires (written atomically: a temporary file, then a rename). A folder of ``generate``
(``signing-key.pem``, readable by its owner only, and ``signing-key.pub.pem``) has no
``keys.json``: each of its ``*.pem`` keys is published, and the newest private one signs.
``crawl --signing-key`` takes the folder (its signing key is chosen by each fetch loop, so a
rotation takes effect at the next round) or one PEM file.

``directory`` prints the JWK Set of the keys the folder publishes now. ``serve`` serves it at
``/.well-known/http-message-signatures-directory`` (no token: it is public; 404 elsewhere),
with the media type ``application/http-message-signatures-directory+json``, ``Cache-Control:
max-age=86400`` (a day, as the directory draft's examples) and, per published key that has
its private half in the folder, one RFC 9421 signature of the response (covering the
request's ``@authority`` and the body's ``Content-Digest``, tag
``http-message-signatures-directory``, ``keyid`` the key's thumbprint), as
draft-meunier-webbotauth-httpsig-directory asks. The folder is read at every request.

``rotate`` adds a key that is published at once and signs ``--activate-after`` seconds later
(default 86400, the directory's max-age: by then every verifier's cached copy knows it; 0 for
an emergency). Each older key keeps being published for ``--overlap`` seconds after the
switch (default 7 days, well past that max-age and any round still signing with it), then
retires by date. ``retire`` retires a key now; it refuses a key whose retirement would leave
none to sign with. A retired key is neither published nor used; its files stay.
``list`` shows each key's thumbprint, when it was made, whether it is active (published),
whether it signs now, and when it retired or retires.

Exit status: 0 done, 2 bad command line, 1 a folder, key or port that cannot be used.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Sequence, TextIO

from beamcrawl.cli.args import OneLineArgumentParser

if TYPE_CHECKING:
    from beamcrawl.core.net.botauth import KeyEntry

__all__ = ["directory", "key_rows", "main", "make_app"]

_COMMANDS = "generate,directory,serve,rotate,retire,list"
# A keyid is an RFC 7638 thumbprint: 43 base64url characters, and one in 64 begins with "-".
_KEYID = re.compile(r"-[A-Za-z0-9_-]{42}")


def _parser() -> OneLineArgumentParser:
    from beamcrawl.core.net.botauth import DIRECTORY_MAX_AGE, ROTATION_OVERLAP

    parser = OneLineArgumentParser(prog="beamcrawl keys", description="Signing keys for Web Bot Auth.")
    sub = parser.add_subparsers(dest="action", metavar="{" + _COMMANDS + "}")

    def command(name: str, text: str) -> OneLineArgumentParser:
        cmd = sub.add_parser(name, help=text)
        cmd.error = parser.error  # type: ignore[method-assign]  # one-line errors here too
        return cmd

    gen = command("generate", "Make an Ed25519 key pair in a folder.")
    gen.add_argument("--out", required=True, metavar="DIR", help="Folder for signing-key.pem and signing-key.pub.pem.")
    command("directory", "Print the JWKS key directory of the keys a folder publishes.").add_argument(
        "folder", metavar="DIR"
    )
    serve = command("serve", "Serve the folder's key directory, signed, over HTTP.")
    serve.add_argument("folder", metavar="DIR")
    serve.add_argument("--bind", default="127.0.0.1", metavar="ADDR", help="Address to listen on (default loopback).")
    serve.add_argument("--port", type=int, default=8790, metavar="N", help="Port (default 8790; 0 picks a free one).")
    rotate = command("rotate", "Add a new key; older keys retire after an overlap.")
    rotate.add_argument("folder", metavar="DIR")
    rotate.add_argument(
        "--activate-after", type=int, default=DIRECTORY_MAX_AGE, metavar="S",
        help=f"Seconds the new key is published before it signs (default {DIRECTORY_MAX_AGE}, the directory's max-age).",
    )  # fmt: skip
    rotate.add_argument(
        "--overlap", type=int, default=ROTATION_OVERLAP, metavar="S",
        help=f"Seconds older keys stay published after the switch (default {ROTATION_OVERLAP}, 7 days).",
    )  # fmt: skip
    retire = command("retire", "Retire a key now: no longer published nor used.")
    retire.add_argument("folder", metavar="DIR")
    retire.add_argument("keyid", metavar="KEYID")
    listing = command("list", "Show the folder's keys.")
    listing.add_argument("folder", metavar="DIR")
    listing.add_argument("--json", action="store_true", help="One JSON object per key, as a list.")
    return parser


def _published(folder: str, now: float) -> list[tuple[KeyEntry, Any, Any]]:
    """The folder's published keys now, each with its public key and its private key (or None)."""
    from beamcrawl.core.net.botauth import (
        BotAuthError,
        load_private_key,
        load_public_key,
        read_folder,
        served_keys,
        thumbprint,
    )

    keys = []
    for entry in served_keys(read_folder(folder), now):
        private = None
        if entry.private:
            path = os.path.join(folder, entry.private)
            with open(path, "rb") as fh:
                private = load_private_key(fh.read(64 * 1024), path)
            public = private.public_key()
        else:
            path = os.path.join(folder, str(entry.public))
            with open(path, "rb") as fh:
                public = load_public_key(fh.read(64 * 1024), path)
        if thumbprint(public) != entry.keyid:  # keys.json edited by hand, or a file replaced
            raise BotAuthError(f"{path} holds key {thumbprint(public)}, not {entry.keyid} as keys.json says")
        keys.append((entry, public, private))
    return keys


def directory(folder: str, now: float | None = None) -> dict[str, list[dict[str, str]]]:
    """The JWK Set of the keys ``folder`` publishes at ``now``.

    Raises:
        BotAuthError: No folder, no key in it, or a file that is no Ed25519 key.
    """
    from beamcrawl.core.net.botauth import jwks

    try:
        return jwks(public for _, public, _ in _published(folder, time.time() if now is None else now))
    except OSError as exc:
        from beamcrawl.core.net.botauth import BotAuthError

        raise BotAuthError(f"cannot read key {exc.filename or folder}: {exc.strerror or exc}") from None


def key_rows(folder: str, now: float | None = None) -> list[dict[str, Any]]:
    """``keys list`` as data: per key its keyid, created, signs_from, retire_at (ISO times or
    None), active (published now), signing (the key crawls sign with now), retired."""
    from beamcrawl.core.net.botauth import BotAuthError, iso_time, read_folder, signing_entry

    clock = time.time() if now is None else now
    entries = read_folder(folder)
    try:
        signer = signing_entry(entries, clock).keyid
    except BotAuthError:
        signer = None
    return [
        {
            "keyid": e.keyid, "created": iso_time(e.created), "signs_from": iso_time(e.signs_from),
            "retire_at": None if e.retire_at is None else iso_time(e.retire_at),
            "active": not e.retired(clock), "signing": e.keyid == signer, "retired": e.retired(clock),
            "private": e.private is not None,
        }
        for e in entries
    ]  # fmt: skip


def _table(rows: list[dict[str, Any]], now: float) -> str:
    from beamcrawl.core.net.botauth import iso_time

    head = ("KEYID", "CREATED", "ACTIVE", "SIGNING", "RETIRED")
    lines = [head]
    for r in rows:
        if r["signing"]:
            signing = "yes"
        elif r["active"] and r["private"] and r["signs_from"] > iso_time(now):
            signing = f"from {r['signs_from']}"
        else:
            signing = "no"
        retired = r["retire_at"] if r["retired"] else (f"at {r['retire_at']}" if r["retire_at"] else "-")
        lines.append((r["keyid"], r["created"], "yes" if r["active"] else "no", signing, retired))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines) + "\n"


def make_app(folder: str) -> Any:
    """The aiohttp application of ``keys serve``: the signed directory at its well-known path,
    404 everywhere else. The folder is read at every request, so a rotation or retirement is
    served at once and a key retires by date without a restart."""
    from aiohttp import web

    from beamcrawl.core.net.botauth import (
        DIRECTORY_MAX_AGE,
        DIRECTORY_MEDIA_TYPE,
        DIRECTORY_PATH,
        BotAuthError,
        directory_authority,
        directory_signature_headers,
        jwks,
    )

    async def serve_directory(request: web.Request) -> web.StreamResponse:
        try:
            authority = directory_authority(request.host)
        except ValueError:
            return web.Response(status=400, text="bad Host\n")
        now = time.time()
        try:
            keys = _published(folder, now)
        except (BotAuthError, OSError) as exc:
            # The folder is being changed, or broken: say so, and let caches keep their copy.
            print(f"beamcrawl keys serve: error: {exc}".splitlines()[0], file=sys.stderr, flush=True)
            return web.Response(status=503, text="key directory unavailable\n", headers={"Retry-After": "60"})
        body = (json.dumps(jwks(public for _, public, _ in keys), indent=2) + "\n").encode("ascii")
        signers = [private for _, _, private in keys if private is not None]
        headers = {"Content-Type": DIRECTORY_MEDIA_TYPE, "Cache-Control": f"max-age={DIRECTORY_MAX_AGE}"}
        if signers:
            headers.update(directory_signature_headers(signers, authority, body, now))
        return web.Response(body=body, headers=headers)

    app = web.Application()
    app.router.add_get(DIRECTORY_PATH, serve_directory)  # GET and HEAD; anything else: 404/405
    return app


async def _serve(folder: str, bind: str, port: int, out: TextIO) -> None:
    from beamcrawl.cli.serving import serve_until_stopped
    from beamcrawl.core.net.botauth import DIRECTORY_PATH

    await serve_until_stopped(make_app(folder), bind, port, out, "beamcrawl keys serving {url}" + DIRECTORY_PATH)


def _keyids_as_positionals(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--`` put before a KEYID that begins with "-" (as ``keys list`` prints it),
    which argparse would otherwise take for an unknown option. No option of ``keys`` has the
    keyid's shape, and KEYID is ``retire``'s last argument."""
    argv = list(argv)
    if "retire" not in argv or "--" in argv:
        return argv
    for i, arg in enumerate(argv):
        if _KEYID.fullmatch(arg):
            return argv[:i] + ["--"] + argv[i:]
    return argv


def run(argv: Sequence[str], out: TextIO) -> int:
    """``beamcrawl keys`` with its output stream given; raises BotAuthError."""
    from beamcrawl.core.net.botauth import (
        DIRECTORY_PATH,
        BotAuthError,
        generate_keys,
        iso_time,
        load_public_key,
        read_folder,
        retire_key,
        rotate_keys,
        thumbprint,
    )

    parser = _parser()
    args = parser.parse_args(_keyids_as_positionals(argv))
    if args.action is None:
        parser.error(f"give a command: {_COMMANDS.replace(',', ', ')}")
    if args.action == "generate":
        private_path, public_path = generate_keys(args.out)
        with open(public_path, "rb") as fh:
            kid = thumbprint(load_public_key(fh.read(), public_path))
        out.write(f"private key: {private_path} (mode 0600; pass it, or the folder, to crawl --signing-key)\n")
        out.write(f"public key:  {public_path}\nkeyid:       {kid}\n")
        out.write(
            f"publish the output of 'beamcrawl keys directory {args.out}' at SIGNATURE_AGENT_URL{DIRECTORY_PATH}"
            f" (or run: beamcrawl keys serve {args.out})\n"
        )
        return 0
    if args.action == "directory":
        json.dump(directory(args.folder), out, indent=2)
        out.write("\n")
        return 0
    if args.action == "serve":
        if not 0 <= args.port <= 65535:
            parser.error(f"--port must be 0-65535, got {args.port}")
        directory(args.folder)  # a bad folder or key file is one line now, not a 503 per request
        if any(e.private is None for e in read_folder(args.folder)):
            print(
                "beamcrawl keys serve: warning: a public-only key is published unsigned; "
                "verifiers that follow the directory draft ignore it",
                file=sys.stderr,
            )
        try:
            asyncio.run(_serve(args.folder, args.bind, args.port, out))
        except OSError as exc:
            raise BotAuthError(f"cannot listen on {args.bind}:{args.port}: {exc.strerror or exc}") from None
        return 0
    if args.action == "rotate":
        new = rotate_keys(args.folder, activate_after=args.activate_after, overlap=args.overlap)
        out.write(f"new key:   {new.keyid} ({new.private})\npublished: now\n")
        out.write(
            f"signs from {iso_time(new.signs_from)}; older keys retire at {iso_time(new.signs_from + args.overlap)}\n"
        )
        return 0
    if args.action == "retire":
        entry = retire_key(args.folder, args.keyid)
        out.write(f"retired {entry.keyid} at {iso_time(entry.retire_at or 0)}: no longer published nor used\n")
        return 0
    now = time.time()
    rows = key_rows(args.folder, now)
    if args.json:
        json.dump(rows, out, indent=2)
        out.write("\n")
    else:
        out.write(_table(rows, now))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``beamcrawl keys``."""
    from beamcrawl.core.net.botauth import BotAuthError

    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout)
    except BotAuthError as exc:
        print(f"beamcrawl keys: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
