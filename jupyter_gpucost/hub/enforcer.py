"""When the hub stops a server for its budgets: at the budget, with a countdown before.

A budget is a cap. A pure state machine the service ticks with each server's budgets and the
rate each one is spent at (the server's own for its session budget; the user's running
servers together for the user's day and month; a group's members' together for the group's):

* a server's countdown starts when the money left of one of its budgets lasts at most the
  grace period at that rate (:func:`~jupyter_gpucost.core.budget_timing.due`), and its
  ``stop_at`` is when that money runs out: the hub stops it at the budget, and its own
  server has the grace period to save notebooks first;
* where the full grace would go past the budget, the countdown is *shortened* and the
  :class:`Plan` says why: the budget was already spent when the service first weighed it
  (it started over budget, or the service was down meanwhile), or the rate jumped during
  the countdown (a later tick that finds the money running out sooner brings ``stop_at``
  forward; it is never pushed back);
* it is **due** once ``now >= stop_at``; the service then stops it through the Hub API; the
  bill at the stop is the budget plus at most one poll's cost (and what the server costs
  while the Hub stops it);
* it is cleared as soon as no budget is that close (the admin raised the budget, a new day
  began for a day budget, the rate fell), and a later one starts a new countdown.

Servers are keyed by ``(user, server_name, started)``: a server started again is a new
session with no deadline inherited from the old one.

The service keeps each deadline in its ledger and :meth:`HubEnforcer.restore` s them after a
restart: a restart does not give a server a new grace period. The server's own countdown
and the work it saves do not depend on this.

Pure: no I/O, no clock (``now`` is given), no tornado.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import NamedTuple

from ..core.budget_timing import SHORTENED_OVERRUN, Shortened, countdown, due, seconds_left
from ..core.hub_protocol import HubBudget
from ..core.i18n import Messages
from ..core.money import json_amount
from .allowance import words as allowance_words
from .allowance.usage import AllowanceStanding
from .budgets import stop_plan
from .model import ServerRow


class ServerRun(NamedTuple):
    """One start of a user's server, as the enforcer keys its deadlines: a server started
    again is a new run, and a deadline of the run before never carries over to it
    (:class:`..activity.UserServer` names the server whichever run it is in)."""

    user: str
    server_name: str
    started: datetime


@dataclass(frozen=True)
class Weighed:
    """One budget on a server and the rate its money is spent at now; or one allowance
    (``budget`` is ``None``) and the rate it is used at (dollars or weighted GPU-hours per
    hour: the countdown's arithmetic is the same in micro-units of either)."""

    budget: HubBudget | None
    usd_per_hour: Decimal
    allowance: AllowanceStanding | None = None
    #: the hub's time zone, for an allowance's top-up time
    tz: tzinfo = UTC

    @property
    def remaining_micro_usd(self) -> int:
        if self.budget is None:
            assert self.allowance is not None
            return self.allowance.left_micro
        return self.budget.amount_micro_usd - self.budget.spent_micro_usd

    def seconds_left(self) -> float:
        """How long the money left lasts at this rate (``inf``: no rate)."""
        left = seconds_left(self.remaining_micro_usd, self.usd_per_hour)
        return float("inf") if left is None else left


def server_key(row: ServerRow) -> ServerRun:
    return ServerRun(row.user, row.server_name, row.started)


def pooled_rates(
    rows: Iterable[ServerRow], groups_of: Mapping[str, tuple[str, ...]]
) -> dict[str, Decimal]:
    """What each user's running servers cost together now (by user name), and each
    group's members' (``"group:<name>"``): the rates their day and month budgets are
    spent at."""
    rates: dict[str, Decimal] = {}
    for row in rows:
        per_hour = row.rate.usd_per_hour
        rates[row.user] = rates.get(row.user, Decimal(0)) + per_hour
        for group in groups_of.get(row.user, ()):
            source = f"group:{group}"
            rates[source] = rates.get(source, Decimal(0)) + per_hour
    return rates


def weighed(
    row: ServerRow, budgets: Iterable[HubBudget], rates: Mapping[str, Decimal]
) -> list[Weighed]:
    """A server's budgets with the rate each is spent at: a session budget (the user's
    or a group's) at the server's own; a day or month budget at its owner's pooled rate
    (:func:`pooled_rates`)."""
    own = row.rate.usd_per_hour
    return [
        Weighed(
            b,
            own
            if b.scope == "session"
            else rates.get(row.user if b.source == "user" else b.source, own),
        )
        for b in budgets
    ]


@dataclass(frozen=True)
class Plan:
    """Why a countdown began and how long it runs: for the sentences the user reads."""

    budget: HubBudget | None
    usd_per_hour: Decimal
    countdown_s: float
    grace_s: float
    #: why the countdown is shorter than the grace period (``None``: it is not)
    shortened: Shortened | None = None
    #: the allowance that runs out (``budget`` is then ``None``)
    allowance: AllowanceStanding | None = None
    tz: tzinfo = UTC

    def to_json(self) -> dict[str, object]:
        """The figures, for a page to say them in its language."""
        b = self.budget
        if b is None:
            a = self.allowance
            assert a is not None
            return {
                "allowance": {
                    "source": a.source,
                    "unit": a.unit,
                    "period": a.label,
                    "left": a.left_micro / 10**6,
                },
                "per_hour": float(self.usd_per_hour),
                "countdown_s": round(self.countdown_s, 1),
                "grace_s": self.grace_s,
                "shortened": self.shortened,
            }
        return {
            "budget": {
                "scope": b.scope,
                "source": b.source,
                "amount_usd": json_amount(b.amount_micro_usd),
                "spent_usd": json_amount(b.spent_micro_usd),
            },
            "usd_per_hour": float(self.usd_per_hour),
            "countdown_s": round(self.countdown_s, 1),
            "grace_s": self.grace_s,
            "shortened": self.shortened,
        }

    def sentence(self, messages: Messages | None = None, symbol: str = "$") -> str:
        """What the user reads (:func:`~.budgets.stop_plan`), in ``messages``' language."""
        if self.budget is None:
            assert self.allowance is not None
            return allowance_words.stop_plan(
                self.allowance, self.countdown_s, self.tz, messages, symbol
            )
        return stop_plan(
            self.budget,
            self.usd_per_hour,
            self.countdown_s,
            self.grace_s,
            self.shortened,
            messages,
            symbol,
        )


@dataclass(frozen=True)
class Deadline:
    """A server whose budget runs out soon, and when the hub stops it."""

    key: ServerRun
    since: datetime
    stop_at: datetime
    #: what the user reads: the budget, when and why the hub stops the server (English,
    #: as the Hub's own messages; kept in the ledger)
    reason: str
    #: the figures behind ``reason`` (``None`` for one restored after a restart)
    plan: Plan | None = None


class HubEnforcer:
    """The servers counting down to their budget. Not thread-safe: one loop ticks it.

    ``tick_s``: how often the service weighs the budgets (its poll): a countdown that
    starts less than one tick late is the grace period itself, not a shortened one.
    ``granularity_s``: the billing rule's (a bill that grows a second at a time): a stop
    time is brought forward only by more than that, never for the bill's own rounding
    (a restart of the service that weighs the same budget a fraction later).
    """

    def __init__(self, grace_s: float, tick_s: float = 1.0, granularity_s: float = 0.0) -> None:
        if grace_s < 0:
            raise ValueError("the grace period must be 0 seconds or more")
        self.grace = timedelta(seconds=grace_s)
        self.grace_s = float(grace_s)
        self.tick_s = float(tick_s)
        self.slack = timedelta(seconds=granularity_s)
        self._deadlines: dict[ServerRun, Deadline] = {}

    def update(self, key: ServerRun, weighed: Iterable[Weighed], now: datetime) -> Deadline | None:
        """Tick one server with its budgets and their rates: its deadline, or ``None``
        when no budget runs out within the grace period (a deadline it had is cleared)."""
        close = [
            w
            for w in weighed
            if (w.budget is None or w.budget.amount_micro_usd >= 0)
            and due(w.remaining_micro_usd, w.usd_per_hour, self.grace_s)
        ]
        if not close:
            self._deadlines.pop(key, None)
            return None
        binding = min(close, key=Weighed.seconds_left)
        left_s = binding.seconds_left()
        deadline = self._deadlines.get(key)
        if deadline is None:
            length = countdown(
                binding.remaining_micro_usd, binding.usd_per_hour, self.grace_s, tick_s=self.tick_s
            )
            plan = Plan(
                binding.budget,
                binding.usd_per_hour,
                length.seconds,
                self.grace_s,
                length.shortened,
                binding.allowance,
                binding.tz,
            )
            deadline = Deadline(
                key, now, now + timedelta(seconds=length.seconds), plan.sentence(), plan
            )
            self._deadlines[key] = deadline
            return deadline
        ends = now + timedelta(seconds=left_s)
        if ends < deadline.stop_at - self.slack:
            # the money runs out sooner than planned (the rate rose, a report raised the
            # bill): the stop comes forward with it, and says why
            length_s = max(0.0, (ends - deadline.since).total_seconds())
            plan = Plan(
                binding.budget,
                binding.usd_per_hour,
                length_s,
                self.grace_s,
                SHORTENED_OVERRUN if length_s < self.grace_s - self.tick_s else None,
                binding.allowance,
                binding.tz,
            )
            if deadline.plan is not None and deadline.plan.shortened is not None:
                plan = replace(plan, shortened=deadline.plan.shortened)
            deadline = Deadline(key, deadline.since, ends, plan.sentence(), plan)
            self._deadlines[key] = deadline
        return deadline

    def restore(self, key: ServerRun, since: datetime, stop_at: datetime, reason: str) -> None:
        """A deadline set before a restart of the service (kept while a budget is still
        that close, like any other; brought forward if the money runs out sooner)."""
        self._deadlines[key] = Deadline(key, since, stop_at, reason)

    def deadline(self, key: ServerRun) -> Deadline | None:
        return self._deadlines.get(key)

    def due(self, now: datetime) -> list[Deadline]:
        """The servers whose countdown is over, earliest first."""
        return sorted(
            (d for d in self._deadlines.values() if now >= d.stop_at), key=lambda d: d.stop_at
        )

    def forget(self, key: ServerRun) -> None:
        """The server stopped (by the hub or on its own)."""
        self._deadlines.pop(key, None)

    def keep_only(self, keys: Iterable[ServerRun]) -> None:
        """Forget every server not in ``keys`` (those the Hub no longer lists)."""
        wanted = set(keys)
        for key in [k for k in self._deadlines if k not in wanted]:
            del self._deadlines[key]

    def __len__(self) -> int:
        return len(self._deadlines)
