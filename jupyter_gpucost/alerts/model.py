"""What an alert says: its kind, who it is about, which server and machine, amounts in
the session's currency (written by :mod:`jupyter_gpucost.core.money`) and language (the
translator's, :mod:`jupyter_gpucost.core.i18n`), and a link to the panel or the admin page.

The builders below are pure: they say *what* to send; :mod:`.dispatch` decides whether it
was already sent (one per ``(event, subject, threshold)``) and sends it off the event loop.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from ..core.i18n import _, current_language, ngettext, speaking
from ..core.money import notice, rate

AlertKind = Literal[
    "budget_threshold",
    "stopped",
    "spend_spike",
    "idle_gpus",
    "spawn_refused",
    "allowance_request",
    "test",
]
StopReason = Literal["budget", "idle", "stop_when_done", "interruption"]

#: the generic webhook's document names its schema (docs/alerts.md)
SCHEMA = "gpucost.alert/v1"
#: how long an alert's key is remembered after it was sent: longer than any period a key
#: names (a month), so a key is never forgotten within its period; an event that lasts
#: longer (a session running for weeks) is remembered anew each time it comes back
REMEMBER = timedelta(days=35)
#: the budget thresholds alerted by default, in percent
DEFAULT_THRESHOLDS_PCT: tuple[int, ...] = (50, 80, 100)


@dataclass(frozen=True)
class Context:
    """Who and where: the same for every alert of one server (or one hub user)."""

    user: str
    server: str = ""
    machine: str = ""
    #: ISO 4217 code and the symbol written before amounts, as the session shows them
    currency: str = "USD"
    symbol: str = "$"
    #: the panel (single server) or the admin page (hub)
    link: str = ""
    #: on the hub: the group whose owner is told too
    group: str = ""


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    context: Context
    #: what de-duplication counts besides the kind: a budget and its period, a stop's time
    subject: str
    title: str
    message: str
    at: datetime
    threshold_pct: int | None = None
    #: named amounts as the session writes them (``"spent": "$4.00"``)
    amounts: tuple[tuple[str, str], ...] = ()
    language: str = field(default_factory=current_language)

    @property
    def key(self) -> str:
        """The event: its kind, user, subject (a budget and its period, a stop's id) and
        threshold, never its wording. At most one alert per key is sent."""
        pct = "" if self.threshold_pct is None else str(self.threshold_pct)
        return f"{self.kind}|{self.context.user}|{self.subject}|{pct}"

    def document(self) -> dict[str, object]:
        """The generic webhook's JSON body (docs/alerts.md, schema ``gpucost.alert/v1``)."""
        c = self.context
        return {
            "schema": SCHEMA,
            "kind": self.kind,
            "at": self.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "user": c.user,
            "group": c.group or None,
            "server": c.server or None,
            "machine": c.machine or None,
            "subject": self.subject,
            "threshold_pct": self.threshold_pct,
            "currency": c.currency,
            "amounts": dict(self.amounts),
            "language": self.language,
            "title": self.title,
            "message": self.message,
            "link": c.link or None,
        }

    def body(self) -> str:
        """The text of an e-mail or a chat message: the message, where, and the link."""
        lines = [self.message]
        c = self.context
        # in the alert's language, whichever thread delivers it
        with speaking(self.language):
            if c.server:
                lines.append(_("Server: {server}").format(server=c.server))
            if c.machine:
                lines.append(_("Machine: {machine}").format(machine=c.machine))
        if c.link:
            lines.append(c.link)
        return "\n".join(lines)


def with_held_back(alert: Alert, count: int, per_hour: int) -> Alert:
    """``alert`` saying, at its end, that ``count`` alerts to the same target were held
    back before it (the target's pace: ``per_hour``)."""
    if count <= 0:
        return alert
    with speaking(alert.language):
        note = ngettext(
            "{count} more alert was held back: at most {limit} an hour go to one place.",
            "{count} more alerts were held back: at most {limit} an hour go to one place.",
            count,
        ).format(count=count, limit=per_hour)
    return dataclasses.replace(alert, message=f"{alert.message}\n{note}")


def _now() -> datetime:
    return datetime.now(UTC)


def budget_crossing(
    context: Context,
    subject: str,
    spent_micro: int,
    budget_micro: int,
    thresholds_pct: Sequence[int] = DEFAULT_THRESHOLDS_PCT,
    *,
    at: datetime | None = None,
    note: str = "",
) -> Alert | None:
    """The alert of the highest threshold the spend has reached (``None``: none reached).
    ``note``: a sentence the message ends with (a machine the action cannot stop,
    :func:`~jupyter_gpucost.core.budget_words.cannot_stop`).

    Only the highest: a budget found 5x spent at the first look is one "100 %" alert, not
    50 %, 80 % and 100 % (the lower ones, false by the time they arrive). The dispatcher
    sends each (subject, threshold) once, so a threshold passed is not alerted again, and
    one skipped over is never sent late. ``subject`` names the budget and its period (a
    new month is a new subject)."""
    if budget_micro <= 0:
        return None
    # exact: spent / budget >= pct / 100, in integers
    reached = [p for p in set(thresholds_pct) if spent_micro * 100 >= p * budget_micro]
    if not reached:
        return None
    pct = max(reached)
    spent = notice(spent_micro, context.symbol)
    amount = notice(budget_micro, context.symbol)
    title = _("{user}: {pct}% of a {amount} budget spent").format(
        user=context.user, pct=pct, amount=amount
    )
    message = _("{user} has spent {spent} of a {amount} budget ({pct}%).").format(
        user=context.user, spent=spent, amount=amount, pct=pct
    )
    if note:
        message = f"{message} {note}"
    return Alert(
        "budget_threshold",
        context,
        subject,
        title,
        message,
        at or _now(),
        threshold_pct=pct,
        amounts=(("spent", spent), ("budget", amount)),
    )


def _stop_reason(reason: StopReason) -> str:
    if reason == "budget":
        return _("the budget ran out")
    if reason == "idle":
        return _("the GPUs were idle")
    if reason == "stop_when_done":
        return _("the work was done (stop when done)")
    return _("the machine was interrupted by its provider")


def stopped(
    context: Context,
    reason: StopReason,
    summary: str,
    *,
    still_bills_per_hour: float | None,
    subject: str,
    at: datetime | None = None,
) -> Alert:
    """A stop: why, what was done (``summary``, as the record says it) and what still
    bills (``None``: nothing; a machine left running bills by the hour)."""
    why = _stop_reason(reason)
    title = _("{user}: stopped because {why}").format(user=context.user, why=why)
    amounts: tuple[tuple[str, str], ...] = ()
    if still_bills_per_hour:
        still = rate(still_bills_per_hour, context.symbol)
        tail = _("The machine still bills {rate}.").format(rate=still)
        amounts = (("still_bills_per_hour", still),)
    elif reason == "interruption":
        tail = _("The cloud took the machine back: it no longer bills by the hour.")
    else:
        tail = _("Nothing bills any more.")
    return Alert(
        "stopped",
        context,
        f"{reason}:{subject}",
        title,
        f"{summary}\n{tail}",
        at or _now(),
        amounts=amounts,
    )


def spend_spike(
    context: Context,
    day: str,
    day_micro: int,
    recent_days_micro: Sequence[int],
    factor: float,
    *,
    at: datetime | None = None,
) -> Alert | None:
    """A day's spend above ``factor`` x the median of the recent days' (at least three of
    them, and a median above zero: no history, no alert)."""
    if len(recent_days_micro) < 3 or factor <= 0:
        return None
    median = statistics.median(recent_days_micro)
    if median <= 0 or day_micro <= factor * median:
        return None
    spent = notice(day_micro, context.symbol)
    usual = notice(int(median), context.symbol)
    title = _("{user}: {spent} spent on {day}").format(user=context.user, spent=spent, day=day)
    message = _(
        "{user} has spent {spent} on {day}, more than {factor} times the usual {usual} a day."
    ).format(user=context.user, spent=spent, day=day, factor=f"{factor:g}", usual=usual)
    return Alert(
        "spend_spike",
        context,
        f"day:{day}",
        title,
        message,
        at or _now(),
        amounts=(("spent", spent), ("usual_per_day", usual)),
    )


def idle_gpus(
    context: Context, minutes: float, *, subject: str, at: datetime | None = None
) -> Alert:
    """The GPUs idle past ``minutes`` while the server runs (``subject``: the idle spell)."""
    title = _("{user}: GPUs idle for {minutes} minutes").format(
        user=context.user, minutes=f"{minutes:g}"
    )
    message = _(
        "The GPUs of {user}'s server have been idle for {minutes} minutes and still bill."
    ).format(user=context.user, minutes=f"{minutes:g}")
    return Alert("idle_gpus", context, subject, title, message, at or _now())


def spawn_refused(
    context: Context, reason: str, *, subject: str, at: datetime | None = None
) -> Alert:
    """The hub refused to start a server (``reason`` as the user was told)."""
    title = _("{user}: a server was refused").format(user=context.user)
    message = _("The hub refused to start a server for {user}: {reason}").format(
        user=context.user, reason=reason
    )
    return Alert("spawn_refused", context, subject, title, message, at or _now())


def allowance_request(
    context: Context, amount: str, reason: str, *, subject: str, at: datetime | None = None
) -> Alert:
    """A user asks for more of an allowance (``amount`` written for the reader, ``reason``
    as they wrote it); the link is where it is decided."""
    title = _("{user} asks for more GPU allowance").format(user=context.user)
    message = _("{user} asks for {amount} more: {reason}").format(
        user=context.user, amount=amount, reason=reason
    )
    return Alert(
        "allowance_request",
        context,
        subject,
        title,
        message,
        at or _now(),
        None,
        (("amount", amount),),
    )


def trial_alert(context: Context, *, at: datetime | None = None) -> Alert:
    """What "send a test" sends: never de-duplicated (its subject is its time)."""
    when = at or _now()
    title = _("Test alert from jupyter-gpucost")
    message = _("Alerts about {user}'s GPU spending will arrive here.").format(user=context.user)
    return Alert("test", context, when.isoformat(), title, message, when)
