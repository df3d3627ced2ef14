"""Is a cell's cost record acceptable? The one owner of that rule: its times, its rate,
its currency, its wall time.

A record is data someone sent: the kernel measures it, but the code a notebook runs can
publish one of the same shape, and a file can say anything. Whoever receives one checks it
here, against what they know for themselves (:class:`Expected`):

- the headless runners (nbclient's hooks, papermill's ``gpucost`` engine, nbconvert's
  ``PriceCells``, ``jupyter gpucost run``): the run's own window in time, the rate they
  price at, the time they saw the cell take;
- a record read from a notebook file (:func:`jupyter_gpucost.core.saved_cost.parse_cell`):
  any plausible time;
- the server's cells route (records its kernels post): any plausible time.

A time must say its zone (a zone-less time is read in whatever zone a reader assumes, and
compared with zoned ones it cannot be ordered at all), and lie in the receiver's window:
never in the future, never before the run began. A refusal carries its reason, an ``N_``
constant the receiver translates where it shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from .currency import DEFAULT_CURRENCY, is_currency_code
from .i18n import N_

#: the currency of a record that names none of its own: a record is in its session's
#: currency (``currency``, an ISO 4217 code), US dollars when the session prices in them
RECORD_CURRENCY = DEFAULT_CURRENCY
#: the earliest time any record may carry: before it is a clock or a client gone wrong
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
#: how far ahead of the receiver's clock a record from a process it does not share a clock
#: with may end (the server and its kernels, a file from another machine)
MAX_AHEAD = timedelta(days=1)
#: how far a record's times may be outside a run's window when the receiver runs the
#: kernel on its own clock (the messages to and from the kernel, a loaded machine)
RUN_CLOCK_SLACK = timedelta(seconds=2)
#: how far a record's wall time may be from the time the runner saw the cell take
WALL_SLACK_S = 2.0
WALL_SLACK_SHARE = 0.1

NOT_A_TIME = N_("its time is not an ISO 8601 time")
IMPLAUSIBLE = N_("its time is before 2000")
NO_TIME_ZONE = N_("its time has no time zone")
IN_THE_FUTURE = N_("its time is in the future")
BEFORE_THE_RUN = N_("its time is before the run began")
ENDS_BEFORE_IT_STARTS = N_("it ends before it starts")
NOT_THIS_RATE = N_("its rate is not the one this run prices cells at")
NOT_THIS_CURRENCY = N_("its currency is not the one this run prices cells in")
NOT_A_CURRENCY = N_("its currency is not an ISO 4217 code")
NOT_THIS_WALL = N_("its wall time is not the time the cell took to run")


class RecordRefused(ValueError):
    """A record that is not acceptable; ``reason`` is an ``N_`` constant."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TimeWindow:
    """When a record's times may lie (both ends included, both with a zone)."""

    earliest: datetime
    latest: datetime
    #: the reason a time before ``earliest`` is refused
    too_early: str = BEFORE_THE_RUN

    @classmethod
    def plausible(cls, now: datetime) -> TimeWindow:
        """Any time from 2000 to a day after ``now`` (a receiver that knows no run)."""
        return cls(EARLIEST, now + MAX_AHEAD, too_early=IMPLAUSIBLE)

    @classmethod
    def of_run(cls, started: datetime, now: datetime) -> TimeWindow:
        """From when the run began to ``now``, on the runner's own clock."""
        return cls(started - RUN_CLOCK_SLACK, now + RUN_CLOCK_SLACK, too_early=BEFORE_THE_RUN)


@dataclass(frozen=True)
class Expected:
    """What the receiver of a record knows for itself."""

    window: TimeWindow
    #: the rate the receiver prices at (``None``: it does not know one)
    rate_usd_per_hour: Decimal | None = None
    #: the currency the receiver prices in (``None``: it does not know one, any code is
    #: taken and the record is shown in its own currency)
    currency: str | None = RECORD_CURRENCY
    #: the time the receiver saw the cell take (``None``: it did not see it)
    elapsed_s: float | None = None


def moment(text: str) -> datetime:
    """An ISO 8601 time that says its zone; :class:`RecordRefused` otherwise."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise RecordRefused(NOT_A_TIME) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise RecordRefused(NO_TIME_ZONE)
    return value


def check_time(text: str, window: TimeWindow) -> datetime:
    """``text`` as a time with a zone inside ``window``; :class:`RecordRefused` otherwise."""
    value = moment(text)
    try:
        early, late = value < window.earliest, value > window.latest
    except OverflowError:  # a zone that moves it past year 1 or 9999
        raise RecordRefused(NOT_A_TIME) from None
    if early:
        raise RecordRefused(window.too_early)
    if late:
        raise RecordRefused(IN_THE_FUTURE)
    return value


def check_times(started: str, ended: str, window: TimeWindow) -> tuple[datetime, datetime]:
    """A record's start and end: each in ``window``, the end not before the start."""
    start, end = check_time(started, window), check_time(ended, window)
    if end < start:
        raise RecordRefused(ENDS_BEFORE_IT_STARTS)
    return start, end


def check_currency(currency: object, expected: str | None = None) -> str:
    """A record's currency: an ISO 4217 code (:mod:`.currency`'s rule, the one a session's
    currency follows), and the one the receiver prices in where it knows one
    (``expected``): amounts in two currencies are never added up."""
    if not isinstance(currency, str) or not is_currency_code(currency):
        raise RecordRefused(NOT_A_CURRENCY)
    if expected is not None and currency != expected:
        raise RecordRefused(NOT_THIS_CURRENCY)
    return currency


def check_record(
    *,
    started: str,
    ended: str,
    wall_s: float,
    rate_usd_per_hour: Decimal,
    currency: str,
    expected: Expected,
) -> None:
    """The whole rule for a record a receiver is about to save or sum."""
    check_currency(currency, expected.currency)
    if expected.rate_usd_per_hour is not None and rate_usd_per_hour != expected.rate_usd_per_hour:
        raise RecordRefused(NOT_THIS_RATE)
    if expected.elapsed_s is not None:
        slack_s = WALL_SLACK_S + WALL_SLACK_SHARE * expected.elapsed_s
        if not expected.elapsed_s - slack_s <= wall_s <= expected.elapsed_s + slack_s:
            raise RecordRefused(NOT_THIS_WALL)
    check_times(started, ended, expected.window)
