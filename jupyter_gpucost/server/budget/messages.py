"""The sentences a person reads about their budget: notifications and the action summary.

Amounts go through :func:`jupyter_gpucost.core.money.notice`, the budget's display rule
(the same as the status bar's and the panel's for a budget); the sentences and their plural
forms through the package's message catalog (:mod:`jupyter_gpucost.core.i18n`), in
JupyterLab's language. Times are UTC with ``UTC`` after them; the front end writes them in
the browser's local time from the event's or the record's own time fields.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from ...core import budget_words
from ...core.budget_words import about
from ...core.currency import in_language
from ...core.hub_protocol import HUB_SOURCE_LABEL, IDLE_STOP_REASON
from ...core.i18n import N_, _, current_language, pgettext
from ...core.i18n import ngettext as _n
from ...core.machine import STILL_DISKS
from ...core.money import notice as _notice
from ...core.money import rate_amount
from .policy import Budget
from .record import ActionRecord


def notice(amount_micro: int, symbol: str) -> str:
    """A budget's amount by the budget's rule, with the currency's symbol as the reader of
    the server's language writes it (``US$5.00`` in Chinese, as the browser does)."""
    return _notice(amount_micro, in_language(symbol, current_language()))


def rate(per_hour: Decimal, symbol: str) -> str:
    """An hourly rate (``$6.86/h``; ``US$6.86/小时`` in Chinese, as the status bar)."""
    amount = rate_amount(per_hour, in_language(symbol, current_language()))
    return _("{amount}/h").format(amount=amount)


def _scope(scope: str) -> str:
    return {
        "session": _("session budget"),
        "day": _("daily budget"),
        "month": _("monthly budget"),
    }.get(scope, scope)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of a sentence for ``n`` from the catalog (``{n}`` in it is replaced by ``n``)."""
    return _n(singular, plural, n).replace("{n}", str(n))


def scope_name(budget: Budget) -> str:
    """``admin's daily budget``, ``monthly budget set by your hub admin``, ``session budget``."""
    if budget.kind == "hub":
        return _("{budget} {source}").format(
            budget=_scope(budget.scope), source=_(HUB_SOURCE_LABEL)
        )
    if budget.kind == "hard":
        return _("admin's {budget}").format(budget=_scope(budget.scope))
    return _scope(budget.scope)


def action_name(action: str) -> str:
    return {
        "interrupt": _("kernels interrupted"),
        "shutdown": _("kernels shut down"),
        "stop-server": _("server stopped"),
        "stop-instance": _("machine stopped"),
        "terminate-instance": _("machine terminated"),
    }.get(action, action)


def idle(minutes: float, *, act: bool) -> str:
    if act:
        text = _(
            "The GPUs have been idle for {minutes} minutes while costing money: the kernels "
            "will be stopped unless you use them."
        )
    else:
        text = _("The GPUs have been idle for {minutes} minutes while costing money.")
    return text.format(minutes=f"{minutes:g}")


def threshold(pct: int, budget: Budget, runs_out_at: datetime | None, symbol: str) -> str:
    amount = notice(budget.amount_micro, symbol)
    if runs_out_at:
        text = _(
            "{pct}% of your {amount} {budget} is spent; at the current rate it runs out at "
            "{time} UTC."
        )
    else:
        text = _("{pct}% of your {amount} {budget} is spent.")
    time = f"{runs_out_at:%H:%M}" if runs_out_at else ""
    return text.format(pct=pct, amount=amount, budget=scope_name(budget), time=time)


def grace(
    budget: Budget | None,
    action: str,
    grace_s: float,
    symbol: str,
    *,
    reason: str = "budget",
    hub_reason: str | None = None,
    spent: bool = True,
    note: str | None = None,
) -> str:
    """``hub_reason``: the hub's own reason for its stop (a sentence of the catalog);
    ``spent``: the budget is spent already (else it runs out as the countdown ends);
    ``note``: why the countdown is shorter than the grace period (:func:`shortened`)."""
    if budget is not None and not spent:
        what = _("Your {amount} {budget} runs out at the current rate.").format(
            amount=notice(budget.amount_micro, symbol), budget=scope_name(budget)
        )
    elif budget is not None:
        what = _("Your {amount} {budget} is spent.").format(
            amount=notice(budget.amount_micro, symbol), budget=scope_name(budget)
        )
    elif reason == "hub" and hub_reason == IDLE_STOP_REASON:
        what = _(IDLE_STOP_REASON)
    elif reason == "hub":
        what = _("Your hub admin's budget runs out: the hub stops this server when it does.")
    elif reason == "done":
        what = _("Your run is done, as you asked to stop then.")
    elif reason == "user":
        what = _("Stopping as you asked.")
    else:
        what = _("The GPUs have been idle while costing money.")
    then = _("Notebooks will be saved and the {action} in {seconds} s.").format(
        action=action_name(action), seconds=f"{round(grace_s, 1):g}"
    )
    return " ".join(part for part in (what, then, note) if part)


