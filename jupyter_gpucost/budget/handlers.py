"""Budget routes: read the budget, set the soft one, stop now, acknowledge a save."""

from __future__ import annotations

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from tornado import web

from ..handlers import API_PREFIX, GpuCostHandler
from ..kernel_link import user_or_kernel
from .controller import BudgetController
from .policy import Budget, BudgetError, parse_amount, parse_scope

SOFT_KEYS = {"amount_usd", "scope"}
HARD_REFUSAL = (
    "the hard budget is set by the administrator (c.GpuCost.hard_budget_usd or "
    "GPUCOST_BUDGET_USD) and cannot be changed from JupyterLab"
)


class BudgetHandler(GpuCostHandler):
    @property
    def budget(self) -> BudgetController:
        controller = self.settings.get("gpucost_budget")
        if controller is None:
            raise web.HTTPError(503, "the budget is not running on this server")
        return controller  # type: ignore[no-any-return]


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
        """Set the soft budget: ``{"amount_usd": 5, "scope": "session"}``; null removes it."""
        body = self.body()
        if "hard" in body or "hard_usd" in body or body.get("kind") == "hard":
            raise web.HTTPError(403, HARD_REFUSAL)
        unknown = set(body) - SOFT_KEYS - {"kind"}
        if unknown:
            raise web.HTTPError(
                400, f"unknown field(s) {', '.join(sorted(unknown))}: send amount_usd and scope"
            )
        if body.get("kind", "soft") != "soft":
            raise web.HTTPError(400, "kind must be 'soft'")
        if "amount_usd" not in body:
            raise web.HTTPError(400, "amount_usd is required (a number of dollars, or null)")
        try:
            if body["amount_usd"] is None:
                budget = None
            else:
                amount = parse_amount(body["amount_usd"], what="amount_usd")
                scope = parse_scope(body.get("scope", "session"), what="scope")
                budget = Budget("soft", amount, scope)
            await self.budget.set_soft(budget)
        except BudgetError as e:
            raise web.HTTPError(400, str(e)) from None
        self.write_json(self.budget.payload())


class StopNowHandler(BudgetHandler):
    @web.authenticated
    @authorized
    def post(self) -> None:
        """ "Save and stop now": end the grace period at once."""
        if not self.budget.stop_now():
            raise web.HTTPError(409, "there is no budget countdown to end now")
        self.write_json({"stopping": True})


class SavedHandler(BudgetHandler):
    @web.authenticated
    @authorized
    def post(self) -> None:
        """A browser's answer to a save request."""
        body = self.body()
        request_id, client = body.get("request_id"), body.get("client")
        saved, failed = body.get("saved", []), body.get("failed", [])
        if not isinstance(request_id, str) or not isinstance(client, str) or not client:
            raise web.HTTPError(400, "request_id and client must be strings")
        if not (isinstance(saved, list) and isinstance(failed, list)):
            raise web.HTTPError(400, "saved and failed must be lists of paths")
        self.budget.seen(client)
        if not self.budget.acknowledge(
            request_id, client, [str(p) for p in saved][:1000], [str(p) for p in failed][:1000]
        ):
            raise web.HTTPError(409, f"no save request {request_id!r} is pending")
        self.write_json({"acknowledged": True})


class ActionsHandler(BudgetHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        """What budgets did, in this session and earlier ones (from the ledger)."""
        ledger = self.service.ledger
        if ledger is None:
            # no ledger: this session's actions only
            self.write_json({"actions": list(reversed(self.budget.actions)), "ledger": False})
            return
        actions = await to_thread.run_sync(ledger.actions, 100)
        self.write_json({"actions": actions, "ledger": True})


def budget_handlers() -> list[tuple[str, type[GpuCostHandler]]]:
    return [
        (f"{API_PREFIX}/budget", BudgetStateHandler),
        (f"{API_PREFIX}/budget/stop-now", StopNowHandler),
        (f"{API_PREFIX}/budget/saved", SavedHandler),
        (f"{API_PREFIX}/budget/actions", ActionsHandler),
    ]
