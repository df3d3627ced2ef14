"""The budget's standings and events, turned into alerts for the person in charge.

Every few seconds (on the event loop: it reads the budget's standings, which are in memory,
and only queues alerts) each budget's crossing of ``c.GpuCost.notify_thresholds_pct`` is
alerted once; the budget's ``action`` events (a stop by budget, idle or stop-when-done) and
``idle`` warnings are alerted as they happen. Spot interruptions call :meth:`interrupted`.
Delivery happens on the dispatcher's threads, never here.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

from tornado.ioloop import PeriodicCallback

from ...alerts.dispatch import AlertDispatcher, DispatchSettings
from ...alerts.memory import SentKeys
from ...alerts.model import (
    Alert,
    Context,
    StopReason,
    budget_crossing,
    idle_gpus,
    spend_spike,
    stopped,
    trial_alert,
)
from ...alerts.targets import Target
from ...core.budget_words import cannot_stop
from ...core.machine import Machine
from ..budget.controller import BudgetController
from .user_targets import UserTargets

#: how often the budgets' standings are looked at (seconds)
CHECK_S = 2.0
#: how often today's spend is compared with the usual day (seconds)
SPIKE_CHECK_S = 600.0


class SpendLedger(Protocol):
    """What the spike check reads of the ledger: spend per local day, and its calendar."""

    def days(self, now: datetime, count: int = 31) -> list[tuple[date, int]]: ...

    def day_start(self, now: datetime) -> datetime: ...


#: a budget action's ``reason`` -> the stop it is alerted as (a user's own stop is not)
STOP_REASONS: dict[str, StopReason] = {"budget": "budget", "idle": "idle", "done": "stop_when_done"}


class ServerAlerts:
    def __init__(
        self,
        admin: tuple[Target, ...],
        user: UserTargets,
        dispatcher: AlertDispatcher,
        context: Context,
        thresholds_pct: tuple[int, ...],
        *,
        allow_user_targets: bool = True,
        log: logging.Logger | None = None,
        cannot_stop: bool = False,
    ) -> None:
        self.admin = admin
        self.user = user
        self.dispatcher = dispatcher
        self.context = context
        self.thresholds_pct = thresholds_pct
        self.allow_user_targets = allow_user_targets
        #: the machine cannot be stopped (``Machine.cannot_stop``): a warning before a
        #: ``stop-instance`` budget says it bills until terminated
        self.cannot_stop = cannot_stop
        self.log = log or logging.getLogger("jupyter_gpucost")
        self.budget: BudgetController | None = None
        self._check: PeriodicCallback | None = None
        self._spikes: PeriodicCallback | None = None

    @property
    def targets(self) -> tuple[Target, ...]:
        return (*self.admin, *self.user.targets)

    def send(self, alert: Alert) -> bool:
        return self.dispatcher.submit(alert, self.targets)

    # -- the budget ---------------------------------------------------------------------

    def watch(self, budget: BudgetController) -> None:
        self.budget = budget
        budget.events.listeners.append(self.on_event)
        self._check = PeriodicCallback(self.check, CHECK_S * 1000)
        self._check.start()

    def watch_spend(self, ledger: SpendLedger, factor: float) -> None:
        """Compare today's spend with the usual day every 10 minutes (a thread reads the
        ledger, whose calendar says what today is)."""

        def read() -> tuple[list[tuple[date, int]], date]:
            now = datetime.now(UTC)
            return ledger.days(now, 15), ledger.day_start(now).date()

        async def check() -> None:
            rows, today = await asyncio.to_thread(read)
            self.check_spike(rows, factor, today)

        self._spikes = PeriodicCallback(check, SPIKE_CHECK_S * 1000)
        self._spikes.start()

    def check_spike(self, rows: list[tuple[date, int]], factor: float, today: date) -> bool:
        """Today's spend above ``factor`` x the median of the earlier days with spend (of
        ``rows``, the ledger's last days): alerted once a day."""
        if not self.targets or factor <= 0:
            return False
        spent = sum(v for d, v in rows if d == today)
        earlier = [v for d, v in rows if d < today and v > 0][-14:]
        alert = spend_spike(self.context, today.isoformat(), spent, earlier, factor)
        return alert is not None and self.send(alert)

    def check(self) -> None:
        """Each budget's highest threshold reached, alerted once per budget and period."""
        if self.budget is None or not self.targets:
            return
        note = (
            cannot_stop()
            if self.cannot_stop and self.budget.config.action == "stop-instance"
            else ""
        )
        for standing in self.budget.standings():
            if standing.spent_micro is None:
                continue
            alert = budget_crossing(
                self.context,
                standing.key,
                standing.spent_micro,
                standing.budget.amount_micro,
                self.thresholds_pct,
                note=note,
            )
            if alert is not None:
                self.send(alert)

    def on_event(self, kind: str, message: str, fields: Mapping[str, Any]) -> None:
        if kind == "action":
            reason = STOP_REASONS.get(str(fields.get("reason", "")))
            if reason is None:
                return
            still = fields.get("still_usd_per_hour")
            self.send(
                stopped(
                    self.context,
                    reason,
                    message,
                    still_bills_per_hour=float(still) if still is not None else None,
                    subject=str(fields.get("at", "")),
                )
            )
        elif kind == "idle":
            # one per idle spell: the budget warns once per spell
            at = self.budget.events.recent[-1]["at"] if self.budget else ""
            minutes = self.budget.config.idle_minutes if self.budget else 0.0
            self.send(idle_gpus(self.context, minutes, subject=str(at)))

    def interrupted(self, summary: str, *, still_bills_per_hour: float | None, at: str) -> bool:
        """A spot interruption stopped the machine (for the interruption handling to call)."""
        return self.send(
            stopped(
                self.context,
                "interruption",
                summary,
                still_bills_per_hour=still_bills_per_hour,
                subject=at,
            )
        )

    # -- the panel --------------------------------------------------------------------

    def listing(self) -> dict[str, object]:
        """Where alerts go, as the panel shows it: the admin's by kind only, the user's
        masked (with the id that removes or tests one)."""
        return {
            "admin": [t.masked.split("://", 1)[0] for t in self.admin],
            "yours": [{"id": t.id, "target": t.masked} for t in self.user.targets],
            "can_add": self.allow_user_targets,
            "thresholds_pct": list(self.thresholds_pct),
            "recent": [d for d in self.dispatcher.recent() if d["user"] == self.context.user],
        }

    def test(self, target_id: str) -> bool:
        """Send a test alert to one of the user's targets (``False``: no such target)."""
        found = [t for t in self.user.targets if t.id == target_id]
        if not found:
            return False
        return self.dispatcher.submit(trial_alert(self.context), found, once=False)

    def stop(self) -> None:
        for periodic in (self._check, self._spikes):
            if periodic is not None:
                periodic.stop()
        self.dispatcher.save()
        self.dispatcher.close()


