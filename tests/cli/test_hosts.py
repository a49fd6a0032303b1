"""``beamcrawl hosts``, run as the real command against an embedded store that holds host
records as a crawl writes them: times a person reads are ISO-8601 UTC in every answer, a
host asked for without its port is answered with the ports the crawl has, and a policy for a
host the crawl has not seen is stored with a warning (issue #27, items 8 and 9)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.schemas.records import HostRecord
from beamcrawl.stores.base import Mutation, open_store

REPO = Path(__file__).resolve().parents[2]


def beamcrawl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def parse_iso(text: str) -> float:
    assert isinstance(text, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", text), text
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def crawl_with_hosts(out: Path, *hosts: str) -> Path:
    """A crawl's folder whose store has a record of each host, as a round leaves it."""
    now = time.time()
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        store.mutate("hosts", [
            Mutation.set(h.encode(), HostRecord(host=h, delay=1.5, last_fetch_end=now - 60, resolved_at=now - 90,
                                                ip="192.0.2.7", fetches=3).to_cells())
            for h in hosts
        ])  # fmt: skip
    return out


# --- item 8: one time format wherever a person reads -------------------------------------------


def test_set_policy_prints_the_times_as_show_does(tmp_path: Path) -> None:
    out = crawl_with_hosts(tmp_path / "crawl", "site0003.ch:18811")
    before = time.time()
    proc = beamcrawl("hosts", "set-policy", "site0003.ch:18811", "--crawl", str(out), "--pause-until", "2h")
    assert proc.returncode == 0, proc.stderr
    policy = json.loads(proc.stdout)
    # ISO-8601 UTC, as `hosts show` prints it (it printed epoch floats: 1796097534.25).
    assert before + 7200 - 1 <= parse_iso(policy["pause_until"]) <= time.time() + 7200 + 1
    assert before - 1 <= parse_iso(policy["updated_at"]) <= time.time() + 1
    shown = beamcrawl("hosts", "show", "site0003.ch:18811", "--crawl", str(out))
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["policy"] == policy
    assert abs(parse_iso(view["record"]["last_fetch_end"]) - (before - 60)) < 5
    assert view["record"]["not_before"] is None  # 0: never


# --- item 9: hosts with a port, unknown hosts ------------------------------------------------------


def test_show_without_the_port_names_the_ports_the_crawl_has(tmp_path: Path) -> None:
    out = crawl_with_hosts(tmp_path / "crawl", "site0003.ch:18811", "site0003.ch:18812", "site0004.ch:18811")
    proc = beamcrawl("hosts", "show", "site0003.ch", "--crawl", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "no host site0003.ch" in proc.stderr
    assert "did you mean site0003.ch:18811 or site0003.ch:18812?" in proc.stderr, proc.stderr
    # And back: a port the crawl does not have names the ones it has.
    other = beamcrawl("hosts", "show", "site0004.ch:9999", "--crawl", str(out))
    assert other.returncode == 1 and "did you mean site0004.ch:18811?" in other.stderr, other.stderr
    # Nothing close: the plain error.
    none = beamcrawl("hosts", "show", "site0005.ch", "--crawl", str(out))
    assert none.returncode == 1 and "did you mean" not in none.stderr and "no host site0005.ch" in none.stderr


def test_set_policy_on_a_host_the_crawl_does_not_know_warns_and_stores_it(tmp_path: Path) -> None:
    out = crawl_with_hosts(tmp_path / "crawl", "site0003.ch:18811")
    proc = beamcrawl("hosts", "set-policy", "nosuch.example", "--crawl", str(out), "--block")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["blocked"] is True  # a host not seen yet may be blocked ahead
    assert proc.stderr.startswith("beamcrawl hosts set-policy: warning: nosuch.example is not a host of this crawl")
    assert proc.stderr.count("\n") == 1, proc.stderr
    # Once it has a policy it is known: no second warning; nor for a host the crawl has, or
    # for a bare name whose ports the crawl has (the policy covers them).
    for host in ("nosuch.example", "site0003.ch:18811", "site0003.ch"):
        again = beamcrawl("hosts", "set-policy", host, "--crawl", str(out), "--min-delay-ms", "2000")
        assert again.returncode == 0 and again.stderr == "", (host, again.stderr)


_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).filter(
    lambda s: not s.startswith("-") and not s.endswith("-")
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=_label, ports=st.lists(st.integers(1, 65535), min_size=1, max_size=4, unique=True), asked=st.integers(1, 65535)
)
def test_close_matches_are_exactly_the_same_name_on_other_ports(
    tmp_path: Path, name: str, ports: list[int], asked: int
) -> None:
    """Generated host names and ports: the suggestions are the name's other ports (and never
    a neighbour in key order, such as ``NAME-x`` or ``NAMEx``)."""
    from beamcrawl.cli.hosts import close_matches

    host = f"{name}.example"
    keys = [f"{host}:{p}" for p in ports]
    neighbours = [f"{name}-x.example:80", f"{name}x.example", f"{host}.evil:81", f"a{host}:82"]
    # A store of its own per example: tmp_path is shared by all of them, and two examples may
    # draw the same name with other ports (their keys must not meet in one store).
    with open_store(f"sqlite:///{tempfile.mkdtemp(dir=tmp_path)}/store.sqlite") as store:
        store.mutate("hosts", [Mutation.set(k.encode(), HostRecord(host=k).to_cells()) for k in keys + neighbours])
        assert close_matches(store, host) == sorted(keys)[:5]
        assert close_matches(store, f"{host}:{asked}") == sorted(set(keys) - {f"{host}:{asked}"})[:5]


def test_show_lists_a_hosts_refusals_in_utc_and_release_clears_them(tmp_path: Path) -> None:
    """#29: the refusal is shown with its identity, evidence and recheck; `release` clears it
    (and says so), keeping the rest of the record; a host with nothing to release is an error."""
    import io

    from beamcrawl.cli import hosts
    from beamcrawl.core.policy import refusals

    out = crawl_with_hosts(tmp_path / "crawl", "site0003.ch:18811")
    now = time.time()
    stored = refusals.note([], "status", refusals.Identity("beamcrawl", key="kid1"), {"status": 403, "url": "u"}, now)
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        record = HostRecord(host="site0003.ch:18811", delay=1.5, fetches=3, refusals=stored)
        store.mutate("hosts", [Mutation.set(b"site0003.ch:18811", record.to_cells())])
    shown = io.StringIO()
    assert hosts.main(["show", "site0003.ch:18811", "--crawl", str(out)], out=shown) == 0
    (refusal,) = json.loads(shown.getvalue())["refusals"]
    assert refusal["kind"] == "status" and refusal["identity"]["key"] == "kid1" and refusal["evidence"]["status"] == 403
    assert abs(parse_iso(refusal["until"]) - (now + 86400)) < 2 and refusal["recheck"].startswith("one URL after ")
    released = io.StringIO()
    assert hosts.main(["release", "site0003.ch:18811", "--crawl", str(out)], out=released) == 0
    assert [r["refusal"]["kind"] for r in json.loads(released.getvalue())] == ["status"]
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        cells = store.read_keys("hosts", [b"site0003.ch:18811"])[b"site0003.ch:18811"]
    back = HostRecord.from_cells("site0003.ch:18811", cells)
    assert back.refusals == [] and back.fetches == 3
    assert hosts.main(["release", "site0003.ch:18811", "--crawl", str(out)], out=io.StringIO()) == 1
