"""``beamcrawl api``: the operator control API, an HTTP server on a crawl's store.

    beamcrawl api (--crawl OUT_DIR | --store URI [--reports DIR]) [--bind ADDR] [--port P]
                  [--token-file FILE] [--allow-private-networks]

Routes (JSON in and out; the OpenAPI 3 document at ``GET /v1/openapi.json`` describes each)::

    POST /v1/crawl-requests        queue URLs, as ``beamcrawl submit`` does
    GET  /v1/hosts/{host}/policy   a host's policy
    PUT  /v1/hosts/{host}/policy   change it, as ``beamcrawl hosts set-policy`` does
    GET  /v1/hosts/{host}          a host's record and policy, as ``beamcrawl hosts show``
    GET  /v1/rounds                the rounds' reports, in short
    GET  /v1/rounds/{n}            one round's report (OUT_DIR/reports/round-N.json)
    GET  /v1/status                is a round running, its live counters (as ``beamcrawl status``)
    GET  /v1/openapi.json          the OpenAPI document
    GET  /healthz                  liveness (no token needed, says nothing else)

Every other request needs ``Authorization: Bearer TOKEN``, the token read from
``--token-file`` or the ``BEAMCRAWL_API_TOKEN`` environment variable (without one the server
does not start; a token file other users may read gets a warning); a missing or wrong token
gets 401 and nothing more, compared in constant time. Times in answers are ISO-8601 UTC; a
host the crawl has neither a record nor a policy of is a 404. A crawl request may carry
``allow_private_networks`` only on a server started with ``--allow-private-networks`` (403
otherwise). It listens on 127.0.0.1 unless ``--bind`` says otherwise. Bodies are at most 1 MiB
(413) and are checked field by field: a bad one gets 400 and ``{"error": "..."}`` naming the
problem. The work lands where the CLI's does (the frontier, the ``policies`` table): the
next round picks it up. Store calls run on one thread of their own, which opens the store.

The checks of bodies and path parameters are plain functions (``parse_*``), tested without a
server; the handlers only call them and the operations of ``submit.py`` and ``hosts.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import json
import logging
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Sequence

from beamcrawl.cli.args import OneLineArgumentParser
from beamcrawl.cli.serving import serve_until_stopped
from beamcrawl.cli.submit import MAX_REASON_CHARS

__all__ = [
    "ApiError",
    "MAX_BODY_BYTES",
    "MAX_URLS",
    "OPENAPI",
    "PolicyChange",
    "TOKEN_ENV",
    "check_token",
    "main",
    "make_app",
    "parse_crawl_request",
    "parse_host",
    "parse_json_body",
    "parse_policy_change",
    "parse_private_switch",
    "parse_round",
    "read_token",
    "token_file_warning",
]

log = logging.getLogger(__name__)

TOKEN_ENV = "BEAMCRAWL_API_TOKEN"
MIN_TOKEN_CHARS = 16
MAX_BODY_BYTES = 1024 * 1024
MAX_URLS = 10_000
_REPORT_NAME = re.compile(r"^round-(\d{6,})\.json$")


class ApiError(Exception):
    """An answer other than 200: ``status`` and a one-line ``message`` for ``{"error": ...}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- pure checks ------------------------------------------------------------------------


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object.

    Raises:
        ApiError: 413 over :data:`MAX_BODY_BYTES`, 400 not UTF-8 JSON or not an object.
    """
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, f"body larger than {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ApiError(400, "body is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # [[[[...]]]]: a megabyte of brackets is no request
        raise ApiError(400, "body is not JSON we take: nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object")
    return body


def _unknown_fields(body: Mapping[str, Any], known: Sequence[str]) -> None:
    extra = sorted(set(body) - set(known))
    if extra:
        raise ApiError(400, f"unknown field(s): {', '.join(extra)} (known: {', '.join(known)})")


def parse_crawl_request(body: Mapping[str, Any]) -> Any:
    """``POST /v1/crawl-requests``: ``{"urls": [...], "priority", "reason", "kind"}`` as a
    :class:`~beamcrawl.cli.submit.SubmitRequest` (the same checks as ``submit``).

    Raises:
        ApiError: 400 naming the field.
    """
    from beamcrawl.cli.submit import SubmitError, SubmitRequest

    _unknown_fields(body, ("urls", "priority", "reason", "kind", "allow_private_networks"))
    if "reason" not in body:
        raise ApiError(400, "reason is required (why, in a few words)")
    urls = body.get("urls")
    if isinstance(urls, list) and not urls:
        raise ApiError(400, "urls must not be empty")
    if isinstance(urls, list) and len(urls) > MAX_URLS:
        raise ApiError(400, f"at most {MAX_URLS} urls per request, got {len(urls)}")
    try:
        request = SubmitRequest.from_json(body)
    except SubmitError as exc:
        raise ApiError(400, str(exc).replace("--reason", "reason")) from None
    return request


def parse_private_switch(body: Mapping[str, Any], server_allows: bool) -> bool:
    """A crawl request's ``allow_private_networks`` (default false), as ``submit``'s flag of
    that name: loopback and private addresses accepted (link-local ones never). Only a
    server started with ``--allow-private-networks`` takes it: whoever holds the token must
    not be able to point the crawler into the network it runs in.

    Raises:
        ApiError: 400 not a boolean; 403 true on a server started without the flag.
    """
    wanted = body.get("allow_private_networks", False)
    if not isinstance(wanted, bool):
        raise ApiError(400, f"allow_private_networks must be true or false, got {wanted!r}")
    if wanted and not server_allows:
        raise ApiError(403, "allow_private_networks: this server was not started with --allow-private-networks")
    return wanted


@dataclass(frozen=True)
class PolicyChange:
    """The fields of ``PUT /v1/hosts/{host}/policy`` that were given (None: keep)."""

    min_delay_ms: int | None = None
    pause_until: float | None = None
    blocked: bool | None = None


def parse_policy_change(body: Mapping[str, Any], now: float) -> PolicyChange:
    """``{"min_delay_ms": 2000, "pause_until": "2h", "blocked": true}``, any of them.

    ``min_delay_ms``: a whole number >= 0 (0 removes it); ``pause_until``: an ISO-8601 time,
    a duration from now (``90s``, ``2h``, ``1d``) or ``now`` (ends a pause); ``blocked``: true
    or false.

    Raises:
        ApiError: 400 naming the field.
    """
    from beamcrawl.cli.hosts import parse_when

    _unknown_fields(body, ("min_delay_ms", "pause_until", "blocked"))
    if not body:
        raise ApiError(400, "nothing to set: give min_delay_ms, pause_until or blocked")
    delay = body.get("min_delay_ms")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= 86_400_000):
        raise ApiError(400, f"min_delay_ms must be a whole number of milliseconds from 0 to 86400000, got {delay!r}")
    blocked = body.get("blocked")
    if blocked is not None and not isinstance(blocked, bool):
        raise ApiError(400, f"blocked must be true or false, got {blocked!r}")
    pause = body.get("pause_until")
    when = None
    if pause is not None:
        if not isinstance(pause, str):
            raise ApiError(400, "pause_until must be a string: an ISO-8601 time, a duration (2h) or now")
        try:
            when = parse_when(pause, now)
        except (ValueError, OverflowError) as exc:
            raise ApiError(400, f"pause_until: {exc}") from None
        if not math.isfinite(when) or when > now + 10 * 365 * 86400:
            raise ApiError(400, f"pause_until must be within ten years, got {pause!r}")
    return PolicyChange(min_delay_ms=delay, pause_until=when, blocked=blocked)


def parse_host(text: str) -> str:
    """A path's ``{host}`` as the crawl keys it (``hosts.policy_key``).

    Raises:
        ApiError: 400, not a host name.
    """
    from beamcrawl.cli.hosts import policy_key

    try:
        return policy_key(text)
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None


def parse_round(text: str) -> int:
    """A path's ``{n}``: a round number >= 1.

    Raises:
        ApiError: 400 otherwise.
    """
    if not text.isascii() or not text.isdigit() or len(text) > 9 or int(text) < 1:
        raise ApiError(400, f"round must be a whole number >= 1, got {text!r}")
    return int(text)


def check_token(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries the bearer token (constant time)."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8"))


def read_token(token_file: str | None, environ: Mapping[str, str]) -> str:
    """The API token, from ``--token-file`` or :data:`TOKEN_ENV`.

    Raises:
        ApiError: None given, unreadable, or shorter than 16 characters (status 2: usage).
    """
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                token = fh.read(4096).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ApiError(2, f"cannot read token file {token_file}: {getattr(exc, 'strerror', None) or exc}") from None
        source = token_file
    else:
        token = environ.get(TOKEN_ENV, "").strip()
        source = TOKEN_ENV
    if not token:
        raise ApiError(2, f"no API token: give --token-file FILE or set {TOKEN_ENV} (the server never runs open)")
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ApiError(2, f"the token in {source} must be at least {MIN_TOKEN_CHARS} characters without spaces")
    return token


def token_file_warning(token_file: str | None) -> str | None:
    """A warning when the token file may be read or changed by other users (mode beyond 0600)."""
    if not token_file:
        return None
    try:
        mode = os.stat(token_file).st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return f"token file {token_file} is open to other users (mode {mode:04o}); make it private: chmod 600 {token_file}"


# --- the OpenAPI document -------------------------------------------------------------------


def _json_response(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema or {"type": "object"}}}}


_ERROR = {"$ref": "#/components/schemas/Error"}
_ERRORS = {
    "400": _json_response("Bad request: the error names the problem.", _ERROR),
    "401": _json_response("No or wrong bearer token.", _ERROR),
}
_HOST_PARAM = {
    "name": "host",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "Host name, host:port for a non-default port, or a URL.",
}
# Every time a person reads is ISO-8601 UTC with milliseconds (2026-05-01T12:00:00.250Z);
# null means never (hosts.iso_utc).
_TIME = {"type": ["string", "null"], "format": "date-time", "description": "ISO-8601 UTC; null: never."}
_POLICY = {
    "type": "object",
    "properties": {
        "host": {"type": "string"},
        "min_delay_ms": {"type": ["integer", "null"]},
        "pause_until": _TIME,
        "blocked": {"type": "boolean"},
        "updated_at": _TIME,
    },
}
_HOST_RECORD = {
    "type": ["object", "null"],
    "description": "The crawl's record of the host (null before its first fetch); its other fields are "
    "numbers, strings and the robots.txt cache as the crawl keeps them.",
    "properties": {
        "host": {"type": "string"},
        "delay": {"type": "number", "description": "Current gap between requests, seconds."},
        **{name: _TIME for name in ("last_fetch_end", "not_before", "robots_fetched_at", "robots_good_at",
                                    "robots_failing_since", "resolved_at")},
    },
}  # fmt: skip
_HOST = {
    "type": "object",
    "properties": {
        "host": {"type": "string"},
        "record": {"$ref": "#/components/schemas/HostRecord"},
        "policy": {"oneOf": [{"$ref": "#/components/schemas/Policy"}, {"type": "null"}]},
        "policy_from": {"type": ["string", "null"], "description": "The key the policy is stored under."},
        "quarantine": {"type": "array", "items": {"type": "object"}},
        "refusals": {
            "type": "array",
            "description": "What the host refused the crawler's identity (held while in force): kind "
            "status|token|purpose, identity, evidence, since/at/until, count, recheck.",
            "items": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["status", "token", "purpose"]},
                    "identity": {"type": "object"},
                    "evidence": {"type": "object"},
                    "since": {"type": ["string", "null"], "format": "date-time"},
                    "at": {"type": ["string", "null"], "format": "date-time"},
                    "until": {"type": ["string", "null"], "format": "date-time"},
                    "count": {"type": "integer"},
                    "recheck": {"type": "string"},
                },
            },
        },
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "beamcrawl control API", "version": "1"},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            "Policy": _POLICY,
            "HostRecord": _HOST_RECORD,
            "Host": _HOST,
        },
    },
    "security": [{"bearer": []}],
    "paths": {
        "/healthz": {
            "get": {"summary": "Liveness.", "security": [], "responses": {"200": _json_response("Up.")}},
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This document.",
                "responses": {"200": _json_response("OpenAPI 3 document."), **_ERRORS},
            },
        },
        "/v1/crawl-requests": {
            "post": {
                "summary": "Queue URLs (seeds, sitemaps, feeds, urgent recrawls), as `beamcrawl submit`.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["urls", "reason"],
                                "additionalProperties": False,
                                "properties": {
                                    "urls": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                        "minItems": 1,
                                        "maxItems": MAX_URLS,
                                    },
                                    "priority": {"enum": ["high", "normal", "low"], "default": "normal"},
                                    "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
                                    "kind": {"enum": ["auto", "page", "sitemap"], "default": "auto"},
                                    "allow_private_networks": {
                                        "type": "boolean",
                                        "default": False,
                                        "description": "Accept URLs on loopback and private addresses, as `submit "
                                        "--allow-private-networks`; 403 unless the server was started with that flag.",
                                    },
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json_response(
                        "What was queued.",
                        {
                            "type": "object",
                            "properties": {
                                "accepted": {"type": "integer"},
                                "duplicates": {"type": "integer"},
                                "rejected": {"type": "array", "items": {"type": "object"}},
                            },
                        },
                    ),
                    **_ERRORS,
                    "403": _json_response("allow_private_networks on a server started without it.", _ERROR),
                    "413": _json_response("Body over 1 MiB.", _ERROR),
                },
            },
        },
        "/v1/hosts/{host}": {
            "get": {
                "summary": "A host's record (delay, clocks, robots.txt cache, DNS) and policy, as `hosts show`.",
                "parameters": [_HOST_PARAM],
                "responses": {
                    "200": _json_response(
                        "Record and policy (either may be null).", {"$ref": "#/components/schemas/Host"}
                    ),
                    **_ERRORS,
                    "404": _json_response(
                        "The crawl has neither a record nor a policy of the host; the error names the "
                        "same host on other ports when the crawl has it there.",
                        _ERROR,
                    ),
                },
            },
        },
        "/v1/hosts/{host}/policy": {
            "get": {
                "summary": "A host's stored policy.",
                "parameters": [_HOST_PARAM],
                "responses": {
                    "200": _json_response("The policy.", {"$ref": "#/components/schemas/Policy"}),
                    **_ERRORS,
                    "404": _json_response("No policy stored.", _ERROR),
                },
            },
            "put": {
                "summary": "Change the fields given of a host's policy (the others keep their values), "
                "as `hosts set-policy`; applied from the next round.",
                "parameters": [_HOST_PARAM],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "minProperties": 1,
                                "additionalProperties": False,
                                "properties": {
                                    "min_delay_ms": {"type": "integer", "minimum": 0, "description": "0 removes it."},
                                    "pause_until": {
                                        "type": "string",
                                        "description": "ISO-8601 time, duration (2h, 30m) or now.",
                                    },
                                    "blocked": {"type": "boolean"},
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json_response("The stored policy.", {"$ref": "#/components/schemas/Policy"}),
                    **_ERRORS,
                    "413": _json_response("Body over 1 MiB.", _ERROR),
                },
            },
        },
        "/v1/rounds": {
            "get": {
                "summary": "The rounds run so far, in short, oldest first.",
                "responses": {
                    "200": _json_response(
                        "Rounds.",
                        {"type": "object", "properties": {"rounds": {"type": "array", "items": {"type": "object"}}}},
                    ),
                    **_ERRORS,
                },
            },
        },
        "/v1/rounds/{n}": {
            "get": {
                "summary": "One round's report (reports/round-N.json).",
                "parameters": [
                    {"name": "n", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
                ],
                "responses": {
                    "200": _json_response("The report."),
                    **_ERRORS,
                    "404": _json_response("No such round.", _ERROR),
                },
            },
        },
        "/v1/status": {
            "get": {
                "summary": "Whether a round is running, since when, its live counters (the progress bar's) and when "
                "its fetch window ends; the last round's report in short (OUT_DIR/status.json, as beamcrawl status).",
                "responses": {
                    "200": _json_response(
                        "The status.",
                        {
                            "type": "object",
                            "properties": {
                                "running": {"type": "boolean"},
                                "alive": {"type": "boolean", "description": "The crawl's process runs."},
                                "state": {
                                    "type": "string",
                                    "enum": ["starting", "running", "between rounds", "stopped", "unknown"],
                                },
                                "round": {"type": ["integer", "null"]},
                                "round_started_at": {"type": ["string", "null"], "format": "date-time"},
                                "window_ends_at": {"type": ["string", "null"], "format": "date-time"},
                                "live": {
                                    "type": ["object", "null"],
                                    "description": "stage, fetched, robots, settled, planned, errors, "
                                    "pages_per_s, bytes, hosts_active, hosts_waiting",
                                },
                                "updated_at": {"type": ["string", "null"], "format": "date-time"},
                                "last_round": {
                                    "type": ["object", "null"],
                                    "description": "The latest round's report, in short.",
                                },
                            },
                        },
                    ),
                    **_ERRORS,
                    "404": _json_response("No crawl output to read (no --crawl or --reports).", _ERROR),
                },
            },
        },
    },
}


# --- the server ------------------------------------------------------------------------------


class _Crawl:
    """The crawl the API serves: its store, on one thread that opened it, and its reports."""

    def __init__(self, store_uri: str, reports: str | None, allow_private: bool = False) -> None:
        self.store_uri = store_uri
        self.reports = reports
        self.allow_private = allow_private  # --allow-private-networks: requests may ask for it
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="beamcrawl-api-store")
        self._store: Any = None

    def _opened(self) -> Any:
        if self._store is None:
            from beamcrawl.stores.base import open_store

            self._store = open_store(self.store_uri)
        return self._store

    def open(self) -> None:
        """Opens the store now, on its thread (a store that cannot be opened stops the start)."""
        self._pool.submit(self._opened).result()

    async def run(self, operation: Callable[[Any], Any]) -> Any:
        """Runs ``operation(store)`` on the store's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: operation(self._opened()))

    def close(self) -> None:
        def _close() -> None:
            if self._store is not None:
                self._store.close()

        self._pool.submit(_close).result(timeout=30)
        self._pool.shutdown()

    def report_files(self) -> dict[int, str]:
        if not self.reports or not os.path.isdir(self.reports):
            return {}
        found = {}
        for name in os.listdir(self.reports):
            m = _REPORT_NAME.match(name)
            if m:
                found[int(m.group(1))] = os.path.join(self.reports, name)
        return dict(sorted(found.items()))


