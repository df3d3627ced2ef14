"""The session's routes: status, kernels, history, cells; thin handlers over the service.

Every route is authenticated (:mod:`jupyter_gpucost.server.web`); what a handler's core
refuses reaches the client as a JSON error from the base handler, so no handler catches.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from tornado import web

from ..core.protocol import prices_document
from .gpu_use.attribution import Attributor
from .inputs import whole_number
from .kernel_auth import user_or_kernel
from .record.cells import CellLog, clean, with_money_names
from .web import API_PREFIX, GpuCostHandler, Route


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


class PricesHandler(GpuCostHandler):
    """The prices in force now, for a running kernel's cells (the contract's
    ``PRICES_PATH``): they change when the server reads a quoted price again."""

    kernel_methods = frozenset({"GET"})

    @user_or_kernel
    def get(self) -> None:
        # the meter's prices, under its lock: no I/O on the event loop
        self.write_json(prices_document(self.service.prices_in_force()))


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
        # windows over an hour read the ledger: off the event loop; a bad window or step
        # is a Refusal (400)
        payload = await to_thread.run_sync(self.service.history, window, step)
        self.write_json(payload)


class CellsHandler(GpuCostHandler):
    """What each cell cost: kernels post, the notebook and the panel read."""

    kernel_methods = frozenset({"GET", "POST"})

    @property
    def cells(self) -> CellLog:
        return self.service.cells

    @user_or_kernel
    async def get(self) -> None:
        limit = whole_number(
            self.get_query_argument("limit", None), what="limit", default=50, low=1, high=500
        )
        cell_id = self.get_query_argument("cell_id", None)
        notebook = self.get_query_argument("notebook", None)
        found = await to_thread.run_sync(
            lambda: self.cells.recent(limit, cell_id=cell_id, notebook_path=notebook)
        )
        config = self.service.config
        self.write_json(
            {
                "cells": [with_money_names(r) for r in found],
                "currency": config.currency,
                "currency_symbol": config.currency_symbol,
            }
        )

    @user_or_kernel
    async def post(self) -> None:
        record = clean(self.body())  # a Refusal (400) says which field and why
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
        note_gpu_time(self.service.attributor, record)
        self.set_status(201)
        self.write_json(record)


def note_gpu_time(attributor: Attributor, record: dict[str, Any]) -> None:
    """A cell whose GPU busy time the kernel measured tells the attribution (its own
    measure splits a shared GPU better than the driver's samples)."""
    busy = record.get("gpu_busy_s")
    kernel = record.get("kernel_id")
    if not busy or not kernel or record.get("gpu_busy_by") is None:
        return
    attributor.note_gpu_time(
        kernel,
        {int(i): float(s) for i, s in busy.items()},
        float(record["wall_s"]),
        datetime.fromisoformat(record["ended"]).timestamp(),
    )


def relative_to_root(path: str, root_dir: str) -> str:
    """A notebook path as the file browser shows it, when it is under the root dir."""
    if root_dir and os.path.isabs(path):
        root = os.path.realpath(os.path.expanduser(root_dir))
        real = os.path.realpath(path)
        if real.startswith(root + os.sep):
            return os.path.relpath(real, root).replace(os.sep, "/")
    return path


def cost_handlers() -> list[Route]:
    """The session's routes (base_url is prepended by jupyter_server)."""
    return [
        (f"{API_PREFIX}/status", StatusHandler),
        (f"{API_PREFIX}/kernels", KernelsHandler),
        (f"{API_PREFIX}/kernels/prices", PricesHandler),
        (f"{API_PREFIX}/history", HistoryHandler),
        (f"{API_PREFIX}/cells", CellsHandler),
    ]
