"""``POST api/report``: a single-user server's spend report, without a ``RequestHandler``.

Every server reports every few seconds, so this route is the service's hot path (100
requests a second at 1,000 users). A tornado ``RequestHandler`` costs more per request
than the report itself (cookies, XSRF, header bookkeeping: see docs/benchmarks.md), and
this route uses none of it: it is a message delegate of its own that reads the token and
the body, asks the tornado-free core, and writes one JSON answer on the kept-alive
connection.

A body over ``max_report_bytes`` is never kept: from a user the Hub named for the token
(cached), it is read and dropped (up to :data:`DISCARD_LIMIT`, so that the client, still
sending, reads the answer instead of a reset connection), then answered 413 with a
message; from anyone else, or past that, the 413 is sent at once and the connection
closed. Each user's reports are rate-limited
(:mod:`.ratelimit`) before their body is parsed.

Who may report: a user's server, with that user's own Hub token
(``Authorization: token …``); the Hub names the user and the token's scopes (cached per
token). The token must carry :data:`REPORT_SCOPE` for that user (or that server): the
admin grants it to the users and to their servers' tokens (docs/jupyterhub.md). Any other
token of the user lacks it: above all the token a user's browser hands to *another* user's
server when visiting it (OAuth, sharing), which carries only the user's name and access to
that server, so a visited server cannot report for its visitor. No cookies, so no XSRF to
check. Answers: 200 with the :class:`~jupyter_gpucost.core.hub_protocol.HubReply`;
401 without a token the Hub knows; 403 for a token that is not a user's, or one without
the scope; 400 naming the field that is wrong; 409 when the user runs no such server;
413 over the size limit; 429 over the rate limit; 405 for another method; 503 when the
Hub cannot be asked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from http import HTTPStatus
from typing import Protocol, cast

from tornado import httputil
from tornado.http1connection import HTTP1Connection

from ...core.hub_protocol import REPORT_PATH, ProtocolError, SpendReport
from ...core.refusal import Refusal, hub_error_body
from ..service import HubService
from .hubapi import HubApi, Identity
from .ratelimit import RateLimit

#: the scope a token must carry to report a user's spend (the admin defines it in
#: ``c.JupyterHub.custom_scopes`` and grants ``custom:gpucost:report!user`` to the users and
#: their servers' tokens)
REPORT_SCOPE = "custom:gpucost:report"
#: tokens being checked with the Hub at once, at most
MAX_PENDING_CHECKS = 256
#: the largest body read (and dropped) to answer 413 on a connection kept open; past
#: this, the 413 is sent at once and the connection closed
DISCARD_LIMIT = 64 << 20

log = logging.getLogger("jupyter_gpucost.hub")
#: each status's reason phrase (``HTTPStatus(code).phrase``, looked up once)
PHRASES = {status.value: status.phrase for status in HTTPStatus}


def report_path(base_url: str) -> str:
    """The route's path under the service's ``base_url``."""
    return f"{base_url.rstrip('/')}/{REPORT_PATH}"


class ReportContext(Protocol):
    """What the route reads of the app's context (:class:`.handlers.HandlerContext`)."""

    @property
    def service(self) -> HubService: ...
    @property
    def hub(self) -> HubApi: ...
    @property
    def now(self) -> Callable[[], datetime]: ...
    @property
    def max_report_bytes(self) -> int: ...
    @property
    def report_limit(self) -> RateLimit: ...