def _summary(report: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("round", "responses", "pages_per_second", "hosts_planned", "fetch_errors", "new_urls", "frontier_size")
    return {k: report.get(k) for k in keys}


def make_app(crawl: _Crawl, token: str) -> Any:
    """The aiohttp application: routes, the token check and JSON errors."""
    from aiohttp import web

    def answer(payload: Any, status: int = 200) -> web.Response:
        # One line each, newline-terminated: a shell that curls two answers prints two lines.
        return web.json_response(
            payload, status=status, dumps=lambda o: json.dumps(o, sort_keys=True, default=str) + "\n"
        )

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path != "/healthz" and not check_token(request.headers.get("Authorization"), token):
            return web.json_response({"error": "unauthorized"}, status=401, headers={"WWW-Authenticate": "Bearer"})
        try:
            return await handler(request)
        except ApiError as exc:
            return answer({"error": exc.message}, exc.status)
        except web.HTTPRequestEntityTooLarge:
            return answer({"error": f"body larger than {MAX_BODY_BYTES} bytes"}, 413)
        except web.HTTPException as exc:  # 404 and 405 from the router, as JSON
            return answer({"error": exc.reason}, exc.status)
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            return answer({"error": "internal error (see the server's log)"}, 500)

    async def body(request: web.Request) -> dict[str, Any]:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise ApiError(413, f"body larger than {MAX_BODY_BYTES} bytes")
        return parse_json_body(await request.read())

    async def healthz(request: web.Request) -> web.Response:
        return answer({"status": "ok"})

    async def openapi(request: web.Request) -> web.Response:
        return answer(OPENAPI)

    async def crawl_requests(request: web.Request) -> web.Response:
        from beamcrawl.cli.submit import submit

        given = await body(request)
        submitted = parse_crawl_request(given)
        private = parse_private_switch(given, crawl.allow_private)
        now_ms = int(time.time() * 1000)
        return answer(await crawl.run(lambda store: submit(store, submitted, now_ms, allow_private=private)))

    async def get_policy(request: web.Request) -> web.Response:
        from beamcrawl.cli.hosts import policy_view, read_policy

        key = parse_host(request.match_info["host"])
        policy = await crawl.run(lambda store: read_policy(store, key))
        if policy is None:
            raise ApiError(404, f"no policy stored for {key}")
        return answer(policy_view(policy))

    async def put_policy(request: web.Request) -> web.Response:
        from beamcrawl.cli.hosts import apply_policy, policy_view

        key = parse_host(request.match_info["host"])
        now = time.time()
        change = parse_policy_change(await body(request), now)
        policy = await crawl.run(
            lambda store: apply_policy(
                store, key, now, min_delay_ms=change.min_delay_ms, pause_until=change.pause_until, block=change.blocked
            )
        )
        return answer(policy_view(policy))

    async def get_host(request: web.Request) -> web.Response:
        from beamcrawl.cli.hosts import host_view, is_known, no_host_message

        key = parse_host(request.match_info["host"])

        def view(store: Any) -> dict[str, Any]:
            shown = host_view(store, key)
            if not is_known(shown):  # as `hosts show`: an unknown host is an error, not nulls
                raise ApiError(404, no_host_message(store, key))
            return shown

        return answer(await crawl.run(view))

    def _read_report(path: str) -> dict[str, Any]:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)  # type: ignore[no-any-return]

    async def rounds(request: web.Request) -> web.Response:
        out = []
        for number, path in crawl.report_files().items():
            try:
                out.append({**_summary(_read_report(path)), "round": number, "href": f"/v1/rounds/{number}"})
            except (OSError, ValueError):
                out.append({"round": number, "href": f"/v1/rounds/{number}", "error": "report unreadable"})
        return answer({"rounds": out})

    async def one_round(request: web.Request) -> web.Response:
        number = parse_round(request.match_info["n"])
        path = crawl.report_files().get(number)
        if path is None:
            raise ApiError(404, f"no report for round {number}")
        try:
            return answer(_read_report(path))
        except (OSError, ValueError):
            raise ApiError(500, f"the report of round {number} cannot be read") from None

    async def status(request: web.Request) -> web.Response:
        from beamcrawl.pipelines.live_status import read_status

        found = read_status(os.path.dirname(crawl.reports.rstrip("/"))) if crawl.reports else None
        if found is None:
            raise ApiError(404, "no crawl output to read: no status.json and no round report")
        report = found.pop("last_report")
        found["last_round"] = {**_summary(report), "round": report.get("round")} if report else None
        return answer(found)

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY_BYTES)
    app.router.add_get("/healthz", healthz, allow_head=False)
    app.router.add_get("/v1/openapi.json", openapi, allow_head=False)
    app.router.add_post("/v1/crawl-requests", crawl_requests)
    app.router.add_get("/v1/hosts/{host}/policy", get_policy, allow_head=False)
    app.router.add_put("/v1/hosts/{host}/policy", put_policy)
    app.router.add_get("/v1/hosts/{host}", get_host, allow_head=False)
    app.router.add_get("/v1/rounds", rounds, allow_head=False)
    app.router.add_get("/v1/rounds/{n}", one_round, allow_head=False)
    app.router.add_get("/v1/status", status, allow_head=False)
    return app


