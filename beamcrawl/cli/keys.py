"""``beamcrawl keys``: the crawler's signing keys for Web Bot Auth (core/net/botauth.py).

    beamcrawl keys generate --out DIR
    beamcrawl keys directory DIR

``generate`` makes an Ed25519 key pair in DIR: ``signing-key.pem`` (the private key, PKCS#8,
readable by its owner only: give it to ``crawl --signing-key``) and ``signing-key.pub.pem``.
It never overwrites a key. ``directory`` prints the JWK Set of every key in DIR (private or
public PEM files; a retired key's ``.pub.pem`` kept there stays published while sites may
still hold signatures made with it), to serve at
``/.well-known/http-message-signatures-directory`` under the ``--signature-agent`` URL, with
the content type ``application/http-message-signatures-directory+json``.

Exit status: 0 done, 2 bad command line, 1 a key that cannot be written or read.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from typing import Sequence, TextIO

from beamcrawl.cli.args import OneLineArgumentParser

__all__ = ["main"]


def _parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog="beamcrawl keys", description="Signing keys for Web Bot Auth.")
    sub = parser.add_subparsers(dest="action", metavar="{generate,directory}")
    gen = sub.add_parser("generate", help="Make an Ed25519 key pair in a folder.")
    gen.error = parser.error  # type: ignore[method-assign]  # one-line errors here too
    gen.add_argument("--out", required=True, metavar="DIR", help="Folder for signing-key.pem and signing-key.pub.pem.")
    dirp = sub.add_parser("directory", help="Print the JWKS key directory of the keys in a folder.")
    dirp.error = parser.error  # type: ignore[method-assign]
    dirp.add_argument("folder", metavar="DIR")
    return parser


def directory(folder: str) -> dict[str, list[dict[str, str]]]:
    """The JWK Set of the keys in ``folder`` (``*.pem``, private or public).

    Raises:
        BotAuthError: No folder, no key in it, or a file that is no Ed25519 key.
    """
    from beamcrawl.core.net.botauth import BotAuthError, jwks, load_public_key

    if not os.path.isdir(folder):
        raise BotAuthError(f"not a folder: {folder}")
    keys = []
    for path in sorted(glob.glob(os.path.join(folder, "*.pem"))):
        try:
            with open(path, "rb") as fh:
                pem = fh.read(64 * 1024)
        except OSError as exc:
            raise BotAuthError(f"cannot read {path}: {exc.strerror or exc}") from None
        keys.append(load_public_key(pem, path))
    if not keys:
        raise BotAuthError(f"no keys (*.pem) in {folder} (make one with: beamcrawl keys generate --out {folder})")
    return jwks(keys)


def run(argv: Sequence[str], out: TextIO) -> int:
    """``beamcrawl keys`` with its output stream given; raises BotAuthError."""
    from beamcrawl.core.net.botauth import DIRECTORY_PATH, generate_keys, load_public_key, thumbprint

    parser = _parser()
    args = parser.parse_args(list(argv))
    if args.action is None:
        parser.error("give a command: generate or directory")
    if args.action == "generate":
        private_path, public_path = generate_keys(args.out)
        with open(public_path, "rb") as fh:
            kid = thumbprint(load_public_key(fh.read(), public_path))
        out.write(f"private key: {private_path} (mode 0600; pass it to crawl --signing-key)\n")
        out.write(f"public key:  {public_path}\nkeyid:       {kid}\n")
        out.write(
            f"publish the output of 'beamcrawl keys directory {args.out}' at SIGNATURE_AGENT_URL{DIRECTORY_PATH}\n"
        )
        return 0
    json.dump(directory(args.folder), out, indent=2)
    out.write("\n")
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
