"""``%gpucost budget AMOUNT|off``: the user's own budget, set on the server from the
kernel, and what the server will do now that it is set, in the kernel's language.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from IPython.core.error import UsageError

from ...core.currency import for_reader
from ...core.i18n import N_, _, current_language
from ...core.money import budget as budget_text
from ...core.money import status_bar
from ...core.protocol import binding_standing
from ...core.wording import budget_kind, per_scope
from ..cell.measure import prices
from ..link import LinkError, ServerLink, link
from .usage import usage_of

BUDGET_USAGE = usage_of("budget")
NO_SERVER = N_(
    "budgets are kept by the jupyter-gpucost server extension, and this kernel was not "
    "started by a Jupyter server that has it"
)


class _BudgetParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\nusage: {BUDGET_USAGE}")


def show_budget() -> str:
    """``%gpucost budget`` alone: the budget in force and what is spent of it."""
    server = link()
    if server is None:
        return _(NO_SERVER)
    try:
        status = server.status()
    except LinkError as e:
        raise UsageError(str(e)) from None
    symbol = for_reader(
        str(status.get("currency") or ""),
        str(status.get("currency_symbol") or prices().currency_symbol),
        current_language(),
    )
    binding = binding_standing(status.get("budget") or {})
    if not binding:
        return _("gpucost: no budget is set (%gpucost budget AMOUNT sets yours).")
    spent = binding.get("spent_usd")
    text = _("gpucost: budget {budget} ({kind}): {spent} spent")
    return text.format(
        budget=per_scope(budget_text(binding["amount_usd"], symbol), str(binding["scope"])),
        kind=budget_kind(str(binding["kind"])),
        spent=_("unknown") if spent is None else status_bar(spent, symbol),
    )


def budget(words: list[str]) -> None:
    if not words:  # the state, never a change
        print(show_budget())
        return
    parser = _BudgetParser(prog="%gpucost budget", add_help=False)
    parser.add_argument("amount")
    parser.add_argument("--scope", default="session", choices=["session", "day", "month"])
    args = parser.parse_args(words)
    amount: float | None
    if args.amount.lower() in ("off", "none", "remove"):
        amount = None
    else:
        try:
            amount = float(args.amount.lstrip("$"))
        except ValueError:
            text = _("{value} is not an amount of money")
            raise UsageError(
                f"{text.format(value=repr(args.amount))}\nusage: {BUDGET_USAGE}"
            ) from None
    server = link()
    if server is None:
        raise UsageError(_(NO_SERVER))
    try:
        state = server.set_budget(amount, args.scope)
    except LinkError as e:
        raise UsageError(str(e)) from None
    print(budget_reply(state, server_symbol(server)))


def server_symbol(server: ServerLink) -> str:
    """The server's currency symbol (its status), else the one it handed to the kernel, as
    the kernel's language writes it (``¥`` in Chinese, as the browser)."""
    try:
        status = server.status()
    except LinkError:
        status = {}
    symbol = status.get("currency_symbol")
    found = symbol if isinstance(symbol, str) and symbol else prices().currency_symbol
    return for_reader(str(status.get("currency") or ""), found, current_language())


#: what the server does at the end of the countdown (``budget_action``)
ACTION_TEXT = {
    "interrupt": N_("saves the open notebooks and interrupts every kernel (this one included)"),
    "shutdown": N_(
        "saves the open notebooks and shuts every kernel down (this one included), which "
        "frees their GPU memory"
    ),
    "stop-server": N_(
        "saves the open notebooks, shuts every kernel down (this one included) and stops the server"
    ),
    "stop-instance": N_(
        "saves the open notebooks, shuts every kernel down (this one included) and stops the "
        "machine"
    ),
}


def duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    minutes, secs = divmod(whole, 60)
    if minutes:
        return _("{minutes} min {seconds} s").format(minutes=minutes, seconds=f"{secs:02d}")
    return _("{seconds} s").format(seconds=secs)


def budget_reply(state: dict[str, Any], symbol: str) -> str:
    """What ``%gpucost budget`` says about the budget the server now has."""
    lines = []
    soft = state.get("soft")
    hard = state.get("hard")
    if soft:
        spent = soft.get("spent_usd")
        budget = per_scope(budget_text(soft["amount_usd"], symbol), str(soft["scope"]))
        if spent is not None and spent >= soft["amount_usd"]:
            text = _(
                "gpucost: your budget is now {budget}, and it is ALREADY SPENT: {spent} spent "
                "so far."
            )
            lines.append(text.format(budget=budget, spent=status_bar(spent, symbol)))
            lines.append(_what_happens_next(state))
            above = status_bar(spent, symbol, round_up=True)
            text = _(
                "  To undo: %gpucost budget off, or a budget above {above} "
                "(%gpucost budget AMOUNT); the countdown then ends and nothing is stopped."
            )
            lines.append(text.format(above=above))
        elif spent is not None:
            text = _("gpucost: your budget is now {budget}; {spent} spent so far.")
            lines.append(text.format(budget=budget, spent=status_bar(spent, symbol)))
        else:
            lines.append(_("gpucost: your budget is now {budget}.").format(budget=budget))
    else:
        lines.append(_("gpucost: your budget is removed."))
    if hard:
        budget = per_scope(budget_text(hard["amount_usd"], symbol), str(hard["scope"]))
        text = _("gpucost: the administrator's budget of {budget} still applies.")
        lines.append(text.format(budget=budget))
    return "\n".join(lines)


def _what_happens_next(state: dict[str, Any]) -> str:
    action = state.get("action")
    known = ACTION_TEXT.get(str(action))
    if known is not None:
        what = _(known)
    else:
        what = _("saves the open notebooks and acts ({action})").format(action=action)
    grace = state.get("grace")
    phase = state.get("state")
    if phase == "acted":
        last = state.get("last_action") or {}
        done = last.get("message") or _("the budget's action was taken")
        return _("  The server has already acted: {done}.").format(done=done)
    if phase == "enforcing":
        return _("  The countdown is over: the server now {what}.").format(what=what)
    if grace and grace.get("reason") == "budget":
        left = grace.get("remaining_s")
        if isinstance(left, int | float):
            text = _("  The server has started its countdown: in {time} it {what}.")
            return text.format(time=duration(float(left)), what=what)
        text = _("  The server has started its countdown: when it ends, it {what}.")
        return text.format(what=what)
    grace_s = state.get("grace_s")
    if isinstance(grace_s, int | float):
        text = _("  The server {what} after a countdown of {time}.")
        return text.format(what=what, time=duration(float(grace_s)))
    return _("  The server {what} after a countdown.").format(what=what)
