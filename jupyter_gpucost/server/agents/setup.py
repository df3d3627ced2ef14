"""The agents' endpoint at start-up: the MCP SDK's, or a stand-in that says what to
install when the optional ``mcp`` package is missing (the server starts either way)."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Protocol

from ...core.i18n import N_, _
from ...core.refusal import Refusal
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
        raise Refusal(_(NO_SDK), HTTPStatus.SERVICE_UNAVAILABLE)

    async def stop(self) -> None:
        return None


def start_endpoint(parts: AgentParts, log: logging.Logger) -> Endpoint:
    try:
        from .endpoint import McpEndpoint
    except ImportError as e:
        log.info("jupyter-gpucost: no MCP endpoint for agents (%s): %s", e, _(NO_SDK))
        return NoSdk(str(e))
    return McpEndpoint(parts, log)
