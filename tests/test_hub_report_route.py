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
from jupyter_gpucost.hub.web.report_route import MAX_PENDING_CHECKS, ReportRoute


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
