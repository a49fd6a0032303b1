"""The operator control API (``beamcrawl api``): its checks as plain functions, its OpenAPI
document against its routes, and the server itself, started as a subprocess and spoken to
with a real HTTP client: auth refused and accepted, bad bodies, and policies and work set
through it obeyed by the next crawl round (checked from simweb's request log)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.cli import api
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import open_store

TOKEN = "test-token-0123456789abcdef"


# --- pure checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, status, needle",
    [
        (b"{", 400, "not JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b"\xff\xfe", 400, "UTF-8"),
        (b" " * (api.MAX_BODY_BYTES + 1), 413, "larger than"),
        (b"[" * 500_000, 400, "nested too deeply"),
        (b'{"a":' * 200_000, 400, "nested too deeply"),
    ],
)
def test_bodies_are_refused_with_a_reason(raw, status, needle):
    with pytest.raises(api.ApiError) as info:
        api.parse_json_body(raw)
    assert info.value.status == status and needle in info.value.message


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"urls": ["http://a.example/"]}, "reason is required"),
        ({"urls": [], "reason": "r"}, "must not be empty"),
        ({"urls": "http://a.example/", "reason": "r"}, "urls must be a list"),
        ({"urls": [1], "reason": "r"}, "urls must be a list"),
        ({"urls": ["http://a.example/"], "reason": "r", "priority": "urgent"}, "priority must be one of"),
        ({"urls": ["http://a.example/"], "reason": "r", "kind": "pdf"}, "kind must be one of"),
        ({"urls": ["http://a.example/"], "reason": ""}, "reason must not be empty"),
        ({"urls": ["http://a.example/"], "reason": "x" * 201}, "longer than 200"),
        ({"urls": ["http://a.example/"], "reason": "r", "color": "red"}, "unknown field(s): color"),
        ({"urls": ["http://a.example/"] * (api.MAX_URLS + 1), "reason": "r"}, "at most"),
    ],
)
def test_crawl_requests_are_checked_like_submit(body, needle):
    with pytest.raises(api.ApiError) as info:
        api.parse_crawl_request(body)
    assert info.value.status == 400 and needle in info.value.message, info.value.message


def test_a_good_crawl_request():
    request = api.parse_crawl_request({"urls": ["http://a.example/"], "reason": "operator", "priority": "high"})
    assert request.urls == ("http://a.example/",) and request.priority == "high" and request.kind == "auto"


@pytest.mark.parametrize(
    "body, needle",
    [
        ({}, "nothing to set"),
        ({"min_delay_ms": -1}, "min_delay_ms"),
        ({"min_delay_ms": 1.5}, "min_delay_ms"),
        ({"min_delay_ms": True}, "min_delay_ms"),
        ({"min_delay_ms": "100"}, "min_delay_ms"),
        ({"blocked": "yes"}, "blocked must be true or false"),
        ({"blocked": 1}, "blocked must be true or false"),
        ({"pause_until": "soon"}, "pause_until"),
        ({"pause_until": 12}, "pause_until must be a string"),
        ({"pause_until": "1" * 400 + "d"}, "within ten years"),
        ({"block": True}, "unknown field(s): block"),
    ],
)
def test_policy_changes_are_checked(body, needle):
    with pytest.raises(api.ApiError) as info:
        api.parse_policy_change(body, now=1000.0)
    assert info.value.status == 400 and needle in info.value.message, info.value.message


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    crawl=st.dictionaries(st.sampled_from(["urls", "priority", "reason", "kind", "other"]), _json),
    policy=st.dictionaries(st.sampled_from(["min_delay_ms", "pause_until", "blocked", "other"]), _json),
    raw=st.binary(max_size=200),
)
def test_any_body_is_taken_or_refused_with_400(crawl, policy, raw):
    """Hostile bodies: each is a request or a 400, never an exception that would be a 500."""
    for parse, body in ((api.parse_crawl_request, crawl), (lambda b: api.parse_policy_change(b, 1000.0), policy)):
        try:
            parse(body)
        except api.ApiError as exc:
            assert exc.status == 400 and exc.message and "\n" not in exc.message
    try:
        api.parse_json_body(raw)
    except api.ApiError as exc:
        assert exc.status == 400


def test_a_good_policy_change():
    change = api.parse_policy_change({"min_delay_ms": 0, "pause_until": "2h", "blocked": False}, now=1000.0)
    assert change == api.PolicyChange(min_delay_ms=0, pause_until=1000.0 + 7200, blocked=False)
    assert api.parse_policy_change({"blocked": True}, now=0) == api.PolicyChange(blocked=True)


def test_path_parameters():
    assert api.parse_host("Example.COM:80") == "example.com"
    assert api.parse_round("12") == 12
    for bad in ("0", "-1", "x", "1.5", "\u0661", "9" * 12):
        with pytest.raises(api.ApiError):
            api.parse_round(bad)
    with pytest.raises(api.ApiError):
        api.parse_host("a b")


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_only_the_exact_bearer_token_passes(given_token):
    assert api.check_token(f"Bearer {given_token}", TOKEN) == (given_token.strip() == TOKEN)
    assert not api.check_token(given_token, TOKEN) or given_token.lower().startswith("bearer ")
    assert api.check_token(f"bearer {TOKEN}", TOKEN)
    assert not api.check_token(None, TOKEN) and not api.check_token(f"Basic {TOKEN}", TOKEN)


def test_token_sources(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    assert api.read_token(str(path), {}) == TOKEN
    assert api.read_token(None, {api.TOKEN_ENV: TOKEN}) == TOKEN
    for file, env, needle in (
        (None, {}, "no API token"),
        (str(tmp_path / "nope"), {}, "cannot read"),
        (None, {api.TOKEN_ENV: "short"}, "at least 16"),
    ):
        with pytest.raises(api.ApiError, match=needle):
            api.read_token(file, env)


def test_openapi_document_matches_the_routes(tmp_path):
    app = api.make_app(api._Crawl(f"sqlite:///{tmp_path}/store.sqlite", None), TOKEN)
    routes = {(r.method.lower(), r.resource.canonical) for r in app.router.routes()}
    documented = {(m, path) for path, ops in api.OPENAPI["paths"].items() for m in ops}
    assert routes == documented
    assert api.OPENAPI["openapi"].startswith("3.")
    for path, ops in api.OPENAPI["paths"].items():
        for op in ops.values():
            params = {p["name"] for p in op.get("parameters", [])}
            assert params == {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}, path


# --- the server, as a subprocess -------------------------------------------------------------


@contextmanager
def running_api(*args: str, env_token: str | None = TOKEN):
    env = dict(os.environ)
    env.pop(api.TOKEN_ENV, None)
    if env_token is not None:
        env[api.TOKEN_ENV] = env_token
    proc = subprocess.Popen(
        [sys.executable, "-m", "beamcrawl.cli.main", "api", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith("beamcrawl api listening on http://127.0.0.1:"), (
            line,
            proc.stderr.read() if proc.poll() is not None else "",
        )
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def call(
    base: str,
    method: str,
    path: str,
    body=None,
    token: str | None = TOKEN,
    raw: bytes | None = None,
    headers: dict | None = None,
):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(base + path, data=data, method=method, headers=dict(headers or {}))
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def crawl_dir(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with open_store(f"sqlite:///{out}/store.sqlite"):
        pass
    return out


def test_refuses_to_start_without_a_token(crawl_dir):
    proc = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "api", "--crawl", str(crawl_dir), "--port", "0"],
        capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items() if k != api.TOKEN_ENV},
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("beamcrawl api: error: no API token") and proc.stderr.count("\n") == 1


def test_refuses_a_crawl_without_a_store(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "api", "--crawl", str(tmp_path / "nowhere"), "--port", "0"],
        capture_output=True, text=True, timeout=60, env={**os.environ, api.TOKEN_ENV: TOKEN},
    )  # fmt: skip
    assert proc.returncode == 1 and "no crawl store" in proc.stderr and proc.stderr.count("\n") == 1


def test_auth_refused_and_accepted(crawl_dir, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("file-token-abcdefghijklmnop\n")
    with running_api("--crawl", str(crawl_dir), "--token-file", str(token_file)) as base:
        for token, headers in (
            (None, {}),
            ("wrong-token-abcdefghijklmnop", {}),
            (None, {"Authorization": "file-token-abcdefghijklmnop"}),
            (TOKEN, {}),
        ):  # the environment's token is not the file's
            for method, path, body in (
                ("GET", "/v1/rounds", None),
                ("GET", "/v1/hosts/a.example", None),
                ("PUT", "/v1/hosts/a.example/policy", {"blocked": True}),
                ("POST", "/v1/crawl-requests", {"urls": ["http://a.example/"], "reason": "r"}),
                ("GET", "/v1/openapi.json", None),
                ("GET", "/no/such/route", None),
            ):
                assert call(base, method, path, body, token=token, headers=headers) == (401, {"error": "unauthorized"})
        # Nothing was stored by the refused requests.
        assert call(base, "GET", "/v1/hosts/a.example/policy", token="file-token-abcdefghijklmnop")[0] == 404
        assert call(base, "GET", "/v1/rounds", token="file-token-abcdefghijklmnop") == (200, {"rounds": []})
        assert call(base, "GET", "/healthz", token=None) == (200, {"status": "ok"})
        status, doc = call(base, "GET", "/v1/openapi.json", token="file-token-abcdefghijklmnop")
        assert status == 200 and doc == json.loads(json.dumps(api.OPENAPI))


def test_bad_requests_get_clear_errors(crawl_dir):
    with running_api("--crawl", str(crawl_dir)) as base:
        status, answer = call(base, "POST", "/v1/crawl-requests", raw=b"{not json")
        assert status == 400 and answer["error"].startswith("body is not JSON")
        status, answer = call(
            base, "POST", "/v1/crawl-requests", {"urls": ["http://a.example/"], "reason": "r", "priority": "now"}
        )
        assert status == 400 and "priority must be one of" in answer["error"]
        status, answer = call(base, "PUT", "/v1/hosts/a.example/policy", {"min_delay_ms": -5})
        assert status == 400 and "min_delay_ms" in answer["error"]
        status, answer = call(base, "PUT", "/v1/hosts/a%20b/policy", {"blocked": True})
        assert status == 400 and "not a host name" in answer["error"]
        status, answer = call(base, "GET", "/v1/rounds/zero")
        assert status == 400 and "round must be" in answer["error"]
        assert call(base, "GET", "/v1/rounds/3") == (404, {"error": "no report for round 3"})
        assert call(base, "DELETE", "/v1/rounds")[0] == 405
        big = json.dumps({"urls": ["http://a.example/" + "x" * 1000] * 1100, "reason": "r"}).encode()
        assert len(big) > api.MAX_BODY_BYTES
        status, answer = call(base, "POST", "/v1/crawl-requests", raw=big)
        assert status == 413 and "larger than" in answer["error"]
        # The server is still there, and the store holds none of it: the host is unknown (404).
        assert call(base, "GET", "/v1/hosts/a.example") == (
            404,
            {"error": "no host a.example in this crawl (neither a record nor a policy)"},
        )


# --- policies and work set through the API, obeyed by the next round ------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", *args], capture_output=True, text=True, timeout=600
    )


def test_policy_and_work_set_through_the_api_are_obeyed_by_the_next_round(tmp_path):
    out = tmp_path / "out"
    slow_ms = 1500
    with running_simweb(str(tmp_path), hosts=6, seed=11, pages_per_host=40) as web:
        blocked, slowed, other = web.hosts[0], web.hosts[1], web.hosts[2]
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        common = ("--out", str(out), "--resolve", "*=127.0.0.1", "--allow-private-networks",
                  "--min-delay", "0.2", "--round-window", "4", "--runner", "FnApiRunner")  # fmt: skip
        first = _cli("crawl", "--seeds", str(seeds), "--rounds", "1", *common)
        assert first.returncode == 0, first.stderr[-2000:]
        submitted = web.base_url(other) + "p/37.html"
        with running_api("--crawl", str(out)) as base:
            status, policy = call(base, "PUT", f"/v1/hosts/{blocked}/policy", {"blocked": True})
            assert status == 200 and policy["blocked"] is True and policy["host"] == blocked
            status, policy = call(base, "PUT", f"/v1/hosts/{slowed}/policy", {"min_delay_ms": slow_ms})
            assert status == 200 and policy["min_delay_ms"] == slow_ms
            assert call(base, "GET", f"/v1/hosts/{slowed}/policy")[1]["min_delay_ms"] == slow_ms
            status, answer = call(
                base,
                "POST",
                "/v1/crawl-requests",
                {"urls": [submitted, "ftp://x.example/"], "reason": "api test", "priority": "high"},
            )
            assert status == 200 and answer["accepted"] == 1 and answer["rejected"][0]["url"] == "ftp://x.example/"
            status, rounds = call(base, "GET", "/v1/rounds")
            assert status == 200 and [r["round"] for r in rounds["rounds"]] == [1]
            second_started = time.time()
            second = _cli("crawl", "--rounds", "1", *common)
            assert second.returncode == 0, second.stderr[-2000:]
            status, rounds = call(base, "GET", "/v1/rounds")
            assert [r["round"] for r in rounds["rounds"]] == [1, 2]
            status, report = call(base, "GET", "/v1/rounds/2")
            assert status == 200 and report["round"] == 2 and report["responses"] > 0
            # The crawl keys the host with its port; the policy on the bare name covers it.
            status, shown = call(base, "GET", f"/v1/hosts/{slowed}:{web.port}")
            assert status == 200 and shown["policy_from"] == slowed
            assert shown["record"]["delay"] >= slow_ms / 1000 and shown["record"]["fetches"] >= 2
        requests = [r for r in web.requests() if r["start"] >= second_started]

    def on(host):
        return sorted((r for r in requests if r["host"] == host), key=lambda r: r["start"])

    assert on(other) and on(web.hosts[3]), "the second round fetched from the other hosts"
    assert on(blocked) == [], "the blocked host got requests"
    slow = on(slowed)
    assert len(slow) >= 2
    gaps = [b["start"] - a["end"] for a, b in zip(slow, slow[1:])]
    assert min(gaps) >= slow_ms / 1000 - 0.01, gaps
    assert "/p/37.html" in {r["path"] for r in on(other)}, "the URL queued through the API was fetched"


# --- issue #27: times, unknown hosts, the private-networks switch, the token file's mode --------


def _with_host_record(out, host: str, now: float) -> None:
    from beamcrawl.core.policy import refusals
    from beamcrawl.schemas.records import HostRecord
    from beamcrawl.stores.base import Mutation

    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        refused = refusals.note(
            [], "token", refusals.Identity("beamcrawl"), {"lines": ["1: User-agent: beamcrawl"]}, now
        )
        record = HostRecord(
            host=host, delay=2.0, last_fetch_end=now - 60, resolved_at=now - 90, ip="192.0.2.7", refusals=refused
        )
        store.mutate("hosts", [Mutation.set(host.encode(), record.to_cells())])


def _epoch(iso: str) -> float:
    import datetime as dt

    assert isinstance(iso, str) and iso.endswith("Z"), iso
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_times_are_iso_8601_utc_in_every_answer_and_documented(crawl_dir):
    now = time.time()
    _with_host_record(crawl_dir, "site0003.ch:18811", now)
    with running_api("--crawl", str(crawl_dir)) as base:
        status, policy = call(base, "PUT", "/v1/hosts/site0003.ch:18811/policy", {"pause_until": "2h"})
        assert status == 200, policy
        assert abs(_epoch(policy["pause_until"]) - (now + 7200)) < 30 and abs(_epoch(policy["updated_at"]) - now) < 30
        assert call(base, "GET", "/v1/hosts/site0003.ch:18811/policy") == (200, policy)
        status, shown = call(base, "GET", "/v1/hosts/site0003.ch:18811")
        assert status == 200 and shown["policy"] == policy
        assert abs(_epoch(shown["record"]["last_fetch_end"]) - (now - 60)) < 30
        assert shown["record"]["not_before"] is None  # never
        (refusal,) = shown["refusals"]  # #29: what the host refused us, times in UTC
        assert refusal["kind"] == "token" and abs(_epoch(refusal["since"]) - now) < 30 and refusal["until"] is None
        status, doc = call(base, "GET", "/v1/openapi.json")
    schemas = doc["components"]["schemas"]
    for name in ("pause_until", "updated_at"):
        assert schemas["Policy"]["properties"][name]["format"] == "date-time"
    assert schemas["HostRecord"]["properties"]["last_fetch_end"]["format"] == "date-time"
    assert doc["paths"]["/v1/hosts/{host}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Host"
    }
    # The CLI prints the same as the API answers.
    cli = _cli("hosts", "show", "site0003.ch:18811", "--crawl", str(crawl_dir))
    assert cli.returncode == 0 and json.loads(cli.stdout)["policy"] == policy, cli.stderr


def test_an_unknown_host_is_404_naming_its_other_ports(crawl_dir):
    _with_host_record(crawl_dir, "site0003.ch:18811", time.time())
    with running_api("--crawl", str(crawl_dir)) as base:
        assert call(base, "GET", "/v1/hosts/nope.example") == (
            404,
            {"error": "no host nope.example in this crawl (neither a record nor a policy)"},
        )
        status, answer = call(base, "GET", "/v1/hosts/site0003.ch")
        assert status == 404 and answer["error"].endswith("did you mean site0003.ch:18811?"), answer
        assert call(base, "GET", "/v1/hosts/site0003.ch:18811")[0] == 200
    assert "404" in api.OPENAPI["paths"]["/v1/hosts/{host}"]["get"]["responses"]


def test_private_addresses_need_the_servers_switch(crawl_dir):
    local = {"urls": ["http://localhost:18811/", "http://127.0.0.1:18811/a"], "reason": "local test"}
    with running_api("--crawl", str(crawl_dir)) as base:
        status, answer = call(base, "POST", "/v1/crawl-requests", local)
        assert status == 200 and answer["accepted"] == 0, answer
        assert [r["reason"].split(" (")[0] for r in answer["rejected"]] == [
            "refused: loopback name localhost",
            "refused: loopback address 127.0.0.1",
        ]
        status, answer = call(base, "POST", "/v1/crawl-requests", {**local, "allow_private_networks": True})
        assert status == 403 and "--allow-private-networks" in answer["error"], answer
        status, answer = call(base, "POST", "/v1/crawl-requests", {**local, "allow_private_networks": "yes"})
        assert status == 400 and "allow_private_networks must be true or false" in answer["error"]
    with running_api("--crawl", str(crawl_dir), "--allow-private-networks") as base:
        status, answer = call(base, "POST", "/v1/crawl-requests", local)  # the request must ask for it too
        assert status == 200 and answer["accepted"] == 0
        status, answer = call(
            base,
            "POST",
            "/v1/crawl-requests",
            {**local, "allow_private_networks": True, "urls": [*local["urls"], "http://169.254.169.254/"]},
        )
        assert status == 200 and answer["accepted"] == 2, answer
        assert [r["url"] for r in answer["rejected"]] == ["http://169.254.169.254/"]  # link-local: never
    assert (
        api.OPENAPI["paths"]["/v1/crawl-requests"]["post"]["requestBody"]["content"]["application/json"]["schema"][
            "properties"
        ]["allow_private_networks"]["type"]
        == "boolean"
    )


@pytest.mark.parametrize("mode, warned", [(0o644, True), (0o640, True), (0o600, False), (0o400, False)])
def test_a_token_file_others_can_read_gets_a_warning(crawl_dir, tmp_path, mode, warned):
    token_file = tmp_path / "api-token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(mode)
    proc = subprocess.Popen(
        [sys.executable, "-m", "beamcrawl.cli.main", "api", "--port", "0", "--crawl", str(crawl_dir),
         "--token-file", str(token_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != api.TOKEN_ENV},
    )  # fmt: skip
    try:
        assert proc.stdout.readline().startswith("beamcrawl api listening on")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    warning = [line for line in err.splitlines() if line.startswith("beamcrawl api: warning:")]
    assert bool(warning) == warned, err
    if warned:
        assert f"chmod 600 {token_file}" in warning[0] and f"{mode:04o}" in warning[0]