def _parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog="beamcrawl api", description="Serve the operator control API on a crawl's store."
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--crawl", metavar="OUT_DIR", help="The crawl's --out folder (its embedded store and reports/).")
    where.add_argument("--store", metavar="URI", help="The crawl's store URI (then --reports for the round reports).")
    parser.add_argument(
        "--reports", metavar="DIR", default=None, help="Folder of the round reports (default OUT_DIR/reports)."
    )
    parser.add_argument("--bind", default="127.0.0.1", metavar="ADDR", help="Address to listen on. Default 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8470, help="Port (0: any free one, printed). Default 8470.")
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        default=None,
        help=f"File holding the bearer token (else the {TOKEN_ENV} environment variable).",
    )
    parser.add_argument(
        "--allow-private-networks",
        action="store_true",
        help="Let crawl requests ask for loopback and private addresses (their "
        "allow_private_networks field), as `submit --allow-private-networks`.",
    )
    return parser


async def _serve(app: Any, bind: str, port: int, out: Any) -> None:
    await serve_until_stopped(app, bind, port, out, "beamcrawl api listening on {url}", access_log=log)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``beamcrawl api``; returns the exit status (2 usage, 1 store or port)."""
    from beamcrawl.cli.submit import SubmitError, store_uri

    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        token = read_token(args.token_file, os.environ)
        uri = store_uri(args.store, args.crawl)
    except ApiError as exc:
        print(f"beamcrawl api: error: {exc.message}", file=sys.stderr)
        return 2
    except SubmitError as exc:
        print(f"beamcrawl api: error: {exc}", file=sys.stderr)
        return exc.status
    if not 0 <= args.port <= 65535:
        print(f"beamcrawl api: error: --port must be 0-65535, got {args.port}", file=sys.stderr)
        return 2
    warning = token_file_warning(args.token_file)
    if warning:
        print(f"beamcrawl api: warning: {warning}", file=sys.stderr)
    reports = args.reports or (os.path.join(os.path.abspath(args.crawl), "reports") if args.crawl else None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    crawl = _Crawl(uri, reports, allow_private=args.allow_private_networks)
    try:
        crawl.open()
    except Exception as exc:  # a backend's own errors (sqlite, grpc) differ; all are store trouble here
        print(f"beamcrawl api: error: store {uri}: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        crawl.close()
        return 1
    try:
        asyncio.run(_serve(make_app(crawl, token), args.bind, args.port, sys.stdout))
    except OSError as exc:
        print(f"beamcrawl api: error: cannot listen on {args.bind}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        crawl.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
