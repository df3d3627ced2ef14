"""``<base_url>gpucost/mcp``: the agents' MCP endpoint, a thin handler over
:mod:`.endpoint`.

Authenticated as every route of the extension (the Jupyter token, or JupyterHub's OAuth;
jupyter_server's XSRF rule for POST: a token in the ``Authorization`` header is enough, a
browser's cookie needs the XSRF token); the request, body read, is handed to the SDK's
ASGI transport and its answer streamed back.

Only ``POST``: the endpoint is stateless and answers in JSON, so it offers no event stream
to ``GET`` and no session to ``DELETE`` (both ``405``, as the MCP specification allows).
"""

from __future__ import annotations

from http import HTTPStatus

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core.i18n import _
from ...core.refusal import Refusal
from ..web import GpuCostHandler, Route
from .bridge import HttpRequest
from .setup import Endpoint

#: the endpoint's path (jupyter_server prepends the base URL)
MCP_PATH = "/gpucost/mcp"


class McpHandler(GpuCostHandler):
    #: the client closed the connection
    gone = False

    def on_connection_close(self) -> None:
        self.gone = True

    async def _bridge(self) -> None:
        endpoint: Endpoint | None = self.settings.get("gpucost_agents")
        if endpoint is None:
            raise Refusal(
                _("the MCP endpoint is not running on this server"), HTTPStatus.SERVICE_UNAVAILABLE
            )
        request = self.request
        exchange = HttpRequest(
            method=request.method or "GET",
            path=request.path,
            query=request.query,
            headers=tuple(request.headers.get_all()),
            body=request.body,
            scheme=request.protocol,
            client=(request.remote_ip or "", 0),
        )
        await endpoint.handle(exchange, _Answer(self))
        if not self._finished:
            self.finish()

    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self._bridge()


class _Answer:
    """The handler as the bridge's Responder."""

    def __init__(self, handler: McpHandler) -> None:
        self.handler = handler

    @property
    def closed(self) -> bool:
        return self.handler.gone

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.handler.set_status(status)
        for name, value in headers:
            if name.lower() in ("content-length", "transfer-encoding", "connection"):
                continue  # tornado frames the answer itself
            self.handler.set_header(name, value)

    async def write(self, chunk: bytes) -> None:
        self.handler.write(chunk)
        await self.handler.flush()


def agent_handlers() -> list[Route]:
    return [(MCP_PATH, McpHandler)]