def _user() -> str:
    return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def _machine_label(machine: Machine | None) -> str:
    if machine is None:
        return ""
    return " ".join(p for p in (machine.provider, machine.instance_type, machine.region) if p)


@dataclass(frozen=True)
class NotifySettings:
    """``c.GpuCost.notify*``, read once by the app (:mod:`..settings`)."""

    #: the admin's targets (secrets: never logged nor shown)
    targets: tuple[str, ...] = field(repr=False)
    thresholds_pct: tuple[int, ...]
    #: 0: no spike alert
    spike_factor: float
    allow_user_targets: bool
    #: the state file ("": in the data directory)
    state_path: str


def start_alerts(
    settings: NotifySettings,
    budget: BudgetController,
    *,
    data_dir: Path,
    machine: Machine | None,
    currency: str,
    symbol: str,
    link: str,
    log: logging.Logger,
    ledger: SpendLedger | None = None,
    sent: SentKeys | None = None,
) -> ServerAlerts:
    """The alerts of ``c.GpuCost.notify*`` watching ``budget`` (traits already checked);
    the keys sent kept in ``sent`` (the ledger's table), else in the state file."""
    from ...alerts.targets import parse_targets

    state = settings.state_path
    state_path = Path(state) if state else data_dir / "gpucost" / "alerts.json"
    admin = parse_targets(list(settings.targets), "c.GpuCost.notify")
    alerts = ServerAlerts(
        admin,
        UserTargets(state_path.with_name(state_path.stem + "-targets.json")),
        AlertDispatcher(DispatchSettings(state_path=state_path), log=log, memory=sent),
        Context(
            user=_user(),
            server=os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
            machine=_machine_label(machine),
            currency=currency,
            symbol=symbol,
            link=link,
        ),
        settings.thresholds_pct,
        allow_user_targets=settings.allow_user_targets,
        log=log,
        cannot_stop=machine is not None and bool(machine.cannot_stop),
    )
    alerts.watch(budget)
    factor = settings.spike_factor
    if ledger is not None and factor > 0:
        alerts.watch_spend(ledger, factor)
    return alerts
