"""What an allowance says to the user: what is left and for how long at a profile's rate,
why a spawn is refused, why and when the hub stops a server (English when no messages are
given: the Hub's own messages and the deadlines it keeps).

Pure: no I/O, no tornado.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from decimal import Decimal

from ...core import budget_words
from ...core.budget_timing import seconds_left
from ...core.i18n import Messages, messages_for
from ...core.money import notice
from .usage import AllowanceStanding


def _tr(messages: Messages | None) -> Messages:
    return messages if messages is not None else messages_for("en")


def amount(micro: int, unit: str, messages: Messages | None = None, symbol: str = "$") -> str:
    """``$3.20``, ``1 GPU-hour`` or ``1.5 GPU-hours``."""
    if unit == "usd":
        return notice(max(micro, 0), symbol)
    ngettext = _tr(messages).ngettext  # by this name, the catalog's tool finds it
    hours = (Decimal(max(micro, 0)) / 10**6).quantize(Decimal("0.01")).normalize()
    return ngettext("{hours} GPU-hour", "{hours} GPU-hours", 1 if hours == 1 else 2).format(
        hours=f"{hours:f}"
    )


def period_words(s: AllowanceStanding, messages: Messages | None = None) -> str:
    """``this week``, ``today``, ``in the last 7 days``; a balance: ``until it tops up``."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    if s.label == "day":
        return _("today")
    if s.label == "week":
        return _("this week")
    if s.label == "month":
        return _("this month")
    if s.label == "balance":
        return _("until it tops up")
    return _("in the last {days} days").format(days=s.label.split()[0])


def when(at: datetime, tz: tzinfo) -> str:
    """A top-up's time in the hub's time zone: ``Mon 2026-11-30 00:00 CET``."""
    local = at.astimezone(tz)
    return local.strftime("%a %Y-%m-%d %H:%M ") + (local.tzname() or "")


def refill(
    s: AllowanceStanding, tz: tzinfo, messages: Messages | None = None, symbol: str = "$"
) -> str:
    """``It fills up again on Mon 2026-11-30 00:00 UTC.`` or ``+1 GPU-hours on …, up to 2``."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    if s.refill_micro is None:
        return _("It fills up again on {when}.").format(when=when(s.refill_at, tz))
    return _("It tops up by {amount} on {when}, up to {cap}.").format(
        amount=amount(s.refill_micro, s.unit, messages, symbol),
        when=when(s.refill_at, tz),
        cap=amount(s.amount_micro, s.unit, messages, symbol),
    )


def time_left_s(s: AllowanceStanding, per_hour: Decimal) -> float:
    """How long what is left lasts at ``per_hour`` (``inf``: nothing is used at that rate)."""
    left = seconds_left(s.left_micro, per_hour)
    return float("inf") if left is None else left


def left_at_rate(
    s: AllowanceStanding, per_hour: Decimal, messages: Messages | None = None, symbol: str = "$"
) -> str:
    """Beside a profile on the spawn page: ``6 h 20 min left this week``."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    seconds = time_left_s(s, per_hour)
    if seconds == float("inf"):
        return _("{left} left {period}").format(
            left=amount(s.left_micro, s.unit, messages, symbol), period=period_words(s, messages)
        )
    return _("{duration} left {period}").format(
        duration=budget_words.about(seconds, messages), period=period_words(s, messages)
    )


def describe(
    s: AllowanceStanding, tz: tzinfo, messages: Messages | None = None, symbol: str = "$"
) -> str:
    """``Your allowance (set by your hub admin) has 0.5 GPU-hours left this week. It fills
    up again on …``, or the group's."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    group = s.source.partition(":")[2]
    if s.source == "user":
        text = _("Your allowance (set by your hub admin) has {left} left {period}.")
    else:
        text = _("Group {group}'s allowance (set by your hub admin) has {left} left {period}.")
    first = text.format(
        group=group,
        left=amount(s.left_micro, s.unit, messages, symbol),
        period=period_words(s, messages),
    )
    return f"{first} {refill(s, tz, messages, symbol)}"


def spawn_refusal(
    s: AllowanceStanding,
    per_hour: Decimal,
    minimum_s: float,
    tz: tzinfo,
    messages: Messages | None = None,
    symbol: str = "$",
) -> str | None:
    """Why a profile at ``per_hour`` may not start on this allowance (what is left lasts
    less than ``minimum_s`` at its rate, or nothing is left), or ``None``."""
    seconds = time_left_s(s, per_hour)
    if not s.exceeded and seconds >= minimum_s:
        return None
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    if s.exceeded:
        why = _("Your server cannot start: the allowance is spent.")
    else:
        why = _(
            "Your server cannot start: what is left lasts {duration} at this profile's rate, "
            "and the hub asks for at least {minimum}."
        ).format(
            duration=budget_words.about(seconds, messages),
            minimum=budget_words.about(minimum_s, messages),
        )
    return f"{why} {describe(s, tz, messages, symbol)}"


def stop_plan(
    s: AllowanceStanding,
    countdown_s: float,
    tz: tzinfo,
    messages: Messages | None = None,
    symbol: str = "$",
) -> str:
    """Why and when the hub stops a server for an allowance, as its countdown begins."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    plan = _(
        "The allowance runs out in about {duration}; notebooks saved first, then the hub "
        "stops the server."
    ).format(duration=budget_words.about(countdown_s, messages))
    return f"{describe(s, tz, messages, symbol)} {plan}"
