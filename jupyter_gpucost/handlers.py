"""HTTP routes: thin handlers over the cost service. Every route is authenticated."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

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


def handlers() -> list[tuple[str, type[GpuCostHandler]]]:
    """The extension's route table (base_url is prepended by jupyter_server)."""
    from .budget.handlers import budget_handlers

    return [
        (f"{API_PREFIX}/status", StatusHandler),
        *budget_handlers(),
    ]