class ReportRoute(httputil.HTTPServerConnectionDelegate):
    """What tornado routes ``POST api/report`` to (one instance per app)."""

    def __init__(self, ctx: ReportContext) -> None:
        self.ctx = ctx
        #: requests waiting for the Hub to say who owns their token
        self._pending: set[asyncio.Task[None]] = set()

    def start_request(
        self, server_conn: object, request_conn: httputil.HTTPConnection
    ) -> httputil.HTTPMessageDelegate:
        return _ReportMessage(self, request_conn)

    def __call__(self, request: httputil.HTTPServerRequest) -> None:
        try:
            token = self._check(request)
            found, who = self.ctx.hub.known(token)
        except Refusal as e:
            answer(request, e.status, hub_error_body(str(e), e.status))
            return
        if found:
            self._report(request, who)
            return
        # a token not seen in the last minute: ask the Hub, off this call; a flood of
        # unknown tokens is not passed on to the Hub
        if len(self._pending) >= MAX_PENDING_CHECKS:
            message = "too many tokens are being checked with the Hub; try again shortly"
            answer(request, 503, hub_error_body(message, 503))
            return
        task = asyncio.ensure_future(self._identify_then_report(request, token))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def _check(self, request: httputil.HTTPServerRequest) -> str:
        if request.method != "POST":
            raise Refusal("a report is a POST", 405)
        if len(request.body) > self.ctx.max_report_bytes:
            raise Refusal(f"a report is at most {self.ctx.max_report_bytes} bytes", 413)
        return bearer_token(request.headers.get("Authorization", ""))

    async def _identify_then_report(self, request: httputil.HTTPServerRequest, token: str) -> None:
        try:
            who = await self.ctx.hub.identify(token)
        except Exception as e:  # HubApiError, or an answer of the Hub's not understood
            log.error("cannot check a token with the Hub: %s", e)
            message = "the Hub cannot be reached to check the token"
            answer(request, 503, hub_error_body(message, 503))
            return
        self._report(request, who)

    def _report(self, request: httputil.HTTPServerRequest, who: Identity | None) -> None:
        try:
            if who is None:
                raise Refusal("the Hub does not know this token", 401)
            if who.kind != "user":
                raise Refusal("only a user's server reports its spend", 403)
            if not may_report(who.scopes, who.name):
                raise Refusal(no_scope(who.name), 403)
            limit = self.ctx.report_limit
            if not limit.allow(who.name, time.monotonic()):
                wait_s = limit.retry_after_s(who.name)
                raise Refusal(
                    f"too many reports: {who.name}'s servers may send {limit.rate_per_s:g} a "
                    f"second on average; try again in {wait_s:.1f} s",
                    429,
                )
            try:
                body = json.loads(request.body or b"null")
            except (ValueError, RecursionError):
                raise Refusal("the body is not JSON", 400) from None
            now = self.ctx.now()
            try:
                report = SpendReport.from_json(body)
                report.check_times(now)
            except ProtocolError as e:
                raise Refusal(str(e), 400) from None
            if not may_report(who.scopes, who.name, report.server_name):
                raise Refusal(no_scope(who.name, report.server_name), 403)
            reply = self.ctx.service.report(who.name, report, now)
        except Refusal as e:
            answer(request, e.status, hub_error_body(str(e), e.status))
            return
        except Exception:
            log.exception("a report could not be taken")
            answer(request, 500, hub_error_body("Internal Server Error", 500))
            return
        answer(request, 200, reply.to_json())


