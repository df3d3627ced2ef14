"""The report route in a tornado server of its own, against a Hub that accepts and never
answers: a flood of unknown tokens is not passed on to the Hub. (The route's other
answers are tested against a real JupyterHub in test_hub_service.py and
test_hub_attacks.py.)"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web.hubapi import HubApi
from jupyter_gpucost.hub.web.ratelimit import RateLimit
from jupyter_gpucost.hub.web.report_route import MAX_PENDING_CHECKS, ReportRoute, report_path
from jupyter_gpucost.hub.web.server import listen


@contextmanager
def hung_hub() -> Iterator[str]:
    """A loopback socket that accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hub/api"
    finally:
        stop.set()
        listener.close()
        thread.join(5)
        for conn in held:
            conn.close()


@dataclass
class Context:
    service: HubService
    hub: HubApi
    now: Callable[[], datetime]
    max_report_bytes: int
    report_limit: RateLimit


def test_a_flood_of_unknown_tokens_is_not_passed_on_to_the_hub() -> None:
    async def flood(hub_url: str) -> list[tuple[int, str]]:
        hub = HubApi(hub_url, "service-token", timeout_s=3)
        # the route never reaches the service here: each token is still being checked
        ctx = Context(None, hub, lambda: datetime.now(UTC), 65_536, RateLimit(1, 1))  # type: ignore[arg-type]
        app = web.Application([(r"/api/report", ReportRoute(ctx))])
        server = app.listen(0, "127.0.0.1")
        port = next(iter(server._sockets.values())).getsockname()[1]
        client = AsyncHTTPClient(force_instance=True, max_clients=400)

        async def post(i: int) -> tuple[int, str]:
            request = HTTPRequest(
                f"http://127.0.0.1:{port}/api/report",
                method="POST",
                body=b"{}",
                headers={"Authorization": f"token forged-{i}"},
                request_timeout=60,
            )
            response = await client.fetch(request, raise_error=False)
            body = response.body.decode() if response.body else ""
            return response.code, body

        try:
            return await asyncio.gather(*(post(i) for i in range(MAX_PENDING_CHECKS + 44)))
        finally:
            client.close()
            server.stop()

    with hung_hub() as hub_url:
        answers = asyncio.run(flood(hub_url))
    assert {code for code, _ in answers} == {503}, answers[:3]
    messages = [json.loads(body)["message"] for _, body in answers]
    # the 256 tokens being checked wait for the Hub, which never answers, for the Hub
    # client's timeout; past them, each is answered at once, never asked of the Hub
    assert messages.count("the Hub cannot be reached to check the token") == MAX_PENDING_CHECKS
    too_many = "too many tokens are being checked with the Hub; try again shortly"
    assert messages.count(too_many) == 44


def test_the_service_server_picks_the_report_route_by_its_path() -> None:
    """The service's server sends ``api/report`` (any query) straight to the route; every
    other path goes through the application, with the proxy's forwarded headers read."""

    class Where(web.RequestHandler):
        def get(self) -> None:
            self.finish({"ip": self.request.remote_ip, "protocol": self.request.protocol})

    async def ask() -> dict[str, tuple[int, str]]:
        hub = HubApi("http://127.0.0.1:9/hub/api", "service-token", timeout_s=3)
        ctx = Context(None, hub, lambda: datetime.now(UTC), 65_536, RateLimit(1, 1))  # type: ignore[arg-type]
        route = ReportRoute(ctx)
        app = web.Application(
            [
                (report_path("/services/gpucost/"), route),
                (r"/services/gpucost/where", Where),
            ],
            gpucost_report=route,
        )
        server = listen(app, "/services/gpucost/", 0, "127.0.0.1", xheaders=True)
        port = next(iter(server._sockets.values())).getsockname()[1]
        base = f"http://127.0.0.1:{port}/services/gpucost/"
        client = AsyncHTTPClient(force_instance=True)
        proxied = {"X-Forwarded-For": "10.1.2.3", "X-Scheme": "https"}
        asked = {
            "report": HTTPRequest(base + "api/report", method="POST", body=b"{}"),
            "report, a query": HTTPRequest(base + "api/report?x=1", method="POST", body=b"{}"),
            "report, a GET": HTTPRequest(base + "api/report"),
            "past the report path": HTTPRequest(
                base + "api/report/more", method="POST", body=b"{}"
            ),
            "where": HTTPRequest(base + "where", headers=proxied),
        }
        try:
            answers = {}
            for what, request in asked.items():
                response = await client.fetch(request, raise_error=False)
                answers[what] = (response.code, response.body.decode())
            return answers
        finally:
            client.close()
            server.stop()

    answers = asyncio.run(ask())
    no_token = "a Hub token is required (Authorization: token …)"
    assert answers["report"][0] == 401
    assert json.loads(answers["report"][1])["message"] == no_token
    assert answers["report, a query"][0] == 401
    assert json.loads(answers["report, a query"][1])["message"] == no_token
    assert answers["report, a GET"][0] == 405
    assert answers["past the report path"][0] == 404
    assert json.loads(answers["where"][1]) == {"ip": "10.1.2.3", "protocol": "https"}


def test_a_refused_report_answers_the_one_error_shape() -> None:
    """The report route refuses in the shape every route answers (jupyter_server's
    ``message`` and ``reason``), with the keys the hub answered before (``status``,
    ``error``), whatever refuses it: a missing token, a GET, a body over the limit."""

    async def ask() -> dict[str, tuple[int, object]]:
        hub = HubApi("http://127.0.0.1:9/hub/api", "service-token", timeout_s=3)
        ctx = Context(None, hub, lambda: datetime.now(UTC), 64, RateLimit(1, 1))  # type: ignore[arg-type]
        app = web.Application([(r"/api/report", ReportRoute(ctx))])
        server = app.listen(0, "127.0.0.1")
        port = next(iter(server._sockets.values())).getsockname()[1]
        url = f"http://127.0.0.1:{port}/api/report"
        client = AsyncHTTPClient(force_instance=True)
        asked = {
            "no token": HTTPRequest(url, method="POST", body=b"{}"),
            "a GET": HTTPRequest(url, headers={"Authorization": "token t"}),
            "too large": HTTPRequest(
                url, method="POST", body=b"x" * 65, headers={"Authorization": "token t"}
            ),
        }
        try:
            answers: dict[str, tuple[int, object]] = {}
            for what, request in asked.items():
                response = await client.fetch(request, raise_error=False)
                answers[what] = (response.code, json.loads(response.body or b"null"))
            return answers
        finally:
            client.close()
            server.stop()

    answers = asyncio.run(ask())

    def shape(code: int, message: str) -> tuple[int, object]:
        return code, {"message": message, "reason": None, "status": code, "error": message}

    assert answers == {
        "no token": shape(401, "a Hub token is required (Authorization: token …)"),
        "a GET": shape(405, "a report is a POST"),
        "too large": shape(413, "a report is at most 64 bytes"),
    }
