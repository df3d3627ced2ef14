"""Where each allowance stands (:mod:`.config`): what was used of it, what is
left, and when it fills up again.

The usage comes from the hub ledger: for GPU-hours, each server session's span (start to
stop, or to now while it runs) × its GPUs (× their share of a GPU, × the model's weight),
exact to the microsecond; for money, each local day's bill. Usage over adjoining intervals
adds up exactly to the usage over their union (fractions of a micro-unit are kept until
the end), so nothing is counted twice across a period's boundary or a top-up.

* A period's allowance: what is left is the amount less the usage since the period began
  (a calendar day, week from Monday, month; or a rolling window of the last N local days);
  it fills again when the next period begins (the next midnight for a window).
* A balance: replayed from its start, one top-up at a time: each top-up adds its amount
  but never lifts the balance above the cap (and never lowers one already above it).

Pure but for the usage it is handed (:class:`UsageSource`, the ledger): no tornado.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from decimal import Decimal
from fractions import Fraction
from math import floor
from typing import Protocol

from ..accounting import day_of, elapsed_us, midnight
from ..model import Rate, ServerRow
from .config import EVERYONE, Allowance, AllowanceSettings, Calendar, Period, Unit

#: microseconds in one micro-hour
_US_PER_MICRO_HOUR = 3600


def period_start(calendar: Calendar, day: date) -> date:
    """The first day of the calendar period ``day`` falls in (weeks begin on Monday)."""
    if calendar == "day":
        return day
    if calendar == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def next_start(calendar: Calendar, day: date) -> date:
    """The first day of the calendar period after the one ``day`` falls in."""
    if calendar == "day":
        return day + timedelta(days=1)
    if calendar == "week":
        return period_start("week", day) + timedelta(days=7)
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


def window(period: Period, now: datetime, tz: tzinfo) -> tuple[datetime, datetime]:
    """(when the period that holds ``now`` began, when the next one begins)."""
    today = day_of(now, tz)
    if period.calendar is not None:
        return (
            midnight(period_start(period.calendar, today), tz),
            midnight(next_start(period.calendar, today), tz),
        )
    return midnight(today - timedelta(days=period.days - 1), tz), midnight(
        today + timedelta(days=1), tz
    )


@dataclass(frozen=True)
class Span:
    """A server session's GPUs over time: ``gpus`` weighted GPUs from ``start`` to ``end``."""

    start: datetime
    end: datetime
    gpus: Fraction


def spans_of(
    rows: Iterable[ServerRow], now: datetime, weight: Callable[[str], Decimal]
) -> list[Span]:
    """The ledger's server sessions as spans: a stopped one to its stop, a running one to
    ``now``."""
    out = []
    for row in rows:
        end = row.stopped if row.stopped is not None else now
        a = row.rate.allocation
        gpus = a.count * a.share * Fraction(weight(a.model))
        out.append(Span(row.started, min(end, now), gpus))
    return out


def gpu_usage(spans: Iterable[Span], since: datetime, until: datetime) -> Fraction:
    """Weighted micro GPU-hours of ``spans`` between ``since`` and ``until``, exact."""
    total = Fraction(0)
    for s in spans:
        start, end = max(s.start, since), min(s.end, until)
        if end > start:
            total += s.gpus * Fraction(elapsed_us(start, end), _US_PER_MICRO_HOUR)
    return total


def money_usage(
    by_day: Mapping[date, int], since: datetime, until: datetime, tz: tzinfo
) -> Fraction:
    """Micro-dollars billed on the local days that begin in [``since``, ``until``): the
    bill is kept by day, so money allowances turn at midnight."""
    return Fraction(sum(v for d, v in by_day.items() if since <= midnight(d, tz) < until))


Used = Callable[[datetime, datetime], Fraction]
#: micro-units approved (requests for more) with the decision in [since, until)
Granted = Callable[[datetime, datetime], int]
#: (whose usage, source, since, until) → micro-units approved
Grants = Callable[[Sequence[str], str, datetime, datetime], int]


def _none(since: datetime, until: datetime) -> int:
    return 0


@dataclass(frozen=True)
class Balance:
    left: Fraction
    #: usage since the last top-up (or the start)
    used: Fraction
    #: the next top-up
    next_at: datetime


def replay(allowance: Allowance, used: Used, now: datetime, tz: tzinfo) -> Balance:
    """A balance's standing at ``now``: its amount at its start, less each interval's
    usage, plus each top-up up to the cap."""
    top = allowance.top_up
    assert top is not None
    at = midnight(top.start, tz)
    left = Fraction(allowance.amount_micro)
    day = top.start
    while True:
        day = next_start(top.every, day)
        refill = midnight(day, tz)
        if now < at or refill > now:
            spent = used(at, now) if now > at else Fraction(0)
            return Balance(left - spent, spent, refill)
        left -= used(at, refill)
        left = top_up(left, top.top_up_micro, top.cap_micro)
        at = refill


def top_up(left: Fraction, amount: int, cap: int) -> Fraction:
    """One top-up: ``amount`` more, but not above ``cap`` (a balance above it stays)."""
    return max(left, min(Fraction(cap), left + amount))


