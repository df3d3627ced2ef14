"""One HTTP request handed to an ASGI application, its answer streamed back.

The Jupyter server is tornado; the MCP SDK's streamable HTTP transport is an ASGI
application. The handler reads the request (already authenticated, its body read in full)
into an :class:`HttpRequest` and gives a :class:`Responder` that writes through tornado;
:func:`serve` builds the ASGI scope, ``receive`` and ``send`` between the two. Neither
tornado nor the SDK is imported here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class HttpRequest:
    method: str
    #: the path as the client sent it (base URL included), without the query
    path: str
    query: str
    #: each header as received, names in any case
    headers: tuple[tuple[str, str], ...]
    body: bytes
    scheme: str = "http"
    client: tuple[str, int] | None = None
    server: tuple[str, int] | None = None


class Responder(Protocol):
    """Where the answer goes (the tornado handler)."""

    def start(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    async def write(self, chunk: bytes) -> None: ...

    @property
    def closed(self) -> bool: ...


def scope_of(request: HttpRequest) -> dict[str, object]:
    """The ASGI HTTP scope of ``request`` (ASGI 3, HTTP spec 2.3)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method.upper(),
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode("utf-8"),
        "query_string": request.query.encode("latin-1"),
        "root_path": "",
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers
        ],
        "client": request.client,
        "server": request.server,
        "state": {},
    }


class ResponseNotStarted(RuntimeError):
    """The application ended without answering."""


async def serve(app: AsgiApp, request: HttpRequest, responder: Responder) -> None:
    """Runs ``app`` for ``request``; its answer goes to ``responder`` as it comes."""
    body_sent = False
    finished = asyncio.Event()
    started = False

    async def receive() -> Message:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        # nothing more to read: wait until the answer is complete or the client has gone
        while not (finished.is_set() or responder.closed):
            try:
                await asyncio.wait_for(finished.wait(), 1.0)
            except TimeoutError:
                continue
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal started
        kind = message["type"]
        if kind == "http.response.start":
            started = True
            headers = [
                (bytes(name).decode("latin-1"), bytes(value).decode("latin-1"))
                for name, value in message.get("headers", [])
            ]
            responder.start(int(message["status"]), headers)
        elif kind == "http.response.body":
            chunk = bytes(message.get("body", b""))
            if chunk and not responder.closed:
                await responder.write(chunk)
            if not message.get("more_body", False):
                finished.set()

    try:
        await app(scope_of(request), receive, send)
    finally:
        finished.set()
    if not started:
        raise ResponseNotStarted("the application ended without an answer")