class _ReportMessage(httputil.HTTPMessageDelegate):
    """One request to the report route: its body kept only while it is within the size
    limit, then handed to :class:`ReportRoute` whole."""

    def __init__(self, route: ReportRoute, connection: httputil.HTTPConnection) -> None:
        self.route = route
        # the server side of an HTTP/1 connection: its body limit can be raised per request
        assert isinstance(connection, HTTP1Connection)
        self.connection = connection
        self.limit = route.ctx.max_report_bytes
        self.request: httputil.HTTPServerRequest | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.answered = False

    def headers_received(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
    ) -> Awaitable[None] | None:
        self.request = httputil.HTTPServerRequest(
            connection=self.connection,
            start_line=cast(httputil.RequestStartLine, start_line),
            headers=headers,
        )
        try:
            length = int(headers.get("Content-Length", "0"))
        except ValueError:
            length = 0
        if length > self.limit:
            # past the connection's own limit tornado would answer a bare 400
            self.connection.set_max_body_size(length)
            if length > DISCARD_LIMIT or not self._known_user(headers):
                # too much to read for nothing, or a sender the Hub has not named (just
                # now) as a user: answered at once, and the connection closed
                self._too_large()
            # else it is read (and dropped): the client reads the 413 after its body
        return None

    def _known_user(self, headers: httputil.HTTPHeaders) -> bool:
        try:
            token = bearer_token(headers.get("Authorization", ""))
        except Refusal:
            return False
        found, who = self.route.ctx.hub.known(token)
        return found and who is not None and who.kind == "user"

    def data_received(self, chunk: bytes) -> Awaitable[None] | None:
        self.size += len(chunk)
        if self.size <= self.limit:
            self.chunks.append(chunk)
        else:
            self.chunks.clear()
        return None

    def finish(self) -> None:
        if self.answered:
            return
        if self.size > self.limit:
            self._too_large()
            return
        assert self.request is not None
        self.request.body = b"".join(self.chunks)
        self.chunks.clear()
        self.route(self.request)

    def on_connection_close(self) -> None:
        self.chunks.clear()

    def _too_large(self) -> None:
        assert self.request is not None
        self.answered = True
        message = f"a report is at most {self.limit} bytes"
        answer(self.request, 413, hub_error_body(message, 413))


def may_report(scopes: frozenset[str], user: str, server_name: str | None = None) -> bool:
    """Whether a token of ``user`` whose scopes the Hub names ``scopes`` may report for the
    server ``server_name`` (``None``: for some server of ``user``).

    The Hub answers ``GET /user`` with the token's scopes expanded, filters resolved:
    ``custom:gpucost:report!user`` granted to alice reads ``…!user=alice``,
    ``…!server`` reads ``…!server=alice/<name>``. A group filter is not taken (the Hub
    names the groups only to a token that may read them)."""
    for scope in scopes:
        base, _, where = scope.partition("!")
        if base != REPORT_SCOPE:
            continue
        kind, _, value = where.partition("=")
        if not where or (kind == "user" and value == user):
            return True
        if kind == "server":
            owner, _, name = value.partition("/")
            if owner == user and (server_name is None or name == server_name):
                return True
    return False


def no_scope(user: str, server_name: str | None = None) -> str:
    """The 403's sentence for a token without :data:`REPORT_SCOPE` for the server."""
    server = f"{user}'s server" if not server_name else f"{user}'s server {server_name!r}"
    return (
        f"this token may not report spend for {server}: it lacks the {REPORT_SCOPE} "
        "scope, which the Hub gives a user's own server token when the admin grants it "
        f"({REPORT_SCOPE}!user in the server's and the user's roles; docs/jupyterhub.md)"
    )


def bearer_token(header: str) -> str:
    """The Hub token of an ``Authorization: token …`` (or ``Bearer …``) header."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() not in ("token", "bearer") or not token.strip():
        raise Refusal("a Hub token is required (Authorization: token …)", 401)
    return token.strip()


def answer(request: httputil.HTTPServerRequest, code: int, doc: object) -> None:
    """One JSON answer on the request's connection (kept alive), and the access log line."""
    body = json.dumps(doc).encode()
    headers = httputil.HTTPHeaders(
        {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        }
    )
    connection = request.connection
    assert connection is not None
    start = httputil.ResponseStartLine("HTTP/1.1", code, PHRASES[code])
    connection.write_headers(start, headers, body)
    connection.finish()
    # the access log: as for the other routes, never the query (it may hold a token)
    # (a 200 is logged at DEBUG: its line is not even formatted unless that level is on)
    level = logging.DEBUG if code < 400 else logging.WARNING
    if log.isEnabledFor(level):
        log.log(
            level,
            "%d %s %s %.1f ms",
            code,
            request.method,
            request.path,
            1000 * request.request_time(),
        )
