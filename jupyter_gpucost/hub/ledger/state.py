"""A running server's figures in memory: what the database holds for it (as of the last
flush), and what it has spent since (its allocation up to any instant, its reports).

Pure: no I/O. The ledger (:mod:`.`) keeps one :class:`OpenServer` per running server,
writes its :meth:`~OpenServer.changes` at each flush, and adds them to the totals it
reads from the database, so that a user's totals are exact up to ``now``.

The billing rule of one server session (one spawn: the Hub's ``started``):

* ``A(t)``: its allocation's cost from ``started`` to ``t``;
* ``R(t)``: the most any of its reports received by ``t`` said, each counted only up to
  ``C(received)``, the ceiling's cost (:class:`~..model.ReportCeiling`) at that instant;
  a report's ``session_id`` does not matter (a new one does not start a new count), and a
  report lower than an earlier one changes nothing (out of order, or a meter gone back);
* its bill ``B(t) = max(A(t), R(t)) <= C(t)``; a day's bill is ``B`` at the day's end (or
  now) minus ``B`` at its start, so the days add up exactly to ``B`` and none goes down.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo

from ...core.billing import BillingRule
from ...core.hub_protocol import SpendReport
from ..accounting import allocated_by_day, allocated_micro_usd, billed_by_day, day_of
from ..model import Rate, ServerRow

#: the most any figure of one server and day may be in the ledger ($1 billion): far above
#: what a ceiling allows, far below what makes a sum of a month's rows overflow
MAX_ROW_MICRO_USD = 10**15


@dataclass(frozen=True)
class Day:
    """One server's figures for one local day, in micro-dollars: what was allocated, what
    its reports added that day (capped), the idle part of that, and the day's bill."""

    allocated: int = 0
    reported: int = 0
    idle: int = 0
    billed: int = 0

    def in_range(self) -> bool:
        """Every figure is one the ledger may hold (0 to :data:`MAX_ROW_MICRO_USD`)."""
        return all(
            0 <= v <= MAX_ROW_MICRO_USD
            for v in (self.allocated, self.reported, self.idle, self.billed)
        )


#: a day with nothing on it (what the database holds for a day it has no row of)
NO_DAY = Day()


@dataclass
class LastReport:
    """The server's latest report, as it said it (shown to admins; not what is billed)."""

    session_id: str | None = None
    cost_micro_usd: int = 0
    idle_micro_usd: int = 0
    energy_wh: float | None = None
    cells: int | None = None


@dataclass
class OpenServer:
    row: ServerRow
    #: the most its reports can bill (:meth:`~..model.ReportCeiling.rate`)
    ceiling: Rate
    #: what the database holds, by day
    flushed: dict[date, Day] = field(default_factory=dict)
    #: what its reports added, by the day each came in (flushed or not)
    reported: dict[date, int] = field(default_factory=dict)
    idle: dict[date, int] = field(default_factory=dict)
    last: LastReport = field(default_factory=LastReport)
    #: a report came since the last flush
    report_pending: bool = False
    #: a report said more than the ceiling (logged once per session)
    capped: bool = False
    #: its figures could not be written: they are in quarantine, and it is not written again
    quarantined: bool = False

    @property
    def reported_total(self) -> int:
        """``R``: what the reports have counted so far in this session."""
        return sum(self.reported.values())

    def add_report(
        self, report: SpendReport, received: datetime, billing: BillingRule, tz: tzinfo
    ) -> bool:
        """Count what the report adds to ``R`` (up to the ceiling at ``received``), on the
        day it came in. True when the report said more than the ceiling allows."""
        ceiling = allocated_micro_usd(self.ceiling, billing, self.row.started, received)
        over = report.cost_micro_usd > ceiling
        day = day_of(received, tz)
        before = self.reported_total
        cost = min(report.cost_micro_usd, ceiling)
        if cost > before:
            self.reported[day] = self.reported.get(day, 0) + cost - before
        idle_before = sum(self.idle.values())
        idle = min(report.idle_micro_usd, max(cost, before))
        if idle > idle_before:
            self.idle[day] = self.idle.get(day, 0) + idle - idle_before
        self.last = LastReport(
            report.session_id,
            report.cost_micro_usd,
            report.idle_micro_usd,
            report.energy_wh,
            report.cells,
        )
        self.report_pending = True
        return over

    def days(self, until: datetime, billing: BillingRule, tz: tzinfo) -> dict[date, Day]:
        """Every day's figures with the allocation up to ``until``; never below what was
        flushed (a bill already recorded does not go down)."""
        row = self.row
        # days before the last flush's day are complete: their allocation is flushed
        since = max(day_of(row.started, tz), day_of(row.last_seen, tz))
        allocated = allocated_by_day(row.rate, billing, row.started, until, tz, since=since)
        days = sorted({*self.flushed, *allocated, *self.reported, *self.idle})
        flushed = {d: self.flushed.get(d, NO_DAY) for d in days}
        a = {d: max(flushed[d].allocated, allocated.get(d, 0)) for d in days}
        r = {d: max(flushed[d].reported, self.reported.get(d, 0)) for d in days}
        bill = billed_by_day(a, r)
        return {
            d: Day(
                a[d],
                r[d],
                max(flushed[d].idle, self.idle.get(d, 0)),
                max(flushed[d].billed, bill[d]),
            )
            for d in days
        }

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
