"""HTTP routes: thin handlers over the cost service. Every route is authenticated."""

from __future__ import annotations

import json
import os
from typing import Any

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from .cells import CellRecordError, clean
from .history import HistoryError
from .inputs import InputError, json_object, whole_number
from .kernel_link import KernelUser, is_kernel_request, user_or_kernel
from .service import CostService

API_PREFIX = "/gpucost/api"


class GpuCostHandler(ExtensionHandlerMixin, APIHandler):
    #: the resource name JupyterHub's and jupyter_server's authorizers see
    auth_resource = "gpucost"
    #: the methods a kernel may call with its own token (see kernel_link)
    kernel_methods: frozenset[str] = frozenset()
    kernel_authenticated = False

    async def prepare(self) -> None:  # type: ignore[override]
        if self.request.method in self.kernel_methods and is_kernel_request(self):
            if not self.check_host():
                raise web.HTTPError(403)
            # the kernels' token: no login, no XSRF cookie (a kernel has no browser)
            self.kernel_authenticated = True
            self.current_user = KernelUser()
            return
        await super().prepare()

    @property
    def service(self) -> CostService:
        return self.settings["gpucost_service"]  # type: ignore[no-any-return]

    def body(self) -> dict[str, Any]:
        """The request's JSON object, or 400 with what is wrong."""
        try:
            return json_object(self.request.body)
        except InputError as e:
            raise web.HTTPError(e.status, str(e)) from None

    def write_json(self, payload: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(payload))


class StatusHandler(GpuCostHandler):
    kernel_methods = frozenset({"GET"})

    @user_or_kernel
    def get(self) -> None:
        # reads the sampler's latest snapshot: no GPU call, no I/O on the event loop
        budget = self.settings.get("gpucost_budget")
        if budget is not None:
            # a page that polls (its event socket is down) is asked to save as well
            budget.seen(self.get_query_argument("client", None))
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


class CellsHandler(GpuCostHandler):
    """What each cell cost: kernels post, the notebook and the panel read."""

    kernel_methods = frozenset({"GET", "POST"})

    @property
    def cells(self) -> Any:
        return self.service.cells

    @user_or_kernel
    async def get(self) -> None:
        try:
            limit = whole_number(
                self.get_query_argument("limit", None), what="limit", default=50, low=1, high=500
            )
        except InputError as e:
            raise web.HTTPError(e.status, str(e)) from None
        cell_id = self.get_query_argument("cell_id", None)
        notebook = self.get_query_argument("notebook", None)
        found = await to_thread.run_sync(
            lambda: self.cells.recent(limit, cell_id=cell_id, notebook_path=notebook)
        )
        self.write_json({"cells": found, "currency_symbol": self.service.config.currency_symbol})

    @user_or_kernel
    async def post(self) -> None:
        try:
            record = clean(self.body())
        except CellRecordError as e:
            raise web.HTTPError(400, str(e)) from None
        # the server's sessions know the notebook of their kernels, relative to the root
        # dir (a kernel only sees an absolute path, or nothing)
        known = self.service.tracker.kernels().get(record["kernel_id"] or "")
        if known is not None and known.notebook_path:
            record["notebook_path"] = known.notebook_path
        elif record["notebook_path"]:
            record["notebook_path"] = relative_to_root(
                record["notebook_path"], self.settings.get("server_root_dir", "")
            )
        # the ledger write is blocking I/O: off the event loop
        await to_thread.run_sync(self.cells.add, record)
        self.set_status(201)
        self.write_json(record)


def relative_to_root(path: str, root_dir: str) -> str:
    """A notebook path as the file browser shows it, when it is under the root dir."""
    if root_dir and os.path.isabs(path):
        root = os.path.realpath(os.path.expanduser(root_dir))
        real = os.path.realpath(path)
        if real.startswith(root + os.sep):
            return os.path.relpath(real, root).replace(os.sep, "/")
    return path


def handlers() -> list[tuple[str, type[GpuCostHandler]]]:
    """The extension's route table (base_url is prepended by jupyter_server)."""
    from .budget.handlers import budget_handlers
    from .export.handlers import export_handlers

    return [
        (f"{API_PREFIX}/status", StatusHandler),
        (f"{API_PREFIX}/kernels", KernelsHandler),
        (f"{API_PREFIX}/history", HistoryHandler),
        (f"{API_PREFIX}/cells", CellsHandler),
        *budget_handlers(),
        *export_handlers(),
    ]
