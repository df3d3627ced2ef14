"""What the hub bills a server: its allocation priced under the billing rule, split by
local day, and never less than what the server itself reported.

* The **allocated** cost of a server from ``started`` to an instant is the rate of its
  allocation × the billed time (:meth:`BillingRule.billed_us`: granularity and minimum
  charge), an exact fraction of micro-dollars rounded half up to a whole micro-dollar
  (:func:`~jupyter_gpucost.core.money.round_micro`).
* Split **by day** in the hub's time zone: a day's share is the rounded cumulative cost at
  its end (or at the instant) minus the rounded cumulative cost at its start. The shares
  are whole micro-dollars and add up exactly to the whole; the minimum charge falls on the
  first day.
* The **bill** of a server session (one spawn) is ``max(allocated, reported)`` so far: a
  report can raise it (the server saw more, e.g. a price override), never lower it below
  the allocation. A day's bill is how much the session's bill grew that day
  (:func:`billed_by_day`), so the days add up to the session's bill: a report that comes
  in after midnight and covers the day before is not billed on both days. (What a report
  may count at all, the ceiling, is the ledger's: :mod:`.ledger.state`.)

Pure: no I/O, no tornado. Instants must carry their time zone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..core.billing import BillingRule, rounded_cost_micro
from .model import HubConfigError, Rate

TIME_ZONE_SETTING = "c.GpuCostHub.time_zone"

_ONE_DAY = timedelta(days=1)


def time_zone(name: str, *, setting: str = TIME_ZONE_SETTING) -> tzinfo:
    """The IANA time zone days and months are cut in (``"Europe/Paris"``, ``"UTC"``)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise HubConfigError(
            f"{setting}: {name!r} is not an IANA time zone such as 'UTC' or 'Europe/Paris'"
        ) from None


def _aware(when: datetime, what: str) -> datetime:
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{what} {when.isoformat()} has no time zone")
    return when


def elapsed_us(start: datetime, end: datetime) -> int:
    """Whole microseconds from ``start`` to ``end`` (0 when ``end`` is earlier)."""
    delta = _aware(end, "end") - _aware(start, "start")
    us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return max(us, 0)


def allocated_micro_usd(
    rate: Rate, billing: BillingRule, started: datetime, until: datetime
) -> int:
    """The allocation's cost from ``started`` to ``until``, in whole micro-dollars."""
    if until <= started:
        return 0
    billed = billing.billed_us(elapsed_us(started, until))
    return rounded_cost_micro(rate.usd_per_hour, billed)


def day_of(when: datetime, tz: tzinfo) -> date:
    """The local day ``when`` falls on in ``tz``."""
    return _aware(when, "instant").astimezone(tz).date()


def midnight(day: date, tz: tzinfo) -> datetime:
    """The instant ``day`` starts in ``tz`` (as UTC)."""
    return datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)


def month_start(day: date) -> date:
    return day.replace(day=1)


def allocated_by_day(
    rate: Rate,
    billing: BillingRule,
    started: datetime,
    until: datetime,
    tz: tzinfo,
    *,
    since: date | None = None,
) -> dict[date, int]:
    """The allocation's cost from ``started`` to ``until``, by local day in ``tz``; the
    values add up exactly to :func:`allocated_micro_usd`. Empty before ``started``.
    ``since`` leaves out the days before it (their shares do not change any more)."""
    if until <= started:
        return {}
    out: dict[date, int] = {}
    day = day_of(started, tz)
    last = day_of(until, tz)
    before = 0
    if since is not None and since > day:
        if since > last:
            return {}
        day = since
        before = allocated_micro_usd(rate, billing, started, midnight(since, tz))
    while True:
        end = until if day == last else midnight(day + _ONE_DAY, tz)
        cumulative = allocated_micro_usd(rate, billing, started, end)
        out[day] = cumulative - before
        before = cumulative
        if day == last:
            return out
        day += _ONE_DAY


def billed(allocated: int, reported: int) -> int:
    """A session's bill so far: its allocation, or more if it reported more."""
    return max(allocated, reported)


def billed_by_day(allocated: Mapping[date, int], reported: Mapping[date, int]) -> dict[date, int]:
    """Each day's share of the session's bill: the bill (:func:`billed`) of the days up to
    its end minus that of the days before it. ``allocated`` is each day's allocation,
    ``reported`` what the reports added each day; the shares add up to the session's bill."""
    out: dict[date, int] = {}
    cum_allocated = cum_reported = before = 0
    for d in sorted({*allocated, *reported}):
        cum_allocated += allocated.get(d, 0)
        cum_reported += reported.get(d, 0)
        bill = billed(cum_allocated, cum_reported)
        out[d] = bill - before
        before = bill
    return out


def today_and_month(by_day: Iterable[tuple[date, int]], today: date) -> tuple[int, int]:
    """(today's, this month's) sums of (day, micro-dollars) pairs, this month being the
    calendar month ``today`` falls in."""
    first = month_start(today)
    day_sum = month_sum = 0
    for d, amount in by_day:
        if first <= d <= today:
            month_sum += amount
            if d == today:
                day_sum += amount
    return day_sum, month_sum
