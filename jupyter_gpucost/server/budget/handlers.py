"""Budget routes: read the budget, set the soft one, stop now, acknowledge a save.

What the policy refuses (``BudgetError``: 400, ``HardBudgetRefused``: 403) reaches the client
as a JSON error from the base handler (:mod:`jupyter_gpucost.server.web`).
"""

from __future__ import annotations

from http import HTTPStatus

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core.i18n import _
from ...core.refusal import Refusal
from ..kernel_auth import user_or_kernel
from ..web import API_PREFIX, GpuCostHandler, Route
from .controller import BudgetController
from .parse import parse_soft_request
from .policy import BudgetCannotAct
from .save_answer import parse_save_answer
from .stop_request import parse_stop_request


class BudgetHandler(GpuCostHandler):
    @property
    def budget(self) -> BudgetController:
        controller: BudgetController | None = self.settings.get("gpucost_budget")
        if controller is None:
            raise Refusal(
                _("the budget is not running on this server"), HTTPStatus.SERVICE_UNAVAILABLE
            )
        return controller


class BudgetStateHandler(BudgetHandler):
    #: ``%gpucost budget 5`` in a notebook sets the user's own budget
    kernel_methods = frozenset({"PUT"})

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.budget.seen(self.get_query_argument("client", None))
        self.write_json(self.budget.payload())

    @user_or_kernel
    async def put(self) -> None:
        """Set the soft budget: ``{"amount_usd": 5, "scope": "session"}``; null removes it.
        Where no GPU is metered a budget could never act: refused (409) with the sentence."""
        budget = parse_soft_request(self.body())
        if budget is not None and (refusal := self.budget.unmetered()) is not None:
            raise BudgetCannotAct(_(refusal))
        await self.budget.set_soft(budget)
        self.write_json(self.budget.payload())


class StopNowHandler(BudgetHandler):
    @web.authenticated
    @authorized
    def post(self) -> None:
        """ "Save and stop now": end the grace period at once."""
        if not self.budget.stop_now():
            raise Refusal(_("there is no budget countdown to end now"), HTTPStatus.CONFLICT)
        self.write_json({"stopping": True})


class StopHandler(BudgetHandler):
    """``POST {"action": "stop-instance", "reason": "user"}``: stop with the countdown,
    save and export of a budget stop (``reason`` "done": the end of a cell or training run
    the user asked to stop after; ``"when": "idle"``: once no kernel is busy);
    ``DELETE``: cancel that countdown, or the wait for idle kernels."""

    #: ``%gpucost stop-when-done`` asks from the kernel at the end of the cell
    kernel_methods = frozenset({"POST"})

    @user_or_kernel
    def post(self) -> None:
        request = parse_stop_request(self.body())
        if request.when == "idle":
            self.budget.stop_when_idle(request.action)
        elif not self.budget.request_stop(request.reason, request.action):
            raise Refusal(
                _("a budget action is under way: it cannot be replaced now"), HTTPStatus.CONFLICT
            )
        self.write_json(self.budget.payload())

    @web.authenticated
    @authorized
    def delete(self) -> None:
        if not self.budget.cancel_stop():
            raise Refusal(_("there is no countdown of yours to cancel"), HTTPStatus.CONFLICT)
        self.write_json(self.budget.payload())


class SavedHandler(BudgetHandler):
    @web.authenticated
    @authorized
    def post(self) -> None:
        """A browser's answer to a save request."""
        answer = parse_save_answer(self.body())
        self.budget.seen(answer.client)
        if not self.budget.acknowledge(
            answer.request_id, answer.client, answer.saved, answer.failed
        ):
            raise Refusal(
                _("no save request {id} is pending").format(id=repr(answer.request_id)),
                HTTPStatus.CONFLICT,
            )
        self.write_json({"acknowledged": True})


class ActionsHandler(BudgetHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """What budgets did, in this session and earlier ones (from the ledger)."""
        ledger = self.service.ledger
        if ledger is None:
            # no ledger: this session's actions only
            self.write_json({"actions": self.budget.action_log(), "ledger": False})
            return
        actions = await to_thread.run_sync(ledger.actions, 100)
        self.write_json({"actions": actions, "ledger": True})


def budget_handlers() -> list[Route]:
    return [
        (f"{API_PREFIX}/budget", BudgetStateHandler),
        (f"{API_PREFIX}/budget/stop-now", StopNowHandler),
        (f"{API_PREFIX}/budget/stop", StopHandler),
        (f"{API_PREFIX}/budget/saved", SavedHandler),
        (f"{API_PREFIX}/budget/actions", ActionsHandler),
    ]