@dataclass(frozen=True)
class AllowanceStanding:
    """One allowance on a user and where it stands, in micro-units of its unit."""

    #: "user" or "group:<name>"
    source: str
    unit: Unit
    #: "day", "week", "month", "N days" or "balance"
    label: str
    #: a period's amount; a balance's cap
    amount_micro: int
    used_micro: int
    #: what is left (0 or less: spent), rounded down
    left_micro: int
    #: when it fills again (the next period, the next top-up)
    refill_at: datetime
    #: a balance's top-up (``None``: a period's allowance fills to its amount)
    refill_micro: int | None = None

    @property
    def exceeded(self) -> bool:
        return self.left_micro <= 0


def _floor(value: Fraction) -> int:
    return floor(value)


def standing(
    allowance: Allowance,
    source: str,
    used: Used,
    now: datetime,
    tz: tzinfo,
    granted: Granted = _none,
) -> AllowanceStanding:
    """Where ``allowance`` stands at ``now``, ``used`` being the usage it counts and
    ``granted`` what was approved on top of it: for a period, this period's approvals;
    for a balance, every approval since its start (beyond its cap: an owner's decision)."""
    if allowance.period is not None:
        since, refill = window(allowance.period, now, tz)
        spent = used(since, now)
        more = granted(since, now) if now > since else 0
        return AllowanceStanding(
            source,
            allowance.unit,
            allowance.period.label,
            allowance.amount_micro + more,
            _floor(spent),
            _floor(allowance.amount_micro + more - spent),
            refill,
        )
    top = allowance.top_up
    assert top is not None
    balance = replay(allowance, used, now, tz)
    start = midnight(top.start, tz)
    balance = Balance(
        balance.left + (granted(start, now) if now > start else 0), balance.used, balance.next_at
    )
    return AllowanceStanding(
        source,
        allowance.unit,
        "balance",
        top.cap_micro,
        _floor(balance.used),
        _floor(balance.left),
        balance.next_at,
        top.top_up_micro,
    )


class UsageSource(Protocol):
    """What the allowances read of the hub ledger."""

    def spans(self, users: Iterable[str], since: datetime, now: datetime) -> list[ServerRow]:
        """The server sessions of ``users`` that ran at some point after ``since``."""

    def daily(
        self, since: date, user: str | None = None, now: datetime | None = None
    ) -> list[tuple[date, str, int]]: ...


def _bind(grants: Grants, whose: Sequence[str], source: str) -> Granted:
    return lambda since, until: grants(whose, source, since, until)


def _earliest(allowance: Allowance, now: datetime, tz: tzinfo) -> datetime:
    if allowance.top_up is not None:
        return min(midnight(allowance.top_up.start, tz), now)
    assert allowance.period is not None
    return window(allowance.period, now, tz)[0]


class AllowancePolicy:
    """Which allowances apply to a user and where each one stands."""

    def __init__(self, settings: AllowanceSettings, tz: tzinfo) -> None:
        self.settings = settings
        self.tz = tz

    @property
    def enabled(self) -> bool:
        return self.settings.any

    def standings(
        self,
        user: str,
        groups: Iterable[str],
        members: Mapping[str, Sequence[str]],
        source: UsageSource,
        now: datetime,
        grants: Grants | None = None,
    ) -> list[AllowanceStanding]:
        """Every allowance on ``user``: their own, then each of their groups' (pooled by
        ``members[group]``, or their own usage where the group's is per member)."""
        wanted: list[tuple[str, Allowance, tuple[str, ...]]] = []
        own = self.settings.users.get(user, self.settings.users.get(EVERYONE))
        if own is not None:
            wanted.append(("user", own, (user,)))
        for group in sorted(set(groups)):
            allowance = self.settings.groups.get(group)
            if allowance is None:
                continue
            whose = (
                (user,) if allowance.per_member else tuple(sorted({*members.get(group, ()), user}))
            )
            wanted.append((f"group:{group}", allowance, whose))
        out = []
        for name, allowance, whose in wanted:
            used = self.usage(allowance, whose, source, now)
            more = _none if grants is None else _bind(grants, whose, name)
            out.append(standing(allowance, name, used, now, self.tz, more))
        return out

    def usage(
        self, allowance: Allowance, users: Sequence[str], source: UsageSource, now: datetime
    ) -> Used:
        """The usage ``allowance`` counts for ``users``, read once from the ledger."""
        since = _earliest(allowance, now, self.tz)
        tz = self.tz
        if allowance.unit == "gpu_hours":
            spans = spans_of(source.spans(users, since, now), now, self.settings.weight)
            return lambda a, b: gpu_usage(spans, a, b)
        by_day: dict[date, int] = {}
        first = day_of(since, tz)
        for user in users:
            for d, _, v in source.daily(first, user, now):
                by_day[d] = by_day.get(d, 0) + v
        return lambda a, b: money_usage(by_day, a, b, tz)

    def rate_of(self, unit: Unit, rate: Rate) -> Decimal:
        """How fast a server at ``rate`` uses an allowance in ``unit``: dollars or weighted
        GPU-hours per hour."""
        if unit == "usd":
            return rate.usd_per_hour
        a = rate.allocation
        share = Decimal(a.share.numerator) / Decimal(a.share.denominator)
        return a.count * share * self.settings.weight(a.model)
