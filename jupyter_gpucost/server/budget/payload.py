"""The budget as the API shows it (``GET /gpucost/api/budget``, and ``budget`` in the
status document): a pure function of the policy, the standings and the controller's state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from ...core.budget_timing import seconds_left
from ...core.hub_protocol import HUB_SOURCE_LABEL, HubReply
from ...core.i18n import SOURCE_LANGUAGE, _, current_language
from ...core.money import json_amount
from . import messages
from .events import iso
from .policy import SCOPES, USER_REASONS, BudgetPolicy, Standing, binding_standing
from .record import ActionRecord

#: events shown by the API
SHOWN_EVENTS = 10


@dataclass(frozen=True)
class IdleView:
    minutes: float
    action: str
    #: how long the GPUs have been idle (``None``: not idle)
    idle_s: float | None


@dataclass(frozen=True)
class HubView:
    """The hub service's latest answer, and whether the last report got through."""

    reply: HubReply | None = None
    #: why the last report failed (``None``: it got through)
    error: str | None = None
    reported_at: datetime | None = None

    @property
    def spent(self) -> dict[tuple[str, str], int]:
        """What the hub counts against each of its budgets, by (owner, scope)."""
        if self.reply is None:
            return {}
        return {(b.source, b.scope): b.spent_micro_usd for b in self.reply.budgets}


@dataclass(frozen=True)
class BudgetView:
    """Everything the payload is built from, read at one moment."""

    now: datetime
    rate_per_hour: Decimal
    standings: Sequence[Standing]
    policy: BudgetPolicy
    action: str
    #: the pending save request's id, if any
    save_request_id: str | None
    scopes: Sequence[str]
    #: ``None``: idle detection is off
    idle: IdleView | None
    last_action: ActionRecord | None
    events: Sequence[dict[str, Any]]
    #: ``None``: this server does not report to a hub service
    hub: HubView | None = None
    currency_symbol: str = "$"


#: an action record's amounts, by their deprecated names → their currency-neutral names
RECORD_MONEY_KEYS = {
    "amount_usd": "amount",
    "spent_usd": "spent",
    "still_usd_per_hour": "still_per_hour",
}


def record_json(record: ActionRecord) -> dict[str, object]:
    """An action's record as the API shows it: as the state file keeps it (its saved names)
    and each amount under its currency-neutral name too (docs/api.md, "Money keys")."""
    out = record.to_json()
    for old, new in RECORD_MONEY_KEYS.items():
        if old in out:
            out[new] = out[old]
    return out


def _standing(view: BudgetView, s: Standing) -> dict[str, object]:
    out = s.runs_out_at(view.now, view.rate_per_hour)
    amount = json_amount(s.budget.amount_micro)
    spent = None if s.spent_micro is None else json_amount(s.spent_micro)
    remaining = None if s.remaining_micro is None else json_amount(max(0, s.remaining_micro))
    return {
        "kind": s.budget.kind,
        "locked": s.budget.locked,
        "source": _(s.budget.source) if s.budget.source else None,
        "scope": s.budget.scope,
        "amount": amount,
        "spent": spent,
        "remaining": remaining,
        # deprecated twins (docs/api.md, "Money keys")
        "amount_usd": amount,
        "spent_usd": spent,
        "remaining_usd": remaining,
        "share": None if s.share is None else round(s.share, 4),
        "runs_out_at": iso(out),
        "fired_pct": sorted(view.policy.fired.get(s.key, set())),
        **({"owner": s.budget.owner} if s.budget.kind == "hub" else {}),
    }


def _hub_reason(reply: HubReply) -> str | None:
    """The hub's reason in this server's language: a sentence of the catalog (an idle
    stop) translated; the hub's own sentence about its budgets (English, with their
    amounts) as it came in English, and in another language the catalog's sentence (the
    panel lists the hub's budgets, in that language, beside it)."""
    if reply.reason is None:
        return None
    translated = _(reply.reason)
    if translated != reply.reason or current_language() == SOURCE_LANGUAGE:
        return translated
    if reply.stop_kind != "idle":
        return _("Your hub admin's budget is spent.")
    return reply.reason