def stop_plan(amount_micro: int, in_s: float, per_hour: Decimal, action: str, symbol: str) -> str:
    """``Stops at $5.00 — in about 14 min at $21.50/h; notebooks saved first, then the
    kernels shut down.`` (before the countdown, from the current rate)."""
    return _(
        "Stops at {amount} — in about {duration} at {rate}; notebooks saved first, then the "
        "{action}."
    ).format(
        amount=notice(amount_micro, symbol),
        duration=about(in_s),
        rate=rate(per_hour, symbol),
        action=action_name(action),
    )


def shortened(why: str, grace_s: float, countdown_s: float, per_hour: Decimal, symbol: str) -> str:
    """Why the countdown is shorter than the grace period (``core.budget_timing``)."""
    return budget_words.shortened(why, grace_s, countdown_s, rate(per_hour, symbol))


def cleared(why: str) -> str:
    """``Countdown stopped: you cancelled it.``; ``why`` is translated here (a constant of
    this module, or a sentence already in the current language)."""
    return _("Countdown stopped: {why}.").format(why=_(why))


#: reasons a countdown stops, and the notices said once (translated where they are sent)
YOU_CANCELLED = N_("you cancelled it")
SAVE_REQUEST = N_("Saving open notebooks before the budget action.")
IDLE_SKIPPED = N_("Idle stop skipped: a kernel is busy.")
IDLE_SKIPPED_RECORD = N_("idle stop skipped: a kernel is busy")


def summary(record: ActionRecord, symbol: str) -> str:
    """``stopped at $5.00 budget at 14:02 UTC; 2 notebooks saved`` (before the outcome).

    The time stays ``HH:MM UTC`` in every language: the front end finds it there and writes
    it in the browser's local time. A record keeps its sentences in the language of the
    moment it was made.
    """
    at = record.at[11:16]
    if record.budget is not None:
        head = _("stopped at {amount} budget at {time} UTC").format(
            amount=notice(record.budget.amount_micro, symbol), time=at
        )
    elif record.reason == "hub":
        head = _("stopped for the hub at {time} UTC").format(time=at)
    elif record.reason == "done":
        head = _("stopped when done at {time} UTC").format(time=at)
    elif record.reason == "user":
        head = _("stopped as you asked at {time} UTC").format(time=at)
    else:
        head = _("stopped idle GPUs at {time} UTC").format(time=at)
    saved = ngettext("{n} notebook saved", "{n} notebooks saved", record.notebooks_saved)
    return _join(head, saved)


def _join(*parts: str) -> str:
    """The parts of an outcome, one after the other (``a; b``, the language's own
    separator)."""
    return _("; ").join(parts)


def kernels_acted(summary_text: str, action: str, kernels: int) -> str:
    if action == "interrupt":
        done = ngettext("{n} kernel interrupted", "{n} kernels interrupted", kernels)
    else:
        done = ngettext("{n} kernel shut down", "{n} kernels shut down", kernels)
    return _join(summary_text, done)


def kernels_busy(n: int) -> str:
    return ngettext("{n} kernel busy", "{n} kernels busy", n)


def server_stopped(summary_text: str) -> str:
    return _join(summary_text, pgettext("outcome", "server stopped"))


def no_instance_stopper() -> str:
    return _("no way to stop this machine is known (see docs/budgets.md)")


def instance_stopped(
    summary_text: str,
    kernels: int,
    answer: str,
    still_bills: str = STILL_DISKS,
    *,
    terminated: bool = False,
) -> str:
    """``...; 1 kernel shut down; machine stopping (EC2 is stopping i-0abc); its disks
    still bill``: ``still_bills`` is the provider's sentence (a constant of
    :mod:`...core.machine`), translated here; ``terminated``: ``machine terminating``."""
    acted = kernels_acted(summary_text, "shutdown", kernels)
    done = _("machine terminating ({answer})") if terminated else _("machine stopping ({answer})")
    return _join(acted, done.format(answer=answer), _(still_bills))


def instance_failed(summary_text: str, why: str) -> str:
    return _join(
        summary_text,
        _("could not stop the machine ({why})").format(why=why),
        _("server stopped instead"),
    )


def with_still_cost(text: str, still_per_hour: Decimal | None, symbol: str) -> str:
    """``kernels stopped; this machine still costs $6.86/h`` when it still costs."""
    if still_per_hour is None or still_per_hour <= 0:
        return text
    still = _("this machine still costs {rate}").format(rate=rate(still_per_hour, symbol))
    return _join(text, still)
