"""What the budget reads: what was spent in a scope, and the rate now.

The session's spend comes from the meter's latest snapshot; the day's and the month's from
the running totals the ledger's recorder keeps in memory (no database query per tick), in
the ledger's own time zone. The app passes these parts in (:class:`MeterSpend`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Protocol

from ...core.meter import MeterSnapshot
from ..record.recorder import LiveTotals
from .policy import Scope


class SpendSource(Protocol):
    """What was spent in a scope: micro-dollars (``None``: not known) and its period key."""

    def spent(self, scope: Scope) -> tuple[int | None, str]: ...

    def rate_per_hour(self) -> Decimal: ...

    def supports(self, scope: Scope) -> bool: ...


class Calendar(Protocol):
    """Where the ledger's day and month start (its time zone)."""

    def day_start(self, now: datetime) -> datetime: ...

    def month_start(self, now: datetime) -> datetime: ...


class RunningTotals(Protocol):
    """Today's and this month's spend, this session included (``None``: not kept)."""

    def totals(self, snapshot: MeterSnapshot) -> LiveTotals | None: ...


@dataclass(frozen=True)
class LedgerPeriods:
    """Day and month spend: the ledger's calendar and the recorder's running totals."""

    calendar: Calendar
    totals: RunningTotals


@dataclass(frozen=True)
class MeterSpend:
    """Session spend from the meter; day and month from the ledger when there is one."""

    #: the sampler's latest snapshot
    latest: Callable[[], MeterSnapshot]
    session_id: str
    ledger: LedgerPeriods | None = None

    def supports(self, scope: Scope) -> bool:
        return scope == "session" or self.ledger is not None

    def _period(self, scope: Scope, now: datetime) -> str:
        if self.ledger is None:
            now = now.astimezone(UTC)
        elif scope == "day":
            now = self.ledger.calendar.day_start(now)
        else:
            now = self.ledger.calendar.month_start(now)
        return now.strftime("%Y-%m-%d") if scope == "day" else now.strftime("%Y-%m")

    def spent(self, scope: Scope) -> tuple[int | None, str]:
        snapshot = self.latest()
        if scope == "session":
            return snapshot.cost_micro, self.session_id
        period = self._period(scope, snapshot.as_of)
        if self.ledger is None:
            return None, period
        live = self.ledger.totals.totals(snapshot)
        if live is None:
            return None, period
        return (live.today_micro if scope == "day" else live.month_micro), period

    def rate_per_hour(self) -> Decimal:
        return Decimal(self.latest().rate_per_hour)

    def gpu_utilization(self) -> list[float | None]:
        """Each GPU's utilisation in the latest sample (``None``: no reading)."""
        return [g.reading.utilization_pct if g.reading else None for g in self.latest().gpus]
