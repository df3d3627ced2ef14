"""The base of every route: who may call it, how it answers, how it refuses.

Every handler of the extension derives from :class:`GpuCostHandler` and imports nothing
else of the HTTP layer; the route table is assembled in :mod:`jupyter_gpucost.server.routes`.

- Authentication: a user's, as for any Jupyter Server API (JupyterHub's and
  jupyter_server's authorizers see the resource ``gpucost``), or the kernels' own token on
  the methods a route opens to kernels (``kernel_methods``, see
  :mod:`jupyter_gpucost.server.kernel_auth`).
- Answers: JSON, never cached.
- Refusals: the core raises :class:`~jupyter_gpucost.core.refusal.Refusal` (or a
  budget policy's ``BudgetError``); :meth:`GpuCostHandler.write_error` is the one place that
  turns it into the API's JSON error (:func:`~jupyter_gpucost.core.refusal.error_body`:
  ``{"message": "...", "reason": null}``, jupyter_server's own shape) with its status,
  logged as one warning line like any refused request. Anything else is a bug: a 500.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..core.protocol import API_PATH
from ..core.refusal import Refusal, error_body
from .budget.policy import BudgetCannotAct, BudgetError, HardBudgetRefused
from .inputs import json_object
from .kernel_auth import KernelUser, is_kernel_request
from .ledger import LedgerOffline
from .service import CostService
from .status_ledger import ledger_unreachable

API_PREFIX = f"/{API_PATH}"


def error_status(error: BaseException) -> int | None:
    """The HTTP status of a refusal raised by the server's code, or None when ``error`` is
    not a refusal (a bug: the server answers 500)."""
    if isinstance(error, Refusal):
        return error.status
    # the budget policy's own errors: what the user sent cannot be a budget
    if isinstance(error, HardBudgetRefused):
        return 403
    if isinstance(error, BudgetCannotAct):
        return 409
    if isinstance(error, BudgetError):
        return 400
    # a route that read the ledger while it cannot be reached: a spell, not a bug
    if isinstance(error, LedgerOffline):
        return 503
    return None


def as_http_error(error: BaseException) -> web.HTTPError | None:
    """A refusal as tornado's error (its message the user's to read), or None."""
    status = error_status(error)
    if status is None:
        return None
    # given as an argument: tornado doubles every % of a log_message given alone
    return web.HTTPError(status, "%s", refusal_message(error))


def refusal_message(error: BaseException) -> str:
    """The sentence a refusal answers with."""
    return ledger_unreachable(None, None) if isinstance(error, LedgerOffline) else str(error)


class GpuCostHandler(ExtensionHandlerMixin, APIHandler):
    #: the resource name JupyterHub's and jupyter_server's authorizers see
    auth_resource = "gpucost"
    #: the methods a kernel may call with its own token (see kernel_auth)
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
        service: CostService = self.settings["gpucost_service"]
        return service

    def body(self) -> dict[str, object]:
        """The request's JSON object (``{}`` when empty), or a 400 that says what is wrong."""
        return json_object(self.request.body)

    def write_json(self, payload: object) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(payload))

    # -- refusals: the one place they become JSON errors --------------------------------

    def log_exception(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        converted = None if value is None else as_http_error(value)
        if converted is None:
            super().log_exception(typ, value, tb)
        else:
            # a refused request: one warning line with its status and message, no traceback
            super().log_exception(web.HTTPError, converted, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc_info: tuple[type[BaseException], BaseException, TracebackType] | None
        exc_info = kwargs.get("exc_info")
        converted = None if exc_info is None else as_http_error(exc_info[1])
        if exc_info is not None and converted is not None:
            # tornado answered 500 for an exception it does not know: say what it is, in
            # the words it has (jupyter_server's reply would show a log format string)
            self.set_status(converted.status_code)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(error_body(refusal_message(exc_info[1]))))
            return
        # jupyter_server's own answer, in the same shape (``message``, ``reason``)
        super().write_error(status_code, **kwargs)


#: one route: its pattern (jupyter_server prepends the base URL) and its handler
Route = tuple[str, type[GpuCostHandler]]
