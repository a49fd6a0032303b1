"""``beamcrawl hosts``: operator steering of single hosts, applied at the next round.

    beamcrawl hosts set-policy HOST (--store URI | --crawl OUT_DIR)
                    [--min-delay-ms N] [--pause-until T] [--block | --unblock]
    beamcrawl hosts show HOST (--store URI | --crawl OUT_DIR)
    beamcrawl hosts release HOST|URL (--store URI | --crawl OUT_DIR)

``set-policy`` changes only the fields given and prints the policy it stored, as JSON, times
as ISO-8601 UTC; for a host the crawl has no record of (a typo, or a host not reached yet) it
stores the policy all the same and says so on standard error.
``--min-delay-ms 0`` removes a minimum delay; ``--pause-until`` takes an ISO-8601 time
(``2026-05-01T12:00:00Z``; without a zone it is UTC) or a duration from now (``90s``, ``30m``,
``2h``, ``1d``, ``1h30m``); ``--pause-until now`` ends a pause. ``show`` prints the host's
record (delay, clocks, robots cache, DNS) and policy as JSON, times as ISO-8601 UTC, and
what of the host is quarantined (the host itself, or URLs of it: an element that failed in
two rounds is not tried again until released; state/quarantine.py); a host the crawl has
none of these for is an error (exit 1) that names the same host on other ports, if the
crawl has it there (``site.example:8080`` for ``site.example``). ``show`` also lists the
host's refusals (core/policy/refusals.py: a 401/403 to our signed requests, a robots.txt that
singles our token out), each with the identity refused, its evidence, when it was seen and
when it is rechecked. ``release`` ends the quarantine of a host or a URL (the frontier rows it
kept all along are planned again from the next round) and clears the refusals of a host (its
due URLs are planned from the next round; a refusal seen again is recorded again), and prints
what it released.

HOST is a host name, ``host:port`` for a non-default port, or a URL (its host is used). A
policy on a bare name also applies to the host's other ports unless one has its own. Policies
live in the store's ``policies`` table; the round that starts next reads them (AssignSlots:
blocked and paused hosts get no slots and keep their URLs queued; a minimum delay raises the
host's delay, above the crawl's ceiling if need be). No Beam import: this answers at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import sys
import time
from typing import Any, Sequence, TextIO

from beamcrawl.cli.args import OneLineArgumentParser
from beamcrawl.schemas.records import HostPolicy
from beamcrawl.state.host_clock import read_host

__all__ = [
    "apply_policy", "close_matches", "host_view", "is_known", "iso_utc", "main", "no_host_message", "parse_when", "policy_key",
    "policy_view", "read_policy", "refusal_views", "release_refusals", "with_iso_times",
]  # fmt: skip

# At most this many close matches are named for a host the crawl does not have.
MAX_CLOSE_MATCHES = 5
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class HostsError(Exception):
    """A one-line problem to report (exit status 1 or 2)."""


def parse_when(text: str, now: float) -> float:
    """Epoch seconds from an ISO-8601 time or a duration from ``now`` (``2h``, ``1h30m``).

    ``now`` means now (it ends a pause). A time without a zone is taken as UTC.

    Raises:
        ValueError: Neither form.
    """
    value = text.strip()
    if value.lower() == "now":
        return now
    compact = value.lower().replace(" ", "")
    if compact and _DURATION_PART.sub("", compact) == "":
        return now + sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(compact))
    iso = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"not an ISO-8601 time or a duration like 2h or 30m: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def policy_key(host: str) -> str:
    """The store key of a host as the crawl writes it: lower-case, IDNA, default port dropped.

    Raises:
        ValueError: Not a host name (or URL).
    """
    from beamcrawl.core.urls.urlnorm import InvalidURL, host_of, normalize

    text = host.strip()
    if "://" not in text and "[" not in text and text.count(":") > 1:
        text = f"[{text}]"  # a bare IPv6 address: the crawl keys it in brackets, as URLs write it
    url = text if "://" in text else f"http://{text}/"
    try:
        return host_of(normalize(url))
    except (InvalidURL, ValueError) as exc:
        raise ValueError(f"not a host name: {host!r} ({exc})") from None


def _store_uri(args: argparse.Namespace) -> str:
    """The store named by --store or --crawl, which must already exist (a typo must not
    start an empty crawl state that no crawl reads)."""
    if args.store and args.store.startswith("bigtable://"):
        return args.store
    if args.crawl:
        path = os.path.join(os.path.abspath(args.crawl), "store.sqlite")
    else:
        raw = args.store[len("sqlite://") :] if args.store.startswith("sqlite://") else args.store
        path = os.path.abspath(os.path.expanduser(raw))
        if os.path.isdir(path):
            path = os.path.join(path, "store.sqlite")
    if not os.path.isfile(path):
        raise HostsError(f"no crawl store at {path} (give the crawl's --out as --crawl, or its --store)")
    return f"sqlite:///{path}"


def _open(args: argparse.Namespace) -> Any:
    from beamcrawl.stores.base import StoreError, open_store

    try:
        return open_store(_store_uri(args))
    except StoreError as exc:
        raise HostsError(str(exc)) from None


def read_policy(store: Any, key: str) -> HostPolicy | None:
    """The policy stored under ``key`` exactly, or None."""
    return HostPolicy.from_cells(key, store.read_keys("policies", [key.encode()]).get(key.encode()))


def apply_policy(
    store: Any,
    key: str,
    now: float,
    *,
    min_delay_ms: int | None = None,
    pause_until: float | None = None,
    block: bool | None = None,
) -> HostPolicy:
    """Changes the fields given of a host's stored policy and stores it; returns it.

    The one operation behind ``hosts set-policy`` and the control API's
    ``PUT /v1/hosts/{host}/policy``. ``min_delay_ms`` 0 removes a minimum delay; a
    ``pause_until`` not after ``now`` ends a pause.
    """
    from beamcrawl.stores.base import Mutation

    policy = read_policy(store, key) or HostPolicy(host=key)
    if min_delay_ms is not None:
        policy.min_delay_ms = min_delay_ms or None  # 0 removes it
    if pause_until is not None:
        policy.pause_until = pause_until if pause_until > now else None
    if block is not None:
        policy.blocked = block
    policy.updated_at = now
    store.mutate("policies", [Mutation.set(key.encode(), policy.to_cells())])
    return policy


def host_view(store: Any, key: str) -> dict[str, Any]:
    """A host's record and policy, as ``hosts show`` prints them and ``GET /v1/hosts/{host}``
    answers, times as ISO-8601 UTC (``policy_from``: the key the policy is stored under; a
    bare name covers ports)."""
    from beamcrawl.core.urls.hostkeys import host_key

    bare = host_key(key)  # what select looks a slot's policy up under, besides the slot
    cells = store.read_keys("hosts", [key.encode()]).get(key.encode())
    record = read_host(key, cells) if cells else None
    policy = read_policy(store, key)
    source = key if policy is not None else None
    if policy is None and bare != key:
        policy = read_policy(store, bare)
        source = bare if policy is not None else None
    from beamcrawl.state.quarantine import list_quarantine

    shown = with_iso_times(dataclasses.asdict(record)) if record is not None else None
    if shown is not None:
        shown.pop("refusals", None)  # shown once, below, with its times in UTC
    return {
        "host": key,
        "record": shown,
        "policy": policy_view(policy) if policy is not None else None,
        "policy_from": source,
        "quarantine": list_quarantine(store, key),  # the host or its URLs, set aside after failing in two rounds
        # What the host refused this crawler's identity; held while one is in force.
        "refusals": refusal_views(record.refusals) if record is not None else [],
    }


def refusal_views(stored: Any) -> list[dict[str, Any]]:
    """A host record's refusals as ``hosts show`` prints them: times as ISO-8601 UTC, and
    ``recheck`` saying when the host is asked again (the end of its back-off, or its
    robots.txt's next fetch)."""
    from beamcrawl.core.policy import refusals

    views = []
    for refusal in refusals.load(stored):
        view = refusal.to_dict()
        view.update(since=iso_utc(refusal.since), at=iso_utc(refusal.at), until=iso_utc(refusal.until))
        view["recheck"] = (
            f"one URL after {view['until']}" if refusal.until > 0 else "when its robots.txt is fetched again"
        )
        views.append(view)
    return views


def release_refusals(store: Any, key: str) -> list[dict[str, Any]]:
    """Clears the refusals in the host record under ``key``; returns those cleared (as
    :func:`refusal_views` shows them). The host's due URLs are planned from the next round."""
    from beamcrawl.schemas.records import HostRecord
    from beamcrawl.stores.base import Mutation

    cells = store.read_keys("hosts", [key.encode()]).get(key.encode())
    if not cells:
        return []
    record = HostRecord.from_cells(key, cells)
    if not record.refusals:
        return []
    cleared = refusal_views(record.refusals)
    record.refusals = []
    store.mutate("hosts", [Mutation.set(key.encode(), record.to_cells())])
    return cleared


def is_known(view: dict[str, Any]) -> bool:
    """Whether a :func:`host_view` found anything of the host (record, policy or quarantine)."""
    return view["record"] is not None or view["policy"] is not None or bool(view["quarantine"])


def close_matches(store: Any, key: str, limit: int = MAX_CLOSE_MATCHES) -> list[str]:
    """The keys of the same host name on another port (or without one) that the crawl has a
    record or policy for: ``site.example:8080`` for ``site.example``, and back.

    Two range scans of ``NAME:`` .. ``NAME;`` (``;`` sorts right after ``:``) and one key-set
    read of the bare name, so it costs the same on a crawl of any size.
    """
    from beamcrawl.core.urls.hostkeys import host_key

    bare = host_key(key)
    found: set[str] = set()
    for table in ("hosts", "policies"):
        if bare != key and store.read_keys(table, [bare.encode()], keys_only=True):
            found.add(bare)
        rows = store.read_range(table, f"{bare}:".encode(), f"{bare};".encode(), keys_only=True, limit=limit + 1)
        found.update(row_key.decode("utf-8", "replace") for row_key, _ in rows)
    found.discard(key)
    return sorted(found)[:limit]


def no_host_message(store: Any, key: str) -> str:
    """``no host KEY in this crawl ...``, naming the close matches when there are some."""
    matches = close_matches(store, key)
    hint = f"; did you mean {' or '.join(matches)}?" if matches else ""
    return f"no host {key} in this crawl (neither a record nor a policy){hint}"


def set_policy(args: argparse.Namespace, out: TextIO, now: float | None = None) -> int:
    now = time.time() if now is None else now
    if args.min_delay_ms is None and args.pause_until is None and args.block is None:
        raise HostsError("nothing to set: give --min-delay-ms, --pause-until, --block or --unblock")
    key = policy_key(args.host)
    pause = parse_when(args.pause_until, now) if args.pause_until is not None else None
    with _open(args) as store:
        unknown = not is_known(host_view(store, key)) and not close_matches(store, key, limit=1)
        policy = apply_policy(store, key, now, min_delay_ms=args.min_delay_ms, pause_until=pause, block=args.block)
    if unknown:  # a typo would steer nothing; a host not seen yet is still a fair target
        print(
            f"beamcrawl hosts set-policy: warning: {key} is not a host of this crawl yet (no record, "
            "no policy); the policy is stored and applies when the crawl reaches it",
            file=sys.stderr,
        )
    json.dump(policy_view(policy), out, sort_keys=True)
    out.write("\n")
    return 0


# The record and policy fields that hold epoch seconds (0 or None: never).
_TIME_FIELDS = frozenset(
    {"last_fetch_end", "not_before", "robots_fetched_at", "robots_good_at", "robots_failing_since",
     "resolved_at", "pause_until", "updated_at"}
)  # fmt: skip


def iso_utc(epoch: float | None) -> str | None:
    """``2026-05-01T12:00:00.250Z`` for epoch seconds; None for 0 or None (never)."""
    if not epoch:
        return None
    when = dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def with_iso_times(fields: dict[str, Any]) -> dict[str, Any]:
    """A record's or policy's fields with its times as ISO-8601 UTC strings."""
    return {
        k: iso_utc(v) if k in _TIME_FIELDS and isinstance(v, (int, float, type(None))) else v for k, v in fields.items()
    }


def policy_view(policy: HostPolicy) -> dict[str, Any]:
    """A policy as ``hosts set-policy`` prints it and the API answers: times as ISO-8601 UTC."""
    return with_iso_times(dataclasses.asdict(policy))


def show(args: argparse.Namespace, out: TextIO) -> int:
    key = policy_key(args.host)
    with _open(args) as store:
        shown = host_view(store, key)
        if not is_known(shown):
            raise HostsError(no_host_message(store, key))
    json.dump(shown, out, indent=2, sort_keys=True)
    out.write("\n")
    return 0


def release(args: argparse.Namespace, out: TextIO) -> int:
    from beamcrawl.state.quarantine import release as release_element

    with _open(args) as store:
        released = release_element(store, args.host.strip())
        try:
            key = policy_key(args.host) if "://" not in args.host else None
        except ValueError:
            key = None
        if key is not None:
            released += [{"host": key, "refusal": view} for view in release_refusals(store, key)]
    if not released:
        raise HostsError(
            f"nothing quarantined, failing or refused under {args.host!r} (see: beamcrawl export quarantine, "
            "beamcrawl hosts show)"
        )
    json.dump(released, out, sort_keys=True)
    out.write("\n")
    return 0


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog="beamcrawl hosts", description="Steer single hosts of a crawl.")
    sub = parser.add_subparsers(dest="action", metavar="{set-policy,show,release}")
    for name, helptext in (
        ("set-policy", "Block, pause or slow a host from the next round on."),
        ("show", "Print a host's record, policy and quarantine as JSON."),
        ("release", "End the quarantine of a host or URL (HOST may be a URL), and a host's refusals."),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.error = parser.error  # type: ignore[method-assign]  # one-line errors here too
        p.add_argument("host", metavar="HOST")
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--store", metavar="URI", help="The crawl's store URI.")
        where.add_argument("--crawl", metavar="OUT_DIR", help="The crawl's --out folder (its embedded store).")
        if name == "set-policy":
            p.add_argument(
                "--min-delay-ms",
                dest="min_delay_ms",
                type=_non_negative_int,
                default=None,
                help="Minimum gap between requests in ms (0 removes it).",
            )
            p.add_argument(
                "--pause-until",
                dest="pause_until",
                metavar="T",
                default=None,
                help="ISO-8601 time or duration (2h, 30m, 1d); 'now' ends a pause.",
            )
            block = p.add_mutually_exclusive_group()
            block.add_argument("--block", dest="block", action="store_const", const=True, default=None)
            block.add_argument("--unblock", dest="block", action="store_const", const=False)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Runs ``beamcrawl hosts``; returns the exit status (2 bad usage, 1 store problem)."""
    out = out or sys.stdout
    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.action is None:
        parser.print_usage(sys.stderr)
        return 2
    try:
        if args.action == "set-policy":
            return set_policy(args, out)
        if args.action == "release":
            return release(args, out)
        return show(args, out)
    except ValueError as exc:
        print(f"beamcrawl hosts {args.action}: error: {exc}", file=sys.stderr)
        return 2
    except HostsError as exc:
        print(f"beamcrawl hosts {args.action}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
