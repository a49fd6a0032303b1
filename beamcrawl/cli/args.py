"""The crawl's command-line arguments, built from the one table of settings (no Beam import here).

Every option of ``beamcrawl crawl`` and of the Flex Template's entry point is a
:class:`~beamcrawl.core.runtime.config.CrawlConfig` setting: its flag, help, default, unit
and bound are written there, as field metadata, and only read here. The parser converts
each value (a number, true or false, a ``HOSTGLOB=IP`` rule); whether it is in bounds is
checked once, when the :class:`CrawlConfig` is built. The README's option list is generated
from the same parser (``option_list``; ``tests/docs/test_readme_options.py`` keeps it in step).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import MISSING
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from dataclasses import Field

    from beamcrawl.core.runtime.config import CrawlConfig, Option

# The settings table is imported where it is used: the other commands share this module's
# OneLineArgumentParser, and the quick ones must not pay for the crawl's imports.


def _number(kind: type, name: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None

    return parse


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _boolean(name: str) -> Callable[[str], bool]:
    """A switch that also takes a value: ``--name`` alone is true, ``--name=false`` is not
    (Flex Template parameters always arrive as ``--name=value``)."""

    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise argparse.ArgumentTypeError(f"{name} must be true or false, got {text!r}")

    return parse


def _resolve_rule(text: str) -> tuple[str, str]:
    from beamcrawl.core.net.netpolicy import parse_resolve_rule

    try:
        return parse_resolve_rule(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# Settings whose command-line value is parsed by more than its type.
_PARSERS: dict[str, Callable[[str], Any]] = {"resolve": _resolve_rule}
# The value's name in help, by unit or type, where the table names none.
_METAVARS = {"s": "S", "bytes": "BYTES", "int": "N", "float": "X"}


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (counts such as ``--rounds``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def dest_of(f: Field[Any], opt: Option) -> str:
    """The argparse attribute a setting is parsed into."""
    return opt.dest or f.name


def _kind(f: Field[Any]) -> str:
    """``float``, ``int``, ``bool`` or ``str``: how a setting's text is parsed."""
    kind = str(f.type)
    return kind if kind in ("float", "int", "bool") else "str"


def default_text(value: Any, unit: str = "") -> str:
    """A default as help shows it: ``1``, ``86400 (1 day)``, ``2097152 (2 MiB)``, ``on``."""
    from beamcrawl.core.runtime.config import MiB

    if isinstance(value, bool):
        return "on" if value else "off"
    if not isinstance(value, (int, float)):
        return str(value)
    text = str(int(value)) if value == int(value) else str(value)
    if unit == "s" and value >= 3600 and value % 3600 == 0:
        days, rest = divmod(int(value), 86400)
        hours = int(value) // 3600
        amount = (f"{days} day" + "s" * (days != 1)) if not rest else (f"{hours} hour" + "s" * (hours != 1))
        return f"{text} ({amount})"
    if unit == "bytes" and value >= MiB and value % MiB == 0:
        return f"{text} ({int(value) // MiB} MiB)"
    return text


def help_of(f: Field[Any], opt: Option) -> str:
    """A setting's help: the table's text and, where there is one to show, its default."""
    text = opt.help
    if opt.maximum is not None:
        text += f" At most {default_text(opt.maximum, opt.unit)}."
    if f.default is MISSING or f.default in (None, ()) or opt.switch:
        return text
    return f"{text} Default {opt.shown or default_text(f.default, opt.unit)}."


def _add(parser: Any, flag: str, alias: str, **kwargs: Any) -> None:
    """Adds an option under its dashed name and, hidden, under its underscore spelling
    (or ``alias`` where the plain spelling is taken by one of Beam's own options)."""
    parser.add_argument(flag, **kwargs)
    if alias != flag:
        hidden = {k: v for k, v in kwargs.items() if k not in ("help", "default")}
        # SUPPRESS: the alias sets nothing unless given, so the dashed option's default stands.
        parser.add_argument(alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **hidden)


