"""The MCP endpoint: the official SDK's server and its streamable HTTP transport.

A low-level :class:`mcp.server.lowlevel.Server` lists the tools of :mod:`.schemas` (in the
server's language at each listing) and calls those of :mod:`.tools`; the SDK's
:class:`StreamableHTTPSessionManager` answers each request, stateless and in JSON (no
session is kept between requests: every request is authenticated by the Jupyter server on
its own). The manager's lifetime runs in the server's event loop, from the first request to
:meth:`McpEndpoint.stop`. Only :mod:`.setup` imports this module, so a server without the
``mcp`` package still starts (and the route says what to install).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import mcp.types as types
from anyio import to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from ..._version import __version__
from ...core.i18n import _
from ...core.refusal import Refusal
from ..budget.policy import BudgetError
from ..ledger import LedgerOffline
from ..status_ledger import ledger_unreachable
from . import tools
from .bridge import HttpRequest, Responder, serve
from .schemas import INSTRUCTIONS, TOOLS, find

#: how long the first request waits for the session manager to start
START_TIMEOUT_S = 10.0
Context = ServerRequestContext[Any, Any]


class McpEndpoint:
    def __init__(self, parts: tools.AgentParts, log: logging.Logger) -> None:
        self.parts = parts
        self.log = log
        self.server: Server[Any] = Server(
            "jupyter-gpucost",
            version=__version__,
            instructions=_(INSTRUCTIONS),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(
            app=self.server, stateless=True, json_response=True
        )
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()

    # -- lifetime ---------------------------------------------------------------------

    async def _run(self) -> None:
        async with self.manager.run():
            self._ready.set()
            await self._stopping.wait()

    async def _running(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait(
                {ready, self._task}, timeout=START_TIMEOUT_S, return_when="FIRST_COMPLETED"
            )
        finally:
            ready.cancel()
        if not self._ready.is_set():
            if self._task.done() and self._task.exception() is not None:
                raise RuntimeError("the MCP session manager failed") from self._task.exception()
            raise RuntimeError("the MCP session manager did not start")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._stopping.set()
        try:
            await asyncio.wait_for(self._task, 10)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
        except Exception:
            self.log.exception("jupyter-gpucost: the MCP endpoint did not stop cleanly")

    async def handle(self, request: HttpRequest, responder: Responder) -> None:
        """Answers one (authenticated) request to ``<base_url>gpucost/mcp``."""
        await self._running()
        await serve(self.manager.handle_request, request, responder)

    # -- the tools ----------------------------------------------------------------------

    async def _list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name,
                    description=_(spec.description),
                    input_schema=spec.input_schema(),
                    annotations=types.ToolAnnotations(
                        read_only_hint=spec.read_only,
                        destructive_hint=spec.name == "stop_when_done",
                        open_world_hint=False,
                    ),
                )
                for spec in TOOLS
            ]
        )

    async def _call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments: dict[str, object] = dict(params.arguments or {})
        spec = find(params.name)
        try:
            if spec is None:
                raise Refusal(_("no tool is called {name}").format(name=params.name[:80]))
            answer = await self._answer(spec.name, arguments)
        except (Refusal, BudgetError, LedgerOffline) as e:
            text = ledger_unreachable(None, None) if isinstance(e, LedgerOffline) else str(e)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))],
            structured_content=answer,
        )

    async def _answer(self, name: str, arguments: dict[str, object]) -> dict[str, object]:
        parts = self.parts
        if name == "cost_status":
            tools.unknown_fields(arguments, ())
            return tools.cost_status(parts)
        if name == "set_budget":
            return await tools.set_budget(parts, arguments)
        if name == "stop_when_done":
            return tools.stop_when_done(parts, arguments)
        # these may read the ledger: off the event loop
        work: Callable[[tools.AgentParts, dict[str, object]], dict[str, Any]]
        work = tools.estimate if name == "estimate" else tools.cell_costs
        return await to_thread.run_sync(work, parts, arguments)
