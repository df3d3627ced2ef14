"""A running server's figures in memory: what the database holds for it (as of the last
flush), and what it has spent since (its allocation up to any instant, its reports).

Pure: no I/O. The ledger (:mod:`.`) keeps one :class:`OpenServer` per running server,
writes its :meth:`~OpenServer.changes` at each flush, and adds them to the totals it
reads from the database, so that a user's totals are exact up to ``now``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo

from ...core.billing import BillingRule
from ...core.hub_protocol import SpendReport
from ..accounting import allocated_by_day, day_of
from ..model import ServerRow


@dataclass(frozen=True)
class Day:
    """One server's figures for one local day, in micro-dollars."""

    allocated: int = 0
    reported: int = 0
    idle: int = 0

    @property
    def billed(self) -> int:
        return max(self.allocated, self.reported)


@dataclass
class LastReport:
    """The server's latest report: what its meter counted since the meter started."""

    session_id: str | None = None
    cost_micro_usd: int = 0
    idle_micro_usd: int = 0
    energy_wh: float | None = None
    cells: int | None = None


@dataclass
class OpenServer:
    row: ServerRow
    #: what the database holds, by day
    flushed: dict[date, Day] = field(default_factory=dict)
    #: what the server reported, by the day each report came in (flushed or not)
    reported: dict[date, int] = field(default_factory=dict)
    idle: dict[date, int] = field(default_factory=dict)
    last: LastReport = field(default_factory=LastReport)
    #: a report came since the last flush
    report_pending: bool = False

    def add_report(self, report: SpendReport, received: datetime, tz: tzinfo) -> None:
        """Count what the server's meter added since its previous report, on the day the
        report came in. A meter that went back (the server restarted it) starts a new
        baseline: what it counted before stays counted."""
        same_meter = report.session_id == self.last.session_id
        cost_before = self.last.cost_micro_usd if same_meter else 0
        idle_before = self.last.idle_micro_usd if same_meter else 0
        day = day_of(received, tz)
        if report.cost_micro_usd > cost_before:
            self.reported[day] = self.reported.get(day, 0) + report.cost_micro_usd - cost_before
        if report.idle_micro_usd > idle_before:
            self.idle[day] = self.idle.get(day, 0) + report.idle_micro_usd - idle_before
        self.last = LastReport(
            report.session_id,
            report.cost_micro_usd,
            report.idle_micro_usd,
            report.energy_wh,
            report.cells,
        )
        self.report_pending = True

    def days(self, until: datetime, billing: BillingRule, tz: tzinfo) -> dict[date, Day]:
        """Every day's figures with the allocation up to ``until``; never below what was
        flushed (a bill already recorded does not go down)."""
        row = self.row
        # days before the last flush's day are complete: their allocation is flushed
        since = max(day_of(row.started, tz), day_of(row.last_seen, tz))
        allocated = allocated_by_day(row.rate, billing, row.started, until, tz, since=since)
        out: dict[date, Day] = {}
        for d in sorted({*self.flushed, *allocated, *self.reported, *self.idle}):
            old = self.flushed.get(d, Day())
            out[d] = Day(
                max(old.allocated, allocated.get(d, 0)),
                max(old.reported, self.reported.get(d, 0)),
                max(old.idle, self.idle.get(d, 0)),
            )
        return out

    def changes(self, until: datetime, billing: BillingRule, tz: tzinfo) -> dict[date, Day]:
        """The days whose figures differ from the database's."""
        return {d: v for d, v in self.days(until, billing, tz).items() if self.flushed.get(d) != v}

    def session_micro_usd(self, until: datetime, billing: BillingRule, tz: tzinfo) -> int:
        return sum(v.billed for v in self.days(until, billing, tz).values())

    def written(self, days: dict[date, Day], last_seen: datetime | None) -> None:
        """What a flush wrote is now the database's."""
        self.flushed.update(days)
        if last_seen is not None and last_seen > self.row.last_seen:
            self.row = dataclasses.replace(self.row, last_seen=last_seen)