def add_crawl_arguments(parser: Any) -> None:
    """Adds the crawl's own options, one per setting of the table, to an argparse parser.

    Each ``--dashed-name`` is also accepted, unlisted in help, as ``--dashed_name``: Dataflow
    Flex Template parameters are passed as ``--name=value`` with underscores.
    """
    from beamcrawl.core.runtime.config import flag_of, option_fields

    for f, opt in option_fields():
        flag = flag_of(f, opt)
        name = flag.lstrip("-")
        kwargs: dict[str, Any] = {"dest": dest_of(f, opt), "help": help_of(f, opt)}
        kind = _kind(f)
        if kind == "bool" and opt.switch:
            kwargs.update(action="store_true", default=False)
        elif kind == "bool":
            kwargs.update(type=_boolean(flag), nargs="?", const=True, default=f.default, metavar="true|false")
        elif opt.repeat:
            kwargs.update(action="append", default=[], type=_PARSERS.get(f.name, str))
        else:
            if kind in ("int", "float"):
                kwargs["type"] = _number(int if kind == "int" else float, flag)
            elif f.name in _PARSERS:
                kwargs["type"] = _PARSERS[f.name]
            # A setting the command line gives as a file (the blocklist) or not at all has no default there.
            kwargs["default"] = f.default if isinstance(f.default, (int, float, str)) else None
        if opt.choices:
            kwargs["metavar"] = "{" + ",".join(opt.choices) + "}"  # checked with the other bounds
        if kwargs.get("action") in (None, "append"):
            metavar = kwargs.get("metavar") or opt.metavar or _METAVARS.get(opt.unit) or _METAVARS.get(kind)
            if metavar:
                kwargs["metavar"] = metavar
        _add(parser, flag, opt.alias or "--" + name.replace("-", "_"), **kwargs)


def option_list(parser: argparse.ArgumentParser) -> str:
    """The parser's options as the README lists them: one Markdown item per option, in order."""
    items = []
    for action in parser._actions:  # argparse keeps no public list of its options
        if action.help == argparse.SUPPRESS or not action.option_strings or action.dest == "help":
            continue
        flag = max(action.option_strings, key=len)
        metavar = action.metavar or (action.dest.upper() if action.nargs != 0 else None)
        if action.nargs == "?":
            usage = f"{flag}[=true|false]"
        elif metavar:
            usage = f"{flag} {metavar}"
        else:
            usage = flag
        items.append(f"- `{usage}`: {action.help}")
    return "\n".join(items)


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line and exits 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


# Settings whose command-line value config_from_args turns into the setting itself.
_GIVEN_OTHERWISE = ("out", "store", "blocklist", "resolve", "signing_key", "signature_agent", "purposes")


def config_from_args(args: Any) -> CrawlConfig:
    """Builds the stages' CrawlConfig from parsed arguments (a namespace carrying the
    attributes ``add_crawl_arguments`` defines). Raises ValueError, one line: a setting out
    of its bound is refused here, by CrawlConfig, and nowhere before."""
    from beamcrawl.core.policy.usage_prefs import parse_purposes
    from beamcrawl.core.runtime.config import CrawlConfig, option_fields

    if not args.out:
        raise ValueError("--out is required")
    out = args.out if "://" in args.out else os.path.abspath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {args.out} is a file, not a folder")
    if args.store:
        from beamcrawl.stores.base import StoreError, check_store_uri

        try:
            check_store_uri(args.store)
        except StoreError as exc:
            raise ValueError(f"--store: {exc}") from None
    blocklist = _read_blocklist(args.blocklist) if args.blocklist else ()
    settings = {f.name: getattr(args, dest_of(f, opt)) for f, opt in option_fields() if f.name not in _GIVEN_OTHERWISE}
    return CrawlConfig(
        out=out,
        store=args.store or f"sqlite:///{out}/store.sqlite",
        blocklist=blocklist,
        resolve=tuple(args.resolve or ()),
        purposes=parse_purposes(args.purposes or ()),
        **_signing(args),
        **settings,
    )


def _signing(args: Any) -> dict[str, Any]:
    """The signing settings, the key read and checked now: a bad key is one line at launch,
    not an error in every fetch loop. Raises ValueError. Given one without the other, both
    go to CrawlConfig as they are, which refuses them."""
    key, agent = args.signing_key, args.signature_agent
    if not key or not agent:
        return {"signing_key": key or None, "signature_agent": agent or None}
    from beamcrawl.core.net.botauth import load_signer

    load_signer(key, agent)  # a key file, or a key folder's signing key (BotAuthError is a ValueError)
    return {"signing_key": key if "://" in key else os.path.abspath(key), "signature_agent": agent}


def _read_blocklist(path: str) -> tuple[str, ...]:
    """The ``--blocklist`` file's patterns (a local path, or any Beam filesystem URL such as
    gs://, read once when the crawl starts). Raises ValueError naming the problem."""
    from beamcrawl.core.runtime.config import parse_blocklist

    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # only for remote files

        try:
            with FileSystems.open(path) as fh:
                text = fh.read().decode("utf-8")
        except Exception as exc:  # Beam wraps every filesystem's errors differently
            raise ValueError(f"cannot read blocklist file {path}: {exc}") from None
        return parse_blocklist(text.splitlines(), path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ValueError(f"blocklist file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read blocklist file {path}: {exc}") from None
    return parse_blocklist(text.splitlines(), path)
