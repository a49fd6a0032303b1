"""Quick command-line tools that answer without starting a pipeline.

Each command is a function that writes to the streams it is given and returns an exit code;
the CLI wires them to ``beamcrawl normalize`` and ``beamcrawl robots-check``. Nothing here may
import Apache Beam (or anything slow): these must answer in well under a second.
"""

from __future__ import annotations

from typing import TextIO

from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, fp_hex, normalize

__all__ = ["normalize_cmd", "robots_check_cmd"]

EXIT_OK = 0
PROG = "beamcrawl robots-check"
EXIT_USAGE = 2


def normalize_cmd(urls: list[str], out: TextIO) -> int:
    r"""Prints ``<fingerprint hex>\t<normalised URL>`` or ``invalid\t<reason>\t<URL as given>``
    per URL (two columns for a valid URL, three for an invalid one).

    Args:
        urls: The URLs, as given on the command line.
        out: Where the lines go.

    Returns:
        0: an invalid URL is an answer, not an error.
    """
    for url in urls:
        try:
            normalized = normalize(url)
        except InvalidURL as exc:
            out.write(f"invalid\t{exc}\t{url}\n")
        else:
            out.write(f"{fp_hex(fingerprint(normalized))}\t{normalized}\n")
    return EXIT_OK


def robots_check_cmd(robots_file: str, agent: str, urls: list[str], out: TextIO, err: TextIO) -> int:
    r"""Prints ``allowed\tURL`` or ``disallowed\tURL`` per URL for a local robots.txt, or
    ``invalid\tURL\t<reason>`` for one that is no absolute http(s) URL.

    The file is read as bytes and treated as a 200 answer. Each URL is checked in its
    normalised form (what the crawler would fetch). A bare path (``/private/x``) or a word
    is ``invalid``: the crawler never fetches one, and robots.txt applies per host.

    Args:
        robots_file: Path of the robots.txt file.
        agent: The product token to select the group with, e.g. ``beamcrawl``.
        urls: URLs or paths to check; printed as given.
        out: Where the answers go.
        err: Where a one-line error goes.

    Returns:
        0, or 2 when the file cannot be read or the agent is not a product token.
    """
    try:
        with open(robots_file, "rb") as f:
            body = f.read()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        err.write(f"{PROG}: error: cannot read robots file {robots_file}: {reason}\n")
        return EXIT_USAGE
    try:
        rules = RobotsRules.from_fetch(200, body, agent)
    except ValueError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    for url in urls:
        try:
            target = normalize(url)
        except InvalidURL as exc:
            out.write(f"invalid\t{url}\t{exc}\n")
            continue
        verdict = "allowed" if rules.allowed(target) else "disallowed"
        out.write(f"{verdict}\t{url}\n")
    return EXIT_OK