def _hub(view: BudgetView, hub: HubView) -> dict[str, object]:
    reply = hub.reply
    session = None if reply is None else json_amount(reply.session_micro_usd)
    today = None if reply is None else json_amount(reply.today_micro_usd)
    month = None if reply is None else json_amount(reply.month_micro_usd)
    return {
        "source": _(HUB_SOURCE_LABEL),
        "budgets": [_standing(view, s) for s in view.standings if s.budget.kind == "hub"],
        "user": None if reply is None else reply.user,
        "session": session,
        "today": today,
        "month": month,
        # deprecated twins (docs/api.md, "Money keys")
        "session_usd": session,
        "today_usd": today,
        "month_usd": month,
        "stop_at": None if reply is None else iso(reply.stop_at),
        "reason": None if reply is None else _hub_reason(reply),
        "stop_kind": None if reply is None else reply.stop_kind,
        "reported_at": iso(hub.reported_at),
        "error": hub.error,
        # the hub's allowances, read-only: dollars or GPU-hours left, and when they fill
        "allowances": []
        if reply is None
        else [
            {
                "source": a.source,
                "unit": a.unit,
                "period": a.period,
                "amount": a.amount_micro / 10**6,
                "left": a.left_micro / 10**6,
                "refill_at": iso(a.refill_at),
            }
            for a in reply.allowances
        ],
    }


def _stop_plan(view: BudgetView, binding: Standing | None) -> dict[str, object] | None:
    """When, at what amount and how the budget acts, at the current rate (``None``: no
    budget runs out: none set, no rate, spent already, or it has acted)."""
    p, rate = view.policy, view.rate_per_hour
    if binding is None or binding.remaining_micro is None or p.state in ("enforcing", "acted"):
        return None
    in_s = seconds_left(binding.remaining_micro, rate)
    if in_s is None or binding.remaining_micro <= 0:
        return None
    # a budget's countdown: its end (at the budget, or sooner: shortened, or the hub's
    # time); any other countdown (the user's own stop, idle GPUs) leaves the budget's plan
    budget_countdown = p.state == "grace" and p.grace_reason == "budget"
    if budget_countdown and p.grace_ends is not None:
        in_s = min(in_s, max(0.0, (p.grace_ends - view.now).total_seconds()))
    action = (p.grace_action if budget_countdown else None) or view.action
    amount = binding.budget.amount_micro
    return {
        "amount": json_amount(amount),
        "budget_kind": binding.budget.kind,
        "in_s": round(in_s, 1),
        "at": iso(view.now + timedelta(seconds=in_s)),
        "rate_per_hour": float(rate),
        # deprecated twins (docs/api.md, "Money keys")
        "amount_usd": json_amount(amount),
        "rate_usd_per_hour": float(rate),
        "action": action,
        "text": messages.stop_plan(amount, in_s, rate, action, view.currency_symbol),
    }


def _shortened(view: BudgetView) -> str | None:
    p = view.policy
    if p.grace_shortened is None or p.grace_ends is None or p.grace_started is None:
        return None
    countdown_s = (p.grace_ends - p.grace_started).total_seconds()
    return messages.shortened(
        p.grace_shortened, p.grace_s, countdown_s, view.rate_per_hour, view.currency_symbol
    )


def budget_payload(view: BudgetView) -> dict[str, object]:
    now, rate, p = view.now, view.rate_per_hour, view.policy
    standings = view.standings
    binding = binding_standing(standings)
    grace = None
    if p.state == "grace" and p.grace_ends is not None:
        grace = {
            "started": iso(p.grace_started),
            "ends": iso(p.grace_ends),
            "remaining_s": max(0.0, round((p.grace_ends - now).total_seconds(), 1)),
            "reason": p.grace_reason,
            # only a budget's countdown is ended by raising one's own budget
            "can_raise": p.grace_reason == "budget"
            and binding is not None
            and binding.budget.kind == "soft",
            # the action at the end of this countdown, and whether the user may cancel it
            "action": p.grace_action or view.action,
            "can_cancel": p.grace_reason in USER_REASONS,
            # why it is shorter than the grace period (``None``: it is not)
            "shortened": p.grace_shortened,
            "shortened_text": _shortened(view),
        }
    return {
        "state": p.state,
        "hard": next((_standing(view, s) for s in standings if s.budget.kind == "hard"), None),
        "soft": next((_standing(view, s) for s in standings if s.budget.kind == "soft"), None),
        "binding": None if binding is None else binding.budget.kind,
        "runs_out_at": None if binding is None else iso(binding.runs_out_at(now, rate)),
        "stop": _stop_plan(view, binding),
        "thresholds_pct": list(p.thresholds_pct),
        "grace_s": p.grace_s,
        "grace": grace,
        # why it counts down or acts now (the front end words each countdown by it)
        "reason": p.grace_reason if p.state in ("grace", "enforcing") else None,
        "action": view.action,
        "save_request": None
        if view.save_request_id is None or p.state != "enforcing"
        else {"id": view.save_request_id},
        "scopes": [s for s in SCOPES if s in view.scopes],
        "idle": None
        if view.idle is None
        else {"minutes": view.idle.minutes, "action": view.idle.action, "idle_s": view.idle.idle_s},
        "last_action": None if view.last_action is None else record_json(view.last_action),
        "events": list(view.events[-SHOWN_EVENTS:]),
        "hub": None if view.hub is None else _hub(view, view.hub),
    }
