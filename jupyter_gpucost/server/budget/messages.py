"""The sentences a person reads about their budget: notifications and the action summary.

Amounts go through :func:`jupyter_gpucost.core.money.notice`, the budget's display rule.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from ...core.hub_protocol import HUB_SOURCE_LABEL
from ...core.money import MICRO_PER_USD, notice
from .policy import Budget
from .record import ActionRecord

_SCOPES = {"session": "session budget", "day": "daily budget", "month": "monthly budget"}
_ACTIONS = {
    "interrupt": "kernels interrupted",
    "shutdown": "kernels shut down",
    "stop-server": "server stopped",
    "stop-instance": "machine stopped",
}


def scope_name(budget: Budget) -> str:
    """``admin's daily budget``, ``monthly budget set by your hub admin``, ``session budget``."""
    if budget.kind == "hub":
        return f"{_SCOPES[budget.scope]} {HUB_SOURCE_LABEL}"
    who = "admin's" if budget.kind == "hard" else ""
    return f"{who} {_SCOPES[budget.scope]}".strip()


def action_name(action: str) -> str:
    return _ACTIONS.get(action, action)


def idle(minutes: float, *, act: bool) -> str:
    return f"The GPUs have been idle for {minutes:g} minutes while costing money" + (
        ": the kernels will be stopped unless you use them." if act else "."
    )


def threshold(pct: int, budget: Budget, runs_out_at: datetime | None, symbol: str) -> str:
    when = f"; at the current rate it runs out at {runs_out_at:%H:%M} UTC" if runs_out_at else ""
    amount = notice(budget.amount_micro_usd, symbol)
    return f"{pct}% of your {amount} {scope_name(budget)} is spent{when}."


def grace(
    budget: Budget | None, action: str, grace_s: float, symbol: str, *, reason: str = "budget"
) -> str:
    if budget is not None:
        what = f"Your {notice(budget.amount_micro_usd, symbol)} {scope_name(budget)} is spent."
    elif reason == "hub":
        what = "Your hub admin's budget is spent: the hub stops this server."
    elif reason == "done":
        what = "Your run is done, as you asked to stop then."
    elif reason == "user":
        what = "Stopping as you asked."
    else:
        what = "The GPUs have been idle while costing money."
    return (
        f"{what} Notebooks will be saved and the {action_name(action)} in {round(grace_s, 1):g} s."
    )


def cleared(why: str) -> str:
    return f"Countdown stopped: {why}."


YOU_CANCELLED = "you cancelled it"
SAVE_REQUEST = "Saving open notebooks before the budget action."
IDLE_SKIPPED = "Idle stop skipped: a kernel is busy."
IDLE_SKIPPED_RECORD = "idle stop skipped: a kernel is busy"


def summary(record: ActionRecord, symbol: str) -> str:
    """``stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved`` (before the outcome)."""
    at = record.at[11:16]
    if record.budget is not None:
        head = f"stopped at {notice(record.budget.amount_micro_usd, symbol)} budget at {at} UTC"
    elif record.reason == "hub":
        head = f"stopped for the hub at {at} UTC"
    elif record.reason == "done":
        head = f"stopped when done at {at} UTC"
    elif record.reason == "user":
        head = f"stopped as you asked at {at} UTC"
    else:
        head = f"stopped idle GPUs at {at} UTC"
    saved = record.notebooks_saved
    return f"{head}; {saved} notebook{'s' if saved != 1 else ''} saved"


def kernels_acted(summary_text: str, action: str, kernels: int) -> str:
    done = "interrupted" if action == "interrupt" else "shut down"
    return f"{summary_text}; {kernels} kernel(s) {done}"


def server_stopped(summary_text: str) -> str:
    return f"{summary_text}; server stopped"


NO_INSTANCE_STOPPER = "no way to stop this machine is known (see docs/budgets.md)"


def instance_stopped(summary_text: str, kernels: int, answer: str) -> str:
    """``...; 1 kernel(s) shut down; machine stopping (EC2 is stopping i-0abc); its disks
    still bill``."""
    return (
        f"{summary_text}; {kernels} kernel(s) shut down; machine stopping ({answer}); "
        "its disks still bill"
    )


def instance_failed(summary_text: str, why: str) -> str:
    return f"{summary_text}; could not stop the machine ({why}); server stopped instead"


def with_still_cost(text: str, still_usd_per_hour: Decimal | None, symbol: str) -> str:
    """``kernels stopped; this machine still costs $6.86/h`` when it still costs."""
    if still_usd_per_hour is None or still_usd_per_hour <= 0:
        return text
    micro = int(still_usd_per_hour * MICRO_PER_USD)
    return f"{text}; this machine still costs {notice(micro, symbol)}/h"
