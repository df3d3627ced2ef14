"""What the agents' tools answer (tornado-free, and free of the MCP SDK).

Each answer is read from the parts the REST routes read: ``cost_status`` from the status
document (:meth:`CostService.status`, as ``GET /gpucost/api/status``), ``cell_costs`` from
the cell log (as ``GET /gpucost/api/cells``), ``estimate`` from the meter's latest snapshot
and the budget's standings, ``set_budget`` and ``stop_when_done`` through the budget
controller (as ``PUT /gpucost/api/budget`` and ``POST /gpucost/api/budget/stop``). Nothing
is computed twice. Refusals raise the server's own errors (``BudgetError``,
``Refusal``): their messages, in the server's language, are what the agent reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from http import HTTPStatus
from typing import Any

from ...core.billing import US_PER_S, rounded_cost_micro
from ...core.i18n import _
from ...core.money import as_decimal, json_amount, status_bar
from ...core.refusal import Refusal
from ..budget.controller import BudgetController
from ..budget.parse import parse_lower_request
from ..budget.policy import binding_standing
from ..budget.stop_request import parse_stop_request
from ..inputs import one_of, shown, type_name
from ..record.cells import with_money_names
from ..service import CostService

#: the longest run an estimate prices: 30 days
MAX_ESTIMATE_S = 30 * 24 * 3600
#: how many cells ``cell_costs`` reads (the cells route's most)
CELLS_READ = 500
SCOPES = ("session", "today")
#: the status document's figures ``cost_status`` answers with, unchanged: each amount under
#: its currency-neutral name and its deprecated ``_usd`` twin (docs/api.md, "Money keys")
STATUS_KEYS = (
    "as_of",
    "session_id",
    "session_started",
    "elapsed_s",
    "currency",
    "currency_symbol",
    "cost",
    "gpu_cost",
    "idle_cost",
    "base_price_per_hour",
    "rate_per_hour",
    "cost_usd",
    "gpu_cost_usd",
    "idle_cost_usd",
    "base_price_usd_per_hour",
    "rate_usd_per_hour",
    "price_basis",
    "price_basis_reasons",
    "today",
    "month",
    "today_usd",
    "month_usd",
    "billing",
    "prices",
    "machine",
)
GPU_KEYS = (
    "index",
    "name",
    "model",
    "price_per_hour",
    "price_usd_per_hour",
    "price_basis",
    "utilization_pct",
)
BUDGET_KEYS = ("state", "binding", "hard", "soft", "runs_out_at", "stop", "grace", "action")


@dataclass(frozen=True)
class AgentParts:
    """The server's parts the tools read: the cost service and the budget (``None``: the
    budget is not running on this server)."""

    service: CostService
    budget: BudgetController | None

    def controller(self) -> BudgetController:
        if self.budget is None:
            raise Refusal(
                _("the budget is not running on this server"), HTTPStatus.SERVICE_UNAVAILABLE
            )
        return self.budget


def cost_status(parts: AgentParts) -> dict[str, object]:
    """What this session has cost, its rate, GPUs, budget and machine: the status document's
    own figures (the status bar's)."""
    status = parts.service.status()
    answer = {key: status.get(key) for key in STATUS_KEYS}
    answer["gpus"] = [{k: g.get(k) for k in GPU_KEYS} for g in status["gpus"]]
    answer["budget"] = budget_summary(status.get("budget"))
    answer["warnings"] = [w["message"] for w in status["warnings"]]
    symbol = str(status["currency_symbol"])
    answer["summary"] = _("This session has cost {cost} so far, at {rate} per hour.").format(
        cost=status_bar(status["cost"], symbol),
        rate=status_bar(status["rate_per_hour"], symbol),
    )
    return answer


def budget_summary(payload: Mapping[str, Any] | None) -> dict[str, object] | None:
    """The budget document's parts an agent acts on (``None``: no budget running)."""
    if payload is None:
        return None
    summary = {key: payload.get(key) for key in BUDGET_KEYS}
    hub = payload.get("hub")
    summary["hub"] = None if not hub else hub.get("budgets")
    summary["stop_when_idle"] = payload.get("stop_when_idle")
    return summary


def remaining_micro(parts: AgentParts) -> tuple[int | None, str | None]:
    """The money left in the binding budget (the least left of all), and its kind; ``None``
    when no budget with a known spend is set."""
    if parts.budget is None:
        return None, None
    binding = binding_standing(parts.budget.standings())
    if binding is None:
        return None, None
    return max(0, binding.remaining_micro or 0), binding.budget.kind


def parse_duration(raw: object) -> float:
    """A duration in seconds: a number above 0 and at most 30 days."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise Refusal(
            _("duration_s must be a number of seconds, not {what}").format(what=type_name(raw))
        )
    # a float may be NaN or infinite; an int of any size is compared exactly
    if (isinstance(raw, float) and not math.isfinite(raw)) or raw <= 0 or raw > MAX_ESTIMATE_S:
        raise Refusal(
            _("duration_s must be more than 0 and at most {most} seconds (30 days)").format(
                most=MAX_ESTIMATE_S
            )
        )
    return float(raw)


def _text(raw: object, what: str, limit: int) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw or len(raw) > limit:
        raise Refusal(
            _("{what} must be a string of 1 to {limit} characters, not {value}").format(
                what=what, limit=limit, value=shown(raw)
            )
        )
    return raw


def unknown_fields(arguments: Mapping[str, object], known: Sequence[str]) -> None:
    """Refuses arguments the tool does not take (a forged field is never ignored)."""
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        names = ", ".join(shown(k, 40) for k in unknown[:5])
        raise Refusal(
            _("unknown argument(s) {names}: this tool takes {known}").format(
                names=names, known=", ".join(known) or "-"
            )
        )


def estimate(parts: AgentParts, arguments: Mapping[str, object]) -> dict[str, object]:
    """What ``duration_s`` (or the wall time of a cell already measured) costs at this
    machine's rate now, and whether the budget has that much left. Reads the ledger when a
    cell is not among this server's own: call it off the event loop."""
    unknown_fields(arguments, ("duration_s", "cell_id", "notebook_path"))
    cell_id = _text(arguments.get("cell_id"), "cell_id", 200)
    notebook = _text(arguments.get("notebook_path"), "notebook_path", 1024)
    based_on = None
    if (arguments.get("duration_s") is None) == (cell_id is None):
        raise Refusal(_("send either duration_s or cell_id (a cell already measured)"))
    if cell_id is None:
        duration_s = parse_duration(arguments.get("duration_s"))
    else:
        found = parts.service.cells.recent(1, cell_id=cell_id, notebook_path=notebook)
        if not found:
            raise Refusal(
                _("no measured cell {cell} in this session's or the ledger's cells").format(
                    cell=shown(cell_id)
                ),
                404,
            )
        duration_s = float(found[0]["wall_s"])
        # the record's amounts under their currency-neutral names too
        cell = with_money_names(found[0])
        based_on = {
            key: cell.get(key)
            for key in (
                "cell_id",
                "notebook_path",
                "wall_s",
                "cost",
                "rate_per_hour",
                "cost_usd",
                "rate_usd_per_hour",
            )
        }
    snapshot = parts.service.sampler.latest.snapshot
    rate = Decimal(snapshot.rate_per_hour)
    cost = rounded_cost_micro(rate, round(duration_s * US_PER_S))
    left, kind = remaining_micro(parts)
    symbol = parts.service.config.currency_symbol
    fits = None if left is None else cost <= left
    words = {
        "cost": status_bar(json_amount(cost), symbol),
        "duration": f"{duration_s:g}",
        "left": "" if left is None else status_bar(json_amount(left), symbol),
    }
    if fits is None:
        text = _("Running {duration} s here costs about {cost}; no budget is set.")
    elif fits:
        text = _("Running {duration} s here costs about {cost}; the budget has {left} left.")
    else:
        text = _(
            "Running {duration} s here costs about {cost}, more than the {left} left in the "
            "budget: it would be stopped before the end."
        )
    remaining = None if left is None else json_amount(left)
    return {
        "duration_s": duration_s,
        "cost": json_amount(cost),
        "rate_per_hour": float(rate),
        "currency": parts.service.config.currency,
        "currency_symbol": symbol,
        "as_of": snapshot.as_of.isoformat(),
        "budget_remaining": remaining,
        # deprecated twins (docs/api.md, "Money keys")
        "cost_usd": json_amount(cost),
        "rate_usd_per_hour": float(rate),
        "budget_remaining_usd": remaining,
        "budget_kind": kind,
        "fits_budget": fits,
        "based_on_cell": based_on,
        "summary": text.format(**words),
    }


def _micro(amount: object) -> int:
    return 0 if amount is None else int((as_decimal(str(amount)) * 1_000_000).to_integral_value())


def _busy_s(cell: Mapping[str, Any]) -> float | None:
    busy = cell.get("gpu_busy_s")
    return None if not busy else round(sum(float(s) for s in busy.values()), 3)


def parse_limit(raw: object) -> int:
    if raw is None:
        return 10
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 50:
        raise Refusal(_("limit must be a whole number from 1 to 50"))
    return raw


def cell_costs(parts: AgentParts, arguments: Mapping[str, object]) -> dict[str, object]:
    """The most expensive cells and notebooks of this session (or of today), with their
    GPU time. Reads the ledger for today: call it off the event loop."""
    unknown_fields(arguments, ("scope", "limit"))
    scope = arguments.get("scope", "session")
    if scope not in SCOPES:
        raise Refusal(one_of("scope", SCOPES, scope))
    limit = parse_limit(arguments.get("limit"))
    cells = parts.service.cells
    if scope == "session":
        records = cells.in_memory(CELLS_READ)
    else:
        since = day_start(parts, datetime.now(UTC))
        records = [
            r for r in cells.recent(CELLS_READ) if datetime.fromisoformat(r["ended"]) >= since
        ]
    ranked = sorted(records, key=lambda r: _micro(r.get("cost_usd")), reverse=True)
    notebooks: dict[str | None, dict[str, Any]] = {}
    for r in records:
        book = notebooks.setdefault(
            r.get("notebook_path"),
            {"notebook_path": r.get("notebook_path"), "micro": 0, "cells": 0, "wall_s": 0.0},
        )
        book["micro"] += _micro(r.get("cost_usd"))
        book["cells"] += 1
        book["wall_s"] += float(r.get("wall_s") or 0)
        busy = _busy_s(r)
        if busy is not None:
            book["gpu_busy_s"] = round(book.get("gpu_busy_s", 0.0) + busy, 3)
    books = sorted(notebooks.values(), key=lambda b: b["micro"], reverse=True)[:limit]
    total = json_amount(sum(_micro(r.get("cost_usd")) for r in records))
    return {
        "scope": scope,
        "currency_symbol": parts.service.config.currency_symbol,
        "cells_counted": len(records),
        "total": total,
        "total_usd": total,  # deprecated twin (docs/api.md, "Money keys"), as below
        "cells": [_listed_cell(with_money_names(r)) for r in ranked[:limit]],
        "notebooks": [
            {
                "notebook_path": b["notebook_path"],
                "cost": json_amount(b["micro"]),
                "cost_usd": json_amount(b["micro"]),
                "cells": b["cells"],
                "wall_s": round(b["wall_s"], 3),
                "gpu_busy_s": b.get("gpu_busy_s"),
            }
            for b in books
        ],
    }


def _listed_cell(cell: Mapping[str, Any]) -> dict[str, object]:
    return {
        "cell_id": cell["cell_id"],
        "notebook_path": cell.get("notebook_path"),
        "cost": cell.get("cost"),
        "cost_usd": cell.get("cost_usd"),
        "wall_s": cell.get("wall_s"),
        "gpu_busy_s": _busy_s(cell),
        "ended": cell.get("ended"),
        "status": cell.get("status"),
    }


def day_start(parts: AgentParts, now: datetime) -> datetime:
    """Where today starts: in the ledger's time zone, else UTC (as the budget's day)."""
    ledger = parts.service.ledger
    if ledger is not None:
        return ledger.day_start(now)
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


async def set_budget(parts: AgentParts, arguments: Mapping[str, object]) -> dict[str, object]:
    """A session budget below every limit in force (lower only: an agent never raises or
    removes a budget, the admin's or the user's)."""
    controller = parts.controller()
    unknown_fields(arguments, ("amount_usd",))
    budget = parse_lower_request(arguments, controller.policy.budgets())
    await controller.set_soft(budget)
    payload = controller.payload()
    symbol = controller.config.currency_symbol
    return {
        "budget": budget_summary(payload),
        "summary": _("This session's budget is now {amount}.").format(
            amount=status_bar(json_amount(budget.amount_micro), symbol)
        ),
    }


def stop_when_done(parts: AgentParts, arguments: Mapping[str, object]) -> dict[str, object]:
    """Once no kernel is busy, stop as a budget does (countdown, save, export, action):
    what ``%gpucost stop-when-done`` and the panel's "stop when done" ask."""
    controller = parts.controller()
    unknown_fields(arguments, ("action",))
    request = parse_stop_request({**arguments, "reason": "done", "when": "idle"})
    controller.stop_when_idle(request.action)
    payload = controller.payload()
    action = request.action or controller.config.action
    return {
        "budget": budget_summary(payload),
        "summary": _(
            "When no kernel is busy any more, the server saves the notebooks and then takes "
            "the action {action}; the user can cancel it in JupyterLab."
        ).format(action=action),
    }
