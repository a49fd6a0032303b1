"""Which crawl an output folder belongs to: checked before a crawl writes anything there.

A crawl's ``--out`` folder and its store are one crawl. On its first run the crawl records
who it is twice: in the store's ``meta`` table (an id and the output folder) and in the
folder (``OUT/crawl.json``: the same id and the store). A later run on the folder must
name the same store (``--store``, or none for the embedded store under the folder), and
that store must hold the same crawl, else it is refused in one line naming the store the
folder belongs to: two crawls never share round numbers in one folder, and nothing one
crawl wrote is overwritten by another.

A folder is accepted for a new crawl only when it is missing or empty; a folder holding
other files (and no crawl's output) is refused, and so is a new crawl with no seeds.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beamcrawl.core.runtime import files
from beamcrawl.pipelines.crawl_errors import CrawlError
from beamcrawl.stores.base import Mutation, Store

__all__ = ["IDENTITY_FILE", "Claim", "FolderRefused", "check_folder", "claim", "folder_state", "store_name"]

IDENTITY_FILE = "crawl.json"
CRAWL_KEY = b"crawl"
# What a crawl writes at the top of its output folder (a folder holding any of these, and
# no identity file, is an earlier version's crawl output).
CRAWL_ENTRIES = frozenset(
    {IDENTITY_FILE, "store.sqlite", "warc", "pages", "links", "errors", "reports", "logs", "_staging", "status.json"}
)
# Names that leave a folder "empty": the demo's marker (cli/demo.py writes it before it
# crawls into the folder) and file managers' litter.
IGNORED = frozenset({".beamcrawl-demo", ".DS_Store", "Thumbs.db"})
_EMBEDDED_SUFFIXES = (".sqlite", ".sqlite3", ".db")  # as stores/embedded.py reads a path


class FolderRefused(CrawlError):
    """The output folder or the store is another crawl's, or a new crawl lacks seeds: a
    usage error, raised before a round runs."""


def store_name(uri: str) -> str:
    """The store a URI names, in one spelling: ``sqlite://`` and the absolute path for the embedded
    store (a folder names its ``store.sqlite``), the URI without a trailing ``/`` otherwise."""
    if uri.startswith("bigtable://"):
        return uri.rstrip("/")
    raw = uri[len("sqlite://") :] if uri.startswith("sqlite://") else uri
    path = Path(raw).expanduser().absolute()
    if path.is_dir() or (not path.is_file() and path.suffix.lower() not in _EMBEDDED_SUFFIXES):
        path = path / "store.sqlite"
    return "sqlite:///" + os.path.normpath(path).lstrip("/")


def _default_store(out: str) -> str:
    return store_name(f"sqlite:///{out}/store.sqlite")


def _spoken(name: str, out: str) -> str:
    """How a user names the store on the command line."""
    if not files.is_remote(out) and name == _default_store(out):
        return f"the embedded store {out}/store.sqlite (give no --store)"
    return f"--store {name}"


@dataclass(frozen=True)
class Folder:
    """What an output folder holds: ``new`` (missing or empty), ``crawl`` (a crawl's output)
    or ``foreign`` (other files); ``identity`` is its ``crawl.json`` when it has one."""

    kind: str
    identity: dict[str, str] | None = None
    rounds_written: int = 0  # the highest round with a report in the folder


def folder_state(out: str) -> Folder:
    """Looks at ``out`` without changing it."""
    marker = files.join(out, IDENTITY_FILE)
    identity = None
    try:
        with files.open_read(marker) as fh:
            identity = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        if not files.is_remote(out) or "not found" not in str(exc).lower():
            raise CrawlError(f"--out {out}: cannot read {IDENTITY_FILE}: {exc}") from None
    reports = [os.path.basename(p) for p in files.list_files(files.join(out, "reports"))]
    rounds = max((int(m.group(1)) for m in map(re.compile(r"round-(\d+)\.json$").match, reports) if m), default=0)
    if identity is not None:
        return Folder("crawl", identity if isinstance(identity, dict) else {}, rounds)
    if files.is_remote(out):  # an object store has no folders to list cheaply: judged by its reports
        return Folder("crawl" if rounds else "new", None, rounds)
    if not os.path.isdir(out):
        return Folder("new")
    names = set(os.listdir(out)) - IGNORED
    if not names:
        return Folder("new")
    if names & CRAWL_ENTRIES:
        return Folder("crawl", None, rounds)
    return Folder("foreign")


@dataclass(frozen=True)
class Claim:
    """The crawl a run goes on: its id, and whether this run starts it."""

    crawl_id: str
    new: bool


def check_folder(out: str, store_uri: str, has_seeds: bool) -> Folder:
    """Refuses, before anything is created, a folder that is not this crawl's.

    Raises:
        CrawlError: ``out`` holds other files, belongs to another store, or is new and no
            seeds were given while the store is new too (the embedded default).
    """
    folder = folder_state(out)
    if folder.kind == "foreign":
        shown = sorted(set(os.listdir(out)) - IGNORED)
        listed = ", ".join(shown[:3]) + (", ..." if len(shown) > 3 else "")
        raise FolderRefused(
            f"--out {out} is not empty and not a crawl's output (it holds {listed}); give a new or empty folder"
        )
    if folder.identity is not None:
        recorded = folder.identity.get("store", "")
        if recorded.startswith("./"):  # the embedded store inside the folder, moved with it
            recorded = store_name(files.join(out, recorded[2:]))
        if store_name(store_uri) != recorded:
            raise FolderRefused(
                f"--out {out} belongs to the crawl on {_spoken(recorded, out)}, not {_spoken(store_name(store_uri), out)}; "
                "run it with that store, or give another --out for another crawl"
            )
    else:
        name = store_name(store_uri)
        missing = name.startswith("sqlite:///") and not os.path.exists(name[len("sqlite://") :])
        if folder.rounds_written and missing:  # a new embedded store would start again at round 1
            raise FolderRefused(_not_run(out, folder.rounds_written, name))
        if folder.kind == "new" and not has_seeds and missing:
            raise FolderRefused(f"--out {out} holds no crawl yet: a new crawl needs --seeds FILE")
    return folder


def _not_run(out: str, rounds: int, name: str) -> str:
    return (
        f"--out {out} holds rounds up to {rounds} that {_spoken(name, out)} has not run: "
        "it is another crawl's output; give another --out"
    )


def claim(
    store: Store, out: str, store_uri: str, folder: Folder, has_seeds: bool, purposes: tuple[str, ...] = ()
) -> Claim:
    """Checks that ``store`` holds the folder's crawl (or none yet), then records the crawl in
    the store and the folder if this run starts it.

    The crawl's declared purposes (``--purpose``) are part of its identity: written into
    ``crawl.json`` as ``purposes`` when there are any, and updated there when a later run
    declares others (a run without them leaves a folder that never had them as it was).

    Raises:
        CrawlError: The store holds another crawl, or none while the folder names one, or
            the folder holds rounds this store has not run, or a new crawl has no seeds.
    """
    from beamcrawl.pipelines.commit import next_round

    row = store.read_keys("meta", [CRAWL_KEY]).get(CRAWL_KEY, {})
    stored_id = row.get("m:id", b"").decode() or None
    stored_out = row.get("m:out", b"").decode()
    name = store_name(store_uri)
    if folder.identity is not None:
        mine = folder.identity.get("crawl_id")
        if stored_id != mine:
            what = f"another crawl (its output folder: {stored_out})" if stored_id else "no crawl (was it emptied?)"
            raise FolderRefused(
                f"--out {out} belongs to crawl {mine}, but {_spoken(name, out)} holds {what}; "
                "its rounds would overwrite this folder's: give another --out"
            )
        if list(purposes) != list(folder.identity.get("purposes") or []):
            _update_identity(out, folder.identity, purposes)
        return Claim(mine, new=False)
    if stored_id is not None and stored_out == out:
        # A run killed between recording the crawl in the store and in the folder.
        _write_identity(out, stored_id, name, purposes)
        return Claim(stored_id, new=False)
    if stored_id is not None:
        raise FolderRefused(
            f"{_spoken(name, out)} belongs to the crawl whose output is {stored_out}; give --out {stored_out}"
        )
    first = next_round(store)
    if folder.rounds_written >= first:
        raise FolderRefused(_not_run(out, folder.rounds_written, name))
    if first == 1 and not has_seeds and not any(True for _ in store.read_range("frontier", keys_only=True, limit=1)):
        raise FolderRefused(f"--out {out} holds no crawl yet: a new crawl needs --seeds FILE")
    crawl_id = uuid.uuid4().hex
    # The folder first, then the id (a kill between the two leaves no id without its folder);
    # the folder again once the id is ours, in case a crawl starting at once wrote its own.
    store.mutate("meta", [Mutation.set(CRAWL_KEY, {"m:out": out.encode()})])
    if not store.check_and_set("meta", CRAWL_KEY, "m:id", None, crawl_id.encode()):
        raise FolderRefused(f"{_spoken(name, out)} was claimed by another crawl starting at the same time")
    store.mutate("meta", [Mutation.set(CRAWL_KEY, {"m:out": out.encode()})])
    _write_identity(out, crawl_id, name, purposes)
    return Claim(crawl_id, new=True)


def _update_identity(out: str, identity: dict[str, Any], purposes: tuple[str, ...]) -> None:
    """Rewrites ``OUT/crawl.json`` with this run's purposes, the rest as it was."""
    updated = {k: v for k, v in identity.items() if k != "purposes"}
    if purposes:
        updated["purposes"] = list(purposes)
    files.write_bytes(files.join(out, IDENTITY_FILE), (json.dumps(updated, indent=2) + "\n").encode())


def _write_identity(out: str, crawl_id: str, name: str, purposes: tuple[str, ...] = ()) -> None:
    """Writes ``OUT/crawl.json``; the embedded store inside the folder is named relative to
    it, so that the folder moves with its store."""
    embedded_here = (
        not files.is_remote(out)
        and name.startswith("sqlite:///")
        and (os.path.dirname(name[len("sqlite://") :]) == os.path.normpath(out))
    )
    identity: dict[str, Any] = {
        "crawl_id": crawl_id,
        "store": f"./{os.path.basename(name)}" if embedded_here else name,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "beamcrawl: this folder is the output of one crawl; a run with another store is refused",
    }
    if purposes:
        identity["purposes"] = list(purposes)
    files.write_bytes(files.join(out, IDENTITY_FILE), (json.dumps(identity, indent=2) + "\n").encode())
