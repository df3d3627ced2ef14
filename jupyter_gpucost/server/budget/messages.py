"""The sentences a person reads about their budget: notifications and the action summary.

Amounts go through :func:`jupyter_gpucost.core.money.status_bar`, the rule the status bar
and the panel write money by, so a budget reads the same in a notification as on screen.
Counts go through :func:`ngettext` (plural forms, as a message catalog gives them). Times
are UTC with ``UTC`` after them; the front end writes them in the browser's local time
from the event's or the record's own time fields.
"""

from __future__ import annotations

from datetime import datetime
from gettext import NullTranslations

from ...core.hub_protocol import HUB_SOURCE_LABEL
from ...core.money import status_bar, to_usd
from .policy import Budget
from .record import ActionRecord

_SCOPES = {"session": "session budget", "day": "daily budget", "month": "monthly budget"}
_ACTIONS = {
    "interrupt": "kernels interrupted",
    "shutdown": "kernels shut down",
    "stop-server": "server stopped",
}


#: the catalog the sentences' plural forms come from (English: the one without a catalog)
_CATALOG = NullTranslations()


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of a sentence for ``n`` (``{n}`` in it is replaced by ``n``)."""
    return _CATALOG.ngettext(singular, plural, n).replace("{n}", str(n))


def notice(micro_usd: int, symbol: str) -> str:
    """A budget as the status bar and the panel write it (``$0.0500``, ``$5.00``)."""
    return status_bar(to_usd(micro_usd), symbol)


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
    else:
        what = "The GPUs have been idle while costing money."
    return (
        f"{what} Notebooks will be saved and the {action_name(action)} in {round(grace_s, 1):g} s."
    )


def cleared(why: str) -> str:
    return f"Countdown stopped: {why}."


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
    else:
        head = f"stopped idle GPUs at {at} UTC"
    saved = ngettext("{n} notebook saved", "{n} notebooks saved", record.notebooks_saved)
    return f"{head}; {saved}"


def kernels_acted(summary_text: str, action: str, kernels: int) -> str:
    if action == "interrupt":
        done = ngettext("{n} kernel interrupted", "{n} kernels interrupted", kernels)
    else:
        done = ngettext("{n} kernel shut down", "{n} kernels shut down", kernels)
    return f"{summary_text}; {done}"


def kernels_busy(n: int) -> str:
    return ngettext("{n} kernel busy", "{n} kernels busy", n)


def server_stopped(summary_text: str) -> str:
    return f"{summary_text}; server stopped"
