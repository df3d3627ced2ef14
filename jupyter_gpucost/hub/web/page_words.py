"""The words the hub service's pages write for values that come as data (a budget's scope
and whom it is set for, why a server is being stopped), in the page's language.

The pages' JSON (:mod:`jupyter_gpucost.hub.web.views`) keeps the values as the API gives them
(``"day"``, ``"group:ml"``); the templates call these functions, bound to the language of
the browser's ``Accept-Language``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from ...core.hub_protocol import HubBudget
from ...core.i18n import Messages
from ...core.money import (
    MICRO_PER_UNIT,
    as_decimal,
    budget,
    rate,
    rate_amount,
    status_bar,
)
from ...core.wording import hub_source, scope_name
from ..allocation import describe as describe_gpus
from ..budgets import describe, stop_plan
from ..model import GpuAllocation


def _micro(amount: object) -> int:
    """An amount of the pages' JSON (six decimals at most) as whole micro-units."""
    return int(as_decimal(str(amount)) * MICRO_PER_UNIT)


def stop_reason(server: Mapping[str, Any], messages: Messages, symbol: str = "$") -> str:
    """Why and when a running server is being stopped, in the page's language: the
    countdown to its budget (when the stop lands at it, at what rate, why it is shorter
    than the grace period); else the budgets it is over; else the reason the service
    keeps (a deadline from before a restart)."""
    plan = server.get("stop_plan")
    if isinstance(plan, Mapping) and isinstance(plan.get("allowance"), Mapping):
        return str(server.get("reason") or "")  # an allowance's: said in English as kept
    if isinstance(plan, Mapping):
        b = plan["budget"]
        return stop_plan(
            HubBudget(b["scope"], _micro(b["amount_usd"]), _micro(b["spent_usd"]), b["source"]),
            as_decimal(str(plan["usd_per_hour"])),
            float(plan["countdown_s"]),
            float(plan["grace_s"]),
            plan.get("shortened"),
            messages,
            symbol,
        )
    over = [b for b in server.get("budgets") or () if b.get("exceeded")]
    if not over:
        return str(server.get("reason") or "")
    return " ".join(
        describe(
            HubBudget(b["scope"], _micro(b["amount_usd"]), _micro(b["spent_usd"]), b["source"]),
            messages,
            symbol,
        )
        for b in over
    )


def gpus_text(server: Mapping[str, Any], messages: Messages) -> str:
    """A running server's GPUs in the page's language (a share as its fraction)."""
    a = server.get("allocation")
    if not isinstance(a, Mapping):
        return str(server.get("gpus", ""))
    try:
        allocation = GpuAllocation(
            str(a["model"]),
            int(a["count"]),
            Fraction(str(a["share"])),
            str(a["detail"]),
            str(a["instance"]),
            int(a["instance_gpus"]),
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return str(server.get("gpus", ""))
    return describe_gpus(allocation, messages.gettext)


def page_words(messages: Messages, symbol: str = "$") -> dict[str, Callable[..., str]]:
    """The templates' functions for words from data, in the language of ``messages``, and
    the display rule of each kind of figure (:mod:`jupyter_gpucost.core.money`) in the
    hub's currency as ``messages``' language writes it: ``money_text`` an amount spent
    (with the ``digits`` of a table's column, ``column_digits``), ``budget_text`` a budget,
    ``rate_text`` an hourly rate (``rate_amount`` its amount, for a sentence that says
    "per hour" itself)."""
    return {
        "scope_name": lambda scope: scope_name(str(scope), messages),
        "hub_source": lambda source: hub_source(str(source), messages),
        "stop_reason": lambda server: stop_reason(server, messages, symbol),
        "gpus_text": lambda server: gpus_text(server, messages),
        "ngettext": messages.ngettext,
        "money_text": lambda amount, digits=None: status_bar(
            as_decimal(str(amount)), symbol, digits=digits
        ),
        "budget_text": lambda amount: budget(as_decimal(str(amount)), symbol),
        "rate_amount": lambda per_hour: rate_amount(as_decimal(str(per_hour)), symbol),
        "rate_text": lambda per_hour: rate(
            as_decimal(str(per_hour)), symbol, messages.gettext("{price}/h")
        ),
    }
