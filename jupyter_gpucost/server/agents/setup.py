"""The agents' endpoint at start-up: the MCP SDK's, or a stand-in that says what to
install when the optional ``mcp`` package is missing (the server starts either way)."""

from __future__ import annotations

import logging
from typing import Protocol

from ...core.i18n import N_, _
from ..errors import Unavailable
from .bridge import HttpRequest, Responder
from .tools import AgentParts

NO_SDK = N_(
    "the MCP endpoint needs the mcp package, which this server does not have: "
    "pip install 'jupyter-gpucost[mcp]' and restart the server"
)


class Endpoint(Protocol):
    async def handle(self, request: HttpRequest, responder: Responder) -> None: ...

    async def stop(self) -> None: ...


class NoSdk:
    """Every request is refused with a 503 that says what to install."""

    def __init__(self, why: str) -> None:
        self.why = why

    async def handle(self, request: HttpRequest, responder: Responder) -> None:
        raise Unavailable(_(NO_SDK))

    async def stop(self) -> None:
        return None


def start_endpoint(parts: AgentParts, log: logging.Logger) -> Endpoint:
    try:
        from .endpoint import McpEndpoint
    except ImportError as e:
        log.info("jupyter-gpucost: no MCP endpoint for agents (%s): %s", e, _(NO_SDK))
        return NoSdk(str(e))
    return McpEndpoint(parts, log)
