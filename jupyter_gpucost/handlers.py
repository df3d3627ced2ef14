"""HTTP routes: thin handlers over the cost service. Every route is authenticated."""

from __future__ import annotations

import json
from typing import Any

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from .history import HistoryError
from .service import CostService

API_PREFIX = "/gpucost/api"


class GpuCostHandler(ExtensionHandlerMixin, APIHandler):
    #: the resource name JupyterHub's and jupyter_server's authorizers see
    auth_resource = "gpucost"

    @property
    def service(self) -> CostService:
        return self.settings["gpucost_service"]  # type: ignore[no-any-return]

    def write_json(self, payload: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(payload))


class StatusHandler(GpuCostHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        # reads the sampler's latest snapshot: no GPU call, no I/O on the event loop
        self.write_json(self.service.status())


class KernelsHandler(GpuCostHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        # the attribution the sampler thread computed last: no I/O here
        self.write_json(self.service.kernels())


class HistoryHandler(GpuCostHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        window = self.get_query_argument("window", None)
        step = self.get_query_argument("step", None)
        try:
            # windows over an hour read the ledger: off the event loop
            payload = await to_thread.run_sync(self.service.history, window, step)
        except HistoryError as e:
            raise web.HTTPError(400, str(e)) from None
        self.write_json(payload)


def handlers() -> list[tuple[str, type[GpuCostHandler]]]:
    """The extension's route table (base_url is prepended by jupyter_server)."""
    from .budget.handlers import budget_handlers
    from .export.handlers import export_handlers

    return [
        (f"{API_PREFIX}/status", StatusHandler),
        (f"{API_PREFIX}/kernels", KernelsHandler),
        (f"{API_PREFIX}/history", HistoryHandler),
        *budget_handlers(),
        *export_handlers(),
    ]
