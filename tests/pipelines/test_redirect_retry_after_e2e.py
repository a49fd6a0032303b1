"""A page's redirect with Retry-After: its target is not requested before the wait is over.

RFC 9110 §10.2.3: sent with any 3xx, Retry-After is the minimum time the user agent is asked
to wait before issuing the redirected request. A page's redirect queues its target as a URL
of its own, fetched in a later round; the target's request must not come before the hold,
whatever the status (301, 302, 307, 308), the form (delay-seconds or an HTTP-date) and
whether the target is on the redirecting host or another one. A value that is neither form
is ignored, as it is on every other response: the target is fetched as any other.

Checked from the server's side: a raw loopback server answers each source path with its
redirect and logs when every request came. The crawl runs a round, then again and again
(``--rounds 1 --exit-when-idle``, as a scheduled crawl is run) until every target was asked
for or the time is up.
"""

from __future__ import annotations

import email.utils
import math
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from loopback import AnsweringServer  # tests/loopback.py

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TARGET = "dst.ra.test"
# Longer than a round takes to commit and the next to start fetching (about 10 s in
# process), so that a target queued due at once is asked for well before its hold ends.
WAITS = st.integers(min_value=15, max_value=22)
INVALID = ("soon", "1.5", "-3", "\u00b2", "Mon, 99 Foo 2026 00:00:00 GMT")
FETCH = ["--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.2", "--round-window", "5",
         "--runner", "FnApiRunner"]  # fmt: skip


@dataclass(frozen=True)
class Spec:
    status: int
    form: str  # seconds | date | invalid
    wait: int  # seconds (invalid: the index of its value in INVALID)
    same_host: bool


SPECS = st.builds(
    Spec,
    status=st.sampled_from((301, 302, 307, 308)),
    form=st.sampled_from(("seconds", "date", "invalid")),
    wait=WAITS,
    same_host=st.booleans(),
)


class RetryAfterWeb(AnsweringServer):
    """Source ``/r{i}`` on ``src{i}.ra.test`` answers with spec ``i``'s redirect to ``/t{i}``
    on its own host or on :data:`TARGET`; a target is a page without links; robots.txt is
    404. Logs ``(host, path, start)`` of every request, and each redirect's hold as the
    server measures it (epoch seconds, from just before the answer was written)."""

    def __init__(self, specs: list[Spec]) -> None:
        super().__init__()
        self.specs = specs
        self.holds: dict[int, float] = {}

    def _answer(self, host: str, path: str) -> tuple[int, list[str], bytes]:
        if path.startswith("/r") and host == f"src{path[2:]}.ra.test":
            i = int(path[2:])
            spec = self.specs[i]
            target = host if spec.same_host else TARGET
            now = time.time()
            if spec.form == "seconds":
                value = str(spec.wait)
                self.holds[i] = now + spec.wait
            elif spec.form == "date":
                at = math.ceil(now) + spec.wait
                value = email.utils.formatdate(at, usegmt=True)
                self.holds[i] = at
            else:
                value = INVALID[spec.wait % len(INVALID)]
            headers = [f"Location: http://{target}:{self.port}/t{i}", f"Retry-After: {value}"]
            return spec.status, headers, b""
        if path.startswith("/t") and path[2:].isdigit():
            return 200, ["Content-Type: text/html"], b"<html><body>the target</body></html>"
        return 404, ["Content-Type: text/plain"], b"not here"


