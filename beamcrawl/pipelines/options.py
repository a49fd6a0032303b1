"""Every argument a crawl accepts: its own options (the settings table) or Beam's pipeline options.

``beamcrawl crawl`` and the Flex Template's entry point parse the crawl's options from the
settings table (cli/args.py) and hand the rest to Beam. Beam only warns about an argument
none of its options classes defines, and runs on without it: a mistyped ``--block-list`` or
``--min-dealy`` would crawl with no blocklist or the default delay. So the rest is checked
here against every option of every registered Beam ``PipelineOptions`` class, and anything
else is refused, naming the closest valid spelling, before anything is created or queued.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["beam_option_flags", "unknown_argument"]


def _beam_parser() -> argparse.ArgumentParser:
    """Beam's own parser of pipeline options: every ``_add_argparse_args`` of every
    registered PipelineOptions class, as Beam builds it to parse a pipeline's flags."""
    from apache_beam.options.pipeline_options import PipelineOptions

    parsers: list[argparse.ArgumentParser] = []
    PipelineOptions(flags=[]).get_all_options(add_extra_args_fn=parsers.append)
    return parsers[0]


def beam_option_flags() -> list[str]:
    """Every flag (``--runner``, ``--job_name``, ...) some Beam options class defines."""
    return [s for action in _beam_parser()._actions for s in action.option_strings if s.startswith("--")]


class _BadValue(Exception):
    """A Beam option's value is missing or cannot be parsed (argparse's one-line message)."""


def _key(flag: str) -> str:
    """A spelling with case, dashes and underscores ignored: how a typo is matched."""
    return flag.lstrip("-").replace("-", "").replace("_", "").lower()


def unknown_argument(beam_args: Sequence[str], own: argparse.ArgumentParser) -> str | None:
    """One line naming the first argument that is neither ``own``'s (already parsed out of
    ``beam_args``) nor a Beam pipeline option, with the closest valid spelling; None if all are.

    Args:
        beam_args: What ``own.parse_known_args`` left over.
        own: The command's parser; its listed spellings are offered as corrections (its hidden
            underscore aliases are accepted but not suggested).
    """
    parser = _beam_parser()

    def refuse(message: str) -> NoReturn:  # argparse would print its usage and exit
        raise _BadValue(message)

    parser.error = refuse  # type: ignore[method-assign]
    try:
        _, unknown = parser.parse_known_args(list(beam_args))
    except _BadValue as exc:
        return str(exc)  # a Beam option without its value, or with one of the wrong type
    stray = next((arg for arg in unknown if arg.startswith("-")), None)
    if stray is None:
        return None
    name = stray.split("=", 1)[0]
    spellings: dict[str, str] = {}
    for action in [*own._actions, *parser._actions]:  # argparse keeps no public list of them
        if action.help == argparse.SUPPRESS and action in own._actions:
            continue
        for flag in action.option_strings:
            if flag.startswith("--"):
                spellings.setdefault(_key(flag), flag)  # the command's own first: its spelling wins
    close = difflib.get_close_matches(_key(name), list(spellings), n=1, cutoff=0.6)
    hint = f"; did you mean {spellings[close[0]]}?" if close else " (neither a crawl option nor a Beam pipeline option)"
    return f"unknown option {name}{hint}"
