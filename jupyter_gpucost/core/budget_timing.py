"""When a budget's countdown starts and how long it runs, so that the action lands at the
budget (pure arithmetic: no clocks of its own).

A budget is a cap: the countdown (``grace_s``) must end when the money is gone, not a grace
period after. At the current rate a budget with ``remaining`` left is spent in
``remaining / rate`` seconds, so its countdown starts once that is at most the grace period
(``spent + rate × grace ≥ budget``) and lasts exactly that long. Where the full grace would
go past the budget (the budget was already spent at the first check, or the rate jumped),
the countdown is *shortened* and says why (:data:`SHORTENED_OVERRUN`, :data:`SHORTENED_SPENT`).

A soft budget the user sets with less than the grace period left (or below what was
spent) counts down the full grace: it is theirs to raise (:mod:`.policy` decides that);
any other budget found spent acts at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Literal

#: why a countdown is shorter than the grace period
Shortened = Literal["overrun", "spent"]
SHORTENED_OVERRUN: Shortened = "overrun"
SHORTENED_SPENT: Shortened = "spent"


def seconds_left(remaining_micro: int, per_hour: Decimal) -> float | None:
    """How long ``remaining`` lasts at ``rate`` (0 when spent; ``None``: never, no rate)."""
    if remaining_micro <= 0:
        return 0.0
    if per_hour <= 0:
        return None
    return float(Decimal(remaining_micro) * Decimal(3600) / (per_hour * 10**6))


def due(remaining_micro: int, per_hour: Decimal, grace_s: float) -> bool:
    """Whether the countdown must start now for the action to land at the budget."""
    left = seconds_left(remaining_micro, per_hour)
    return left is not None and left <= grace_s


@dataclass(frozen=True)
class Countdown:
    """How long a budget's countdown runs, and why it is shorter than the grace period."""

    seconds: float
    shortened: Shortened | None = None


def countdown(
    remaining_micro: int,
    per_hour: Decimal,
    grace_s: float,
    *,
    tick_s: float,
) -> Countdown:
    """The countdown of a budget that is due (:func:`due`).

    ``tick_s``: how often the budget is checked; a countdown that starts less than one
    check late is the grace period itself, not a shortened one.
    """
    left = seconds_left(remaining_micro, per_hour)
    if remaining_micro <= 0:
        return Countdown(0.0, SHORTENED_SPENT if grace_s > 0 else None)
    if left is None or left >= grace_s:
        return Countdown(grace_s)
    shortened = SHORTENED_OVERRUN if left < grace_s - tick_s else None
    return Countdown(left, shortened)


def next_check_s(grace_ends: datetime | None, now: datetime, tick_s: float) -> float:
    """Until the next check: a tick, or less when the countdown ends sooner, so the action
    starts at its time, not up to a tick after it (at least 0.01 s)."""
    if grace_ends is None:
        return tick_s
    return min(tick_s, max(0.01, (grace_ends - now).total_seconds()))