def _crawl(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "crawl", *args, *FETCH],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# A crawl an example: a few, and a failing one reported as drawn (each shrink step is a crawl).
@settings(
    max_examples=2,
    deadline=None,
    phases=(Phase.generate,),
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(specs=st.lists(SPECS, min_size=3, max_size=5))
def test_a_page_redirects_target_is_not_asked_for_before_its_retry_after(tmp_path_factory, specs):
    work = tmp_path_factory.mktemp("retry_after")
    out = work / "out"
    with RetryAfterWeb(specs) as web:
        (work / "seeds.txt").write_text("".join(f"http://src{i}.ra.test:{web.port}/r{i}\n" for i in range(len(specs))))
        _crawl("--seeds", str(work / "seeds.txt"), "--out", str(out), "--rounds", "1")
        assert {p for _h, p, _s, _e in web.log if p.startswith("/r") and p[2:].isdigit()} == {
            f"/r{i}" for i in range(len(specs))
        }
        give_up = time.time() + max(s.wait for s in specs) + 120
        while time.time() < give_up and not {f"/t{i}" for i in range(len(specs))} <= {p for _h, p, _s, _e in web.log}:
            # A scheduled crawl: a round when something is due, else an exit at once.
            _crawl("--out", str(out), "--rounds", "1", "--exit-when-idle")
            time.sleep(0.5)
        log, holds = list(web.log), dict(web.holds)
    asked: dict[str, float] = {}
    for _h, p, s, _e in log:
        asked.setdefault(p, s)  # its first request
    for i, spec in enumerate(specs):
        assert f"/t{i}" in asked, f"{spec}: the target was never asked for"
        if i in holds:
            early = holds[i] - asked[f"/t{i}"]
            assert early <= 0.005, f"{spec}: the target was asked for {early:.2f} s before the Retry-After ended"


# A request that starts this soon after the redirect's answer ended set out as the answer
# travelled (a target on another host, its turn come): the crawler had not read the answer.
IN_FLIGHT = 0.05


class KnownTargetWeb(RetryAfterWeb):
    """:class:`RetryAfterWeb` whose targets are known before their redirect is answered (they
    are seeds too), and answer their first request with ``503, Retry-After: 1``: a target asked
    for first has a retry due a second later, long before its redirect's hold ends."""

    def _answer(self, host: str, path: str) -> tuple[int, list[str], bytes]:
        if path.startswith("/t") and path[2:].isdigit() and not any(p == path for _h, p, _s, _e in self.log):
            return 503, ["Retry-After: 1", "Content-Type: text/plain"], b"busy"
        return super()._answer(host, path)


@settings(
    max_examples=2,
    deadline=None,
    phases=(Phase.generate,),
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(specs=st.lists(SPECS.filter(lambda s: s.form != "invalid"), min_size=2, max_size=4))
def test_a_known_target_is_not_asked_for_again_before_its_redirects_retry_after(tmp_path_factory, specs):
    """The target is already known when its redirect's answer comes (seeded with it, in the
    same round): fetched first, its quick retry waits for the hold; not fetched yet, its
    queued visit does. No request for it starts between the redirect's answer and the end
    of the wait; one that set out as the answer was on its way (within :data:`IN_FLIGHT`)
    could not have known it."""
    work = tmp_path_factory.mktemp("retry_after_known")
    out = work / "out"
    with KnownTargetWeb(specs) as web:
        seeds = []
        for i, spec in enumerate(specs):
            target = f"src{i}.ra.test" if spec.same_host else TARGET
            seeds += [f"http://src{i}.ra.test:{web.port}/r{i}\n", f"http://{target}:{web.port}/t{i}\n"]
        (work / "seeds.txt").write_text("".join(seeds))
        crawl = ("--min-revisit-interval", "1")  # a 503's retry is due when its Retry-After ends
        _crawl("--seeds", str(work / "seeds.txt"), "--out", str(out), "--rounds", "1", *crawl)

        def answered() -> dict[str, float]:  # each redirect's answer: when it ended
            return {p: e for _h, p, _s, e in web.log if p.startswith("/r") and p[2:].isdigit()}

        def asked_after() -> set[str]:
            ends = answered()
            return {
                p for _h, p, s, _e in web.log if p.startswith("/t") and s > ends.get("/r" + p[2:], math.inf) + IN_FLIGHT
            }

        assert set(answered()) == {f"/r{i}" for i in range(len(specs))}
        give_up = time.time() + max(s.wait for s in specs) + 120
        while time.time() < give_up and not {f"/t{i}" for i in range(len(specs))} <= asked_after():
            _crawl("--out", str(out), "--rounds", "1", "--exit-when-idle", *crawl)
            time.sleep(0.5)
        log, holds, ends = list(web.log), dict(web.holds), answered()
    for i, spec in enumerate(specs):
        later = [s for _h, p, s, _e in log if p == f"/t{i}" and s > ends[f"/r{i}"] + IN_FLIGHT]
        assert later, f"{spec}: the target was never asked for after its redirect"
        early = holds[i] - min(later)
        assert early <= 0.005, f"{spec}: the known target was asked for {early:.2f} s before the Retry-After ended"
